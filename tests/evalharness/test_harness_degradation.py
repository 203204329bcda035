"""§6 degradation: Delta >= 0.15 against a baseline, with severities."""

from __future__ import annotations

import pytest

from fks.evalharness.config import DegradationSettings
from fks.evalharness.degradation import degradation_flags, delta_ratio
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


def test_threshold_and_bucket_level():
    # B1 D2: (0.5 - 0.42)/0.5 = 0.16 >= 0.15 -> flagged; D1: (0.8 - 0.7)/0.8 = 0.125 -> not
    current = {"B1": rep("B1", {"D1": 0.7, "D2": 0.42, "D3": 0.3})}
    flags = degradation_flags(BASE, current, [], SETTINGS)
    assert [(f.bucket_label, f.dimension_id) for f in flags] == [("B1", "D2")]
    assert flags[0].delta_ratio == pytest.approx(0.16)
    assert flags[0].severity == "bucket_level"  # one bucket only
    # improvements and a zero baseline (D3) never flag
    assert not degradation_flags(BASE, {"B1": rep("B1", {"D1": 0.9, "D3": 0.0})}, [], SETTINGS)


def test_cross_bucket_and_mechanism_level():
    current = {"B1": rep("B1", {"D1": 0.6}), "B2": rep("B2", {"D1": 0.5})}
    # two buckets degrade on D1; failing cases: score <= 0.85 * 0.8 = 0.68
    few = cases("B1", "D1", [0.5, 0.9]) + cases("B2", "D1", [0.6, 0.9])  # 2 failing
    flags = degradation_flags(BASE, current, few, SETTINGS)
    assert {f.severity for f in flags} == {"cross_bucket"} and len(flags) == 2
    many = cases("B1", "D1", [0.5, 0.6, 0.9]) + cases("B2", "D1", [0.4, 0.6])  # 4 failing
    flags = degradation_flags(BASE, current, many, SETTINGS)
    assert {f.severity for f in flags} == {"mechanism_level"}


def test_buckets_or_dimensions_absent_from_the_baseline_are_skipped():
    current = {"B4": rep("B4", {"D1": 0.1}), "B6": rep("B6", {"D9": 0.1})}
    assert degradation_flags(BASE, current, [], SETTINGS) == []
