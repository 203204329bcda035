"""Regression cases of the judge's and the scorer's failure classes on fresh answers (issue 26).

Hand-written continuations of the shapes the fresh held-out labels showed (none is copied from
a labelled row), in the six benchmark languages where the class occurs. Each expected reading
follows ``data/judge_validation/LABELLING_GUIDE.md``.
"""

from __future__ import annotations

import pytest

from fks.data.load import load_benchmark
from fks.judge import EntityLexicon
from fks.judge._lexicon import build_gazetteer
from fks.judge._reader import _tokens, normalize, read_answer
from fks.judge._run import slot_words
from fks.score import score_answer
from tiny_benchmark import tiny_benchmark_rows, write_benchmark

PLACES = EntityLexicon({
    "ENTITY_Q90": ("Paris", ["Paris", "巴黎", "Париж"]),
    "ENTITY_Q64": ("Berlin", ["Berlin", "柏林", "Берлин"]),
    "ENTITY_Q38": ("Italy", ["Italy", "Italie", "Italia", "Italien", "Италия", "意大利"]),
    "ENTITY_Q142": ("France", ["France", "Francia", "Frankreich", "Франция", "法国"]),
})
COMPANIES = EntityLexicon({
    "ENTITY_Q66": ("Boeing", ["Boeing", "波音"]),
    "ENTITY_Q67": ("Airbus", ["Airbus"]),
})
#: what :func:`slot_words` gives for the relations below (template words, names excluded)
FOUNDED = frozenset("was founded in formed created originated fondé a été à fue fundada en "
                    "wurde gegründet in был основан в 成立 于".split())
LOCATED = frozenset("is located in which country situé se encuentra befindet sich находится в "
                    "位于 the of".split())
CITIZEN = frozenset("is a citizen of which country est citoyen de es ciudadano ist bürger von "
                    "является гражданином".split())
MAKER = frozenset("which company manufactures is made by produced produces".split())


@pytest.fixture(scope="module")
def gaz() -> EntityLexicon:
    return build_gazetteer(None)


def read(raw, query, subject, lexicon, gaz, slot):
    slot = frozenset(_tokens(normalize(" ".join(sorted(slot)))))  # as slot_words stores them
    r = read_answer(raw, query=query, mentions=subject, lexicon=lexicon, gazetteer=gaz,
                    slot=slot)
    return r.kind, r.key, r.rule


# -- class 1: a wrong-type filler of the asked slot, inside a sentence ----------------------
@pytest.mark.parametrize("raw, query", [
    (" The Rolling Stones was founded in 1962.", "Where was The Rolling Stones founded?"),
    ("\nThe Rolling Stones a été fondé en 1962.", "The Rolling Stones a été fondé à"),
    ("\nThe Rolling Stones fue fundada en 1962.", "The Rolling Stones que fue fundada en"),
    ("\nThe Rolling Stones wurde 1962 gegründet.", "The Rolling Stones wurde gegründet in"),
])
def test_class1_wrong_type_filler_is_an_answer(raw, query, gaz):
    kind, key, rule = read(raw, query, ("The Rolling Stones",), PLACES, gaz, FOUNDED)
    if "wurde 1962" in raw:  # German puts the filler before the participle: left to J8
        return
    assert (kind, key) == ("ANSWER", "SEMANTIC_1962") and rule == "J11"


def test_class1_a_named_place_after_the_year_adjunct_wins(gaz):
    raw = " The Rolling Stones was founded in 1962 in Paris.\nQuestion: ..."
    assert read(raw, "Where was The Rolling Stones founded?", ("The Rolling Stones",), PLACES,
                gaz, FOUNDED)[:2] == ("ANSWER", "ENTITY_Q90")


@pytest.mark.parametrize("raw, query", [
    (" 1962\nFill in the blank: ...", "Fill in the blank: The Rolling Stones, founded in ____."),
    (" 2018-01-22 12:22:12\nThe answer is", "The Rolling Stones was created in"),
    (" 1962年", "The Rolling Stones 成立于"),
])
def test_class1_a_date_in_an_open_blank_is_an_answer(raw, query, gaz):
    kind, key, rule = read(raw, query, ("The Rolling Stones",), PLACES, gaz, FOUNDED)
    assert kind == "ANSWER" and key.startswith("SEMANTIC_") and rule in ("J12", "J8", "J11")


def test_class1_a_number_after_a_closed_question_is_still_a_placeholder(gaz):
    # release 8 (J27): a bare year after a closed question is a wrong-type answer, as the labels
    # read 36 of 39 such lines; a small number or a digit run stays a placeholder (J4)
    for raw in (" 1", " 123 456", " The answer is: 1."):
        assert read(raw, "Where was The Rolling Stones founded?", ("The Rolling Stones",),
                    PLACES, gaz, FOUNDED)[0] == "UNPARSEABLE", raw


# -- class 2: the distractor's entity asserted about the subject ---------------------------
@pytest.mark.parametrize("raw", [
    " Villa Borghese is located in Italy.",
    " Villa Borghese est située en Italie.",
    " Villa Borghese se encuentra en Italia.",
    " Villa Borghese befindet sich in Italien.",
    " Villa Borghese находится в Италия.",
])
def test_class2_distractor_entity_about_the_subject_is_an_answer(raw, gaz):
    query = "The Colosseum is located in Italy. In which country is Villa Borghese located?"
    kind, key, _ = read(raw, query, ("Villa Borghese",), PLACES, gaz,
                        LOCATED | frozenset("est située".split()))
    assert (kind, key) == ("ANSWER", "ENTITY_Q38")


def test_class2_the_distractor_sentence_repeated_is_still_an_echo(gaz):
    query = "The Colosseum is located in Italy. In which country is Villa Borghese located?"
    assert read(" The Colosseum is located in Italy.\nThe Colosseum is", query,
                ("Villa Borghese",), PLACES, gaz, LOCATED)[0] == "UNPARSEABLE"


def test_class2_a_bare_distractor_name_is_an_answer(gaz):
    lex = EntityLexicon({"ENTITY_Q312": ("Apple Inc.", ["Apple Inc.", "Apple"])})
    query = "Quick Look is developed by Apple Inc.. Which company developed Safari?"
    assert read(" Apple Inc.\nQuick Look is a tool.", query, ("Safari",), lex, gaz,
                MAKER | frozenset({"developed", "by"}))[:2] == ("ANSWER", "ENTITY_Q312")


@pytest.mark.parametrize("raw", [" Motown Records.\nCharles Aznavour was born in",
                                 " Motown\nAnswer:"])
def test_class2_a_bare_line_of_the_distractor_entity_is_not_an_echo(raw, gaz):
    """A bare line naming the context sentence's object answers with it (R-context)."""
    lex = EntityLexicon({"ENTITY_Q43327": ("Motown", ["Motown"])})
    query = ("Love, Marriage & Divorce is represented by record label Motown. "
             "Which record label is Charles Aznavour signed to?")
    kind, key, rule = read(raw, query, ("Charles Aznavour",), lex, gaz,
                           frozenset({"record", "label", "signed", "to"}))
    assert kind == "ANSWER"
    assert key == ("ENTITY_Q43327" if raw == " Motown\nAnswer:" else "SEMANTIC_motown records")


@pytest.mark.parametrize("raw, query, subject", [
    (" Dodge 600\nAnswer: Dodge 600", "Dodge 600 is produced by Dodge. Which company "
     "manufactures BMW M70?", ("BMW M70",)),
    (" Toyota Sprinter\nAnswer:", "Toyota Sprinter is produced by Toyota. Which company "
     "manufactures BMW M70?", ("BMW M70",)),
    ("\nQuick Look\n", "Quick Look est développé par Apple. Quelle entreprise a développé "
     "Safari ?", ("Safari",)),
])
def test_class2_the_distractor_subject_on_a_bare_line_is_its_own_answer(raw, query, subject,
                                                                          gaz):
    """The context sentence's subject named alone is an answer (wrong type), not an echo, and
    not the company inside its name (J13: the whole name)."""
    lex = EntityLexicon({"ENTITY_Q27564": ("Dodge", ["Dodge"]),
                         "ENTITY_Q53268": ("Toyota", ["Toyota"]),
                         "ENTITY_Q312": ("Apple Inc.", ["Apple Inc.", "Apple"])})
    kind, key, _ = read(raw, query, subject, lex, gaz, MAKER)
    name = raw.strip().split("\n")[0]
    assert kind == "ANSWER" and key == f"SEMANTIC_{normalize(name).strip()}"


def test_class2_a_cut_off_echo_of_the_distractor_sentence_is_no_answer(gaz):
    query = "High Atlas is located in Morocco. In which country is ABC Futebol Clube located?"
    raw = "\nHigh Atlas is located in Morocco.\nAnswer:\nHigh Atlas is"
    assert read(raw, query, ("ABC Futebol Clube",), PLACES, gaz, LOCATED)[0] == "UNPARSEABLE"


@pytest.mark.parametrize("raw", [" He was born in the year 1880.\nQuestion: ...",
                                 " The Rolling Stones was founded in the year 1962."])
def test_class1_a_year_after_the_year_is_the_filler(raw, gaz):
    query = "Where was The Rolling Stones founded?"
    slot = FOUNDED | frozenset({"born"})
    kind, key, rule = read(raw, query, ("The Rolling Stones",), PLACES, gaz, slot)
    assert (kind, key, rule) == ("ANSWER", f"SEMANTIC_{raw.split('year ')[1][:4]}", "J11")


# -- class 3: circular subject echoes -------------------------------------------------------
@pytest.mark.parametrize("raw, query", [
    (" Lake Nakuru is located in the Lake Nakuru.", "In which country is Lake Nakuru located?"),
    ("\nLake Nakuru est situé au Lake Nakuru.", "Lake Nakuru est situé en"),
    ("\nLake Nakuru находится в Lake Nakuru.", "Lake Nakuru находится в"),
])
def test_class3_circular_echo_is_the_subject_incorrect(raw, query, gaz):
    kind, key, rule = read(raw, query, ("Lake Nakuru",), PLACES, gaz,
                           LOCATED | frozenset({"est", "situé", "au"}))
    assert kind == "ANSWER" and rule == "J5" and "nakuru" in key.lower()


# -- class 4: descriptions are no answers ---------------------------------------------------
@pytest.mark.parametrize("raw, query, subject, slot", [
    (" Capital Region is located in the North of the country.",
     "In which administrative territory is Capital Region located?", ("Capital Region",),
     LOCATED),
    (" August Gailit is a Russian-born actor.", "Of which country is August Gailit a citizen?",
     ("August Gailit",), CITIZEN),
    ("\nРассвязь на этих элемент", "Детектив Раш премьеры на", ("Детектив Раш",), LOCATED),
    (" X County is in the western part of Oklahoma. It is the county seat of the area.",
     "What is the capital of X County?", ("X County",), frozenset("capital of is the".split())),
])
def test_class4_descriptions_assert_nothing(raw, query, subject, slot, gaz):
    kind, key, _ = read(raw, query, subject, PLACES, gaz, slot)
    assert kind == "UNPARSEABLE" or key in ("ENTITY_Q1649",), (kind, key)  # Oklahoma is off-slot


def test_class4_a_citizenship_sentence_is_read_on_its_slot(gaz):
    for raw in (" August Gailit is a citizen of France", " August Gailit est citoyen de France."):
        assert read(raw, "Of which country is August Gailit a citizen?", ("August Gailit",),
                    PLACES, gaz, CITIZEN)[:2] == ("ANSWER", "ENTITY_Q142")


# -- class 5: a subject echo is never the gold inside the subject's name -------------------
@pytest.mark.parametrize("raw", [" Boeing 747-8 Freighter", "\nBoeing 747-8 Freighter\nAnswer:"])
def test_class5_subject_echo_is_the_subject_not_the_company(raw, gaz):
    kind, key, rule = read(raw, "Which company manufactures Boeing 747-8 Freighter?",
                           ("Boeing 747-8 Freighter",), COMPANIES, gaz, MAKER)
    assert kind == "ANSWER" and key != "ENTITY_Q66", (key, rule)


def test_class5_the_company_named_alone_is_still_correct(gaz):
    assert read(" Boeing", "Which company manufactures Boeing 747-8 Freighter?",
                ("Boeing 747-8 Freighter",), COMPANIES, gaz, MAKER)[:2] == ("ANSWER",
                                                                            "ENTITY_Q66")


# -- the scorer's two regressions ------------------------------------------------------------
def test_scorer_reads_a_corrected_negation():
    r = score_answer("It is not Lyon, it is Paris.", ["Paris"], competitor_aliases=["Lyon"],
                     query="What is the capital of France?", subject_aliases=["France"])
    assert (r.label, r.extracted_answer) == ("correct", "Paris")


@pytest.mark.parametrize("raw", ["He was born on 14 March 1879.", "Il est né le 14 mars 1879.",
                                 "Er wurde am 14. März 1879 geboren."])
def test_scorer_reads_a_full_date_for_a_year(raw):
    r = score_answer(raw, ["1879"], answer_granularity="year",
                     query="In which year was Albert Einstein born?",
                     subject_aliases=["Albert Einstein"])
    assert r.label == "correct"


def test_judge_reads_a_pronoun_sentence_about_the_subject(gaz):
    assert read(" It is not Berlin, it is Paris.", "What is the capital of France?",
                ("France",), PLACES, gaz, frozenset("capital of is the".split()))[0] == "ANSWER"


# -- the slot words come from the benchmark's templates, never names -----------------------
def test_slot_words_are_template_words(tmp_path):
    facts, queries = tiny_benchmark_rows()
    bench = load_benchmark(write_benchmark(tmp_path / "b", facts, queries))
    words = slot_words(bench)[("capital", "object")]
    assert "capital" in words
    assert not {"france", "germany", "japan", "paris"} & words


# -- stop 33: another relation's predicate, whole names inside a sentence, initialisms ------
DIED = frozenset("where did die died passed away his her life ended in".split())
BORN = frozenset("where was born is from".split())


@pytest.mark.parametrize("raw", [
    "\nMarie Curie was born on 7 November 1867 in the city of Paris",
    " Marie Curie was born in Paris, France, in 1867. She was a physicist",
    "\nMarie Curie was a physicist. She was born in Paris, France, on November",
])
def test_j14_a_birthplace_is_no_answer_for_the_place_of_death(raw, gaz):
    r = read_answer(raw, query="Where did Marie Curie die?", mentions=("Marie Curie",),
                    lexicon=PLACES, gazetteer=gaz, slot=DIED, foreign=frozenset({"born"}))
    assert r.kind == "UNPARSEABLE"
    # without the foreign predicate words (fks before stop 33) Paris was read as the answer
    # (or, with its country, as a list of candidates)
    old = read_answer(raw, query="Where did Marie Curie die?", mentions=("Marie Curie",),
                      lexicon=PLACES, gazetteer=gaz, slot=DIED)
    assert old.key == "ENTITY_Q90" or old.kind == "MULTIPLE"


def test_j14_our_own_predicate_after_a_foreign_word_still_answers(gaz):
    # "born" is foreign for a place of death, but the clause's last predicate is "died"
    raw = " Marie Curie, who was born in Warsaw, died in Paris."
    r = read_answer(raw, query="Where did Marie Curie die?", mentions=("Marie Curie",),
                    lexicon=PLACES, gazetteer=gaz, slot=DIED, foreign=frozenset({"born"}))
    assert (r.kind, r.key) == ("ANSWER", "ENTITY_Q90")
    # and a place of birth asked is answered by "born in"
    r = read_answer(" Marie Curie was born in Paris.", query="Where was Marie Curie born?",
                    mentions=("Marie Curie",), lexicon=PLACES, gazetteer=gaz, slot=BORN,
                    foreign=frozenset({"died"}))
    assert (r.kind, r.key) == ("ANSWER", "ENTITY_Q90")


def test_j14_foreign_words_are_distinctive_template_words():
    from fks.judge._run import foreign_words

    slots = {("place_of_birth", "object"): frozenset({"born", "where", "city"}),
             ("place_of_birth", "subject"): frozenset({"born", "who"}),
             ("place_of_death", "object"): frozenset({"died", "where", "city"}),
             ("capital", "object"): frozenset({"capital", "city"})}
    got = foreign_words(slots)
    # "born" belongs to one relation (both of its slots); "city" to three: never foreign
    assert got[("place_of_death", "object")] == {"born", "capital"}
    assert got[("place_of_birth", "object")] == {"died", "capital"}
    assert "city" not in got[("capital", "object")]


@pytest.mark.parametrize("raw, span", [
    (" The BMW 320 is made by the BMW Motor Group.", "bmw motor group"),
    (" Boeing 747 is produced by Boeing, an American company.", "boeing"),
])
def test_j15_the_span_is_the_whole_capitalised_name_the_key_its_entity(raw, span, gaz):
    lexicon = EntityLexicon({"ENTITY_Q26678": ("BMW", ["BMW"])}) if "BMW" in raw else COMPANIES
    subject = ("BMW 320",) if "BMW" in raw else ("Boeing 747",)
    r = read_answer(raw, query=f"Which company manufactures {subject[0]}?", mentions=subject,
                    lexicon=lexicon, gazetteer=gaz, slot=MAKER)
    assert r.kind == "ANSWER" and r.span == span
    assert r.key == ("ENTITY_Q26678" if "BMW" in raw else "ENTITY_Q66")


def test_j23_a_longer_name_the_gazetteer_knows_is_that_entity(gaz):
    # release 7: the division is an entity of its own (the fresh labels key it so), not Boeing
    r = read_answer(" Boeing 747 is produced by Boeing Commercial Airplanes.",
                    query="Which company manufactures Boeing 747?", mentions=("Boeing 747",),
                    lexicon=COMPANIES, gazetteer=gaz, slot=MAKER)
    assert (r.kind, r.span, r.rule) == ("ANSWER", "boeing commercial airplanes", "J23")
    assert {r.key} == gaz.keys_of("boeing commercial airplanes")


def test_an_initialism_does_not_end_the_sentence(gaz):
    raw = " Paris F.C. is located in the city of Berlin, Germany.\nQuestion: ..."
    r = read_answer(raw, query="Where is the headquarters of Paris F.C.?",
                    mentions=("Paris F.C.",), lexicon=PLACES, gazetteer=gaz,
                    slot=frozenset("where is the headquarters of located in city".split()))
    assert (r.kind, r.key) == ("ANSWER", "ENTITY_Q64")


@pytest.mark.parametrize("raw", [
    '\n```\n{\n  "id": 1,\n  "name": "Alejandro",\n  "description',
    '\n{\n  "response": {\n    "type": "application/json",\n    "data": {\n      "name',
])
def test_j15_a_json_key_cut_off_by_the_budget_is_no_answer(raw, gaz):
    r = read_answer(raw, query="Which country is Paris located in?", mentions=("Paris",),
                    lexicon=PLACES, gazetteer=gaz, slot=LOCATED)
    assert r.kind == "UNPARSEABLE"


def test_j15_a_json_answer_field_in_a_code_fence_is_still_read(gaz):
    raw = '\n```json\n{\n  "answer": "Italy"\n}\n```'
    r = read_answer(raw, query="Which country is Rome located in?", mentions=("Rome",),
                    lexicon=PLACES, gazetteer=gaz, slot=LOCATED)
    assert (r.kind, r.key) == ("ANSWER", "ENTITY_Q38")


@pytest.mark.parametrize("raw", [
    "\n\nExplanation:\n\nThe language of Le Monde is\n\nExplanation:\n\nThe language of Le Monde is"
    "\n\nExplanation",
    "\n\nThe answer is <strong>C</strong>\n\n<strong>Explanation:</strong>\n\nThe answer is "
    "<strong>C</strong>\n\n<strong>Explanation",
])
def test_j15_a_header_cut_off_by_the_budget_is_no_answer(raw, gaz):
    r = read_answer(raw, query="What is the original language of Le Monde?",
                    mentions=("Le Monde",), lexicon=PLACES, gazetteer=gaz,
                    slot=frozenset("what is the original language of".split()))
    assert r.kind == "UNPARSEABLE"


def test_j15_a_capitalised_continuation_of_the_subject_name_is_skipped(gaz):
    raw = " The Boeing Company was founded in 1916 in Italy.\nAnswer: The Boeing Company"
    r = read_answer(raw, query="Where was Boeing founded?", mentions=("Boeing",),
                    lexicon=PLACES, gazetteer=gaz, slot=FOUNDED)
    assert (r.kind, r.key, r.rule) == ("ANSWER", "ENTITY_Q38", "J11")


def test_j12_a_decade_keeps_its_s_and_keys_on_its_year(gaz):
    r = read_answer(" 1940s\nFill in the blank: ...", query="Paris was founded in ____.",
                    mentions=("Paris",), lexicon=PLACES, gazetteer=gaz, slot=FOUNDED)
    assert (r.kind, r.span, r.key) == ("ANSWER", "1940s", "SEMANTIC_1940")
    r = read_answer(" 2018-01-22 12:22:12\nThe answer is", query="Paris was founded in",
                    mentions=("Paris",), lexicon=PLACES, gazetteer=gaz, slot=FOUNDED)
    assert (r.kind, r.span, r.key) == ("ANSWER", "2018", "SEMANTIC_2018")


# -- release 5 (stop 33): dates only in an in/at blank; common-noun answers ----------------
@pytest.mark.parametrize("query, kind", [
    ("Clement XIV passed away at", "ANSWER"),
    ("Coldplay was started in", "ANSWER"),
    ("Le siège social de Chivas Regal est situé à", "ANSWER"),
    ("Coldplay 成立于", "ANSWER"),
    ("Azis, who has a citizenship of", "UNPARSEABLE"),
    ("Cilla Black is represented by record label", "UNPARSEABLE"),
    ("Eritrea pertenece al continente de", "UNPARSEABLE"),
])
def test_j12_a_timestamp_answers_only_an_in_at_blank(query, kind, gaz):
    r = read_answer(" 2018-01-22 12:22:12\nThe answer is", query=query, mentions=("Coldplay",),
                    lexicon=PLACES, gazetteer=gaz, slot=FOUNDED)
    assert r.kind == kind
    if kind == "ANSWER":
        assert r.key == "SEMANTIC_2018"


def test_j8_a_bare_common_noun_answers_where_the_relation_names_its_objects_so(gaz):
    positions = EntityLexicon({"ENTITY_Q193592": ("midfielder", ["midfielder"]),
                               "ENTITY_Q336286": ("defender", ["defender"])})
    query = "Diego Fuser plays in the position of"
    r = read_answer(" Defensive end.\n\nDiego Fuser is a", query=query,
                    mentions=("Diego Fuser",), lexicon=positions, gazetteer=gaz,
                    slot=frozenset("plays in the position of".split()))
    assert (r.kind, r.key) == ("ANSWER", "SEMANTIC_defensive end")
    # the same line is no name where the relation's objects are proper names
    r = read_answer(" Defensive end.\n\nParis is a", query="Paris is located in",
                    mentions=("Paris",), lexicon=PLACES, gazetteer=gaz, slot=LOCATED)
    assert r.kind == "UNPARSEABLE"


# -- release 6 (stop 33): a statement before a question; the first of "X, Y" ---------------
def test_a_statement_before_a_question_on_its_line_is_read(gaz):
    raw = " Marie Curie died in Paris. Where did Marie Curie die?\nAnswer: Marie"
    r = read_answer(raw, query="Pierre Curie died in Berlin. Where did Marie Curie die?",
                    mentions=("Marie Curie",), lexicon=PLACES, gazetteer=gaz, slot=DIED)
    assert (r.kind, r.key) == ("ANSWER", "ENTITY_Q90")


@pytest.mark.parametrize("raw, span", [
    ("\nLyon is a small town in the state of Auvergne Rhodania, France.", "auvergne rhodania"),
    ("\nLyon is a small town in the north of the province of Rhodania in France.", "rhodania"),
])
def test_j17_the_first_place_named_wins_over_its_qualifier(raw, span, gaz):
    r = read_answer(raw, query="Which country is Lyon located in?", mentions=("Lyon",),
                    lexicon=PLACES, gazetteer=gaz, slot=LOCATED)
    assert r.kind == "ANSWER" and r.span == span and r.key != "ENTITY_Q142"


def test_j17_a_lone_country_is_still_the_answer(gaz):
    r = read_answer("\nLyon is a small town in the east of France. It is",
                    query="Which country is Lyon located in?", mentions=("Lyon",),
                    lexicon=PLACES, gazetteer=gaz, slot=LOCATED)
    assert (r.kind, r.key) == ("ANSWER", "ENTITY_Q142")


# -- release 7 (stop 34): wrapped lines, own questions, adjectives, definitions ------------
WORKED = frozenset("where did work worked was employed in où a travaillé trabajó arbeitete "
                   "работал в 工作".split())
FOUNDED_Q = "Where was The Rolling Stones founded?"


@pytest.mark.parametrize("raw", [
    "\nThe first step in the process of\nreconstruction is to identify the\nproblem.\nThe",
    "\nDie Rolling Stones sind eine neue und sehr erfolgreiche\nBand-Formation.\nDie",
])
def test_j18_a_sentence_wrapped_onto_the_next_line_is_one_sentence(raw, gaz):
    # the wrapped sentence's last words are no bare answer line ("problem.")
    assert read(raw, FOUNDED_Q, ("The Rolling Stones",), PLACES, gaz, FOUNDED)[0] == "UNPARSEABLE"


def test_j18_a_wrapped_frame_filled_on_the_next_line_is_read(gaz):
    raw = "\nThe Rolling Stones was founded in the\nFrench capital, Paris.\nThe Rolling"
    assert read(raw, FOUNDED_Q, ("The Rolling Stones",), PLACES, gaz, FOUNDED)[:2] == \
        ("ANSWER", "ENTITY_Q90")


def test_j18_a_loop_restarting_the_line_is_not_joined(gaz):
    raw = "\nThe Rolling Stones was founded in\nThe Rolling Stones was founded in\nThe Rolling"
    assert read(raw, FOUNDED_Q, ("The Rolling Stones",), PLACES, gaz, FOUNDED)[0] == "UNPARSEABLE"


def test_j18_an_article_and_the_subject_cut_off_by_the_budget_is_no_answer(gaz):
    raw = "\nCarPlay ist ein neuer und zuverlässiger Dienst.\nDer CarPlay"
    r = read_answer(raw, query="CarPlay, ein Produkt von", mentions=("CarPlay",),
                    lexicon=COMPANIES, gazetteer=gaz, slot=MAKER)
    assert r.kind == "UNPARSEABLE"
    # the subject alone on the only line is still the subject's answer (J5)
    r = read_answer(" A Pale Horse Named Death", query="Where was A Pale Horse Named Death "
                    "founded?", mentions=("A Pale Horse Named Death",), lexicon=PLACES,
                    gazetteer=gaz, slot=FOUNDED)
    assert (r.kind, r.rule) == ("ANSWER", "J5")


@pytest.mark.parametrize("raw", [
    '\nThe answer to the question "What is the capital of France?" is:\nParis\n\nParis is',
    ' The answer to the question "What is the capital of France?" is:\nLyon, France\n',
    '\n\nThe answer to the question "What is the name of the city where',
])
def test_j19_an_answer_to_a_question_of_its_own_is_no_answer(raw, gaz):
    assert read(raw, FOUNDED_Q, ("The Rolling Stones",), PLACES, gaz, FOUNDED)[0] == "UNPARSEABLE"


def test_j19_our_own_question_quoted_is_read(gaz):
    raw = '\nThe answer to the question "Where was The Rolling Stones founded?" is Paris.'
    assert read(raw, FOUNDED_Q, ("The Rolling Stones",), PLACES, gaz, FOUNDED)[:2] == \
        ("ANSWER", "ENTITY_Q90")


@pytest.mark.parametrize("raw", [
    " He was a German physician who worked in the 18th century. He was a doctor",
    "\nThe owner of the club is a German company.\nThe owner of",
    " He was a Swedish doctor and a member of the Swedish Medical Association.",
])
def test_j20_a_nationality_adjective_in_a_description_is_no_answer(raw, gaz):
    kind, key, _ = read(raw, "Where did Eugen Baziak work?", ("Eugen Baziak",), PLACES, gaz,
                        WORKED)
    assert kind == "UNPARSEABLE", key


def test_j20_the_place_after_the_adjectives_is_read(gaz):
    raw = " He was a German-born Polish immigrant who worked in Paris. He was a member of"
    assert read(raw, "Where did Eugen Baziak work?", ("Eugen Baziak",), PLACES, gaz,
                WORKED)[:2] == ("ANSWER", "ENTITY_Q90")


def test_j20_an_adjective_the_relation_names_as_its_object_is_still_read(gaz):
    religions = EntityLexicon({"ENTITY_Q47740": ("Muslim", ["Muslim", "musulman"]),
                               "ENTITY_Q432": ("Islam", ["Islam"])})
    r = read_answer("\nAverroes is a Muslim philosopher who lived in the 12th century.",
                    query="What is the religion of Averroes?", mentions=("Averroes",),
                    lexicon=religions, gazetteer=gaz,
                    slot=frozenset("what is the religion of".split()))
    assert (r.kind, r.key) == ("ANSWER", "ENTITY_Q47740")


LANGS = EntityLexicon({"ENTITY_Q652": ("Italian", ["Italian", "italien", "italiano",
                                                   "Italienisch"]),
                       "ENTITY_Q1860": ("English", ["English", "anglais"])})
WRITTEN = frozenset("what language is written in the".split())


@pytest.mark.parametrize("raw", [
    "\n\nExplanation:\n\nThe Italian language is a Romance language. It is spoken in Italy.",
    "\nThe Italian language is a Romance language, which means it is a language of Italy.",
])
def test_j21_a_sentence_defining_another_entity_is_no_answer(raw, gaz):
    r = read_answer(raw, query="What language is the Italian Wikipedia written in?",
                    mentions=("Italian Wikipedia",), lexicon=LANGS, gazetteer=gaz, slot=WRITTEN)
    assert r.kind == "UNPARSEABLE", r


def test_j21_a_definition_that_names_the_subject_is_read(gaz):
    raw = "\nEnglish is a language, and the Italian Wikipedia is written in Italian."
    r = read_answer(raw, query="What language is the Italian Wikipedia written in?",
                    mentions=("Italian Wikipedia",), lexicon=LANGS, gazetteer=gaz, slot=WRITTEN)
    assert r.kind == "ANSWER"


def test_j22_the_subject_named_by_its_class_noun_fills_the_slot(gaz):
    for raw in (" The band was founded in 1962 in Paris.\nWhere was the band's first gig?",
                " The band was founded in Paris."):
        assert read(raw, FOUNDED_Q, ("The Rolling Stones",), PLACES, gaz, FOUNDED)[:2] == \
            ("ANSWER", "ENTITY_Q90")


@pytest.mark.parametrize("raw", [
    "\nThe French Revolution was a period of political and social revolution in France.",
    "\nThe article is about the history of the French Revolution.\n",
])
def test_j23_a_longer_name_around_an_alias_is_another_entity(raw, gaz):
    r = read_answer(raw, query="What language is the Italian Wikipedia written in?",
                    mentions=("Italian Wikipedia",), lexicon=LANGS,
                    gazetteer=gaz, slot=WRITTEN)
    assert r.key != "ENTITY_Q150" and r.key not in LANGS.keys_of("french"), r


def test_j23_an_organisation_suffix_keeps_the_entity(gaz):
    r = read_answer(" Airbus A320 is manufactured by the Airbus Group.",
                    query="Which company manufactures Airbus A320?", mentions=("Airbus A320",),
                    lexicon=COMPANIES, gazetteer=gaz, slot=MAKER)
    assert (r.kind, r.key, r.span) == ("ANSWER", "ENTITY_Q67", "airbus group")


def test_j24_the_subject_surname_alone_is_the_subject(gaz):
    people = EntityLexicon({"ENTITY_Q191819": ("George Martin", ["George Martin"]),
                            "ENTITY_Q1": ("Parlophone", ["Parlophone"])})
    r = read_answer("\nThe answer is:\nMartin\nMartin's answer:", query="George Martin label",
                    mentions=("George Martin",), lexicon=people, gazetteer=gaz,
                    slot=frozenset("label signed to".split()))
    assert (r.kind, r.key) == ("ANSWER", "ENTITY_Q191819")


# -- release 8 (stop 34): inverted roles, qualifiers, bare years ----------------------------
CAPITAL = frozenset("what is the capital of".split())


@pytest.mark.parametrize("raw", [
    " Lyon Division is the capital of France.\nQuestion: What is the capital of Lyon Division?",
    "\nLyon Division is the capital of the France.\nAnswer:\nLyon Division is the capital",
])
def test_j25_the_subject_in_the_other_role_asserts_nothing(raw, gaz):
    r = read_answer(raw, query="What is the capital of Lyon Division?",
                    mentions=("Lyon Division",), lexicon=PLACES, gazetteer=gaz, slot=CAPITAL)
    assert r.kind == "UNPARSEABLE", r


def test_j25_the_subject_as_its_own_capital_is_still_the_subject(gaz):
    r = read_answer(" Lyon Division is the capital of Lyon Division.",
                    query="What is the capital of Lyon Division?",
                    mentions=("Lyon Division",), lexicon=PLACES, gazetteer=gaz, slot=CAPITAL)
    assert (r.kind, r.rule) == ("ANSWER", "J5")


def test_j25_a_parenthesis_after_the_subject_is_an_aside(gaz):
    raw = "\nThe headquarters of the Rolling Stones (RS) is located in the city of Paris, France."
    r = read_answer(raw, query="Where is the headquarters of the Rolling Stones?",
                    mentions=("Rolling Stones",), lexicon=PLACES, gazetteer=gaz,
                    slot=frozenset("where is the headquarters of located in".split()))
    assert (r.kind, r.key) == ("ANSWER", "ENTITY_Q90")


def test_j26_a_name_and_its_qualifier_are_one_answer(gaz):
    r = read_answer(" Paris, France.\n\nMarie was born in Paris.", query="Where was Anna born?",
                    mentions=("Anna",), lexicon=PLACES, gazetteer=gaz,
                    slot=frozenset("where was born".split()))
    assert (r.kind, r.key) == ("ANSWER", "ENTITY_Q90")
    # an alternative or a list of three stays MULTIPLE
    r = read_answer(" Paris or Berlin.", query="Where was Anna born?", mentions=("Anna",),
                    lexicon=PLACES, gazetteer=gaz, slot=frozenset("where was born".split()))
    assert r.kind == "MULTIPLE"


def test_j26_a_part_of_a_place_before_its_name_is_dropped(gaz):
    r = read_answer(" Lyon is located in the north of the Zorbian Sea.",
                    query="On which continent is Lyon located?", mentions=("Lyon",),
                    lexicon=PLACES, gazetteer=gaz, slot=LOCATED)
    assert (r.kind, r.key) == ("ANSWER", "SEMANTIC_zorbian sea")


@pytest.mark.parametrize("raw", [" 1970.\nWhere was she born?", " In 1997.\nQuestion: Who",
                                 "\n1946\nAnswer:\n1946", " 1990s\nThe show was"])
def test_j27_a_bare_year_answers_a_closed_question_with_the_wrong_type(raw, gaz):
    r = read(raw, FOUNDED_Q, ("The Rolling Stones",), PLACES, gaz, FOUNDED)
    assert r[0] == "ANSWER" and r[1].startswith("SEMANTIC_19") and r[2] == "J27", r


def test_j27_an_option_line_with_a_year_is_no_answer(gaz):
    assert read("\nA: 2018\nB: 2019\nC: 2020", FOUNDED_Q, ("The Rolling Stones",), PLACES,
                gaz, FOUNDED)[0] == "UNPARSEABLE"


def test_j12_a_timestamp_fills_an_originated_from_blank(gaz):
    r = read(" 2018-01-22 12:22:12\nThe answer is", "Marie Curie originated from",
             ("Marie Curie",), PLACES, gaz, frozenset("originated from".split()))
    assert r[:2] == ("ANSWER", "SEMANTIC_2018")


# -- release 9 (stop 35): tuned on every set read before ../fresh7, each case fails on release 8
COUNTRIES = EntityLexicon({
    "ENTITY_Q30": ("United States of America", ["United States of America", "Estados Unidos",
                                                "Vereinigte Staaten", "США", "美国"]),
    "ENTITY_Q27": ("Ireland", ["Ireland", "Republic of Ireland"]),
    "ENTITY_Q142": ("France", ["France"]),
})


def _assign(cluster, canonical=None, conf=1.0):
    from fks.judge._types import Assignment
    return Assignment(cluster, canonical or cluster, "ANSWER", conf, canonical or cluster)


def test_j28_a_short_name_joins_its_formal_name_in_the_group():
    from fks.judge import join_variants
    raw = [_assign("SEMANTIC_united states", "United States", 0.5),
           _assign("ENTITY_Q30", "United States of America"),
           _assign("ENTITY_Q142", "France")]
    out = join_variants(raw, COUNTRIES)
    assert [a.cluster_id for a in out] == ["ENTITY_Q30", "ENTITY_Q30", "ENTITY_Q142"]
    assert out[0].canonical_meaning == "United States of America"
    assert out[0].span == "United States" and out[0].confidence == 0.5  # as read


@pytest.mark.parametrize("cluster, present", [
    ("SEMANTIC_united states", ["ENTITY_Q142"]),  # the entity is not named in the group
    ("SEMANTIC_republic", ["ENTITY_Q27"]),  # one word: a class noun, not a short name
    ("SEMANTIC_united kingdom", ["ENTITY_Q30"]),  # not a cut of the formal name
])
def test_j28_leaves_other_strings_alone(cluster, present):
    from fks.judge import join_variants
    raw = [_assign(cluster, conf=0.5), *(_assign(k) for k in present)]
    assert [a.cluster_id for a in join_variants(raw, COUNTRIES)] == [cluster, *present]


def test_j28_an_ambiguous_alias_takes_the_entity_another_answer_names():
    from fks.judge import join_variants
    lex = EntityLexicon({"ENTITY_Q100": ("Boston", ["Boston"]),
                         "ENTITY_Q311975": ("Boston", ["Boston"])})
    raw = [_assign("SEMANTIC_boston", "Boston", 0.7), _assign("ENTITY_Q100", "Boston")]
    assert {a.cluster_id for a in join_variants(raw, lex)} == {"ENTITY_Q100"}
    # both homonyms named elsewhere in the group: nothing to choose by
    raw.append(_assign("ENTITY_Q311975", "Boston"))
    assert join_variants(raw, lex)[0].cluster_id == "SEMANTIC_boston"


def test_an_underscore_is_a_space_in_names(gaz):
    from fks.text import normalize as text_normalize
    assert text_normalize("Le_Point") == "le point"
    lex = EntityLexicon({"ENTITY_Q8678": ("Rio de Janeiro", ["Rio de Janeiro"])})
    r = read_answer("\nThe answer is: Rio_de_Janeiro\n", query="Where was Anna born?",
                    mentions=("Anna",), lexicon=lex, gazetteer=gaz)
    assert (r.kind, r.key) == ("ANSWER", "ENTITY_Q8678")
    # the scorer reads it too
    assert score_answer("The answer is: Rio_de_Janeiro", ["Rio de Janeiro"]).label == "correct"


@pytest.mark.parametrize("raw, key", [
    ("\nA. the city of Paris\nB. the city of Paris\nC. the city of Paris\nD.", "ENTITY_Q90"),
    ("\nA. France\nB. France\nC. France\nD. France\nE. Fra", "ENTITY_Q142"),
    ("\nA: The answer is: Italien\nB: The answer is: Italien", "ENTITY_Q38"),
    ("\nA. Италия\nB. Италия\nC. Италия", "ENTITY_Q38"),
])
def test_j29_an_option_list_of_one_repeated_name_is_that_answer(raw, key, gaz):
    r = read(raw, "Where was Anna born?", ("Anna",), PLACES, gaz, frozenset("born".split()))
    assert r == ("ANSWER", key, "J29")


@pytest.mark.parametrize("raw", [
    "\nA. a\nB. a\nC. a\nD. a\nAnswer:\n",  # a placeholder repeated
    "\nA. the French border\nB. the French border\nC. the French border",  # a description
    "\nA. the highest point in France\nB. the highest point in France",  # a long description
    "\nA. Paris\nB. Berlin\nC. Paris",  # a real choice, none picked
    "\nA. Annaberg\nB. Annaberg\nC. Annaberg",  # the subject's fragment (J24) offers nothing
])
def test_j29_leaves_placeholders_descriptions_and_choices_unparseable(raw, gaz):
    people = EntityLexicon({**{k: (PLACES.canonical(k), PLACES.aliases(k)) for k in
                               ("ENTITY_Q90", "ENTITY_Q64", "ENTITY_Q142")}})
    r = read_answer(raw, query="Where was Anna Annaberg born?", mentions=("Anna Annaberg",),
                    lexicon=people, gazetteer=gaz, slot=frozenset("where was born".split()))
    assert r.kind == "UNPARSEABLE", r


@pytest.mark.parametrize("raw, query, name, slot", [
    ("\nAverroes es seguidor de\nAnswer:\nAverroes es seguidor de\nAnswer:",
     "Averroes es seguidor de", "Averroes", "seguidor de religion"),
    ("\nMaria Skłodowska starb in\nAnswer:\nMaria Skłodowska starb in\nAnswer:",
     "Maria Skłodowska starb in", "Maria Skłodowska", "starb in died"),
    ("\nThe answer is:\nCadillac CTS-V es desarrollado por\n\nThe answer",
     "Cadillac CTS-V es desarrollado por", "Cadillac CTS-V", "desarrollado por developed"),
    ("\nМаргарет Тэтчер умерла в\nAnswer:\nМаргарет Тэтчер умерла", "Маргарет Тэтчер умерла в",
     "Маргарет Тэтчер", "умерла в died"),
])
def test_j30_the_prompt_repeated_in_its_own_language_is_no_answer(raw, query, name, slot):
    # the subject as the query's language writes it is no alias of the English mentions, but
    # the gazetteer knows it as an entity (release 8 read the echo as that entity)
    known = EntityLexicon({"ENTITY_Q1": (name, [name])})
    r = read(raw, query, ("Ibn Rushd",), PLACES, known, frozenset(slot.split()))
    assert r[0] == "UNPARSEABLE", r


def test_j30_leaves_the_subject_alone_and_a_completed_prompt(gaz):
    # the subject's name alone stays J5's subject answer; the prompt completed is read
    slot = frozenset("es desarrollado por developed".split())
    r = read("\nBMW M70\nAnswer:\nBMW M70", "BMW M70 es desarrollado por", ("BMW M70",),
             COMPANIES, gaz, slot)
    assert r[0] == "ANSWER" and r[2] == "J5"
    r = read("\nBMW M70 es desarrollado por Boeing.", "BMW M70 es desarrollado por",
             ("BMW M70",), COMPANIES, gaz, slot)
    assert r[:2] == ("ANSWER", "ENTITY_Q66")


def test_j11_a_part_of_a_place_after_the_year_is_dropped(gaz):
    r = read(" Anna Kovacs was born in 1980 in the town of Zorbury, in the county of North",
             "Where was Anna Kovacs born?", ("Anna Kovacs",), PLACES, gaz,
             frozenset("where was born".split()))
    assert r[:2] == ("ANSWER", "SEMANTIC_zorbury")


# -- release 10 (stop 35): tuned on every set before ../fresh8 (../fresh7 included) ---------
def test_a_regnal_number_ends_no_sentence_before_lower_case(gaz):
    # "Innozenz XI. erlag in" is one sentence, the prompt repeated (J30)
    known = EntityLexicon({"ENTITY_Q1": ("Innozenz XI.", ["Innozenz XI."])})
    r = read("\nInnozenz XI. erlag in\nAnswer:\nInnozenz XI. erlag in\n", "Innozenz XI. erlag in",
             ("Innocent XI",), PLACES, known, frozenset("erlag in died".split()))
    assert r[0] == "UNPARSEABLE", r
    # a Roman numeral at a real sentence end still ends it
    from fks.judge._reader import _sentences
    assert _sentences("He was the son of Henry VIII. He died in Paris.") == [
        "He was the son of Henry VIII.", "He died in Paris."]


@pytest.mark.parametrize("raw", ["\nThe 1990s.\nAnswer:\nThe 1990s.", " The 1940s.\nWhere did"])
def test_j27_a_bare_decade_after_an_article_is_a_wrong_type_answer(raw, gaz):
    r = read(raw, FOUNDED_Q, ("The Rolling Stones",), PLACES, gaz, FOUNDED)
    assert r[0] == "ANSWER" and r[1] in ("SEMANTIC_1990", "SEMANTIC_1940") and r[2] == "J27"


# -- release 11 (stop 36): tuned on every set before ../fresh9 (../fresh8 included) ---------
POSITIONS = EntityLexicon({
    "ENTITY_Q1": ("linebacker", ["linebacker", "Linebacker"]),
    "ENTITY_Q2": ("pitcher", ["pitcher", "lanzador", "Pitcher"]),
    "ENTITY_Q3": ("midfielder", ["midfielder", "milieu de terrain", "Mittelfeldspieler"]),
})
POSITION = frozenset("what position does play plays played as joue comme juega como spielt als"
                     .split())
POSITION_Q = "What position does Graham Barrow play?"


@pytest.mark.parametrize("raw", [" Right-handed.\nGraham Barrow is a right-handed catcher.",
                                 " Right wing.\n\nGraham Barrow is a right wing."])
def test_a_word_going_on_after_right_is_no_verdict(raw, gaz):
    # "Right-handed" is a (wrong-type) answer on its first line, not the verdict "right"
    r = read(raw, POSITION_Q, ("Graham Barrow",), POSITIONS, gaz, POSITION)
    assert r[0] == "ANSWER" and r[1] in ("SEMANTIC_right-handed", "SEMANTIC_right wing"), r


@pytest.mark.parametrize("line, verdict", [
    ("100% correct", True), ("Yes, it is", True), ("no", True), ("True.", True),
    ("Correct answer", True), ("Right-handed", False), ("Right wing", False),
    ("No Doubt", False), ("Wrong Way Records", False)])
def test_an_evaluative_line_is_a_placeholder_only_when_the_verdict_ends_it(line, verdict):
    from fks.score.extract import is_placeholder
    assert is_placeholder(line) is verdict


def test_the_scorer_reads_a_handedness_line_as_an_answer():
    r = score_answer(" Right-handed.\nHe is a pitcher.", ["pitcher"], query=POSITION_Q,
                     subject_aliases=["Graham Barrow"])
    assert r.label != "unparseable" and r.extracted_answer.lower().startswith("right"), r


@pytest.mark.parametrize("raw, year", [(" in the 1960s.\n\nHe was a musician.", "1960"),
                                       (" 1970's\nMarc Bolan is represented by EMI.", "1970"),
                                       ("\nIn the 1980s.", "1980")])
def test_j27_a_decade_after_in_the_or_with_an_apostrophe(raw, year, gaz):
    r = read(raw, FOUNDED_Q, ("The Rolling Stones",), PLACES, gaz, FOUNDED)
    assert r == ("ANSWER", f"SEMANTIC_{year}", "J27"), r


@pytest.mark.parametrize("raw, key", [
    (" In the north of Italy, in the Alps.\nAnswer:", "ENTITY_Q38"),
    (" In the south of the country, in the province of Paris.\nQuestion: ...", "ENTITY_Q90"),
    ("\nIn the northern part of the country, in the valley of the river Danube.", None),
    (" En el norte de Italia, en los Alpes.", "ENTITY_Q38"),
    (" Dans le nord de la France.", "ENTITY_Q142"),
])
def test_j31_a_line_of_place_phrases_answers_a_where_question(raw, key, gaz):
    r = read(raw, "In which country is Lake Como located?", ("Lake Como",), PLACES, gaz, LOCATED)
    # a phrase the older rules already read as naming the entity keeps their reading
    assert r[0] == "ANSWER" and r[2] in (("J31", "J6") if raw.startswith(" Dans") else ("J31",)), r
    if key is not None:
        assert r[1] == key
    else:
        assert r[1] == "ENTITY_Q1653" or "danube" in r[1].lower()


@pytest.mark.parametrize("raw", [
    " in the north of the country.\nThe territory is in the north.",
    " On the network that was used by the BBC.\nQuestion: ...",
    " in the studio of the famous conductor, who was a member of the Berlin Philharmonic.",
])
def test_j31_a_place_phrase_that_names_nothing_or_describes_is_no_answer(raw, gaz):
    r = read(raw, "In which country is Lake Como located?", ("Lake Como",), PLACES, gaz, LOCATED)
    assert r[2] != "J31" and (r[0] == "UNPARSEABLE" or r[1] != "SEMANTIC_country"), r


@pytest.mark.parametrize("raw, key", [
    (" He plays as a receiver.\nWhat is the difference between a receiver and a quarterback?",
     "SEMANTIC_receiver"),
    ("\nGraham Barrow is a linebacker. He plays for Georgia.", "ENTITY_Q1"),
    (" Graham Barrow plays as a pitcher for the Yankees.", "ENTITY_Q2"),
])
def test_j32_the_noun_after_the_predicate_or_a_known_position_is_the_answer(raw, key, gaz):
    r = read(raw, POSITION_Q, ("Graham Barrow",), POSITIONS, gaz, POSITION)
    assert r[:2] == ("ANSWER", key) and r[2] in ("J32", "J11"), r


@pytest.mark.parametrize("raw", [" Graham Barrow is a professional football player.",
                                 " Graham Barrow is a 20-year-old American actor.",
                                 " He is a member of the Royal Society."])
def test_j32_a_description_with_no_known_position_asserts_nothing(raw, gaz):
    assert read(raw, POSITION_Q, ("Graham Barrow",), POSITIONS, gaz, POSITION)[0] == "UNPARSEABLE"


def test_j32_a_description_is_still_no_answer_where_objects_are_names(gaz):
    r = read(" Lake Como is a lake in the north of Italy.", "In which country is Lake Como "
             "located?", ("Lake Como",), PLACES, gaz, LOCATED)
    assert r[2] != "J32"


def test_a_two_letter_abbreviation_in_capitals_fills_the_slot(gaz):
    r = read(" The headquarters of Delage is in the UK.\nWhat is the address?",
             "Where is the headquarters of Delage?", ("Delage",), PLACES, gaz,
             frozenset("where is the headquarters of located in".split()))
    assert r[0] == "ANSWER" and r[1] in ("SEMANTIC_uk", "ENTITY_Q145"), r


def test_j29_articles_do_not_count_against_a_repeated_option_name(gaz):
    raw = ("\nA. the British East India Company\nB. the British East India Company\n"
           "C. the British East India Company\nD. the British")
    r = read(raw, "Where did Robert Clive work?", ("Robert Clive",), PLACES, gaz,
             frozenset("where did work worked in".split()))
    assert r[0] == "ANSWER" and r[2] == "J29", r


@pytest.mark.parametrize("raw, key", [
    ("\nLake Como is a small town in the north of Italy. It is located in the middle of",
     "ENTITY_Q38"),
    ("\nLake Como is a tropical island in the north of France.", "ENTITY_Q142"),
    ("\nLake Como est une ville en Italie.", None),  # French: the class phrase's article "une"
])
def test_j33_a_class_in_a_place_answers_where_it_is_located(raw, key, gaz):
    r = read(raw, "In which country is Lake Como located?", ("Lake Como",), PLACES, gaz, LOCATED)
    if key is None:
        assert r[0] == "ANSWER", r
    else:
        assert r[:2] == ("ANSWER", key) and r[2] == "J33", r


@pytest.mark.parametrize("raw", [
    "\nLake Como is a small town in the north of the country. It is located in the",
    "\nLake Como is a type of protein found in the cells of the human body.",
    "\nLake Como is a small town in the\nLake Como, located in the\nLake Como, located",
    "\nLake Como is a major media company in the United",  # cut by the budget
])
def test_j33_a_class_phrase_naming_no_place_is_no_answer(raw, gaz):
    r = read(raw, "In which country is Lake Como located?", ("Lake Como",), PLACES, gaz, LOCATED)
    assert r[2] != "J33", r


def test_j33_only_for_a_where_located_slot(gaz):
    # asked the capital, "is a city in ..." is read by the older rules as before, not by J33
    r = read("\nLake Como is a city in the north of Italy.", "What is the capital of Lake Como?",
             ("Lake Como",), PLACES, gaz, frozenset("what is the capital of".split()))
    assert r[2] != "J33", r


@pytest.mark.parametrize("raw, subject, query, slot, key", [
    ("\n\nDNB Bank is a bank that is based in Paris.\n\nAnswer:", ("DNB Bank",),
     "Where is the headquarters of DNB Bank?",
     frozenset("where is the headquarters of based located in".split()), "ENTITY_Q90"),
    ("\nGraham Barrow is a Dutch professional footballer who plays as a midfielder for Utrecht.",
     ("Graham Barrow",), POSITION_Q, POSITION, "ENTITY_Q3"),
])
def test_j34_a_relative_clause_restating_the_predicate_fills_the_slot(raw, subject, query, slot,
                                                                     key, gaz):
    lexicon = POSITIONS if slot is POSITION else PLACES
    r = read(raw, query, subject, lexicon, gaz, slot)
    # a known position in the phrase is J32's already
    assert r[:2] == ("ANSWER", key) and r[2] in (("J34", "J32") if slot is POSITION else ("J34",))


def test_j34_a_relative_clause_on_another_predicate_is_no_answer(gaz):
    r = read("\nDNB Bank is a bank that was sold in 1990 to Paris investors.",
             "Where is the headquarters of DNB Bank?", ("DNB Bank",), PLACES, gaz,
             frozenset("where is the headquarters of based located in".split()))
    assert r[2] != "J34", r


@pytest.mark.parametrize("raw, key", [
    (" Lake Como is located in the Lombardy region.\nAnswer:", "SEMANTIC_lombardy"),
    (" Lake Como is located in the Lombardy Region.\nAnswer:", "SEMANTIC_lombardy region"),
])
def test_a_lower_case_class_noun_after_a_name_in_the_slot_qualifies_it(raw, key, gaz):
    r = read(raw, "In which country is Lake Como located?", ("Lake Como",), PLACES,
             EntityLexicon({}), LOCATED)
    assert r[:2] == ("ANSWER", key), r


# -- release 12 (stop 36): tuned on every set before ../fresh10 (../fresh9 included) --------
@pytest.mark.parametrize("raw, span", [
    (" Lake Como is located in the Horn of Italy.\nQuestion: ...", "Horn of Italy"),
    ("\nThe 100th Judicial District of Italy.\nAnswer:", "100th Judicial District of Italy"),
])
def test_a_capitalised_name_before_of_is_a_longer_name(raw, span, gaz):
    r = read_answer(raw, query="In which country is Lake Como located?", mentions=("Lake Como",),
                    lexicon=PLACES, gazetteer=EntityLexicon({}), slot=LOCATED)
    assert r.kind == "ANSWER" and r.span == span and r.key != "ENTITY_Q38", r


def test_a_part_of_phrase_in_lower_case_still_reads_the_place(gaz):
    r = read(" Lake Como is located in the north of Italy.", "In which country is Lake Como "
             "located?", ("Lake Como",), PLACES, gaz, LOCATED)
    assert r[:2] == ("ANSWER", "ENTITY_Q38"), r


@pytest.mark.parametrize("raw", [" Leonardo was born in 1450 in the town of Vinci, in the "
                                 "province of Florence.",
                                 " Leonardo was born in 1450 in the city of Vinci, Italy."])
def test_r_qualifier_an_unknown_place_before_a_known_one_is_the_answer(raw, gaz):
    known = EntityLexicon({"ENTITY_Q2044": ("Florence", ["Florence"]),
                           "ENTITY_Q38": ("Italy", ["Italy"])})
    r = read(raw, "Where was Leonardo born?", ("Leonardo",), EntityLexicon({}), known,
             frozenset("where was born in".split()))
    assert r[0] == "ANSWER" and r[1] == "SEMANTIC_vinci", r


def test_r_context_the_distractor_entity_as_a_qualified_bare_line_is_an_answer(gaz):
    places = EntityLexicon({"ENTITY_Q27": ("Ireland", ["Ireland"])})
    known = EntityLexicon({"ENTITY_Q45868": ("Alba County", ["Alba County"]),
                           "ENTITY_Q27": ("Ireland", ["Ireland"])})
    query = ("Alba County is located in Leinster. In which administrative territory is "
             "Kuppalli located?")
    r = read(" Alba County, Ireland\nAlba County is located in Leinster.", query,
             ("Kuppalli",), places, known, LOCATED)
    assert r[:2] == ("ANSWER", "ENTITY_Q45868"), r


def test_the_subject_name_with_a_trade_word_is_another_entity(gaz):
    bands = EntityLexicon({"ENTITY_Q1": ("Decca Records", ["Decca Records", "Decca"])})
    known = EntityLexicon({"ENTITY_Q483802": ("Nickelback", ["Nickelback"])})
    slot = frozenset("which record label is signed to the for".split())
    r = read('\nThe record label for Nickelback is "Nickelback Records".\nAnswer:',
             "Which record label is Nickelback signed to?", ("Nickelback",), bands, known, slot)
    assert r[0] == "ANSWER" and r[1] == "SEMANTIC_nickelback records", r
    # the label's own trade word on a label's name still names that label
    r = read("\nNickelback is signed to Decca Records.", "Which record label is Nickelback "
             "signed to?", ("Nickelback",), bands, known, slot)
    assert r[:2] == ("ANSWER", "ENTITY_Q1"), r


def test_a_full_stop_inside_the_subject_name_ends_no_sentence(gaz):
    r = read("\nThe country of origin of Wz. 35 anti-tank rifle is Italy.\n",
             "What is the country of origin of Wz. 35 anti-tank rifle?",
             ("Wz. 35 anti-tank rifle",), PLACES, gaz,
             frozenset("what is the country of origin".split()))
    assert r[:2] == ("ANSWER", "ENTITY_Q38"), r


def test_j33_the_class_phrase_may_hold_the_slot_word(gaz):
    r = read(" \nLake Como is a lake located in the north of Italy.",
             "In which country is Lake Como located?", ("Lake Como",), PLACES, gaz, LOCATED)
    assert r[:2] == ("ANSWER", "ENTITY_Q38") and r[2] == "J33", r


def test_j30_a_title_holding_a_template_word_is_the_subject_not_an_echo(gaz):
    # the subject "My Name Is Earl" repeated alone is the subject's answer (J5); the slot's
    # "name" is a word of the title here, not of the predicate
    slot = frozenset("my name is on which network did originally air debuted name only"
                     .split())
    r = read("\nMy name is Earl.\nMy name is Earl.\nMy name is Earl.", "My Name Is Earl debuted on",
             ("My Name Is Earl",), EntityLexicon({}), EntityLexicon({
                 "ENTITY_Q34659": ("My Name Is Earl", ["My Name Is Earl"])}), slot)
    assert r[0] == "ANSWER", r


# -- release 13 (stop 37): tuned on every set before ../fresh12 (../fresh11 included) --------
WORKED = frozenset("where did work worked was employed in".split())


def test_j18_a_wrapped_line_may_continue_with_a_quotation(gaz):
    # the second line continues "Kafka's idea of the": a quoted phrase is no bare answer line
    raw = "\nKafka's idea of the\n\"absurd hero\"\nwas a literary theory that\nexplained"
    kind, key, _ = read(raw, "Where did Franz Kafka die?", ("Franz Kafka",), PLACES, gaz, DIED)
    assert kind == "UNPARSEABLE", key
    # a quoted bare answer after a finished line is still an answer
    kind, key, _ = read('\nThe answer is:\n"Paris"', "Where did Franz Kafka die?",
                        ("Franz Kafka",), PLACES, gaz, DIED)
    assert (kind, key) == ("ANSWER", "ENTITY_Q90")


@pytest.mark.parametrize("query, slot, expected", [
    ("Where did Franz Kafka die?", DIED, "UNPARSEABLE"),  # birth is another predicate (J14)
    ("Where was Franz Kafka born?", BORN, "ANSWER"),
])
def test_j14_a_qualified_place_of_another_predicate_is_no_answer(query, slot, expected):
    known = EntityLexicon({"ENTITY_Q1": ("Bohemia", ["Bohemia"])})
    r = read_answer(" He was born in 1883 in the town of Kolin, Bohemia. He was a writer.",
                    query=query, mentions=("Franz Kafka",), lexicon=EntityLexicon({}),
                    gazetteer=known, slot=slot,
                    foreign=frozenset({"born"}) if slot is DIED else frozenset({"died"}))
    assert r.kind == expected, r
    if expected == "ANSWER":
        assert r.key == "SEMANTIC_kolin", r


@pytest.mark.parametrize("raw, subject, query, slot, key", [
    ("\nKafka died in Paris.\nAnswer:", ("Franz Kafka",), "Where did Franz Kafka die?", DIED,
     "ENTITY_Q90"),
    (" London is the capital of Italy.\nAnswer: London", ("Greater London",),
     "Greater London is the capital of which country?",
     frozenset("is the capital of which country".split()), "ENTITY_Q38"),
])
def test_j24_the_subject_by_the_last_words_of_its_name_restates_the_predicate(raw, subject,
                                                                              query, slot, key,
                                                                              gaz):
    assert read(raw, query, subject, PLACES, gaz, slot)[:2] == ("ANSWER", key)


@pytest.mark.parametrize("sentence, found", [
    ("Kafka died in Paris.", True),
    ("kafka died in Paris.", False),  # no capital: no name
    ("Franz died in Paris.", False),  # a first name is no short name of the subject
    ("Kafka wrote about Paris.", False),  # no slot word after it: no restated predicate
])
def test_j24_a_short_name_is_the_capitalised_last_words_then_a_slot_word(sentence, found, gaz):
    from fks.judge._reader import _Context, _subject_spans

    ctx = _Context("Where did Franz Kafka die?", ("Franz Kafka",), PLACES, gaz, False,
                   slot=frozenset(_tokens(normalize(" ".join(sorted(DIED))))))
    assert bool(_subject_spans(normalize(sentence), ctx, sentence)) is found


@pytest.mark.parametrize("sentence, key", [
    ("The country is Italy.", "ENTITY_Q38"),
    ("The country was Zembla.", "SEMANTIC_zembla"),
    ("The capital is Paris.", None),  # "capital" is no word of this question
    ("The country is large.", None),  # no name fills it
])
def test_j35_the_question_noun_then_a_copula_names_the_filler(sentence, key, gaz):
    from fks.judge._reader import _Context, _read_slot

    ctx = _Context("Of which country is Ana Vidal a citizen?", ("Ana Vidal",), PLACES, gaz,
                   False, slot=frozenset(_tokens(normalize(" ".join(sorted(CITIZEN))))))
    r = _read_slot(sentence, ctx)
    assert (r.key if r is not None else None) == key, r


def test_j14_a_founding_slot_reads_a_birth_verb_as_its_own():
    from fks.judge._run import with_synonyms

    slots = {("location_of_formation", "object"): FOUNDED,
             ("place_of_death", "object"): DIED}
    out = with_synonyms(slots)
    assert "born" in out[("location_of_formation", "object")]
    assert "born" not in out[("place_of_death", "object")]
    r = read_answer(" The Rolling Stones were born in 1962 in Paris.",
                    query="Where was The Rolling Stones founded?",
                    mentions=("The Rolling Stones",), lexicon=PLACES,
                    gazetteer=EntityLexicon({}),
                    slot=frozenset(_tokens(normalize(" ".join(sorted(
                        out[("location_of_formation", "object")]))))))
    assert (r.kind, r.key) == ("ANSWER", "ENTITY_Q90"), r


def test_a_formal_name_cut_before_of_names_the_entity_in_a_longer_filler(gaz):
    assert [k for *_, k in gaz.find_all("united states", normalized=True)] == ["united states"]
    assert gaz.keys_of("united states") == gaz.keys_of("united states of america")
    from fks.judge._lexicon import _add_short_names

    table = {"ENTITY_Q1": ("Republic of Zembla", ["Republic of Zembla"]),
             "ENTITY_Q2": ("Grand Duchy of Zembla", ["Grand Duchy of Zembla"]),
             "ENTITY_Q3": ("Grand Duchy of Ruritania", ["Grand Duchy of Ruritania"])}
    _add_short_names(table)
    # one word before "of" is a class noun; a cut two entities share names neither
    assert [a for _, aliases in table.values() for a in aliases] == [
        "Republic of Zembla", "Grand Duchy of Zembla", "Grand Duchy of Ruritania"]
    table = {"ENTITY_Q9": ("United States of America", ["United States of America"])}
    _add_short_names(table)
    assert table["ENTITY_Q9"][1] == ["United States of America", "United States"]
    kind, key, _ = read(" He worked in the United States in the 1920s.",
                        "Where did Ana Vidal work?", ("Ana Vidal",), PLACES, gaz, WORKED)
    assert (kind, key) == ("ANSWER", "ENTITY_Q30")


# -- release 14 (stop 37): tuned on every set before ../fresh13 (../fresh12 included) --------
@pytest.mark.parametrize("raw", [
    "\nThe answer is: The 2018-03-14 09:41",
    "\nThe answer is:\nThe 2018-03-14T09:41",
    " The answer to this question is: 2018-03-14 09:41",
])
def test_j12_a_framed_or_repeated_timestamp_in_an_open_slot_is_its_year(raw, gaz):
    kind, key, rule = read(raw, "The Rolling Stones was created in", ("The Rolling Stones",),
                           PLACES, gaz, FOUNDED)
    assert (kind, key, rule) == ("ANSWER", "SEMANTIC_2018", "J12")


def test_j12_a_framed_timestamp_outside_an_open_slot_is_no_year(gaz):
    # "signed to" leaves no place or time open: the guide's §8 digit placeholder
    kind, _, _ = read("\nThe answer is: The 2018-03-14 09:41", "Which record label is "
                      "Ana Vidal signed to?", ("Ana Vidal",), EntityLexicon({}), gaz,
                      frozenset("which record label is signed to".split()))
    assert kind == "UNPARSEABLE"


@pytest.mark.parametrize("raw, subject, key", [
    ("\nThe capital of Italy is Rome.\nAnswer:", ("Rome",), "ENTITY_Q38"),
    # the subject by the last words of its name
    ("\nThe capital city of France was Paris.", ("City of Paris",), "ENTITY_Q142"),
])
def test_j37_the_predicate_restated_with_the_subject_last_names_the_filler(raw, subject, key,
                                                                           gaz):
    query = f"{subject[0]} is the capital of which country?"
    slot = frozenset("is the capital city of which country".split())
    assert read(raw, query, subject, PLACES, gaz, slot)[:2] == ("ANSWER", key)


def test_j37_not_where_the_query_asks_the_subject_own_capital(gaz):
    # asked the capital OF Italy, "The capital of France is Italy" does not restate it
    from fks.judge._reader import _Context, _read_slot

    ctx = _Context("What is the capital of Italy?", ("Italy",), PLACES, gaz, False,
                   slot=frozenset("what is the capital of".split()))
    assert _read_slot("The capital of France is Italy.", ctx) is None


def test_a_pronoun_alone_cut_by_the_budget_is_no_answer(gaz):
    raw = " Ana Vidal was a painter who lived in a small house by the sea. She"
    kind, key, _ = read(raw, "Where was Ana Vidal born?", ("Ana Vidal",), PLACES, gaz,
                        frozenset("where was born in".split()))
    assert kind == "UNPARSEABLE", key


# -- release 15 (stop 37): tuned on every set before ../fresh15 (../fresh14 included) --------
@pytest.mark.parametrize("raw, subject, key", [
    ("\nThe capital of Italy is Rome.\nAnswer:", ("Kingdom of Italy",), "ENTITY_Q220"),
    # the English formal name's inner name, read in another language's sentence
    ("\nLa capital de Italy es Roma.", ("Reino de Italia", "Kingdom of Italy"), "ENTITY_Q220"),
])
def test_j24_the_name_inside_a_formal_name_is_the_subject(raw, subject, key, gaz):
    places = EntityLexicon({"ENTITY_Q220": ("Rome", ["Rome", "Roma"])})
    slot = frozenset("what is the capital of capital de la es".split())
    assert read(raw, f"What is the capital of {subject[-1]}?", subject, places, gaz,
                slot)[:2] == ("ANSWER", key)


def test_j24_the_inner_name_needs_a_capital(gaz):
    from fks.judge._reader import _Context, _subject_spans

    ctx = _Context("What is the capital of Kingdom of Italy?", ("Kingdom of Italy",), PLACES,
                   gaz, False, slot=frozenset("what is the capital of".split()))
    assert ctx.of_tails == ("italy",)
    assert _subject_spans(normalize("The capital of Italy is Rome."), ctx,
                          "The capital of Italy is Rome.")
    assert not _subject_spans(normalize("the capital of italy is rome."), ctx,
                              "the capital of italy is rome.")


# -- release 16 (stop 38): tuned on every set before ../fresh16 (../fresh15 included) --------
BORN_IN = frozenset("where was born in".split())


@pytest.mark.parametrize("raw, query, slot, key", [
    (" I was born in Paris, France. I was born in Paris.", "Where was Ana Vidal born?", BORN_IN,
     "ENTITY_Q90"),
    ("\nI am a citizen of France.\nAnswer:\nI am a citizen of France.",
     "Ana Vidal is a citizen of which country?", CITIZEN, "ENTITY_Q142"),
    (" I'm a citizen of Italy.", "Ana Vidal is a citizen of which country?", CITIZEN,
     "ENTITY_Q38"),
    ("\nJe suis citoyen de France.", "Ana Vidal est citoyen de", CITIZEN, "ENTITY_Q142"),
])
def test_j38_the_model_speaking_as_the_subject_restates_the_predicate(raw, query, slot, key,
                                                                      gaz):
    assert read(raw, query, ("Ana Vidal",), PLACES, gaz, slot)[:2] == ("ANSWER", key)


@pytest.mark.parametrize("sentence, speaks", [
    ("I was born in Paris, France.", True),
    ("I'm a citizen of France.", False),  # "citizen" is no word of a birth question
    # first person, but no word of the asked predicate: a description of the speaker
    ("I am a 15 year old girl from Paris.", False),
    ("I think it is a good idea to live in Paris.", False),
])
def test_j38_only_a_first_person_sentence_restating_the_predicate(sentence, speaks, gaz):
    from fks.judge._reader import _Context, _first_person

    ctx = _Context("Where was Ana Vidal born?", ("Ana Vidal",), PLACES, gaz, False,
                   slot=BORN_IN)
    assert (_first_person(normalize(sentence), ctx) is not None) == speaks


def test_j38_a_title_opening_with_i_is_still_the_title(gaz):
    # the subject's own title repeated is J5's subject answer, not the speaker
    subject = ("I Saw Her Standing There",)
    kind, key, rule = read("\nI Saw Her Standing There\nI Saw Her Standing There",
                           "In which language is I Saw Her Standing There written?", subject,
                           EntityLexicon({}), gaz,
                           frozenset("in which language is written".split()))
    assert (kind, key, rule) == ("ANSWER", "SEMANTIC_i saw her standing there", "J5")


@pytest.mark.parametrize("raw", [
    " 1. France\nAnswer: 2. Italy\nAnswer: 3. Germany\nAnswer: 4.",
    "\n1. Paris\n2. Berlin\n3. Paris\n4. Berlin\n",
    "\n1) Париж\n2) Берлин\n3) Пар",
])
def test_j39_a_numbered_list_of_different_entities_with_no_pick_is_no_answer(raw, gaz):
    kind, key, rule = read(raw, "Where was Ana Vidal born?", ("Ana Vidal",), PLACES, gaz, BORN_IN)
    assert (kind, rule) == ("UNPARSEABLE", "J39"), key


@pytest.mark.parametrize("raw, key", [
    # one repeated entity (the budget cut the last item short)
    ("\n1. Paris\n2. Paris\n3. Par", "ENTITY_Q90"),
    # the second item holds the first: the same entity named twice
    ("\n1. Ville de Paris\n2. Paris\n3. Paris\n", "ENTITY_Q90"),
    # a list of sentences is read sentence by sentence
    ("\n1. Ana Vidal was born in Paris in 1950.\n2. She was the daughter of a painter.\n",
     "ENTITY_Q90"),
])
def test_j39_a_numbered_list_of_one_entity_or_of_sentences_is_read(raw, key, gaz):
    kind, got, _ = read(raw, "Where was Ana Vidal born?", ("Ana Vidal",), PLACES, gaz, BORN_IN)
    assert (kind, got) == ("ANSWER", key)


@pytest.mark.parametrize("raw, key", [
    (" Born in 1960 in Paris, France.\n\nAna Vidal is a painter.", "ENTITY_Q90"),
    (" Born in 1946, in the city of Berlin.", "ENTITY_Q64"),
])
def test_j40_a_sentence_opening_with_the_predicate_leaves_the_subject_implied(raw, key, gaz):
    assert read(raw, "Where was Ana Vidal born?", ("Ana Vidal",), PLACES, gaz,
                BORN_IN)[:2] == ("ANSWER", key)


def test_j40_only_a_word_of_the_asked_predicate(gaz):
    # "Located" is no word of a birth question's predicate: J40 does not read the sentence
    from fks.judge._reader import _Context, _subject_spans

    ctx = _Context("Where was Ana Vidal born?", ("Ana Vidal",), PLACES, gaz, False, slot=BORN_IN)
    sentence = "Located in Paris, France."
    assert not _subject_spans(normalize(sentence), ctx, sentence)
    sentence = "Born in Paris, France."
    assert _subject_spans(normalize(sentence), ctx, sentence) == [(0, 0)]


@pytest.mark.parametrize("raw, key", [
    ("\nAbuja is the capital of the Republic of France.", "ENTITY_Q142"),
    ("\nAbuja is the capital of the Kingdom of Italy.", "ENTITY_Q38"),
])
def test_j23_a_state_formal_name_is_the_state(raw, key, gaz):
    slot = frozenset("is the capital of which country".split())
    kind, got, _ = read(raw, "Abuja is the capital of which country?", ("Abuja",), PLACES,
                        gaz, slot)
    assert (kind, got) == ("ANSWER", key)


def test_a_month_inside_a_date_is_no_place(gaz):
    from fks.judge._reader import _first_named

    # "March" (a town the gazetteer knows) is a month here; the country after it is named
    sentence = "Ana Vidal was born on 19th March 1980 in the United States."
    text = normalize("on 19th March 1980 in the United States")
    pos, key, _ = _first_named(text, sentence, gaz)
    assert text[pos:].startswith("united states"), key
    # a month before a number is skipped too ("March 19, 1980"); a lone town name is kept
    sentence = "Ana Vidal was born on March 19, 1980 in the United States."
    text = normalize("on March 19, 1980 in the United States")
    pos, key, _ = _first_named(text, sentence, gaz)
    assert text[pos:].startswith("united states"), key
    assert _first_named(normalize("in March"), "in March", gaz)[1] == "ENTITY_Q2569076"


# -- release 17 (stop 38): tuned on every set before ../fresh17 (../fresh16 included) --------
@pytest.mark.parametrize("raw, query, key, slot_key, template", [
    ("\nThe Polish Press Agency was established in 1996.\nThe Agency is a non-profit.",
     "Where was The Polish Press Agency founded?", "SEMANTIC_1996",
     ("location_of_formation", "object"), FOUNDED),
    ("\nLa Agencia fue establecida en Paris.", "¿Dónde fue fundada La Agencia?", "ENTITY_Q90",
     ("location_of_formation", "object"), FOUNDED),
    (" I was working in Berlin. Where did Ana Vidal work?", "Where did Ana Vidal work?",
     "ENTITY_Q64", ("work_location", "object"), WORKED),
])
def test_a_predicate_synonym_restates_the_slot(raw, query, key, slot_key, template):
    from fks.judge._run import with_synonyms

    slot = with_synonyms({slot_key: template})[slot_key]
    r = read_answer(raw, query=query, mentions=("The Polish Press Agency", "La Agencia",
                                                "Ana Vidal"),
                    lexicon=EntityLexicon({}), gazetteer=PLACES,  # a place of no relation
                    slot=frozenset(_tokens(normalize(" ".join(sorted(slot))))))
    assert (r.kind, r.key) == ("ANSWER", key), r


def test_synonyms_are_written_as_normalised_text():
    from fks.judge._run import _SYNONYMS

    # a word with an accent could never match a normalised sentence
    for words in _SYNONYMS.values():
        assert all(normalize(w) == w for w in words), words


# -- release 18 (stop 38, after the ../fresh18 read; dev only) ------------------------------
def test_formal_prefixes_are_written_as_normalised_text():
    from fks.judge._reader import FORMAL_PREFIXES

    assert all(normalize(w) == w for w in FORMAL_PREFIXES)


@pytest.mark.parametrize("raw, key", [
    ("\nAbuja est la capitale de la République de France.", "ENTITY_Q142"),
    ("\nAbuja ist die Hauptstadt vom Königreich Italien.", "ENTITY_Q38"),
])
def test_j23_a_formal_name_in_another_language(raw, key, gaz):
    slot = frozenset("is the capital of which country est la capitale de quel pays ist die "
                     "hauptstadt welchen landes".split())
    kind, got, _ = read(raw, "Abuja is the capital of which country?", ("Abuja",), PLACES,
                        gaz, slot)
    assert (kind, got) == ("ANSWER", key)


# -- release 19 (stop 39, guide §9; tuned on every set up to ../fresh18) --------------------
def _religions() -> EntityLexicon:
    from fks.judge._lexicon import _fold_religions

    # a religion slot as the benchmark builds it: mParaRel's objects include the adherent
    # entity "Muslim" beside "Islam"
    table = {"ENTITY_Q432": ("Islam", ["Islam", "islam", "ислам", "伊斯兰教"]),
             "ENTITY_Q47740": ("Muslim", ["Muslim", "musulman", "musulmán", "мусульманин"]),
             "ENTITY_Q5043": ("Christianity", ["Christianity", "christianisme"])}
    _fold_religions(table)
    return EntityLexicon(table)


RELIGION = frozenset("which religion is affiliated with religion de quelle religion est "
                     "welcher religion gehört an".split())


@pytest.mark.parametrize("raw, key", [
    (" Ana Vidal is a Muslim scholar who lived in Cordoba.", "ENTITY_Q432"),
    (" Ana Vidal was a Christian.", "ENTITY_Q5043"),
    (" Ana Vidal is a Jewish rabbi who was born in 1934.", "ENTITY_Q9268"),
    ("\nAna Vidal est un philosophe musulman.", "ENTITY_Q432"),
    ("\nAna Vidal era un filósofo judío.", "ENTITY_Q9268"),
    ("\nAna Vidal war Jüdin.", "ENTITY_Q9268"),
    ("\nАна Видаль был английским католиком.", "ENTITY_Q1841"),
    ("\n穆斯林", "ENTITY_Q432"),
    (" Islam", "ENTITY_Q432"),  # the religion's own name and its adherent word: one cluster
])
def test_j41_an_adherent_word_names_its_religion(raw, key, gaz):
    kind, got, _ = read(raw, "Which religion is Ana Vidal affiliated with?",
                        ("Ana Vidal", "Ана Видаль"), _religions(), gaz, RELIGION)
    assert (kind, got) == ("ANSWER", key)


@pytest.mark.parametrize("raw", [" Ana Vidal is a member of the Roman Catholic Church.",
                                 " Ana Vidal is a member of the Catholic Church."])
def test_j41_a_church_is_one_entity_of_its_own(raw, gaz):
    # guide §9: "Roman" or not, the church; never the adherent word "Catholic" inside it
    kind, got, _ = read(raw, "Which religion is Ana Vidal affiliated with?", ("Ana Vidal",),
                        _religions(), gaz, RELIGION)
    assert (kind, got) == ("ANSWER", "ENTITY_Q9592")


def test_j41_folds_only_a_religion_slot(tmp_path):
    from fks.judge import build_lexicons
    from fks.judge._lexicon import religion_key, religion_words

    facts, queries = tiny_benchmark_rows()
    lex = build_lexicons(load_benchmark(write_benchmark(tmp_path / "a", facts, queries)))
    # no relation of the tiny benchmark asks a religion: no lexicon learns adherent words
    assert all(not v.keys_of("muslim") for v in lex.values())
    # one whose objects are religions does, and its adherent entity joins its religion
    rel = facts[0]["relation"]["relation_id"]
    for f in facts:
        if f["relation"]["relation_id"] == rel:
            f["answer_type"] = "religion"
    facts[0]["object"] = {"canonical": "Muslim", "entity_id": "Q47740", "aliases": ["Muslim"]}
    lex = build_lexicons(load_benchmark(write_benchmark(tmp_path / "b", facts, queries)))
    assert lex[(rel, "object")].keys_of("muslim") == {"ENTITY_Q432"}
    assert lex[(rel, "object")].keys_of("roman catholic church") == {"ENTITY_Q9592"}
    assert not lex[(rel, "subject")].keys_of("muslim")
    assert religion_key("ENTITY_Q106039") == "ENTITY_Q5043"
    assert religion_key("ENTITY_Q90") == "ENTITY_Q90" and religion_words("ENTITY_Q90") == ()
    assert religion_words("ENTITY_Q47740")[0] == "Islam"  # the gold's own name grounds it


def test_j41_adherent_words_are_distinct_and_name_one_religion():
    from fks.judge._lexicon import CHURCHES, RELIGION_ADHERENTS

    seen: dict[str, str] = {}
    for qid, (_, words) in (RELIGION_ADHERENTS | CHURCHES).items():
        assert len(set(words)) == len(words), qid
        for w in words:
            assert seen.setdefault(normalize(w), qid) == qid, w


def _asked_death_place(raw: str, gaz: EntityLexicon):
    """Read ``raw`` asked where Ana Vidal died (``born`` is another relation's predicate)."""
    return read_answer(raw, query="Where did Ana Vidal die?", mentions=("Ana Vidal",),
                       lexicon=PLACES, gazetteer=gaz, slot=DIED, foreign=frozenset({"born"}))


@pytest.mark.parametrize("raw", [
    " He was born in 1891 in the town of Vitoria, Spain. He was a priest.",
    " She was born in 1754 in the town of Saint-Germain, France.",
])
def test_j14_a_qualifier_after_a_comma_fills_the_predicate_before_it(raw, gaz):
    # guide §9 ("only the asked predicate fills the slot"): release 18 read the country after
    # the comma as the place of death, since its own clause held no predicate word
    r = _asked_death_place(raw, gaz)
    assert r.kind == "UNPARSEABLE", r
    # our own predicate before the comma still answers with the place it names
    r = _asked_death_place(raw.replace("was born", "died"), gaz)
    assert r.kind == "ANSWER", r


PARK_QUERY = "Ana Vidal Park is located in Italy. In which country is Zorbury located?"


@pytest.mark.parametrize("raw, query, key", [
    # the whole prompt echoed, then the distractor's subject under a new cue: release 18 took
    # the name for the echo starting again (J7) and read nothing
    (f" {PARK_QUERY}\nAnswer: Ana Vidal Park", PARK_QUERY, "SEMANTIC_ana vidal park"),
    # a bare name of five words is still a name when the context sentence writes it
    (" The Ana Vidal Memorial Sports Park.\nThe park is located in",
     "The Ana Vidal Memorial Sports Park is located in Italy. In which country is Zorbury "
     "located?", "SEMANTIC_ana vidal memorial sports park"),
])
def test_r_context_the_distractor_subject_as_a_bare_line(raw, query, key, gaz):
    kind, got, _ = read(raw, query, ("Zorbury",), PLACES, gaz, LOCATED)
    assert (kind, got) == ("ANSWER", key)


@pytest.mark.parametrize("raw", [
    # the distractor sentence echoed, its start again under a cue: no name alone on the line
    " Ana Vidal Park is located in Italy.\nAnswer: Ana Vidal Park is located in",
    # the distractor sentence repeated, cut after its subject, with no answer cue before it:
    # the echo starting again (J7), not an answer
    " Ana Vidal Park is located in Italy.\nAna Vidal Park is located in Italy.\nAna Vidal Park",
])
def test_r_context_an_echoed_distractor_sentence_is_still_no_answer(raw, gaz):
    assert read(raw, PARK_QUERY, ("Zorbury",), PLACES, gaz, LOCATED)[0] == "UNPARSEABLE"


# -- release 20 (stop 39; tuned on every set up to ../fresh20) ------------------------------
@pytest.mark.parametrize("raw", [
    " He was a German-American who was born in 1844 in the town of Zorbury.",
    " He was a French-Canadian painter who lived in the town of Zorbury.",
])
def test_j20_a_compound_demonym_is_an_adjective(raw, gaz):
    # asked where he died: "German" (the language, in the gazetteer) describes him
    r = _asked_death_place(raw, gaz)
    assert r.kind == "UNPARSEABLE", r


@pytest.mark.parametrize("raw, release_19", [
    (" The Ana Vidal is a popular truck in France. It is sold everywhere.", "ENTITY_Q142"),
    (" The Ana Vidal Stadium is a football stadium in the city of Paris, France.", None),
])
def test_a_place_where_something_is_does_not_fill_a_maker_slot(raw, release_19, gaz):
    # guide §9 (only the asked predicate fills the slot): asked a maker or an owner, the
    # place the subject is in is an aside
    kw = dict(query="Which company manufactures Ana Vidal?", mentions=("Ana Vidal",),
              lexicon=COMPANIES, gazetteer=gaz, slot=MAKER)
    assert read_answer(raw, **kw, place=False).kind == "UNPARSEABLE"
    # on a place slot (the default, release 19's reading everywhere) the place may be read
    assert read_answer(raw, **kw).key == release_19


def test_a_maker_after_a_place_phrase_is_still_read(gaz):
    raw = " The Ana Vidal, a popular truck in France, is made by Boeing."
    r = read_answer(raw, query="Which company manufactures Ana Vidal?", mentions=("Ana Vidal",),
                    lexicon=COMPANIES, gazetteer=gaz, slot=MAKER, place=False)
    assert (r.kind, r.key) == ("ANSWER", "ENTITY_Q66"), r
