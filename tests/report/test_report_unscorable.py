"""Issue 13 point 2 in the report: unscorable facts and empty answers are counted apart."""

from __future__ import annotations

import csv
import json

import pytest
from report_runs import FAMILIES, _tiny_judged_row, write_json, write_jsonl

from fks.cli import main
from fks.data.load import load_benchmark
from fks.metrics.behavior import run_behavior_metrics
from fks.pipeline import render_headline
from tiny_benchmark import tiny_benchmark_rows


def _timed_out(row):
    return {**row, "raw_response": "", "status": "UNPARSEABLE", "generation_status": "timeout",
            "error": "timeout", "label": "unparseable", "cluster_id": "UNPARSEABLE",
            "correctness": "REVIEW_REQUIRED"}


def _empty(row):
    return {**row, "raw_response": "", "status": "UNPARSEABLE", "label": "unparseable",
            "cluster_id": "UNPARSEABLE", "correctness": "REVIEW_REQUIRED"}


@pytest.fixture
def run_dir(tmp_path, tiny_benchmark_dir):
    _, queries = tiny_benchmark_rows()
    rows = []
    for q in queries:
        row = _tiny_judged_row(q, "tiny-model")
        if q["fact_id"] == "fact_000004" and q["use_for_main_forward"]:
            row = _timed_out(row)  # every main answer of fact 4 timed out
        elif q["fact_id"] == "fact_000001" and q["condition_family"] == "format":
            row = _empty(row)
        rows.append(row)
    run = tmp_path / "run"
    write_jsonl(run / "judged.jsonl", rows)
    write_json(run / "evaluation_manifest.json",
               {"model": {"name": "tiny-model"}, "stages": {},
                "benchmark": {"checksum": load_benchmark(tiny_benchmark_dir).checksum()}})
    run_behavior_metrics(run, main_families=FAMILIES, tau_b=0.8)
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "metrics.yaml").write_text("bootstrap: {n_resamples: 100}\n")
    with pytest.raises(SystemExit) as exc:
        main(["--config", str(tmp_path / "cfg" / "metrics.yaml"), "report", str(run)])
    assert exc.value.code in (0, None)
    return run


def _csv(path):
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_timed_out_fact_is_unscorable_in_every_table(run_dir):
    per_fact = [json.loads(x) for x in (run_dir / "metrics" / "behavioral_per_fact.jsonl")
                .read_text().splitlines()]
    four = next(r for r in per_fact if r["fact_id"] == "fact_000004")
    assert four["behavior_group"] == "Unscorable" and four["bcs"] is None
    tables = run_dir / "metrics" / "tables"
    main_rows = [r for r in _csv(tables / "main.csv") if r["coverage_mode"] == "full_set"]
    assert {r["n_unscorable"] for r in main_rows} == {"1"}
    assert all(r["n_facts"] == "4" for r in main_rows)
    sar = float(main_rows[0]["sar"])
    assert sar == 0.0  # before: the timed-out fact was Stable Abstention (0.25)
    breakdown = [r for r in _csv(tables / "behavior_breakdown.csv")
                 if (r["coverage_mode"], r["subset"]) == ("full_set", "all")]
    assert breakdown[0]["Unscorable"] == "1" and breakdown[0]["Stable Abstention"] == "0"
    per_rel = _csv(tables / "per_relation.csv")
    assert sum(int(r["n_unscorable"]) for r in per_rel if r["coverage_mode"] == "full_set") == 1
    html = (run_dir / "report.html").read_text()
    assert "1 unscorable" in html and "Behaviour groups (§6): facts per group" in html
    assert "Main-forward answers per family" in html


def test_empty_answers_per_family_in_the_table_and_console(run_dir, capsys):
    cov = {r["family"]: r for r in _csv(run_dir / "metrics" / "tables" / "answer_coverage.csv")}
    n_format = int(cov["format"]["n"])
    assert int(cov["format"]["empty"]) == n_format // 4  # fact 1 of the 4 facts
    assert int(cov["anchor"]["generation_error"]) == 1
    assert float(cov["paraphrase"]["empty_share"]) == 0.0
    render_headline(run_dir)
    out = capsys.readouterr().out  # the headline block is the command's result: stdout
    assert "1 of 4 facts unscorable" in out and "format 25%" in out
