"""§2 case score, §3 within-bucket percentiles, bandwidths and bucket reports."""

from __future__ import annotations

import numpy as np
import pytest

from fks.evalharness import aggregate
from fks.evalharness.schema import CaseScore, DimensionScore


def test_case_score_weights_and_dropped_dimensions(cfg):
    w = cfg.weights_for("B1")
    assert w["D1"] == 0.10 and w["D8"] == 0.08 and w["D11"] == 0.06
    assert sum(w.values()) == pytest.approx(1.0)
    # D9 and D11 not computed: they leave the denominator (sum 1 - 0.08 - 0.06 = 0.86)
    values = dict.fromkeys(w, 0.5) | {"D1": 1.0, "D9": None, "D11": None}
    expected = (0.10 * 1.0 + 0.5 * (0.86 - 0.10)) / 0.86
    assert aggregate.aggregate_score(values, w) == pytest.approx(expected)


def test_bucket_weight_overrides(cfg):
    w = cfg.weights_for("B5a")
    assert (w["D6"], w["D7"], w["D11"]) == (0.15, 0.15, 0.0)
    assert cfg.weights_for("B7")["D9"] == 0.15
    # D11 at weight 0 never counts, even when computed
    assert aggregate.aggregate_score({"D1": 0.2, "D11": 1.0}, w) == pytest.approx(0.2)
    assert aggregate.aggregate_score({"D11": 1.0}, w) is None


def test_percentile_is_within_bucket_ecdf(cfg):
    scores = [0.2, 0.5, 0.5, 0.9]
    got = aggregate.bucket_percentiles(scores, cfg.bootstrap, min_cases=30)
    assert [p for p, _ in got] == [0.25, 0.75, 0.75, 1.0]
    assert all(bw is not None and bw >= 0 for _, bw in got)  # < 30 cases: bandwidth reported
    big = [k / 40 for k in range(40)]
    assert all(bw is None for _, bw in aggregate.bucket_percentiles(big, cfg.bootstrap,
                                                                    min_cases=30))


def test_bandwidth_shrinks_with_bucket_size(cfg):
    small = aggregate.percentile_bandwidth([k / 10 for k in range(10)], 0.45, cfg.bootstrap)
    large = aggregate.percentile_bandwidth([k / 200 for k in range(200)], 0.4975, cfg.bootstrap)
    assert 0 < large < small
    # the top score of a bucket is at percentile 1 in every resample: no uncertainty
    assert aggregate.percentile_bandwidth([0.1, 0.2, 0.3], 0.3, cfg.bootstrap) == 0.0


def _case(cid, bucket, score, d1=None):
    dims = {"D1": DimensionScore(dimension_id="D1", raw_score=d1 if d1 is not None else score)}
    return CaseScore(case_id=cid, bucket_label=bucket, split="test", dimensions=dims,
                     aggregate_score=score)


def test_bucket_report_and_quality_flag(cfg):
    cases = [_case(f"c{k}", "B1", k / 20) for k in range(21)]
    rep = aggregate.bucket_report("B1", cases, cfg)
    assert rep.case_count == 21 and rep.median_score == pytest.approx(0.5)
    assert rep.dimension_medians == {"D1": pytest.approx(0.5)}
    assert rep.sample_quality_flag == "ok" and rep.percentile_bandwidth > 0
    assert aggregate.bucket_report("B1", cases[:5], cfg).sample_quality_flag == "insufficient"
    assert aggregate.bucket_report("B7", [_case("x", "B7", 0.5)] * 25, cfg).sample_quality_flag == (
        "insufficient"
    )
    low = aggregate.bucket_report("B1", cases, cfg, annotation_low=True)
    assert low.sample_quality_flag == "annotation_low"


def test_cross_bucket_table_keeps_only_ok_buckets(cfg):
    b1 = [_case(f"a{k}", "B1", 0.4 + 0.01 * k) for k in range(20)]
    reports = {
        "B1": aggregate.bucket_report("B1", b1, cfg),
        "B7": aggregate.bucket_report("B7", [_case("b", "B7", 0.5)], cfg),
    }
    anchors = {f"x{k}": 0.5 for k in range(5)}
    norm = {"B1": aggregate.anchor_normalisation(b1, anchors),
            "B7": aggregate.anchor_normalisation([_case("b", "B7", 0.5)], {})}
    rows = aggregate.cross_bucket_table(reports, norm)
    by = {r["bucket_label"]: r for r in rows}
    assert by["B1"]["included"] and by["B1"]["anchor_count"] == 5
    assert by["B1"]["normalised_median"] == pytest.approx(float(np.median(
        [c.aggregate_score for c in b1])) / 0.5)
    assert not by["B7"]["included"] and by["B7"]["reason"] == "insufficient"
    assert by["B7"]["normalised_median"] is None and by["B7"]["normalisation_reason"]


def test_anchor_normalisation():
    cases = [_case(f"c{k}", "B1", s) for k, s in enumerate([0.4, 0.5, 0.6, 0.8, 0.2, 0.3])]
    anchors = {"c0", "c1", "c2", "c3", "c4"}  # median of 0.4, 0.5, 0.6, 0.8, 0.2 = 0.5
    out = aggregate.anchor_normalisation(cases, anchors, min_anchors=5)
    assert out["anchor_median"] == 0.5
    assert out["normalised"]["c5"] == pytest.approx(0.6)
    assert out["normalised"]["c3"] == pytest.approx(1.6)
    few = aggregate.anchor_normalisation(cases, {"c0"}, min_anchors=5)
    assert few["anchor_median"] is None and few["normalised"] is None and few["reason"]
