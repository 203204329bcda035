"""Benchmark rules that the builder applies and the validator re-checks (one definition each).

* :func:`answer_in_subject_surface` -- the F1 copy flag (construction log F1).
* :func:`used_subject_surfaces` -- which subject labels a fact's questions actually show.
* :func:`context_leaks_gold` -- the D1 context guard (construction log D1).
* :func:`degenerate_object` -- the builder's gate for objects that are not a knowable answer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from functools import lru_cache

from fks.text import find_alias, has_cjk, normalize, strip_mentions

__all__ = [
    "COPY_MIN_SUBSTRING",
    "COPY_MIN_PREFIX",
    "COPY_PREFIX_SHARE",
    "WORD_START_MIN",
    "MIN_OBJECT_CHARS",
    "copy_match",
    "answer_in_subject_surface",
    "used_subject_surfaces",
    "context_leaks_gold",
    "degenerate_object",
]

#: F1: a spaced-script gold alias of at least this many characters counts as copied when it is
#: a plain normalised substring of a subject surface (``Ferrari`` in ``LaFerrari``); shorter
#: aliases must match as whole words (``US`` is not copied from ``Russia``).
COPY_MIN_SUBSTRING = 4
#: F1 long prefix: a one-word gold alias and a word of the subject surface share a prefix of at
#: least this many characters ...
COPY_MIN_PREFIX = 4
#: ... that also covers at least this share of the shorter of the two words
#: (``Italian`` ~ ``Italy``, ``Swedish`` ~ ``Sweden``, ``Kazakh`` ~ ``Kazakhstan``). The rule errs
#: towards flagging: ``Frankfurt`` ~ ``France`` (4 of 6 letters) matches too, which only matters
#: when France is that fact's own answer.
COPY_PREFIX_SHARE = 2 / 3
#: D1: a spaced-script gold alias of at least this many characters is caught where a word
#: *starts* (``India`` in ``Indian Act``); a shorter one only as a whole word (``US`` is not
#: caught in ``campus`` nor in ``used``).
WORD_START_MIN = 4
#: Degenerate-object gate: a spaced-script English object label shorter than this (``Ba``,
#: ``Ho``, ``R``) is dropped: it cannot be told apart from noise in a free answer.
MIN_OBJECT_CHARS = 3

_WORDS = re.compile(r"\w+")
_QID = re.compile(r"^q\d+$")


def _as_list(x: str | Iterable[str]) -> list[str]:
    return [x] if isinstance(x, str) else list(x)


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _copied(surface: str, alias: str) -> bool:
    """One normalised (surface, alias) pair under the F1 rule."""
    if has_cjk(alias) or len(alias) >= COPY_MIN_SUBSTRING:
        if alias in surface:
            return True
    elif find_alias(surface, alias, normalized=True):
        return True
    if " " in alias or has_cjk(alias) or len(alias) < COPY_MIN_PREFIX:
        return False
    for word in _WORDS.findall(surface):
        p = _common_prefix(alias, word)
        if p >= COPY_MIN_PREFIX and p >= math.ceil(COPY_PREFIX_SHARE * min(len(alias), len(word))):
            return True
    return False


def copy_match(subject_surfaces: str | Iterable[str],
               gold_aliases: str | Iterable[str]) -> tuple[str, str] | None:
    """Return the first ``(gold alias, subject surface)`` pair the F1 rule matches, or None.

    The rule, on :func:`fks.text.normalize`-d text: a gold alias is *copied* from a subject
    surface when

    1. it is a substring of the surface -- a plain substring for an alias in a CJK script or
       of at least :data:`COPY_MIN_SUBSTRING` characters (``Ferrari`` in ``LaFerrari``,
       ``Northampton`` in ``Northamptonshire``, ``Russian`` in ``Russians``), a whole-word match
       for a shorter one (``Sky`` in ``Sky One``, not ``US`` in ``Russia``); or
    2. it is one spaced-script word that shares a long prefix with a word of the surface: at
       least :data:`COPY_MIN_PREFIX` characters and at least :data:`COPY_PREFIX_SHARE` of the
       shorter word (``Italy`` ~ ``Italian``, ``Sweden`` ~ ``Swedish``).

    >>> copy_match(["LaFerrari"], ["Ferrari"])
    ('Ferrari', 'LaFerrari')
    >>> copy_match(["Gazzetta Chimica Italiana"], ["Italian"])
    ('Italian', 'Gazzetta Chimica Italiana')
    >>> copy_match(["Swedish Academy"], ["Sweden"])
    ('Sweden', 'Swedish Academy')
    >>> copy_match(["Russia", "Kampus"], ["US"]) is None
    True
    """
    surfaces = [(s, normalize(s)) for s in _as_list(subject_surfaces)]
    for alias in _as_list(gold_aliases):
        a = normalize(alias)
        if not a:
            continue
        for raw, s in surfaces:
            if s and _copied(s, a):
                return alias, raw
    return None


def answer_in_subject_surface(subject_surfaces: str | Iterable[str],
                              gold_aliases: str | Iterable[str]) -> bool:
    """F1 flag: some gold alias is copied (:func:`copy_match`) from some subject surface.

    The builder and the validator pass every subject surface the fact's object-slot questions
    actually show (:func:`used_subject_surfaces`: the English label and each multilingual
    query's label) and every gold alias (the object's labels in all languages), so a French
    label ``Boeing B-29 Superfortress`` flags the fact even though the English one is ``B-29
    Superfortress``.

    >>> answer_in_subject_surface("Airbus A318", "Airbus")
    True
    >>> answer_in_subject_surface(["B-29 Superfortress", "Boeing B-29 Superfortress"],
    ...                           ["Boeing"])
    True
    >>> answer_in_subject_surface("France", "Paris")
    False
    """
    return copy_match(subject_surfaces, gold_aliases) is not None


def used_subject_surfaces(subject_labels: Iterable[str], query_texts: Iterable[str]) -> list[str]:
    """Return the subject labels that occur (whole-word; CJK as substring) in some query text.

    Pass the fact's object-slot questions: the labels they show are the surfaces a model can
    copy from. Order follows ``subject_labels``; duplicates after normalisation are dropped.
    """
    texts = [normalize(t) for t in query_texts]
    out: dict[str, str] = {}
    for label in subject_labels:
        n = normalize(label)
        if n and n not in out and any(find_alias(t, n, normalized=True) for t in texts):
            out[n] = label
    return list(out.values())


@lru_cache(maxsize=65536)
def _word_start(norm_alias: str) -> re.Pattern[str]:
    if has_cjk(norm_alias):
        return re.compile(re.escape(norm_alias))
    if len(norm_alias) < WORD_START_MIN:
        return re.compile(r"(?<!\w)" + re.escape(norm_alias) + r"(?!\w)")
    return re.compile(r"(?<!\w)" + re.escape(norm_alias))


def context_leaks_gold(
    query: str, gold_aliases: Iterable[str], subject_mentions: Iterable[str]
) -> str | None:
    """D1 guard: a gold alias still present once the subject's mentions are removed, or None.

    Deliberately stricter than the scorer, but word-aware: in spaced scripts a gold alias of
    at least :data:`WORD_START_MIN` characters is caught where a word *starts*, so the published
    D1 case (gold ``India`` inside the distractor ``Indian Act``) is caught, while a shorter one
    must be a whole word (``US`` is not found in ``campus``). CJK aliases match as substrings.
    Subject mentions are removed first, so ``Airbus A320`` may legitimately contain ``Airbus``.

    >>> context_leaks_gold("Do not confuse the Reorganisation Act with the Indian Act. "
    ...                    "Where is Mumbai?", ["India"], ["Mumbai"])
    'India'
    >>> context_leaks_gold("Airbus A321 is long. Who makes Airbus A320?", ["Airbus"],
    ...                    ["Airbus A320"])
    'Airbus'
    >>> context_leaks_gold("Berlin is big. What is the capital of France?", ["Paris"],
    ...                    ["France"]) is None
    True
    >>> context_leaks_gold("Harvard has a campus. Where is Yale?", ["US"], ["Yale"]) is None
    True
    """
    stripped = strip_mentions(query, subject_mentions)
    for alias in gold_aliases:
        a = normalize(alias)
        if a and _word_start(a).search(stripped):
            return alias
    return None


def degenerate_object(subject: str, obj: str) -> str | None:
    """Builder gate: why an (English subject, object) pair is not a knowable fact, or None.

    * ``object_too_short`` -- a spaced-script object label shorter than
      :data:`MIN_OBJECT_CHARS` characters (``Banan District`` named after ``Ba``);
    * ``object_equals_subject`` -- the object's label is the subject's label
      (``Bolton`` capital ``Bolton``, ``Saturn`` named after ``Saturn``): a copy by definition
      and usually two entities conflated under one name;
    * ``object_label_is_id`` -- an unlabelled entity (``Q12345``) or a label without a letter
      or digit.

    Objects merely *contained* in the subject (``Airbus A318`` -> ``Airbus``) are kept and
    flagged by F1 (spec §16: flag, do not delete).

    >>> degenerate_object("Banan District", "Ba")
    'object_too_short'
    >>> degenerate_object("Saturn", "saturn")
    'object_equals_subject'
    >>> degenerate_object("Airbus A318", "Airbus") is None
    True
    """
    o, s = normalize(obj), normalize(subject)
    if not any(ch.isalnum() for ch in o) or _QID.match(o):
        return "object_label_is_id"
    if not has_cjk(o) and len(o) < MIN_OBJECT_CHARS:
        return "object_too_short"
    if o == s:
        return "object_equals_subject"
    return None
