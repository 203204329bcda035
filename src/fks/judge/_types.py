"""The judge's records and the narrow interface every judge implements (spec §3).

The two steps of spec §3 are kept apart by construction:

* **Step one, reference-blind** (:class:`Judge`). A judge receives an :class:`AnswerGroup` --
  every answer of one fact in one analysis group (main, reverse, recognition, or a diagnostic
  family) -- and returns one :class:`Assignment` per answer, in one pass. A group carries the
  relation's candidate-entity lexicon and the question, but never the gold answer, so a judge
  *cannot* look at it. Cluster ids assigned in one pass form a partition, so "same cluster" is
  an equivalence relation (no pairwise same/different decisions, no intransitivity).
* **Step two, reference-aware** (:func:`fks.judge.mark_clusters`), fks code shared by every
  judge: each cluster is compared with the gold entity and aliases. It never changes clusters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from fks.judge._lexicon import EntityLexicon

__all__ = [
    "ABSTAIN",
    "MULTIPLE",
    "UNPARSEABLE",
    "REVIEW_REQUIRED",
    "SPECIAL_CLUSTERS",
    "AnalysisGroup",
    "AnswerItem",
    "AnswerGroup",
    "Assignment",
    "GroupResult",
    "Judge",
]

#: Special clusters of spec §3.1. ``REVIEW_REQUIRED`` is fks's own: the judge itself failed
#: on this answer (invalid output after every retry), so no cluster could be assigned.
ABSTAIN = "ABSTAIN"
MULTIPLE = "MULTIPLE"
UNPARSEABLE = "UNPARSEABLE"
REVIEW_REQUIRED = "REVIEW_REQUIRED"
SPECIAL_CLUSTERS: frozenset[str] = frozenset({ABSTAIN, MULTIPLE, UNPARSEABLE, REVIEW_REQUIRED})

#: ``main`` (use_for_main_forward), ``reverse``, ``recognition``, or ``diagnostic:<family>``.
AnalysisGroup = str
Status = Literal["ANSWER", "ABSTAIN", "MULTIPLE", "UNPARSEABLE"]


@dataclass(frozen=True)
class AnswerItem:
    """One model answer as a reference-blind judge may see it.

    Attributes:
        query_id: the query.
        condition_family: its family.
        language: the query language.
        raw_response: the model's full continuation (untrusted text).
        span: the core answer span: the scorer's ``extracted_answer``, else the first segment
            of ``raw_response`` (see :func:`fks.judge.answer_span`).
        hint: the scorer's *reference-blind* label when it is one (``abstain``, ``ambiguous``,
            ``unparseable``; generation errors are ``unparseable``), else None. The scorer's
            ``correct``/``incorrect`` labels are withheld: they depend on the gold answer.
        generation_ok: the generation status was ``ok``.
        query: the query text the model saw (echoes of it are no answer).
    """

    query_id: str
    condition_family: str
    language: str
    raw_response: str
    span: str
    hint: str | None
    generation_ok: bool = True
    query: str = ""


@dataclass(frozen=True)
class AnswerGroup:
    """All answers of one fact in one analysis group, judged in one pass.

    Attributes:
        key: ``(model, fact_id, analysis_group)``.
        relation: the relation id.
        target_slot: ``object`` (forward) or ``subject`` (reverse).
        answer_type: the fact's answer type (a category, not the gold answer).
        question: a question of the group (the anchor query when present), for context.
        lexicon: known entities of this relation and slot (all facts', not only this one's).
        items: the answers.
        mentions: aliases of the entity the question names (the subject for object-slot
            groups, the object for reverse ones): an answer repeating the question is no
            second answer. Not the gold answer of the group.
        gazetteer: every entity known to fks, all relations (the benchmark's and the packaged
            gazetteer's), so a wrong answer outside the relation still gets its entity cluster.
        slot: the relation's predicate words (J11 of :mod:`fks.judge._reader`; from the
            benchmark's query templates, never from answers).
        foreign: predicate words of *other* relations only (J14: ``born`` when the slot is
            a place of death), from the same templates (:func:`fks.judge._run.foreign_words`).
    """

    key: tuple[str, str, AnalysisGroup]
    relation: str
    target_slot: str
    answer_type: str
    question: str
    lexicon: EntityLexicon
    items: tuple[AnswerItem, ...]
    mentions: tuple[str, ...] = ()
    gazetteer: EntityLexicon | None = None
    slot: frozenset[str] = frozenset()
    foreign: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Assignment:
    """Step one's output for one answer (spec §3.1 judge output, less the ids).

    ``span`` is the core answer the judge read (``None`` when it gives none).
    """

    cluster_id: str
    canonical_meaning: str | None
    status: Status
    confidence: float
    span: str | None = None


@dataclass
class GroupResult:
    """A judge's assignments for one group, plus what went wrong, if anything.

    ``assignments`` has one entry per item, in item order. ``failure`` names why a group
    (or part of it) was sent to ``REVIEW_REQUIRED`` (e.g. ``invalid_output``); ``attempts``
    counts judge calls (LLM judges).
    """

    assignments: list[Assignment]
    failure: str | None = None
    attempts: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Judge(Protocol):
    """A reference-blind clusterer (spec §3.1).

    Implementations: :class:`fks.judge.AliasJudge` (``alias``),
    :class:`fks.judge.LLMJudge` (``hf:PATH``, ``openai:URL``).
    """

    #: short name written into every judged record's ``judge`` field
    name: str

    def cluster(self, groups: list[AnswerGroup]) -> list[GroupResult]:
        """One :class:`GroupResult` per group, in order; never fewer, never a dropped item."""
        ...

    def describe(self) -> dict[str, Any]:
        """Identity for the manifest: at least ``name``, ``revision``, ``temperature``."""
        ...
