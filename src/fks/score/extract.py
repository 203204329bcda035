"""Answer-segment extraction and cleaning (rules R1 and R9 of :mod:`fks.score`)."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from fks.text import has_cjk

__all__ = [
    "FUNCTION_WORDS",
    "opens_with_pronoun",
    "answer_lines",
    "clear_line_cache",
    "clean",
    "first_segment",
    "has_content",
    "is_placeholder",
    "letter_choice",
    "sentence_prefixes",
    "strip_cue",
    "strip_line",
]

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
        text = strip_cue(text)
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


_ASCII_ALNUM = re.compile(r"[A-Za-z0-9]")


def has_content(segment: str) -> bool:
    """R9: True when the segment holds a letter or a digit (else it is garbage).

    In ASCII the letters and digits (categories L and N) are exactly ``[A-Za-z0-9]``.
    """
    if segment.isascii():
        return _ASCII_ALNUM.search(segment) is not None
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


# --- Reading a real continuation line by line (rules R13 here, J2-J4 of fks.judge) -------------
# Shared by the five-label scorer (R13) and the alias judge's reader (fks.judge._reader), so
# that both read the same lines of a continuation as its answer region.

_TAG = re.compile(r"</?[A-Za-z][^<>]{0,40}>|\*\*|__|`")
_BULLET = re.compile(r"^\s*(?:[-*•·>#]+\s*)+")
_OPTION = re.compile(r"^\(?([A-E])[.):）]\s*(?=\S)")
_LETTER_ONLY = re.compile(r"^\(?[A-Z]\)?$")
_OPTION_MARK = re.compile(r"^\(?([A-E])[.):）]?$")
_LIST_NUMBER = re.compile(r"^\d{1,2}[.)]$")
_HEADER = re.compile(r"^[^\W\d_]+(?:\s+[^\W\d_]+)?\s*[:：]$")
_DIGITS = re.compile(r"^[\d\W_]+$")
_EVALUATIVE = re.compile(
    r"^(?:[\d\s%.,]*\s*)?(?:100\s*%\s*)?(?:correct|incorrect|true|false|right|wrong|yes|no|"
    r"vrai|faux|verdadero|falso|richtig|falsch|верно|неверно|да|нет|对|错|正确|错误)"
    # release 11: the verdict ends the line or a clause ("Yes, it is", "100% correct."); a word
    # going on ("Right-handed", "Right wing", "No Doubt") is a name or a description, no verdict
    r"(?=\s*(?:[.,!;:。，！]|$)|\s+(?:it|that|this|is|answer|c'est|es|ist)\b)",
    re.IGNORECASE,
)
_QUESTION_START = re.compile(
    r"^(?:q|question|query|pregunta|frage|вопрос|问题|問題|问|問)\s*\d*\s*[:：.]",
    re.IGNORECASE,
)
#: function words of the six languages (and the cue nouns): they never make a line more than
#: an echo of the question
#: a personal pronoun opening a sentence refers back to the entity the query asks about
#: ("He was born on 14 March 1879.", "It is not Lyon, it is Paris."; issue 26), six languages
_PRONOUN_START = re.compile(
    r"^\W*(?:he|she|it|they|il|elle|ils|elles|er|sie|es|él|ella|ello|ellos|он|она|оно|они|"
    r"他|她|它|他们)(?!\w)", re.IGNORECASE)


def opens_with_pronoun(text: str) -> bool:
    """Tell whether a (normalised or raw) sentence opens with a personal pronoun."""
    return bool(_PRONOUN_START.match(text))


FUNCTION_WORDS = frozenset(
    """a an the of in on at to for by from with is are was were be been being it its this that
    which what who whom where when how as and or also called named known located
    le la les l de du des d un une est sont a en au aux et ou qui que quel quelle dans par
    el los las lo del al es son fue y o que cual cuál en con por para se
    der die das den dem des ein eine einen ist sind war von vom im in zu zur zum und oder wer
    welche welcher was mit bei auf
    и в во на с со к по из у о об от что кто какой какая является это был была были
    answer answers réponse reponse respuesta antwort ответ question""".split())


_JSON_FIELD = re.compile(r'^[\s{\[,]*"([^"]{1,40})"\s*:\s*(.*?)[\s,}\]]*$')
_JSON_ANSWER = re.compile(r"(?i)^(?:answer|r[ée]ponse|respuesta|antwort|ответ|答案)$")
#: a JSON key cut off by the token budget (``  "description``), and a code fence (```json)
_JSON_CUT = re.compile(r'^[\s{\[,]*"[^"]{1,40}$')
_FENCE = re.compile(r"^\s*```\w*\s*$")


#: the last sentence of a line when it is a question (after a full stop and a space)
_LAST_QUESTION = re.compile(r"(?<=[.!。！])\s*[^.!?。！？]*[?？]\s*$")


def strip_cue(text: str) -> str:
    """R1: one leading answer cue off ``text`` (``Answer:``, ``The answer is``, ``答案：``)."""
    return _CUE.sub("", text.lstrip(), count=1)


def strip_line(line: str) -> str:
    """J2: HTML/markdown marks, bullets and answer cues off one line (repeatedly), cleaned.

    A JSON field (``{"answer": "Kabul"}``) gives its value when it is an answer field, and
    nothing otherwise (``"id": 1``, ``"name": ...`` describe, they do not answer); a key cut
    off by the budget (``"description``) and a code fence (```json) are nothing too.
    """
    text = _TAG.sub("", line)
    if _FENCE.match(line) or _JSON_CUT.match(text):
        return ""
    field = _JSON_FIELD.match(text)
    if field is not None:
        text = field.group(2) if _JSON_ANSWER.match(field.group(1).strip()) else ""
    while True:
        before = text
        text = _BULLET.sub("", text)
        text = strip_cue(text)
        if text == before:
            break
    return clean(text)


def is_placeholder(text: str, numeric: bool = False) -> bool:
    """J4: tell whether a line holds no answer but a placeholder.

    Placeholders: an option letter, a list number, a header, a run of digits (unless the
    answer is numeric), an evaluation (``100 % correct``).

    >>> [is_placeholder(t) for t in ("C", "1.", "Explanation:", "123 456", "Paris")]
    [True, True, True, True, False]
    """
    if _LETTER_ONLY.match(text) or _LIST_NUMBER.match(text) or _HEADER.match(text):
        return True
    if not numeric and _DIGITS.match(text):
        return True
    return bool(_EVALUATIVE.match(text)) and len(text.split()) <= 4


def answer_lines(raw: str, *, numeric: bool = False) -> tuple[list[str], set[str]]:
    r"""J2-J4 / R13: the lines of a continuation that may hold its answer, in order.

    Each line is stripped of marks and cues (:func:`strip_line`); lines without a letter or
    digit, headers (``Explanation:``) and placeholders (:func:`is_placeholder`) are skipped;
    a question line (ending in ``?``, or opening with ``Question:``/``Q:``/``问题：``) is
    skipped before the first kept line and ends the region after it. An option marker
    (``A.``, ``(B)``, or a letter alone on its line) is taken off a line and its letter noted.
    When the region holds two or more different option letters the model wrote an option
    list: then only a line that follows an answer cue (``Answer:`` then ``A. India``) and
    opens with one of its letters is kept (the option picked), or none. Returns the lines and
    the option letters seen in the region.

    >>> answer_lines("\n\nAnswer:\nThe answer is <strong>C</strong>\nKabul\nQ: Why?\nParis")
    (['Kabul'], set())
    >>> lines, letters = answer_lines("\nA. India\nB. China\nAnswer:\nA. India\n")
    >>> lines, sorted(letters)
    (['India'], ['A', 'B'])
    """
    lines, letters = _answer_lines(raw, numeric)
    return list(lines), set(letters)


def clear_line_cache() -> None:
    """Empty the memo of :func:`answer_lines` (the judge calls it when a run is judged)."""
    _answer_lines.cache_clear()


@lru_cache(maxsize=1 << 15)
def _answer_lines(raw: str, numeric: bool) -> tuple[tuple[str, ...], frozenset[str]]:
    """:func:`answer_lines`, memoised (continuations repeat across queries and facts)."""
    kept: list[tuple[str, bool]] = []  # (line, it is an option picked after a cue)
    letters: set[str] = set()
    cue_before = False
    for line in raw.splitlines():
        bare = _TAG.sub("", line).strip()
        cued = bool(_CUE.match(bare))
        if _HEADER.match(bare) and not cued:
            cue_before = False
            continue
        m = _OPTION.match(bare) or _OPTION_MARK.match(bare)
        text = strip_line(line)
        if m and not (cued and not text):
            letters.add(m.group(1))
        if not has_content(text):
            cue_before = cue_before or cued
            continue
        if text.endswith(("?", "？")) and not _QUESTION_START.match(text):
            # a statement before the question on the same line is kept ("Diederik Korteweg
            # died in Florence. Where did Diederik Korteweg die?"); the question itself is not
            head = _LAST_QUESTION.sub("", text)
            if head != text and has_content(head):
                text = head
        if text.endswith(("?", "？")) or _QUESTION_START.match(text):
            if kept:
                break
            cue_before = False
            continue
        opt = _OPTION.match(text)
        picked = bool(opt) and (cue_before or cued)
        if opt:
            text = text[opt.end():]
        cue_before = False
        if is_placeholder(text, numeric):
            continue
        kept.append((text, picked))
    if len(letters) >= 2:
        return tuple([t for t, picked in kept if picked][:1]), frozenset(letters)
    return tuple(t for t, _ in kept), frozenset(letters)
