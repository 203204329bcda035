"""``fks report`` and ``fks compare`` on hand-made run directories (exit codes 0 and 2)."""

from __future__ import annotations

import json

import pytest
from report_runs import XSS, synthetic_facts, synthetic_run, tiny_run, write_json

from fks.cli import main


def fks(*args) -> int:
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return int(exc.value.code or 0)


@pytest.fixture
def small_bootstrap(tmp_path):
    (tmp_path / "cfg").mkdir()
    path = tmp_path / "cfg" / "metrics.yaml"
    path.write_text("bootstrap: {n_resamples: 100}\n")
    return path


def test_report_on_the_tiny_benchmark_run(tmp_path, tiny_benchmark_dir, small_bootstrap):
    run = tiny_run(tmp_path, tiny_benchmark_dir)
    assert fks("--config", small_bootstrap, "report", run) == 0
    html = (run / "report.html").read_text()
    assert XSS not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    doc = json.loads((run / "metrics" / "bootstrap_intervals.json").read_text())
    full = doc["coverage_modes"]["full_set"]["subsets"]["all"]
    assert full["n_facts"] == 4 and full["n_relations"] == 2
    # fact_000002 is answered wrongly in most families: BCS < 1 and anchor accuracy 3/4
    assert full["metrics"]["anchor_accuracy"]["point"] == pytest.approx(0.75)
    assert full["metrics"]["bcs"]["n_resamples"] == 100
    assert "kts" not in full["metrics"]  # the internal metrics did not run
    assert "not run" in html
    assert (run / "metrics" / "tables" / "main.md").is_file()


def test_compare_writes_paired_deltas(tmp_path, small_bootstrap):
    a = synthetic_run(tmp_path, "a", model="model-a", seed=1)
    b = synthetic_run(tmp_path, "b", model="model-b", seed=2, shift=0.1)
    out = tmp_path / "cmp.json"
    assert fks("--config", small_bootstrap, "compare", a, b, "--out", out) == 0
    res = json.loads(out.read_text())
    assert res["model_a"] == "model-a" and res["model_b"] == "model-b"
    d = res["coverage_modes"]["full_set"]["all"]["bcs"]
    assert d["point"] == pytest.approx(d["a"] - d["b"])
    assert d["low"] <= d["point"] <= d["high"]
    assert {"kts", "kts_geo", "kts_id", "iss", "scr"} <= set(
        res["coverage_modes"]["full_set"]["all"])
    # itself: zero with a zero-width interval
    assert fks("--config", small_bootstrap, "compare", a, a, "--out", out) == 0
    for d in json.loads(out.read_text())["coverage_modes"]["complete_family"]["all"].values():
        assert d["point"] == 0 and d["low"] == 0 and d["high"] == 0


def test_compare_refuses_different_benchmarks(tmp_path, small_bootstrap, capsys):
    a = synthetic_run(tmp_path, "a", checksum="bench-1", internal=False, extras=False)
    b = synthetic_run(tmp_path, "b", checksum="bench-2", internal=False, extras=False)
    assert fks("--config", small_bootstrap, "compare", a, b) == 2
    err = capsys.readouterr()
    text = " ".join((err.out + err.err).split())
    assert "evaluation_manifest.json" in text and "benchmark.checksum" in text


def test_compare_refuses_different_fact_sets(tmp_path, small_bootstrap, capsys):
    facts = synthetic_facts()
    a = synthetic_run(tmp_path, "a", internal=False, extras=False, facts=facts)
    b = synthetic_run(tmp_path, "b", internal=False, extras=False, facts=facts[:-2])
    assert fks("--config", small_bootstrap, "compare", a, b) == 2
    text = " ".join("".join(capsys.readouterr()).split())
    assert "fact sets differ" in text and "behavioral_per_fact.jsonl" in text


def test_compare_refuses_runs_without_a_checksum(tmp_path, small_bootstrap):
    a = synthetic_run(tmp_path, "a", internal=False, extras=False)
    b = synthetic_run(tmp_path, "b", internal=False, extras=False)
    (b / "evaluation_manifest.json").write_text(json.dumps({"stages": {}}))
    assert fks("--config", small_bootstrap, "compare", a, b) == 2


def test_report_rejects_bad_input(tmp_path, small_bootstrap, capsys):
    assert fks("--config", small_bootstrap, "report", tmp_path / "missing") == 2
    run = synthetic_run(tmp_path, internal=False, extras=False)
    path = run / "metrics" / "behavioral_per_fact.jsonl"
    lines = path.read_text().splitlines()
    row = json.loads(lines[1])
    row["bcs"] = "high"
    lines[1] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert fks("--config", small_bootstrap, "report", run) == 2
    text = " ".join("".join(capsys.readouterr()).split())
    assert "behavioral_per_fact.jsonl:2" in text and "field 'bcs'" in text


# ---------------------------------------------------------------- issue 28: --json, checks
def _behavior_summary(run, n):
    """A minimal behavioral_model_summary.json counting ``n`` facts (the fixture has none)."""
    write_json(run / "metrics" / "behavioral_model_summary.json", {
        "primary_reading": "with_anchor", "readings": {"with_anchor": {"n_facts_with_records": n}}})


def test_compare_json_prints_the_comparison_on_stdout(tmp_path, small_bootstrap, capsys):
    from fks.report.results import Comparison

    a = synthetic_run(tmp_path, "a", model="model-a", seed=1)
    b = synthetic_run(tmp_path, "b", model="model-b", seed=2, shift=0.1)
    capsys.readouterr()
    assert fks("--config", small_bootstrap, "compare", a, b, "--json") == 0
    cap = capsys.readouterr()
    res = Comparison.model_validate(json.loads(cap.out))  # stdout holds only the JSON
    assert [r.model for r in res.runs] == ["model-a", "model-b"]
    assert res.runs[1].details.benchmark_checksum == "bench-1"
    d = res.coverage_modes["full_set"]["all"]["bcs"]
    assert d.point == pytest.approx(d.a - d.b) and d.low <= d.point <= d.high
    assert "model-a - model-b" in cap.err  # the table went to stderr
    # without --json the table is the command's output: stdout
    assert fks("--config", small_bootstrap, "compare", a, b) == 0
    cap = capsys.readouterr()
    assert "model-a - model-b" in cap.out


@pytest.mark.parametrize("summary_too", [False, True])
def test_compare_refuses_a_truncated_copy_of_itself(tmp_path, small_bootstrap, capsys,
                                                     summary_too):
    import shutil

    a = synthetic_run(tmp_path, "a")
    _behavior_summary(a, 30)
    b = tmp_path / "b"
    shutil.copytree(a, b)
    path = b / "metrics" / "behavioral_per_fact.jsonl"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-3]))
    if summary_too:  # a consistent, smaller metrics run: the per-file fact sets differ
        _behavior_summary(b, 27)
    capsys.readouterr()
    assert fks("--config", small_bootstrap, "compare", a, b) == 2
    text = " ".join("".join(capsys.readouterr()).split())
    assert f"{path}:" in text and "field 'fact_id'" in text
    assert ("must cover the same facts" if summary_too else "27 facts in this file, 30 in") \
        in text


def test_compare_and_report_refuse_a_file_changed_after_its_stage(tmp_path, small_bootstrap,
                                                                   capsys):
    from fks.provenance import record_files

    a = synthetic_run(tmp_path, "a")
    b = synthetic_run(tmp_path, "b", seed=2)
    # judged.jsonl: a file neither the comparison nor the bootstrap reads; the run is verified
    # as a whole (fks.provenance.verify_run) before anything is compared or reported
    record_files(b, "judge", {}, [b / "judged.jsonl"])
    assert fks("--config", small_bootstrap, "compare", a, b) == 0
    path = b / "judged.jsonl"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))
    capsys.readouterr()
    assert fks("--config", small_bootstrap, "compare", a, b) == 2
    text = " ".join("".join(capsys.readouterr()).split())
    assert "changed after `judge` wrote it" in text and f"{path}" in text
    assert fks("--config", small_bootstrap, "report", a, b, "--out", tmp_path / "r.html") == 2
    assert fks("--config", small_bootstrap, "report", b) == 2


def test_report_recomputes_a_bootstrap_that_does_not_verify(tmp_path, small_bootstrap):
    from fks.provenance import record_files

    run = synthetic_run(tmp_path, internal=False)
    assert fks("--config", small_bootstrap, "report", run, "--no-explorer") == 0
    path = run / "metrics" / "bootstrap_intervals.json"
    record_files(run, "bootstrap", {}, [path, run / "metrics" / "bootstrap_replicates.npz"])
    good = json.loads(path.read_text())
    bad = json.loads(path.read_text())
    bad["coverage_modes"]["full_set"]["subsets"]["all"]["metrics"]["bcs"]["point"] = 0.99
    path.write_text(json.dumps(bad))  # same fingerprint: it would be reused
    assert fks("--config", small_bootstrap, "report", run, "--no-explorer") == 0
    point = json.loads(path.read_text())["coverage_modes"]["full_set"]["subsets"]["all"][
        "metrics"]["bcs"]["point"]
    assert point == good["coverage_modes"]["full_set"]["subsets"]["all"]["metrics"]["bcs"][
        "point"] != 0.99


def test_report_refuses_mixed_benchmarks_unless_allowed(tmp_path, small_bootstrap, capsys):
    a = synthetic_run(tmp_path, "a", model="model-a", internal=False, extras=False)
    b = synthetic_run(tmp_path, "b", model="model-b", internal=False, extras=False, seed=2)
    c = synthetic_run(tmp_path, "c", model="model-c", internal=False, extras=False, seed=3,
                      checksum="other-bench")
    out = tmp_path / "all.html"
    capsys.readouterr()
    assert fks("--config", small_bootstrap, "report", a, b, c, "--out", out) == 2
    text = " ".join("".join(capsys.readouterr()).split())
    assert "different benchmarks" in text and "--allow-mixed" in text
    assert all(name in text for name in ("model-a", "model-b", "model-c", "other-bench"))
    assert f"{c / 'evaluation_manifest.json'}:" in text and not out.exists()
    assert fks("--config", small_bootstrap, "report", a, b, c, "--out", out,
               "--allow-mixed") == 0
    html = out.read_text()
    assert "Leaderboard (full_set), benchmark bench-1: model-a, model-b" in html
    assert "Leaderboard (full_set), benchmark other-bench: model-c" in html
    assert "3 different benchmarks" not in html and "2 different benchmarks" in html
    # one benchmark: one leaderboard per mode, as before
    assert fks("--config", small_bootstrap, "report", a, b, "--out", out) == 0
    assert "Leaderboard (full_set)</h3>" in out.read_text()
