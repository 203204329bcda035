"""§5 IAA: rolling-10 kappa, mini-review trigger, contested points, thresholds."""

from __future__ import annotations

import pytest

from fks.evalharness.iaa import (
    consecutive_below,
    contested_points,
    iaa_report,
    iaa_summary,
    majority_vote,
    mini_review_triggered,
    rolling_kappa,
)
from fks.evalharness.inputs import DoubleAnnotation
from fks.metrics.stats import cohen_kappa


def items(a, b, c=None, task="B"):
    c = c or [None] * len(a)
    return [
        (f"case{k}", DoubleAnnotation(task_id=task, item=f"i{k}", label_a=x, label_b=y, label_c=z))
        for k, (x, y, z) in enumerate(zip(a, b, c, strict=True))
    ]


def test_rolling_kappa_uses_the_shared_core():
    a = list("yynnynynnyyn")
    b = list("yynnyyynnnyn")
    series = rolling_kappa(a, b, window=10)
    assert len(series) == 3
    for s, k in enumerate(series):
        assert k == pytest.approx(cohen_kappa(a[s : s + 10], b[s : s + 10]))
    # hand check of the first window: items 5 and 9 differ, 8/10 agree; marginals a: y 5, n 5;
    # b: y 5, n 5 -> p_e = 0.5*0.5 + 0.5*0.5 = 0.5 -> kappa = (0.8 - 0.5) / 0.5 = 0.6
    assert series[0] == pytest.approx(0.6)
    assert rolling_kappa(["x"] * 4, ["x"] * 4) == [None]  # undefined: one label throughout


def test_mini_review_trigger_at_three_in_ten():
    a = ["y"] * 20

    def b_with(disagree):
        return ["n" if k in disagree else "y" for k in range(20)]

    assert mini_review_triggered(a, b_with({0, 5, 9}))  # 3 inside window 0..9
    assert mini_review_triggered(a, b_with({12, 15, 19}))  # 3 inside window 10..19
    assert not mini_review_triggered(a, b_with({0, 1}))
    assert not mini_review_triggered(a, b_with({0, 9, 10}))  # 3 in 11 items, at most 2 in 10
    assert not mini_review_triggered(a, b_with({0, 10, 19}))
    assert mini_review_triggered(["y"] * 4, ["n", "y", "n", "n"])  # short history: one window


def test_majority_and_contested_points():
    assert majority_vote("x", "y", "x") == "x"
    assert majority_vote("x", "y", "z") is None
    assert majority_vote("x", "y", None) is None
    assert majority_vote("x", "x", None) == "x"
    its = items(["a", "a", "a", "b"], ["b", "b", "a", "c"], ["a", "c", None, None])
    # item 0 settled 2:1 (a); item 1 third label c matches neither a nor b; item 3 no third label
    points = contested_points(its, triggered=True)
    assert [p["case_id"] for p in points] == ["case1", "case3"]
    assert contested_points(its, triggered=False) == []


def test_report_thresholds_and_trigger():
    from fks.evalharness.config import load_harness_config

    settings = load_harness_config().iaa
    assert settings.thresholds["A"] == 0.65 and settings.thresholds["D"] == 0.75
    assert settings.thresholds["B"] == 0.70
    # 10 items, 3 disagreements -> review; kappa of the window below 0.75 for task D
    a = list("xxxxxyyyyy")
    b = list("xxxxyyyyxx")
    its = items(a, b, task="D")
    rep = iaa_report("D", its, settings)
    assert rep is not None
    assert rep.kappa_rolling_10 == pytest.approx(cohen_kappa(a, b))
    assert rep.disagreement_rate == pytest.approx(0.3)
    assert rep.triggered_mini_review
    assert len(rep.contested_points) == 3  # no third labels
    summary = iaa_summary("D", its, settings)
    assert summary["below_threshold"] and summary["consecutive_windows_below"] == 1
    # same agreement under task A's laxer 0.65 threshold: kappa 0.4 is still below
    assert iaa_summary("A", items(a, b, task="A"), settings)["threshold"] == 0.65
    # perfect agreement on one label: kappa undefined -> no report, reason given
    same = items(["x"] * 5, ["x"] * 5)
    assert iaa_report("B", same, settings) is None
    assert iaa_summary("B", same, settings)["kappa_undefined_reason"] == "single label"


def test_consecutive_below():
    assert consecutive_below([0.9, 0.5, 0.6], 0.7) == 2
    assert consecutive_below([0.5, 0.9], 0.7) == 0
    assert consecutive_below([0.5, None, 0.6], 0.7) == 1
