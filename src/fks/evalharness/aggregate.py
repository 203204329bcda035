"""Aggregation (spec §2, §3): case score, within-bucket percentiles, bandwidths, bucket reports.

* **Case score** ``Score_case = sum_i w_i D_i / sum_i w_i`` with the bucket's weights (§2).
  The denominator is fixed (:func:`case_aggregate`, ``aggregate_denominator: fixed``): §2 lets
  only D9 and D11 leave it, when their gates are not met (D9 across fewer than 2 buckets, D11
  outside B1-B3). Any other weighted dimension that could not be computed (gold not annotated,
  an undefined component, the D7 pool refused) keeps its weight, scores 0, and is marked
  ``required_not_computed`` in its flags and components (``state``, ``reasons``) -- a visible
  state, never a silent drop. A §3.1 must-evaluate dimension (``required_dimensions``, e.g. B6:
  D9) stays in the denominator even when its gate is not met. ``aggregate_denominator:
  computed`` restores the older reading (every uncomputed dimension leaves the denominator).
* **Percentile** within a bucket (§3.2): ``|{c in bucket : Score_c <= Score_case}| / |bucket|``,
  for every dimension and for the case score; never across buckets.
* **Bandwidth** (§3.2, §4.2): when a bucket has fewer than 30 scores, the percentile's
  percentile-bootstrap interval (the bucket resampled with replacement, B = 1000) gives
  ``bandwidth = (CI_up - CI_low) / 2``, reported as ``bandwidth: +-X%``.
* **Anchor normalisation** (§3.2): a bucket's full mark is the median case score of its
  expert-consensus anchors (>= 5 needed); the normalised score is ``score / anchor median``.
  An anchor is admitted only when its gold ``iaa_kappa`` is >= ``bucket_anchor_min_kappa``
  (0.7), and anchors are counted over the whole bucket (every split), not the scored split.
  The §8.2 records have no field for it, so it is reported in the details file and is the
  figure of the cross-bucket table (:func:`cross_bucket_table`).
* **Bucket report**: case count, median case score, the bandwidth of the percentile at the
  median score (the widest point of an empirical CDF's uncertainty), dimension medians
  (:func:`dimension_cell_values`: over the cases whose case score counts the dimension, a
  ``required_not_computed`` case at 0 -- so a dimension that stops being computable lowers its
  median with the case scores and §6 sees it; before issue 28 it left the median unchanged, or
  left the report altogether, while the bucket median fell from 0.209 to 0.116), and the
  sample-quality flag: ``annotation_low`` (an IAA task's kappa in the bucket is below its
  threshold) before ``insufficient`` (fewer than 20 cases, or a bucket kept apart by design --
  B7 in v1) before ``ok``. Only ``ok`` buckets enter the cross-bucket percentile table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fks.evalharness.config import BootstrapSettings, HarnessConfig
from fks.evalharness.schema import BucketReport, CaseScore
from fks.metrics.stats.bootstrap import bootstrap_bandwidth

__all__ = [
    "REQUIRED_NOT_COMPUTED",
    "dimension_cell_values",
    "GATE_FLAGS",
    "aggregate_score",
    "case_aggregate",
    "ecdf_percentile",
    "percentile_bandwidth",
    "bucket_percentiles",
    "sample_quality",
    "bucket_report",
    "cross_bucket_table",
    "anchor_normalisation",
]


def aggregate_score(
    values: Mapping[str, float | None], weights: Mapping[str, float]
) -> float | None:
    """``sum_i w_i D_i / sum_i w_i`` over computed dimensions with ``w_i > 0``.

    ``None`` when no weighted dimension was computed.

    >>> aggregate_score({"D1": 0.5, "D2": 1.0, "D9": None}, {"D1": 0.1, "D2": 0.1, "D9": 0.08})
    0.7500000000000001
    """
    used = {d: v for d, v in values.items() if v is not None and weights.get(d, 0.0) > 0}
    total = sum(weights[d] for d in used)
    if total <= 0:
        return None
    return sum(weights[d] * v for d, v in used.items()) / total


#: Flag (and ``components["state"]``) of a dimension that stays in Σw but was not computed.
REQUIRED_NOT_COMPUTED = "required_not_computed"
#: §2 gates: the only reasons a weighted dimension may leave the denominator.
GATE_FLAGS: dict[str, str] = {"D9": "d9_single_bucket_skipped", "D11": "d11_bucket_not_evaluated"}


def case_aggregate(
    values: Mapping[str, float | None],
    flags: Mapping[str, Sequence[str]],
    weights: Mapping[str, float],
    *,
    required: frozenset[str] = frozenset(),
    mode: str = "fixed",
) -> tuple[float | None, dict[str, str]]:
    """§2 case score with a fixed denominator; returns ``(score, state per dimension)``.

    States: ``"scored"``, ``"gated_out"`` (D9/D11 gate not met, not a §3.1 must-evaluate
    dimension of the bucket: ``w = 0``), ``"required_not_computed"`` (kept in the denominator,
    counts 0), ``"unweighted"`` (``w = 0`` in this bucket). With ``mode="computed"`` every
    uncomputed dimension is ``"dropped"`` instead (the older reading). ``score`` is ``None``
    when no dimension was computed at all.

    >>> s, st = case_aggregate({"D1": 1.0, "D2": None}, {"D2": ["d2_not_annotated"]},
    ...                        {"D1": 0.1, "D2": 0.1})
    >>> round(s, 6), st["D2"]
    (0.5, 'required_not_computed')
    """
    states: dict[str, str] = {}
    num = den = 0.0
    for dim, v in values.items():
        w = weights.get(dim, 0.0)
        if w <= 0:
            states[dim] = "unweighted"
        elif v is not None:
            states[dim] = "scored"
            num += w * v
            den += w
        elif mode == "computed":
            states[dim] = "dropped"
        elif GATE_FLAGS.get(dim) in flags.get(dim, ()) and dim not in required:
            states[dim] = "gated_out"
        else:
            states[dim] = REQUIRED_NOT_COMPUTED
            den += w
    if den <= 0 or not any(s == "scored" for s in states.values()):
        return None, states
    return num / den, states


def ecdf_percentile(scores: Sequence[float], value: float) -> float:
    """``|{s in scores : s <= value}| / |scores|`` (§3.2).

    >>> ecdf_percentile([0.2, 0.5, 0.5, 0.9], 0.5)
    0.75
    """
    arr = np.asarray(scores, dtype=float)
    if arr.size == 0:
        raise ValueError("no scores")
    return float(np.mean(arr <= value))


def percentile_bandwidth(
    scores: Sequence[float], value: float, settings: BootstrapSettings
) -> float:
    """Bootstrap half-width of ``ecdf_percentile(scores, value)`` (shared bootstrap core)."""

    def at_value(x: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.mean(x <= value, axis=axis)

    return bootstrap_bandwidth(
        np.asarray(scores, dtype=float),
        at_value,
        n_resamples=settings.n_resamples,
        confidence=settings.confidence,
        seed=settings.seed,
    )


def bucket_percentiles(
    scores: Sequence[float], settings: BootstrapSettings, *, min_cases: int
) -> list[tuple[float, float | None]]:
    """Return ``(percentile, bandwidth)`` of each score within its bucket.

    The bandwidth is only computed below ``min_cases`` scores (else ``None``).
    """
    small = len(scores) < min_cases
    return [
        (
            ecdf_percentile(scores, s),
            percentile_bandwidth(scores, s, settings) if small else None,
        )
        for s in scores
    ]


def dimension_cell_values(cases: Sequence[CaseScore], dim: str) -> dict[str, float]:
    """``{case_id: value}`` of ``dim`` as the §2 case score counts it (a bucket x dim cell).

    A computed dimension counts its raw score; one kept in the fixed denominator without a
    score (flag ``required_not_computed``) counts 0, as in the case score; a gated-out or
    unweighted dimension is left out. So the cell median, the §6 degradation check and the
    case scores always read the same cases (decision of issue 28: count consistently rather
    than drop silently).
    """
    out: dict[str, float] = {}
    for c in cases:
        ds = c.dimensions.get(dim)  # type: ignore[call-overload]
        if ds is None:
            continue
        if ds.raw_score is not None:
            out[c.case_id] = ds.raw_score
        elif REQUIRED_NOT_COMPUTED in ds.gaming_flags:
            out[c.case_id] = 0.0
    return out


def sample_quality(
    bucket: str, case_count: int, cfg: HarnessConfig, *, annotation_low: bool
) -> str:
    """Return the §8.2 ``sample_quality_flag`` of a bucket (see the module docstring)."""
    if annotation_low:
        return "annotation_low"
    if bucket in cfg.cross_bucket_exclude or case_count < cfg.min_cases_per_bucket:
        return "insufficient"
    return "ok"


def bucket_report(
    bucket: str,
    cases: Sequence[CaseScore],
    cfg: HarnessConfig,
    *,
    annotation_low: bool = False,
    bucket_size: int | None = None,
) -> BucketReport:
    """Build the §8.2 :class:`BucketReport` of one bucket's case scores.

    ``case_count`` is the number of scored cases; the §3.3 minimum (``insufficient`` below 20)
    is checked on ``bucket_size``, the bucket's gold cases over all splits (default: the scored
    count) -- §3.3 asks for >= 20 cases per bucket, not per split.
    """
    if not cases:
        raise ValueError(f"bucket {bucket} has no case")
    scores = [c.aggregate_score for c in cases]
    median = float(np.median(scores))
    dims: dict[str, float] = {}
    for dim in sorted({d for c in cases for d in c.dimensions}, key=lambda d: int(d[1:])):
        vals = list(dimension_cell_values(cases, dim).values())
        if vals:
            dims[dim] = float(np.median(vals))
    return BucketReport(
        bucket_label=bucket,  # type: ignore[arg-type]
        case_count=len(cases),
        median_score=median,
        percentile_bandwidth=percentile_bandwidth(scores, median, cfg.bootstrap),
        dimension_medians=dims,  # type: ignore[arg-type]
        sample_quality_flag=sample_quality(  # type: ignore[arg-type]
            bucket,
            len(cases) if bucket_size is None else bucket_size,
            cfg,
            annotation_low=annotation_low,
        ),
    )


def cross_bucket_table(
    reports: Mapping[str, BucketReport], normalisation: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Rows of the cross-bucket comparison: anchor-normalised medians of the ``ok`` buckets.

    Within-bucket percentiles are uniform by construction (their quartiles depend only on the
    bucket's size), so they carry no cross-bucket information. The §3.2 device that does is the
    anchor normalisation: ``score / median(anchor scores)`` puts each bucket on its own
    full-mark scale. Each row gives the bucket, whether it takes part (``ok`` buckets only) and
    why not, its case count and median score, and -- from :func:`anchor_normalisation` -- its
    admitted anchor count, anchor median and the median normalised score
    (``normalised_median``; ``None`` with ``normalisation_reason`` when the bucket has fewer
    than 5 admitted anchors).
    """
    rows = []
    for bucket, rep in reports.items():
        norm = normalisation.get(bucket, {})
        included = rep.sample_quality_flag == "ok"
        values = list((norm.get("normalised") or {}).values())
        rows.append(
            {
                "bucket_label": bucket,
                "included": included,
                "reason": None if included else rep.sample_quality_flag,
                "case_count": rep.case_count,
                "median_score": rep.median_score,
                "anchor_count": norm.get("anchor_count", 0),
                "anchor_median": norm.get("anchor_median"),
                "normalised_median": float(np.median(values)) if values and included else None,
                "normalisation_reason": norm.get("reason"),
            }
        )
    return rows


def anchor_normalisation(
    cases: Sequence[CaseScore],
    anchors: set[str] | Mapping[str, float],
    *,
    min_anchors: int = 5,
) -> dict[str, Any]:
    """§3.2 in-bucket normalisation of one bucket's case scores by its anchors' median.

    Args:
        cases: the bucket's scored cases.
        anchors: the admitted anchors -- ``{case_id: aggregate score}`` (``score_batch`` scores
            every admitted anchor of the bucket, whatever its split), or a set of case ids
            looked up among ``cases``.
        min_anchors: §3.2 asks for >= 5 anchor cases per bucket.

    Returns:
        ``{"anchor_count", "anchor_median", "normalised"}``; ``anchor_median`` and
        ``normalised`` are ``None`` with a ``reason`` when fewer than ``min_anchors`` anchors
        (or a zero median) are available.
    """
    if isinstance(anchors, Mapping):
        scores = list(anchors.values())
    else:
        scores = [c.aggregate_score for c in cases if c.case_id in anchors]
    out: dict[str, Any] = {"anchor_count": len(scores), "anchor_median": None, "normalised": None}
    if len(scores) < min_anchors:
        out["reason"] = f"fewer than {min_anchors} anchor cases"
        return out
    median = float(np.median(scores))
    if median <= 0:
        out["reason"] = "anchor median is 0"
        return out
    out["anchor_median"] = median
    out["normalised"] = {c.case_id: c.aggregate_score / median for c in cases}
    return out
