"""Normalisation, alias variants, mention finding and negation scope for the scorer.

Rules R2 (normalisation, articles), R3 (word boundaries / CJK substrings) and R5 (negation) of
:mod:`fks.score` live here. Matching itself is :func:`fks.text.find_alias`; this module only
prepares both sides the same way and collects every occurrence.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from fks.score import lexicon as lex
from fks.text import find_alias, has_cjk, normalize

__all__ = [
    "norm",
    "alias_variants",
    "strip_article",
    "Entity",
    "Mention",
    "find_mentions",
    "negation_cues",
    "is_negated",
    "phrase_pattern",
    "size",
]

_CJK_CLASS = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
# a CJK character next to a letter/digit of another script: insert a space between them so
# that a Latin alias inside Chinese text ("答案是Paris") sits on word boundaries.
_CJK_THEN_WORD = re.compile(rf"([{_CJK_CLASS}])(?=[^\W{_CJK_CLASS}])")
_WORD_THEN_CJK = re.compile(rf"([^\W{_CJK_CLASS}])(?=[{_CJK_CLASS}])")
_CJK_CHAR = re.compile(rf"[{_CJK_CLASS}]")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\uff07": "'"})
_CLAUSE_BREAK = re.compile(r"[,;:.!?\u3001\u3002\uff0c\uff1b\uff1a\uff01\uff1f()\[\]\uff08\uff09]")


def norm(text: str) -> str:
    """Scorer normalisation (R2): :func:`fks.text.normalize`, straight apostrophes, CJK spacing.

    >>> norm("  L’ALLEMAGNE ")
    "l'allemagne"
    >>> norm("答案是Paris。")
    '答案是 paris。'
    """
    text = normalize(text).translate(_APOSTROPHES)
    text = _CJK_THEN_WORD.sub(r"\1 ", text)
    return _WORD_THEN_CJK.sub(r"\1 ", text)


_ARTICLES = frozenset(norm(a) for a in lex.ARTICLES)
_ELIDED = tuple(norm(a) for a in lex.ELIDED_ARTICLES)


def strip_article(normed: str) -> str:
    """Drop one leading article from an already normalised string (R2).

    >>> strip_article("the hague"), strip_article("l'aquila"), strip_article("la")
    ('hague', 'aquila', 'la')
    """
    for art in _ELIDED:
        if normed.startswith(art) and len(normed) > len(art):
            return normed[len(art):].lstrip()
    head, _, rest = normed.partition(" ")
    if rest and head in _ARTICLES:
        return rest
    return normed


@lru_cache(maxsize=1 << 18)
def alias_variants(alias: str) -> tuple[str, ...]:
    """Return the normalised forms an alias matches under: itself and, if any, article-free.

    >>> alias_variants("The Hague")
    ('the hague', 'hague')
    >>> alias_variants("  ")
    ()
    """
    n = norm(alias)
    if not n:
        return ()
    stripped = strip_article(n)
    return (n, stripped) if stripped != n else (n,)


@dataclass(frozen=True)
class Entity:
    """One candidate answer the scorer can recognise: a key and its (variant, alias) pairs.

    ``key`` is ``"gold"`` for the gold answer; every other key is a distinct non-gold
    candidate (a competitor alias or a recognition option).
    """

    key: str
    variants: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Mention:
    """An occurrence of an entity variant in the normalised segment, ``text[start:end]``."""

    start: int
    end: int
    key: str
    alias: str

    @property
    def length(self) -> int:
        """Number of characters covered."""
        return self.end - self.start


def _occurrences(text: str, variant: str) -> list[tuple[int, int]]:
    """Every non-overlapping occurrence of ``variant`` in ``text`` under R3 (both normalised)."""
    if variant not in text:  # cheap prefilter: a match is always a plain substring
        return []
    spans: list[tuple[int, int]] = []
    pos = 0
    while pos < len(text):
        m = find_alias(text[pos:], variant, normalized=True)
        if m is None or m.end() == m.start():
            break
        spans.append((pos + m.start(), pos + m.end()))
        pos += m.end()
    return spans


def find_mentions(text: str, entities: Iterable[Entity]) -> list[Mention]:
    """Mentions of ``entities`` in ``text``, overlaps resolved longest-first (R3).

    A longer mention hides any shorter one it overlaps ("South Georgia" hides "Georgia"); on
    equal length the gold entity wins. The result is sorted by position.
    """
    found: list[Mention] = []
    for ent in entities:
        for variant, alias in ent.variants:
            found.extend(Mention(s, e, ent.key, alias) for s, e in _occurrences(text, variant))
    found.sort(key=lambda m: (-m.length, m.key != "gold", m.start))
    kept: list[Mention] = []
    for m in found:
        if all(m.end <= k.start or m.start >= k.end for k in kept):
            kept.append(m)
    return sorted(kept, key=lambda m: m.start)


def phrase_pattern(phrases: Iterable[str]) -> re.Pattern[str]:
    """One regex matching any phrase (normalised): word-bounded, or a substring for CJK."""
    normed = sorted({norm(p) for p in phrases if p.strip()}, key=len, reverse=True)
    alts = [
        re.escape(p) if has_cjk(p) else r"(?<!\w)" + re.escape(p) + r"(?!\w)" for p in normed
    ]
    return re.compile("|".join(alts))


_NEGATION = re.compile(
    phrase_pattern([*lex.NEGATION_WORDS, *lex.NEGATION_CJK]).pattern
    + "|"
    + re.escape(lex.NEGATION_SUFFIX)
    + r"(?!\w)"
)
_CONTRAST = phrase_pattern(lex.CONTRAST_WORDS)


def negation_cues(text: str) -> list[tuple[int, int]]:
    """Spans of the negation cues (R5) in a normalised text."""
    return [m.span() for m in _NEGATION.finditer(text)]


def size(text: str) -> int:
    """Rough word count: spaced words, plus one word per two CJK characters."""
    cjk = len(_CJK_CHAR.findall(text))
    words = len(_CJK_CHAR.sub(" ", text).split())
    return words + math.ceil(cjk / 2)


def is_negated(
    text: str,
    span: tuple[int, int],
    cues: Sequence[tuple[int, int]],
    candidates: Sequence[tuple[int, int]],
    *,
    max_gap: int = 3,
) -> bool:
    """R5: tell whether the candidate at ``span`` is negated by the nearest cue before it.

    The cue must end before the candidate starts, lie outside every candidate span (the
    ``不`` of ``大不列颠`` is not a cue), and the gap between them must hold at most
    ``max_gap`` words (CJK: two characters a word), no clause punctuation, no contrast word
    (``but``, ``mais``, ``而是`` ...) and no other candidate.
    """
    start = span[0]
    before = [
        c for c in cues
        if c[1] <= start and not any(s <= c[0] < e for s, e in candidates)
    ]
    if not before:
        return False
    cue_end = max(c[1] for c in before)
    gap = text[cue_end:start]
    if _CLAUSE_BREAK.search(gap) or _CONTRAST.search(gap):
        return False
    if any(cue_end <= s and e <= start for s, e in candidates):
        return False
    return size(gap) <= max_gap
