"""Packaged configs, ``--config`` overrides (deep merge) and their error messages."""

from __future__ import annotations

import pytest
import yaml

from fks.cli import main
from fks.configs import FAMILIES, load_configs
from fks.errors import FksInputError


def _write(path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")


def test_defaults_load_and_match_the_published_protocol():
    cfg = load_configs()
    gen = cfg.models.generation
    assert (gen.do_sample, gen.num_beams, gen.max_new_tokens, gen.max_prompt_len) == (
        False, 1, 24, 192)
    assert gen.use_chat_template is False and gen.seed == 20260101
    assert set(cfg.eval_conditions.families) == set(FAMILIES)
    assert cfg.eval_conditions.main_forward() == [
        "anchor", "paraphrase", "format", "context", "multilingual"]
    flags = {f: s.flags() for f, s in cfg.eval_conditions.families.items()}
    assert sum(f["use_for_reverse_analysis"] for f in flags.values()) == 1
    assert not any(flags["reverse_illposed"].values())
    assert cfg.eval_conditions.expected_counts.n_facts == 2592
    assert sum(cfg.eval_conditions.expected_counts.queries.values()) == 44418
    assert [d.id for d in cfg.eval_conditions.accepted_deviations] == ["D1"]
    assert cfg.relations.by_source()["P36"] == "capital"
    assert cfg.metrics.tau_b == 0.8 and cfg.metrics.layer_window_min_frac == 0.4
    assert cfg.sources["metrics"] == ["fks:configs/metrics.yaml"]


def test_file_override_deep_merges(tmp_path):
    over = tmp_path / "metrics.yaml"
    _write(over, {"whitening": {"pca_max_dim": 64}, "main_families": ["paraphrase", "format"]})
    cfg = load_configs([over])
    assert cfg.metrics.whitening.pca_max_dim == 64
    assert cfg.metrics.whitening.method == "pca"  # sibling key kept from the default
    assert cfg.metrics.whitening.shrinkage_lambda == 0.1
    assert cfg.metrics.main_families == ["paraphrase", "format"]  # a list replaces the list
    assert cfg.metrics.tau_b == 0.8
    assert cfg.sources["metrics"] == ["fks:configs/metrics.yaml", str(over)]
    assert cfg.models == load_configs().models


def test_folder_override_and_later_wins(tmp_path):
    folder = tmp_path / "cfg"
    _write(folder / "models.yaml", {"generation": {"max_new_tokens": 8}})
    _write(folder / "relations.yaml",
           {"relations": {"capital": {"anchor": "Capital of {subject}?"}}})
    later = tmp_path / "later" / "models.yaml"
    _write(later, {"generation": {"max_new_tokens": 16}})
    cfg = load_configs([folder, later])
    assert cfg.models.generation.max_new_tokens == 16
    assert cfg.models.generation.max_prompt_len == 192
    capital = cfg.relations.relations["capital"]
    assert capital.anchor == "Capital of {subject}?"
    assert capital.source_relations == ["P36"]  # deep merge inside one relation
    assert cfg.relations.relations.keys() == load_configs().relations.relations.keys()
    assert cfg.sources["models"][1:] == [str(folder / "models.yaml"), str(later)]


def test_empty_override_file_changes_nothing(tmp_path):
    over = tmp_path / "metrics.yaml"
    _write(over, "# nothing here\n")
    assert load_configs([over]).metrics == load_configs().metrics


@pytest.mark.parametrize("name", ["metric.yaml", "settings.yaml"])
def test_misnamed_file_is_rejected(tmp_path, name):
    over = tmp_path / name
    _write(over, {"tau_b": 0.7})
    with pytest.raises(FksInputError) as exc:
        load_configs([over])
    assert exc.value.path == str(over) and name in exc.value.message


@pytest.mark.parametrize("name,data,field", [
    ("metrics.yaml", {"tau_b": 2.0}, "tau_b"),
    ("metrics.yaml", {"whitening": {"method": "svd"}}, "whitening.method"),
    ("metrics.yaml", {"main_families": ["anchor", "jokes"]}, "main_families"),
    ("metrics.yaml", {"tua_b": 0.7}, "tua_b"),
    ("models.yaml", {"generation": {"max_new_tokens": 0}}, "generation.max_new_tokens"),
    ("relations.yaml", {"relations": {"capital": {"anchor": "no placeholder"}}},
     "relations.capital"),
    ("eval_conditions.yaml", {"families": {"reverse": {"role": "sideways"}}},
     "families.reverse.role"),
    ("eval_conditions.yaml", {"families": {"jokes": {"role": "main", "target_slot": "object",
                                                     "is_well_posed": True,
                                                     "is_assisted": False}}}, "families"),
])
def test_bad_value_names_file_and_field(tmp_path, name, data, field):
    over = tmp_path / name
    _write(over, data)
    with pytest.raises(FksInputError) as exc:
        load_configs([over])
    assert exc.value.path == str(over)
    assert exc.value.field == field
    assert str(exc.value).startswith(f"{over}: field '{field}': ")


def test_error_blames_the_file_that_set_the_bad_value(tmp_path):
    bad = tmp_path / "a" / "metrics.yaml"
    good = tmp_path / "b" / "metrics.yaml"
    _write(bad, {"tau_b": 2.0})
    _write(good, {"kts_geo_min_facts": 6})
    with pytest.raises(FksInputError) as exc:
        load_configs([bad, good])
    assert (exc.value.path, exc.value.field) == (str(bad), "tau_b")


@pytest.mark.parametrize("content,fragment", [
    ("tau_b: [unclosed\n", "invalid YAML"),
    ("- just\n- a list\n", "mapping"),
    (b"tau_b: \xff\xfe\n", "UTF-8"),
])
def test_unreadable_override_file(tmp_path, content, fragment):
    over = tmp_path / "metrics.yaml"
    if isinstance(content, bytes):
        over.write_bytes(content)
    else:
        _write(over, content)
    with pytest.raises(FksInputError) as exc:
        load_configs([over])
    assert exc.value.path == str(over) and fragment in exc.value.message


def test_missing_path_and_empty_folder(tmp_path):
    with pytest.raises(FksInputError, match="not found"):
        load_configs([tmp_path / "absent.yaml"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(FksInputError, match="no config file"):
        load_configs([tmp_path / "empty"])


def test_bad_config_through_cli_exits_2(tmp_path, tiny_benchmark_dir, capsys):
    over = tmp_path / "eval_conditions.yaml"
    _write(over, {"families": {"anchor": {"is_assisted": "perhaps"}}})
    with pytest.raises(SystemExit) as exc:
        main(["--config", str(over), "data", "validate", str(tiny_benchmark_dir)])
    assert exc.value.code == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert len(err) == 1
    assert str(over) in err[0] and "field 'families.anchor.is_assisted'" in err[0]


def test_good_config_through_cli_is_used(tmp_path, tiny_benchmark_dir):
    # flipping a registry flag must make the (otherwise valid) benchmark fail the flags gate
    over = tmp_path / "eval_conditions.yaml"
    _write(over, {"families": {"format": {"is_assisted": True}}})
    with pytest.raises(SystemExit) as exc:
        main(["--config", str(over), "data", "validate", str(tiny_benchmark_dir)])
    assert exc.value.code == 2
    import json

    report = json.loads((tiny_benchmark_dir / "validation_report.json").read_text())
    assert report["gates"]["flags_match_registry"]["n_errors"] == 4  # the four format queries
    with pytest.raises(SystemExit) as exc:
        main(["data", "validate", str(tiny_benchmark_dir)])
    assert exc.value.code == 0  # the override does not leak into the next invocation
