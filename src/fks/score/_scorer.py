"""The five-label scorer, :func:`score_answer` (rules R1-R12 are listed in :mod:`fks.score`)."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import get_args

from fks.data.schema import Fact, Label
from fks.score import lexicon as lex
from fks.score._ambiguity import structurally_ambiguous
from fks.score._dates import find_dates, find_years
from fks.score.extract import (
    FUNCTION_WORDS,
    answer_lines,
    first_segment,
    has_content,
    is_placeholder,
    letter_choice,
    opens_with_pronoun,
    sentence_prefixes,
    strip_line,
)
from fks.score.match import (
    Entity,
    Mention,
    alias_variants,
    find_mentions,
    is_negated,
    negation_cues,
    norm,
    phrase_pattern,
)
from fks.text import has_cjk, mask_mentions

__all__ = ["ScoreResult", "AliasSet", "score_answer", "lettered_options", "SCORER_VERSION"]

#: Recorded in run manifests; bump whenever a rule changes a label.
SCORER_VERSION = "fks-score-2"

_ABSTENTION = phrase_pattern(lex.ABSTENTION)
_WORD = re.compile(r"\w+")
GOLD = "gold"
#: The values ``Fact.answer_granularity`` may take.
GRANULARITIES: tuple[str, ...] = get_args(Fact.model_fields["answer_granularity"].annotation)


@dataclass(frozen=True)
class ScoreResult:
    """The scorer's verdict on one response.

    Attributes:
        label: ``correct``, ``incorrect``, ``ambiguous``, ``abstain`` or ``unparseable``.
        extracted_answer: the cleaned first answer segment (R1); None when ``unparseable``.
        matched_alias: the gold alias (or gold option) that made the answer ``correct``;
            None for every other label.
    """

    label: Label
    extracted_answer: str | None = None
    matched_alias: str | None = None


def _competitor_entity(alias: str) -> Entity | None:
    # R7a: one-character spaced-script aliases ("I", "C") are too common to signal an answer.
    pairs = tuple((v, alias) for v in alias_variants(alias) if len(v) > 1 or has_cjk(v))
    return Entity(f"other:{pairs[0][0]}", pairs) if pairs else None


class AliasSet:
    """Competitor aliases prepared once (normalised variants), reusable across many answers.

    Iterating yields the aliases, so an :class:`AliasSet` can be passed wherever
    ``competitor_aliases`` is expected; :func:`score_answer` then skips the preparation.

    Args:
        aliases: the aliases.
        owners: optional, one owner key per alias (e.g. the entity it names); a view
            :meth:`excluding` one owner shares the prepared index, so a whole relation is
            prepared once and each fact drops its own entity cheaply.
    """

    def __init__(self, aliases: Iterable[str], *, owners: Iterable[str] | None = None) -> None:
        names = list(aliases)
        tags = [""] * len(names) if owners is None else list(owners)
        if len(tags) != len(names):
            raise ValueError(f"{len(names)} aliases but {len(tags)} owners")
        pairs = dict.fromkeys(zip(names, tags, strict=True))
        self._pairs: tuple[tuple[str, str], ...] = tuple(pairs)
        self._excluded: str | None = None
        prepared = [(_competitor_entity(a), o) for a, o in self._pairs]
        self.entities: tuple[Entity, ...] = tuple(e for e, _ in prepared if e is not None)
        self._owner: tuple[str, ...] = tuple(o for e, o in prepared if e is not None)
        # Exact prefilter: a spaced-script variant can only match where its first word is a
        # whole word of the text, a CJK variant only where its first character occurs; the
        # rest (punctuation-led variants) are always tried.
        self._by_word: dict[str, list[int]] = {}
        self._by_char: dict[str, list[int]] = {}
        self._scan: list[int] = []
        for i, ent in enumerate(self.entities):
            for variant, _ in ent.variants:
                first = _WORD.match(variant)
                if has_cjk(variant):
                    self._by_char.setdefault(variant[0], []).append(i)
                elif first is None:
                    self._scan.append(i)
                else:
                    self._by_word.setdefault(first.group(), []).append(i)

    def excluding(self, owner: str) -> AliasSet:
        """Return a view without the aliases of ``owner`` (sharing the prepared index)."""
        view = copy.copy(self)
        view._excluded = owner
        return view

    def candidates(self, text: str) -> list[Entity]:
        """Entities that may occur in a normalised ``text`` (a superset of those that do)."""
        hits = {i for w in set(_WORD.findall(text)) for i in self._by_word.get(w, ())}
        hits.update(i for ch in set(text) for i in self._by_char.get(ch, ()))
        hits.update(self._scan)
        return [
            self.entities[i] for i in sorted(hits) if self._owner[i] != self._excluded
        ]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(a for a, o in self._pairs if o != self._excluded))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def lettered_options(prompt: str, options: Sequence[str]) -> dict[str, str]:
    """R10: the letter a prompt gives each option (``A) Paris``, ``(B) Berlin``, ``C. Tokyo``).

    Returns ``{letter: option}`` only when every option carries a distinct letter in the
    prompt, else ``{}`` (letters are then not accepted as answers).

    >>> lettered_options("Capital of France? A) Berlin B) Paris", ["Paris", "Berlin"])
    {'B': 'Paris', 'A': 'Berlin'}
    """
    out: dict[str, str] = {}
    if not all(opt in prompt for opt in options):
        return out
    for opt in options:
        m = re.search(r"(?<!\w)[(\[]?([A-Z])[)\].:]\s*" + re.escape(opt) + r"(?!\w)", prompt)
        if m is None or m.group(1) in out:
            return {}
        out[m.group(1)] = opt
    return out


def _gold_entity(gold_aliases: Sequence[str]) -> Entity:
    pairs = tuple((v, a) for a in gold_aliases for v in alias_variants(a))
    if not pairs:
        raise ValueError(f"gold_aliases holds no usable alias: {list(gold_aliases)!r}")
    return Entity(GOLD, pairs)


def _option_entities(
    options: Sequence[str], gold: Entity
) -> tuple[Entity, list[Entity], dict[str, str]]:
    """R10: options as entities; an option equal to a gold alias joins the gold entity.

    Returns the (possibly widened) gold entity, the non-gold option entities and a map from
    each option's text to its entity key.
    """
    gold_variants = {v for v, _ in gold.variants}
    gold_pairs = list(gold.variants)
    others: list[Entity] = []
    key_of: dict[str, str] = {}
    for i, opt in enumerate(options):
        pairs = tuple((v, opt) for v in alias_variants(opt))
        if gold_variants & {v for v, _ in pairs}:
            gold_pairs.extend(pairs)
            key_of[opt] = GOLD
        else:
            key_of[opt] = f"option:{i}"
            others.append(Entity(key_of[opt], pairs))
    return Entity(GOLD, tuple(gold_pairs)), others, key_of


def _competitors(prepared: AliasSet, claimed: set[str], text: str) -> list[Entity]:
    """Competitor entities present in ``text``, minus variants owned by gold or an option."""
    out: list[Entity] = []
    for ent in prepared.candidates(text):
        pairs = tuple(p for p in ent.variants if p[0] in text and p[0] not in claimed)
        if pairs:
            out.append(Entity(ent.key, pairs))
    return out


def _decide(
    segment: str,
    text: str,
    mentions: Sequence[Mention],
    *,
    chosen: Mapping[str, str] | None = None,
    structural: bool = True,
) -> tuple[ScoreResult, bool]:
    """R5, R7, R8, R11: turn the mentions found in a segment into a label.

    ``chosen`` maps extra candidate keys (a recognition letter) to their display alias.
    Returns the result and whether any candidate was named (not negated).
    """
    cues = negation_cues(text)
    spans = [(m.start, m.end) for m in mentions]
    live = [m for m in mentions if not is_negated(text, (m.start, m.end), cues, spans)]
    negated = [m for m in mentions if m not in live]
    named = {m.key: m.alias for m in reversed(live)} | dict(chosen or {})
    if len(named) >= 2:
        return ScoreResult("ambiguous", segment), True
    if not named and _ABSTENTION.search(text):
        return ScoreResult("abstain", segment), False
    if structural and structurally_ambiguous(text, live, negated):
        return ScoreResult("ambiguous", segment), bool(named)
    if GOLD in named:
        return ScoreResult("correct", segment, named[GOLD]), True
    return ScoreResult("incorrect", segment), bool(named)


def _temporal_mentions(
    text: str, gold_aliases: Sequence[str], granularity: str
) -> list[Mention] | None:
    """R6: year (or full-date) mentions keyed by value, the gold's under ``gold``.

    Returns None when the gold holds no year, so the entity rules apply instead.
    """
    if granularity == "date":
        gold_dates = {d.value: a for a in gold_aliases for d in find_dates(norm(a))}
        dates = find_dates(text)
        if gold_dates and dates:
            return [
                Mention(d.start, d.end, GOLD, gold_dates[d.value]) if d.value in gold_dates
                else Mention(d.start, d.end, f"date:{d.value}", text[d.start:d.end])
                for d in dates
            ]
    gold_years = {y.value: a for a in gold_aliases for y in find_years(norm(a))}
    if not gold_years:
        return None
    return [
        Mention(y.start, y.end, GOLD, gold_years[y.value]) if y.value in gold_years
        else Mention(y.start, y.end, f"year:{y.value[0]}", text[y.start:y.end])
        for y in find_years(text)
    ]


@dataclass(frozen=True)
class _Task:
    """Everything :func:`score_answer` knows about one query, ready to judge any segment."""

    gold: Entity
    gold_aliases: tuple[str, ...]
    granularity: str
    competitors: AliasSet
    options: tuple[Entity, ...]
    option_keys: Mapping[str, str]
    letters: Mapping[str, str]
    recognition: bool

    @classmethod
    def build(
        cls,
        gold_aliases: Sequence[str],
        granularity: str,
        competitor_aliases: Iterable[str],
        options: Sequence[str],
        letters: Mapping[str, str],
    ) -> _Task:
        """Prepare the gold, the options (R10) and the competitors (R4) once."""
        gold = _gold_entity(gold_aliases)
        option_entities: list[Entity] = []
        key_of: dict[str, str] = {}
        if options:
            gold, option_entities, key_of = _option_entities(options, gold)
        prepared = (
            competitor_aliases if isinstance(competitor_aliases, AliasSet)
            else AliasSet(competitor_aliases)
        )
        return cls(gold, tuple(gold_aliases), granularity, prepared, tuple(option_entities),
                   key_of, letters, bool(options))

    def judge(self, segment: str) -> tuple[ScoreResult, bool, list[Mention]]:
        """Label one cleaned segment; also says whether it named a candidate, and the mentions."""
        text = norm(segment)
        chosen: dict[str, str] = {}
        if self.recognition:
            letter = letter_choice(segment)
            if letter is not None and letter in self.letters:
                opt = self.letters[letter]
                chosen[self.option_keys.get(opt, f"letter:{letter}")] = opt
        elif self.granularity in ("year", "date"):
            mentions = _temporal_mentions(text, self.gold_aliases, self.granularity)
            if mentions is not None:
                return (*_decide(segment, text, mentions, structural=False), mentions)
        claimed = {v for e in (self.gold, *self.options) for v, _ in e.variants}
        entities = [self.gold, *self.options, *_competitors(self.competitors, claimed, text)]
        mentions = find_mentions(text, entities)
        return (*_decide(segment, text, mentions, chosen=chosen), mentions)


def score_answer(
    raw_response: str,
    gold_aliases: list[str],
    *,
    answer_granularity: str = "entity",
    competitor_aliases: Iterable[str] = (),
    options: list[str] | None = None,
    option_letters: Mapping[str, str] | None = None,
    query: str | None = None,
    subject_aliases: Sequence[str] = (),
) -> ScoreResult:
    r"""Score one raw model response against the gold aliases (five labels, rules R1-R12).

    Args:
        raw_response: the model's raw continuation (untrusted text).
        gold_aliases: every accepted spelling of the gold answer (canonical first).
        answer_granularity: ``entity``, ``year``, ``date`` or ``number`` (the fact's field);
            ``year``/``date`` switch to R6.
        competitor_aliases: aliases of OTHER objects of the same relation (or other subjects,
            for reverse queries); naming one besides the gold is ``ambiguous`` (R7a). An
            :class:`AliasSet` is accepted and avoids re-normalising them per call.
        options: recognition only: the options shown to the model (R10).
        option_letters: recognition only: ``{letter: option}`` when the prompt lettered the
            options (see :func:`lettered_options`); a bare letter answer is then accepted.
        query: the query text the model saw; given (or ``subject_aliases`` given), the
            continuation is read line by line (R13) instead of by its first segment only.
        subject_aliases: the names of the entity the query asks about (R14).

    Raises:
        ValueError: ``gold_aliases`` holds no non-empty alias, or ``answer_granularity`` is
            not one of :data:`GRANULARITIES`.

    >>> score_answer("Paris\nQ: What is the capital of Spain?\nA: Madrid", ["Paris"]).label
    'correct'
    >>> score_answer("It is not Paris.", ["Paris"]).label
    'incorrect'
    """
    if answer_granularity not in GRANULARITIES:
        raise ValueError(
            f"answer_granularity must be one of {', '.join(GRANULARITIES)}; "
            f"found {answer_granularity!r}"
        )
    task = _Task.build(
        gold_aliases, answer_granularity, competitor_aliases, options or [], option_letters or {}
    )
    if query is None and not subject_aliases:
        return _score_segment(task, first_segment(raw_response))[0]
    return _score_lines(task, raw_response, query or "", subject_aliases)


def _score_segment(task: _Task, segment: str) -> tuple[ScoreResult, bool]:
    """R1-R11 on one segment: the label, and whether the segment named a candidate."""
    result, named, _ = _score_segment_mentions(task, segment)
    return result, named


def _score_segment_mentions(task: _Task, segment: str
                            ) -> tuple[ScoreResult, bool, list[Mention]]:
    """:func:`_score_segment`, also returning the mentions of the part scored."""
    if not has_content(segment):
        return ScoreResult("unparseable"), False, []
    result, named, mentions = task.judge(segment)
    whole = {(m.key, m.alias) for m in mentions}
    for prefix in sentence_prefixes(segment):
        head, head_named, head_mentions = task.judge(prefix)
        # R1: the shortest run of sentences that names a candidate is the answer; a cut that
        # splits an alias ("St. Louis") names something the whole segment does not, so it is
        # no answer boundary.
        if head_named and {(m.key, m.alias) for m in head_mentions} <= whole:
            return head, True, head_mentions
    return result, named, mentions


def _tokens(text: str) -> list[str]:
    return [t for w in _WORD.findall(text) for t in ([*w] if has_cjk(w) else [w])]


def _mask_subject(text: str, subject: Sequence[str], task: _Task) -> tuple[str, int]:
    """R14: blank the subject's names out of a normalised segment; count them.

    An occurrence inside a longer candidate (gold, competitor, option) is that candidate's
    name and stays (``Airbus A320`` as the answer to a reverse query about Airbus).
    """
    candidates = [task.gold, *task.options, *task.competitors.candidates(text)]
    spans = [(m.start, m.end) for m in find_mentions(text, candidates)]
    return mask_mentions(text, {norm(x) for x in subject if x.strip()}, spans)


def _score_lines(task: _Task, raw: str, query: str, subject: Sequence[str]) -> ScoreResult:
    """R13/R14: read the continuation line by line (see :mod:`fks.score`)."""
    numeric = task.granularity in ("year", "date", "number")
    lines, _ = answer_lines(raw, numeric=numeric)  # an option list keeps only its pick
    qwords = _question_words(query, subject)
    raw_lines = raw.lstrip(" \t").splitlines()
    first = strip_line(raw_lines[0]) if raw_lines and raw_lines[0].strip() else None
    continues = first is not None and not query.rstrip().endswith(_CLOSED)
    seen: list[str] = []
    for i, line in enumerate(lines):
        segment = first_segment(line)
        if not has_content(segment):
            continue
        norm_line = norm(segment)
        if any(prev.startswith(norm_line) for prev in seen):
            continue  # R13: the start of a line already read, again (a loop cut by the budget)
        seen.append(norm_line)
        masked, n_subject = _mask_subject(norm_line, subject, task)
        words = _tokens(masked)
        content = [w for w in words if w not in FUNCTION_WORDS]
        if not content:
            if n_subject:  # R14: the subject itself is the answer: never the gold
                return ScoreResult("incorrect", _subject_name(norm_line, subject))
            continue
        result, named, mentions = _score_segment_mentions(task, masked)
        # a sentence opening with a pronoun ("He was born on ...") is about our subject too
        about = n_subject > 0 or (continues and i == 0 and line == first) or \
            opens_with_pronoun(norm_line)
        if named and not about and mentions and _elsewhere(masked, mentions, query):
            continue  # R13: a sentence about something else asserts nothing for our subject
        if named or result.label in ("abstain", "ambiguous"):
            core = segment
            if result.label in ("correct", "incorrect") and mentions:
                # R13: the extracted answer is the candidate named (gold first): the alias
                # found, in its listed spelling
                m = next((m for m in mentions if m.key == GOLD), mentions[0])
                core = m.alias
            return replace(result, extracted_answer=core)
        if all(w in qwords for w in content):
            if n_subject >= 2:  # R14: "Albania is the capital of Albania"
                return ScoreResult("incorrect", _subject_name(norm_line, subject))
            continue  # R13: an echo of the question
        if _DESCRIPTION.match(masked):
            continue  # R13: "<subject> is a country in ..." describes, answers nothing
        rest, echoed = _echo_rest(words, qwords)
        bare = len(content) <= _SHORT
        if (bare or n_subject or (echoed and about)) \
                and 0 < len(rest) <= (2 * _SHORT if has_cjk(masked) else _SHORT) \
                and rest[0] not in _INDEFINITE and rest[-1] not in FUNCTION_WORDS \
                and not rest[0].isdigit() and not is_placeholder(" ".join(rest), numeric) \
                and _looks_named(rest, segment):
            return ScoreResult("incorrect", " ".join(rest))
    return ScoreResult("unparseable")


def _elsewhere(masked: str, mentions: list[Mention], query: str) -> bool:
    """R13: a line naming a candidate but about something else (as J6 of the judge).

    It has words besides the candidates, and is a full sentence (more than four words) or
    names an entity of the query (a ``context`` distractor's).
    """
    text = norm(masked)
    rest = text
    for m in sorted(mentions, key=lambda m: -m.start):
        rest = rest[:m.start] + " " + rest[m.end:]
    other = [w for w in _tokens(rest) if w not in FUNCTION_WORDS]
    in_query = any(phrase_pattern([text[m.start:m.end]]).search(norm(query)) for m in mentions)
    return bool(other) and (len(_tokens(text)) > _SHORT or in_query)


def _subject_name(text: str, subject: Sequence[str]) -> str:
    """R14: the longest subject name found in a normalised text."""
    names = [n for n in {norm(x) for x in subject if x.strip()} if phrase_pattern([n]).search(text)]
    return max(names, key=len) if names else text


def _looks_named(rest: list[str], segment: str) -> bool:
    """R13: tell whether an answer unknown to the scorer looks like a name.

    One of its words is written with a capital, unless the script has no case or the segment
    is written in one case throughout.
    """
    if has_cjk(segment) or segment.lower() == segment or segment.upper() == segment:
        return True
    wanted = set(rest)
    return any(w[:1].isupper() and norm(w) in wanted for w in _WORD.findall(segment))


_CLOSED = (".", "?", "!", "。", "？", "！", ":", "：")
_SHORT = 4
_INDEFINITE = frozenset({"a", "an", "un", "une", "ein", "eine", "einen", "uno", "una"})
_DESCRIPTION = re.compile(
    r"^\W*(?:is|was|are|est|etait|es|era|ist|war|является|это|—|-)\s+"
    r"(?:a|an|un|une|una|uno|ein|eine|einer)\b")


_QUERY_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")


def _question_words(query: str, subject: Sequence[str]) -> frozenset[str]:
    """R13: the words of the query's sentences that name the subject (all, if none does).

    A sentence of the query that does not name the subject is a ``context`` distractor: a
    line repeating its entity is a (wrong) answer, not an echo of the question.
    """
    names = [norm(x) for x in subject if x.strip()]
    sentences = [norm(x) for x in _QUERY_SENTENCE.split(query) if x.strip()]
    own = [x for x in sentences if any(phrase_pattern([n]).search(x) for n in names)]
    return frozenset(w for x in (own or sentences) for w in _tokens(x))


def _echo_rest(words: list[str], qwords: frozenset[str]) -> tuple[list[str], bool]:
    """R13: the words after the question's own words at the start; whether there were any."""
    i = 0
    echoed = False
    while i < len(words) and (words[i] in qwords or words[i] in FUNCTION_WORDS):
        echoed = echoed or words[i] not in FUNCTION_WORDS
        i += 1
    return words[i:], echoed
