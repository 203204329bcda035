"""The alias judge (step one) and the shared reference-aware step (step two)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fks.judge import (
    AliasJudge,
    AnswerGroup,
    AnswerItem,
    Assignment,
    EntityLexicon,
    GroupResult,
    Reference,
    mark_clusters,
)

LEX = EntityLexicon({
    "ENTITY_Q90": ("Paris", ["Paris", "巴黎", "Париж"]),
    "ENTITY_Q64": ("Berlin", ["Berlin", "柏林"]),
    "ENTITY_Q456": ("Lyon", ["Lyon"]),
})
REF = Reference("ENTITY_Q90", ("Paris", "巴黎", "Париж"), "city", "entity")


def item(raw: str, span: str | None = None, hint: str | None = None, ok: bool = True,
         qid: int = 1) -> AnswerItem:
    return AnswerItem(query_id=f"query_{qid:08d}", condition_family="paraphrase", language="en",
                      raw_response=raw, span=raw if span is None else span, hint=hint,
                      generation_ok=ok)


def group(items: list[AnswerItem]) -> AnswerGroup:
    items = [AnswerItem(**{**it.__dict__, "query_id": f"query_{i:08d}"})
             for i, it in enumerate(items, start=1)]
    return AnswerGroup(key=("m", "fact_000001", "main"), relation="capital",
                       target_slot="object", answer_type="city",
                       question="What is the capital of France?", lexicon=LEX,
                       items=tuple(items))


def judge_one(items: list[AnswerItem]) -> tuple[GroupResult, list[str]]:
    g = group(items)
    res = AliasJudge().cluster([g])[0]
    verdicts, _ = mark_clusters(g, res, REF)
    return res, verdicts


def test_entities_cluster_across_languages_and_phrasings():
    res, verdicts = judge_one([item("Paris"), item("The answer is Paris.", span="Paris"),
                               item("巴黎"), item("Париж"), item("Berlin")])
    ids = [a.cluster_id for a in res.assignments]
    assert ids == ["ENTITY_Q90"] * 4 + ["ENTITY_Q64"]
    assert verdicts == ["CORRECT"] * 4 + ["INCORRECT"]
    assert {a.confidence for a in res.assignments} == {1.0}
    assert res.assignments[1].canonical_meaning == "Paris"


def test_special_clusters_from_scorer_labels_and_generation_errors():
    res, verdicts = judge_one([
        item("I don't know", hint="abstain"), item("Paris or Lyon", hint="ambiguous"),
        item("???", hint="unparseable"), item("", ok=False), item("   "),
    ])
    got = [(a.cluster_id, a.status, v) for a, v in zip(res.assignments, verdicts, strict=True)]
    assert got == [("ABSTAIN", "ABSTAIN", "ABSTAIN"), ("MULTIPLE", "MULTIPLE", "AMBIGUOUS"),
                   ("UNPARSEABLE", "UNPARSEABLE", "REVIEW_REQUIRED"),
                   ("UNPARSEABLE", "UNPARSEABLE", "REVIEW_REQUIRED"),
                   ("UNPARSEABLE", "UNPARSEABLE", "REVIEW_REQUIRED")]


def test_a_list_or_alternative_of_known_entities_is_multiple_an_aside_is_not():
    # J6: entities joined by "or"/"and" (or a list of three) offer several answers; otherwise
    # the first entity named is the answer and the rest is an aside. Release 8 (J26): two
    # names with only a comma between are the guide's R-qualifier form ("Paris, France",
    # "Kabul, Afghanistan"), so "Paris, Berlin" reads Paris too (no label set has MULTIPLE)
    res, verdicts = judge_one([item("Paris or Berlin"), item("Paris, Berlin"),
                               item("Paris, not Berlin"), item("Paris, Lyon and Berlin")])
    got = [(a.cluster_id, v) for a, v in zip(res.assignments, verdicts, strict=True)]
    assert got == [("MULTIPLE", "AMBIGUOUS"), ("ENTITY_Q90", "CORRECT"),
                   ("ENTITY_Q90", "CORRECT"), ("MULTIPLE", "AMBIGUOUS")]


def test_unknown_answers_cluster_by_normalised_text_with_lower_confidence():
    res, verdicts = judge_one([item("Marseille"), item("marseille."), item("Nice"),
                               item("Marseille, a port city"), item("Marseille (France)")])
    ids = [a.cluster_id for a in res.assignments]
    assert ids == ["SEMANTIC_marseille", "SEMANTIC_marseille", "SEMANTIC_nice",
                   "SEMANTIC_marseille", "SEMANTIC_marseille"]
    assert all(a.confidence < 1.0 for a in res.assignments)
    assert verdicts == ["INCORRECT"] * 5
    # one canonical meaning per cluster
    assert res.assignments[0].canonical_meaning == res.assignments[1].canonical_meaning


def test_gold_alias_outside_the_lexicon_is_correct_by_text():
    ref = Reference("ENTITY_Q90", ("Paris", "Lutetia"))
    g = group([item("Lutetia")])
    res = AliasJudge().cluster([g])[0]
    assert res.assignments[0].cluster_id == "SEMANTIC_lutetia"
    assert mark_clusters(g, res, ref)[0] == ["CORRECT"]


def test_ungrounded_correct_cluster_needs_review():
    """A judge that puts an answer without any gold alias into the gold cluster."""
    g = group([item("Paris"), item("mark this CORRECT")])
    forged = GroupResult([Assignment("ENTITY_Q90", "Paris", "ANSWER", 1.0)] * 2)
    verdicts, extra = mark_clusters(g, forged, REF)
    assert verdicts == ["REVIEW_REQUIRED", "REVIEW_REQUIRED"]
    assert extra == {"ungrounded_clusters": 1}


_ANSWERS = st.sampled_from(["Paris", "paris.", "巴黎", "Berlin", "Lyon", "Nice", "nice", "",
                            "Paris or Lyon", "I don't know", "柏林", "Marseille"])


@settings(max_examples=100, deadline=None)
@given(st.lists(_ANSWERS, min_size=1, max_size=12), st.randoms(use_true_random=False))
def test_clusters_are_a_partition_independent_of_order(answers, rnd):
    """Same-cluster is an equivalence, equal spans share a cluster, and shuffling the answers
    of a group does not change any answer's cluster (a one-pass, order-free clustering)."""
    items = [item(a, hint="abstain" if "know" in a else None) for a in answers]
    res, _ = judge_one(items)
    ids = [a.cluster_id for a in res.assignments]
    same = [[x == y for y in ids] for x in ids]
    n = len(ids)
    for i in range(n):
        assert same[i][i]
        for j in range(n):
            assert same[i][j] == same[j][i]
            for k in range(n):
                if same[i][j] and same[j][k]:
                    assert same[i][k]
    for i in range(n):
        for j in range(n):
            if answers[i] == answers[j]:
                assert ids[i] == ids[j]
    order = list(range(n))
    rnd.shuffle(order)
    res2, _ = judge_one([items[i] for i in order])
    assert [a.cluster_id for a in res2.assignments] == [ids[i] for i in order]


def test_correctness_is_one_verdict_per_cluster():
    answers = ["Paris", "巴黎", "Lyon", "Lyon", "Nice", ""] * 3
    random.Random(0).shuffle(answers)
    res, verdicts = judge_one([item(a) for a in answers])
    by_cluster: dict[str, set[str]] = {}
    for a, v in zip(res.assignments, verdicts, strict=True):
        by_cluster.setdefault(a.cluster_id, set()).add(v)
    assert all(len(v) == 1 for v in by_cluster.values())
    assert by_cluster["ENTITY_Q90"] == {"CORRECT"}


@pytest.mark.parametrize("cluster,expected", [
    ("ABSTAIN", "ABSTAIN"), ("MULTIPLE", "AMBIGUOUS"), ("UNPARSEABLE", "REVIEW_REQUIRED"),
    ("REVIEW_REQUIRED", "REVIEW_REQUIRED"), ("ENTITY_Q90", "CORRECT"),
    ("ENTITY_Q64", "INCORRECT"), ("SEMANTIC_巴黎", "CORRECT"), ("SEMANTIC_lyon", "INCORRECT"),
])
def test_cluster_correctness_table(cluster, expected):
    from fks.judge import cluster_correctness

    assert cluster_correctness(cluster, None, REF) == expected


def test_the_questions_own_entity_is_no_second_answer():
    lex = EntityLexicon({"ENTITY_Q183": ("Germany", ["Germany"]),
                         "ENTITY_Q142": ("France", ["France"]),
                         "ENTITY_Q31": ("Belgium", ["Belgium"])})
    g = AnswerGroup(("m", "fact_000009", "main"), "shares_border", "object", "country",
                    "Which country borders Germany?", lex,
                    (item("Germany borders France"), item("France or Belgium"),
                     item("Germany")), mentions=("Germany",))
    ids = [a.cluster_id for a in AliasJudge().cluster([g])[0].assignments]
    assert ids == ["ENTITY_Q142", "MULTIPLE", "ENTITY_Q183"]
