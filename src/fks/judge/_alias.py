"""The alias judge (``--judge alias``, the default): deterministic, offline, fast.

Step one (reference-blind) reads each raw continuation as a careful grader would
(:func:`fks.judge.read_answer`, rules J1-J10 of :mod:`fks.judge._reader`): empty answers,
repeated questions, placeholders, subject echoes and option lists are ``UNPARSEABLE``; an
answer inside a sentence is found by the entity it names (the relation's lexicon first, then
the gazetteer of every entity in six languages, so one wrong entity is one cluster in every
language); conflicting answers are ``MULTIPLE``; abstention phrases are ``ABSTAIN``; a short
answer naming no known entity is a string cluster ``SEMANTIC_<key>``. A generation error or
timeout is ``UNPARSEABLE``. The scorer's labels are not used (its ``correct``/``incorrect``
depend on the gold answer; the judge reads the raw text itself).

Confidence: 1.0 for an entity (and special clusters), 0.7 for an alias naming several entities
(``SEMANTIC_<alias>``), 0.5 for a string cluster.

Clusters are assigned per answer from a fixed key, so within a group the "same cluster"
relation is an equivalence by construction. One rule then reads the group as a whole
(:func:`join_variants`, J28, release 9): a string answer that is another answer's entity under
a shorter name joins that entity's cluster. Correctness is step two
(:func:`fks.judge.mark_clusters`), shared with every judge.
"""

from __future__ import annotations

from typing import Any

from fks import __version__
from fks.judge._lexicon import EntityLexicon
from fks.judge._reader import read_answer
from fks.judge._types import (
    MULTIPLE,
    UNPARSEABLE,
    AnswerGroup,
    AnswerItem,
    Assignment,
    GroupResult,
)

__all__ = ["AliasJudge", "HINT_CLUSTERS", "assign_alias", "join_variants"]

#: scorer label -> special cluster (labels that do not depend on the gold answer)
HINT_CLUSTERS: dict[str, tuple[str, str]] = {
    "abstain": ("ABSTAIN", "ABSTAIN"),
    "ambiguous": (MULTIPLE, "MULTIPLE"),
    "unparseable": (UNPARSEABLE, "UNPARSEABLE"),
}

ENTITY_CONFIDENCE = 1.0
AMBIGUOUS_ALIAS_CONFIDENCE = 0.7
STRING_CONFIDENCE = 0.5
_NUMERIC_TYPES = frozenset({"number", "year", "date", "quantity", "count"})
#: release 20: answer types that are no place (``configs/relations.yaml``): a place named
#: after "located in" does not fill them; any other type (a place, ``entity``) may be one
NON_PLACE_TYPES = frozenset({"organization", "language", "religion", "position", "genre",
                             "instrument"})


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

    def __init__(self) -> None:
        # answers repeat (the same continuation to the same query text): read each once
        self._memo: dict[tuple[Any, ...], Assignment] = {}

    def _cluster_group(self, group: AnswerGroup) -> GroupResult:
        numeric = group.answer_type in _NUMERIC_TYPES
        place = group.answer_type not in NON_PLACE_TYPES
        raw = []
        for item in group.items:
            key = (item.raw_response, item.query or group.question, item.generation_ok,
                   group.mentions, id(group.lexicon), id(group.gazetteer), numeric, group.slot,
                   group.foreign, place)
            got = self._memo.get(key)
            if got is None:
                got = assign_alias(item, group.lexicon, group.mentions, group.gazetteer,
                                   numeric=numeric, question=group.question, slot=group.slot,
                                   foreign=group.foreign, place=place)
                if len(self._memo) < 500_000:
                    self._memo[key] = got
            raw.append(got)
        raw = join_variants(raw, group.lexicon, group.gazetteer)
        # one canonical meaning per cluster: the first member's
        canon: dict[str, str | None] = {}
        for a in raw:
            canon.setdefault(a.cluster_id, a.canonical_meaning)
        out = [Assignment(a.cluster_id, canon[a.cluster_id], a.status, a.confidence, a.span)
               for a in raw]
        return GroupResult(assignments=out, attempts=1)


def _names_of(key: str, lexicons: tuple[EntityLexicon, ...]) -> tuple[str, ...]:
    return next((lex.aliases(key) for lex in lexicons if key in lex), ())


def join_variants(raw: list[Assignment], lexicon: EntityLexicon,
                  gazetteer: EntityLexicon | None = None) -> list[Assignment]:
    """J28 (release 9): a string answer naming, by a shorter name, an entity the group names.

    Within one fact's answers a string cluster ``SEMANTIC_<s>`` joins the entity cluster
    ``ENTITY_<Q>`` of another answer of the group when ``Q`` is the only such entity of the
    group that ``s`` names:

    * ``s`` is one of ``Q``'s aliases that the reader left as a string (an alias naming several
      entities, ``Boston``, read beside an answer that names one of them unambiguously);
    * ``s`` (two words or more) is ``Q``'s formal name cut before its ``of`` (``United States``
      beside ``United States of America``; a labeller keys both as one answer). One word
      (``Republic`` of ``Republic of Ireland``) is a class noun, not a short name.

    Only entities some answer of the group names are candidates, so nothing is resolved that
    the model did not itself write; two candidates leave the string alone. Nothing is keyed
    to an entity or answer.
    """
    entities = {a.cluster_id for a in raw if a.cluster_id.startswith("ENTITY_")}
    if not entities:
        return raw
    lexicons = tuple(x for x in (lexicon, gazetteer) if x is not None)
    remap: dict[str, str] = {}
    for a in raw:
        cid = a.cluster_id
        if not cid.startswith("SEMANTIC_") or cid in remap:
            continue
        s = cid[len("SEMANTIC_"):]
        named = {k for lex in lexicons for k in lex.keys_of(s)} & entities
        if not named and len(s.split()) >= 2:
            named = {k for k in entities
                     if any(n.startswith(s + " of ") for n in _names_of(k, lexicons))}
        if len(named) == 1:
            remap[cid] = next(iter(named))
    if not remap:
        return raw
    canon = {a.cluster_id: a.canonical_meaning for a in raw if a.cluster_id in entities}
    return [Assignment(remap[a.cluster_id], canon[remap[a.cluster_id]], a.status, a.confidence,
                       a.span) if a.cluster_id in remap else a for a in raw]


def assign_alias(item: AnswerItem, lexicon: EntityLexicon, mentions: tuple[str, ...] = (),
                 gazetteer: EntityLexicon | None = None, *, numeric: bool = False,
                 question: str = "", slot: frozenset[str] = frozenset(),
                 foreign: frozenset[str] = frozenset(), place: bool = True) -> Assignment:
    """Assign one answer to a cluster: step one of the alias judge (module docstring).

    ``mentions`` are the aliases of the entity the question itself names; ``question`` is
    used when the item carries no query text of its own; ``place``: the slot's answer type is
    a place (release 20: else a place named after ``located in`` does not fill it).
    """
    if not item.generation_ok:
        return Assignment(UNPARSEABLE, None, "UNPARSEABLE", 1.0)
    r = read_answer(item.raw_response, query=item.query or question, mentions=mentions,
                    lexicon=lexicon, gazetteer=gazetteer, numeric=numeric, slot=slot,
                    foreign=foreign, place=place)
    if r.kind != "ANSWER" or r.key is None:
        return Assignment(r.kind if r.kind != "ANSWER" else UNPARSEABLE, None,
                          r.kind if r.kind != "ANSWER" else "UNPARSEABLE", 1.0)
    return Assignment(r.key, r.canonical, "ANSWER", r.confidence, r.span)
