"""``RUN/results.json`` (:mod:`fks.report.results`): written by the report, validated by its
pydantic model, null only with a reason; ``--json`` of ``fks run`` and ``fks demo``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError
from report_runs import XSS, synthetic_run, write_json

from fks.cli import main
from fks.configs import load_configs
from fks.io import read_json
from fks.report.build import build_report
from fks.report.results import (
    Figure,
    Figures,
    Results,
    RunDetails,
    build_results,
    results_path,
)

README = Path(__file__).resolve().parents[2] / "README.md"


def fks(*args) -> int:
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return int(exc.value.code or 0)


@pytest.fixture
def configs(tmp_path):
    d = tmp_path / "cfg"
    d.mkdir()
    (d / "metrics.yaml").write_text("bootstrap: {n_resamples: 60}\n")
    return load_configs([d / "metrics.yaml"])


def _manifest(run: Path, **extra) -> None:
    doc = read_json(run / "evaluation_manifest.json")
    doc.update(extra)
    write_json(run / "evaluation_manifest.json", doc)


def test_report_writes_results_json_with_figures_intervals_and_sanity(tmp_path, configs):
    run = synthetic_run(tmp_path)
    build_report([run], configs=configs)
    res = Results.model_validate_json(results_path(run).read_text())
    assert res.schema_version == 1 and res.run.model == "model-a"
    assert res.run.benchmark_checksum == "bench-1"
    # the figures are the bootstrap's, in its first coverage mode (KTS in full_set)
    doc = read_json(run / "metrics" / "bootstrap_intervals.json")
    bcs = doc["coverage_modes"]["complete_family"]["subsets"]["all"]["metrics"]["bcs"]
    assert (res.figures.bcs.point, res.figures.bcs.low, res.figures.bcs.high) == (
        bcs["point"], bcs["low"], bcs["high"])
    assert res.figures.bcs.low <= res.figures.bcs.point <= res.figures.bcs.high
    assert res.figures.kts.coverage_mode == "full_set" and res.figures.kts.point is not None
    assert res.bootstrap.n_resamples == 60 and res.bootstrap.coverage_mode == "complete_family"
    # sanity: the fixture's raw_vs_transported fails
    assert res.sanity.status == "fail" and res.sanity.failed == ["raw_vs_transported"]
    assert res.sanity.checks["query_shuffle"].status == "pass"
    # calibration: figures over the answered rows with their intervals; a missing source says why
    seq = res.calibration.readings["anchor"]["sequence_probability"]
    assert seq.figures["ece_equal_width"].point == 0.05
    assert (seq.figures["ece_equal_width"].low, seq.figures["ece_equal_width"].high) == (
        0.03, 0.08)
    assert seq.figures["brier"].low is None and "no interval" in seq.figures["brier"].reason
    verb = res.calibration.readings["anchor"]["verbalized"]
    assert verb.figures is None and "verbalized.jsonl not found" in verb.reason
    # nothing about the weights in this hand-made manifest: null, with the reason
    assert res.run.weights_sha256 is None and "weights_sha256" in res.run.missing


def test_missing_stages_are_null_with_a_reason(tmp_path, configs):
    run = synthetic_run(tmp_path, internal=False, extras=False)
    _manifest(run, backend={"backend": "openai", "weights_sha256": None, "dtype": None})
    build_report([run], configs=configs)
    res = Results.model_validate_json(results_path(run).read_text())
    for name in ("iss", "iss_unwhitened", "kts", "kts_id", "kts_unwhitened"):
        fig = getattr(res.figures, name)
        assert fig.point is None and "openai backend" in fig.reason, name
    assert res.sanity.status == "not_run" and "openai" in res.sanity.reason
    assert res.calibration.status == "not_run" and "calibration_summary.json" in \
        res.calibration.reason
    assert "openai backend" in res.run.missing["weights_sha256"]
    assert "openai backend" in res.run.missing["dtype"]
    assert res.run.missing["judge"] == "the judge stage has not run"
    assert res.figures.bcs.point is not None  # the behavioural figures are there


def test_withheld_figures_stay_null_even_when_the_bootstrap_has_them(tmp_path, configs):
    run = synthetic_run(tmp_path)
    why = "design-determined whitening at window layer(s) [2, 3]"
    summary = read_json(run / "metrics" / "kts_model_summary.json")
    write_json(run / "metrics" / "kts_model_summary.json", summary | {
        "kts": None, "kts_undefined_reason": why, "unwhitened": {"kts": 0.42, "kts_id": None}})
    build_report([run], configs=configs)
    assert "kts" in read_json(run / "metrics" / "bootstrap_intervals.json")[
        "coverage_modes"]["full_set"]["subsets"]["all"]["metrics"]  # from the centroids
    res = build_results(run)
    assert res.figures.kts.point is None and why in res.figures.kts.reason
    assert res.figures.kts_unwhitened.point == 0.42 and "no interval" in \
        res.figures.kts_unwhitened.reason
    assert res.figures.kts_id_unwhitened.point is None
    assert res.figures.iss.point is not None  # ISS was not withheld


def test_without_bootstrap_every_figure_says_why(tmp_path):
    run = synthetic_run(tmp_path, internal=False, extras=False)
    res = build_results(run)
    assert res.bootstrap.status == "not_run"
    assert all(f.point is None and f.reason for _, f in res.figures)
    assert "bootstrap" in res.figures.bcs.reason


def test_a_null_without_a_reason_is_refused():
    with pytest.raises(ValidationError, match="needs a reason"):
        Figure(point=0.5, low=None, high=None, source="x")
    with pytest.raises(ValidationError, match="weights_sha256"):
        RunDetails(model="m", weights_sha256=None, missing={})
    with pytest.raises(ValidationError):  # extra fields are refused
        Results.model_validate({"schema_version": 1, "surprise": 1})


def test_the_report_shows_the_run_details_in_one_escaped_table(tmp_path, configs):
    run = synthetic_run(tmp_path)
    _manifest(run, prompt_version=XSS, weights_sha256="ab" * 32, fks_version="0.0.9",
              stages={"generate": {"batch_size": 8}}, backend={"backend": "hf",
                                                               "dtype": "bfloat16"})
    html = build_report([run], configs=configs).read_text()
    table = re.search(r'<table id="run-details">.*?</table>', html, re.S).group(0)
    assert XSS not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in table
    for text in ("ab" * 32, "bench-1", "bfloat16", ">8<", "0.0.9", "model-a",
                 "n/a: the judge stage has not run"):
        assert text in table, text
    for head in ("weights sha256", "benchmark checksum", "backend", "dtype", "batch size",
                 "prompt version", "judge", "fks version"):
        assert f">{head}</th>" in table, head
    assert Results.model_validate_json(results_path(run).read_text()).run.batch_size == 8


def test_readme_documents_every_field():
    text = README.read_text().split("## results.json", 1)[1].split("\n## ", 1)[0]
    for model in (Results, RunDetails, Figures):
        for name in model.model_fields:
            assert f"`{name}`" in text, f"README results.json: {model.__name__}.{name}"


def test_results_schema_command(capsys):
    assert fks("results", "schema") == 0
    schema = json.loads(capsys.readouterr().out)
    assert {"figures", "run", "sanity", "schema_version"} <= set(schema["properties"])
    assert fks("results", "schema", "--comparison") == 0
    assert "coverage_modes" in json.loads(capsys.readouterr().out)["properties"]


# ------------------------------------------------------------------------------- --json
def test_run_json_prints_only_the_results_on_stdout(tiny_model_dir, tiny_benchmark_dir,
                                                    tmp_path, capsys):
    from fks.pipeline import STAGE_NAMES

    stages = ",".join(n for n in STAGE_NAMES if n != "jlens")  # see test_pipeline
    argv = ["run", "--model", "tiny", "--model-path", tiny_model_dir, "--benchmark",
            tiny_benchmark_dir, "--out", tmp_path, "--device", "cpu", "--transport", "raw",
            "--no-kts-bootstrap", "--stages", stages]
    assert fks(*argv, "--json") == 0
    cap = capsys.readouterr()
    res = Results.model_validate_json(cap.out)  # stdout is the JSON and nothing else
    run = tmp_path / "tiny"
    assert "report:" in cap.err and "report:" not in cap.out
    on_disk = Results.model_validate_json(results_path(run).read_text())
    assert on_disk.model_dump(exclude={"created_at"}) == res.model_dump(exclude={"created_at"})
    manifest = read_json(run / "evaluation_manifest.json")
    assert res.run.weights_sha256 == manifest["weights_sha256"] is not None
    assert res.run.backend == "hf" and res.run.batch_size == 64 and res.run.judge == "alias"
    assert res.run.dtype == manifest["backend"]["dtype"]
    assert res.figures.anchor_accuracy.point is not None
    # KTS points only (--no-kts-bootstrap) or withheld: never an interval made up
    assert res.figures.kts.low is None and res.figures.kts.reason
    # without --json: the table and the report path on stdout
    assert fks(*argv) == 0
    out = capsys.readouterr().out
    assert f"report: {run / 'report.html'}" in out and "anchor accuracy" in out


def test_demo_json_prints_only_the_results_on_stdout(tmp_path, configs, capsys, monkeypatch):
    import fks.demo.run as demo_run

    run = synthetic_run(tmp_path)
    build_report([run], configs=configs)

    def fake_run_demo(out, *, configs, display=None, **kw):  # the real one takes minutes
        display.print("fks demo headline table")
        return demo_run.DemoResult(tmp_path, tmp_path, run, run / "report.html", {})

    monkeypatch.setattr(demo_run, "run_demo", fake_run_demo)
    assert fks("demo", "--out", tmp_path / "demo", "--json") == 0
    cap = capsys.readouterr()
    assert Results.model_validate_json(cap.out).run.model == "model-a"
    assert "fks demo headline table" in cap.err


def test_the_kernel_line_names_the_logprob_kernel():
    # issue 29: the report's run table says which kernel computed the answer log-probs
    from fks.report.results import _kernels

    k = {"torch": "2.13.0", "threads": 2, "cpu_capability": "AVX512", "mkldnn": True,
         "float32_matmul_precision": "highest"}
    assert "log-probs" not in _kernels(k)  # a manifest written before the kernel was recorded
    assert _kernels({**k, "logprob_kernel": "inductor"}).endswith("log-probs inductor")
    # and which greedy loop generated (fks's own, or transformers' generate as the fallback)
    assert _kernels({**k, "logprob_kernel": "eager", "decode_loop": "fks"}).endswith(
        "log-probs eager, greedy loop fks")
    # and how many worker threads shared the model (fks.workers)
    assert _kernels({**k, "decode_loop": "fks", "workers": 2}).endswith(
        "greedy loop fks, 2 workers")
    # and whether bf16 linear weights were oneDNN-packed (fks.generate.backends.packed)
    assert _kernels({**k, "decode_loop": "fks", "linear": "onednn-packed", "workers": 2}
                    ).endswith("greedy loop fks, linear onednn-packed, 2 workers")
