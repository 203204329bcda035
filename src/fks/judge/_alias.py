"""The alias judge (``--judge alias``, the default): deterministic, offline, fast.

Step one (reference-blind) for one answer, in this order:

1. the scorer's reference-blind labels become special clusters: ``abstain`` -> ``ABSTAIN``,
   ``ambiguous`` -> ``MULTIPLE``, ``unparseable`` and every generation error/timeout ->
   ``UNPARSEABLE``; an empty span is ``UNPARSEABLE`` too;
2. the span (the scorer's ``extracted_answer``, else the response's first segment) is resolved
   against the relation's lexicon -- every entity filling that slot anywhere in the benchmark,
   with all its aliases in every language -- preferring the longest matching alias:
   one entity -> ``ENTITY_<Qid>`` (confidence 1.0); aliases of two different entities ->
   ``MULTIPLE``, unless blanking out the question's own entity (``Germany borders France``
   asked about Germany) leaves one; one alias shared by several entities ->
   ``SEMANTIC_<alias>`` (0.7);
3. otherwise a string cluster ``SEMANTIC_<key>`` (confidence 0.5), the key being the
   normalised span up to its first comma, semicolon, parenthesis or dash-separated aside
   (``Lyon, a big city`` and ``Lyon`` are one answer; the explanation is ignored, §3.1).

Clusters are assigned per answer from a fixed key, so within a group the "same cluster"
relation is an equivalence by construction. Correctness is step two
(:func:`fks.judge.mark_clusters`), shared with every judge.
"""

from __future__ import annotations

import re
from typing import Any

from fks import __version__
from fks.judge._lexicon import EntityLexicon, semantic_key
from fks.judge._types import (
    MULTIPLE,
    UNPARSEABLE,
    AnswerGroup,
    AnswerItem,
    Assignment,
    GroupResult,
)
from fks.text import strip_mentions

__all__ = ["AliasJudge", "HINT_CLUSTERS"]

#: scorer label -> special cluster (labels that do not depend on the gold answer)
HINT_CLUSTERS: dict[str, tuple[str, str]] = {
    "abstain": ("ABSTAIN", "ABSTAIN"),
    "ambiguous": (MULTIPLE, "MULTIPLE"),
    "unparseable": (UNPARSEABLE, "UNPARSEABLE"),
}

_ASIDE = re.compile(r"[,;(（，；]| [-–—] ")
ENTITY_CONFIDENCE = 1.0
AMBIGUOUS_ALIAS_CONFIDENCE = 0.7
STRING_CONFIDENCE = 0.5


class AliasJudge:
    """Cluster answers by the known entity they name, else by their normalised text."""

    name = "alias"

    def describe(self) -> dict[str, Any]:
        """Manifest identity: deterministic, so temperature does not apply (None)."""
        return {"name": self.name, "kind": "alias", "revision": f"fks-{__version__}",
                "temperature": None}

    def cluster(self, groups: list[AnswerGroup]) -> list[GroupResult]:
        """Assign every answer of every group (see the module docstring)."""
        return [self._cluster_group(g) for g in groups]

    def _cluster_group(self, group: AnswerGroup) -> GroupResult:
        raw = [assign_alias(item, group.lexicon, group.mentions) for item in group.items]
        # one canonical meaning per cluster: the first member's
        canon: dict[str, str | None] = {}
        for a in raw:
            canon.setdefault(a.cluster_id, a.canonical_meaning)
        out = [
            Assignment(a.cluster_id, canon[a.cluster_id], a.status, a.confidence) for a in raw
        ]
        return GroupResult(assignments=out, attempts=1)


def assign_alias(item: AnswerItem, lexicon: EntityLexicon,
                 mentions: tuple[str, ...] = ()) -> Assignment:
    """Assign one answer to a cluster: step one of the alias judge (module docstring, 1-3).

    ``mentions`` are the aliases of the entity the question itself names.
    """
    hint = "unparseable" if not item.generation_ok else item.hint
    if hint in HINT_CLUSTERS:
        cid, status = HINT_CLUSTERS[hint]
        return Assignment(cid, None, status, 1.0)  # type: ignore[arg-type]
    key = semantic_key(item.span)
    if not key:
        return Assignment(UNPARSEABLE, None, "UNPARSEABLE", 1.0)
    res = lexicon.resolve(item.span)
    if res.kind == "conflict" and mentions:
        stripped = strip_mentions(item.span, mentions)
        again = lexicon.resolve(stripped) if stripped else res
        if again.kind in ("entity", "ambiguous_alias"):
            res = again
    if res.kind == "entity":
        assert res.key is not None
        return Assignment(res.key, lexicon.canonical(res.key), "ANSWER", ENTITY_CONFIDENCE)
    if res.kind == "conflict":
        return Assignment(MULTIPLE, None, "MULTIPLE", 1.0)
    if res.kind == "ambiguous_alias":
        assert res.text is not None
        return Assignment(f"SEMANTIC_{semantic_key(res.text)}", res.text, "ANSWER",
                          AMBIGUOUS_ALIAS_CONFIDENCE)
    head = semantic_key(_ASIDE.split(item.span, maxsplit=1)[0]) or key
    return Assignment(f"SEMANTIC_{head}", item.span, "ANSWER", STRING_CONFIDENCE)
