r"""Degradation detection against a baseline report (spec §6).

For each bucket and dimension reported in both the baseline and the current batch,

.. math::

    \Delta_{bucket, dim} = (Score^{baseline} - Score^{current}) / Score^{baseline}

on the bucket's dimension medians; ``Delta >= 0.15`` is a degradation. (A baseline median of 0
leaves Delta undefined and is skipped.) The baseline is last quarter's report of the same
bucket x dimension; choosing it is the caller's job.

Severity, from the §6 mini-review options (the EvalHarness never rolls back by itself):

* ``mechanism_level`` -- the dimension degrades in >= 2 buckets **and** >= 4 failing cases back
  it (the v1 -> v2 evidence bar: >= 4 cases over >= 2 buckets; both numbers in
  ``harness.yaml``);
* ``cross_bucket`` -- it degrades in >= 2 buckets without that much case evidence;
* ``bucket_level`` -- it degrades in one bucket only.

A *failing case* is a case of a degraded bucket whose dimension score is itself at least 15 %
below the baseline median.
"""

from __future__ import annotations

from collections.abc import Sequence

from fks.evalharness.config import DegradationSettings
from fks.evalharness.schema import BatchReport, BucketReport, CaseScore, DegradationFlag

__all__ = ["delta_ratio", "degradation_flags"]


def delta_ratio(baseline: float, current: float) -> float | None:
    """``(baseline - current) / baseline``; ``None`` when ``baseline <= 0``.

    >>> round(delta_ratio(0.8, 0.6), 12)
    0.25
    """
    if baseline <= 0:
        return None
    return (baseline - current) / baseline


def degradation_flags(
    baseline: BatchReport,
    current: dict[str, BucketReport],
    case_scores: Sequence[CaseScore],
    settings: DegradationSettings,
) -> list[DegradationFlag]:
    """All §6 degradation flags of ``current`` against ``baseline``, with their severity.

    Args:
        baseline: the baseline batch report.
        current: the current bucket reports.
        case_scores: the current case scores (to count failing cases).
        settings: threshold and the mechanism-level evidence bar.
    """
    found: list[tuple[str, str, float, float, float]] = []
    for bucket, rep in current.items():
        base = baseline.bucket_reports.get(bucket)  # type: ignore[call-overload]
        if base is None:
            continue
        for dim, cur in rep.dimension_medians.items():
            if dim not in base.dimension_medians:
                continue
            b = base.dimension_medians[dim]
            delta = delta_ratio(b, cur)
            if delta is not None and delta >= settings.threshold:
                found.append((bucket, dim, b, cur, delta))
    buckets_by_dim: dict[str, set[str]] = {}
    failing_by_dim: dict[str, int] = {}
    for bucket, dim, b, _, _ in found:
        buckets_by_dim.setdefault(dim, set()).add(bucket)
        limit = (1.0 - settings.threshold) * b
        failing_by_dim[dim] = failing_by_dim.get(dim, 0) + sum(
            1
            for cs in case_scores
            if cs.bucket_label == bucket
            and (ds := cs.dimensions.get(dim)) is not None  # type: ignore[call-overload]
            and ds.raw_score is not None
            and ds.raw_score <= limit
        )
    flags = []
    for bucket, dim, b, cur, delta in found:
        n_buckets = len(buckets_by_dim[dim])
        if (
            n_buckets >= settings.mechanism_min_buckets
            and failing_by_dim[dim] >= settings.mechanism_min_cases
        ):
            severity = "mechanism_level"
        elif n_buckets >= 2:
            severity = "cross_bucket"
        else:
            severity = "bucket_level"
        flags.append(
            DegradationFlag(
                bucket_label=bucket,  # type: ignore[arg-type]
                dimension_id=dim,  # type: ignore[arg-type]
                baseline_score=b,
                current_score=cur,
                delta_ratio=delta,
                severity=severity,  # type: ignore[arg-type]
            )
        )
    return flags
