r"""Paired comparison of two models on the same draws (spec §14.2).

For a figure ``M`` and models A and B scored on the same fact set, every bootstrap replicate
uses the *same* relation and fact draws for both models
(:mod:`fks.metrics.stats.clustered_bootstrap`), so the replicate differences

.. math::

    \Delta^*_b = M_A(\text{draw}_b) - M_B(\text{draw}_b)

carry the pairing: facts that are hard for both models move both figures together and the
difference's interval is narrower than the two intervals would suggest. The point difference
is ``M_A - M_B`` on the original sample; the interval is the percentile interval of
``Delta^*`` (replicates where either figure is undefined are dropped and counted).

Comparing a run with itself gives ``Delta = 0`` with a zero-width interval (every replicate
difference is exactly zero).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fks.metrics.stats.clustered_bootstrap import Estimate, interval_record

__all__ = ["paired_delta", "paired_comparison"]


def paired_delta(a: Estimate, b: Estimate, *, confidence: float = 0.95) -> dict[str, Any]:
    """Delta ``A - B`` and its paired percentile interval for one figure.

    Args:
        a: the figure for model A.
        b: the figure for model B, from the same draws.
        confidence: ``1 - alpha``.

    Returns:
        ``{"point", "low", "high", "n_valid_resamples", "a", "b", "aggregation"}`` where
        ``point`` is the difference (None when either figure is undefined).

    Raises:
        ValueError: the estimates come from different draws (their ``draws_key`` differ) or
            have different numbers of replicates.
    """
    if a.draws_key != b.draws_key:
        raise ValueError("a paired comparison needs the same draws for both models "
                         f"(draws {a.draws_key[:12]} != {b.draws_key[:12]})")
    if a.replicates.shape != b.replicates.shape:
        raise ValueError(f"replicate shapes differ: {a.replicates.shape} != "
                         f"{b.replicates.shape}")
    point = None if a.point is None or b.point is None else a.point - b.point
    reps = np.asarray(a.replicates, dtype=float) - np.asarray(b.replicates, dtype=float)
    return interval_record(point, reps, confidence=confidence, a=a.point, b=b.point,
                           aggregation=a.aggregation)


def paired_comparison(a: Mapping[str, Estimate], b: Mapping[str, Estimate], *,
                      confidence: float = 0.95) -> dict[str, dict[str, Any]]:
    """Apply :func:`paired_delta` to every figure both models have (in A's order)."""
    return {name: paired_delta(est, b[name], confidence=confidence)
            for name, est in a.items() if name in b}
