"""Inter-annotator agreement (spec §5): rolling Cohen's kappa, mini-review trigger, audit trail.

Kappa is :func:`fks.metrics.stats.cohen_kappa` (the shared statistics core). §5 counts
**cases** ("p_o = 两标注者一致 case 数 / 总 case 数", "滚动窗口 10 case 不一致 >= 3"), so the
report (:func:`iaa_summary`) first folds a task's annotation items into one label pair per case,
in the order each case first appears (:func:`case_labels`; a case with several items of the task
is labelled by its items' labels in item order, so it disagrees when any item does).

* **Mini-review trigger**: the *current* rolling window -- the last 10 cases -- holds >= 3
  disagreeing cases (the spec's ">= 30 % disagreement"). A past window that qualified but has
  rolled out does not keep the review open (it is reported as ``past_windows_triggered``);
  the report's kappa and disagreement rate describe the same last window.
* **Contested points**: once a review is triggered, every case of that window whose
  disagreement the third annotator's 2:1 vote cannot settle (no third label, or one matching
  neither) joins the audit trail with its escalation: ``status: "escalated"``, ``escalated_to:
  "ecosystem_initiator"`` (single-point ruling) and ``objection_period_days: 14`` (§5).
* **Thresholds** per task (``harness.yaml``): A 0.65, B/C/D1_open/D7_external 0.70, D 0.75.
  Consecutive windows below threshold are counted for the report (template refinement).

A window whose kappa is undefined (both annotators used one identical label throughout; the
core returns NaN) has perfect observed agreement; :func:`iaa_report` then returns ``None`` for
the task (the §8.2 field is a required float) and :func:`iaa_summary` says why.

**D7 pool admission** (§1 D7, threshold from §5 ``D7_external``): :func:`d7_pool_admission`
computes the cross kappa between the external primary mode (``s1_mode[0]``) and the self label
(``self_s1_mode``) over the gold rows carrying both; the batch's D7 cases enter the evaluation
pool only when that kappa is defined and >= the threshold.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Sequence
from typing import Any

from fks.evalharness.config import IAASettings
from fks.evalharness.inputs import DoubleAnnotation, GoldRecord
from fks.evalharness.schema import IAAReport
from fks.metrics.stats import UndefinedStatisticWarning, cohen_kappa

__all__ = [
    "kappa_or_none",
    "rolling_kappa",
    "disagreements",
    "mini_review_triggered",
    "majority_vote",
    "contested_points",
    "consecutive_below",
    "case_labels",
    "iaa_report",
    "iaa_summary",
    "d7_pool_admission",
]


def kappa_or_none(labels_a: Sequence[Hashable], labels_b: Sequence[Hashable]) -> float | None:
    """Return :func:`cohen_kappa`, or ``None`` where it is undefined (no warning raised)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedStatisticWarning)
        value = cohen_kappa(labels_a, labels_b)
    return None if math.isnan(value) else value


def rolling_kappa(
    labels_a: Sequence[Hashable], labels_b: Sequence[Hashable], *, window: int = 10
) -> list[float | None]:
    """Kappa of each window of ``window`` consecutive items (``len - window + 1`` values).

    With fewer items than ``window`` the one partial window is used.

    >>> [round(k, 6) for k in rolling_kappa(["y", "n", "y", "n"], ["y", "n", "y", "y"], window=3)]
    [1.0, 0.4]
    """
    if len(labels_a) != len(labels_b):
        raise ValueError("labels_a and labels_b differ in length")
    n = len(labels_a)
    if n == 0:
        return []
    size = min(window, n)
    return [
        kappa_or_none(labels_a[s : s + size], labels_b[s : s + size]) for s in range(n - size + 1)
    ]


def disagreements(labels_a: Sequence[Hashable], labels_b: Sequence[Hashable]) -> list[bool]:
    """Flag, per item, whether the two annotators disagree."""
    return [a != b for a, b in zip(labels_a, labels_b, strict=True)]


def mini_review_triggered(
    labels_a: Sequence[Hashable],
    labels_b: Sequence[Hashable],
    *,
    window: int = 10,
    min_disagreements: int = 3,
) -> bool:
    """Tell whether some window of ``window`` consecutive items holds >= ``min_disagreements``.

    >>> mini_review_triggered("aaaaaaaaaa", "abbbaaaaaa")
    True
    >>> mini_review_triggered("aaaaaaaaaaaa", "abbaaaaaaaab")
    False
    """
    flags = disagreements(labels_a, labels_b)
    size = min(window, len(flags))
    return any(sum(flags[s : s + size]) >= min_disagreements for s in range(len(flags) - size + 1))


def majority_vote(label_a: str, label_b: str, label_c: str | None) -> str | None:
    """2:1 majority of three labels; ``None`` when there is none (or no third label)."""
    if label_a == label_b:
        return label_a
    if label_c is not None and label_c in (label_a, label_b):
        return label_c
    return None


def contested_points(
    items: Sequence[tuple[str, DoubleAnnotation]], *, triggered: bool
) -> list[dict[str, Any]]:
    """Audit trail: disagreements a triggered review's 2:1 vote did not settle.

    Args:
        items: ``(case_id, annotation)`` pairs of one task, in annotation order.
        triggered: whether the task's mini-review fired (no review, no contested points).
    """
    if not triggered:
        return []
    out = []
    for case_id, ann in items:
        settled = majority_vote(ann.label_a, ann.label_b, ann.label_c) is not None
        if ann.label_a != ann.label_b and not settled:
            out.append(
                {
                    "case_id": case_id,
                    "item": ann.item,
                    "label_a": ann.label_a,
                    "label_b": ann.label_b,
                    "label_c": ann.label_c,
                    "status": "escalate",
                }
            )
    return out


def consecutive_below(kappas: Sequence[float | None], threshold: float) -> int:
    """Length of the trailing run of windows whose kappa is below ``threshold``."""
    run = 0
    for k in reversed(kappas):
        if k is None or k >= threshold:
            break
        run += 1
    return run


def case_labels(
    items: Sequence[tuple[str, DoubleAnnotation]],
) -> list[tuple[str, str, str, list[DoubleAnnotation]]]:
    """Fold items into one ``(case_id, label_a, label_b, items)`` per case, in first-seen order.

    A case with one item keeps its labels; with several, each side's label is its items'
    labels joined with `` | `` in item order.
    """
    by_case: dict[str, list[DoubleAnnotation]] = {}
    for cid, ann in items:
        by_case.setdefault(cid, []).append(ann)
    out = []
    for cid, anns in by_case.items():
        anns = sorted(anns, key=lambda x: x.item)
        out.append(
            (
                cid,
                " | ".join(x.label_a for x in anns),
                " | ".join(x.label_b for x in anns),
                anns,
            )
        )
    return out


def _escalated(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            **p,
            "status": "escalated",
            "escalated_to": "ecosystem_initiator",
            "objection_period_days": 14,
        }
        for p in points
    ]


def iaa_summary(
    task_id: str, items: Sequence[tuple[str, DoubleAnnotation]], settings: IAASettings
) -> dict[str, Any]:
    """Everything known about one task, counted in cases.

    Last-window kappa, rolling series, the current-window trigger, the escalated audit trail.
    """
    cases = case_labels(items)
    a = [x[1] for x in cases]
    b = [x[2] for x in cases]
    size = min(settings.window, len(a))
    last_a, last_b = a[-size:], b[-size:]
    kappa = kappa_or_none(last_a, last_b) if size else None
    series = rolling_kappa(a, b, window=settings.window)
    min_dis = settings.mini_review_min_disagreements
    triggered = bool(size) and sum(disagreements(last_a, last_b)) >= min_dis
    past = mini_review_triggered(a, b, window=settings.window, min_disagreements=min_dis)
    last_items = [(cid, ann) for cid, _, _, anns in cases[-size:] for ann in anns] if size else []
    threshold = settings.thresholds[task_id]  # type: ignore[index]
    return {
        "task_id": task_id,
        "n_items": len(items),
        "n_cases": len(a),
        "window": size,
        "window_cases": [x[0] for x in cases[-size:]] if size else [],
        "past_windows_triggered": past and not triggered,
        "kappa_rolling_10": kappa,
        "kappa_undefined_reason": None if kappa is not None or not size else "single label",
        "rolling_kappas": series,
        "disagreement_rate": (sum(disagreements(last_a, last_b)) / size) if size else 0.0,
        "triggered_mini_review": triggered,
        "threshold": threshold,
        "below_threshold": kappa is not None and kappa < threshold,
        "consecutive_windows_below": consecutive_below(series, threshold),
        "contested_points": _escalated(contested_points(last_items, triggered=triggered)),
    }


def iaa_report(
    task_id: str, items: Sequence[tuple[str, DoubleAnnotation]], settings: IAASettings
) -> IAAReport | None:
    """Build the §8.2 :class:`IAAReport` of one task.

    ``None`` when kappa is undefined or there are no items (:func:`iaa_summary` says why).
    """
    s = iaa_summary(task_id, items, settings)
    if s["kappa_rolling_10"] is None:
        return None
    return IAAReport(
        task_id=task_id,  # type: ignore[arg-type]
        kappa_rolling_10=s["kappa_rolling_10"],
        disagreement_rate=s["disagreement_rate"],
        triggered_mini_review=s["triggered_mini_review"],
        contested_points=s["contested_points"],
    )


def d7_pool_admission(golds: Sequence[GoldRecord], min_kappa: float) -> dict[str, Any]:
    """§1 D7: "每样本 >= 1 外部标答，与 14 case 自标交叉 IAA kappa >= 0.7 才入评测池".

    Every gold ``s1`` already names >= 1 external source (the input model rejects a row
    without one), so the per-case half of the rule holds by validation. The batch half: Cohen's
    kappa between the external primary mode ``s1_mode[0]`` and the self label ``self_s1_mode``
    over the gold rows that carry both (all rows of the gold file: annotation quality does not
    depend on the split). The pool is admitted only when that kappa is defined and
    ``>= min_kappa``; no cross-labelled row, or an undefined kappa (one label used throughout),
    refuses it -- the agreement was not shown.

    Returns:
        ``{"admitted", "kappa", "min_kappa", "n_cross_labelled", "n_external", "reason"}``;
        ``reason`` is ``None`` when admitted, else ``"no_cross_labels"``, ``"kappa_undefined"``
        or ``"kappa_below_threshold"``.
    """
    with_s1 = [g.result.s1 for g in golds if g.result.s1 is not None]
    cross = [(s.s1_mode[0], s.self_s1_mode) for s in with_s1 if s.s1_mode and s.self_s1_mode]
    kappa = kappa_or_none([e for e, _ in cross], [m for _, m in cross]) if cross else None
    if not cross:
        reason: str | None = "no_cross_labels"
    elif kappa is None:
        reason = "kappa_undefined"
    elif kappa < min_kappa:
        reason = "kappa_below_threshold"
    else:
        reason = None
    return {
        "admitted": reason is None,
        "kappa": kappa,
        "min_kappa": min_kappa,
        "n_cross_labelled": len(cross),
        "n_external": len(with_s1),
        "reason": reason,
    }
