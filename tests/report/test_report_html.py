"""The self-contained HTML report: escaping, no external resources, sections per stage."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from report_runs import XSS, synthetic_run

from fks.configs import load_configs
from fks.errors import FksInputError
from fks.report.build import build_report


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    d = tmp_path_factory.mktemp("cfg")
    (d / "metrics.yaml").write_text("bootstrap: {n_resamples: 120}\n")
    return load_configs([d / "metrics.yaml"])


def no_external_resources(html: str) -> None:
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html, re.I)
    assert "<link" not in html.lower()
    assert re.search(r"<script", html, re.I) is None  # no script tag at all, escaped or ours


def test_model_text_is_escaped_and_the_file_is_self_contained(tmp_path, configs):
    run = synthetic_run(tmp_path)
    out = build_report([run], configs=configs)
    assert out == run / "report.html"
    html = out.read_text()
    assert XSS not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "answer 0 &amp; more" in html  # every other answer is escaped too
    no_external_resources(html)
    images = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,[A-Za-z0-9+/=]+"', html)
    # behaviour bars, ISS by layer, KTS heatmap, per-relation bars, calibration
    assert len(images) >= 5
    for section in ("Sanity checks", "Calibration", "Example answers", "KTS by condition pair",
                    "Internal stability by behaviour group", "Joint internal x external"):
        assert section in html
    assert '<span class="fail">fail</span>' in html and '<span class="pass">pass</span>' in html
    assert "raw_vs_transported" in html
    # calibration: both coverage views side by side, with the end-to-end risk at full coverage
    cal = html.split("<h3>Calibration</h3>")[1].split("Example answers")[0]
    assert "end_to_end_coverage" in cal and "confidence_coverage" in cal
    assert "end_to_end_risk_at_full_coverage" in cal and "0.61" in cal
    assert "[0.030, 0.080]" in cal
    # (the run-details table says the judge stage has not run: no judge in this fixture)
    rest = re.sub(r'<table id="run-details">.*?</table>', "", html, flags=re.S)
    assert "not run" not in rest.split("Example answers")[0].split("Figures across runs")[1]


def test_stages_that_did_not_run_say_so(tmp_path, configs):
    run = synthetic_run(tmp_path, internal=False, extras=False)
    html = build_report([run], configs=configs, out=tmp_path / "r.html").read_text()
    assert "not run: no sanity_checks.json" in html
    assert "not run: no calibration_summary.json" in html
    assert "not run: judged.jsonl absent" in html
    assert "not run: no per-layer ISS" in html
    assert "BCS" in html  # the behavioural figures are still there
    no_external_resources(html)


def test_a_run_without_any_metrics_still_renders(tmp_path, configs):
    run = tmp_path / "empty"
    (run / "metrics").mkdir(parents=True)
    html = build_report([run], configs=configs).read_text()
    assert "not run: no behavioural metrics" in html
    assert not (run / "metrics" / "bootstrap_intervals.json").exists()


def test_several_runs_get_a_leaderboard_and_paired_differences(tmp_path, configs):
    a = synthetic_run(tmp_path, "a", model="model-a", seed=1)
    b = synthetic_run(tmp_path, "b", model="model-b", seed=2, shift=0.1)
    c = synthetic_run(tmp_path, "c", model="model-c", seed=3, checksum="other-bench")
    out = build_report([a, b, c], configs=configs, out=tmp_path / "all.html",
                       reference="model-b", allow_mixed=True)
    html = out.read_text()
    assert "Leaderboard (complete_family)" in html and "Leaderboard (full_set)" in html
    assert "Paired differences against model-b" in html
    assert "model-a - model-b (full_set)" in html
    assert "model-c versus model-b: not compared" in html and "different benchmarks" in html
    # one leaderboard per benchmark (--allow-mixed)
    assert (tmp_path / "all_tables" / "leaderboard_full_set_bench1.csv").is_file()
    assert (tmp_path / "all_tables" / "leaderboard_full_set_otherbench.csv").is_file()
    no_external_resources(html)
    with pytest.raises(FksInputError, match="no run named"):
        build_report([a, b], configs=configs, out=tmp_path / "x.html", reference="nope")
    with pytest.raises(FksInputError, match="--out"):
        build_report([a, b], configs=configs)


def test_default_output_path_is_inside_the_run(tmp_path, configs):
    run = synthetic_run(tmp_path, internal=False)
    assert build_report([Path(run)], configs=configs, kts_bootstrap=False) == run / "report.html"


def test_a_labelled_set_adds_the_judge_validation_block(tmp_path, configs, tiny_benchmark_dir):
    import json

    from report_runs import tiny_run

    run = tiny_run(tmp_path, tiny_benchmark_dir)
    rows = [json.loads(line) for line in (run / "judged.jsonl").open()]
    labels = tmp_path / "labels.jsonl"
    # the hand labels agree with the judge on every answer but the first one's correctness
    hand = [{"query_id": r["query_id"], "kind": "ANSWER", "cluster_id": r["cluster_id"],
             "correctness": r["correctness"], "split": "dev" if i % 2 else "test"}
            for i, r in enumerate(rows)]
    hand[0]["correctness"] = "INCORRECT" if rows[0]["correctness"] == "CORRECT" else "CORRECT"
    labels.write_text("".join(json.dumps(h) + "\n" for h in hand))
    html = build_report([run], configs=configs, out=tmp_path / "v.html", labels=labels,
                        kts_bootstrap=False).read_text()
    block = html.split("Judge validation (spec §18.6)")[1].split("</table>")[0]
    splits = re.findall(r'<td class="text">(all|dev|test)</td><td class="text">judge</td>', block)
    assert splits == ["all", "dev", "test"]
    first = block.split("</tr>")[1]  # the judge on all answers: kinds agree, one verdict not
    assert f"<td>{len(rows)}</td><td>1.000</td>" in first
    assert "<td>1.000</td>" * 7 not in first
    plain = build_report([run], configs=configs, out=tmp_path / "p.html",
                         kts_bootstrap=False).read_text()
    assert "Judge validation" not in plain


def test_the_judge_validation_block_shows_the_gap_interval(tmp_path, configs, tiny_benchmark_dir):
    import json

    from report_runs import tiny_run

    run = tiny_run(tmp_path, tiny_benchmark_dir)
    rows = [json.loads(line) for line in (run / "judged.jsonl").open()]
    # hand labels that split every fact's answers in two: a BCS gap on every scorable fact
    hand = [{"query_id": r["query_id"], "kind": "ANSWER", "cluster_id": f"X{i % 2}",
             "correctness": r["correctness"], "split": "test"} for i, r in enumerate(rows)]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(h) + "\n" for h in hand))
    html = build_report([run], configs=configs, out=tmp_path / "v.html", labels=labels,
                        kts_bootstrap=False).read_text()
    block = html.split("Judge validation (spec §18.6)")[1].split("</table>")[0]
    first = block.split("</tr>")[1]
    assert re.search(r"<td>\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]</td>$", first.strip()), first
