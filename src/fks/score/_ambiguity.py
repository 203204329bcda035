"""Structural ambiguity: alternatives and coordinated lists (rule R7b of :mod:`fks.score`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from fks.score import lexicon as lex
from fks.score.extract import has_content
from fks.score.match import Mention, phrase_pattern, size

__all__ = ["structurally_ambiguous"]

_OPEN, _CLOSE = "\ue000", "\ue001"
_PLACEHOLDER = re.compile(f"{_OPEN}(\\d+){_CLOSE}")
# idioms that contain a disjunction word without offering an alternative
_IDIOMS = phrase_pattern([
    "whether or not", "or not", "or so", "more or less", "plus ou moins", "ou pas",
    "más o menos", "o no", "mehr oder weniger", "oder nicht", "или нет", "так или иначе",
])


def _joiner(words: tuple[str, ...], cjk: tuple[str, ...], extra: str = "") -> re.Pattern[str]:
    """Match joining words between spaces (the ``o`` of ``O'Hare`` is none), CJK ones anywhere."""
    spaced = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    glued = "|".join(re.escape(w) for w in sorted(cjk, key=len, reverse=True))
    return re.compile(rf"(?:(?<=\s)|^)(?:{spaced})(?=\s|$)|{glued}{extra}")


_DISJUNCTION = _joiner(lex.DISJUNCTIONS, lex.DISJUNCTIONS_CJK, r"|/|\|")
_CONJUNCTION = _joiner(lex.CONJUNCTIONS, lex.CONJUNCTIONS_CJK)
_LAST = re.compile(f"{_OPEN}(\\d+){_CLOSE}$")
_FIRST = re.compile(f"^{_OPEN}(\\d+){_CLOSE}")
_EDGE = " .,;:!?()\"'"
_LIST_SEPARATOR = re.compile(r"[,;\uff0c\uff1b\u3001]")
_FILLER = phrase_pattern(lex.FILLERS)
_NEGATION_START = re.compile(
    r"^\s*(?:" + phrase_pattern([*lex.NEGATION_WORDS, *lex.NEGATION_CJK]).pattern + r"|\w*n't)"
)
#: an alternative longer than this many words is prose, not a candidate answer
MAX_ALTERNATIVE_WORDS = 5
#: a list item longer than this many words is prose, not a candidate answer
MAX_ITEM_WORDS = 2


def _masked(
    text: str, live: Sequence[Mention], negated: Sequence[Mention]
) -> tuple[str, list[str]]:
    """Replace live mentions by numbered placeholders and negated ones by a space."""
    keys: list[str] = []
    out: list[str] = []
    pos = 0
    for m in sorted([*live, *negated], key=lambda m: m.start):
        out.append(text[pos:m.start])
        if m in negated:
            out.append(" ")
        else:
            out.append(f" {_OPEN}{len(keys)}{_CLOSE} ")
            keys.append(m.key)
        pos = m.end
    out.append(text[pos:])
    return "".join(out), keys


def _identity(part: str, keys: list[str]) -> str | None:
    """Name what an alternative or list item offers: a recognised key, its text, or None."""
    found = sorted({keys[int(i)] for i in _PLACEHOLDER.findall(part)})
    if found:
        return "key:" + "|".join(found)
    if _NEGATION_START.match(part):
        return None  # "... and not Lyon": a rejected alternative
    rest = _FILLER.sub(" ", part)
    if not has_content(rest):
        return None
    return "text:" + " ".join(rest.split())


def _side(part: str, keys: list[str], max_words: int, *, left: bool) -> str | None:
    """Identity of the item next to a joining word: the mention touching it, or a short text."""
    edge = part.rstrip(_EDGE) if left else part.lstrip(_EDGE)
    touching = (_LAST if left else _FIRST).search(edge)
    if touching is not None:
        return "key:" + keys[int(touching.group(1))]
    return _identity(part, keys) if size(part) <= max_words else None


def _joins_distinct(parts: Sequence[str], keys: list[str], max_words: int) -> bool:
    """Tell whether two neighbouring parts (``parts[i]``, ``parts[i + 1]``) differ."""
    for left, right in zip(parts, parts[1:], strict=False):
        a = _side(left, keys, max_words, left=True)
        b = _side(right, keys, max_words, left=False)
        if a is not None and b is not None and a != b:
            return True
    return False


def structurally_ambiguous(text: str, live: Sequence[Mention], negated: Sequence[Mention]) -> bool:
    """R7b: tell whether a joining word puts two distinct answers side by side.

    The segment is split at a joining word and the two neighbours of each join are compared.
    A neighbour is the recognised mention touching the join, else the whole neighbouring part
    if it is short, else nothing (prose is not a candidate answer).

    * Alternatives: ``or``/``ou``/``o``/``oder``/``или``/``либо``/``或``/``还是``/``/``; a
      neighbour may be up to :data:`MAX_ALTERNATIVE_WORDS` words ("Paris or Lyon", "the
      capital is Paris or maybe Lyon"; "Paris or Paname", both gold, is not ambiguous).
    * Coordinated lists: inside one comma item, ``and``/``et``/``y``/``und``/``и``/``和``/``与``
      ...; a neighbour may be up to :data:`MAX_ITEM_WORDS` words ("Paris and Lyon",
      "Paris, Lyon and Marseille"). A bare comma is apposition, not a list ("Paris, France").

    Recognised mentions are compared by entity; negated mentions and parts opening with a
    negation are rejected alternatives; filler words ("maybe", "either") are ignored; idioms
    ("whether or not", "more or less") are no alternatives.
    """
    masked, keys = _masked(text, live, negated)
    masked = _IDIOMS.sub(" ", masked)
    if _joins_distinct(_DISJUNCTION.split(masked), keys, MAX_ALTERNATIVE_WORDS):
        return True
    return any(
        _joins_distinct(_CONJUNCTION.split(item), keys, MAX_ITEM_WORDS)
        for item in _LIST_SEPARATOR.split(masked)
    )
