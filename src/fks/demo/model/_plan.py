"""Which demo facts and queries the demo model is taught: a deterministic, stratified split.

Every fact of the demo benchmark gets one *role*, decided per relation (so every relation has
facts of each role where its size allows) by ranking the relation's facts on
``sha256(salt + fact_id)`` and cutting the ranks at the cumulative :data:`ROLE_SHARES`:

==========  ====================================================================================
role        what the model is trained on for that fact
==========  ====================================================================================
``full``    the anchor, every paraphrase but one, every format and context query but one, and
            the multilingual queries in the :data:`TAUGHT_LANGUAGES` (zh and ru are never taught)
``core``    the anchor and the paraphrases only (formats, contexts, languages must generalise)
``abstain`` the anchor and the paraphrases, with the answer ``I don't know``
``unseen``  nothing: the answer can only be guessed from the relation
==========  ====================================================================================

The held-out query of a family is the one with the smallest ``sha256(salt + query_id)``.
Reverse, recognition and ill-posed queries are never taught. So the trained model knows some
facts stably, knows others only under the phrasings it saw, abstains on a few and guesses the
rest, and its families differ (multilingual and context are the hardest).

Every training string is exactly ``build_prompt(query)`` (the prompt generation will show)
followed by ``" " + answer`` and EOS: :class:`Example` keeps the two parts apart so the loss can
be put on the answer only.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from fks.data.load import Benchmark
from fks.data.schema import Query
from fks.generate.prompts import build_prompt

__all__ = [
    "ROLES",
    "ROLE_SHARES",
    "TAUGHT_LANGUAGES",
    "ABSTAIN_ANSWER",
    "Example",
    "TrainingPlan",
    "assign_roles",
    "plan_training",
]

#: fact roles, in the order their shares are cut
ROLES: tuple[str, ...] = ("full", "core", "abstain", "unseen")
#: share of each relation's facts per role (sums to 1)
ROLE_SHARES: dict[str, float] = {"full": 0.50, "core": 0.15, "abstain": 0.05, "unseen": 0.30}
#: multilingual queries taught for ``full`` facts (the other languages are held out)
TAUGHT_LANGUAGES: frozenset[str] = frozenset({"fr", "es", "de"})
#: the answer taught for ``abstain`` facts (an abstention phrase of the scorer's lexicon)
ABSTAIN_ANSWER = "I don't know"
#: families whose every query but one is taught for ``full`` facts
_ALL_BUT_ONE = ("paraphrase", "format", "context")
_SALT = "fks-demo-model-v1"


@dataclass(frozen=True)
class Example:
    """One training string: ``prompt + " " + answer`` then EOS; loss on the answer part."""

    query_id: str
    fact_id: str
    condition_family: str
    prompt: str
    answer: str


@dataclass(frozen=True)
class TrainingPlan:
    """The split and the training examples (in benchmark query order)."""

    roles: dict[str, str]
    examples: tuple[Example, ...]
    corpus: tuple[str, ...]

    def role_counts(self) -> dict[str, int]:
        """Count the facts of each role."""
        counts = dict.fromkeys(ROLES, 0)
        for role in self.roles.values():
            counts[role] += 1
        return counts


def _rank_key(text: str) -> str:
    return hashlib.sha256(f"{_SALT}:{text}".encode()).hexdigest()


def assign_roles(fact_relations: dict[str, str]) -> dict[str, str]:
    """Give every fact a role, stratified by relation (see the module docstring).

    Args:
        fact_relations: ``{fact_id: relation_id}``.

    Returns:
        ``{fact_id: role}``; within a relation of ``n`` facts the fact ranked ``i`` (by hash)
        takes the first role whose cumulative share exceeds ``(i + 0.5) / n``.

    >>> roles = assign_roles({f"fact_{i:06d}": "r" for i in range(20)})
    >>> sorted(roles.values()).count("full"), sorted(roles.values()).count("unseen")
    (10, 6)
    """
    by_rel: dict[str, list[str]] = defaultdict(list)
    for fid, rel in fact_relations.items():
        by_rel[rel].append(fid)
    cuts, total = [], 0.0
    for role in ROLES:
        total += ROLE_SHARES[role]
        cuts.append((total, role))
    roles: dict[str, str] = {}
    for fids in by_rel.values():
        ranked = sorted(fids, key=_rank_key)
        for i, fid in enumerate(ranked):
            pos = (i + 0.5) / len(ranked)
            roles[fid] = next((role for cut, role in cuts if pos < cut), ROLES[-1])
    return roles


def _held_out(queries: Sequence[Query]) -> set[str]:
    """Pick the held-out query of each (fact, family) of :data:`_ALL_BUT_ONE` with >= 2 queries."""
    groups: dict[tuple[str, str], list[Query]] = defaultdict(list)
    for q in queries:
        if q.condition_family in _ALL_BUT_ONE:
            groups[(q.fact_id, q.condition_family)].append(q)
    return {min(g, key=lambda q: _rank_key(q.query_id)).query_id
            for g in groups.values() if len(g) >= 2}


def _taught(q: Query, role: str, held_out: set[str]) -> bool:
    """Tell whether query ``q`` of a fact with ``role`` is in the training set."""
    if role == "unseen" or not q.use_for_main_forward or q.target_slot != "object":
        return False
    if q.condition_family == "anchor":
        return True
    if q.query_id in held_out:
        return False
    if role in ("core", "abstain"):
        return q.condition_family == "paraphrase"
    if q.condition_family == "multilingual":
        return q.language in TAUGHT_LANGUAGES
    return q.condition_family in _ALL_BUT_ONE


def plan_training(bench: Benchmark) -> TrainingPlan:
    """Split ``bench`` (the demo benchmark) and list the training examples.

    The tokenizer corpus is every prompt of the benchmark (all languages and families) plus
    every answer string, so any demo prompt tokenizes compactly.
    """
    roles = assign_roles({f.fact_id: f.relation.relation_id for f in bench.facts})
    held_out = _held_out(bench.queries)
    examples = []
    for q in bench.queries:
        role = roles[q.fact_id]
        if _taught(q, role, held_out):
            answer = ABSTAIN_ANSWER if role == "abstain" else q.gold_canonical
            examples.append(Example(q.query_id, q.fact_id, q.condition_family,
                                    build_prompt(q), answer))
    answers = sorted({q.gold_canonical for q in bench.queries} | {ABSTAIN_ANSWER})
    corpus = tuple(build_prompt(q) for q in bench.queries) + tuple(f" {a}" for a in answers)
    return TrainingPlan(roles=roles, examples=tuple(examples), corpus=corpus)
