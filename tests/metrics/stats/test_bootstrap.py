"""The shared percentile-bootstrap core: correctness, coverage, determinism, validation."""

from __future__ import annotations

import numpy as np
import pytest

from fks.metrics.stats.bootstrap import (
    bootstrap_bandwidth,
    percentile_bootstrap,
    percentile_interval,
    resample_indices,
)


def test_matches_a_direct_resampling_loop():
    rng = np.random.default_rng(7)
    x = rng.normal(size=40)
    point, low, high = percentile_bootstrap(x, n_resamples=300, confidence=0.9, seed=11)
    # the same draws, written out by hand: B x n indices from default_rng(11)
    idx = np.random.default_rng(11).integers(0, 40, size=(300, 40))
    reps = x[idx].mean(axis=1)
    assert point == pytest.approx(x.mean())
    assert low == pytest.approx(np.percentile(reps, 5.0))
    assert high == pytest.approx(np.percentile(reps, 95.0))


def test_chunking_does_not_change_the_result():
    x = np.arange(37, dtype=float) ** 1.5
    whole = percentile_bootstrap(x, np.median, n_resamples=257, seed=3)
    chunked = percentile_bootstrap(x, np.median, n_resamples=257, seed=3, max_chunk_elements=100)
    assert whole == chunked


def test_deterministic_per_seed_and_seed_sensitive():
    x = np.random.default_rng(0).exponential(size=30)
    a = percentile_bootstrap(x, seed=5)
    assert a == percentile_bootstrap(x, seed=5)
    assert a[1:] != percentile_bootstrap(x, seed=6)[1:]


def test_coverage_on_a_known_distribution():
    # 95 % intervals for the mean of N(0, 1) samples of size 60 should cover 0 about 95 % of
    # the time (the percentile bootstrap runs slightly under nominal at this n).
    rng = np.random.default_rng(2026)
    hits = 0
    trials = 300
    for t in range(trials):
        x = rng.normal(size=60)
        _, low, high = percentile_bootstrap(x, n_resamples=400, seed=t)
        hits += low <= 0.0 <= high
    coverage = hits / trials
    assert 0.88 <= coverage <= 0.99


def test_interval_narrows_with_sample_size():
    rng = np.random.default_rng(1)
    small = bootstrap_bandwidth(rng.normal(size=20), seed=1)
    large = bootstrap_bandwidth(rng.normal(size=2000), seed=1)
    # standard error shrinks like 1/sqrt(n): 10x narrower, give or take
    assert 5 < small / large < 20


def test_bandwidth_is_half_the_interval_width():
    x = [0.1, 0.4, 0.35, 0.8, 0.95, 0.2]
    _, low, high = percentile_bootstrap(x, seed=9)
    assert bootstrap_bandwidth(x, seed=9) == pytest.approx((high - low) / 2)
    assert bootstrap_bandwidth([0.3, 0.3, 0.3]) == 0.0


def test_custom_vectorised_statistic():
    x = np.array([0.1, 0.5, 0.7, 0.9])

    def share_below(v, axis=-1):
        return np.mean(v <= 0.5, axis=axis)

    point, low, high = percentile_bootstrap(x, share_below, seed=4)
    assert point == 0.5
    assert 0.0 <= low <= point <= high <= 1.0


def test_percentile_interval_and_resample_indices():
    reps = np.arange(101, dtype=float)
    assert percentile_interval(reps, confidence=0.9) == pytest.approx((5.0, 95.0))
    idx = resample_indices(5, 4, rng=np.random.default_rng(0))
    assert idx.shape == (4, 5) and idx.min() >= 0 and idx.max() < 5


@pytest.mark.parametrize(
    "values, kwargs, match",
    [
        ([], {}, "empty"),
        ([1.0, float("nan")], {}, "finite"),
        ([[1.0, 2.0]], {}, "one-dimensional"),
        ([1.0, 2.0], {"confidence": 1.0}, "confidence"),
        ([1.0, 2.0], {"confidence": 0.0}, "confidence"),
        ([1.0, 2.0], {"n_resamples": 0}, "n_resamples"),
        ([1.0, 2.0], {"n_resamples": 10.5}, "n_resamples"),
        ([1.0, 2.0], {"n_resamples": True}, "n_resamples"),
    ],
)
def test_input_validation(values, kwargs, match):
    with pytest.raises(ValueError, match=match):
        percentile_bootstrap(values, **kwargs)


def test_statistic_must_reduce_the_last_axis():
    with pytest.raises(ValueError, match="reduce the last axis"):
        percentile_bootstrap([1.0, 2.0, 3.0], lambda x, axis=-1: x)
    with pytest.raises(ValueError, match="not finite"):
        percentile_interval([1.0, float("inf")])
