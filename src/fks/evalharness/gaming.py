"""Anti-gaming checks of spec §7, as pure functions returning the evidence and a verdict.

=========================================  =================================================
gaming path                                check (flag)
=========================================  =================================================
D1 exhaustive multi-entity listing         ``len(pred) > 2 len(gold)`` (``d1_exhaustive_listing``);
                                           the F1 precision penalty is applied in D1 itself
D6 top-3 frequent-bias farming             ``|F1^w - F1^m| > 0.15`` (``d6_weighted_macro_gap``)
D6 label everything, high confidence       ``ECE > 0.15`` (``d6_ece_above_threshold``)
D7 default "far extrapolation" output      predicted share ``h > 1.5 r`` of a mode's base rate
                                           (``d7_base_rate_exceeded:<mode>``)
D5 label everything not-applicable         confusion matrix + FP rate always reported;
                                           ``d5_all_not_applicable``, and
                                           ``d5_fp_above_bucket_baseline`` (with a deduction)
D10 over-pessimism                         ``1 - FPR_healthy`` inside D10's formula
=========================================  =================================================

For D5 the positive class of the FP rate is ``not-applicable`` (the claim the gaming path
over-uses): ``FP = #{pred not-applicable, gold other}``, ``FPR = FP / #{gold other}``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

__all__ = [
    "FLAG_D1_EXHAUSTIVE",
    "FLAG_D5_ALL_NA",
    "FLAG_D5_FP_BASELINE",
    "FLAG_D6_GAP",
    "FLAG_D6_ECE",
    "FLAG_D7_BASE_RATE",
    "GAMING_FLAGS",
    "is_gaming_flag",
    "exhaustive_listing",
    "weighted_macro_gap",
    "ece_above_threshold",
    "base_rate_check",
    "na_false_positive_rate",
    "all_not_applicable",
]

FLAG_D1_EXHAUSTIVE = "d1_exhaustive_listing"
FLAG_D5_ALL_NA = "d5_all_not_applicable"
FLAG_D5_FP_BASELINE = "d5_fp_above_bucket_baseline"
FLAG_D6_GAP = "d6_weighted_macro_gap"
FLAG_D6_ECE = "d6_ece_above_threshold"
FLAG_D7_BASE_RATE = "d7_base_rate_exceeded"

#: The §7 flags (as opposed to "not computed" reasons and the C_kelly note).
GAMING_FLAGS = (
    FLAG_D1_EXHAUSTIVE,
    FLAG_D5_ALL_NA,
    FLAG_D5_FP_BASELINE,
    FLAG_D6_GAP,
    FLAG_D6_ECE,
    FLAG_D7_BASE_RATE,
)

NOT_APPLICABLE = "not-applicable"


def is_gaming_flag(flag: str) -> bool:
    """Tell a §7 anti-gaming flag (``d7_base_rate_exceeded:<mode>`` included) from the rest."""
    return flag.split(":", 1)[0] in GAMING_FLAGS


def exhaustive_listing(n_pred: int, n_gold: int, *, max_ratio: float = 2.0) -> bool:
    """D1: the prediction lists more than ``max_ratio`` times the gold entities.

    >>> exhaustive_listing(5, 2), exhaustive_listing(4, 2)
    (True, False)
    """
    return n_gold > 0 and n_pred > max_ratio * n_gold


def weighted_macro_gap(f1_weighted: float, f1_macro: float, *, threshold: float = 0.15) -> bool:
    """D6: ``|F1^w - F1^m| > threshold`` -- label-bias gaming, send to human review."""
    return abs(f1_weighted - f1_macro) > threshold


def ece_above_threshold(ece: float | None, *, threshold: float = 0.15) -> bool:
    """D6: ``ECE > threshold`` (``ECE <= 0.15`` passes; an undefined ECE does not fire)."""
    return ece is not None and ece > threshold


def base_rate_check(
    pred_modes: Sequence[set[str]], gold_modes: Sequence[set[str]], *, factor: float = 1.5
) -> dict[str, dict[str, float | bool]]:
    """D7 base-rate correction over a batch of cases.

    For each mode m: ``r_m`` = share of cases whose gold holds m, ``h_m`` = share of cases whose
    prediction holds m; ``exceeded = h_m > factor * r_m`` (so any use of a mode absent from the
    gold fires).

    Returns:
        ``{mode: {"base_rate": r, "hit_rate": h, "exceeded": bool}}`` for every mode seen.

    >>> base_rate_check([{"a"}, {"a"}], [{"a"}, {"b"}])["a"]
    {'base_rate': 0.5, 'hit_rate': 1.0, 'exceeded': True}
    """
    if len(pred_modes) != len(gold_modes):
        raise ValueError("pred_modes and gold_modes must align")
    n = len(gold_modes)
    if n == 0:
        return {}
    pred_count = Counter(m for s in pred_modes for m in s)
    gold_count = Counter(m for s in gold_modes for m in s)
    out: dict[str, dict[str, float | bool]] = {}
    for mode in sorted(set(pred_count) | set(gold_count)):
        r, h = gold_count[mode] / n, pred_count[mode] / n
        out[mode] = {"base_rate": r, "hit_rate": h, "exceeded": h > factor * r}
    return out


def na_false_positive_rate(gold: Sequence[str], pred: Sequence[str | None]) -> float | None:
    """D5 FP rate of the ``not-applicable`` label: ``FP / #{gold != not-applicable}``.

    ``None`` when no graded item is applicable in gold (no negatives).

    >>> na_false_positive_rate(["applicable", "partial", "not-applicable"],
    ...                        ["not-applicable", "partial", "not-applicable"])
    0.5
    """
    negatives = [p for g, p in zip(gold, pred, strict=True) if g != NOT_APPLICABLE]
    if not negatives:
        return None
    return sum(p == NOT_APPLICABLE for p in negatives) / len(negatives)


def all_not_applicable(gold: Sequence[str], pred: Sequence[str | None]) -> bool:
    """D5: every prediction says not-applicable while gold has an applicable item."""
    return (
        bool(pred)
        and all(p == NOT_APPLICABLE for p in pred)
        and any(g != NOT_APPLICABLE for g in gold)
    )
