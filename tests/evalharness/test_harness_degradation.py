"""§6 degradation: Delta >= 0.15 against a baseline, with severities."""

from __future__ import annotations

import pytest

from fks.errors import FksInputError
from fks.evalharness.config import DegradationSettings
from fks.evalharness.degradation import (
    baseline_manifest,
    check_baseline,
    degradation_flags,
    degradation_review,
    delta_ratio,
)
from fks.evalharness.schema import BatchReport, BucketReport, CaseScore, DimensionScore


def rep(bucket, medians, flag="ok"):
    return BucketReport(bucket_label=bucket, case_count=25, median_score=0.5,
                        percentile_bandwidth=0.0, dimension_medians=medians,
                        sample_quality_flag="insufficient" if bucket == "B7" else flag)


def cases(bucket, dim, scores):
    return [
        CaseScore(case_id=f"{bucket}-{k}", bucket_label=bucket, split="test",
                  dimensions={dim: DimensionScore(dimension_id=dim, raw_score=s)},
                  aggregate_score=s)
        for k, s in enumerate(scores)
    ]


SETTINGS = DegradationSettings()
BASE = BatchReport(split="test", bucket_reports={
    "B1": rep("B1", {"D1": 0.8, "D2": 0.5, "D3": 0.0}),
    "B2": rep("B2", {"D1": 0.8, "D2": 0.5}),
    "B6": rep("B6", {"D1": 0.6}),
})


def test_delta_ratio():
    assert delta_ratio(0.8, 0.68) == pytest.approx(0.15)
    assert delta_ratio(0.0, 0.5) is None


def test_threshold_and_the_single_case_class():
    # B1 D2: (0.5 - 0.42)/0.5 = 0.16 >= 0.15 -> a signal; D1: (0.8 - 0.7)/0.8 = 0.125 -> not
    current = {"B1": rep("B1", {"D1": 0.7, "D2": 0.42, "D3": 0.3})}
    (cell,) = degradation_review(BASE, current, cases("B1", "D2", [0.3, 0.9]), SETTINGS)
    assert (cell["bucket_label"], cell["dimension_id"]) == ("B1", "D2")
    assert cell["delta_ratio"] == pytest.approx(0.16)
    # one failing case: §6 "sample extension", which §8.2's severity cannot hold -> no flag
    assert cell["severity"] == "single_case"
    assert cell["sign_off"] == {"by": "ecosystem_initiator", "objection_period_days": 14,
                                "automatic_rollback": False}
    assert degradation_flags(BASE, current, cases("B1", "D2", [0.3, 0.9]), SETTINGS) == []
    # improvements and a zero baseline (D3) never signal
    assert not degradation_review(BASE, {"B1": rep("B1", {"D1": 0.9, "D3": 0.0})}, [], SETTINGS)


def test_bucket_level_needs_three_failing_cases_of_one_pattern():
    current = {"B1": rep("B1", {"D2": 0.3})}
    three = cases("B1", "D2", [0.1, 0.2, 0.3, 0.9])  # limit 0.85 * 0.5 = 0.425
    (flag,) = degradation_flags(BASE, current, three, SETTINGS)
    assert flag.severity == "bucket_level"
    # three failing cases, but of different patterns (weakest component) -> single case
    mixed = cases("B1", "D2", [0.1, 0.2, 0.3])
    for cs, weakest in zip(mixed, ("rho_source", "hit_policy", "recall_div"), strict=True):
        comps = dict.fromkeys(("rho_source", "hit_policy", "recall_div", "f1_dual"), 1.0)
        comps[weakest] = 0.0
        cs.dimensions["D2"].components.update(comps)
    assert degradation_flags(BASE, current, mixed, SETTINGS) == []


def test_cross_bucket_and_mechanism_level_v1_needs_a_pending_bucket():
    current = {"B1": rep("B1", {"D1": 0.6}), "B2": rep("B2", {"D1": 0.5})}
    # two buckets degrade on D1; failing cases: score <= 0.85 * 0.8 = 0.68
    few = cases("B1", "D1", [0.5, 0.9]) + cases("B2", "D1", [0.6, 0.9])  # 2 failing
    flags = degradation_flags(BASE, current, few, SETTINGS)
    assert {f.severity for f in flags} == {"cross_bucket"} and len(flags) == 2
    many = cases("B1", "D1", [0.5, 0.6, 0.9]) + cases("B2", "D1", [0.4, 0.6])  # 4 failing
    # both buckets "ok": no pending-bucket evidence -> still cross_bucket in v1
    assert {f.severity for f in degradation_flags(BASE, current, many, SETTINGS)} == {
        "cross_bucket"
    }
    pending = {"B1": rep("B1", {"D1": 0.6}), "B2": rep("B2", {"D1": 0.5}, "insufficient")}
    flags = degradation_flags(BASE, pending, many, SETTINGS)
    assert {f.severity for f in flags} == {"mechanism_level"}


def test_mechanism_level_after_v2_needs_five_cases_over_three_buckets():
    v2 = DegradationSettings(phase="v2")
    current = {b: rep(b, {"D1": 0.5}, "insufficient") for b in ("B1", "B2", "B6")}
    base = BatchReport(split="test", bucket_reports={
        b: rep(b, {"D1": 0.8}) for b in ("B1", "B2", "B6")})
    four = cases("B1", "D1", [0.1, 0.1]) + cases("B2", "D1", [0.1]) + cases("B6", "D1", [0.1])
    assert {f.severity for f in degradation_flags(base, current, four, v2)} == {"cross_bucket"}
    five = four + [c.model_copy(update={"case_id": "B6-x"}) for c in cases("B6", "D1", [0.2])]
    assert {f.severity for f in degradation_flags(base, current, five, v2)} == {
        "mechanism_level"
    }


def test_baseline_provenance_is_checked():
    report = BASE
    text = report.model_dump_json()
    cases_ = cases("B1", "D1", [0.8])
    man = baseline_manifest(report, text, cases_, period="2026Q3", salt="s")
    check_baseline(report, text, man, split="test", period="2026Q4")
    check_baseline(report, text, man, split="test", period="2026-11")  # a monthly run in Q4
    bad = [
        (None, "test", "2026Q4", "no provenance"),
        (man, "dev", "2026Q4", "split"),
        (man, "test", "2027Q1", "not the quarter before"),
        (man, "test", None, "current --period"),
        ({**man, "period": "2026-09"}, "test", "2026Q4", "monthly"),
        ({**man, "batch_report_sha256": "0" * 64}, "test", "2026Q4", "SHA-256"),
    ]
    for manifest, split, period, msg in bad:
        with pytest.raises(FksInputError, match=msg):
            check_baseline(report, text, manifest, split=split, period=period)
    with pytest.raises(FksInputError, match="median differs"):
        cells = {**man["cells"], "B1": {**man["cells"]["B1"], "D1": {"median": 0.1}}}
        check_baseline(report, text, {**man, "cells": cells}, split="test", period="2026Q4")


def test_buckets_or_dimensions_absent_from_the_baseline_are_skipped():
    current = {"B4": rep("B4", {"D1": 0.1}), "B6": rep("B6", {"D9": 0.1})}
    assert degradation_flags(BASE, current, [], SETTINGS) == []
