"""``fks report`` and ``fks compare`` on hand-made run directories (exit codes 0 and 2)."""

from __future__ import annotations

import json

import pytest
from report_runs import XSS, synthetic_facts, synthetic_run, tiny_run

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
