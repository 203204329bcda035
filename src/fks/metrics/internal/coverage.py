"""The complete-family fact set D∩ (spec §1.3), one definition for every path.

``D∩`` holds the facts that have every main family of the reading *that the run has at all*
(at least one main-forward record or query of that family). A configured family with no
record anywhere in the run (no multilingual queries in a benchmark, for example) cannot
restrict the set -- every fact would drop out and the complete-family figures would be
empty -- so it is left out of the intersection and named in ``families_absent``, which the
console and the report show. The behavioural path (:meth:`fks.metrics.behavior.FactBehavior.
complete` over its observed families) and the internal path (:func:`fks.metrics.
_internal_engine` selections) both follow this rule, so the two complete-family sets of one
run hold the same facts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["families_absent", "complete_family_mask"]


def families_absent(present: Sequence[str], required: Sequence[str]) -> list[str]:
    """Return the families of ``required`` that are not in ``present`` (configured order)."""
    have = set(present)
    return [f for f in required if f not in have]


def complete_family_mask(has: np.ndarray, present: Sequence[str], required: Sequence[str]
                         ) -> np.ndarray:
    """``(F,) bool``: the facts having every family of ``required`` that the run has.

    Args:
        has: ``(F, T)`` bool, fact ``f`` has at least one main query of family ``present[t]``.
        present: the ``T`` families the run has (columns of ``has``).
        required: the reading's main families.
    """
    cols = [list(present).index(f) for f in required if f in set(present)]
    if not cols:
        return np.zeros(len(has), dtype=bool)
    return np.asarray(has, dtype=bool)[:, cols].all(axis=1)
