"""Text normalisation and alias matching shared by every stage.

The builder, the validator, the scorer and the judge share it, so that "does this text contain
the gold answer?" has one definition.

Rules:

* :func:`normalize` -- Unicode NFKC, casefold, strip diacritics (NFD and drop combining marks,
  so ``Zürich`` ~ ``Zurich``; CJK is unaffected), collapse whitespace, trim.
* :func:`find_alias` -- match an alias inside a text after normalisation. In spaced scripts the
  match must sit on word boundaries (``Paris`` is not found in ``Parisian``); an alias written in
  a CJK script (Han, Hiragana, Katakana, Hangul) matches as a plain substring, because those
  scripts do not separate words with spaces.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache

__all__ = ["normalize", "is_cjk", "has_cjk", "find_alias", "contains_any", "strip_mentions",
           "mask_mentions"]

#: whitespace, and the underscore: a name written as a title slug (``Le_Point``) is the name
_WS = re.compile(r"[\s_]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def normalize(text: str) -> str:
    r"""NFKC, casefold, drop diacritics, collapse whitespace (an underscore counts as a space).

    >>> normalize("  Zürich\\u00a0CITY ")
    'zurich city'
    >>> normalize("Le_Point")
    'le point'
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    decomposed = unicodedata.normalize("NFD", text)
    text = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    text = unicodedata.normalize("NFC", text)
    return _WS.sub(" ", text).strip()


def is_cjk(ch: str) -> bool:
    """Return True for a Han, Kana or Hangul character."""
    return bool(_CJK.match(ch))


def has_cjk(text: str) -> bool:
    """Return True when ``text`` holds any CJK character."""
    return bool(_CJK.search(text))


@lru_cache(maxsize=65536)
def _alias_pattern(norm_alias: str) -> re.Pattern[str]:
    if has_cjk(norm_alias):
        return re.compile(re.escape(norm_alias))
    # word boundary: not preceded/followed by a letter or digit (works for Cyrillic too)
    return re.compile(r"(?<![\w])" + re.escape(norm_alias) + r"(?![\w])")


def find_alias(text: str, alias: str, *, normalized: bool = False) -> re.Match[str] | None:
    """Find ``alias`` in ``text`` under the module's matching rules; None when absent.

    Args:
        text: the haystack.
        alias: the needle (an empty alias never matches).
        normalized: both are already :func:`normalize`-d (skips the work).

    >>> bool(find_alias("The answer is Paris.", "paris"))
    True
    >>> bool(find_alias("a Parisian café", "Paris"))
    False
    >>> bool(find_alias("答案是巴黎。", "巴黎"))
    True
    """
    t = text if normalized else normalize(text)
    a = alias if normalized else normalize(alias)
    if not a:
        return None
    return _alias_pattern(a).search(t)


def contains_any(text: str, aliases: Iterable[str]) -> str | None:
    """Return the first alias (original spelling) found in ``text``, or None."""
    t = normalize(text)
    for alias in aliases:
        if find_alias(t, normalize(alias), normalized=True):
            return alias
    return None


def strip_mentions(text: str, mentions: Iterable[str]) -> str:
    """Normalise ``text`` and blank out every occurrence of each mention (longest first).

    :func:`mask_mentions` with nothing protected.

    Used by the D1 guard: a context query leaks the gold only if the gold still appears
    after the subject's own mentions are removed (``Airbus A320`` legitimately contains
    ``Airbus``).
    """
    return mask_mentions(normalize(text), {normalize(x) for x in mentions if x.strip()})[0]


def mask_mentions(text: str, names: Iterable[str],
                  protected: Sequence[tuple[int, int]] = ()) -> tuple[str, int]:
    """Blank the subject's names out of a normalised text; return it and the number blanked.

    The one subject-masking rule of the scorer (R14) and the judge (J5):

    * ``text`` and ``names`` are normalised by the caller, the same way (the scorer's
      :func:`fks.score.match.norm`, the judge's :func:`normalize`);
    * names are taken longest first, ties by text (so the result never depends on set order),
      each matched as :func:`find_alias` does (word-bounded; CJK as a substring) in the text
      as already blanked by the longer names;
    * an occurrence lying strictly inside a longer ``protected`` span (``[start, end)`` of a
      known longer name in ``text``: the gold, an option, a lexicon entity) is that name, not
      the subject, and stays (``Airbus A320`` as an answer about Airbus);
    * every other occurrence is replaced by spaces of its length, then whitespace is
      collapsed.

    >>> mask_mentions("airbus a320 is made by airbus", ["airbus"], [(0, 11)])
    ('airbus a320 is made by', 1)
    >>> mask_mentions("paris, capital of france", ["france", "paris"])
    (', capital of', 2)
    """
    chars = list(text)
    n = 0
    for name in sorted({x for x in names if x.strip()}, key=lambda m: (-len(m), m)):
        current = "".join(chars)
        if name not in current:
            continue  # no occurrence at all: no need for the pattern
        for hit in _alias_pattern(name).finditer(current):
            a, b = hit.span()
            if any(x <= a and y >= b and y - x > b - a for x, y in protected):
                continue
            chars[a:b] = " " * (b - a)
            n += 1
    return " ".join("".join(chars).split()), n
