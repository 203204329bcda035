"""Answer-segment extraction and cleaning (rules R1 and R9 of :mod:`fks.score`)."""

from __future__ import annotations

import re
import unicodedata

from fks.text import has_cjk

__all__ = ["first_segment", "sentence_prefixes", "clean", "has_content", "letter_choice"]

# R1: cue echoes stripped from the start ("Answer:", "A:", "The answer is", ...). "A:" is only
# a cue when something follows it (a bare "A:" may be a recognition letter).
_CUE = re.compile(
    r"""^\s*(?:
        (?:the\s+|my\s+|final\s+)?(?:correct\s+|final\s+|right\s+)?answer\s*(?:is\b|[:：])
      | a\s*[:：](?=\s*\S)
      | (?:la\s+)?r[ée]ponse\s*(?:est\b|[:：])
      | (?:la\s+)?respuesta\s*(?:es\b|[:：])
      | (?:die\s+)?antwort\s*(?:ist\b|lautet\b|[:：])
      | ответ\s*(?:[:：]|[-—–]|это\b)
      | (?:正确)?答案\s*(?:是|为|[:：])
      | 答\s*[:：] | 回答\s*[:：]
    )\s*[:：]?\s*""",
    re.IGNORECASE | re.VERBOSE,
)
# R1: a new dialogue turn inside the segment ends it.
_TURN = re.compile(
    r"(?<!\w)(?:q|question|query|answer|a|r[ée]ponse|respuesta|pregunta|frage|antwort|"
    r"вопрос|ответ)\s*[:：]|(?:问题|問題|问|問|答案|回答|答)\s*[:：]",
    re.IGNORECASE,
)
# R1: a later sentence that is itself a question ("Paris. What is the capital of Spain?").
_NEXT_QUESTION = re.compile(r"[.!。！]\s*([^.!?。！？]*)[?？]")
_EDGE_OPEN = " \t:：\"'“”‘’«»„「」『』*_`#>•·-–—"
_EDGE_CLOSE = _EDGE_OPEN + ".。!！,，;；:：、"


def first_segment(raw: str) -> str:
    r"""R1: the first answer segment of a raw response, cue echoes stripped, cleaned.

    Leading whitespace, cue echoes and lines without any letter or digit are stripped
    repeatedly (``"Answer:\nParis"`` and ``"---\nParis"`` give ``"Paris"``); the segment
    then ends at the first newline, at the first new turn marker (``Q:``, ``Question:``,
    ``Answer:``, ``A:``, ``问：`` ...) and before a later sentence that is a question.
    Returns ``""`` when nothing is left.

    >>> first_segment("Paris\nQ: What is the capital of Spain?\nA: Madrid")
    'Paris'
    >>> first_segment("  Answer: The answer is **Paris**.")
    'Paris'
    """
    text = raw
    while True:
        before = text
        text = _CUE.sub("", text.lstrip(), count=1)
        first, newline, rest = text.partition("\n")
        if newline and not has_content(first):
            text = rest  # a leading line without letters or digits ("---") is no answer
        if text == before:
            break
    text = text.split("\n", 1)[0]
    turn = _TURN.search(text)
    if turn is not None:
        text = text[: turn.start()]
    return clean(_cut_next_question(text))


def _cut_next_question(text: str) -> str:
    """Cut before a later sentence that is a question of three or more words (or CJK).

    ``St. Louis?`` is not cut: one word after the full stop is no new question.
    """
    for m in _NEXT_QUESTION.finditer(text):
        question = m.group(1)
        if text[: m.start()].strip() and (len(question.split()) >= 3 or has_cjk(question)):
            return text[: m.start() + 1]
    return text


#: R1: a sentence break: ``.`` or ``!`` before whitespace, or ``。``/``！`` (not ``?``: a
#: question mark after an answer is a hedge, not the end of it).
SENTENCE_BREAK = re.compile(r"[.!](?=\s)|[。！]")


def sentence_prefixes(segment: str) -> list[str]:
    """R1: the segment cut after its first, second, ... sentence (shortest first, cleaned).

    The whole segment is not included; a one-sentence segment gives ``[]``.

    >>> sentence_prefixes("Paris. The capital of Germany is Berlin. Tokyo is big.")
    ['Paris', 'Paris. The capital of Germany is Berlin']
    >>> sentence_prefixes("Paris? Maybe.")
    []
    """
    return [
        clean(segment[: m.start()])
        for m in SENTENCE_BREAK.finditer(segment)
        if has_content(segment[m.end():]) and has_content(segment[: m.start()])
    ]


def clean(segment: str) -> str:
    """Trim whitespace, quotes, markdown marks and trailing punctuation from a segment."""
    text = segment.strip()
    while True:
        trimmed = text.lstrip(_EDGE_OPEN).rstrip(_EDGE_CLOSE)
        if trimmed == text:
            return text
        text = trimmed


def has_content(segment: str) -> bool:
    """R9: True when the segment holds a letter or a digit (else it is garbage)."""
    return any(unicodedata.category(ch)[0] in "LN" for ch in segment)


_LETTER = re.compile(
    r"^(?:(?i:option|choice|variante|opción|opcion|вариант|选项|選項)\s*)?"
    r"(?:\(([A-Z])\)|\[([A-Z])\]|([A-Z])(?=$|[.):：]))"
)


def letter_choice(segment: str) -> str | None:
    """R10: the option letter a cleaned segment opens with (``B``, ``(B)``, ``B) Paris``), or None.

    Only upper-case letters count, and a bare letter must end the segment or be followed by
    ``.``, ``)`` or ``:``, so the article in ``"A city in France"`` is not read as option A.

    >>> letter_choice("(B)"), letter_choice("C) Tokyo"), letter_choice("A city")
    ('B', 'C', None)
    """
    m = _LETTER.match(segment)
    if m is None:
        return None
    return next(g for g in m.groups() if g)
