r"""The shared percentile-bootstrap core (vectorised with numpy).

Every interval fks reports is a *percentile* bootstrap interval (protocol §14.1, EvalHarness
§4.2):

.. math::

    CI = [\operatorname{percentile}_{\alpha/2}(\hat\theta^*),
          \operatorname{percentile}_{1-\alpha/2}(\hat\theta^*)]

where :math:`\hat\theta^*_b` is the statistic recomputed on the :math:`b`-th resample drawn
with replacement, :math:`B = 1000` resamples and :math:`1-\alpha = 0.95` by default.

The pieces are kept apart so that the clustered bootstrap of the main metrics can reuse them:

* :func:`resample_indices` -- the ``(B, n)`` matrix of row indices drawn with replacement;
* :func:`percentile_interval` -- the interval of a vector of replicates;
* :func:`percentile_bootstrap` -- point estimate and interval of a statistic of one sample;
* :func:`bootstrap_bandwidth` -- EvalHarness §4.2 bandwidth ``(CI_up - CI_low) / 2``.

A statistic is a function ``statistic(x, axis=-1)`` reducing the last axis, like
``np.mean``/``np.median``: called on the ``(B, n)`` resample matrix it returns ``B`` replicates
at once (the vectorised path), called on the ``(n,)`` sample it returns the point estimate.
Resamples are drawn in chunks of at most ``max_chunk_elements`` numbers, so memory stays bounded
for large samples; the draws (and so the result) do not depend on the chunk size.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_SEED",
    "resample_indices",
    "percentile_interval",
    "percentile_bootstrap",
    "bootstrap_bandwidth",
]

#: The project-wide bootstrap seed (``metrics.yaml: bootstrap.seed``).
DEFAULT_SEED = 20260101

Statistic = Callable[..., Any]


def _check_settings(n_resamples: int, confidence: float) -> None:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int | np.integer):
        raise ValueError(f"n_resamples must be an integer; found {n_resamples!r}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1; found {n_resamples}")
    if not (isinstance(confidence, float | int) and 0.0 < float(confidence) < 1.0):
        raise ValueError(f"confidence must lie strictly between 0 and 1; found {confidence!r}")


def _as_sample(values: Any) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"values must be one-dimensional; found shape {arr.shape}")
    if arr.size == 0:
        raise ValueError("values is empty; a bootstrap needs at least one observation")
    if not np.all(np.isfinite(arr)):
        bad = arr[~np.isfinite(arr)][0]
        raise ValueError(f"values must be finite; found {bad!r}")
    return arr


def resample_indices(n: int, n_resamples: int, *, rng: np.random.Generator) -> np.ndarray:
    """Draw a ``(n_resamples, n)`` int matrix of indices into ``range(n)``, with replacement.

    Args:
        n: sample size (>= 1).
        n_resamples: number of resamples B (>= 1).
        rng: the generator to draw from (its state advances).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1; found {n}")
    _check_settings(n_resamples, 0.5)
    return rng.integers(0, n, size=(n_resamples, n))


def percentile_interval(replicates: Any, *, confidence: float = 0.95) -> tuple[float, float]:
    """Percentile interval ``[q_{alpha/2}, q_{1-alpha/2}]`` of bootstrap replicates.

    Args:
        replicates: shape ``(B,)``, the statistic on each resample; must be finite.
        confidence: ``1 - alpha``.

    Returns:
        ``(low, high)`` with numpy's default (linear) percentile interpolation.
    """
    _check_settings(1, confidence)
    reps = np.asarray(replicates, dtype=float)
    if reps.ndim != 1 or reps.size == 0:
        raise ValueError(f"replicates must be a non-empty vector; found shape {reps.shape}")
    if not np.all(np.isfinite(reps)):
        raise ValueError("a bootstrap replicate is not finite (the statistic returned NaN/inf)")
    alpha = 1.0 - float(confidence)
    low, high = np.percentile(reps, [100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)])
    return float(low), float(high)


def percentile_bootstrap(
    values: Any,
    statistic: Statistic = np.mean,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | None = DEFAULT_SEED,
    max_chunk_elements: int = 4_000_000,
) -> tuple[float, float, float]:
    """Point estimate and percentile-bootstrap interval of ``statistic`` on ``values``.

    Args:
        values: shape ``(n,)``, finite numbers (n >= 1).
        statistic: ``statistic(x, axis=-1)`` reducing the last axis (``np.mean``, ``np.median``
            or any function written the same way).
        n_resamples: number of resamples B (EvalHarness §4.2 default 1000).
        confidence: ``1 - alpha`` (default 0.95).
        seed: seed of ``np.random.default_rng``; the same seed gives the same interval.
        max_chunk_elements: bound on ``B_chunk * n`` numbers held at once.

    Returns:
        ``(point, low, high)``: the statistic on the sample and the interval bounds.

    Raises:
        ValueError: empty, non-finite or non-1-D ``values``; bad ``n_resamples`` or
            ``confidence``; a statistic that does not return one finite value per resample.

    >>> point, low, high = percentile_bootstrap([1.0, 2.0, 3.0, 4.0], seed=0)
    >>> point, low <= point <= high
    (2.5, True)
    """
    _check_settings(n_resamples, confidence)
    sample = _as_sample(values)
    n = sample.size
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_resamples, max_chunk_elements // max(n, 1)))
    replicates = np.empty(n_resamples, dtype=float)
    for start in range(0, n_resamples, chunk):
        stop = min(start + chunk, n_resamples)
        idx = rng.integers(0, n, size=(stop - start, n))
        out = np.asarray(statistic(sample[idx], axis=-1), dtype=float)
        if out.shape != (stop - start,):
            raise ValueError(
                "statistic must reduce the last axis (statistic(x, axis=-1)); "
                f"got shape {out.shape} for input shape {(stop - start, n)}"
            )
        replicates[start:stop] = out
    point = float(np.asarray(statistic(sample, axis=-1), dtype=float))
    low, high = percentile_interval(replicates, confidence=confidence)
    return point, low, high


def bootstrap_bandwidth(
    values: Any,
    statistic: Statistic = np.mean,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | None = DEFAULT_SEED,
) -> float:
    """EvalHarness §4.2 bandwidth: half the width of the percentile-bootstrap interval.

    ``bandwidth = (CI_up - CI_low) / 2``, reported as ``bandwidth: ±X`` where a bucket holds
    fewer than 30 cases. Same arguments as :func:`percentile_bootstrap`.

    >>> bootstrap_bandwidth([0.5, 0.5, 0.5])
    0.0
    """
    _, low, high = percentile_bootstrap(
        values, statistic, n_resamples=n_resamples, confidence=confidence, seed=seed
    )
    return (high - low) / 2.0
