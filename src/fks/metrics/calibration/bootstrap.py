r"""Fact-clustered percentile-bootstrap intervals of the calibration figures.

The queries of one fact are not independent (the text: "cluster-aware intervals for repeated
generations of one item"), so a replicate resamples *facts* with replacement, keeping all of a
drawn fact's rows, and recomputes each figure on the weighted sample. The draws come from the
shared core (:func:`fks.metrics.stats.bootstrap.resample_indices`), the interval is its
:func:`~fks.metrics.stats.bootstrap.percentile_interval`.

Vectorised with per-fact sufficient statistics: with ``w_b`` the ``(F,)`` multiplicities of
replicate ``b`` and, per fact, ``n_f`` rows, ``S^p_f = sum p``, ``S^y_f = sum y``,
``S^sq_f = sum (p - y)^2``, ``S^nll_f`` and per-bin sums ``N_fk``, ``P_fk``, ``Y_fk``:

* accuracy ``= w S^y / w n``, mean confidence ``= w S^p / w n``, Brier ``= w S^sq / w n``,
  NLL ``= w S^nll / w n``;
* ECE ``= sum_k |w (Y_k - P_k)| / w n`` (equal-width bins, fixed by value);
* AURC (optional, row-level): rows sorted by confidence once; per replicate the row weights
  are ``w[fact(row)]``, cumulated to the tie-group ends (:func:`_aurc_replicates`).

**Reuse within one run** (:class:`BootstrapCache`, optional). Every sample with ``F`` facts
draws the same facts for the same ``(B, seed)``, so the ``(B, F)`` multiplicities are drawn once
per ``F`` and kept; and a sample met twice (the same confidences, outcomes and facts, e.g. a
source's valid rows that are also the common support of the sources) gets its replicates from
the first computation. Either way the numbers are the ones a fresh computation gives, bit for
bit (the same draws, the same chunks, the same arithmetic).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

import numpy as np

from fks.metrics.calibration.core import (
    DEFAULT_NLL_EPS,
    _float32_values,
    _nll_terms,
    as_observations,
    bucketize_equal_width,
)
from fks.metrics.stats.bootstrap import DEFAULT_SEED, percentile_interval, resample_indices

__all__ = ["BootstrapCache", "fact_clustered_replicates", "fact_clustered_intervals",
           "per_bin_accuracy_intervals", "paired_difference_intervals", "replicates_with_point",
           "paired_from", "FIGURES", "PAIRED_FIGURES"]

#: the figures an interval is given for (AURC only when asked)
FIGURES = ("accuracy", "mean_confidence", "brier", "nll", "ece_equal_width", "aurc")


def _fact_weights(idx: np.ndarray, n_facts: int) -> np.ndarray:
    """``(B, F)`` multiplicities from ``(B, F)`` drawn fact indices."""
    b = idx.shape[0]
    flat = idx + (np.arange(b)[:, None] * n_facts)
    return np.bincount(flat.ravel(), minlength=b * n_facts).reshape(b, n_facts).astype(float)


def _per_fact(codes: np.ndarray, n_facts: int, values: np.ndarray) -> np.ndarray:
    return np.bincount(codes, weights=values, minlength=n_facts)


def _aurc_ranking(codes: np.ndarray, p32: np.ndarray, y: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rank a sample for :func:`_aurc_replicates` (done once per sample, not per chunk).

    Rows ranked by confidence (descending, stable); returns ``(ranked_codes (n,), ends (G,),
    error_codes (n_err,), errors_at_end (G,))``: the fact of each ranked row, the last rank of
    each tie group, the facts of the ranked rows with ``y = 0`` (in rank order), and how many of
    those lie at or before each group end.
    """
    order = np.argsort(-p32, kind="stable")
    ranked = p32[order]
    ends = np.flatnonzero(np.append(ranked[1:] != ranked[:-1], True))
    ranked_codes = codes[order]
    wrong = np.flatnonzero(y[order] == 0.0)
    return ranked_codes, ends, ranked_codes[wrong], np.searchsorted(wrong, ends, side="right")


def _aurc_replicates(w: np.ndarray, ranking: tuple[np.ndarray, ...]) -> np.ndarray:
    """AURC of each replicate ``(B,)`` from fact weights ``w`` ``(B, F)`` (integral values).

    Rows are ranked by confidence (descending); tie groups end where the value changes;
    ``C_g = W_g / W``, ``R_g = E_g / W_g`` (cumulated weights and weighted errors at group
    ends); ``AURC = sum_g (C_g - C_{g-1}) R_g``, a group of zero weight adding nothing.
    Weights and errors are integers, cumulated exactly in int32 (int64 when a replicate's
    total weight could reach 2**31); ``R_g = E_g / max(W_g, 1)`` is 0 where ``W_g = 0`` (then
    ``E_g = 0``). The float64 terms are summed by ``np.sum`` over each C-contiguous row of
    ``(B, G)`` (numpy's pairwise sum).
    """
    ranked_codes, ends, error_codes, errors_at_end = ranking
    b = w.shape[0]
    bound = float(w.max(initial=0.0)) * ranked_codes.size  # >= any replicate's total weight
    wi = w.astype(np.int32 if bound < 2**31 else np.int64)
    cum_w = np.take(wi, ranked_codes, axis=1)  # (B, n): the weight of each ranked row
    np.cumsum(cum_w, axis=1, out=cum_w)
    if ends.size != ranked_codes.size:  # ties: keep the group ends only
        cum_w = np.take(cum_w, ends, axis=1)
    cum_e = np.empty((b, error_codes.size + 1), dtype=wi.dtype)  # column j: first j errors
    cum_e[:, 0] = 0
    np.take(wi, error_codes, axis=1, out=cum_e[:, 1:])
    np.cumsum(cum_e[:, 1:], axis=1, out=cum_e[:, 1:])
    errors = np.take(cum_e, errors_at_end, axis=1)  # (B, G): E_g
    step = np.empty_like(cum_w)
    step[:, 0] = cum_w[:, 0]
    np.subtract(cum_w[:, 1:], cum_w[:, :-1], out=step[:, 1:])
    total = cum_w[:, -1].astype(float)
    terms = np.divide(errors, np.maximum(cum_w, 1, out=cum_w))  # R_g, float64 (B, G)
    np.multiply(step, terms, out=terms)
    return np.sum(terms, axis=1) / total


class BootstrapCache:
    """Fact draws and replicates kept for reuse within one run (module docstring).

    :meth:`weights` holds the ``(B, F)`` multiplicities of each ``(F, B, seed)`` in the
    smallest unsigned integer type that fits (LRU, at most ``max_weight_bytes`` in all; a
    matrix evicted is drawn again when asked for, identically); the replicates of
    :func:`fact_clustered_replicates` with AURC (the ``O(B n)`` ones; without AURC a replicate
    is one small matrix product once the draws are kept) are held by a digest of the sample and
    every argument (read-only arrays). A seed of None (fresh entropy) is never cached.
    """

    def __init__(self, max_weight_bytes: int = 128 * 2**20) -> None:
        self.max_weight_bytes = max_weight_bytes
        self._weights: OrderedDict[tuple[int, int, int], np.ndarray] = OrderedDict()
        self._replicates: dict[bytes, dict[str, np.ndarray]] = {}

    def weights(self, n_facts: int, n_resamples: int, seed: int, chunk: int) -> np.ndarray:
        """``(B, F)`` multiplicities of ``resample_indices(F, B, rng=default_rng(seed))``.

        Drawn ``chunk`` replicates at a time from one generator (the draws do not depend on
        the chunk size, which only bounds the memory of one draw); read-only.
        """
        key = (n_facts, n_resamples, seed)
        hit = self._weights.get(key)
        if hit is not None:
            self._weights.move_to_end(key)
            return hit
        rng = np.random.default_rng(seed)
        parts = [_fact_weights(resample_indices(n_facts, min(chunk, n_resamples - start),
                                                rng=rng), n_facts).astype(np.int64)
                 for start in range(0, n_resamples, chunk)]
        top = max(int(part.max()) for part in parts)
        out = np.concatenate(parts).astype(np.min_scalar_type(top))
        out.setflags(write=False)
        self._weights[key] = out
        while (sum(v.nbytes for v in self._weights.values()) > self.max_weight_bytes
               and len(self._weights) > 1):
            self._weights.popitem(last=False)
        return out

    @staticmethod
    def sample_key(*arrays: np.ndarray, **args: Any) -> bytes:
        """Digest of the arrays (dtype, shape, bytes) and the arguments."""
        h = hashlib.blake2b(digest_size=20)
        for a in arrays:
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(np.ascontiguousarray(a).tobytes())
        h.update(repr(sorted(args.items())).encode())
        return h.digest()

    def get(self, key: bytes) -> dict[str, np.ndarray] | None:
        """Return the replicates kept under ``key``, or None."""
        return self._replicates.get(key)

    def put(self, key: bytes, reps: dict[str, np.ndarray]) -> None:
        """Keep ``reps`` (made read-only) under ``key``."""
        for v in reps.values():
            v.setflags(write=False)
        self._replicates[key] = reps


def fact_clustered_replicates(
    confidence: Any, correct: Any, fact_codes: Any, *, bins: int = 10,
    nll_eps: float = DEFAULT_NLL_EPS, n_resamples: int = 1000,
    seed: int | None = DEFAULT_SEED, with_aurc: bool = False,
    max_chunk_elements: int = 4_000_000, cache: BootstrapCache | None = None,
) -> dict[str, np.ndarray]:
    """Bootstrap replicates ``(B,)`` of each figure, resampling facts (module docstring).

    Replicate ``b`` is the figure on the sample made of the facts drawn in row ``b`` of
    ``resample_indices(F, B, rng=default_rng(seed))`` (drawn chunk by chunk from one
    generator, so the draws do not depend on the chunk size). Arguments as
    :func:`fact_clustered_intervals`; ``cache`` reuses draws and replicates within a run
    (the result is the same with or without it; its arrays are then read-only).
    """
    conf, corr = as_observations(confidence, correct)
    codes = np.asarray(fact_codes, dtype=np.int64)
    if codes.shape != conf.shape:
        raise ValueError(f"fact_codes must be aligned with confidence; found shapes "
                         f"{codes.shape} and {conf.shape}")
    n_facts = int(codes.max()) + 1
    if codes.min() < 0 or np.unique(codes).size != n_facts:
        raise ValueError("fact_codes must use every code 0..F-1")
    if cache is not None and seed is not None and with_aurc:  # the O(B n) ones are kept
        key = cache.sample_key(conf, corr, codes, bins=bins, nll_eps=nll_eps,
                               n_resamples=n_resamples, seed=seed, with_aurc=with_aurc,
                               max_chunk_elements=max_chunk_elements)
        hit = cache.get(key)
        if hit is None:
            hit = _replicates(conf, corr, codes, n_facts, bins=bins, nll_eps=nll_eps,
                              n_resamples=n_resamples, seed=seed, with_aurc=with_aurc,
                              max_chunk_elements=max_chunk_elements, cache=cache)
            cache.put(key, hit)
        return dict(hit)
    return _replicates(conf, corr, codes, n_facts, bins=bins, nll_eps=nll_eps,
                       n_resamples=n_resamples, seed=seed, with_aurc=with_aurc,
                       max_chunk_elements=max_chunk_elements, cache=cache)


def _replicates(conf: np.ndarray, corr: np.ndarray, codes: np.ndarray, n_facts: int, *,
                bins: int, nll_eps: float, n_resamples: int, seed: int | None,
                with_aurc: bool, max_chunk_elements: int, cache: BootstrapCache | None
                ) -> dict[str, np.ndarray]:
    """Compute :func:`fact_clustered_replicates` on a validated sample."""
    p32 = _float32_values(conf)
    bucket = bucketize_equal_width(p32, bins)
    stats = np.stack([
        _per_fact(codes, n_facts, np.ones_like(corr)), _per_fact(codes, n_facts, corr),
        _per_fact(codes, n_facts, p32), _per_fact(codes, n_facts, (p32 - corr) ** 2),
        _per_fact(codes, n_facts, _nll_terms(conf, corr, nll_eps)),
    ], axis=1)  # (F, 5)
    cell = codes * bins + bucket
    bin_y = np.bincount(cell, weights=corr, minlength=n_facts * bins).reshape(n_facts, bins)
    bin_p = np.bincount(cell, weights=p32, minlength=n_facts * bins).reshape(n_facts, bins)
    table = np.hstack([stats, bin_y - bin_p])  # (F, 5 + K): one matrix product per chunk
    figures = [f for f in FIGURES if with_aurc or f != "aurc"]
    reps = {f: np.empty(n_resamples) for f in figures}
    per_rep = max(n_facts, conf.size if with_aurc else 0, 1)
    chunk = max(1, min(n_resamples, max_chunk_elements // per_rep))
    if cache is not None and seed is not None:
        drawn = cache.weights(n_facts, n_resamples, seed, chunk)

        def weights(start: int, stop: int) -> np.ndarray:
            return drawn[start:stop].astype(float)
    else:
        rng = np.random.default_rng(seed)

        def weights(start: int, stop: int) -> np.ndarray:  # chunk by chunk, in order
            return _fact_weights(resample_indices(n_facts, stop - start, rng=rng), n_facts)
    ranking = _aurc_ranking(codes, p32, corr) if with_aurc else None
    for start in range(0, n_resamples, chunk):
        stop = min(start + chunk, n_resamples)
        w = weights(start, stop)  # (b, F) float multiplicities
        tot = w @ table  # (b, 5 + K)
        n = tot[:, 0]
        reps["accuracy"][start:stop] = tot[:, 1] / n
        reps["mean_confidence"][start:stop] = tot[:, 2] / n
        reps["brier"][start:stop] = tot[:, 3] / n
        reps["nll"][start:stop] = tot[:, 4] / n
        reps["ece_equal_width"][start:stop] = np.abs(tot[:, 5:]).sum(axis=1) / n
        if ranking is not None:
            reps["aurc"][start:stop] = _aurc_replicates(w, ranking)
    return reps


def fact_clustered_intervals(
    confidence: Any, correct: Any, fact_codes: Any, *, bins: int = 10,
    nll_eps: float = DEFAULT_NLL_EPS, n_resamples: int = 1000, level: float = 0.95,
    seed: int | None = DEFAULT_SEED, with_aurc: bool = False,
    max_chunk_elements: int = 4_000_000, cache: BootstrapCache | None = None,
) -> dict[str, Any]:
    """Percentile intervals of the calibration figures, resampling facts.

    Args:
        confidence: ``(n,)`` confidences of the valid sample (see :func:`as_observations`).
        correct: ``(n,)`` outcomes 0/1.
        fact_codes: ``(n,)`` ints ``0..F-1``, the fact of each row (every code must occur).
        bins: ``K`` of the equal-width ECE.
        nll_eps: NLL clipping threshold.
        n_resamples: number of replicates B (``metrics.yaml: bootstrap``).
        level: interval coverage (``1 - alpha``).
        seed: seed of ``np.random.default_rng``.
        with_aurc: also an interval for AURC (row-level work, ``O(B n)``).
        max_chunk_elements: bound on the numbers held per chunk of replicates.
        cache: reuse draws and replicates within a run (:class:`BootstrapCache`; the same
            result without it).

    Returns:
        ``{"method", "n_facts", "n_resamples", "level", "seed", figure: {"low", "high"}}``
        for each figure of :data:`FIGURES` computed.
    """
    reps = fact_clustered_replicates(
        confidence, correct, fact_codes, bins=bins, nll_eps=nll_eps, n_resamples=n_resamples,
        seed=seed, with_aurc=with_aurc, max_chunk_elements=max_chunk_elements, cache=cache)
    out: dict[str, Any] = {"method": "percentile bootstrap resampling facts (all rows of a "
                                     "drawn fact kept)",
                           "n_facts": int(np.max(np.asarray(fact_codes))) + 1,
                           "n_resamples": n_resamples, "level": level, "seed": seed}
    for f, values in reps.items():
        low, high = percentile_interval(values, confidence=level)
        out[f] = {"low": low, "high": high}
    return out


def per_bin_accuracy_intervals(
    bucket: Any, correct: Any, fact_codes: Any, bins: int, *, level: float = 0.95,
    min_facts: int = 1,
) -> dict[str, list]:
    r"""Fact-clustered intervals of each bin's accuracy: Wilson at the effective sample size.

    The queries of one fact are not independent. Bin ``k`` holds ``m_f`` rows of fact ``f``;
    its effective number of independent observations when a fact's rows all agree (the worst
    case, intra-fact correlation 1) is Kish's ``n_eff = (sum_f m_f)^2 / sum_f m_f^2`` (the
    number of facts when they weigh the same). The interval is the Wilson score interval of
    the bin's accuracy ``p`` at ``n_eff`` instead of the row count ``n``. Since the design effect
    ``1 + (m_w - 1) rho`` never exceeds ``n / n_eff`` for ``rho <= 1``, this is conservative for
    any intra-fact correlation, and it does not shrink when a fact is simply asked more often
    (repeating each fact's rows leaves ``n_eff`` unchanged). It is never zero-width, also for a
    bin whose rows are all correct (a percentile bootstrap would say ``[1, 1]`` there). A bin
    with fewer than ``min_facts`` distinct facts gets no interval (null).

    Returns:
        ``{"low", "high", "n_facts", "n_effective"}``, lists of length ``bins``.
    """
    from fks.metrics.calibration.core import wilson_interval

    b_idx = np.asarray(bucket, dtype=np.int64)
    y = np.asarray(correct, dtype=float)
    codes = np.asarray(fact_codes, dtype=np.int64)
    if not (b_idx.shape == y.shape == codes.shape):
        raise ValueError("bucket, correct and fact_codes must be aligned")
    n_facts = int(codes.max()) + 1
    cell = codes * bins + b_idx
    cnt = np.bincount(cell, minlength=n_facts * bins).reshape(n_facts, bins).astype(float)
    ok = np.bincount(cell, weights=y, minlength=n_facts * bins).reshape(n_facts, bins)
    facts_per_bin = (cnt > 0).sum(axis=0)
    n = cnt.sum(axis=0)
    sq = (cnt ** 2).sum(axis=0)
    n_eff = np.divide(n ** 2, sq, out=np.zeros(bins), where=sq > 0)
    acc = np.divide(ok.sum(axis=0), n, out=np.zeros(bins), where=n > 0)
    lo, hi = wilson_interval(acc * np.maximum(n_eff, 1.0), np.maximum(n_eff, 1.0), level=level)
    lo, hi = np.minimum(lo, acc), np.maximum(hi, acc)  # rounding at p = 0 or 1
    show = (facts_per_bin > 0) & (facts_per_bin >= min_facts)
    return {"low": [float(v) if k else None for v, k in zip(lo, show, strict=True)],
            "high": [float(v) if k else None for v, k in zip(hi, show, strict=True)],
            "n_facts": facts_per_bin.astype(int).tolist(),
            "n_effective": [float(v) if c else None for v, c in zip(n_eff, n > 0, strict=True)]}


#: the figures a paired difference is given for
PAIRED_FIGURES = ("mean_confidence", "brier", "nll", "ece_equal_width", "aurc")


def replicates_with_point(
    confidence: Any, correct: Any, fact_codes: Any, *, bins: int = 10,
    nll_eps: float = DEFAULT_NLL_EPS, n_resamples: int = 1000,
    seed: int | None = DEFAULT_SEED, cache: BootstrapCache | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Fact-clustered replicates (AURC included) and the point value of each paired figure.

    Two calls with the same ``fact_codes`` (same number of facts) and ``seed`` draw the same
    facts in every replicate, so their replicates can be differenced (:func:`paired_from`).
    ``cache``: as :func:`fact_clustered_replicates`.
    """
    from fks.metrics.calibration.core import aurc, calibration_summary, nll_score

    reps = fact_clustered_replicates(confidence, correct, fact_codes, bins=bins,
                                     nll_eps=nll_eps, n_resamples=n_resamples, seed=seed,
                                     with_aurc=True, cache=cache)
    core = calibration_summary(confidence, correct, bins=bins)
    point = {"mean_confidence": float(np.mean(_float32_values(
                 np.asarray(confidence, dtype=float)))),
             "brier": core["brier"], "nll": nll_score(confidence, correct, eps=nll_eps)["nll"],
             "ece_equal_width": core["ece"], "aurc": aurc(core["coverage"], core["risk"])}
    return reps, point


def paired_from(a: tuple[dict[str, np.ndarray], dict[str, float]],
                b: tuple[dict[str, np.ndarray], dict[str, float]], *, n: int, n_facts: int,
                n_resamples: int, level: float, seed: int | None) -> dict[str, Any]:
    """Interval of ``a - b`` from two :func:`replicates_with_point` results on the same draws."""
    (ra, pa), (rb, pb) = a, b
    out: dict[str, Any] = {
        "method": "paired percentile bootstrap resampling facts: each replicate draws facts "
                  "once and evaluates both confidences on that draw; interval of a - b",
        "n": int(n), "n_facts": int(n_facts), "n_resamples": n_resamples, "level": level,
        "seed": seed}
    for f in PAIRED_FIGURES:
        low, high = percentile_interval(ra[f] - rb[f], confidence=level)
        out[f] = {"a": pa[f], "b": pb[f], "difference": pa[f] - pb[f], "low": low,
                  "high": high, "excludes_zero": bool(low > 0 or high < 0)}
    return out


def paired_difference_intervals(
    confidence_a: Any, confidence_b: Any, correct: Any, fact_codes: Any, *,
    correct_b: Any = None, bins: int = 10, nll_eps: float = DEFAULT_NLL_EPS,
    n_resamples: int = 1000, level: float = 0.95, seed: int | None = DEFAULT_SEED,
) -> dict[str, Any]:
    r"""Paired, fact-clustered intervals of ``figure(a) - figure(b)`` on the same rows.

    Both confidences score the same rows (same outcome unless ``correct_b`` is given, same
    facts). Each replicate draws facts once and evaluates both on that draw (same seed, same
    fact count: :func:`fact_clustered_replicates` draws identically), so the interval of the
    difference keeps the pairing. A difference whose interval excludes 0 is marked
    ``excludes_zero``.

    Returns:
        ``{"method", "n", "n_facts", "n_resamples", "level", "seed", figure: {"a", "b",
        "difference", "low", "high", "excludes_zero"}}`` for :data:`PAIRED_FIGURES`.
    """
    codes = np.asarray(fact_codes, dtype=np.int64)
    kw = {"bins": bins, "nll_eps": nll_eps, "n_resamples": n_resamples, "seed": seed}
    a = replicates_with_point(confidence_a, correct, codes, **kw)
    b = replicates_with_point(confidence_b, correct if correct_b is None else correct_b,
                              codes, **kw)
    return paired_from(a, b, n=codes.size, n_facts=int(codes.max()) + 1,
                       n_resamples=n_resamples, level=level, seed=seed)
