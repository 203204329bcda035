"""The five-label scorer, rule by rule (R1-R11 of :mod:`fks.score`)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fks.data.schema import LABELS
from fks.score import AliasSet, ScoreResult, lettered_options, score_answer

PARIS = ["Paris", "巴黎", "Париж"]
CAPITALS = ["Berlin", "柏林", "Берлин", "Tokyo", "東京", "东京", "Madrid", "Мадрид", "Lyon"]
OPTIONS = ["Berlin", "Paris", "Tokyo"]
LETTERS = {"A": "Berlin", "B": "Paris", "C": "Tokyo"}
YEAR = {"answer_granularity": "year"}
DATE = {"answer_granularity": "date"}
COMP = {"competitor_aliases": CAPITALS}
REC = {"options": OPTIONS, "option_letters": LETTERS}

# (id, raw response, gold aliases, keyword arguments, label, extracted_answer, matched_alias)
# extracted/matched: ... means "not checked in this case".
CASES = [
    # R1 segment, cue echoes, run-on continuations
    ("plain", "Paris", PARIS, {}, "correct", "Paris", "Paris"),
    ("run_on_turn", "Paris\nQ: What is the capital of Spain?\nA: Madrid", PARIS, COMP,
     "correct", "Paris", "Paris"),
    ("run_on_inline_turn", "Paris Q: What is the capital of Spain? A: Madrid", PARIS, COMP,
     "correct", "Paris", "Paris"),
    ("run_on_question_sentence", "Paris. What is the capital of Spain? Madrid.", PARIS, COMP,
     "correct", "Paris", "Paris"),
    ("run_on_wrong_first", "Madrid\nQ: What is the capital of France?\nA: Paris", PARIS, COMP,
     "incorrect", "Madrid", None),
    ("continuation_sentence", "Paris. The capital of Germany is Berlin.", PARIS, COMP,
     "correct", "Paris", "Paris"),
    ("wrong_then_continuation", "Berlin. The capital of France is Paris.", PARIS, COMP,
     "incorrect", "Berlin", None),
    ("negated_sentence_then_answer", "It is not Lyon. It is Paris. Berlin is in Germany.", PARIS,
     COMP, "correct", "It is not Lyon. It is Paris", "Paris"),
    ("full_stop_inside_alias", "St. Louis. Chicago is bigger.", ["St. Louis"],
     {"competitor_aliases": ["Chicago"]}, "correct", "St. Louis", "St. Louis"),
    ("year_then_continuation", "1879. He died in 1955.", ["1879"], YEAR, "correct", "1879",
     "1879"),
    ("abbreviation_not_a_question", "St. Louis?", ["St. Louis", "Saint Louis"], {}, "correct",
     "St. Louis?", "St. Louis"),
    ("cue_echo", "Answer: The answer is **Paris**.", PARIS, {}, "correct", "Paris", "Paris"),
    ("cue_echo_newline", "Answer:\n  Paris", PARIS, {}, "correct", "Paris", "Paris"),
    ("cue_echo_de", "Die Antwort lautet: Paris", PARIS, {}, "correct", "Paris", "Paris"),
    ("leading_newlines", "\n\n Paris, France.", PARIS, {}, "correct", "Paris, France", "Paris"),
    # R2 normalisation: case, diacritics, articles
    ("casefold", "PARIS!!!", PARIS, {}, "correct", "PARIS", "Paris"),
    ("diacritics_answer", "Zurich", ["Zürich"], {}, "correct", "Zurich", "Zürich"),
    ("diacritics_gold", "Zürich", ["Zurich"], {}, "correct", "Zürich", "Zurich"),
    ("article_en", "Hague", ["The Hague"], {}, "correct", "Hague", "The Hague"),
    ("article_fr_elided", "Aquila", ["L'Aquila"], {}, "correct", "Aquila", "L'Aquila"),
    ("article_fr_in_answer", "l’Allemagne", ["Allemagne"], {}, "correct", ..., "Allemagne"),
    ("article_es", "Paz", ["La Paz"], {}, "correct", "Paz", "La Paz"),
    ("article_de", "Die Schweiz", ["Schweiz"], {}, "correct", "Die Schweiz", "Schweiz"),
    # R3 word boundaries, CJK substrings, longest mention
    ("word_boundary", "Parisian", PARIS, {}, "incorrect", "Parisian", None),
    ("superstring_competitor", "South Georgia", ["Georgia"],
     {"competitor_aliases": ["South Georgia"]}, "incorrect", "South Georgia", None),
    ("substring_of_gold", "Georgia", ["South Georgia"], {}, "incorrect", "Georgia", None),
    ("cjk_substring", "法国的首都是巴黎。", PARIS, {}, "correct", "法国的首都是巴黎", "巴黎"),
    ("cjk_latin_alias", "答案是Paris", PARIS, {}, "correct", "Paris", "Paris"),
    ("cjk_no_substring_of_other", "巴黎圣母院", ["圣母"], {}, "correct", ..., "圣母"),
    # multilingual answers matching their aliases
    ("ml_zh", "东京", ["Tokyo", "東京", "东京"], {}, "correct", "东京", "东京"),
    ("ml_ru", "Столица Франции — Париж.", PARIS, {}, "correct", ..., "Париж"),
    ("ml_fr", "C'est Paris.", PARIS, {}, "correct", "C'est Paris", "Paris"),
    ("ml_es", "La respuesta es Múnich", ["Munich", "München"], {}, "correct", "Múnich", ...),
    ("ml_de", "München", ["Munich", "München"], {}, "correct", "München", "München"),
    # R5 negation in several languages
    ("neg_en", "It is not Paris.", PARIS, {}, "incorrect", "It is not Paris", None),
    ("neg_en_contraction", "It isn't Paris", PARIS, {}, "incorrect", ..., None),
    ("neg_fr", "Ce n'est pas Paris", PARIS, {}, "incorrect", ..., None),
    ("neg_zh", "不是巴黎", PARIS, {}, "incorrect", "不是巴黎", None),
    ("neg_de", "Sicher nicht Paris", PARIS, {}, "incorrect", ..., None),
    ("neg_ru", "не Париж", PARIS, {}, "incorrect", ..., None),
    ("neg_es", "No es París", PARIS, {}, "incorrect", ..., None),
    ("neg_then_gold", "not Lyon but Paris", PARIS, COMP, "correct", ..., "Paris"),
    ("gold_then_neg_competitor", "Paris, not Berlin", PARIS, COMP, "correct", ..., "Paris"),
    ("neg_ru_contrast", "Это не Мадрид, а Париж", PARIS, COMP, "correct", ..., "Париж"),
    ("neg_zh_then_competitor", "不是巴黎，是东京", PARIS, COMP, "incorrect", ..., None),
    ("neg_weder_noch", "Weder Paris noch Lyon", PARIS, COMP, "incorrect", ..., None),
    ("cjk_cue_inside_alias", "大不列颠", ["大不列颠"], {}, "correct", ..., "大不列颠"),
    # R6 year and date granularity
    ("year_bare", "1879", ["1879"], YEAR, "correct", "1879", "1879"),
    ("year_in", "in 1879", ["1879"], YEAR, "correct", "in 1879", "1879"),
    ("year_full_date", "March 14, 1879", ["1879"], YEAR, "correct", ..., "1879"),
    ("year_zh", "1879年", ["1879"], YEAR, "correct", ..., "1879"),
    ("year_other", "1880", ["1879"], YEAR, "incorrect", "1880", None),
    ("year_two", "1879 or 1880", ["1879"], YEAR, "ambiguous", ..., None),
    ("year_negated", "not 1880 but 1879", ["1879"], YEAR, "correct", ..., "1879"),
    ("year_decade", "the 1870s", ["1879"], YEAR, "incorrect", ..., None),
    ("year_day_not_year", "14 March 1880", ["1879"], YEAR, "incorrect", ..., None),
    ("date_same", "March 14, 1879", ["1879-03-14"], DATE, "correct", ..., "1879-03-14"),
    ("date_other_day", "March 15, 1879", ["1879-03-14"], DATE, "incorrect", ..., None),
    ("date_es", "14 de marzo de 1879", ["1879-03-14"], DATE, "correct", ..., "1879-03-14"),
    ("date_numeric", "14.03.1879", ["14 March 1879"], DATE, "correct", ..., "14 March 1879"),
    ("date_year_only", "1879", ["1879-03-14"], DATE, "correct", ..., "1879-03-14"),
    # R7 ambiguity
    ("or_unknown", "Paris or Lyon", PARIS, {}, "ambiguous", "Paris or Lyon", None),
    ("or_fr", "Paris ou Marseille", PARIS, {}, "ambiguous", ..., None),
    ("or_same_entity", "Paris or Paname", [*PARIS, "Paname"], {}, "correct", ..., "Paris"),
    ("gold_and_competitor", "Paris and Berlin", PARIS, COMP, "ambiguous", ..., None),
    ("list_competitors", "Berlin, Paris, Tokyo", PARIS, COMP, "ambiguous", ..., None),
    ("list_unknown", "Paris, Lyon and Marseille", PARIS, {}, "ambiguous", ..., None),
    ("list_ru", "Париж и Мадрид", PARIS, COMP, "ambiguous", ..., None),
    ("or_in_sentence", "The capital of France is Paris or maybe Lyon", PARIS, {}, "ambiguous",
     ..., None),
    ("apposition", "Paris, the capital and largest city of France", PARIS, {}, "correct", ...,
     "Paris"),
    ("idiom_whether_or_not", "Paris, whether or not you like it", PARIS, {}, "correct", ...,
     "Paris"),
    ("apostrophe_o_is_no_or", "Chicago O'Hare", ["Chicago"], {}, "correct", ..., "Chicago"),
    ("two_competitors", "Berlin or Tokyo", PARIS, COMP, "ambiguous", ..., None),
    # R8 abstention in six languages
    ("abstain_en", "I don't know.", PARIS, {}, "abstain", "I don't know", None),
    ("abstain_en_unsure", "I'm not sure.", PARIS, {}, "abstain", ..., None),
    ("abstain_en_unknown", "Unknown", PARIS, {}, "abstain", ..., None),
    ("abstain_en_cannot", "I cannot answer that question.", PARIS, {}, "abstain", ..., None),
    ("abstain_zh", "不知道", PARIS, {}, "abstain", "不知道", None),
    ("abstain_zh_cannot", "我无法回答这个问题。", PARIS, {}, "abstain", ..., None),
    ("abstain_fr", "Je ne sais pas.", PARIS, {}, "abstain", ..., None),
    ("abstain_es", "No lo sé.", PARIS, {}, "abstain", ..., None),
    ("abstain_de", "Ich weiß nicht.", PARIS, {}, "abstain", ..., None),
    ("abstain_de_inverted", "Das weiß ich nicht", PARIS, {}, "abstain", ..., None),
    ("abstain_ru", "Не знаю", PARIS, {}, "abstain", ..., None),
    ("hedge_names_gold", "I'm not sure, but I think it's Paris", PARIS, {}, "correct", ...,
     "Paris"),
    ("hedge_negates_gold", "I'm not sure it's Paris", PARIS, {}, "abstain", ..., None),
    ("hedge_names_competitor", "I don't know, maybe Lyon", PARIS, COMP, "incorrect", ..., None),
    # R9 unparseable
    ("empty", "", PARIS, {}, "unparseable", None, None),
    ("whitespace", "  \n\t ", PARIS, {}, "unparseable", None, None),
    ("dots", "......", PARIS, {}, "unparseable", None, None),
    ("symbols", "?!?! ### ***", PARIS, {}, "unparseable", None, None),
    ("garbage_lines_only", "---\n...\n", PARIS, {}, "unparseable", None, None),
    ("garbage_line_then_answer", "---\nParis", PARIS, {}, "correct", "Paris", "Paris"),
    # R10 recognition
    ("rec_text", "Paris", PARIS, REC, "correct", "Paris", "Paris"),
    ("rec_alias_of_gold_option", "巴黎", PARIS, REC, "correct", "巴黎", "巴黎"),
    ("rec_wrong_option", "Tokyo", PARIS, REC, "incorrect", "Tokyo", None),
    ("rec_letter", "B", PARIS, REC, "correct", "B", "Paris"),
    ("rec_letter_paren", "(A)", PARIS, REC, "incorrect", "(A)", None),
    ("rec_letter_cue", "Answer: B) Paris", PARIS, REC, "correct", "B) Paris", "Paris"),
    ("rec_letter_conflict", "B) Berlin", PARIS, REC, "ambiguous", ..., None),
    ("rec_two_options", "Berlin or Paris", PARIS, REC, "ambiguous", ..., None),
    ("rec_article_not_letter", "A city in France", PARIS, REC, "incorrect", ..., None),
    ("rec_letter_without_lettering", "B", PARIS, {"options": OPTIONS}, "incorrect", "B", None),
    # R11 otherwise incorrect
    ("other_entity", "Lyon", PARIS, {}, "incorrect", "Lyon", None),
    ("other_language_unknown", "Parigi", PARIS, {}, "incorrect", "Parigi", None),
    ("context_distractor_echo", "Madrid is big, but the capital of France is Paris", PARIS, COMP,
     "ambiguous", ..., None),
]


@pytest.mark.parametrize(
    ("raw", "gold", "kwargs", "label", "extracted", "matched"),
    [pytest.param(*c[1:], id=c[0]) for c in CASES],
)
def test_score_answer(raw, gold, kwargs, label, extracted, matched):
    result = score_answer(raw, gold, **kwargs)
    assert result.label == label, result
    if extracted is not ...:
        assert result.extracted_answer == extracted, result
    if matched is not ...:
        assert result.matched_alias == matched, result


def test_table_is_large_and_covers_every_label():
    assert len(CASES) >= 31
    assert {c[4] for c in CASES} == set(LABELS)
    assert len({c[0] for c in CASES}) == len(CASES)


def test_prepared_alias_set_gives_the_same_labels():
    assert list(AliasSet(CAPITALS)) == list(dict.fromkeys(CAPITALS))
    n = 0
    for _, raw, gold, kwargs, *_ in CASES:
        if "competitor_aliases" in kwargs:
            prepared = AliasSet(kwargs["competitor_aliases"])
            plain = score_answer(raw, gold, **kwargs)
            again = score_answer(raw, gold, **{**kwargs, "competitor_aliases": prepared})
            assert plain == again, raw
            n += 1
    assert n >= 10


def test_alias_set_view_excludes_one_owner():
    pool = AliasSet(["Paris", "Paname", "Berlin", "Tokyo"], owners=["Q90", "Q90", "Q64", "Q1490"])
    view = pool.excluding("Q90")
    assert list(view) == ["Berlin", "Tokyo"] and len(view) == 2
    assert len(pool) == 4  # the pool itself is unchanged
    # "Paname" is not in this query's gold list, yet it names the gold entity: no ambiguity
    assert score_answer("Paris (Paname)", ["Paris"], competitor_aliases=view).label == "correct"
    assert score_answer("Paris (Paname)", ["Paris"], competitor_aliases=pool).label == "ambiguous"
    with pytest.raises(ValueError, match="owners"):
        AliasSet(["Paris"], owners=[])


def test_competitor_equal_to_gold_is_not_a_competitor():
    # two facts of one relation may share an object ("France"): never ambiguous with itself
    result = score_answer("France", ["France"], competitor_aliases=["France", "Spain"])
    assert result == ScoreResult("correct", "France", "France")


def test_single_letter_competitor_is_ignored():
    assert score_answer("I think Paris", PARIS, competitor_aliases=["I"]).label == "correct"


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="gold_aliases"):
        score_answer("Paris", ["", "  "])
    with pytest.raises(ValueError, match="answer_granularity.*'decade'"):
        score_answer("1879", ["1879"], answer_granularity="decade")


def test_lettered_options_reads_the_prompt():
    prompt = "What is the capital of France?\nA) Berlin\nB) Paris\nC) Tokyo\nAnswer:"
    assert lettered_options(prompt, OPTIONS) == LETTERS
    assert lettered_options("(A) Berlin (B) Paris (C) Tokyo", OPTIONS) == LETTERS
    # options listed without letters, or a letter given twice: letters are not accepted
    assert lettered_options("Options: Berlin, Paris, Tokyo", OPTIONS) == {}
    assert lettered_options("A) Berlin A) Paris C) Tokyo", OPTIONS) == {}


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=80))
def test_any_text_gets_one_of_the_five_labels(raw):
    result = score_answer(raw, PARIS, competitor_aliases=CAPITALS, options=None)
    assert result.label in LABELS
    assert (result.extracted_answer is None) == (result.label == "unparseable")
    assert (result.matched_alias is not None) == (result.label == "correct")
