"""One input chain, one benchmark and one model per run (issue 28, fks.provenance).

A finished tiny run is copied for each case, one of its files is changed the way a broken
pipeline or a hurried user changes it (halved, replaced by another run's, made from an older
upstream file, another benchmark, another model's weights), and the stage that reads it must
end in exit 2 naming the file -- never exit 0 with the old or a wrong figure.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fks.cli import main
from fks.errors import FksInputError
from fks.generate.manifest import MANIFEST_NAME
from fks.provenance import ProtocolCheck, check_inputs, producer_of, record_files
from provenance_util import drop_provenance

STAGES = "generate,score,judge,metrics_behavior,extract,metrics_internal,calibrate"


def _cli(argv: list[str]) -> int:
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


@pytest.fixture(scope="module")
def finished(tmp_path_factory, tiny_model_dir):
    """``(benchmark, runs folder)`` of a tiny run through every stage but J-Lens and report."""
    from tiny_benchmark import tiny_benchmark_rows, write_benchmark

    root = tmp_path_factory.mktemp("chain")
    bench = write_benchmark(root / "bench", *tiny_benchmark_rows())
    assert _cli(["run", "--model", "tiny", "--model-path", str(tiny_model_dir), "--benchmark",
                 str(bench), "--out", str(root / "runs"), "--device", "cpu", "--transport",
                 "raw", "--no-kts-bootstrap", "--stages", STAGES]) == 0
    return bench, root / "runs"


@pytest.fixture
def run(finished, tmp_path):
    """A private copy of the finished run: ``(benchmark, runs folder, run dir)``."""
    bench, runs = finished
    shutil.copytree(runs, tmp_path / "runs")
    return bench, tmp_path / "runs", tmp_path / "runs" / "tiny"


@pytest.fixture(scope="module")
def other_model_dir(tmp_path_factory):
    """A second tiny model: same shapes and tokenizer, other weights."""
    from tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("other_llama"), seed=7)


def _halve(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[: len(lines) // 2]), encoding="utf-8")


def _manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / MANIFEST_NAME).read_text(encoding="utf-8"))


def _set_manifest(run_dir: Path, doc: dict) -> None:
    (run_dir / MANIFEST_NAME).write_text(json.dumps(doc), encoding="utf-8")


def _err(capsys) -> str:
    return capsys.readouterr().err


# ------------------------------------------------------------------------ the chain itself
def test_every_stage_records_its_inputs_and_outputs(run):
    _, _, run_dir = run
    stages = _manifest(run_dir)["stages"]
    assert stages["score"]["files"]["inputs"] == {
        "generations.jsonl": stages["generate"]["files"]["outputs"]["generations.jsonl"]}
    assert set(stages["judge"]["files"]["inputs"]) == {"scored.jsonl"}
    assert set(stages["metrics_behavior"]["files"]["inputs"]) == {"judged.jsonl"}
    assert "hidden/meta.json" in stages["extract"]["files"]["outputs"]
    assert "hidden/meta.json" in stages["metrics_internal"]["files"]["inputs"]
    assert {"generations.jsonl", "judged.jsonl", "scored.jsonl"} <= set(
        stages["calibrate"]["files"]["inputs"])


def test_fks_run_stages_refuses_when_a_left_out_upstream_file_changed(run, tiny_model_dir,
                                                                      capsys):
    bench, runs, run_dir = run
    _halve(run_dir / "generations.jsonl")
    before = (run_dir / "metrics" / "behavioral_model_summary.json").read_bytes()
    code = _cli(["run", "--model", "tiny", "--model-path", str(tiny_model_dir), "--benchmark",
                 str(bench), "--out", str(runs), "--device", "cpu", "--stages",
                 "score,judge,metrics_behavior"])
    err = _err(capsys)
    assert code == 2, err
    assert "generations.jsonl" in err and "generate" in err
    assert (run_dir / "metrics" / "behavioral_model_summary.json").read_bytes() == before


def test_standalone_score_refuses_a_truncated_generations_file(run, capsys):
    bench, _, run_dir = run
    _halve(run_dir / "generations.jsonl")
    assert _cli(["score", str(run_dir), "--benchmark", str(bench)]) == 2
    err = _err(capsys)
    assert "generations.jsonl" in err and "changed after `generate` wrote it" in err


def test_calibrate_refuses_a_judged_file_made_from_an_older_scored_file(run, capsys):
    _, _, run_dir = run
    scored = run_dir / "scored.jsonl"
    rows = [json.loads(x) for x in scored.read_text(encoding="utf-8").splitlines()]
    rows[0]["label"] = "unparseable" if rows[0]["label"] != "unparseable" else "incorrect"
    scored.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    # as if `fks score` had rerun and made this file (its record is current) ...
    record_files(run_dir, "score", _manifest(run_dir)["stages"]["score"]["files"]["inputs"])
    # ... while judged.jsonl is still the one made from the earlier scored.jsonl
    assert _cli(["calibrate", str(run_dir)]) == 2
    err = _err(capsys)
    assert "judged.jsonl is stale" in err and "scored.jsonl" in err


def test_judge_refuses_a_benchmark_other_than_the_runs(run, tmp_path, capsys):
    bench, _, run_dir = run
    other = tmp_path / "other_bench"
    shutil.copytree(bench, other)
    facts = next(other.glob("benchmark_facts_*.jsonl"))
    rows = [json.loads(x) for x in facts.read_text(encoding="utf-8").splitlines()]
    rows[0]["object"]["canonical"] = "Cairo"
    facts.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    before = (run_dir / "judged.jsonl").read_bytes()
    assert _cli(["judge", str(run_dir), "--benchmark", str(other)]) == 2
    err = _err(capsys)
    assert "benchmark.checksum" in err and "other_bench" in err
    assert (run_dir / "judged.jsonl").read_bytes() == before


@pytest.mark.parametrize("damage", ["delete_row", "foreign_file"])
def test_metrics_refuses_a_judged_file_the_run_did_not_make(run, tmp_path, damage, capsys):
    _, _, run_dir = run
    judged = run_dir / "judged.jsonl"
    lines = judged.read_text(encoding="utf-8").splitlines(keepends=True)
    if damage == "delete_row":
        anchor = next(i for i, x in enumerate(lines)
                      if json.loads(x)["condition_family"] == "anchor")
        del lines[anchor]
    else:  # another run's judged file: same shape, other answers
        lines = [json.dumps({**json.loads(x), "correctness": "INCORRECT"}) + "\n"
                 for x in lines]
    judged.write_text("".join(lines), encoding="utf-8")
    assert _cli(["metrics", str(run_dir), "--part", "behavior"]) == 2
    err = _err(capsys)
    assert "judged.jsonl" in err and "changed after `judge` wrote it" in err


def test_metrics_refuses_an_unknown_query_even_without_provenance(run, capsys):
    _, _, run_dir = run
    drop_provenance(run_dir)
    judged = run_dir / "judged.jsonl"
    lines = judged.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = json.dumps({**json.loads(lines[2]), "query_id": "query_99999999"}) + "\n"
    judged.write_text("".join(lines), encoding="utf-8")
    assert _cli(["metrics", str(run_dir), "--part", "behavior"]) == 2
    err = _err(capsys)
    assert "judged.jsonl:3" in err and "query_id" in err and "query_99999999" in err


def test_metrics_refuses_a_row_without_the_main_forward_flag(run, capsys):
    _, _, run_dir = run
    drop_provenance(run_dir)
    judged = run_dir / "judged.jsonl"
    lines = judged.read_text(encoding="utf-8").splitlines(keepends=True)
    row = json.loads(lines[0])
    del row["use_for_main_forward"]
    lines[0] = json.dumps(row) + "\n"
    judged.write_text("".join(lines), encoding="utf-8")
    assert _cli(["metrics", str(run_dir), "--part", "behavior"]) == 2
    err = _err(capsys)
    assert "judged.jsonl:1" in err and "use_for_main_forward" in err


def test_score_refuses_mixed_prompt_versions(run, capsys):
    bench, _, run_dir = run
    drop_provenance(run_dir)
    gen = run_dir / "generations.jsonl"
    lines = gen.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[3] = json.dumps({**json.loads(lines[3]), "prompt_version": "v0-old"}) + "\n"
    gen.write_text("".join(lines), encoding="utf-8")
    assert _cli(["score", str(run_dir), "--benchmark", str(bench)]) == 2
    err = _err(capsys)
    assert "generations.jsonl:4" in err and "prompt_version" in err


# ----------------------------------------------------------------------- one model per run
def test_fks_run_extract_refuses_another_models_weights(run, other_model_dir, capsys):
    bench, runs, run_dir = run
    before = (run_dir / "hidden" / "meta.json").read_bytes()
    code = _cli(["run", "--model", "tiny", "--model-path", str(other_model_dir), "--benchmark",
                 str(bench), "--out", str(runs), "--device", "cpu", "--transport", "raw",
                 "--stages", "extract,metrics_internal"])
    err = _err(capsys)
    assert code == 2, err
    assert "weights_sha256" in err and "one model per run" in err
    assert (run_dir / "hidden" / "meta.json").read_bytes() == before


def test_jlens_refuses_another_models_weights(run, other_model_dir, capsys):
    bench, _, run_dir = run
    code = _cli(["jlens", str(run_dir), "--benchmark", str(bench), "--model-path",
                 str(other_model_dir), "--device", "cpu", "--n-prompts", "4"])
    assert code == 2
    assert "one model per run" in _err(capsys)
    assert not (run_dir / "jlens").exists()


def test_an_imported_run_is_bound_to_the_first_hidden_stages_weights(tmp_path, tiny_model_dir):
    from fks.provenance import bind_weights, check_weights

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    _set_manifest(run_dir, {"stages": {}, "weights_sha256": None})
    bind_weights(run_dir, "a" * 64, stage="extract")
    check_weights(run_dir, "a" * 64, stage="jlens")
    with pytest.raises(FksInputError, match="one model per run"):
        check_weights(run_dir, "b" * 64, stage="jlens")


# ---------------------------------------------------------------------------- unit level
def test_producer_of_maps_files_to_stages():
    assert producer_of("generations.jsonl") == "generate"
    assert producer_of("hidden/layer_003.npy") == "extract"
    assert producer_of("reference/hidden/meta.json") == "extract"
    assert producer_of("metrics/iss_per_fact.jsonl") == "metrics_internal"
    assert producer_of("metrics/hidden_family_centroids/layer_001.npy") == "metrics_internal"
    assert producer_of("notes.txt") is None


def test_check_inputs_names_both_files_when_an_upstream_file_moved_on(tmp_path):
    (tmp_path / "generations.jsonl").write_text("a\n")
    record_files(tmp_path, "generate", {}, ["generations.jsonl"])
    (tmp_path / "scored.jsonl").write_text("b\n")
    inputs = check_inputs(tmp_path, "score", ["generations.jsonl"])
    record_files(tmp_path, "score", inputs, ["scored.jsonl"])
    assert check_inputs(tmp_path, "judge", ["scored.jsonl"])  # all current
    (tmp_path / "generations.jsonl").write_text("a\nc\n")
    record_files(tmp_path, "generate", {}, ["generations.jsonl"])  # generate reran
    with pytest.raises(FksInputError, match=r"scored.jsonl is stale.*generations.jsonl"):
        check_inputs(tmp_path, "judge", ["scored.jsonl"])


def test_protocol_check_refuses_a_second_decoding_protocol(tmp_path):
    from types import SimpleNamespace as NS

    check = ProtocolCheck(tmp_path / "g.jsonl")
    cfg = {"max_new_tokens": 24, "do_sample": False, "dtype_used": "float32"}
    check(1, NS(prompt_version="v1", generation_config=cfg))
    check(2, NS(prompt_version="v1", generation_config={**cfg, "dtype_used": "bfloat16"}))
    with pytest.raises(FksInputError, match="max_new_tokens") as exc:
        check(3, NS(prompt_version="v1", generation_config={**cfg, "max_new_tokens": 32}))
    assert exc.value.line == 3
    assert exc.value.field == "generation_config.max_new_tokens"
