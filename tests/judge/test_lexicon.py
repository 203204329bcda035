"""The entity lexicon: longest-match resolution, and equivalence with fks.text.find_alias."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fks.judge import EntityLexicon, answer_span, semantic_key
from fks.text import find_alias, normalize

LEX = EntityLexicon({
    "ENTITY_Q90": ("Paris", ["Paris", "巴黎", "Париж"]),
    "ENTITY_Q64": ("Berlin", ["Berlin", "柏林"]),
    "ENTITY_Q60": ("New York City", ["New York City", "NYC"]),
    "ENTITY_Q42": ("York", ["York"]),
    "ENTITY_Q1": ("Georgetown", ["Georgetown"]),
    "ENTITY_Q2": ("Georgetown, Guyana", ["Georgetown", "Georgetown, Guyana"]),
})


def test_resolves_aliases_in_any_language_to_one_entity():
    for text in ("Paris", "The answer is Paris.", "答案是巴黎。", "Это Париж", "PARIS!"):
        res = LEX.resolve(text)
        assert (res.kind, res.key) == ("entity", "ENTITY_Q90"), text


def test_word_boundaries_in_spaced_scripts():
    assert LEX.resolve("Parisian café").kind == "none"
    assert LEX.resolve("Berliner").kind == "none"


def test_longest_match_wins_over_contained_alias():
    assert LEX.resolve("New York City").key == "ENTITY_Q60"
    assert LEX.resolve("York").key == "ENTITY_Q42"
    assert LEX.resolve("Georgetown, Guyana").key == "ENTITY_Q2"


def test_two_entities_conflict_and_shared_alias_is_ambiguous():
    res = LEX.resolve("Paris or Berlin")
    assert res.kind == "conflict" and res.keys == {"ENTITY_Q90", "ENTITY_Q64"}
    res = LEX.resolve("Georgetown")
    assert (res.kind, res.text) == ("ambiguous_alias", "georgetown")
    assert res.keys == {"ENTITY_Q1", "ENTITY_Q2"}
    # the same entity twice is not a conflict
    assert LEX.resolve("Paris (巴黎)").key == "ENTITY_Q90"


def test_answer_span_prefers_the_scorers_extraction():
    assert answer_span("The capital is Paris.", "Paris") == "Paris"
    assert answer_span("\n\nLyon. It is big.\nMore", None) == "Lyon"
    assert answer_span("答案是东京。后面", None) == "答案是东京"
    assert answer_span("   \n", None) == ""
    assert answer_span("x", "   ") == "x"


def test_semantic_key_strips_edge_punctuation_only():
    assert semantic_key(" «Zürich». ") == "zurich"
    assert semantic_key("St. Louis") == "st. louis"
    assert semantic_key("...") == ""


_ALPHABET = st.sampled_from(list("abé _-.,'1") + ["巴", "黎", "Б", "ж", "\u0301"])
_WORD = st.text(_ALPHABET, min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(aliases=st.lists(_WORD, min_size=1, max_size=5), text=st.text(_ALPHABET, max_size=25))
def test_find_all_agrees_with_find_alias(aliases, text):
    """Every alias find_alias finds in the text is found by the lexicon scan, and vice versa."""
    lex = EntityLexicon({f"ENTITY_Q{i}": (a, [a]) for i, a in enumerate(aliases)})
    found = {m[2] for m in lex.find_all(text)}
    for a in aliases:
        na = normalize(a)
        if not na:
            continue
        assert (find_alias(text, a) is not None) == (na in found), (text, a)


def test_mask_mentions_is_the_one_subject_masking_rule():
    """J5/R14: longest name first; a name inside a longer known name stays (counted once)."""
    from fks.text import mask_mentions

    # Apple II series asked about: the whole subject is blanked, not its "apple"
    text = normalize("Apple II series is made by Apple.")
    assert mask_mentions(text, {"apple ii series", "apple"}) == ("is made by .", 2)
    # the gold "Airbus A320" is protected, so only the bare subject is blanked
    text = normalize("Airbus A320 is built by Airbus")
    assert mask_mentions(text, ["airbus"], [(0, 11)]) == ("airbus a320 is built by", 1)
    # word-bounded in spaced scripts, substring in CJK; order of names never matters
    assert mask_mentions("parisian paris", ["paris"]) == ("parisian", 1)
    assert mask_mentions("巴黎是法国的首都", ["法国"]) == ("巴黎是 的首都", 1)
    a = mask_mentions("new york city is in new york", ["new york", "new york city"])
    b = mask_mentions("new york city is in new york", ["new york city", "new york"])
    assert a == b == ("is in", 2)
    assert mask_mentions("no subject here", []) == ("no subject here", 0)
