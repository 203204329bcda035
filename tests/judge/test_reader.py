"""The reference-blind reader (rules J1-J10) and the scorer's line reading (R13/R14).

Every example is a real continuation of Gemma 3 270M taken from the labelled validation set
(``data/judge_validation/labels.jsonl``, dev split; query id in the comment) with the query
text the model saw; the expected reading is the hand label.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fks.judge import EntityLexicon
from fks.judge._lexicon import build_gazetteer
from fks.judge._reader import read_answer
from fks.score import score_answer

LABELS = Path(__file__).resolve().parents[2] / "data" / "judge_validation" / "labels.jsonl"

ALBANIA = ("Albania", "阿尔巴尼亚", "Albanie", "Albanien", "Албания")
ABUJA = ("Abuja", "阿布贾", "Abuya", "Абуджа")
ADDIS = ("Addis Ababa", "亚的斯亚贝巴", "Addis-Abeba", "Adís Abeba", "Addis Abeba", "Аддис-Абеба")
#: objects of ``capital`` (a few of them) and of ``capital_of`` (countries)
CAPITALS = EntityLexicon({
    "ENTITY_Q19689": ("Tirana", ["Tirana", "地拉那", "Тирана"]),
    "ENTITY_Q5838": ("Kabul", ["Kabul", "喀布尔", "Kaboul", "Кабул"]),
    "ENTITY_Q11194": ("Sarajevo", ["Sarajevo", "萨拉热窝", "Сараево"]),
})
COUNTRIES = EntityLexicon({
    "ENTITY_Q1033": ("Nigeria", ["Nigeria", "尼日利亚", "Нигерия"]),
    "ENTITY_Q115": ("Ethiopia", ["Ethiopia", "埃塞俄比亚", "Éthiopie", "Etiopía", "Äthiopien"]),
    "ENTITY_Q878": ("United Arab Emirates", ["United Arab Emirates"]),
})


@pytest.fixture(scope="module")
def gazetteer() -> EntityLexicon:
    return build_gazetteer(None)


def read(raw: str, query: str, subject: tuple[str, ...], lexicon: EntityLexicon,
         gazetteer: EntityLexicon) -> tuple[str, str | None, str | None, str]:
    r = read_answer(raw, query=query, mentions=subject, lexicon=lexicon, gazetteer=gazetteer)
    return r.kind, r.key, r.span, r.rule


def test_examples_are_in_the_labelled_set():
    rows = {json.loads(line)["query_id"]: json.loads(line) for line in LABELS.open()
            if json.loads(line)["model"] == "gemma-3-270m"}
    for qid, kind in [("query_00000020", "ANSWER"), ("query_00000019", "UNPARSEABLE"),
                      ("query_00002009", "ANSWER"), ("query_00002021", "UNPARSEABLE")]:
        assert rows[qid]["kind"] == kind and rows[qid]["split"] == "dev"


def test_j1_empty_is_unparseable(gazetteer):
    assert read("", "Albania's capital", ALBANIA, CAPITALS, gazetteer)[0] == "UNPARSEABLE"
    assert read(" \n\n", "Albania's capital", ALBANIA, CAPITALS, gazetteer)[3] == "J1"


def test_j2_j4_bare_cues_and_placeholders_are_unparseable(gazetteer):
    # query_00002056: only repeated cues
    assert read("\nAnswer:\nAnswer:\nAnswer:\nAnswer:", "Аддис-Абеба, это столица", ADDIS,
                COUNTRIES, gazetteer)[0] == "UNPARSEABLE"
    # query_00000029: "The answer is C." with no options, then a header
    raw = ("\n\nThe answer is <strong>C.</strong>\n\n<strong>Explanation:</strong>\n\n"
           "The <strong>C</strong>hanges in the")
    assert read(raw, "阿尔巴尼亚的首都是", ALBANIA, CAPITALS, gazetteer)[0] == "UNPARSEABLE"
    # query_00000030: a run of digits
    assert read("\n\nLe capital de Albanie est 1000000000000000", "Le capital de Albanie est",
                ALBANIA, CAPITALS, gazetteer)[0] == "UNPARSEABLE"


def test_j3_a_new_question_ends_the_answer(gazetteer):
    # query_00002007: the first answer counts, the new question and its answer do not
    raw = (" Abuja\nQuestion: What is the capital of the United Arab Emirates?\n"
           "Answer: Dubai\nQuestion: What is the")
    kind, key, span, _ = read(raw, "Abuja is the capital of which place?", ABUJA, COUNTRIES,
                              gazetteer)
    assert (kind, span) == ("ANSWER", "Abuja")


def test_j5_the_subject_as_its_own_answer_is_the_subject(gazetteer):
    # query_00000024 and query_00000023: Albania as the capital of Albania
    assert read("\nAlbania\nAnswer:\nAlbania\nAnswer:", "Fill in the blank: The capital of "
                "Albania is ____.", ALBANIA, CAPITALS, gazetteer)[:3] == (
        "ANSWER", "ENTITY_Q222", "albania")
    raw = " Albania is the capital of Albania.\nAlbania is the largest country in Europe."
    assert read(raw, "What is the capital of Albania? Answer with the name only.", ALBANIA,
                CAPITALS, gazetteer)[1] == "ENTITY_Q222"


def test_j6_the_answer_inside_a_sentence(gazetteer):
    # query_00000020
    assert read("\n\nAlbania's capital is Tirana.\n\nAnswer:\n\nAlbania's capital is Tirana.",
                "Albania's capital", ALBANIA, CAPITALS, gazetteer)[:3] == (
        "ANSWER", "ENTITY_Q19689", "tirana")
    # query_00002055 (capital_of): the subject is named in German spelling, the answer is the
    # country the sentence asserts
    raw = "\nThe capital city of Ethiopia is Addis Abeba.\nAnswer:\nThe capital city of Ethiopia"
    assert read(raw, "Addis Abeba, das ist die hauptstadt von", ADDIS, COUNTRIES,
                gazetteer)[1] == "ENTITY_Q115"


def test_j6_gazetteer_gives_entities_outside_the_relation_one_cluster(gazetteer):
    # query_00000026: "Praga" (Prague in Spanish/Italian spelling) is no capital of the
    # relation's lexicon here; the gazetteer knows it
    raw = " The capital of Albania is Praga.\nPraga is the capital of Albania."
    q = "Prague is the capital of Czech Republic. What is the capital of Albania?"
    assert read(raw, q, ALBANIA, CAPITALS, gazetteer)[1] == "ENTITY_Q1085"
    assert read(" Prague", q, ALBANIA, CAPITALS, gazetteer)[1] == "ENTITY_Q1085"
    # query_00000027: the distractor's entity given as the answer is a real, wrong answer
    raw = " London\nThe capital of Albania is London. What is the capital of Albania?"
    q = "The capital city of Great Britain is London. What is the capital of Albania?"
    assert read(raw, q, ALBANIA, CAPITALS, gazetteer)[:2] == ("ANSWER", "ENTITY_Q84")


def test_j6_a_sentence_about_something_else_asserts_nothing(gazetteer):
    # query_00000028: the distractor sentence, varied
    raw = " Sarajevo is the capital of Bosnia and Herzegovina.\nSarajevo is the capital of"
    q = "Sarajevo is the capital of Sarajevo Canton. What is the capital of Albania?"
    assert read(raw, q, ALBANIA, CAPITALS, gazetteer)[0] == "UNPARSEABLE"
    # query_00002010: the capital of the UAE, asked which country Abuja is the capital of
    raw = "\nThe capital of the United Arab Emirates is Abu Dhabi.\nAnswer:\nThe capital of"
    assert read(raw, "Abuja, that is the capital of", ABUJA, COUNTRIES,
                gazetteer)[0] == "UNPARSEABLE"


def test_j6_a_list_of_entities_is_multiple(gazetteer):
    assert read("Tirana or Kabul", "Albania's capital", ALBANIA, CAPITALS,
                gazetteer)[0] == "MULTIPLE"


def test_j7_echoes_of_the_question_are_no_answer(gazetteer):
    # query_00000019
    assert read("\nThe capital of Albania is\nAnswer:\nThe capital of Albania is",
                "The capital of Albania is", ALBANIA, CAPITALS, gazetteer)[0] == "UNPARSEABLE"
    # query_00002021: the prompt repeated, then its start again (cut by the budget)
    raw = "\nАбуджа является столицей\nAnswer:\nАбуджа является столицей\nAnswer:\nАбуджа"
    assert read(raw, "Абуджа является столицей", ABUJA, COUNTRIES,
                gazetteer)[0] == "UNPARSEABLE"


def test_j8_string_answers_descriptions_and_common_nouns(gazetteer):
    # query_00000032: an unknown town after a rephrase without completion
    raw = "\nThe main city of the country is\nAnswer:\nBafra\nAnswer:\nBafra is the"
    assert read(raw, "Die hauptstadt von Albanien ist", ALBANIA, CAPITALS, gazetteer)[:3] == (
        "ANSWER", "SEMANTIC_bafra", "bafra")
    # query_00000018: a description of the subject
    raw = " Albania is a country in the Balkans. It is located in the south of the Balkan"
    assert read(raw, "What is the capital of Albania?", ALBANIA, CAPITALS,
                gazetteer)[0] == "UNPARSEABLE"
    # query_00002012: "the country" is no name
    raw = "\nAbuja is the capital of the country.\nAnswer:\nAbuja is the capital of the country."
    assert read(raw, "Abuja is the capital of which place? Answer with the name only.", ABUJA,
                COUNTRIES, gazetteer)[0] == "UNPARSEABLE"


def test_j9_abstention(gazetteer):
    assert read("I don't know.", "What is the capital of Albania?", ALBANIA, CAPITALS,
                gazetteer)[0] == "ABSTAIN"


def test_j10_the_first_answer_line_counts(gazetteer):
    # query_00002009: a rival line after the first answer is the prompt pattern repeating
    raw = "\nThe United States of America\nAnswer:\nThe United Kingdom\nAnswer:\nThe United"
    assert read(raw, "Abuja, the capital city of", ABUJA, COUNTRIES, gazetteer)[:2] == (
        "ANSWER", "ENTITY_Q30")


def _score(raw: str, query: str, subject: tuple[str, ...], gold: list[str],
           competitors: list[str]) -> tuple[str, str | None]:
    r = score_answer(raw, gold, competitor_aliases=competitors, query=query,
                     subject_aliases=subject)
    return r.label, r.extracted_answer


def test_scorer_r13_reads_lines_like_the_judge():
    tirana = ["Tirana", "地拉那", "Тирана"]
    # query_00000019: an echo is unparseable, not an incorrect answer
    assert _score("\nThe capital of Albania is\nAnswer:\nThe capital of Albania is",
                  "The capital of Albania is", ALBANIA, tirana, ["Kabul"])[0] == "unparseable"
    # query_00000020: the candidate named is the extracted answer
    assert _score("\n\nAlbania's capital is Tirana.\n\nAnswer:", "Albania's capital", ALBANIA,
                  tirana, ["Kabul"]) == ("correct", "Tirana")
    # query_00000032: an unknown name after an unfinished rephrase
    assert _score("\nThe main city of the country is\nAnswer:\nBafra\nAnswer:\nBafra is the",
                  "Die hauptstadt von Albanien ist", ALBANIA, tirana, ["Kabul"]) == (
        "incorrect", "bafra")
    # without a query the scorer keeps its first-segment rule (R1)
    assert score_answer("\nThe capital of Albania is\nAnswer:", tirana).label == "incorrect"


def test_scorer_r14_the_subject_is_never_the_gold_it_contains():
    # the copy case: a subject whose name holds the gold is incorrect when echoed whole ...
    apple = ["Apple Inc.", "Apple"]
    assert _score("Apple II series", "Which company manufactures Apple II series?",
                  ("Apple II series",), apple, ["IBM"])[0] == "incorrect"
    # ... and correct when the answer names the object itself
    assert _score("Apple", "Which company manufactures Apple II series?",
                  ("Apple II series",), apple, ["IBM"])[0] == "correct"
    # query_00000024
    assert _score("\nAlbania\nAnswer:\nAlbania", "Fill in the blank: The capital of Albania "
                  "is ____.", ALBANIA, ["Tirana"], ["Kabul"]) == ("incorrect", "albania")


LEIPZIG = ("1. FC Lokomotive Leipzig",)
CITIES = EntityLexicon({"ENTITY_Q2079": ("Leipzig", ["Leipzig", "莱比锡", "Лейпциг"])})


def test_j8_a_part_or_garbled_form_of_the_subjects_name_is_an_answer_of_its_own(gazetteer):
    # SmolLM2, query_00012968 and query_00012970 (dev): "Leipzig" inside the club's name is
    # not the city; query_00012971: "FC" alone is a fragment
    q = "Where is the headquarters of 1. FC Lokomotive Leipzig?"
    assert read(" FC Leipzig FC\nThe answer is: FC Leipzig FC", q, LEIPZIG, CITIES,
                gazetteer)[:2] == ("ANSWER", "SEMANTIC_fc leipzig fc")
    assert read("\nThe answer is: FC Loka\n\nThe answer is: FC Loka", q, LEIPZIG, CITIES,
                gazetteer)[2].casefold() == "fc loka"
    assert read("\nThe answer is: FC\n\nThe answer is: FC", q, LEIPZIG, CITIES,
                gazetteer)[0] == "UNPARSEABLE"


def test_j4_a_json_record_answers_only_in_its_answer_field(gazetteer):
    # SmolLM2, query_00018247 (dev): a JSON record describing the subject
    raw = '\n\n```\n{\n  "id": 1,\n  "name": "A Pale Horse Named Death",\n '
    q = ('Where was A Pale Horse Named Death founded? Respond in JSON as {"answer": "..."}.')
    assert read(raw, q, ("A Pale Horse Named Death",), CITIES, gazetteer)[0] == "UNPARSEABLE"
    assert read('{"answer": "Leipzig"}', q, ("A Pale Horse Named Death",), CITIES,
                gazetteer)[1] == "ENTITY_Q2079"


def test_j4_an_invented_option_list_counts_only_its_pick(gazetteer):
    # Gemma, query_00007639 (dev): options made up, then "Answer:" picks "A. India"
    india = EntityLexicon({"ENTITY_Q668": ("India", ["India"]), "ENTITY_Q148": ("China",
                                                                              ["China"])})
    q = "Manyakheta is located in India. In which country is Aden located?"
    raw = "\nA. India\nB. China\nC. Brazil\nD. Argentina\nAnswer:\nA. India\n"
    assert read(raw, q, ("Aden",), india, gazetteer)[:2] == ("ANSWER", "ENTITY_Q668")
    # query_00005928: no pick
    raw = "\nA.\nThe island is located in the middle of the ocean.\nB.\nThe island is located in"
    assert read(raw, "Alexander Island belongs to the continent of", ("Alexander Island",),
                india, gazetteer)[0] == "UNPARSEABLE"


def test_j5_the_island_refers_to_the_subject(gazetteer):
    # Gemma, query_00005929 (dev): "The island" is Alexander Island, so the sentence is about
    # the subject and the continent it names is its answer
    raw = ("\n\nThe answer is A.\n\nExplanation:\n\nThe island is located in the middle of the "
           "continent of Africa.\n\n")
    got = read(raw, "Alexander Island is a part of the continent of", ("Alexander Island",),
               EntityLexicon({}), gazetteer)
    assert got[:3] == ("ANSWER", "ENTITY_Q15", "africa")
    # query_00009351: the prompt repeated names the subject with function words only: an echo
    assert read("\nArisaka, who was from\nAnswer:\nArisaka, who was from\nAnswer:\nAr",
                "Arisaka, who was from", ("Arisaka",), EntityLexicon({}),
                gazetteer)[0] == "UNPARSEABLE"


def test_bcs_gap_leaves_out_a_fact_without_scorable_answers():
    """SmolLM2: a fact whose answers are all UNPARSEABLE has no BCS; it is counted, not a crash."""
    from fks.judge._agreement import _bcs_gap

    groups = {"q1": "f1", "q2": "f1", "q3": "f2", "q4": "f2"}
    families = {"q1": "anchor", "q2": "paraphrase", "q3": "anchor", "q4": "paraphrase"}
    a = {"q1": "UNPARSEABLE", "q2": "UNPARSEABLE", "q3": "ENTITY_Q1", "q4": "ENTITY_Q1"}
    b = {"q1": "UNPARSEABLE", "q2": "UNPARSEABLE", "q3": "ENTITY_Q1", "q4": "ENTITY_Q2"}
    gap = _bcs_gap(a, b, groups, families)
    assert gap["n_facts"] == 1 and gap["n_facts_undefined"] == 1
    assert gap["mean_abs_gap"] == 0.5


def test_bcs_gap_uses_the_products_scorable_fact_rule():
    """A fact is compared only where both labelings give it a BCS (>= half its families answered).

    f1: five families, the judge reads one answer (1 of 5 families: no BCS for fks), the hand
    labels read three (a BCS): a scorability disagreement, counted, not a gap of 1.0. f2: both
    score it, and the gap is the difference of the two BCS.
    """
    from fks.judge._agreement import _bcs_gap

    fams = ["anchor", "paraphrase", "format", "context", "multilingual"]
    groups, families, a, b = {}, {}, {}, {}
    for f in ("f1", "f2"):
        for i, fam in enumerate(fams):
            q = f"{f}q{i}"
            groups[q], families[q] = f, fam
    for i in range(5):
        a[f"f1q{i}"] = "ENTITY_Q1" if i == 0 else "UNPARSEABLE"
        b[f"f1q{i}"] = "ENTITY_Q1" if i < 2 else ("ENTITY_Q2" if i == 2 else "UNPARSEABLE")
        a[f"f2q{i}"] = "ENTITY_Q1"
        b[f"f2q{i}"] = "ENTITY_Q1" if i < 4 else "ENTITY_Q2"
    gap = _bcs_gap(a, b, groups, families)
    assert gap["n_facts"] == 1 and gap["n_facts_scorable_one_side"] == 1
    assert gap["n_facts_undefined"] == 0
    assert gap["mean_abs_gap"] == pytest.approx(1.0 - 0.8)  # BCS: the modal cluster's share
    # the looser rule (any scorable answer) also compares f1: judge BCS 1.0 vs hand's
    assert gap["any_scorable_answer"]["n_facts"] == 2


def test_bcs_gap_carries_a_fact_bootstrap_interval_and_names_the_largest_gaps():
    """Stop 36: the gap rests on a few dozen facts; the report gives its 95 % interval over
    facts (seeded, so the same labels give the same interval) and the facts behind it."""
    from fks.judge._agreement import _bcs_gap

    fams = ["anchor", "paraphrase"]
    groups, families, a, b = {}, {}, {}, {}
    for f in range(6):
        for i, fam in enumerate(fams):
            q = f"f{f}q{i}"
            groups[q], families[q] = f"f{f}", fam
            a[q] = "ENTITY_Q1"
            # facts 0 and 1 split in the second labeling (BCS 0.5), the others agree
            b[q] = "ENTITY_Q2" if f < 2 and i == 1 else "ENTITY_Q1"
    gap = _bcs_gap(a, b, groups, families)
    assert gap["n_facts"] == 6 and gap["mean_abs_gap"] == pytest.approx(1 / 6)
    low, high = gap["mean_abs_gap_ci95"]
    assert 0.0 <= low < gap["mean_abs_gap"] < high <= 0.5
    assert _bcs_gap(a, b, groups, families)["mean_abs_gap_ci95"] == [low, high]
    assert [x["group"] for x in gap["largest_gaps"]] == ["f0", "f1"]  # equal facts not named
    assert gap["largest_gaps"][0] == {"group": "f0", "bcs_a": 1.0, "bcs_b": 0.5}
    # no fact scorable under both: no interval, nothing named
    empty = _bcs_gap({"q": "UNPARSEABLE"}, {"q": "UNPARSEABLE"}, {"q": "f"}, {"q": "anchor"})
    assert empty["mean_abs_gap_ci95"] is None and empty["largest_gaps"] == []
