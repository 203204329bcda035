"""Statistics shared by the metrics: agreement between raters (spec §18.6, EvalHarness §5).

Only the agreement statistics live here so far; the relation-clustered bootstrap and paired
comparisons (spec §14) are added by a later stage.

Both statistics are undefined when the expected disagreement is zero (every label identical):
they then return ``nan`` and emit a :class:`UndefinedStatisticWarning`, never a made-up number.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Hashable, Sequence
from itertools import permutations

__all__ = ["cohen_kappa", "krippendorff_alpha_nominal", "UndefinedStatisticWarning"]


class UndefinedStatisticWarning(RuntimeWarning):
    """A statistic is undefined for the data given (it returns ``nan``)."""


def _check_labels(name: str, labels: Sequence[Hashable]) -> list[Hashable]:
    if isinstance(labels, str | bytes):
        raise TypeError(f"{name} must be a sequence of labels, not a string: {labels!r}")
    out = list(labels)
    for i, x in enumerate(out):
        if x is None or (isinstance(x, float) and math.isnan(x)):
            raise ValueError(f"{name}[{i}] is missing ({x!r}); Cohen's kappa needs complete pairs")
        if not isinstance(x, Hashable):
            raise TypeError(f"{name}[{i}] is not hashable: {x!r}")
    return out


def cohen_kappa(labels_a: Sequence[Hashable], labels_b: Sequence[Hashable]) -> float:
    """Cohen's kappa of two raters on the same items: ``(p_o - p_e) / (1 - p_e)``.

    ``p_o`` is the observed agreement, ``p_e = sum_c P_a(c) P_b(c)`` the agreement expected
    from the two raters' marginals (EvalHarness §5). Labels are any hashable values.

    Returns:
        kappa in [-1, 1]; ``nan`` (with a warning) when ``p_e == 1`` (both raters used one and
        the same label throughout).

    Raises:
        ValueError: different lengths, no items, or a missing label.

    >>> cohen_kappa(["y", "y", "n", "n"], ["y", "n", "n", "n"])
    0.5
    """
    a = _check_labels("labels_a", labels_a)
    b = _check_labels("labels_b", labels_b)
    if len(a) != len(b):
        raise ValueError(f"labels_a and labels_b differ in length: {len(a)} != {len(b)}")
    if not a:
        raise ValueError("no items to compare")
    n = len(a)
    p_o = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[c] * cb[c] for c in ca) / (n * n)
    if p_e >= 1.0:
        warnings.warn("Cohen's kappa is undefined: both raters used a single identical label",
                      UndefinedStatisticWarning, stacklevel=2)
        return math.nan
    return (p_o - p_e) / (1.0 - p_e)


def krippendorff_alpha_nominal(ratings: Sequence[Sequence[Hashable | None]]) -> float:
    """Krippendorff's alpha for nominal data, any number of coders, missing values allowed.

    ``ratings[c][u]`` is coder ``c``'s label for unit ``u`` (``None`` or ``nan``: not rated).
    Units with fewer than two labels are not pairable and are ignored. With ``o_ck`` the
    coincidence matrix (each ordered pair of labels from different coders within a unit adds
    ``1 / (m_u - 1)``), ``n_c`` its marginals and ``n`` the number of pairable values::

        alpha = 1 - (n - 1) * sum_{c != k} o_ck / sum_{c != k} n_c n_k

    Returns:
        alpha (1 perfect, 0 chance, negative systematic disagreement); ``nan`` (with a warning)
        when fewer than two pairable values exist or all pairable values are one label.

    Raises:
        ValueError: no coders, or coders with different numbers of units.

    >>> round(krippendorff_alpha_nominal([["a", "a", "b", "b"], ["a", "b", "b", "b"]]), 4)
    0.5333
    """
    coders = [list(r) for r in ratings]
    if not coders:
        raise ValueError("no coders")
    n_units = len(coders[0])
    if any(len(r) != n_units for r in coders):
        raise ValueError(f"coders rate different numbers of units: {[len(r) for r in coders]}")
    coincidence: Counter[tuple[Hashable, Hashable]] = Counter()
    for u in range(n_units):
        values = [r[u] for r in coders
                  if r[u] is not None and not (isinstance(r[u], float) and math.isnan(r[u]))]
        m = len(values)
        if m < 2:
            continue
        for x, y in permutations(values, 2):
            coincidence[(x, y)] += 1.0 / (m - 1)
    marg: Counter[Hashable] = Counter()
    for (x, _), w in coincidence.items():
        marg[x] += w
    n = sum(marg.values())
    disagree = sum(w for (x, y), w in coincidence.items() if x != y)
    expected = n * n - sum(v * v for v in marg.values())
    if n < 2 or expected <= 0:
        warnings.warn("Krippendorff's alpha is undefined: fewer than two pairable values or a "
                      "single label", UndefinedStatisticWarning, stacklevel=2)
        return math.nan
    return 1.0 - (n - 1) * disagree / expected
