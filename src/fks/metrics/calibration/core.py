r"""Calibration kernels: the reference ``calibration_summary`` and the figures around it.

Everything here is a pure function of two aligned vectors, ``confidence`` ``(n,)`` in
``[0, 1]`` and ``correct`` ``(n,)`` in ``{0, 1}`` (numpy arrays, torch tensors or sequences),
following the calibration text (``calibration_and_uncertainty.zh.md``):

* :func:`calibration_summary` -- the text's reference function (same arguments, same keys):
  equal-width ECE, Brier, and the tie-aware risk-coverage curve.
* :func:`nll_score` -- binary NLL with its clipping threshold and the number of clipped rows.
* :func:`reliability_table` -- ECE with its binning (equal-width or equal-mass), ``K``, the
  empty-bin policy, per-bin counts, accuracy, mean confidence and Wilson intervals (the
  reliability diagram's data).
* :func:`risk_coverage_curve`, :func:`aurc`, :func:`risk_at_coverage` -- selective prediction.
* :func:`calibration_report` -- all of the above for one (source, event) pair.

**Reference semantics.** The reference casts ``confidence`` to float32 (``.float()``) and bins
it with ``torch.bucketize(confidence, torch.linspace(0, 1, bins + 1)[1:-1])``: bin ``k`` is the
half-open interval ``(b_k, b_{k+1}]`` (the first bin also holds 0), with the boundaries as
float32 values exactly as ``torch.linspace`` computes them on the CPU
(:func:`equal_width_boundaries` reproduces them bit for bit). Ties in the risk-coverage curve
are ties between float32 values. fks keeps both rules -- binning and tie groups use the
float32 value of each confidence -- and accumulates every sum in float64. Validation is done
on the values as given (a confidence of ``1 + 1e-10`` is rejected, although float32 would
round it to 1). NLL is computed on the float64 values (float32 would turn ``1e-50`` into 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import NormalDist
from typing import Any, Literal

import numpy as np

__all__ = [
    "DEFAULT_NLL_EPS",
    "EMPTY_BIN_POLICY",
    "as_observations",
    "check_bins",
    "equal_width_boundaries",
    "bucketize_equal_width",
    "equal_mass_bins",
    "equal_mass_edges",
    "EQUAL_MASS_RULE",
    "calibration_summary",
    "brier_score",
    "nll_score",
    "wilson_interval",
    "reliability_table",
    "risk_coverage_curve",
    "aurc",
    "risk_at_coverage",
    "COVERAGE_VIEWS",
    "downsample_curve",
    "calibration_report",
]

#: NLL clips ``p`` to ``[eps, 1 - eps]``; the threshold is reported with every NLL.
DEFAULT_NLL_EPS = 1e-12
#: how an empty bin enters ECE (reported with every table)
EMPTY_BIN_POLICY = (
    "an empty bin contributes 0 to ECE; it is kept in the table with count 0 and null "
    "accuracy/confidence/interval"
)
Binning = Literal["equal_width", "equal_mass"]


# ================================================================================ validation
def _to_array(x: Any, name: str) -> np.ndarray:
    """Convert a numpy array, torch tensor or sequence to a numpy array (torch not imported).

    A torch tensor is detected by its type's module and converted with
    ``.detach().cpu().double().numpy()`` (``double`` keeps float32 values exact and handles
    bfloat16, which numpy lacks).
    """
    if type(x).__module__.split(".")[0] == "torch" and hasattr(x, "detach"):
        t = x.detach().cpu()
        if t.is_complex():
            raise ValueError(f"{name} must be real-valued; found a complex tensor ({t.dtype})")
        x = t.double().numpy()
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} cannot be read as an array: {exc}") from None
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{name} must hold numbers or booleans; found dtype {arr.dtype}")
    return arr


def check_bins(bins: Any) -> int:
    """Return ``bins`` when it is a positive integer (not a bool), else raise ValueError."""
    if isinstance(bins, bool) or not isinstance(bins, int | np.integer) or bins <= 0:
        raise ValueError(f"bins must be a positive integer; found {bins!r}")
    return int(bins)


def as_observations(confidence: Any, correct: Any) -> tuple[np.ndarray, np.ndarray]:
    """Validate and convert one calibration sample (the reference's checks, stricter).

    Args:
        confidence: ``(n,)`` probabilities of the event, in ``[0, 1]``.
        correct: ``(n,)`` outcomes, each 0 or 1 (bools, ints or floats).

    Returns:
        ``(confidence, correct)`` as float64 arrays ``(n,)``.

    Raises:
        ValueError: not 1-D, misaligned, empty, non-finite, out of range, or non-binary; the
            message names the offending index and value.
    """
    conf = _to_array(confidence, "confidence")
    corr = _to_array(correct, "correct")
    if conf.ndim != 1:
        raise ValueError(f"confidence must be one-dimensional; found shape {conf.shape}")
    if conf.shape != corr.shape:
        raise ValueError(f"confidence and correct must be aligned; found shapes {conf.shape} "
                         f"and {corr.shape}")
    if conf.size == 0:
        raise ValueError("empty input: calibration needs at least one (confidence, correct) pair")
    conf = conf.astype(np.float64)
    corr = corr.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(conf))
    if bad.size:
        raise ValueError(f"confidence[{bad[0]}] is not finite: {float(conf[bad[0]])!r}")
    bad = np.flatnonzero((conf < 0.0) | (conf > 1.0))
    if bad.size:
        raise ValueError(f"confidence[{bad[0]}] = {float(conf[bad[0]])!r} lies outside [0, 1]")
    bad = np.flatnonzero((corr != 0.0) & (corr != 1.0))
    if bad.size:
        raise ValueError(f"correct[{bad[0]}] = {float(corr[bad[0]])!r} is not binary (0 or 1)")
    return conf, corr


# ==================================================================================== binning
def equal_width_boundaries(bins: int) -> np.ndarray:
    """``torch.linspace(0, 1, bins + 1)`` on the CPU, bit for bit, as a float32 array.

    torch computes ``step = float32(1 / bins)`` and then ``start + step * i`` for the first
    half and ``end - step * (bins - i)`` for the second, each rounded once to float32 (the
    product and sum are formed exactly in float64 here: a float32 step times an index below
    2**29 is exact). Shape ``(bins + 1,)``.
    """
    bins = check_bins(bins)
    steps = bins + 1
    step = float(np.float32(1.0) / np.float32(bins))
    i = np.arange(steps, dtype=np.float64)
    values = np.where(i < steps // 2, step * i, 1.0 - step * (bins - i))
    return values.astype(np.float32)


def bucketize_equal_width(conf32: np.ndarray, bins: int) -> np.ndarray:
    """Equal-width bin of each float32 confidence, as ``torch.bucketize`` (``right=False``).

    ``bucket = #{interior boundaries b : b < x}``, so bin ``k`` is ``(b_k, b_{k+1}]`` and a
    value on a boundary goes to the lower bin. Shape ``(n,)`` ints in ``0..bins-1``.
    """
    inner = equal_width_boundaries(bins)[1:-1]
    return np.searchsorted(inner, np.asarray(conf32, dtype=np.float32), side="left")


def equal_mass_bins(conf: np.ndarray, bins: int) -> np.ndarray:
    """Equal-mass bin of each confidence, by rank, with tied values kept together.

    Rule (recorded in every table): sort the confidences in increasing order and walk the
    groups of tied (float32) values; the current bin takes whole tie groups until it holds at
    least ``m / (K - b)`` items, ``m`` the items not yet binned when bin ``b`` opened, then the
    next bin opens. Without ties every bin holds ``floor`` or ``ceil`` of ``n / K`` items; a
    tie group is never split, so a heavily tied sample fills fewer bins, and the empty ones are
    the *last* bins (reported), never bins in the middle. Shape ``(n,)`` ints in ``0..K-1``.
    """
    bins = check_bins(bins)
    values = np.asarray(conf, dtype=np.float32)
    order = np.argsort(values, kind="stable")
    ranked = values[order]
    starts = np.flatnonzero(np.append(True, ranked[1:] != ranked[:-1]))
    sizes = np.diff(np.append(starts, ranked.size))
    out = np.empty(ranked.size, dtype=np.int64)
    b, held, left_at_open = 0, 0, ranked.size
    for start, size in zip(starts.tolist(), sizes.tolist(), strict=True):
        out[order[start:start + size]] = b
        held += size
        if b < bins - 1 and held * (bins - b) >= left_at_open:
            left_at_open -= held
            b, held = b + 1, 0
    return out


def equal_mass_edges(conf: np.ndarray, bins: int) -> np.ndarray:
    """Return the edges of :func:`equal_mass_bins`, ``(K + 1,)``.

    Bin ``k`` spans ``[edges[k], edges[k + 1]]``: the lowest value of each non-empty bin, then
    the highest value; an empty (last) bin repeats the top edge.
    """
    bins = check_bins(bins)
    conf32 = np.asarray(conf, dtype=np.float32).astype(np.float64)
    bucket = equal_mass_bins(conf32, bins)
    top = float(conf32.max())
    edges = [float(conf32[bucket == k].min()) if np.any(bucket == k) else top
             for k in range(bins)]
    return np.asarray([*edges, top])


#: the equal-mass rule, as recorded in the summary
EQUAL_MASS_RULE = (
    "by rank: sort the confidences, walk groups of tied float32 values; bin b takes whole "
    "tie groups until it holds >= m / (K - b) items (m = items left when it opened); ties are "
    "never split and empty bins, if any, are the last ones")


# ============================================================================ the reference
def _float32_values(conf: np.ndarray) -> np.ndarray:
    """Round each confidence to float32 and hold it in float64 (the reference's ``.float()``)."""
    return conf.astype(np.float32).astype(np.float64)


def _ece(conf: np.ndarray, corr: np.ndarray, bucket: np.ndarray, bins: int) -> float:
    """``ECE = sum_k |B_k|/n |acc(B_k) - conf(B_k)| = sum_k |sum_{B_k} y - sum_{B_k} p| / n``."""
    sum_y = np.bincount(bucket, weights=corr, minlength=bins)
    sum_p = np.bincount(bucket, weights=conf, minlength=bins)
    return float(np.abs(sum_y - sum_p).sum() / conf.size)


def _curve_arrays(conf32: np.ndarray, corr: np.ndarray) -> tuple[np.ndarray, ...]:
    """Tie-aware risk-coverage points: ``(thresholds, coverage, risk)``, each ``(G,)``.

    Sort by confidence (descending); ``G`` groups of equal float32 confidence; each point is
    the end of a group: coverage ``(end + 1) / n``, risk = errors among the first ``end + 1``
    items divided by ``end + 1``. Which tied item comes first never matters.
    """
    order = np.argsort(-conf32, kind="stable")
    ranked = conf32[order]
    ends = np.flatnonzero(np.append(ranked[1:] != ranked[:-1], True))
    errors = np.cumsum(1.0 - corr[order])
    kept = ends + 1.0
    return ranked[ends], kept / conf32.size, errors[ends] / kept


def calibration_summary(confidence: Any, correct: Any, bins: int = 10) -> dict[str, Any]:
    """Equal-width ECE, Brier and the tie-aware risk-coverage curve (the text's reference).

    Args:
        confidence: ``(n,)`` probability that each prediction is correct, in ``[0, 1]``.
        correct: ``(n,)`` whether each prediction is correct (0/1), aligned with ``confidence``.
        bins: number of equal-width bins ``K`` (positive integer).

    Returns:
        ``{"brier": float, "ece": float, "coverage": (G,) array, "risk": (G,) array}`` where
        ``brier = mean((p - y)^2)``, ``ece`` as :func:`_ece` over ``torch.bucketize`` bins, and
        ``coverage``/``risk`` one point at the end of each group of tied confidences, in
        decreasing confidence (see the module docstring for the float32 rules).

    Raises:
        ValueError: empty, misaligned, non-finite, out-of-range or non-binary input, or bad
            ``bins`` (the message shows the offending value).

    >>> s = calibration_summary([0.0, 1.0], [0, 1], bins=2)
    >>> s["brier"], s["ece"]
    (0.0, 0.0)
    >>> calibration_summary([0.5, 0.5], [1, 0])["risk"].tolist()
    [0.5]
    """
    conf, corr = as_observations(confidence, correct)
    bins = check_bins(bins)
    conf32 = _float32_values(conf)
    ece = _ece(conf32, corr, bucketize_equal_width(conf32, bins), bins)
    _, coverage, risk = _curve_arrays(conf32, corr)
    brier = float(np.mean((conf32 - corr) ** 2))
    return {"brier": brier, "ece": ece, "coverage": coverage, "risk": risk}


# ============================================================================ proper scores
def brier_score(confidence: Any, correct: Any) -> float:
    """Brier score ``mean((p - y)^2)`` on the float32 confidences (as the reference)."""
    conf, corr = as_observations(confidence, correct)
    return float(np.mean((_float32_values(conf) - corr) ** 2))


def _nll_terms(conf: np.ndarray, corr: np.ndarray, eps: float) -> np.ndarray:
    """Per-item NLL ``-(y log p + (1-y) log(1-p))`` with ``p`` clipped to ``[eps, 1-eps]``."""
    p = np.clip(conf, eps, 1.0 - eps)
    return -(corr * np.log(p) + (1.0 - corr) * np.log1p(-p))


def _check_eps(eps: float) -> float:
    if not (isinstance(eps, float | int) and not isinstance(eps, bool) and 0.0 < eps < 0.5):
        raise ValueError(f"the NLL clipping threshold must lie in (0, 0.5); found {eps!r}")
    return float(eps)


def nll_score(confidence: Any, correct: Any, *, eps: float = DEFAULT_NLL_EPS) -> dict[str, Any]:
    r"""Binary negative log-likelihood with its clipping reported.

    ``NLL = -1/n sum_i [y_i log p_i + (1 - y_i) log(1 - p_i)]`` with ``p`` clipped to
    ``[eps, 1 - eps]``; a confidently wrong item then costs ``-log(eps)`` (27.6 for 1e-12).

    Returns:
        ``{"nll", "clip_eps", "n_clipped"}`` (``n_clipped``: items whose ``p`` was moved).

    >>> round(nll_score([0.5, 0.5], [1, 0])["nll"], 6)
    0.693147
    """
    conf, corr = as_observations(confidence, correct)
    eps = _check_eps(eps)
    clipped = int(np.count_nonzero((conf < eps) | (conf > 1.0 - eps)))
    return {"nll": float(np.mean(_nll_terms(conf, corr, eps))), "clip_eps": eps,
            "n_clipped": clipped}


def wilson_interval(successes: Any, n: Any, *, level: float = 0.95) -> tuple[Any, Any]:
    r"""Wilson score interval of a binomial proportion (vectorised; ``n > 0``).

    ``(p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)`` with ``z`` the normal
    quantile of ``(1 + level) / 2``.

    >>> lo, hi = wilson_interval(5, 10)
    >>> round(float(lo), 4), round(float(hi), 4)
    (0.2366, 0.7634)
    """
    k = np.asarray(successes, dtype=float)
    n = np.asarray(n, dtype=float)
    z = NormalDist().inv_cdf((1.0 + level) / 2.0)
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2.0 * n)) / denom
    half = z * np.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n)) / denom
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def _nullable(values: np.ndarray, present: np.ndarray) -> list[float | None]:
    return [float(v) if ok else None for v, ok in zip(values, present, strict=True)]


def reliability_table(
    confidence: Any, correct: Any, *, bins: int = 10, binning: Binning = "equal_width",
    level: float = 0.95, fact_codes: Any = None, min_facts: int = 1,
) -> dict[str, Any]:
    """ECE with its binning, and the reliability diagram's per-bin data.

    Args:
        confidence: ``(n,)`` confidences in [0, 1] (see :func:`as_observations`).
        correct: ``(n,)`` outcomes 0/1.
        bins: ``K``.
        binning: ``equal_width`` (the reference's ``torch.bucketize`` bins) or ``equal_mass``
            (:func:`equal_mass_bins`, by rank, ties together).
        level: coverage of the per-bin intervals of accuracy.
        fact_codes: ``(n,)`` ints ``0..F-1``, the fact of each row. When given, each bin's
            interval is clustered by fact (the queries of one fact are not independent): the
            Wilson interval at the bin's effective number of facts
            (:func:`fks.metrics.calibration.bootstrap.per_bin_accuracy_intervals`); without it,
            the row-level Wilson interval (labelled so).
        min_facts: a bin holding fewer distinct facts than this gets no interval (null).

    Returns:
        ``{"binning", "bins", "edges" (K+1,), "counts", "n_facts", "n_correct",
        "n_effective", "mean_confidence", "accuracy", "accuracy_ci_low", "accuracy_ci_high", "gap"
        (accuracy - confidence), "ece", "mce", "n_empty_bins", "empty_bin_policy", "interval",
        "n"}``; per-bin lists have ``K`` entries, null for an empty bin.
    """
    conf, corr = as_observations(confidence, correct)
    bins = check_bins(bins)
    conf32 = _float32_values(conf)
    if binning == "equal_width":
        edges = equal_width_boundaries(bins).astype(np.float64)
        bucket = bucketize_equal_width(conf32, bins)
        rule = "torch.bucketize on torch.linspace(0, 1, K + 1): bin k is (b_k, b_k+1]"
    elif binning == "equal_mass":
        edges = equal_mass_edges(conf32, bins)
        bucket = equal_mass_bins(conf32, bins)
        rule = EQUAL_MASS_RULE
    else:
        raise ValueError(f"binning must be equal_width or equal_mass; found {binning!r}")
    counts = np.bincount(bucket, minlength=bins)
    n_ok = np.bincount(bucket, weights=corr, minlength=bins)
    sum_p = np.bincount(bucket, weights=conf32, minlength=bins)
    has = counts > 0
    safe = np.maximum(counts, 1)
    acc, mean_p = n_ok / safe, sum_p / safe
    if fact_codes is None:
        lo, hi = wilson_interval(n_ok, safe, level=level)
        lo_l, hi_l = _nullable(lo, has), _nullable(hi, has)
        n_facts: list[int | None] = [None] * bins
        n_eff: list[float | None] = [None] * bins
        interval = (f"row-level Wilson score interval of each bin's accuracy, level {level:g} "
                    "(no fact ids given: treats every row as independent)")
    else:
        from fks.metrics.calibration.bootstrap import per_bin_accuracy_intervals

        codes = np.asarray(fact_codes, dtype=np.int64)
        per_bin = per_bin_accuracy_intervals(bucket, corr, codes, bins, level=level,
                                             min_facts=min_facts)
        lo_l, hi_l, n_facts = per_bin["low"], per_bin["high"], per_bin["n_facts"]
        n_eff = per_bin["n_effective"]
        interval = (f"fact-clustered: Wilson score interval of each bin's accuracy at its "
                    f"effective number of facts n_eff = (sum_f m_f)^2 / sum_f m_f^2 (m_f rows "
                    f"of fact f in the bin), level {level:g}; a bin with fewer than {min_facts} "
                    "facts gets no interval")
    gap = acc - mean_p
    return {
        "binning": binning, "rule": rule, "bins": bins, "n": int(conf.size),
        "edges": edges.tolist(),
        "counts": counts.astype(int).tolist(), "n_facts": n_facts, "n_effective": n_eff,
        "n_correct": n_ok.astype(int).tolist(),
        "mean_confidence": _nullable(mean_p, has), "accuracy": _nullable(acc, has),
        "accuracy_ci_low": lo_l, "accuracy_ci_high": hi_l,
        "gap": _nullable(gap, has),
        "ece": float(np.abs(n_ok - sum_p).sum() / conf.size),
        "mce": float(np.abs(gap[has]).max()),
        "n_empty_bins": int((~has).sum()), "empty_bin_policy": EMPTY_BIN_POLICY,
        "interval": interval,
    }


# ====================================================================== selective prediction
def risk_coverage_curve(confidence: Any, correct: Any) -> dict[str, np.ndarray]:
    """Tie-aware risk-coverage curve with its thresholds (``C(tau)``, ``R(tau)``).

    Returns ``{"threshold", "coverage", "risk"}``, each ``(G,)`` in decreasing threshold:
    answering only when ``p >= threshold`` keeps ``coverage`` of the items at retained risk
    (error rate) ``risk``. Same points as :func:`calibration_summary`.
    """
    conf, corr = as_observations(confidence, correct)
    thr, cov, risk = _curve_arrays(_float32_values(conf), corr)
    return {"threshold": thr, "coverage": cov, "risk": risk}


def aurc(coverage: Sequence[float] | np.ndarray, risk: Sequence[float] | np.ndarray) -> float:
    r"""Area under the tie-aware risk-coverage step curve.

    ``AURC = sum_g (C_g - C_{g-1}) R_g`` with ``C_0 = 0``: between two group ends the retained
    risk is that of the group end (no interpolation inside a tie group), so the area does not
    depend on the order of tied items. With no ties it is the mean of the per-rank risks.

    >>> aurc([0.5, 1.0], [0.0, 0.5])
    0.25
    """
    cov = np.asarray(coverage, dtype=float)
    r = np.asarray(risk, dtype=float)
    return float(np.sum(np.diff(cov, prepend=0.0) * r))


#: the two coverage views (``calibration_and_uncertainty.zh.md``: "confidence coverage and
#: end-to-end coverage")
COVERAGE_VIEWS: dict[str, str] = {
    "confidence": "coverage among the rows with a valid confidence and a known outcome (the "
                  "answered rows); a query without an answer is outside this view",
    "end_to_end": "coverage among every query of the selection: a query without a valid "
                  "answer and confidence (abstained, invalid, timed out, unjudged) counts as "
                  "not correctly answered, with confidence 0, so it is retained last and "
                  "counts as an error at full coverage (accuracy, risk and AURC penalise it); "
                  "the view reports accuracy, risk and AURC only: Brier, NLL and ECE would "
                  "score that p = 0 as a correct statement and reward abstention",
}


def risk_at_coverage(curve: dict[str, np.ndarray], targets: Sequence[float], *,
                     view: str = "confidence") -> list[dict]:
    """Risk at preset coverages: the first group end whose coverage reaches each target.

    Tie groups are never split, so the coverage achieved can exceed the target; it is
    reported with the threshold that achieves it. ``view`` names the coverage the curve was
    computed in (:data:`COVERAGE_VIEWS`) and is recorded in every entry.
    """
    if view not in COVERAGE_VIEWS:
        raise ValueError(f"view must be one of {sorted(COVERAGE_VIEWS)}; found {view!r}")
    cov = np.asarray(curve["coverage"])
    out = []
    for t in targets:
        g = int(np.searchsorted(cov, float(t) - 1e-12, side="left"))
        g = min(g, cov.size - 1)
        out.append({"coverage_view": view, "target_coverage": float(t), "coverage": float(cov[g]),
                    "threshold": float(curve["threshold"][g]), "risk": float(curve["risk"][g])})
    return out


def downsample_curve(curve: dict[str, np.ndarray], max_points: int) -> dict[str, Any]:
    """Plot-ready curve: at most ``max_points`` group ends, spread evenly in coverage.

    Keeps the first and the last point; the full curve is summarised by ``n_points_full``.
    """
    cov = np.asarray(curve["coverage"])
    n = cov.size
    if n <= max_points:
        idx = np.arange(n)
    else:
        grid = np.linspace(cov[0], cov[-1], max_points)
        idx = np.unique(np.minimum(np.searchsorted(cov, grid - 1e-12), n - 1))
    return {**{k: np.asarray(v)[idx].tolist() for k, v in curve.items()},
            "n_points_full": int(n), "downsampled": bool(idx.size < n)}


# ==================================================================================== report
def calibration_report(
    confidence: Any, correct: Any, *, bins: int = 10, nll_eps: float = DEFAULT_NLL_EPS,
    coverages: Sequence[float] = (0.25, 0.5, 0.75, 0.9, 1.0), max_curve_points: int = 512,
    view: str = "confidence", fact_codes: Any = None, level: float = 0.95, min_facts: int = 1,
) -> dict[str, Any]:
    """Every calibration figure of one sample: scores, reliability data, risk-coverage.

    ``view`` (:data:`COVERAGE_VIEWS`) says which coverage the sample stands for and is stamped
    on the result and on every risk-at-coverage entry; ``fact_codes`` (with ``level`` and
    ``min_facts``) makes the per-bin intervals fact-clustered
    (:func:`reliability_table`).

    Returns ``{"coverage_view", "n", "accuracy", "mean_confidence", "brier", "nll",
    "ece_equal_width", "ece_equal_mass", "reliability": {"equal_width", "equal_mass"}, "aurc",
    "risk_at_coverage", "risk_coverage"}``; ``brier``/``ece_equal_width``/the curve are
    :func:`calibration_summary`'s.
    """
    conf, corr = as_observations(confidence, correct)
    core = calibration_summary(conf, corr, bins=bins)
    curve = risk_coverage_curve(conf, corr)
    boot = {"fact_codes": fact_codes, "min_facts": min_facts, "level": level}
    width = reliability_table(conf, corr, bins=bins, binning="equal_width", **boot)
    mass = reliability_table(conf, corr, bins=bins, binning="equal_mass", **boot)
    return {
        "coverage_view": view, "n": int(conf.size), "accuracy": float(corr.mean()),
        "mean_confidence": float(_float32_values(conf).mean()),
        "brier": core["brier"], "nll": nll_score(conf, corr, eps=nll_eps),
        "ece_equal_width": core["ece"], "ece_equal_mass": mass["ece"],
        "reliability": {"equal_width": width, "equal_mass": mass},
        "aurc": aurc(core["coverage"], core["risk"]),
        "risk_at_coverage": risk_at_coverage(curve, coverages, view=view),
        "risk_coverage": downsample_curve(curve, max_curve_points),
    }
