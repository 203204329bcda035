"""Recalibration: the fact-level hash split, temperature scaling, isotonic regression."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from fks.metrics.calibration import (
    SPLIT_SALT,
    apply_temperature,
    fit_isotonic,
    fit_temperature,
    recalibration_report,
    split_of_fact,
)
from fks.metrics.calibration.recalibration import split_mask


def _sample(n_facts=400, per_fact=3, temperature=2.5, seed=0):
    """Over-confident scores: observed p = sigmoid(z), truth ~ Bernoulli(sigmoid(z / T))."""
    rng = np.random.default_rng(seed)
    facts = [f"fact_{i:06d}" for i in range(n_facts) for _ in range(per_fact)]
    z = rng.normal(0.0, 3.0, size=len(facts))
    correct = (rng.random(len(facts)) < 1 / (1 + np.exp(-z / temperature))).astype(float)
    return 1 / (1 + np.exp(-z)), correct, facts


def test_split_is_the_documented_hash_rule_and_fact_level():
    for i in range(50):
        fid = f"fact_{i:06d}"
        u = int(hashlib.sha256(f"{SPLIT_SALT}:{fid}".encode()).hexdigest()[:16], 16) / 2**64
        assert split_of_fact(fid) == ("dev" if u < 0.5 else "test")
    ids = [f"fact_{i:06d}" for i in range(4000)]
    share = np.mean([split_of_fact(f, dev_fraction=0.3) == "dev" for f in ids])
    assert share == pytest.approx(0.3, abs=0.03)
    mask = split_mask(["fact_000001", "fact_000002", "fact_000001"])
    assert mask[0] == mask[2]
    with pytest.raises(ValueError, match="dev_fraction"):
        split_of_fact("fact_000001", dev_fraction=1.0)


def test_temperature_scaling_recovers_the_temperature():
    conf, correct, _ = _sample(n_facts=6000, per_fact=1, temperature=2.5)
    fit = fit_temperature(conf, correct)
    assert fit["temperature"] == pytest.approx(2.5, rel=0.12)
    assert fit["dev_nll_after"] < fit["dev_nll_before"] and not fit["at_bound"]
    p = apply_temperature([0.5, 0.9], 2.0)
    assert p[0] == pytest.approx(0.5) and p[1] == pytest.approx(1 / (1 + 9 ** -0.5))


def test_isotonic_is_sklearn_isotonic_regression():
    conf, correct, _ = _sample(n_facts=300, per_fact=1, seed=1)
    fit = fit_isotonic(conf, correct)
    ref = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(conf, correct)
    np.testing.assert_allclose(fit["y_thresholds"], ref.y_thresholds_)
    np.testing.assert_allclose(fit["model"].predict(conf), ref.predict(conf))


def test_recalibration_never_sees_the_test_split():
    conf, correct, facts = _sample()
    dev = split_mask(facts)
    base = recalibration_report(conf, correct, facts)
    assert base["status"] == "ok"
    assert base["split"]["n_dev"] == dev.sum() and base["split"]["n_test"] == (~dev).sum()
    # scramble every test row: the fitted maps stay exactly the same, the test figures move
    rng = np.random.default_rng(9)
    conf2, correct2 = conf.copy(), correct.copy()
    conf2[~dev] = rng.random((~dev).sum())
    correct2[~dev] = 1 - correct2[~dev]
    other = recalibration_report(conf2, correct2, facts)
    assert other["temperature"] == base["temperature"]
    assert other["isotonic"] == base["isotonic"]
    assert other["test"]["uncalibrated"] != base["test"]["uncalibrated"]
    # changing a dev row does change the fit
    conf3 = conf.copy()
    conf3[np.flatnonzero(dev)[:50]] = 0.999
    assert recalibration_report(conf3, correct, facts)["temperature"] != base["temperature"]


def test_recalibration_improves_an_overconfident_source_on_test():
    conf, correct, facts = _sample(n_facts=1500, per_fact=2)
    rep = recalibration_report(conf, correct, facts)
    test = rep["test"]
    assert test["temperature"]["nll"] < test["uncalibrated"]["nll"]
    assert test["temperature"]["ece_equal_width"] < test["uncalibrated"]["ece_equal_width"]
    assert test["isotonic"]["brier"] < test["uncalibrated"]["brier"]
    assert test["uncalibrated"]["n"] == rep["split"]["n_test"]
    # paired, fact-clustered intervals of recalibrated minus raw, on the test split
    paired = rep["paired_vs_uncalibrated"]
    assert paired["status"] == "ok" and paired["split"] == "test"
    nll = paired["temperature"]["nll"]
    assert nll["a"] == pytest.approx(test["temperature"]["nll"])
    assert nll["b"] == pytest.approx(test["uncalibrated"]["nll"])
    assert nll["difference"] < 0 and nll["high"] < 0 and nll["excludes_zero"]
    assert paired["temperature"]["n_facts"] == rep["split"]["n_test_facts"]
    few = recalibration_report(conf, correct, facts, min_facts=10_000)
    assert few["paired_vs_uncalibrated"]["status"] == "not_computed"


def test_recalibration_is_not_fitted_without_both_outcomes_on_dev():
    facts = [f"fact_{i:06d}" for i in range(40)]
    dev = split_mask(facts)
    correct = np.where(dev, 1.0, 0.0)  # every dev answer right
    rep = recalibration_report(np.full(40, 0.6), correct, facts)
    assert rep["status"] == "not_fitted" and "both" in rep["reason"]
    assert "temperature" not in rep
