"""Paired comparison (spec §14.2): self-comparison, pairing, and refusing different draws."""

from __future__ import annotations

import numpy as np
import pytest

from fks.metrics.stats.clustered_bootstrap import (
    Estimate,
    KtsSpace,
    draw_clusters,
    draws_key,
    fact_estimates,
    interval_record,
    kts_bootstrap,
    kts_estimates,
)
from fks.metrics.stats.compare import paired_comparison, paired_delta


def fact_set(sizes=(9, 12, 7, 10)):
    rel = np.array([f"r{r}" for r, n in enumerate(sizes) for _ in range(n)])
    ids = [f"fact_{i:06d}" for i in range(len(rel))]
    return ids, rel


def estimates(values, rel, ids, *, B=300, seed=9, space=None):
    draws = draw_clusters(rel, n_resamples=B, seed=seed)
    key = draws_key(ids, rel.tolist(), n_resamples=B, seed=seed)
    out = fact_estimates(draws, values, key=key)
    if space is not None:
        out.update(kts_estimates(kts_bootstrap(space, draws), key=key, n_facts=len(ids)))
    return out


def test_a_run_compared_with_itself_gives_zero_with_a_zero_width_interval():
    ids, rel = fact_set()
    rng = np.random.default_rng(0)
    vals = {"bcs": rng.uniform(size=len(ids)), "iss": rng.normal(size=len(ids))}
    vals["iss"][[3, 20]] = np.nan
    V = rng.normal(size=(len(ids), 3, 5))
    space = KtsSpace(np.array(ids), ("a", "b", "c"), (0,), np.ones((len(ids), 3), bool),
                     lambda layer: V)
    est = estimates(vals, rel, ids, space=space)
    out = paired_comparison(est, est)
    assert {"bcs", "bcs_relation_macro", "iss", "kts", "kts_geo", "kts_id",
            "kts[a__b]"} <= set(out)
    for name, d in out.items():
        assert d["point"] == 0.0, name
        assert d["low"] == 0.0 and d["high"] == 0.0, name
        assert d["n_valid_resamples"] == 300


def test_delta_is_the_point_difference_and_a_constant_shift_is_exact():
    ids, rel = fact_set()
    x = np.random.default_rng(1).uniform(size=len(ids))
    a = estimates({"bcs": x + 0.1}, rel, ids)
    b = estimates({"bcs": x}, rel, ids)
    d = paired_delta(a["bcs"], b["bcs"])
    assert d["point"] == pytest.approx(0.1)
    assert d["low"] == pytest.approx(0.1) and d["high"] == pytest.approx(0.1)
    assert d["a"] == pytest.approx(a["bcs"].point) and d["b"] == pytest.approx(b["bcs"].point)


def test_pairing_makes_the_difference_interval_narrower_than_either_model():
    ids, rel = fact_set((15, 20, 12, 18, 16))
    rng = np.random.default_rng(2)
    x = rng.uniform(size=len(ids))
    y = x + rng.normal(0.02, 0.02, size=len(ids))  # B tracks A fact by fact
    a, b = estimates({"bcs": x}, rel, ids), estimates({"bcs": y}, rel, ids)
    d = paired_delta(a["bcs"], b["bcs"])
    rec_a = interval_record(a["bcs"].point, a["bcs"].replicates, confidence=0.95)
    assert d["high"] - d["low"] < 0.5 * (rec_a["high"] - rec_a["low"])
    assert d["high"] < 0  # A is lower than B on every fact: the interval excludes 0


def test_estimates_from_different_draws_are_refused():
    ids, rel = fact_set()
    x = np.random.default_rng(3).uniform(size=len(ids))
    a = estimates({"bcs": x}, rel, ids, seed=1)
    b = estimates({"bcs": x}, rel, ids, seed=2)
    with pytest.raises(ValueError, match="same draws"):
        paired_delta(a["bcs"], b["bcs"])
    short = Estimate(0.5, np.zeros(10), "fact_mean", 1, 1, a["bcs"].draws_key)
    with pytest.raises(ValueError, match="shapes"):
        paired_delta(a["bcs"], short)
