"""Issue 13 point 5: the F1 copy flag over the surfaces used, the word-start D1 guard, the
degenerate-object gate and the default-build decision for ``named_after``."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from test_build import PARAREL, PATTERNS, t, write_source

from fks.configs import load_configs
from fks.data.build import build_benchmark
from fks.data.load import load_benchmark
from fks.data.rules import (
    answer_in_subject_surface,
    context_leaks_gold,
    copy_match,
    degenerate_object,
)
from fks.data.stats import dataset_statistics
from fks.data.validate import validate_benchmark


# ------------------------------------------------------------------------------ the F1 rule
@pytest.mark.parametrize(("subject", "gold"), [
    ("LaFerrari", "Ferrari"),
    ("Guatemalan Revolution", "Guatemala"),
    ("Northamptonshire", "Northampton"),
    ("Milano Vipers", "Milan"),
    ("Russians", "Russian"),
    ("Gazzetta Chimica Italiana", "Italy"),   # long shared prefix, not a substring
    ("Kazakh Soviet Socialist Republic", "Kazakhstan"),
    ("Sky One", "Sky"),                       # short gold, whole word
    ("空中客车A320", "空中客车"),
])
def test_copies_the_issue_lists_are_caught(subject, gold):
    assert answer_in_subject_surface(subject, gold)


@pytest.mark.parametrize(("subject", "gold"), [
    ("Russia", "US"), ("campus life", "US"), ("France", "Paris"), ("Banan District", "Ba"),
    ("Germany", "Berlin"), ("Spain", "Spanish Armed Forces"),
])
def test_non_copies_are_not_flagged(subject, gold):
    assert not answer_in_subject_surface(subject, gold)


def test_a_multilingual_subject_alias_counts():
    """``B-29 Superfortress`` does not contain Boeing; its French label does."""
    assert not answer_in_subject_surface("B-29 Superfortress", ["Boeing"])
    assert copy_match(["B-29 Superfortress", "Boeing B-29 Superfortress"],
                      ["Boeing", "波音"]) == ("Boeing", "Boeing B-29 Superfortress")


# ------------------------------------------------------------------------------ the D1 guard
def test_d1_guard_is_word_start_in_spaced_scripts():
    # the published D1 case is still caught
    assert context_leaks_gold("Do not confuse States Reorganisation Act with Indian Act. "
                              "Where is Mumbai?", ["India"], ["Mumbai"]) == "India"
    # a short gold inside a word is not a leak
    assert context_leaks_gold("Yale has a large campus. In which country is Harvard?",
                              ["US", "USA"], ["Harvard"]) is None
    assert context_leaks_gold("Oslo is used often. Where is Bergen?", ["US"], ["Bergen"]) is None
    # ... but as a word it is
    assert context_leaks_gold("Yale is in the US. Where is Harvard?", ["US"], ["Harvard"]) == "US"
    # a long gold in the middle of a word is not at a word start
    assert context_leaks_gold("Sublondoner is a word. Where is Bath?", ["London"],
                              ["Bath"]) is None
    # CJK stays a substring match
    assert context_leaks_gold("印度人口很多。孟买在哪里？", ["印度"], ["孟买"]) == "印度"


def test_degenerate_object_reasons():
    assert degenerate_object("Volta Region", "Ho") == "object_too_short"
    assert degenerate_object("Bolton", "Bolton") == "object_equals_subject"
    assert degenerate_object("Thing", "Q123456") == "object_label_is_id"
    assert degenerate_object("LaFerrari", "Ferrari") is None
    assert degenerate_object("北京市", "北") is None  # CJK labels are short by nature


# ------------------------------------------------------------------------- the whole build
TUPLES = {
    "P176": {
        "en": [t("Q1", "LaFerrari", "Q27586", "Ferrari"),
               t("Q2", "B-29 Superfortress", "Q66", "Boeing"),
               t("Q3", "Concorde", "Q1", "Aérospatiale"),
               t("Q4", "iPhone", "Q312", "Apple Inc."),
               t("Q5", "Walkman", "Q41187", "Sony")],
        # the French Boeing label contains the answer; Concorde has two French tuples, the
        # first of which contains its answer
        "fr": [t("Q2", "Boeing B-29 Superfortress", "Q66", "Boeing"),
               t("Q3", "Aérospatiale Concorde", "Q1", "Aérospatiale"),
               t("Q3", "Concorde", "Q1", "Aérospatiale"),
               t("Q4", "iPhone", "Q312", "Apple")],
    },
    "P36": {
        "en": [t("Q142", "France", "Q90", "Paris"), t("Q183", "Germany", "Q64", "Berlin"),
               t("Q17", "Japan", "Q1490", "Tokyo"), t("Q1", "Volta Region", "Q2", "Ho"),
               t("Q9", "Bolton", "Q10", "Bolton")],
    },
    "P138": {"en": [t("Q7", "Oslo Airport", "Q585", "Oslo"),
                    t("Q8", "Bern Airport", "Q70", "Bern")]},
}
PATTERNS_FR = {**PATTERNS, "P176": {**PATTERNS["P176"], "fr": ["[X] est fabriqué par [Y]"]},
               "P138": {"en": ["[X] is named after [Y]", "[X] was named for [Y]"]}}


@pytest.fixture(scope="module")
def copy_build(tmp_path_factory):
    root = tmp_path_factory.mktemp("copy")
    src = write_source(root / "src", tuples=TUPLES, patterns=PATTERNS_FR, pararel=PARAREL)
    result = build_benchmark(src, root / "out", configs=load_configs(), max_facts=None, seed=3)
    return result, load_benchmark(root / "out")


def _facts(bench):
    return {f.subject.canonical: f for f in bench.facts}


def test_fact_and_query_flags_follow_the_surfaces_used(copy_build):
    result, bench = copy_build
    assert result.report["passed"], result.report["hard_errors"][:3]
    facts = _facts(bench)
    assert facts["LaFerrari"].answer_in_subject_surface is True
    assert facts["B-29 Superfortress"].answer_in_subject_surface is True  # via ml_fr
    assert facts["iPhone"].answer_in_subject_surface is False
    by_fact = defaultdict(set)
    for q in bench.queries:
        by_fact[q.fact_id].add(q.answer_in_subject_surface)
    for f in bench.facts:
        assert by_fact[f.fact_id] == {f.answer_in_subject_surface}
    ml = [q.query for q in bench.queries
          if q.fact_id == facts["B-29 Superfortress"].fact_id and q.language == "fr"]
    assert ml and "Boeing B-29 Superfortress" in ml[0]


def test_builder_prefers_a_subject_alias_without_the_answer(copy_build):
    result, bench = copy_build
    concorde = _facts(bench)["Concorde"]
    fr = [q.query for q in bench.queries if q.fact_id == concorde.fact_id and q.language == "fr"]
    assert fr and "Aérospatiale" not in fr[0]
    assert "Aérospatiale Concorde" not in concorde.subject.aliases
    assert concorde.answer_in_subject_surface is False
    assert result.statistics["build"]["subject_label_chosen_to_avoid_copy"] == 1


def test_degenerate_objects_dropped_and_counted_per_relation(copy_build):
    result, bench = copy_build
    subjects = {f.subject.canonical for f in bench.facts}
    assert {"Volta Region", "Bolton"}.isdisjoint(subjects)
    assert {"France", "Germany", "Japan"} <= subjects
    assert result.statistics["build"]["degenerate_objects_dropped"] == {
        "capital": {"object_equals_subject": 1, "object_too_short": 1}}


def test_named_after_is_out_of_the_default_build(copy_build):
    result, bench = copy_build
    assert "named_after" not in {f.relation.relation_id for f in bench.facts}
    assert result.statistics["build"]["relations_left_out"]["named_after"].startswith(
        "default_build: false")


def test_copy_share_per_relation_and_unflagged_count(copy_build):
    result, bench = copy_build
    stats = result.statistics
    manu = stats["relations"]["manufacturer"]
    assert manu["copy_answerable_facts"] == 2 and manu["copy_share"] == round(2 / 5, 4)
    assert stats["copy_answerable"]["unflagged_main_queries_with_gold"] == 0
    # an unflagged copy is counted
    bench.queries[:] = [q.model_copy(update={"answer_in_subject_surface": False})
                        for q in bench.queries]
    again = dataset_statistics(bench)["copy_answerable"]
    assert again["unflagged_main_queries_with_gold"] > 0


def test_validator_rejects_a_missed_copy(copy_build, tmp_path):
    """A LaFerrari fact flagged false (the old word-bounded rule) fails the F1 gate."""
    result, _ = copy_build
    out = tmp_path / "b"
    out.mkdir()
    for path in result.out.iterdir():
        if path.suffix in (".jsonl", ".json") and path.name != "validation_report.json":
            rows = path.read_text(encoding="utf-8")
            if path.suffix == ".jsonl":
                lines = [json.loads(x) for x in rows.splitlines()]
                fid = next(r["fact_id"] for r in lines if r.get("subject", {}).get(
                    "canonical") == "LaFerrari") if "facts" in path.name else None
                for r in lines:
                    if fid is not None and r["fact_id"] == fid:
                        r["answer_in_subject_surface"] = False
                rows = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines)
            (out / path.name).write_text(rows, encoding="utf-8")
    report = validate_benchmark(out, configs=load_configs())
    errors = [e for e in report["hard_errors"] if e["gate"] == "answer_in_subject_surface"]
    assert errors and "'Ferrari' copied from subject surface 'LaFerrari'" in errors[0]["message"]
