"""Benchmark rules that the builder applies and the validator re-checks (one definition each)."""

from __future__ import annotations

from collections.abc import Iterable

from fks.text import find_alias, normalize, strip_mentions

__all__ = ["answer_in_subject_surface", "context_leaks_gold"]


def answer_in_subject_surface(subject: str, obj: str) -> bool:
    """F1 flag: the object's canonical label appears (word-bounded) in the subject's label.

    >>> answer_in_subject_surface("Airbus A318", "Airbus")
    True
    >>> answer_in_subject_surface("France", "Paris")
    False
    """
    return find_alias(subject, obj) is not None


def context_leaks_gold(
    query: str, gold_aliases: Iterable[str], subject_mentions: Iterable[str]
) -> str | None:
    """D1 guard: a gold alias still present once the subject's mentions are removed, or None.

    Deliberately stricter than the scorer: a plain normalised *substring* counts, so the
    published D1 case (gold ``India`` inside the distractor ``Indian Act``) is caught.
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
    """
    stripped = strip_mentions(query, subject_mentions)
    for alias in gold_aliases:
        a = normalize(alias)
        if a and a in stripped:
            return alias
    return None
