"""Score a batch: split, per-case dimensions, aggregation, IAA, degradation -> BatchReport.

:func:`score_batch` only composes the pieces of the other modules:

1. :func:`~fks.evalharness.split.assign_splits` over every gold case (bucket-uniform holdout,
   optional anchor placement), then keep the cases of the requested split;
2. :func:`batch_context` -- the batch quantities the per-case formulas need (D6 label weights,
   D7 coupling rho per bucket, D7 base-rate check, the §1 D7 pool admission over all gold rows,
   the §1 D10 minimum-sample check over the scored split);
3. the eleven dimension functions per case and the §2 case score;
4. within-bucket percentiles and bandwidths, bucket reports;
5. §5 IAA reports over all gold rows (annotation quality does not depend on the split), and
   the per-bucket ``annotation_low`` check;
6. §6 degradation flags against an optional baseline report.

**The split rule** (issue 28): a score of the scored split depends only on that split's
predictions. Every statistic fitted on *predictions* -- the D7 coupling rho of a bucket, the
§3.2 anchor full mark, the D6 batch F1 and ECE, the D7 base rates -- is taken over the scored
split's cases alone. Statistics of the *gold file* alone, which no system answer can move,
are benchmark properties and count the whole gold pool, as §1 and §3.3 ask (issue 22): the
D6 frequency tiers, the D7 pool admission, the D10 minimum sample, the §3.3 bucket size, the
anchor admission (kappa) and IAA. Before issue 28 the rho and the anchor full mark read
every split, so one dev-split prediction moved a test-split case score.

Batch-level flags that the §8.2 ``BatchReport`` has no field for (``d7_pool_not_admitted``,
``d10_insufficient_sample``) are listed, with their evidence, in ``details["batch_flags"]``;
the per-case dimension flags carry the same names.

A case of the gold file without a prediction is scored as an empty prediction (so leaving a
case out never helps) and listed in ``details["missing_predictions"]``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from fks.evalharness import aggregate, gaming, iaa
from fks.evalharness.components import frequency_tier_weights, norm_set, rank_correlation
from fks.evalharness.config import BUCKET_LABELS, IAA_TASKS, HarnessConfig
from fks.evalharness.degradation import degradation_flags, degradation_review
from fks.evalharness.dimensions import (
    DIMENSIONS,
    FLAG_C_KELLY_RETIRED,
    FLAG_D7_POOL,
    FLAG_D10_SAMPLE,
    BatchContext,
    DimensionResult,
    d6_batch_figures,
    d10_sample_counts,
)
from fks.evalharness.inputs import CaseRecord, DoubleAnnotation, GoldRecord
from fks.evalharness.schema import (
    BatchReport,
    BucketReport,
    CaseScore,
    DimensionScore,
    IAAReport,
)
from fks.evalharness.split import assign_splits, out_of_bounds
from fks.log import track
from fks.text import normalize

__all__ = [
    "CaseNotScorable",
    "EmptySplit",
    "HarnessResult",
    "batch_context",
    "score_case",
    "score_batch",
]

log = logging.getLogger(__name__)


class CaseNotScorable(ValueError):
    """No weighted dimension of a case could be computed (its gold annotates none)."""

    def __init__(self, case_id: str, reasons: list[str]) -> None:
        self.case_id = case_id
        super().__init__(
            f"case {case_id!r}: no weighted dimension could be computed ({', '.join(reasons)})"
        )


class EmptySplit(ValueError):
    """No gold case falls in the requested split."""


@dataclass
class HarnessResult:
    """The batch report, the case scores behind it, and diagnostics for the HTML/details."""

    report: BatchReport
    case_scores: list[CaseScore]
    details: dict[str, Any] = field(default_factory=dict)


def batch_context(
    pairs: Sequence[tuple[CaseRecord, GoldRecord]],
    cfg: HarnessConfig,
    *,
    all_golds: Sequence[GoldRecord] | None = None,
) -> BatchContext:
    """D6 label weights, D7 coupling rho, base rates and pool admission, D10 sample check.

    The §1 sample-size gates count the bucket, not the scored split (issue 22): the D6 tiers,
    the D7 pool admission and the D10 minimum sample read ``all_golds`` (every gold row;
    default: the pairs' golds) -- gold only. What reads predictions reads ``pairs`` only, the
    scored split (issue 28, the split rule of the module docstring): the D7 coupling rho of a
    bucket is taken over the bucket's scored cases, so a bucket with fewer than two distinct
    gold coupling strengths in the split leaves D7 undefined (``d7_undefined:rho_coupling``).
    """
    d = cfg.dimensions
    if d.d6_label_weights:
        weights = {normalize(k): v for k, v in d.d6_label_weights.items()}
    else:
        # issue 22: tiers from the whole gold pool, not the scored split, so every split of a
        # quarter shares one table (the quarterly table of d6_label_weights replaces it)
        counts: Counter[str] = Counter()
        for g in all_golds if all_golds is not None else [g for _, g in pairs]:
            if g.harness.bias_labels is not None:
                counts.update(norm_set(g.harness.bias_labels.m7a))
                counts.update(norm_set(g.harness.bias_labels.m7b))
        weights = frequency_tier_weights(counts, tiers=d.d6_tier_weights) if counts else {}
    rho: dict[str, float | None] = {}
    by_bucket: dict[str, tuple[dict[str, float], dict[str, float]]] = {}
    for p, g in pairs:
        if g.result.s1 is None or g.result.s1.coupling_strength is None:
            continue
        pred_map, gold_map = by_bucket.setdefault(g.bucket_label, ({}, {}))
        gold_map[g.case_id] = g.result.s1.coupling_strength
        if p.result.s1 is not None and p.result.s1.coupling_strength is not None:
            pred_map[g.case_id] = p.result.s1.coupling_strength
    for bucket, (pred_map, gold_map) in by_bucket.items():
        rho[bucket] = rank_correlation(pred_map, gold_map)
    with_s1 = [(p, g) for p, g in pairs if g.result.s1 is not None]
    rates = gaming.base_rate_check(
        [set(p.result.s1.s1_mode) if p.result.s1 else set() for p, _ in with_s1],
        [set(g.result.s1.s1_mode) for _, g in with_s1],  # type: ignore[union-attr]
        factor=d.d7_base_rate_factor,
    )
    exceeded = frozenset(m for m, r in rates.items() if r["exceeded"])
    pool_golds = all_golds if all_golds is not None else [g for _, g in pairs]
    return BatchContext(
        label_weights=weights,
        coupling_rho=rho,
        d7_exceeded_modes=exceeded,
        d7_pool=iaa.d7_pool_admission(pool_golds, cfg.iaa.thresholds["D7_external"]),
        d10_sample=d10_sample_counts(pool_golds, cfg),
        d6_batch=d6_batch_figures(pairs, weights, cfg),
    )


def _batch_flags(ctx: BatchContext) -> list[dict[str, Any]]:
    """Batch-level flags with their evidence (D7 pool refused, D10 sample below minimum)."""
    flags = []
    if ctx.d7_pool is not None and not ctx.d7_pool["admitted"]:
        flags.append({"flag": FLAG_D7_POOL, **ctx.d7_pool})
    if ctx.d10_sample is not None and ctx.d10_sample["insufficient"]:
        flags.append({"flag": FLAG_D10_SAMPLE, **ctx.d10_sample})
    return flags


def score_case(
    pred: CaseRecord, gold: GoldRecord, cfg: HarnessConfig, ctx: BatchContext
) -> tuple[dict[str, DimensionResult], float]:
    """Compute the eleven dimension results of one case and its §2 case score.

    The §3.1 must-evaluate dimensions of the bucket that were not computed get
    ``dN_required_missing``; a dimension kept in the fixed denominator without a score gets
    ``required_not_computed`` plus ``components["state"]`` / ``["reasons"]``
    (:func:`~fks.evalharness.aggregate.case_aggregate`).

    Raises:
        CaseNotScorable: no dimension with a positive weight was computed.
    """
    results = {dim: fn(pred, gold, cfg, ctx) for dim, fn in DIMENSIONS.items()}
    required = cfg.required_for(gold.bucket_label)
    for dim in required:
        r = results[dim]
        flag = f"{dim.lower()}_required_missing"
        if r.value is None and flag not in r.flags:
            results[dim] = replace(r, flags=(*r.flags, flag))
    score, states = aggregate.case_aggregate(
        {d: r.value for d, r in results.items()},
        {d: r.flags for d, r in results.items()},
        cfg.weights_for(gold.bucket_label),
        required=required,
        mode=cfg.aggregate_denominator,
    )
    if score is None:
        raise CaseNotScorable(gold.case_id, sorted({f for r in results.values() for f in r.flags}))
    for dim, state in states.items():
        r = results[dim]
        if state == aggregate.REQUIRED_NOT_COMPUTED:
            reasons = [f for f in r.flags if f != FLAG_C_KELLY_RETIRED]
            results[dim] = replace(
                r,
                components={**r.components, "state": state, "reasons": reasons},
                flags=(*r.flags, aggregate.REQUIRED_NOT_COMPUTED),
            )
    return results, score


def _annotation_items(golds: Sequence[GoldRecord]) -> dict[str, list[tuple[str, DoubleAnnotation]]]:
    items: dict[str, list[tuple[str, DoubleAnnotation]]] = {t: [] for t in IAA_TASKS}
    for g in golds:
        for ann in g.double_annotations:
            items[ann.task_id].append((g.case_id, ann))
    return items


def _annotation_low(golds: Sequence[GoldRecord], cfg: HarnessConfig) -> dict[str, list[str]]:
    """Per bucket, the IAA tasks whose kappa over the bucket's items is below threshold."""
    low: dict[str, list[str]] = {}
    by_bucket: dict[str, list[GoldRecord]] = {}
    for g in golds:
        by_bucket.setdefault(g.bucket_label, []).append(g)
    for bucket, members in by_bucket.items():
        for task, items in _annotation_items(members).items():
            if len(items) < 2:
                continue
            kappa = iaa.kappa_or_none([a.label_a for _, a in items], [a.label_b for _, a in items])
            if kappa is not None and kappa < cfg.iaa.thresholds[task]:  # type: ignore[index]
                low.setdefault(bucket, []).append(task)
    return low


def _with_percentiles(
    case_results: list[tuple[GoldRecord, dict[str, DimensionResult], float]],
    cfg: HarnessConfig,
    split: str,
) -> tuple[list[CaseScore], dict[str, dict[str, Any]]]:
    """Case scores with within-bucket percentiles (+ bandwidth below 30 scores)."""
    by_bucket: dict[str, list[int]] = {}
    for k, (g, _, _) in enumerate(case_results):
        by_bucket.setdefault(g.bucket_label, []).append(k)
    pct: dict[tuple[int, str], tuple[float, float | None]] = {}
    case_pct: dict[str, dict[str, Any]] = {}
    for members in by_bucket.values():
        for dim in DIMENSIONS:
            idx = [k for k in members if case_results[k][1][dim].value is not None]
            values = [case_results[k][1][dim].value for k in idx]
            got = aggregate.bucket_percentiles(
                values,
                cfg.bootstrap,
                min_cases=cfg.percentile_min_cases,  # type: ignore[arg-type]
            )
            pct.update({(k, dim): pb for k, pb in zip(idx, got, strict=True)})
        scores = [case_results[k][2] for k in members]
        got = aggregate.bucket_percentiles(
            scores, cfg.bootstrap, min_cases=cfg.percentile_min_cases
        )
        for k, (p, bw) in zip(members, got, strict=True):
            case_pct[case_results[k][0].case_id] = {"percentile": p, "bandwidth": bw}
    out = []
    for k, (g, results, score) in enumerate(case_results):
        dims = {}
        for dim, r in results.items():
            p, bw = pct.get((k, dim), (None, None))
            base = r.to_score()
            dims[dim] = DimensionScore(
                **base.model_dump(exclude={"bucket_percentile", "bandwidth"}),
                bucket_percentile=p,
                bandwidth=bw,
            )
        out.append(
            CaseScore(
                case_id=g.case_id,
                bucket_label=g.bucket_label,
                split=split,  # type: ignore[arg-type]
                dimensions=dims,  # type: ignore[arg-type]
                aggregate_score=score,
                iaa_kappa=g.iaa_kappa,
                ece=results["D6"].components.get("ece"),
            )
        )
    return out, case_pct


def _bucket_anchors(
    golds: Sequence[GoldRecord],
    cfg: HarnessConfig,
    case_scores: Sequence[CaseScore],
) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """§3.2 anchors per bucket: ``({bucket: {case_id: score}}, refused)``.

    An anchor (gold ``bucket_anchor``) is admitted when its ``iaa_kappa`` is >=
    ``bucket_anchor_min_kappa`` and it is scored in this split: the full mark is a statistic
    of the system's answers, so (issue 28) an anchor of another split never sets it --
    ``golds`` holds every gold row, and anchors outside the scored split are counted apart
    (``refused`` maps them to ``"outside the scored split"``, the low-kappa ones to the reason).
    """
    scored = {c.case_id: c.aggregate_score for c in case_scores}
    out: dict[str, dict[str, float]] = {}
    refused: dict[str, str] = {}
    for g in golds:
        if not g.bucket_anchor:
            continue
        if g.iaa_kappa is None or g.iaa_kappa < cfg.bucket_anchor_min_kappa:
            refused[g.case_id] = f"iaa_kappa {g.iaa_kappa} < {cfg.bucket_anchor_min_kappa}"
            continue
        if g.case_id not in scored:
            refused[g.case_id] = "outside the scored split"
            continue
        out.setdefault(g.bucket_label, {})[g.case_id] = scored[g.case_id]
    return out, refused


def _d8_by_type(case_scores: Sequence[CaseScore]) -> dict[str, dict[str, Any]]:
    """§1 D8: the two sample types (cross-period same-bucket, cross-bucket same-period) apart.

    ``{comparison_type: {"n", "median", "by_bucket": {bucket: {"n", "median"}}}}`` over the
    computed D8 scores.
    """
    groups: dict[str, dict[str, list[float]]] = {}
    for cs in case_scores:
        d8 = cs.dimensions.get("D8")
        if d8 is None or d8.raw_score is None:
            continue
        kind = str(d8.components.get("comparison_type"))
        groups.setdefault(kind, {}).setdefault(cs.bucket_label, []).append(d8.raw_score)
    out = {}
    for kind, by_bucket in sorted(groups.items()):
        values = [v for vs in by_bucket.values() for v in vs]
        out[kind] = {
            "n": len(values),
            "median": float(np.median(values)),
            "by_bucket": {
                b: {"n": len(vs), "median": float(np.median(vs))}
                for b, vs in sorted(by_bucket.items())
            },
        }
    return out


def _d5_bucket_summary(case_scores: Sequence[CaseScore]) -> dict[str, dict[str, Any]]:
    """Sum the D5 confusion matrices and the not-applicable FP rate per bucket (§7)."""
    out: dict[str, dict[str, Any]] = {}
    for cs in case_scores:
        d5 = cs.dimensions.get("D5")
        if d5 is None or "confusion_matrix" not in d5.components:
            continue
        m = np.asarray(d5.components["confusion_matrix"], dtype=int)
        entry = out.setdefault(
            cs.bucket_label,
            {"labels": d5.components["confusion_labels"], "matrix": np.zeros_like(m)},
        )
        entry["matrix"] = entry["matrix"] + m
    for entry in out.values():
        m = entry["matrix"]
        negatives = int(m[:2].sum())  # gold rows applicable, partial
        entry["fp_rate"] = float(m[:2, 2].sum() / negatives) if negatives else None
        entry["matrix"] = m.tolist()
    return out


def anchor_placement(golds: Sequence[GoldRecord], cfg: HarnessConfig) -> dict[str, Any]:
    """Whether the 10/3/1 anchor placement applies (``split.force_anchor_placement``)."""
    anchors = [g.case_id for g in golds if g.self_annotated_anchor]
    want = sum(cfg.split.anchor_counts.values())
    mode = cfg.split.force_anchor_placement
    placed = mode is True or (mode == "auto" and len(anchors) == want)
    out: dict[str, Any] = {"mode": mode, "anchors": len(anchors), "expected": want}
    out["placed"] = placed
    if not placed and anchors and mode == "auto":
        out["reason"] = f"{len(anchors)} self-annotated anchors, not {want}: left to the hash"
    return out


def _splits(
    golds: Sequence[GoldRecord], cfg: HarnessConfig, pinned: Mapping[str, str] | None
) -> dict[str, str]:
    """§4.1 split of every gold case: pinned cases kept, holdout rule, anchor placement."""
    anchors = (
        [g.case_id for g in golds if g.self_annotated_anchor]
        if anchor_placement(golds, cfg)["placed"]
        else None
    )
    return assign_splits(
        {g.case_id: g.bucket_label for g in golds},
        salt=cfg.split.salt,
        anchors=anchors,
        anchor_counts=cfg.split.anchor_counts,
        pinned=pinned,
    )


def _iaa(
    golds: Sequence[GoldRecord], cfg: HarnessConfig
) -> tuple[list[IAAReport], dict[str, dict[str, Any]]]:
    """§5 IAA reports (tasks with a defined kappa) and summaries (every task with items)."""
    reports, summaries = [], {}
    for task, items in _annotation_items(golds).items():
        if not items:
            continue
        summaries[task] = iaa.iaa_summary(task, items, cfg.iaa)
        report = iaa.iaa_report(task, items, cfg.iaa)
        if report is not None:
            reports.append(report)
    return reports, summaries


def _details(
    *,
    splits: Mapping[str, str],
    golds: Sequence[GoldRecord],
    selected: Sequence[GoldRecord],
    case_scores: Sequence[CaseScore],
    case_pct: Mapping[str, dict[str, Any]],
    reports: Mapping[str, BucketReport],
    ctx: BatchContext,
    cfg: HarnessConfig,
    anchor_scores: Mapping[str, Mapping[str, float]],
    anchor_refused: Mapping[str, str],
) -> dict[str, Any]:
    """Diagnostics that the §8.2 records have no field for (``harness_details.json``)."""
    by_bucket: dict[str, list[CaseScore]] = {}
    for cs in case_scores:
        by_bucket.setdefault(cs.bucket_label, []).append(cs)
    normalisation = {
        b: aggregate.anchor_normalisation(
            members, anchor_scores.get(b, {}), min_anchors=cfg.bucket_anchor_min
        )
        for b, members in by_bucket.items()
    }
    return {
        "split_counts": dict(Counter(splits.values())),
        "split_counts_by_bucket": {
            b: dict(Counter(splits[g.case_id] for g in golds if g.bucket_label == b))
            for b in BUCKET_LABELS
            if any(g.bucket_label == b for g in golds)
        },
        "case_percentiles": dict(case_pct),
        "cross_bucket_table": aggregate.cross_bucket_table(reports, normalisation),
        "bucket_normalisation": normalisation,
        "bucket_anchors_refused": anchor_refused,
        "d5_by_bucket": _d5_bucket_summary(case_scores),
        "d8_by_type": _d8_by_type(case_scores),
        "d6_label_weights": dict(ctx.label_weights),
        "d6_label_weights_source": "config" if cfg.dimensions.d6_label_weights else "gold_pool",
        "d6_batch": dict(ctx.d6_batch or {}),
        "d7_coupling_rho": dict(ctx.coupling_rho),
        "d7_exceeded_modes": sorted(ctx.d7_exceeded_modes),
        "d7_pool": dict(ctx.d7_pool or {}),
        "d10_sample": dict(ctx.d10_sample or {}),
        "batch_flags": _batch_flags(ctx),
        "config": cfg.model_dump(mode="json"),
    }


def score_batch(
    cases: Mapping[str, CaseRecord],
    golds: Sequence[GoldRecord],
    cfg: HarnessConfig,
    *,
    split: str = "test",
    baseline: BatchReport | None = None,
    pinned_splits: Mapping[str, str] | None = None,
) -> HarnessResult:
    """Score the cases of ``split`` and build the §8.2 :class:`BatchReport`.

    Args:
        cases: predictions by case id (a gold case without one is scored as empty).
        golds: gold rows, in file (annotation) order; case ids unique.
        cfg: the harness configuration.
        split: ``"dev"``, ``"test"`` or ``"holdout"``.
        baseline: last quarter's report, for §6 degradation flags.
        pinned_splits: stored split assignments (never moved; see
            :func:`~fks.evalharness.split.assign_splits`). ``details["splits"]`` holds the full
            assignment to store back, ``details["split_new_cases"]`` the cases assigned now.

    Raises:
        EmptySplit: no gold case falls in ``split``.
        CaseNotScorable: a case's gold annotates no weighted dimension.
    """
    splits = _splits(golds, cfg, pinned_splits)
    selected = [g for g in golds if splits[g.case_id] == split]
    if not selected:
        raise EmptySplit(f"no gold case falls in split {split!r} ({len(golds)} cases in all)")
    missing = [g.case_id for g in selected if g.case_id not in cases]
    if missing:
        log.warning(
            "%d case(s) of split %s have no prediction; scored as empty", len(missing), split
        )
    pairs = [(cases.get(g.case_id) or CaseRecord(case_id=g.case_id), g) for g in selected]
    ctx = batch_context(pairs, cfg, all_golds=golds)
    case_results = []
    for p, g in track(pairs, "scoring cases", total=len(pairs)):
        results, score = score_case(p, g, cfg, ctx)
        case_results.append((g, results, score))
    case_scores, case_pct = _with_percentiles(case_results, cfg, split)
    anchor_scores, anchor_refused = _bucket_anchors(golds, cfg, case_scores)
    low = _annotation_low(golds, cfg)
    bucket_sizes = Counter(g.bucket_label for g in golds)
    reports: dict[str, BucketReport] = {}
    for b in BUCKET_LABELS:
        members = [c for c in case_scores if c.bucket_label == b]
        if members:
            reports[b] = aggregate.bucket_report(
                b, members, cfg, annotation_low=b in low, bucket_size=bucket_sizes[b]
            )
    iaa_reports, summaries = _iaa(golds, cfg)
    flags = degradation_flags(baseline, reports, case_scores, cfg.degradation) if baseline else []
    report = BatchReport(
        split=split,  # type: ignore[arg-type]
        bucket_reports=reports,  # type: ignore[arg-type]
        degradation_flags=flags,
        iaa_reports=iaa_reports,
    )
    details = _details(
        splits=splits,
        golds=golds,
        selected=selected,
        case_scores=case_scores,
        case_pct=case_pct,
        reports=reports,
        ctx=ctx,
        cfg=cfg,
        anchor_scores=anchor_scores,
        anchor_refused=anchor_refused,
    )
    details.update(missing_predictions=missing, annotation_low_tasks=low, iaa=summaries)
    details["bucket_sizes"] = dict(bucket_sizes)
    details["degradation_review"] = (
        degradation_review(baseline, reports, case_scores, cfg.degradation) if baseline else []
    )
    details.update(
        splits=dict(splits),
        split_new_cases=sorted(c for c in splits if c not in (pinned_splits or {})),
        holdout_out_of_bounds=out_of_bounds({g.case_id: g.bucket_label for g in golds}, splits),
        anchor_placement=anchor_placement(golds, cfg),
    )
    return HarnessResult(report=report, case_scores=case_scores, details=details)
