r"""Degradation detection against a checked baseline report (spec §6).

For each bucket and dimension reported in both the baseline and the current batch,

.. math::

    \Delta_{bucket, dim} = (Score^{baseline} - Score^{current}) / Score^{baseline}

on the bucket's dimension medians; ``Delta >= 0.15`` is a degradation signal. (A baseline
median of 0 leaves Delta undefined and is skipped.) The medians count a dimension as the case
score does (:func:`~fks.evalharness.aggregate.dimension_cell_values`): a case where it could
not be computed but stays in the fixed denominator counts 0, with the failure pattern
``not_computed``. A baseline cell that the current report lacks although the bucket's case
scores carry the dimension -- computed last quarter, now gated out or unweighted in every case
-- is compared against 0 (``Delta = 1``) and marked ``current_state: "not_computed"``: the
bucket's case scores changed meaning, and §6 must say so (issue 28; before it, such a cell
was skipped and no flag was raised).

**The baseline is checked** (:func:`check_baseline`): §6 takes "last quarter's score of the same
bucket x dimension; monthly increments do not enter the baseline". Every run writes a
:func:`baseline_manifest` beside its ``batch_report.json`` (``baseline_manifest.json``: period,
split, salt, the bucket x dimension medians with their case counts, and the SHA-256 of the
report). A baseline is refused (exit 2) when the manifest is missing, its split differs from the
current one, its period is not a quarter (``YYYYQn``) or not the quarter before the current
``--period``, or its bucket x dimension cells do not match the report they claim to describe.

**Severity** follows the three §6 mini-review outcomes. A *failing case* of a degraded cell is
a case whose dimension score is at least 15 % below the baseline median; its *failure pattern*
is the formula component of that dimension with the lowest value in the case (decision: the
spec's "同构失败" -- isomorphic failures -- read as "the same component is the weakest", ties
broken by name). Per degraded cell, over its failure patterns:

* ``single_case`` (sample extension, "单 case 失败 -> 下季度种子池"): no pattern reaches 3
  failing cases in the bucket. §8.2's ``DegradationFlag.severity`` has no such value, so these
  cells are not ``DegradationFlag`` s; they are listed in ``details["degradation_review"]``.
* ``bucket_level``: >= 3 failing cases of one pattern in the bucket (``bucket_min_cases``).
* ``cross_bucket``: one pattern fails in >= 2 degraded buckets but below the mechanism bar.
* ``mechanism_level``: the pattern's failing cases reach the evidence bar of the governance
  phase (``degradation.phase``): v1 -> v2 transition ``>= 4 cases + >= 2 buckets + 1 pending
  bucket`` (a bucket whose ``sample_quality_flag`` is not ``ok``); after v2 ``>= 5 cases +
  >= 3 buckets``.

The EvalHarness never rolls back by itself (§6: single sign-off + 14-day objection period).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from fks.errors import FksInputError
from fks.evalharness.aggregate import dimension_cell_values
from fks.evalharness.config import DegradationSettings
from fks.evalharness.schema import BatchReport, BucketReport, CaseScore, DegradationFlag

__all__ = [
    "delta_ratio",
    "failure_pattern",
    "degradation_review",
    "degradation_flags",
    "parse_period",
    "previous_quarter",
    "baseline_manifest",
    "check_baseline",
]

_RANK = {"single_case": 0, "bucket_level": 1, "cross_bucket": 2, "mechanism_level": 3}
_QUARTER = re.compile(r"^(\d{4})Q([1-4])$")
_MONTH = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")


def delta_ratio(baseline: float, current: float) -> float | None:
    """``(baseline - current) / baseline``; ``None`` when ``baseline <= 0``.

    >>> round(delta_ratio(0.8, 0.6), 12)
    0.25
    """
    if baseline <= 0:
        return None
    return (baseline - current) / baseline


def failure_pattern(case: CaseScore, dim: str) -> str:
    """Return the weakest formula component of ``dim`` in ``case`` (``"composite"``: none).

    A dimension without a score (kept in the denominator at 0) fails as ``"not_computed"``.
    """
    from fks.evalharness.dimensions import COMPOSITE_WEIGHTS

    ds = case.dimensions.get(dim)  # type: ignore[call-overload]
    comps = ds.components if ds is not None else {}
    if ds is not None and ds.raw_score is None:
        return "not_computed"
    vals = {
        k: float(comps[k])
        for k in COMPOSITE_WEIGHTS.get(dim, {})
        if isinstance(comps.get(k), int | float)
    }
    if not vals:
        return "composite"
    return min(sorted(vals), key=lambda k: vals[k])


def degradation_review(
    baseline: BatchReport,
    current: Mapping[str, BucketReport],
    case_scores: Sequence[CaseScore],
    settings: DegradationSettings,
) -> list[dict[str, Any]]:
    """Every degraded bucket x dimension cell with its failing cases, patterns and class."""
    found = []
    for bucket, rep in current.items():
        base = baseline.bucket_reports.get(bucket)  # type: ignore[call-overload]
        if base is None:
            continue
        carried = {d for cs in case_scores if cs.bucket_label == bucket for d in cs.dimensions}
        for dim, b in base.dimension_medians.items():
            cur = rep.dimension_medians.get(dim)  # type: ignore[call-overload]
            if cur is None and dim not in carried:
                continue  # not reported on either side of the comparison
            delta = delta_ratio(b, 0.0 if cur is None else cur)
            if delta is not None and delta >= settings.threshold:
                cell = {
                    "bucket_label": bucket,
                    "dimension_id": dim,
                    "baseline_score": b,
                    "current_score": 0.0 if cur is None else cur,
                    "delta_ratio": delta,
                }
                if cur is None:
                    cell["current_state"] = "not_computed"
                found.append(cell)
    # failing cases per (dim, pattern) -> {bucket: [case ids]}
    by_pattern: dict[tuple[str, str], dict[str, list[str]]] = {}
    for cell in found:
        bucket, dim = cell["bucket_label"], cell["dimension_id"]
        limit = (1.0 - settings.threshold) * cell["baseline_score"]
        patterns: dict[str, list[str]] = {}
        members = [cs for cs in case_scores if cs.bucket_label == bucket]
        values = dimension_cell_values(members, dim)
        lost = cell.get("current_state") == "not_computed"
        for cs in members:
            value = values.get(cs.case_id)
            if lost or (value is not None and value <= limit):
                patterns.setdefault(failure_pattern(cs, dim), []).append(cs.case_id)
        cell["failing_cases"] = patterns
        for pat, ids in patterns.items():
            by_pattern.setdefault((dim, pat), {})[bucket] = ids
    phase = settings.phase
    min_cases = settings.mechanism_min_cases if phase == "v1" else settings.v2_mechanism_min_cases
    min_buckets = (
        settings.mechanism_min_buckets if phase == "v1" else settings.v2_mechanism_min_buckets
    )
    min_pending = settings.mechanism_min_pending_buckets if phase == "v1" else 0
    for cell in found:
        bucket, dim = cell["bucket_label"], cell["dimension_id"]
        best = "single_case"
        for pat, ids in cell["failing_cases"].items():
            spread = by_pattern[(dim, pat)]
            n_cases = sum(len(v) for v in spread.values())
            pending = sum(
                1
                for b in spread
                if current[b].sample_quality_flag != "ok"  # type: ignore[index]
            )
            if len(spread) >= min_buckets and n_cases >= min_cases and pending >= min_pending:
                cls = "mechanism_level"
            elif len(spread) >= 2:
                cls = "cross_bucket"
            elif len(ids) >= settings.bucket_min_cases:
                cls = "bucket_level"
            else:
                cls = "single_case"
            best = max(best, cls, key=_RANK.__getitem__)
        cell["severity"] = best
        cell["review"] = {
            "single_case": "sample_extension: next quarter's seed pool",
            "bucket_level": "Phase 5 §3.1 mechanism change assessment",
            "cross_bucket": "Phase 5 §3.2 candidate, below the mechanism evidence bar",
            "mechanism_level": "Phase 5 §3.2 mechanism-level review",
        }[best]
        cell["phase"] = phase
        # §6: rollback is signed off by the ecosystem initiator after a 14-day objection period
        cell["sign_off"] = {
            "by": "ecosystem_initiator",
            "objection_period_days": 14,
            "automatic_rollback": False,
        }
    return found


def degradation_flags(
    baseline: BatchReport,
    current: dict[str, BucketReport],
    case_scores: Sequence[CaseScore],
    settings: DegradationSettings,
) -> list[DegradationFlag]:
    """Return the §8.2 degradation flags (every reviewed cell but the ``single_case`` ones)."""
    return [
        DegradationFlag(
            bucket_label=c["bucket_label"],
            dimension_id=c["dimension_id"],
            baseline_score=c["baseline_score"],
            current_score=c["current_score"],
            delta_ratio=c["delta_ratio"],
            severity=c["severity"],
        )
        for c in degradation_review(baseline, current, case_scores, settings)
        if c["severity"] != "single_case"
    ]


def parse_period(text: str) -> tuple[str, int, int]:
    """``"2026Q3"`` -> ``("quarter", 2026, 3)``; ``"2026-08"`` -> ``("month", 2026, 8)``.

    Raises:
        ValueError: neither form.
    """
    if m := _QUARTER.match(text):
        return "quarter", int(m[1]), int(m[2])
    if m := _MONTH.match(text):
        return "month", int(m[1]), int(m[2])
    raise ValueError(f"period {text!r} is neither YYYYQn nor YYYY-MM")


def previous_quarter(period: str) -> str:
    """Return the quarter before ``period``'s quarter (``2026-08``, ``2026Q3`` -> ``2026Q2``).

    >>> previous_quarter("2026Q1"), previous_quarter("2026-08")
    ('2025Q4', '2026Q2')
    """
    kind, year, n = parse_period(period)
    q = n if kind == "quarter" else (n - 1) // 3 + 1
    return f"{year - 1}Q4" if q == 1 else f"{year}Q{q - 1}"


def _cells(report: BatchReport, case_scores: Sequence[CaseScore] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for b, rep in report.bucket_reports.items():
        out[b] = {}
        for d, med in rep.dimension_medians.items():
            n = (
                len(dimension_cell_values([c for c in case_scores if c.bucket_label == b], d))
                if case_scores is not None
                else None
            )
            out[b][d] = {"median": med, "n_cases": n}
    return out


def baseline_manifest(
    report: BatchReport,
    report_text: str,
    case_scores: Sequence[CaseScore],
    *,
    period: str | None,
    salt: str,
) -> dict[str, Any]:
    """Provenance of a ``batch_report.json`` so that it can serve as a later baseline."""
    return {
        "period": period,
        "split": report.split,
        "salt": salt,
        "batch_report_sha256": hashlib.sha256(report_text.encode("utf-8")).hexdigest(),
        "cells": _cells(report, case_scores),
    }


def check_baseline(
    baseline: BatchReport,
    report_text: str,
    manifest: Mapping[str, Any] | None,
    *,
    split: str,
    period: str | None,
    manifest_path: Any = None,
) -> None:
    """Refuse a baseline whose provenance does not fit (see the module docstring).

    Raises:
        FksInputError: missing manifest, split/period mismatch, or cells that disagree.
    """

    def bad(msg: str, field: str | None = None) -> FksInputError:
        return FksInputError(msg, path=manifest_path, field=field)

    if manifest is None:
        raise bad("the baseline carries no provenance (baseline_manifest.json next to it)")
    if not isinstance(manifest, Mapping):
        raise bad("expected a JSON object")
    if manifest.get("split") != split or baseline.split != split:
        raise bad(
            f"baseline split {manifest.get('split')!r} differs from the scored {split!r}", "split"
        )
    base_period = manifest.get("period")
    if not isinstance(base_period, str):
        raise bad("the baseline has no period (score it with --period YYYYQn)", "period")
    try:
        kind = parse_period(base_period)[0]
    except ValueError as exc:
        raise bad(str(exc), "period") from None
    if kind != "quarter":
        raise bad(
            f"baseline period {base_period!r} is monthly; §6 baselines are quarterly", "period"
        )
    if period is None:
        raise bad("a baseline needs the current --period (YYYYQn or YYYY-MM)", "period")
    try:
        want = previous_quarter(period)
    except ValueError as exc:
        raise bad(str(exc), "period") from None
    if base_period != want:
        raise bad(
            f"baseline period {base_period} is not the quarter before {period} ({want})", "period"
        )
    digest = hashlib.sha256(report_text.encode("utf-8")).hexdigest()
    if manifest.get("batch_report_sha256") != digest:
        raise bad(
            "the manifest describes another batch_report.json (SHA-256 differs)",
            "batch_report_sha256",
        )
    cells = manifest.get("cells")
    expected = _cells(baseline, None)
    if not isinstance(cells, Mapping) or set(cells) != set(expected):
        raise bad("bucket cells differ from the baseline report's buckets", "cells")
    for b, dims in expected.items():
        got = cells[b]
        if not isinstance(got, Mapping) or set(got) != set(dims):
            raise bad(f"bucket {b}: dimensions differ from the report's", f"cells.{b}")
        for d, cell in dims.items():
            if not isinstance(got[d], Mapping) or got[d].get("median") != cell["median"]:
                raise bad(f"bucket {b} x {d}: median differs from the report's", f"cells.{b}.{d}")
