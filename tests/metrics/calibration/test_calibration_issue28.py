"""Issue 28, point 9 and 5: the all-queries view never rewards abstention; samples' prompt.

Each test fails on the code before issue 28.
"""

from __future__ import annotations

import json

import pytest
from calibration_tiny_run import build_run, query_id_of, query_row, write_jsonl

from fks.cli import main
from fks.metrics.calibration.run import CalibrationSettings, source_block
from tiny_benchmark import tiny_benchmark_rows, write_benchmark

ABSTENTION_REWARDING = ("brier", "nll", "ece_equal_width", "ece_equal_mass")


def fks(*args) -> int:
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return int(exc.value.code or 0)




# ===================================================== the all-queries view and abstention
def test_the_all_queries_view_keeps_accuracy_risk_aurc_and_drops_ece_brier_nll():
    """A model that abstains on 19 of 20 against one that answers all 20 (14 right at 0.7).

    Before issue 28 the all-queries Brier was 0.0005 for the abstainer and 0.21 for the
    honest model (coverage x the answered-rows value): abstention won.
    """
    s = CalibrationSettings(n_resamples=100, min_facts_for_interval=2)
    abstainer = [query_row(i, "abstain") for i in range(19)] + [query_row(19, "answered", 1, 0.9)]
    honest = [query_row(i, "answered", int(i < 14), 0.7) for i in range(20)]
    views = {}
    for name, rows in (("abstainer", abstainer), ("honest", honest)):
        e2e = source_block(rows, "sequence_probability", s)["end_to_end"]
        fig = e2e["figures"]
        for key in ABSTENTION_REWARDING:
            assert key not in fig, (name, key)
            assert key in fig["not_in_view"]
            assert key not in e2e["intervals"]
        assert "reliability" not in e2e
        assert {"accuracy", "aurc", "risk_at_coverage"} <= set(fig)
        assert {"accuracy", "aurc"} <= set(e2e["intervals"])
        views[name] = fig
    # what is left ranks the honest model first
    assert views["abstainer"]["accuracy"] == pytest.approx(0.05)
    assert views["honest"]["accuracy"] == pytest.approx(0.7)
    full = {n: [r["risk"] for r in f["risk_at_coverage"] if r["target_coverage"] == 1.0][0]
            for n, f in views.items()}
    assert full["honest"] < full["abstainer"]


def test_slices_of_the_all_queries_view_drop_them_too():
    rows = [query_row(i, "abstain") for i in range(5)] + [query_row(i, "answered", 1, 0.9)
                                                     for i in range(5, 10)]
    s = CalibrationSettings(n_resamples=100, min_facts_for_interval=2)
    block = source_block(rows, "sequence_probability", s)
    for groups in block["slices"].values():
        for part in groups.values():
            fig = part["end_to_end_figures"]
            assert not set(ABSTENTION_REWARDING) & set(fig)
            assert {"accuracy", "aurc", "risk_at_full_coverage"} <= set(fig)
            assert part["figures"]["brier"] is not None  # the answered rows keep calibration


# ================================================================ samples' prompt version
def _samples(run, prompt_version):
    _, queries = tiny_benchmark_rows()
    q = next(q for q in queries if q["fact_id"] == "fact_000001" and q["variant_id"] == "anchor")
    assert q["query_id"] == query_id_of("fact_000001", "anchor")
    write_jsonl(run / "samples.jsonl", [{
        "model": "tiny-model", "query_id": q["query_id"], "fact_id": q["fact_id"],
        "relation": q["relation"], "condition_family": "anchor", "language": q["language"],
        "samples": ["Paris", "Paris", "Lyon"], "temperature": 1.0, "k": 3, "seed": 1,
        "max_new_tokens": 8, "prompt_version": prompt_version}])


def test_samples_of_another_prompt_version_are_exit_2_naming_both_files(tmp_path, capsys):
    bench = write_benchmark(tmp_path / "bench", *tiny_benchmark_rows())
    run = build_run(tmp_path / "run")  # generations: prompt_version "test-v1"
    (run / "evaluation_manifest.json").write_text(json.dumps({"prompt_version": "test-v1"}))
    _samples(run, "test-v1")
    assert fks("calibrate", run, "--benchmark", bench) == 0
    capsys.readouterr()
    _samples(run, "fks-prompt-v0")
    assert fks("calibrate", run, "--benchmark", bench) == 2
    err = capsys.readouterr().err
    assert "samples.jsonl:1: field 'prompt_version'" in err
    assert "evaluation_manifest.json" in err and "fks-prompt-v0" in err and "test-v1" in err


def test_a_sampling_stage_of_another_prompt_version_is_exit_2(tmp_path, capsys):
    bench = write_benchmark(tmp_path / "bench", *tiny_benchmark_rows())
    run = build_run(tmp_path / "run")
    _samples(run, "test-v1")
    (run / "evaluation_manifest.json").write_text(json.dumps({
        "prompt_version": "test-v1",
        "stages": {"calibrate_sample": {"prompt_version": "fks-prompt-v0"}}}))
    assert fks("calibrate", run, "--benchmark", bench) == 2
    err = capsys.readouterr().err
    assert "evaluation_manifest.json" in err and "samples.jsonl" in err
    assert "stages.calibrate_sample.prompt_version" in err


# ====================================================== a run directory literally named run
def test_calibrate_run_reads_a_folder_named_run(tmp_path, monkeypatch):
    bench = write_benchmark(tmp_path / "bench", *tiny_benchmark_rows())
    run = build_run(tmp_path / "run")
    monkeypatch.chdir(tmp_path)
    assert fks("calibrate", "run", "--benchmark", bench, "--min-facts-for-interval", "2") == 0
    assert (run / "metrics" / "calibration_summary.json").is_file()
    assert fks("calibrate", "run", "run", "--benchmark", bench) == 0  # explicit form
    # `elicit` is still the subcommand (no folder named elicit): its own missing argument
    assert fks("calibrate", "elicit", "--model-path", "m") == 2
