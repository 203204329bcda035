"""``fks run``: every stage chained on a tiny model, determinism, stage-level resume, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fks.configs import load_configs
from fks.errors import FksInputError
from fks.generate.manifest import read_run_manifest
from fks.io import read_json, sha256_file
from fks.pipeline import (
    PIPELINE_KEY,
    STAGE_NAMES,
    PipelineContext,
    PipelineOptions,
    headline_figures,
    limit_facts,
    run_pipeline,
    select_stages,
)
from tiny_benchmark import tiny_benchmark_rows, write_benchmark

OPTIONS = PipelineOptions(device="cpu", jlens_prompts=8, batch_size=8)
#: keys whose values are times or durations (they differ between two identical runs)
VOLATILE = {"created_at", "finished_at", "started_at", "scored_at", "generated_at", "seconds",
            "last_started_at", "merged_at", "seconds_per_layer"}
#: per file: keys holding sha256 of input files that embed a creation time
INPUT_HASHES = {"metrics/bootstrap_intervals.json": {"fingerprint", "inputs"}}



@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny benchmark and a tiny 4-block Llama (a J-Lens window below the last block)."""
    from tiny_model import build_tiny_model

    root = tmp_path_factory.mktemp("pipeline")
    bench = write_benchmark(root / "bench", *tiny_benchmark_rows())
    return {"root": root, "bench": bench, "model": build_tiny_model(root / "model", n_layers=4)}


def _context(setup: dict[str, Path], runs: Path, configs: Any = None) -> PipelineContext:
    return PipelineContext.create(runs_dir=runs, model="tiny", model_path=str(setup["model"]),
                                  benchmark=setup["bench"], configs=configs or load_configs(),
                                  options=OPTIONS)


@pytest.fixture(scope="module")
def first_run(setup: dict[str, Path]) -> tuple[Path, Any]:
    runs = setup["root"] / "runs_a"
    return runs / "tiny", run_pipeline(_context(setup, runs))


def _rerun(setup: dict[str, Path], run_dir: Path, configs: Any = None) -> dict[str, str | None]:
    """Rerun the pipeline on ``run_dir``; returns {stage: reason} of the stages that ran."""
    result = run_pipeline(_context(setup, run_dir.parent, configs))
    assert sorted(result.ran + result.skipped) == sorted(STAGE_NAMES)
    return {o.name: o.reason for o in result.outcomes if o.action == "ran"}


def _copy(run_dir: Path, dest: Path) -> Path:
    target = dest / "tiny"
    shutil.copytree(run_dir, target)
    return target


# --------------------------------------------------------------------------- end to end
def test_every_stage_runs_and_records_checksums(setup, first_run):
    from fks.data.load import load_benchmark

    run_dir, result = first_run
    assert result.ran == list(STAGE_NAMES)
    assert {o.reason for o in result.outcomes} == {"new"}
    assert result.report == run_dir / "report.html"
    records = read_run_manifest(run_dir)[PIPELINE_KEY]["stages"]
    assert set(records) == set(STAGE_NAMES)
    for name, rec in records.items():
        assert rec["status"] == "complete" and rec["outputs"], name
        for rel, sha in rec["outputs"].items():
            assert sha256_file(run_dir / rel) == sha, (name, rel)
    assert "hidden/layer_003.npy" in records["extract"]["outputs"]
    assert records["score"]["inputs"].keys() == {"generate"}
    for name in ("behavioral_per_fact.jsonl", "iss_per_fact.jsonl", "kts_model_summary.json",
                 "calibration_summary.json", "bootstrap_intervals.json"):
        assert (run_dir / "metrics" / name).is_file(), name
    head = headline_figures(run_dir)
    main = set(load_configs().metrics.main_families)
    families: dict[str, set[str]] = {}
    for q in load_benchmark(setup["bench"]).queries:
        families.setdefault(q.fact_id, set()).add(q.condition_family)
    complete = sum(main <= fams for fams in families.values())
    assert head["mode"] == "complete_family" and head["n_facts"] == complete
    # the tiny run has fewer main queries than whitened dimensions: its whitened ISS is the
    # design's and is withheld (issue 27); the unwhitened ISS keeps its interval
    summary = json.loads((run_dir / "metrics" / "iss_model_summary.json").read_text())
    assert summary["iss"] is None and "design-determined" in summary["iss_undefined_reason"]
    assert {"anchor_accuracy", "iss_unwhitened"} <= set(head["figures"])
    assert "iss" not in head["figures"]
    # BCS is a headline figure exactly when some fact has scorable answers (spec §6.3): the
    # tiny random model writes gibberish, which the judge reads as UNPARSEABLE
    beh = read_json(run_dir / "metrics" / "behavioral_model_summary.json")
    block = beh["readings"][beh["primary_reading"]]["complete_family"]["fixed"]["all"]
    assert ("bcs" in head["figures"]) == (block["n_scorable"] > 0)
    assert block["n_scorable"] + block["n_unscorable"] == block["n_facts"]


def _normalise(obj: Any, run_dir: Path, drop: frozenset[str] = frozenset()) -> Any:
    """Drop time keys and replace the run directory in strings (two runs differ only there)."""
    if isinstance(obj, dict):
        return {k: _normalise(v, run_dir) for k, v in obj.items()
                if k not in VOLATILE and k not in drop}
    if isinstance(obj, list):
        return [_normalise(v, run_dir) for v in obj]
    if isinstance(obj, str):
        return obj.replace(str(run_dir), "RUN")
    return obj


def _metric_files(run_dir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in sorted((run_dir / "metrics").rglob("*")):
        rel = path.relative_to(run_dir).as_posix()
        if path.suffix == ".json":
            out[rel] = _normalise(json.loads(path.read_text()), run_dir,
                                  frozenset(INPUT_HASHES.get(rel, ())))
        elif path.suffix == ".jsonl":
            out[rel] = [_normalise(json.loads(line), run_dir)
                        for line in path.read_text().splitlines()]
        elif path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as arrays:
                out[rel] = {k: arrays[k] for k in arrays.files}
        elif path.suffix == ".npy":
            out[rel] = {"array": np.load(path, allow_pickle=False)}
    return out


def _assert_same_metrics(run_a: Path, run_b: Path) -> None:
    a, b = _metric_files(run_a), _metric_files(run_b)
    assert a.keys() == b.keys() and len(a) > 10
    for name in a:
        if name.endswith((".npy", ".npz")):
            assert a[name].keys() == b[name].keys(), name
            for key, x in a[name].items():  # bit-identical, NaN where NaN
                nan = x.dtype.kind in "fc"
                assert np.array_equal(x, b[name][key], equal_nan=nan), (name, key)
        else:
            assert a[name] == b[name], name


def test_two_runs_give_identical_metrics(setup, first_run):
    run_a, _ = first_run
    run_b = setup["root"] / "runs_b" / "tiny"
    run_pipeline(_context(setup, run_b.parent))
    _assert_same_metrics(run_a, run_b)
    for name in ("generations.jsonl", "judged.jsonl", "hidden/layer_002.npy",
                 "jlens/layer_002.npy"):
        assert (run_a / name).read_bytes() == (run_b / name).read_bytes(), name


# ------------------------------------------------------------------------------- resume
def test_rerun_skips_every_stage(setup, first_run, tmp_path):
    run_dir = _copy(first_run[0], tmp_path)
    assert _rerun(setup, run_dir) == {}


def test_corrupt_output_reruns_its_stage_and_the_stages_reading_it(setup, first_run, tmp_path):
    run_dir = _copy(first_run[0], tmp_path)
    summary = run_dir / "metrics" / "behavioral_model_summary.json"
    summary.write_text(summary.read_text().replace('"bcs"', '"BCS"', 1))
    ran = _rerun(setup, run_dir)
    assert ran == {"metrics_behavior": "outputs_changed", "metrics_internal": "inputs_changed",
                   "bootstrap": "inputs_changed", "report": "inputs_changed"}
    assert json.loads(summary.read_text())["primary_reading"]  # rewritten whole


def test_deleted_hidden_layer_reruns_extraction_and_what_reads_it(setup, first_run, tmp_path):
    run_dir = _copy(first_run[0], tmp_path)
    layer = run_dir / "hidden" / "layer_002.npy"
    before = layer.read_bytes()
    layer.unlink()
    ran = _rerun(setup, run_dir)
    assert ran["extract"] == "outputs_changed"
    assert set(ran) <= {"extract", "metrics_internal", "bootstrap", "report"}
    assert layer.read_bytes() == before  # re-extracted identically
    assert _rerun(setup, run_dir) == {}


def test_restored_output_does_not_rerun_readers(setup, first_run, tmp_path):
    """A corrupt judged.jsonl is judged again; identical bytes come back, so readers stay."""
    run_dir = _copy(first_run[0], tmp_path)
    judged = run_dir / "judged.jsonl"
    before = judged.read_bytes()
    judged.write_bytes(before.replace(b'"judge":"alias"', b'"judge":"other"', 1))
    assert judged.read_bytes() != before
    assert _rerun(setup, run_dir) == {"judge": "outputs_changed"}
    assert judged.read_bytes() == before


def test_changed_metric_settings_rerun_metric_stages_only(setup, first_run, tmp_path):
    run_dir = _copy(first_run[0], tmp_path)
    configs = load_configs()
    metrics = configs.metrics.model_copy(update={"tau_b": 0.75})
    ran = _rerun(setup, run_dir, configs.model_copy(update={"metrics": metrics}))
    assert ran["metrics_behavior"] == "params_changed"
    assert not {"generate", "score", "judge", "extract", "jlens"} & set(ran)


def test_failed_stage_is_recorded_and_resumed(setup, first_run, tmp_path, monkeypatch):
    import fks.report.build as build

    run_dir = _copy(first_run[0], tmp_path)
    (run_dir / "report.html").unlink()

    def boom(*args: Any, **kwargs: Any) -> Path:
        raise RuntimeError("disk full")

    monkeypatch.setattr(build, "build_report", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        run_pipeline(_context(setup, run_dir.parent))
    record = read_run_manifest(run_dir)[PIPELINE_KEY]["stages"]["report"]
    assert record["status"] == "failed" and "disk full" in record["error"]
    monkeypatch.undo()
    assert _rerun(setup, run_dir) == {"report": "resume"}
    assert (run_dir / "report.html").is_file()


def test_changed_generations_are_kept_aside_and_regenerated(setup, first_run, tmp_path):
    run_dir = _copy(first_run[0], tmp_path)
    gen = run_dir / "generations.jsonl"
    before = gen.read_bytes()
    gen.write_bytes(before[: len(before) // 2])  # a lost tail
    assert _rerun(setup, run_dir) == {"generate": "outputs_changed"}
    assert gen.read_bytes() == before
    assert (run_dir / "generations.jsonl.stale").read_bytes() == before[: len(before) // 2]


# ------------------------------------------------------------------------ selection/input
def test_only_selected_stages_run(setup, tmp_path):
    result = run_pipeline(_context(setup, tmp_path), stages=["score", "generate"])
    assert result.ran == ["generate", "score"] and result.report is None
    assert not (tmp_path / "tiny" / "judged.jsonl").exists()


def test_select_stages_rejects_unknown_names_and_drops_hidden_stages_for_servers():
    with pytest.raises(FksInputError, match="unknown stage 'genrate'"):
        select_stages(["genrate"], backend="hf")
    names = [s.name for s in select_stages(None, backend="openai")]
    assert "extract" not in names and "generate" in names and "report" in names


def test_limit_facts_covers_relations_and_is_reproducible(setup, tmp_path):
    from fks.data.load import load_benchmark

    bench = load_benchmark(setup["bench"])
    out = limit_facts(bench, 2, tmp_path / "a")
    sub = load_benchmark(out)
    assert {f.relation.relation_id for f in sub.facts} == {"capital", "manufacturer"}
    assert {q.fact_id for q in sub.queries} == {f.fact_id for f in sub.facts}
    again = load_benchmark(limit_facts(bench, 2, tmp_path / "b"))
    assert again.checksum() == sub.checksum()
    with pytest.raises(FksInputError):
        limit_facts(bench, 0, tmp_path / "c")


# -------------------------------------------------------------------------------- CLI
def _main(argv: list[str]) -> int:
    from fks.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    return int(exc.value.code)


def test_cli_runs_on_the_tiny_model_fixture(tiny_model_dir, tiny_benchmark_dir, tmp_path, capsys):
    # the 2-block fixture's only window layer is the last one, where J = I: no J-Lens, raw ISS
    stages = ",".join(n for n in STAGE_NAMES if n != "jlens")
    code = _main(["run", "--model", "tiny", "--model-path", str(tiny_model_dir),
                  "--benchmark", str(tiny_benchmark_dir), "--out", str(tmp_path),
                  "--device", "cpu", "--transport", "raw", "--no-kts-bootstrap",
                  "--stages", stages])
    assert code == 0
    assert f"report: {tmp_path / 'tiny' / 'report.html'}" in capsys.readouterr().out
    assert (tmp_path / "tiny" / "metrics" / "iss_per_fact.jsonl").is_file()


@pytest.mark.parametrize("extra", [
    ["--stages", "generate,nope"],
    ["--model", "../escape"],
    ["--backend", "ollama"],
    ["--limit", "0"],
])
def test_cli_bad_input_exits_2(extra, tiny_benchmark_dir, tmp_path):
    argv = ["run", "--model", "tiny", "--model-path", str(tmp_path / "no_model"),
            "--benchmark", str(tiny_benchmark_dir), "--out", str(tmp_path)]
    if extra[0] == "--model":
        argv[2] = extra[1]
    else:
        argv += extra
    assert _main(argv) == 2


def test_cli_missing_benchmark_exits_2(tmp_path):
    assert _main(["run", "--model", "tiny", "--model-path", str(tmp_path),
                  "--benchmark", str(tmp_path / "absent"), "--out", str(tmp_path)]) == 2


# ------------------------------------------------------------- the pool cache (issue 29)
def test_a_second_limit_run_takes_the_pool_from_the_cache_and_reads_the_same(
        setup, tmp_path, monkeypatch):
    """Two `--limit` runs of one model: the second links the first's pool in from the cache
    (no forward pass for it) and every internal metric file is the same as a run that
    extracts its own pool with the cache off."""
    from fks.hidden import extract as extract_mod

    monkeypatch.setenv("FKS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FKS_REFERENCE_CACHE", "1")

    def run(name: str) -> Path:
        ctx = PipelineContext.create(runs_dir=tmp_path / name, model="tiny",
                                     model_path=str(setup["model"]), benchmark=setup["bench"],
                                     configs=load_configs(), options=OPTIONS, limit=2)
        run_pipeline(ctx)
        return tmp_path / name / "tiny"

    first = run("a")
    rows: list[int] = []
    real = extract_mod.forward_query_end

    def counted(model, capture, ids, mask):
        rows.append(len(ids))
        return real(model, capture, ids, mask)

    monkeypatch.setattr(extract_mod, "forward_query_end", counted)
    second = run("b")
    # the run's own rows and the §18.2 second pass, one row each; none for the pool
    own = read_json(second / "hidden" / "meta.json")["n_rows"]
    assert own <= sum(rows) < own + 64
    assert read_json(second / "reference" / "hidden" / "meta.json")["n_rows"] > own
    stage = read_run_manifest(second / "reference")["stages"]["extract"]
    assert stage["from_cache"].startswith(str(tmp_path / "cache" / "reference"))
    monkeypatch.setenv("FKS_REFERENCE_CACHE", "0")
    monkeypatch.setattr(extract_mod, "forward_query_end", real)
    fresh = run("c")
    assert "from_cache" not in read_run_manifest(fresh / "reference")["stages"]["extract"]
    _assert_same_metrics(fresh, first)
    _assert_same_metrics(fresh, second)
