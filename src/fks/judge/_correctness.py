"""Step two of spec §3: reference-aware correctness of each cluster (§3.2), in fks code.

Every judge shares this step, so no judge -- and no text inside a model answer -- can decide a
verdict: a cluster is ``CORRECT`` only when fks finds its identity (entity id, or canonical
meaning) among the gold entity and aliases, and every answer in it actually contains a gold
alias (the *grounding* cross-check, which catches a judge that was talked into putting an
answer in the gold cluster). This step never changes the clusters.

Mapping (special clusters first):

============================  =================  ==========================================
cluster                       correctness        why
============================  =================  ==========================================
``ABSTAIN``                   ``ABSTAIN``        an explicit refusal (§3.1)
``MULTIPLE``                  ``AMBIGUOUS``      several conflicting answers, none chosen
``UNPARSEABLE``               ``REVIEW_REQUIRED`` no claim could be extracted, so correctness
                                                 cannot be decided; not a refusal (§3.1 keeps
                                                 it apart from ABSTAIN) and not a wrong
                                                 answer (§6.2 needs "a clear wrong answer").
                                                 Generation errors land here too, so a rerun
                                                 or a human look is what they need.
``REVIEW_REQUIRED``           ``REVIEW_REQUIRED`` the judge itself failed on this answer
gold entity / gold alias      ``CORRECT``        (``REVIEW_REQUIRED`` if not grounded)
anything else                 ``INCORRECT``
============================  =================  ==========================================
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from fks.judge._lexicon import normalize_cached, semantic_key
from fks.judge._types import (
    ABSTAIN,
    MULTIPLE,
    REVIEW_REQUIRED,
    UNPARSEABLE,
    AnswerGroup,
    GroupResult,
)
from fks.text import find_alias

__all__ = ["Reference", "cluster_correctness", "mark_clusters", "SPECIAL_CORRECTNESS"]

SPECIAL_CORRECTNESS: dict[str, str] = {
    ABSTAIN: "ABSTAIN",
    MULTIPLE: "AMBIGUOUS",
    UNPARSEABLE: "REVIEW_REQUIRED",
    REVIEW_REQUIRED: "REVIEW_REQUIRED",
}


@dataclass(frozen=True)
class Reference:
    """What step two compares a cluster with (spec §3.2).

    Attributes:
        gold_key: cluster id of the gold entity (``ENTITY_Q90``), as the lexicon names it.
        gold_aliases: every accepted alias (entity aliases plus the queries' gold aliases),
            original spellings.
        answer_type: the fact's answer type.
        answer_granularity: ``entity``, ``year``, ``date`` or ``number``.
    """

    gold_key: str
    gold_aliases: tuple[str, ...]
    answer_type: str = ""
    answer_granularity: str = "entity"

    @property
    def alias_keys(self) -> frozenset[str]:
        """Gold aliases as string-cluster keys (:func:`semantic_key`)."""
        return frozenset(k for a in self.gold_aliases if (k := semantic_key(a)))


def cluster_correctness(cluster_id: str, canonical_meaning: str | None, ref: Reference) -> str:
    """Correctness of one cluster before the grounding check (see the module table).

    >>> ref = Reference("ENTITY_Q90", ("Paris", "巴黎"))
    >>> cluster_correctness("ENTITY_Q90", "Paris", ref)
    'CORRECT'
    >>> cluster_correctness("SEMANTIC_巴黎", "巴黎", ref)
    'CORRECT'
    >>> cluster_correctness("ENTITY_Q64", "Berlin", ref)
    'INCORRECT'
    >>> cluster_correctness("MULTIPLE", None, ref)
    'AMBIGUOUS'
    """
    if cluster_id in SPECIAL_CORRECTNESS:
        return SPECIAL_CORRECTNESS[cluster_id]
    if cluster_id == ref.gold_key:
        return "CORRECT"
    keys = ref.alias_keys
    if cluster_id.startswith("SEMANTIC_") and cluster_id[len("SEMANTIC_") :] in keys:
        return "CORRECT"
    if canonical_meaning is not None and semantic_key(canonical_meaning) in keys:
        return "CORRECT"
    return "INCORRECT"


def _grounded(texts: Iterable[str], aliases: list[str]) -> bool:
    """Tell whether some gold alias occurs (``find_alias`` rules) in one of ``texts``."""
    for text in texts:
        t = normalize_cached(text)
        if any(find_alias(t, a, normalized=True) for a in aliases):
            return True
    return False


def mark_clusters(
    group: AnswerGroup, result: GroupResult, ref: Reference
) -> tuple[list[str], dict[str, int]]:
    """Correctness per answer of ``group`` from its clusters (one verdict per cluster).

    A would-be ``CORRECT`` cluster with a member whose span and raw response hold no gold
    alias becomes ``REVIEW_REQUIRED`` as a whole (counted as ``ungrounded_clusters``).

    Returns:
        (correctness per item in item order, counters ``{"ungrounded_clusters": n}``).
    """
    members: dict[str, list[int]] = defaultdict(list)
    for i, a in enumerate(result.assignments):
        members[a.cluster_id].append(i)
    aliases = [a for a in dict.fromkeys(normalize_cached(x) for x in ref.gold_aliases) if a]
    verdict: dict[str, str] = {}
    ungrounded = 0
    seen: dict[tuple[str, str], bool] = {}  # answers repeat: ground each distinct one once

    def grounded(i: int) -> bool:
        key = (group.items[i].span, group.items[i].raw_response)
        if key not in seen:
            seen[key] = _grounded(key, aliases)
        return seen[key]

    for cid, idx in members.items():
        v = cluster_correctness(cid, result.assignments[idx[0]].canonical_meaning, ref)
        if v == "CORRECT" and not all(grounded(i) for i in idx):
            v = "REVIEW_REQUIRED"
            ungrounded += 1
        verdict[cid] = v
    return [verdict[a.cluster_id] for a in result.assignments], {"ungrounded_clusters": ungrounded}
