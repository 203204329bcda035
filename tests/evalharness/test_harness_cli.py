"""``fks harness score`` end to end, and ``score_batch`` on small batches."""

from __future__ import annotations

import json

import pytest
from harness_examples import empty_gold, full_case, full_gold, write_jsonl

from fks.cli import main
from fks.evalharness.inputs import CaseRecord, GoldRecord
from fks.evalharness.schema import BatchReport, CaseScore
from fks.evalharness.scoring import CaseNotScorable, score_batch
from fks.evalharness.split import assign_splits

IDS = [f"case-{k:02d}" for k in range(12)] + ["case-<script>alert(1)</script>"]


def _bucket(k: int) -> str:
    return "B1" if k % 2 else "B6"


def _rows(degrade: bool = False):
    """Gold without D6 (bias labels): D6 is reported as not annotated."""
    cases, golds = [], []
    for k, cid in enumerate(IDS):
        g = full_gold(cid, _bucket(k))
        del g["harness"]["bias_labels"]
        g["result"]["s1"]["coupling_strength"] = k / 10
        c = full_case(cid)
        c["result"]["s1"]["coupling_strength"] = k / 10
        if degrade:
            c["result"]["phase_evidence"]["clocks"] = {}
            c["result"]["phase_evidence"]["contradictions"] = []
        if "<" in cid:  # exhaustive listing, so the id shows in the flags table
            c["result"]["causal_graph"]["nodes"] += [
                {"id": f"x{j}", "label": f"<b>extra {j}</b>"} for j in range(6)
            ]
        cases.append(c)
        golds.append(g)
    return cases, golds


def _split_with_most_cases():
    splits = assign_splits({cid: _bucket(k) for k, cid in enumerate(IDS)})
    return max(("dev", "test", "holdout"), key=lambda s: sum(v == s for v in splits.values()))


def test_score_writes_report_and_html(tmp_path, capsys):
    cases, golds = _rows()
    split = _split_with_most_cases()
    c_path = write_jsonl(tmp_path / "cases.jsonl", cases)
    g_path = write_jsonl(tmp_path / "gold.jsonl", golds)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        main(["harness", "score", "--cases", str(c_path), "--gold", str(g_path),
              "--out", str(out), "--split", split, "--period", "2026Q3"])
    assert exc.value.code == 0, capsys.readouterr().err
    report = BatchReport.model_validate_json((out / "batch_report.json").read_text())
    assert report.split == split
    scores = [CaseScore.model_validate_json(x)
              for x in (out / "case_scores.jsonl").read_text().splitlines()]
    assert scores and all(s.split == split for s in scores)
    assert sum(r.case_count for r in report.bucket_reports.values()) == len(scores)
    for s in scores:
        assert s.dimensions["D6"].raw_score is None  # not annotated in this gold
        assert s.dimensions["D1"].bucket_percentile is not None
        assert s.dimensions["D1"].bandwidth is not None  # buckets < 30 cases
        if s.bucket_label == "B6":
            assert "d11_bucket_not_evaluated" in s.dimensions["D11"].gaming_flags
    html_text = (out / "harness_report.html").read_text()
    assert "<script>" not in html_text and "&lt;script&gt;" in html_text
    assert "bandwidth: &plusmn;" in html_text
    details = json.loads((out / "harness_details.json").read_text())
    assert set(details["split_counts"]) <= {"dev", "test", "holdout"}
    assert set(details["bucket_normalisation"]) == set(report.bucket_reports)

    # a second run with worse phase answers, against the first report as baseline
    worse, _ = _rows(degrade=True)
    c2 = write_jsonl(tmp_path / "cases2.jsonl", worse)
    with pytest.raises(SystemExit) as exc:
        main(["harness", "score", "--cases", str(c2), "--gold", str(g_path),
              "--out", str(tmp_path / "out2"), "--split", split, "--period", "2026Q4",
              "--baseline", str(out / "batch_report.json")])
    assert exc.value.code == 0
    again = BatchReport.model_validate_json((tmp_path / "out2" / "batch_report.json").read_text())
    d3 = [f for f in again.degradation_flags if f.dimension_id == "D3"]
    assert d3 and all(f.delta_ratio >= 0.15 for f in d3)
    if len(again.bucket_reports) >= 2:
        assert {f.severity for f in d3} <= {"cross_bucket", "mechanism_level"}


def test_score_with_d6_reports_ece(tmp_path, cfg):
    golds = [GoldRecord.model_validate(full_gold(f"e{k}")) for k in range(10)]
    cases = {g.case_id: CaseRecord.model_validate(full_case(g.case_id)) for g in golds}
    split = assign_splits({g.case_id: g.bucket_label for g in golds})["e0"]
    res = score_batch(cases, golds, cfg, split=split)
    for cs in res.case_scores:
        # anchoring 0.8 and herding 0.6, both right: ECE = (0.2 + 0.4) / 2 = 0.3
        assert cs.ece == pytest.approx(0.3)
        assert cs.dimensions["D6"].components["ece"] == cs.ece


def test_bad_case_row_exits_2_with_file_line_field(tmp_path, capsys):
    cases, golds = _rows()
    cases[1]["result"]["posterior"]["mode_a"]["weight"] = 1.5
    c_path = write_jsonl(tmp_path / "cases.jsonl", cases)
    g_path = write_jsonl(tmp_path / "gold.jsonl", golds)
    with pytest.raises(SystemExit) as exc:
        main(["harness", "score", "--cases", str(c_path), "--gold", str(g_path),
              "--out", str(tmp_path / "out")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"{c_path}:2" in err
    assert "field 'result.posterior.mode_a.weight'" in err
    assert not (tmp_path / "out" / "batch_report.json").exists()


@pytest.mark.parametrize(
    "break_input, where",
    [
        (lambda c, g: c.append(full_case("orphan")), ("cases.jsonl:14", "case_id")),
        (lambda c, g: g.append(dict(g[0])), ("gold.jsonl:14", "case_id")),
        (lambda c, g: g[2].update(bucket_label="B9"), ("gold.jsonl:3", "bucket_label")),
        (lambda c, g: c[0].update(bucket_label="B1"), ("cases.jsonl:1", "bucket_label")),
    ],
)
def test_other_bad_inputs_exit_2(tmp_path, capsys, break_input, where):
    cases, golds = _rows()
    break_input(cases, golds)
    c_path = write_jsonl(tmp_path / "cases.jsonl", cases)
    g_path = write_jsonl(tmp_path / "gold.jsonl", golds)
    with pytest.raises(SystemExit) as exc:
        main(["harness", "score", "--cases", str(c_path), "--gold", str(g_path),
              "--out", str(tmp_path / "out")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert where[0] in err and f"field '{where[1]}" in err


def test_bad_baseline_exits_2(tmp_path, capsys):
    cases, golds = _rows()
    c_path = write_jsonl(tmp_path / "cases.jsonl", cases)
    g_path = write_jsonl(tmp_path / "gold.jsonl", golds)
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"split": "test", "bucket_reports": {}, "extra": 1}))
    with pytest.raises(SystemExit) as exc:
        main(["harness", "score", "--cases", str(c_path), "--gold", str(g_path),
              "--out", str(tmp_path / "out"), "--baseline", str(base)])
    assert exc.value.code == 2
    assert "field 'extra'" in capsys.readouterr().err


# ------------------------------------------------------------------------- score_batch
def _batch(n, bucket="B1"):
    golds = []
    for k in range(n):
        g = full_gold(f"b{k}", bucket)
        del g["harness"]["bias_labels"]
        golds.append(GoldRecord.model_validate(g))
    return golds


def test_missing_prediction_is_scored_empty(cfg):
    golds = _batch(10)
    splits = assign_splits({g.case_id: g.bucket_label for g in golds})
    split = splits["b0"]
    cases = {g.case_id: CaseRecord.model_validate(full_case(g.case_id)) for g in golds[1:]}
    res = score_batch(cases, golds, cfg, split=split)
    assert res.details["missing_predictions"] == ["b0"]
    by_id = {s.case_id: s for s in res.case_scores}
    others = [s.aggregate_score for cid, s in by_id.items() if cid != "b0"]
    assert by_id["b0"].aggregate_score < min(others)


def test_case_without_any_annotation_is_refused(cfg):
    golds = [GoldRecord.model_validate(empty_gold(f"e{k}")) for k in range(10)]
    split = assign_splits({g.case_id: g.bucket_label for g in golds})["e0"]
    with pytest.raises(CaseNotScorable, match="no weighted dimension"):
        score_batch({}, golds, cfg, split=split)


def test_iaa_reports_and_annotation_low(cfg):
    labels_b = ["x", "y", "y", "x", "y", "y", "x", "x", "y", "y", "x", "x"]
    golds = []
    for k in range(12):
        g = full_gold(f"b{k}")
        del g["harness"]["bias_labels"]
        g["double_annotations"] = [
            {"task_id": "D", "item": "bucket", "label_a": "x" if k % 2 else "y",
             "label_b": labels_b[k]}
        ]
        golds.append(GoldRecord.model_validate(g))
    split = assign_splits({g.case_id: g.bucket_label for g in golds})["b0"]
    res = score_batch({}, golds, cfg, split=split)
    (rep,) = res.report.iaa_reports
    # last 10 items: a = y x y x y x y x y x, b = y x y y x x y y x x -> 6/10 agree,
    # marginals 0.5 / 0.5 -> kappa (0.6 - 0.5) / 0.5 = 0.2 < 0.75 (task D)
    assert rep.task_id == "D"
    assert rep.kappa_rolling_10 == pytest.approx(0.2)
    assert rep.disagreement_rate == pytest.approx(0.4)
    assert rep.triggered_mini_review
    assert res.report.bucket_reports["B1"].sample_quality_flag == "annotation_low"
    assert res.details["annotation_low_tasks"] == {"B1": ["D"]}


def test_empty_split_exits_2(tmp_path, capsys):
    # one case only: it lands in one split, the two others are empty
    g = full_gold("solo")
    own = assign_splits({"solo": "B1"})["solo"]
    other = next(s for s in ("dev", "test", "holdout") if s != own)
    c_path = write_jsonl(tmp_path / "cases.jsonl", [full_case("solo")])
    g_path = write_jsonl(tmp_path / "gold.jsonl", [g])
    with pytest.raises(SystemExit) as exc:
        main(["harness", "score", "--cases", str(c_path), "--gold", str(g_path),
              "--out", str(tmp_path / "out"), "--split", other])
    assert exc.value.code == 2
    assert f"no gold case falls in split '{other}'" in capsys.readouterr().err


def test_forced_anchor_placement_needs_the_right_count(tmp_path, capsys):
    cases, golds = _rows()
    golds[0]["self_annotated_anchor"] = True  # 1 anchor, but 10 + 3 + 1 are required
    c_path = write_jsonl(tmp_path / "cases.jsonl", cases)
    g_path = write_jsonl(tmp_path / "gold.jsonl", golds)
    with pytest.raises(SystemExit) as exc:
        main(["harness", "score", "--cases", str(c_path), "--gold", str(g_path),
              "--out", str(tmp_path / "out"), "--force-anchor-placement"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "field 'self_annotated_anchor'" in err and "found 1" in err
