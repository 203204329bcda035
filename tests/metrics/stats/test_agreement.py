"""Agreement statistics (spec §18.6): Cohen's kappa and Krippendorff's alpha (nominal)."""

from __future__ import annotations

import math
import random

import pytest
from sklearn.metrics import cohen_kappa_score

from fks.metrics.stats import (
    UndefinedStatisticWarning,
    cohen_kappa,
    krippendorff_alpha_nominal,
)

LABELS = ["CORRECT", "INCORRECT", "ABSTAIN", "AMBIGUOUS", "REVIEW_REQUIRED"]


@pytest.mark.parametrize("seed", range(20))
def test_kappa_matches_sklearn(seed):
    rng = random.Random(seed)
    for _ in range(100):  # redraw the (rare) undefined case: both raters use one label
        n = rng.randint(2, 200)
        k = rng.randint(2, 5)
        a = [rng.choice(LABELS[:k]) for _ in range(n)]
        agree = rng.random()
        b = [x if rng.random() < agree else rng.choice(LABELS[:k]) for x in a]
        if not (len(set(a)) == 1 and set(a) == set(b)):
            break
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)


def test_kappa_properties():
    a = ["y", "y", "n", "n", "y"]
    assert cohen_kappa(a, a) == 1.0
    assert cohen_kappa(a, list(reversed(a))) == cohen_kappa(list(reversed(a)), a)  # symmetric
    assert cohen_kappa(["y", "n"], ["n", "y"]) == -1.0


def test_kappa_undefined_and_invalid_inputs():
    with pytest.warns(UndefinedStatisticWarning):
        assert math.isnan(cohen_kappa(["y", "y"], ["y", "y"]))
    with pytest.raises(ValueError, match="length"):
        cohen_kappa(["y"], ["y", "n"])
    with pytest.raises(ValueError, match="no items"):
        cohen_kappa([], [])
    with pytest.raises(ValueError, match="missing"):
        cohen_kappa(["y", None], ["y", "n"])
    with pytest.raises(TypeError, match="string"):
        cohen_kappa("yn", "yn")


def test_alpha_published_example():
    """Krippendorff (2011), 'Computing Krippendorff's alpha-reliability', example C:
    4 observers, 12 units, missing values; nominal alpha = 0.743."""
    n = None
    data = [[1, 2, 3, 3, 2, 1, 4, 1, 2, n, n, n],
            [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, n, 3],
            [n, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, n],
            [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, n]]
    assert krippendorff_alpha_nominal(data) == pytest.approx(0.743, abs=5e-4)


@pytest.mark.parametrize("seed", range(10))
def test_alpha_two_coders_is_scotts_pi_with_small_sample_correction(seed):
    """Two coders, no missing values: 1 - alpha = (1 - pi) (n - 1) / n, n = 2N values."""
    rng = random.Random(seed)
    for _ in range(100):  # redraw the (rare) undefined case: a single value overall
        N = rng.randint(3, 80)
        a = [rng.choice("abc") for _ in range(N)]
        b = [x if rng.random() < 0.6 else rng.choice("abc") for x in a]
        pooled = a + b
        if len(set(pooled)) > 1:
            break
    p_o = sum(x == y for x, y in zip(a, b, strict=True)) / N
    p_e = sum((pooled.count(c) / (2 * N)) ** 2 for c in set(pooled))
    pi = (p_o - p_e) / (1 - p_e)
    alpha = krippendorff_alpha_nominal([a, b])
    assert 1 - alpha == pytest.approx((1 - pi) * (2 * N - 1) / (2 * N), abs=1e-12)


def test_alpha_undefined_and_invalid():
    with pytest.warns(UndefinedStatisticWarning):
        assert math.isnan(krippendorff_alpha_nominal([["a", "a"], ["a", "a"]]))
    with pytest.warns(UndefinedStatisticWarning):
        assert math.isnan(krippendorff_alpha_nominal([["a", None], [None, "b"]]))
    with pytest.raises(ValueError, match="different numbers"):
        krippendorff_alpha_nominal([["a"], ["a", "b"]])
    with pytest.raises(ValueError, match="no coders"):
        krippendorff_alpha_nominal([])
    assert krippendorff_alpha_nominal([["a", "b", "a"], ["a", "b", "a"]]) == 1.0
