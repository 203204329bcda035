r"""Reading a real continuation as a careful grader would: reference-blind, rule by rule.

A base model's continuation is rarely a bare answer. It repeats the question, writes
placeholders, answers inside a sentence, or runs on into new questions. :func:`read_answer`
turns one raw continuation into a :class:`Reading` -- its kind (``ANSWER``, ``ABSTAIN``,
``MULTIPLE``, ``UNPARSEABLE``), its core answer span and its cluster key -- without ever
seeing the gold answer. It knows only the question, the aliases of the entity the question
names (the *subject*), the relation's lexicon (every entity filling that slot anywhere in the
benchmark) and the gazetteer (every entity of the benchmark and of the packaged mParaRel
gazetteer, all relations, six languages; :mod:`fks.judge._gazetteer`).

Rules (J1-J40; every rule is general: none is keyed to an entity, fact or answer string):

* **J1 Empty.** An empty or blank continuation is ``UNPARSEABLE`` (no answer; never a cluster
  of its own).
* **J2 Lines and cues.** The continuation is read line by line. On each line, HTML/markdown
  marks (``<strong>``, ``**``), bullets, and answer cues (``Answer:``, ``A:``,
  ``The answer is``, ``Réponse :``, ``答案是`` ... the scorer's R1 list) are stripped,
  repeatedly; a line left without a letter or digit is skipped (``Answer:`` alone).
* **J3 Questions end the answer.** A line that is a question (ends with ``?``/``？``, or opens
  with ``Question:``/``Q:``/``问题：`` ...) is skipped while no answer has been read, and ends
  the reading once one has (``Kabul\nWhat is the capital of ...?\nAnswer: Kabul`` reads
  ``Kabul``; the repeated question and its answer are continuation).
* **J4 Placeholders.** A line is no answer when it is: a single option letter (``The answer is
  C.``, ``<strong>A</strong>``: main queries offer no options); a header (one or two words and a
  colon: ``Explanation:``); a list number (``1.``); a run of digits and punctuation (unless the
  fact's answer type is numeric); an evaluation instead of an answer (``The answer is 100 %
  correct``, ``True``). Two or more lines opening with *different* option letters
  (``A. …\nB. …``) are an option list: the continuation is ``UNPARSEABLE``.
* **J5 Subject echo.** The subject's own aliases are blanked out of every sentence before
  anything is resolved, so a sentence naming the subject and something else is read on the
  something else. A sentence naming *only* the subject ("Apple II series" asked which company
  makes the Apple II series) is an answer that names the thing asked about: its cluster is
  the subject's entity (gazetteer), and step two marks it ``INCORRECT`` -- never correct for
  containing the gold in its surface. So a copy-flagged fact is correct only when the answer
  names the object itself (``Apple``). It counts as "in the query" for J10.
* **J5b Pronouns.** A sentence opening with a personal pronoun (``He was born in ...``,
  ``It is not X, it is Y``; six languages, :func:`fks.score.extract.opens_with_pronoun`)
  speaks of the subject, as a sentence naming it does (J6's "about something else" test and
  J11's subject position).
* **J6 Entities inside a sentence.** Each sentence (split at ``.``/``!``/``。`` before a space
  or the end) is resolved against the relation's lexicon (longest alias wins); when that finds
  nothing, against the gazetteer. One entity is an answer ``ENTITY_<Qid>``
  (``Ludwig Thuille's life ended in Munich.`` -> Munich; ``BMW 503 is a luxury car manufactured
  by BMW.`` -> BMW). Entities of a list or an alternative with nothing else between them
  (``Paris or Lyon``, ``Denmark, Norway and Sweden``) are ``MULTIPLE``; otherwise the first
  entity named is the answer and the others are asides (``Kabul, capital of Afghanistan``).
  A sentence that repeats the query's own sentence (every word of it in the query besides the
  entity, e.g. a ``context`` query's distractor sentence) is an echo, no answer; the
  distractor's entity given as the answer is a real, wrong answer.
* **J7 Echo of the question.** A sentence that names no entity and whose words all occur in
  the query (or are function words) repeats or rephrases the question: no answer
  (``The capital city of Alpes-Maritimes is``, ``Answer with the name only.``).
* **J8 String answers.** A sentence that names no known entity yields a string answer only when
  what is left after the question's own words at its start (``The capital of X is ...``) is
  short: at most four words (eight CJK characters), not opening with an indefinite article (a
  description of the subject, ``Afghanistan is a country in ...``, is no answer). The key is
  that rest up to its first comma, semicolon, parenthesis or dash aside.
* **J9 Abstention.** A sentence naming no entity and holding an abstention phrase (the
  scorer's R8 list) makes the continuation ``ABSTAIN``, when it comes before any answer.
* **J11 The asked slot** (issue 26; tried first on every sentence naming the subject). fks
  built every query from a template, so it knows the words of the relation's predicate (the
  *slot words*: the words of the relation's query templates in all six languages, from the
  benchmark, names excluded; :func:`fks.judge.slot_words`). A sentence ``[predicate] SUBJECT
  predicate FILLER`` -- the subject (or an anaphor of it), with nothing but slot words and
  function words before it and between it and the filler, at least one of them a content
  word -- restates the query's predicate with the slot filled: the filler is the answer,
  *whatever its type* (step two judges the type): its first named entity (``Burger King was
  founded in Miami`` -> Miami; ``<subject> is located in Italy``
  -> Italy, also when Italy is a context query's distractor); else a year or date at its start
  (``The band was founded in 1949`` -> 1949; a full date keys on its year); else a short name
  (J8's limits); the subject itself as filler is J5's subject answer (``<subject> is located in
  the <subject>``). A filler opening with an indefinite article describes (``a Russian-born
  actor`` asked for a language) and asserts nothing. A sentence whose words between subject
  and filler are not the predicate's (``X County is in the western part of Oklahoma``) is left
  to J5-J9. A named entity in the filler wins over a year before it (``founded in 1961 in
  the United States``: the year is an adjunct). A multi-word string answer (J8, J11) must
  capitalise every content word: ``the North of the country`` or a lower-case phrase in
  another script describes, it names nothing.
* **J12 A date in an open blank.** When the query leaves its slot open (a cloze without final
  punctuation, or a ``____`` blank) after a preposition of place or time (``in``, ``at``,
  ``on``, ``à``, ``en``, ``в``, ``于`` ...; stop 33: ``a citizenship of ____`` is no such
  blank) and the continuation's first line is only a year, a decade, a date or a timestamp
  (``1970``, ``2018-01-22 12:22:12``), it is an answer of the wrong type, keyed on its year
  (the guide's four-digit-year rule).
* **J13 A bare name is read whole** (issue 26). A bare line that is one longer name around a
  known alias -- every word capitalised or a number, nothing else on the line -- is that
  longer name (``Dodge 600``, ``Toyota Sprinter``, ``Motown Records``), looked up again as a
  whole (relation lexicon, then gazetteer), else a string answer: the guide keeps an entity
  apart from a longer name that contains it. With J6's bare-line rule: a bare line naming the
  context sentence's object or subject is an answer (R-context), never an echo of the query.
  J11 also reads a year after ``the year`` (``He was born in the year 1880.`` -> 1880).
* **J14 Another relation's predicate** (stop 33). An entity whose clause (back to the last
  comma, semicolon or colon) holds a predicate word that belongs to exactly one *other*
  relation's templates (``born`` asked where someone died, ``died`` asked where someone was
  born; :func:`fks.judge._run.foreign_words`) fills that other slot: the sentence asserts
  nothing for ours (``Charlotte Corday was born in Philadelphia`` asked where she died).
* **J15 Whole names and cut-off scaffolding** (stop 33). The core answer of an entity read
  inside a sentence is the whole capitalised name its alias is written in (``manufactured by
  the BMW Motor Group`` -> span ``BMW Motor Group``, key BMW; the guide reads such a name as a
  variant); a full stop after an initialism (``F.C.``, ``U.S.``) ends no sentence; a header's
  word alone on a later line (``Explanation:`` ... ``Explanation``) is that header cut off by
  the budget; a JSON key cut off by the budget (``"description``) and a code fence (```json)
  are no answer (:func:`fks.score.extract.strip_line`, shared with the scorer); J11 skips
  capitalised words right after the subject's name, which continue it (``The Boeing Company
  was founded in 1911 in the United States`` -> United States); J12 keeps a decade's ``s``
  or ``年`` in the span (``1940s``, key 1940) and reads a date or timestamp as its year.
* **Release 5 (stop 33).** J12 needs the blank to follow a preposition of place or time;
  J8 takes a bare line of lower-case words as a string answer where the relation names its
  objects in lower case (``Defensive end.`` asked a position:
  :attr:`fks.judge.EntityLexicon.common_nouns`).
* **Release 6 (stop 33).** J3 keeps a statement written before a question on the same line
  (``Diederik Korteweg died in Florence. Where did Diederik Korteweg die?`` reads Florence;
  :func:`fks.score.extract.answer_lines`, shared with the scorer). J17 (the guide's R-first
  and R-qualifier): in ``X, Y``, ``X in Y`` or ``X, in the county of Y``, the relation's
  entity ``Y`` only qualifies the place ``X`` named first (``the state of Madhya Pradesh,
  India`` asked a country reads Madhya Pradesh): ``X`` from the gazetteer, else its
  capitalised words as a string answer.
* **Release 7 (stop 34).** J18: a line that stops inside a sentence (three or more words, a
  lower-case last word, no closing punctuation) and the line after it are one sentence (``…is
  to identify the\nproblem.`` has no bare answer ``problem``; ``in the\nBulgarian capital,
  Sofia.`` reads Sofia), unless the next line opens with scaffolding or restarts the line (a
  loop); an article and the subject on the budget's cut-off last line (``Der CarPlay``) start
  a sentence, they are no subject answer. J19 (the guide's "answer to another question"):
  from a line answering a quoted question the model posed itself (``The answer to the
  question "What is the capital of France?" is: Paris``) nothing counts, unless the quoted
  question names our subject. J20: a gazetteer name written as an adjective after a
  determiner (``a Swedish doctor``, ``the Bulgarian capital``, ``a German-born physician``)
  or only inside a longer name names no entity; the relation's own entities are exempt
  (``a Muslim philosopher`` asked a religion). J21: a sentence that opens with another known
  name (and perhaps its class noun), a copula and an indefinite article (``The Italian
  language is a Romance language``) and never names our subject defines that entity: the
  rest of its line speaks of it. J22: a sentence opening with ``the`` and one lower-case noun
  that is no slot word, then a slot word (``The band was founded in 1997 in Adelaide``),
  speaks of the subject by its class noun (J11). J23 (the guide: different entities get
  different keys even if one contains the other's name): a whole capitalised name longer
  than the alias it holds (``the French Revolution``, ``Boeing Commercial Airplanes``) is
  that name -- the entity the lexicon or gazetteer knows by it, else a string answer --
  unless its extra words are an organisation's legal form or trade (``BMW Motor Group``,
  ``Blue Moon Records``: J15's variant). J24: a bare line that is the last words of the
  subject's name and names no known entity (``Martin`` for George Martin) is the subject.
* **Release 8 (stop 34).** J25: a short parenthesis (an abbreviation, ``the Deutsche
  Reichsbahn (GDR) is located in``) is an aside for J11; a sentence that puts the subject in
  the other role of the asked predicate (``Dhaka Division is the capital of Bangladesh``
  asked the capital of Dhaka Division, whose query names the subject after ``capital of``)
  asserts nothing, unless the other role is the subject again (J5). J26 (the guide's
  R-qualifier): two names with only a comma between (``Tokyo, Japan``, ``São Paulo,
  Brazil``) are a name and its qualifier, not ``MULTIPLE``; in J11's filler, a part or class
  of a place before its name (``the north of the Caspian Sea``) is dropped. J27: a first
  line that is only a year or a decade (``1970.``, ``In 1997.``) answers with the wrong type
  for every relation whose objects are not numbers, whatever the query's form; J12's
  prepositions include ``from`` and ``aus`` (``originated from ____``).
* **Release 9 (stop 35; tuned on every set before ``fresh7``).** J29: an invented option
  list whose options all repeat one name (``A. the city of Vienna\nB. the city of Vienna``)
  offers no choice and is that answer; a repeated placeholder (``A. a``), description
  (``the French border``) or fragment of the subject's name stays ``UNPARSEABLE``. J30: the
  query's asked sentence repeated from its start (``Averroes es seguidor de``), holding a
  predicate word and nothing of its own, is an echo whatever entity it names (a subject as
  the query's language writes it is no alias of the English mentions). J11 drops a part of
  a place after a year adjunct too (``born in 1858 in the town of Kaman`` -> Kaman). An
  underscore separates words (``Le_Point``; :func:`fks.text.normalize`, shared with the
  scorer). J28, on the whole group, is :func:`fks.judge._alias.join_variants`.
* **Release 10 (stop 35; tuned on every set before ``fresh8``, ``fresh7`` included).** A full
  stop after a Roman numeral ends no sentence when the text goes on in lower case (``Innozenz
  XI. erlag in``, a German regnal ordinal; so J30 sees the whole echo); J27 reads a bare
  decade or year after an article (``The 1990s.``).
* **Release 11 (stop 36; tuned on every set before ``fresh9``, ``fresh8`` included).** J31: a
  sentence made only of place phrases, every clause opening with a preposition (``In the
  north of Russia, in the Ural Mountains.``), is the asked slot's filler cut out of its
  sentence; its clauses are read in turn as J11 reads a filler (``in the south of the
  country`` names nothing, so ``in the province of Sibenik`` answers), a relative clause makes
  it a description. J32: where the relation's objects are common nouns (positions), the
  article after the restated predicate opens the filler (``He plays as a receiver``) and
  ``<subject> is a linebacker`` names a known one. J33: asked where the subject is located,
  ``<subject> is a small town in the north of the Czech Republic`` answers with the place
  after the class noun phrase. J34: a relative clause after the class phrase that restates
  the predicate (``a bank that is based in ...``) fills the slot. J27 reads ``in the 1960s``
  and ``1970's``. In a filler, a lower-case class noun after a name qualifies it (``the
  Munich region``, ``the ABC network``), a two-letter capitalised abbreviation is a name
  (``the UK``), and a name of the context's other sentence is that entity (R-context), not an
  echo's fragment. The scorer's and the judge's J4 verdict (``Right``, ``No``) must end its
  line or clause: ``Right-handed`` and ``Right wing`` are answers. J29 counts a repeated
  option's words without its articles.
* **Release 12 (stop 36; tuned on every set before ``fresh10``, ``fresh9`` included).** J15
  and J23: a name written with capitals before ``of`` is a longer name around the alias
  (``the Horn of Africa``, ``the 100th Judicial District of Illinois``), another entity unless
  the lexicons say otherwise; the subject's own name with a trade word (an invented
  ``Nickelback Records``) is another entity. J17's R-qualifier reads any gazetteer entity,
  not only the relation's (``the town of Vinci, in the province of Florence`` -> Vinci), and
  a qualified name from the context's other sentence is that entity (R-context). A full stop
  inside the subject's own name (``Wz. 35 anti-tank rifle``) ends no sentence. J30: a word of
  the subject's name is no predicate word (the title ``My Name Is Earl`` repeated is the
  subject, not an echo). J33's class phrase may hold a slot word (``a county located in``).
* **Release 13 (stop 37; tuned on every set before ``fresh12``, ``fresh11`` included).** J18:
  a wrapped sentence's rest may open with a quotation mark (``theory of the\n"double
  consciousness"`` is one sentence, not a bare quoted answer). J14: a name that only
  qualifies another place (J17) is checked for another relation's predicate too (``born in
  the town of Lemberg, Ukraine`` asked where he died). J24: a sentence opening with the
  capitalised last words of the subject's name, then a slot word, speaks of the subject
  (``Muti signed to ...`` for Riccardo Muti). J35: ``The country is the United Arab
  Emirates.``: the question's own noun, a copula, then the filler (not ``The continent is
  located in ...``, which describes the continent). A founding slot reads a birth verb as its
  own predicate (:data:`fks.judge._run._SYNONYMS`). The gazetteer knows a formal name cut
  before ``of`` (``United States``), so a filler reads it inside longer text (``in the United
  States in the 1920s``).
* **Release 14 (stop 37; tuned on every set before ``fresh13``, ``fresh12`` included).** J12
  reads a full date or timestamp in an open slot past an answer frame and an article (``The
  answer is: The 2019-01-22 12:22``). J37: ``The capital
  of the United Kingdom is London.`` asked ``London is the capital of which place?`` restates
  the predicate with the subject last: the filler is what the predicate noun is "of". A
  pronoun alone (``... Versailles. She``, cut by the budget) is no answer.
* **Release 15 (stop 37; tuned on every set before ``fresh15``, ``fresh14`` included).** J24:
  the name inside the subject's formal name (``Serbia`` of ``Kingdom of Serbia``), written
  with a capital, is the subject by its short name anywhere in a sentence (``The capital of
  Serbia is Belgrade.``).
* **Release 16 (stop 38; tuned on every set before ``fresh16``, ``fresh15`` included).** J38:
  the model speaking as the subject (``I was born in Gary, Indiana.``, ``I am a citizen of
  Morocco.``) restates the predicate when a word of it follows the first-person pronoun past
  auxiliaries and articles only. J39: a numbered list of different short items with no pick
  (``1. France\nAnswer: 2. Morocco\nAnswer: 3. Algeria``) is no answer (the guide's
  R-placeholder). J40: a sentence opening with a word of the asked predicate (``Born in 1960
  in Copenhagen, Denmark.``) leaves the subject implied. J23: a state's formal name around a
  known place (``the Kingdom of Botswana``, ``the Republic of Senegal``) is that place unless
  the whole name is an entity of its own; a month inside a date (``19th March 1980``) and a
  title word before ``of`` and a known name are never a place of their own.
* **Release 17 (stop 38; tuned on every set before ``fresh17``, ``fresh16`` included).** The
  predicate's own verb in forms the templates do not use restates the slot
  (:data:`fks.judge._run._SYNONYMS`: ``established`` for *founded*, ``working`` for
  *worked*).
* **Release 18 (stop 38, after the ``fresh18`` read; dev only, never read on a test set).**
  :data:`FORMAL_PREFIXES` written without accents, as sentences are compared (release 16's
  ``république``, ``état``, ``república`` and ``königreich`` never matched); no dev row moves.
* **Release 19 (stop 39; guide §9; tuned on every set up to ``fresh18``).** J41: on a religion
  slot an adherent word names its religion (``X is a Muslim scholar`` -> Islam, ``a Jewish
  rabbi`` -> Judaism; mParaRel's adherent entity ``Muslim`` is Islam's cluster), and ``the
  (Roman) Catholic Church`` is one entity of its own
  (:data:`fks.judge._lexicon.RELIGION_ADHERENTS`, applied when the lexicons are built). J14: a
  clause with no predicate word continues the one before it, so the country after ``born in
  the town of Vitoria,`` is no place of death. R-context: a line that is only a name the
  context sentence writes is a bare answer of any length, also after an echoed context
  sentence that starts with it (``Kowsar County is located in Iran. In which country is …?``
  then ``Answer: Kowsar County`` is Kowsar County; J7 took it for the echo starting again).
* **Release 20 (stop 39; tuned on every set up to ``fresh20``).** J20: a compound demonym
  after a determiner is an adjective (``a German-American who``, ``a French-Canadian
  painter``). Guide §9 ("only the asked predicate fills the slot"): on a slot whose answer is
  no place (a maker, an owner, a network, a label, a language, a religion, a position), a
  place named after a locative phrase (``a popular truck in the United States``, ``a stadium
  in the city of Rome``) is an aside (:meth:`_Context.located`; the judge passes the answer
  type as ``place``).
* **J10 The first answer counts.** The first line that yields a reading decides
  (``Denmark\nAnswer: Denmark\nAnswer: Norway`` is ``Denmark``): under greedy decoding and a
  24-token budget what follows a complete answer is the prompt pattern repeating itself, and
  whether a different second line fits depends on the budget, not on the model. ``MULTIPLE``
  is kept for one span offering several candidates (J6). Nothing read at all:
  ``UNPARSEABLE``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

from fks.judge._lexicon import EntityLexicon, semantic_key
from fks.judge._lexicon import normalize_cached as normalize  # fks.text.normalize, memoised
from fks.score import lexicon as score_lex
from fks.score.extract import (
    FUNCTION_WORDS,
    answer_lines,
    clean,
    clear_line_cache,
    has_content,
    is_placeholder,
    opens_with_pronoun,
    strip_cue,
    strip_line,
)
from fks.score.match import phrase_pattern
from fks.text import has_cjk, is_cjk, mask_mentions

__all__ = ["Reading", "read_answer", "Kind", "subject_key"]

Kind = Literal["ANSWER", "ABSTAIN", "MULTIPLE", "UNPARSEABLE"]

_SENTENCE = re.compile(r"(?<=[.!])\s+|(?<=[。！])")
#: J4: a header line (one or two words and a colon) of the raw continuation
_HEADER_LINE = re.compile(r"(?m)^[ \t]*([^\W\d_]+(?:[ \t]+[^\W\d_]+)?)[ \t]*[:：][ \t]*$")
_TAG = re.compile(r"</?[A-Za-z][^<>]{0,40}>|\*\*|__|`")
#: a sentence piece ending with an initialism's full stop (``F.C.``, ``U.S.``, ``J.``)
_INITIALISM_END = re.compile(r"(?:^|[\s(])(?:[A-Z]\.)+$")
#: release 10: a regnal number's full stop (``Innozenz XI. erlag in``, the German ordinal)
_REGNAL_END = re.compile(r"\s[IVXLC]{1,6}\.$")


def _sentences(text: str, names: tuple[str, ...] = ()) -> list[str]:
    """Split ``text`` at sentence ends (``_SENTENCE``), not after an initialism.

    ``Beijing Guoan F.C. is located in Beijing`` is one sentence: a full stop closing a run
    of single capital letters with stops (``F.C.``, ``U.S.``) abbreviates, it ends nothing;
    nor does one after a Roman numeral when the text goes on in lower case (``Innozenz XI.
    erlag in``: German writes a regnal ordinal with a stop). Release 12: nor one inside a
    ``names`` entry written in the text (the subject ``Wz. 35 anti-tank rifle``).
    """
    guard = "\u2024"  # ONE DOT LEADER stands in for a name's own full stops while splitting
    for name in names:
        text = re.sub(re.escape(name), lambda m: m.group().replace(".", guard), text,
                      flags=re.IGNORECASE)
    out: list[str] = []
    for piece in _SENTENCE.split(text):
        if out and (_INITIALISM_END.search(out[-1])
                    or (_REGNAL_END.search(out[-1]) and piece[:1].islower())):
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return [p.replace(guard, ".") for p in out] if names else out
_ASIDE = re.compile(r"[,;(（，；]| [-–—] ")
_WORD = re.compile(r"[^\W_]+")  # a word; an underscore separates (``Rio_de_Janeiro``)
#: what may stand between two entities of a list or an alternative (J6)
_JOINER = re.compile(
    r"\s*(?:[,;/、，；]\s*)?(?:(?:either|or|and|ou|et|o|y|oder|und|или|либо|и|或|或者|还是|和|与|及)"
    r"\s*)?", re.IGNORECASE)
_ABSTENTION = phrase_pattern(score_lex.ABSTENTION)
#: J8: a copula then an indefinite article opens a description of the subject
_DESCRIPTION = re.compile(
    r"^\W*(?:is|was|are|est|etait|es|era|ist|war|является|это|—|-)\s+"
    r"(?:a|an|un|une|una|uno|ein|eine|einer)\b")
_ARTICLES = frozenset("the a an le la les l el los las der die das den dem des".split())
_INDEFINITE = frozenset({"a", "an", "un", "une", "ein", "eine", "einen", "uno", "una"})
_FUNCTION = FUNCTION_WORDS
#: a prompt ending with one of these is a finished sentence: the continuation starts anew
_CLOSED = (".", "?", "!", "。", "？", "！", ":", "：")
STRING_MAX_WORDS = 4
STRING_MAX_CJK = 8


@dataclass(frozen=True)
class Reading:
    """What a grader reads in one continuation.

    Attributes:
        kind: ``ANSWER``, ``ABSTAIN``, ``MULTIPLE`` or ``UNPARSEABLE``.
        span: the core answer as written (``ANSWER`` only).
        key: the cluster key: ``ENTITY_<Qid>`` or ``SEMANTIC_<normalised answer>``.
        canonical: the entity's canonical label, else the span.
        confidence: 1.0 for an entity, 0.7 for an alias shared by several, 0.5 for a string.
        rule: the rule that decided (``J1`` ... ``J10``), for audits and tests.
    """

    kind: Kind
    span: str | None = None
    key: str | None = None
    canonical: str | None = None
    confidence: float = 1.0
    rule: str = ""


def clear_caches() -> None:
    """Empty the reader's memo tables (a judged run is done; its texts are not needed again).

    They hold hundreds of thousands of small objects the garbage collector would otherwise
    keep rescanning in whatever the process does next (e.g. the behavioural metrics).
    """
    for fn in (normalize, _token_tuple, _query_parts, _mention_parts, _anaphor_pattern,
               _deaccent, _written_capitalised, _name_pattern, _written, _capitalised_words,
               _adjective_pattern, _adjectival):
        fn.cache_clear()
    clear_line_cache()


def _tokens(text: str) -> list[str]:
    """Words of a normalised text; each CJK character is a word of its own."""
    return list(_token_tuple(text))


@lru_cache(maxsize=1 << 17)
def _token_tuple(text: str) -> tuple[str, ...]:
    out: list[str] = []
    for w in _WORD.findall(text):
        if has_cjk(w):
            buf = ""
            for ch in w:
                if is_cjk(ch):
                    if buf:
                        out.append(buf)
                        buf = ""
                    out.append(ch)
                else:
                    buf += ch
            if buf:
                out.append(buf)
        else:
            out.append(w)
    return tuple(out)


@lru_cache(maxsize=65536)
def _query_parts(query: str) -> tuple[str, frozenset[str]]:
    norm = normalize(query)
    return norm, frozenset(_tokens(norm))


@lru_cache(maxsize=65536)
def _mention_parts(mentions: tuple[str, ...]
                   ) -> tuple[tuple[str, ...], frozenset[str], tuple[str, ...]]:
    """Return the subject's anaphor heads (J5), name words (J8) and normalised aliases.

    Their patterns are compiled only for a text that holds the head or alias at all
    (:func:`_anaphor_pattern`, :func:`fks.text.mask_mentions`): most texts hold neither.
    """
    heads = tuple(sorted({w for m in mentions for w in _tokens(normalize(m))
                          if len(w) > 2 and w.isalpha() and not has_cjk(w)
                          and w not in _FUNCTION}))
    name_words = frozenset(w for m in mentions for w in _tokens(normalize(m)))
    aliases = tuple(sorted({normalize(x) for x in mentions if x.strip()},
                           key=lambda m: (-len(m), m)))
    return heads, name_words, aliases


@lru_cache(maxsize=65536)
def _anaphor_pattern(heads: tuple[str, ...]) -> re.Pattern[str]:
    """J5: a definite article, then a word of the subject's name."""
    return re.compile(
        r"(?<!\w)(?:the|this|le|la|l'|el|der|die|das|этот|эта)\s+(?:" +
        "|".join(re.escape(w) for w in heads) + r")(?!\w)")


class _Context:
    """Everything fixed for one query: its words, the subject aliases, the lexicons."""

    def __init__(self, query: str, mentions: tuple[str, ...], lexicon: EntityLexicon,
                 gazetteer: EntityLexicon | None, numeric: bool,
                 slot: frozenset[str] = frozenset(),
                 foreign: frozenset[str] = frozenset(), place: bool = True) -> None:
        self.query_norm, self.query_words = _query_parts(query)
        #: release 20: the slot's answer type is a place (else see :meth:`located`)
        self.place = place
        # J6: the query's sentences before the question (a context query's distractor)
        sentences = _sentences(query.strip())
        self.context_sentences = tuple(normalize(p) for p in sentences[:-1])
        #: release 19: the names each context sentence opens and ends with (its subject and
        #: object: "Kowsar County" of "Kowsar County is located in Iran.")
        self.context_subjects = frozenset(filter(None, [
            _edge_name(p, end) for p in sentences[:-1] for end in (False, True)]))
        # J30: the asked sentence (the query's last)
        self._asked = semantic_key(sentences[-1]) if sentences else ""
        self.slot = slot
        self.foreign = foreign - slot
        self.mentions = mentions
        #: release 12: the subject's names with a full stop inside (``Wz. 35``), kept whole
        #: when a line is split into sentences
        self.dotted = tuple(m for m in mentions if re.search(r"\.\s", m))
        self._heads, self._name_words, self._mention_aliases = _mention_parts(mentions)
        #: release 15: the names after " of " in the subject's formal names (``kingdom of
        #: serbia`` -> ``serbia``), one to three words, none of them a function word
        self.of_tails = tuple(sorted({
            t for a in self._mention_aliases if " of " in a
            for t in [a.rsplit(" of ", 1)[1].strip()]
            if 1 <= len(t.split()) <= 3 and len(t) >= 3
            and not any(w in _FUNCTION for w in t.split())}, key=lambda t: (-len(t), t)))
        self.lexicon = lexicon
        self.gazetteer = gazetteer
        self.numeric = numeric

    def echoes_query(self, line: str) -> bool:
        """J30 (release 9): ``line`` is the asked sentence of the query again.

        From its start, perhaps cut short (``Clemens XIV. erlag in``, ``Cadillac CTS-V es
        desarrollado por``), with none of its own words and at least one word of the
        relation's predicate (a slot word of four letters or more: ``erlag``,
        ``desarrollado``). It asserts nothing,
        whatever entity it names: a subject written as the query's language writes it is no
        alias fks knows. The subject's name alone (``BMW M70``, ``Iglesia católica``) stays
        J5's subject answer; a context query's other sentence, J6's. Caseless CJK lines, whose
        subject and predicate fks cannot tell apart, are left to the other rules.
        """
        key = semantic_key(line)
        # a word of the subject's own name is no predicate word (release 12: the title "My
        # Name Is Earl" holds the template's "name")
        return not has_cjk(key) and self._asked.startswith(key) \
            and any(w in self.slot and len(w) >= 4 and w not in self._name_words
                    for w in _tokens(key))

    def governed_elsewhere(self, stripped: str, span: str) -> bool:
        """J14: ``span`` fills another relation's predicate in its clause (``born in Paris``).

        The clause is the text before the span's first occurrence back to the last comma,
        semicolon or colon. Its last predicate word -- one of our slot's words or a foreign
        one (:attr:`foreign`) -- is foreign: ``network owned by the BBC`` is our predicate.
        Release 19 (guide §9, "only the asked predicate fills the slot"): a clause with no
        predicate word of either kind continues the one before it, so a qualifier or an
        apposition after a comma (``born in the town of Vitoria, Spain``; ``born in 1844 in
        the town of St. Paul, Minnesota``) fills the predicate before the comma.
        """
        if not self.foreign or not span:
            return False
        at = stripped.find(span)
        if at < 0:
            return False
        for clause in reversed(re.split(r"[,;:，；：]", stripped[:at])):
            marks = [w for w in _tokens(clause)
                     if w in self.foreign or (w in self.slot and (len(w) >= 4 or has_cjk(w)))]
            if marks:
                return marks[-1] in self.foreign
        return False

    def located(self, stripped: str, span: str) -> bool:
        """Release 20 (guide §9): ``span`` is where something is, on a slot for no place.

        Only the asked predicate fills the slot. ``… is a popular truck in the United
        States``, ``a stadium in the city of Rome``, ``spoken in the province of Quebec``: the
        text before the span ends with a locative verb and ``in``, or with ``in the city of``
        (or state, province ...). Asked a maker, an owner, a language or a religion, such a
        place is an aside.
        """
        if self.place or not span:
            return False
        at = stripped.find(span)
        return at > 0 and bool(_LOCATIVE.search(stripped[:at]))

    def in_context(self, name: str) -> bool:
        """R-context: normalised ``name`` is written in the query's other (distractor) sentence."""
        return any(_contains(part, name) for part in self.context_sentences)

    def names_query_entity(self, stripped: str) -> bool:
        """Tell whether a known entity named in ``stripped`` is named in the query too."""
        for lex in (self.lexicon, self.gazetteer):
            if lex is None:
                continue
            for _, _, alias in lex.find_all(stripped, normalized=True):
                if _contains(self.query_norm, alias):
                    return True
        return False

    def names_other(self, text: str, sentence: str) -> bool:
        """J6: ``text`` (normalised) names a known entity, written as a name in ``sentence``."""
        return any(_named_in(sentence, alias, lex)
                   for lex in (self.lexicon, self.gazetteer) if lex is not None
                   for _, _, alias in lex.find_all(text, normalized=True))

    def in_query(self, lex: EntityLexicon, key: str) -> bool:
        return any(_contains(self.query_norm, a) for a in lex.aliases(key))

    def is_echo(self, words: list[str]) -> bool:
        return all(w in self.query_words or w in _FUNCTION for w in words)

    def restates(self, stripped: str, alias: str) -> bool:
        """J6: besides ``alias``, the sentence holds only the query's words (or none)."""
        rest = [w for w in _tokens(stripped.replace(alias, " ")) if w not in _FUNCTION]
        return all(w in self.query_words for w in rest)

    def mask_subject(self, norm: str) -> tuple[str, int]:
        """J5: blank the subject's aliases out of a normalised sentence; count them.

        Longest first; an occurrence inside a longer known name (``Airbus A320`` asked about
        Airbus) is that name, not the subject, and stays.
        """
        if not self.mentions:
            return norm, 0
        longer = [(a, b) for lex in (self.lexicon, self.gazetteer) if lex is not None
                  for a, b, _ in lex.find_all(norm, normalized=True)]
        return mask_mentions(norm, self._mention_aliases, longer)

    def anaphors(self, stripped: str) -> int:
        """J5: count references to the subject by a word of its name (``the island``).

        A definite article before a word of the subject's name (Alexander Island) refers to
        the subject and counts as naming it.
        """
        if not any(h in stripped for h in self._heads):
            return 0  # a match needs a head word (also: no heads, no anaphor)
        return len(_anaphor_pattern(self._heads).findall(stripped))

    def from_subject_name(self, words: list[str]) -> bool:
        """J8: more than half of the content words are words (or starts) of the subject's name."""
        content = [w for w in words if w not in _FUNCTION]
        hits = [w for w in content
                if any(n == w or (len(w) >= 3 and n.startswith(w)) for n in self._name_words)]
        return bool(content) and 2 * len(hits) > len(content)

    def object_of(self, word: str) -> bool:
        """J25: the query names the subject as the object of ``word`` (``capital of X``)."""
        return any(re.search(r"(?<!\w)" + re.escape(word) + r"\s+(?:of|de|du|des|von|vom|del)"
                             r"\s+(?:the\s+|la\s+|le\s+|l'|der\s+|el\s+)?" + re.escape(a)
                             + r"(?!\w)", self.query_norm) for a in self._mention_aliases)

    def named_before(self, noun: str) -> bool:
        """J37: the query names the subject as the subject of ``noun``.

        ``London is the capital of which place?``, ``noun`` = ``capital``; its last word is
        compared.
        """
        head = noun.split()[-1]
        return any(re.search(re.escape(a) + r"\s+(?:is|was)\s+the\s+(?:\w+\s+)?"
                             + re.escape(head) + r"(?!\w)", self.query_norm)
                   for a in self._mention_aliases)

    def is_name_tail(self, words: list[str]) -> bool:
        """J24: ``words`` are the last words of one of the subject's names (a surname)."""
        n = len(words)
        return n > 0 and all(len(w) >= 3 or has_cjk(w) for w in words) and any(
            len(t) > n and list(t[-n:]) == words
            for t in (_token_tuple(a) for a in self._mention_aliases))

    def is_fragment(self, words: list[str]) -> bool:
        """J8: words that are all the query's own, or starts of them (a cut-off echo)."""
        return all(w in _FUNCTION or any(q.startswith(w) for q in self.query_words)
                   for w in words)

    def gazetteer_entity(self, text: str, sentence: str) -> str | None:
        """Return the one gazetteer entity ``text`` names (as a name in ``sentence``), or None.

        Longest names first, names only where ``sentence`` writes them with a capital (J6);
        an alias naming several entities goes to the lowest Wikidata number (the oldest item,
        in practice the best-known one).
        """
        assert self.gazetteer is not None
        gaz = self.gazetteer
        found = sorted(gaz.find_all(text), key=lambda m: (m[0] - m[1], m[0]))
        kept: list[tuple[int, int, str]] = []
        for m in found:
            if all(m[1] <= k[0] or m[0] >= k[1] for k in kept) and _named_in(sentence, m[2], gaz) \
                    and (self.lexicon.keys_of(m[2]) or not _adjectival(sentence, m[2])):
                kept.append(m)
        if not kept:
            return None
        common = frozenset.intersection(*(gaz.keys_of(m[2]) for m in kept))
        if not common and len(kept) == 2:
            a, b = sorted(kept)
            if re.fullmatch(r"\s*,\s*", text[a[1]:b[0]]) and len(gaz.keys_of(a[2])) == 1:
                # J26 (R-qualifier): "São Paulo, Brazil" names São Paulo, qualified
                return next(iter(gaz.keys_of(a[2])))
        return min(common, key=_qid_order) if common else None

    def shadow(self, stripped: str, sentence: str) -> str:
        """J6: blank the relation-lexicon names that lie inside a longer gazetteer name.

        ``the Arctic Ocean`` names the ocean, not the continent-lexicon's ``Arctic``.
        """
        if self.gazetteer is None:
            return stripped
        longer = [(a, b) for a, b, alias in self.gazetteer.find_all(stripped, normalized=True)
                  if _named_in(sentence, alias, self.gazetteer)]
        if not longer:
            return stripped
        chars = list(stripped)
        for a, b, _ in self.lexicon.find_all(stripped, normalized=True):
            if any(x <= a and y >= b and y - x > b - a for x, y in longer):
                chars[a:b] = " " * (b - a)
        return "".join(chars)

    def echo_rest(self, text: str) -> tuple[str, bool]:
        """J8: the text after the query's own words at its start (``The capital of X is``).

        Also says whether that start held a word of the query besides function words.
        """
        norm = normalize(text)
        if has_cjk(norm):
            i = 0
            while i < len(norm) and (norm[i] in self.query_norm or not norm[i].strip()):
                i += 1
            return norm[i:].strip(), i > 0
        words = norm.split()
        i = 0
        echoed = False
        while i < len(words) and all(t in self.query_words or t in _FUNCTION
                                     for t in _tokens(words[i])):
            echoed = echoed or any(t not in _FUNCTION for t in _tokens(words[i]))
            i += 1
        return " ".join(words[i:]), echoed


@lru_cache(maxsize=1 << 16)
def _deaccent(text: str) -> str:
    text = text.replace("_", " ")  # fks.text.normalize's rule: an underscore is a space
    if text.isascii():
        return text  # NFKC and NFD leave ASCII unchanged; it has no combining marks
    decomposed = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", text))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _named_in(sentence: str, alias: str, lex: EntityLexicon) -> bool:
    """J6: a name counts only where the text writes it with a capital too.

    A name is an alias every entity spells with a capital: ``the center of the county`` names
    no ``Center``.
    """
    return not lex.needs_capital(alias) or _written_capitalised(sentence, alias)


@lru_cache(maxsize=1 << 17)
def _written_capitalised(sentence: str, alias: str) -> bool:
    """J6: ``sentence`` writes ``alias`` with a capital somewhere, or has no case at all."""
    text = _deaccent(sentence)
    if text.lower() == text or text.upper() == text:
        return True  # a text without case (all lower or all upper) cannot tell
    if text.isascii() and alias.isascii() and alias not in text.lower():
        return False  # in ASCII, a case-blind match is a match of the lower-cased text
    pat = _name_pattern(alias)
    return any(m.group()[:1].isupper() for m in pat.finditer(text))


@lru_cache(maxsize=1 << 16)
def _name_pattern(alias: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)" + re.escape(alias) + r"(?!\w)", re.IGNORECASE)


def _looks_named(head: str, sentence: str) -> bool:
    """J8: a string answer must look like a name.

    Some word of ``head`` is written with a capital in ``sentence``, unless the script has no
    case (CJK) or the sentence is written in one case throughout.
    """
    if has_cjk(head) or sentence.lower() == sentence or sentence.upper() == sentence:
        return True
    wanted = set(_tokens(head))
    return any(w[:1].isupper() and normalize(w) in wanted for w in _WORD.findall(sentence))


@lru_cache(maxsize=65536)
def _written(sentence: str) -> dict[str, str]:
    """Each normalised word of ``sentence`` -> the word as written (its last occurrence).

    Shared by the rules that ask whether a word is written with a capital (J8, J11, J15, J17).
    Read-only: callers must not modify it (it is memoised).
    """
    return {normalize(w): w for w in _WORD.findall(sentence)}


@lru_cache(maxsize=65536)
def _capitalised_words(sentence: str) -> frozenset[str]:
    """J15: the normalised words ``sentence`` writes with a capital at least once."""
    return frozenset(normalize(w) for w in _WORD.findall(sentence) if w[:1].isupper())


def _all_capitalised(head: str, sentence: str) -> bool:
    """J8/J11: every content word of ``head`` is written with a capital in ``sentence``.

    A multi-word name capitalises its words (``Rio de Janeiro``, ``United States``); a phrase
    with a lower-case content word or a number is a description (``the north of the
    country``, ``McDonald's in 1994``), not a name. Caseless scripts pass.
    """
    if has_cjk(head) or sentence.lower() == sentence or sentence.upper() == sentence:
        return True
    written = _written(sentence)
    for w in _tokens(normalize(head)):
        if w in _FUNCTION or w in _ARTICLES:
            continue
        orig = written.get(w)
        if orig is None or not orig[:1].isupper():
            return False
    return True


_DETERMINERS = r"(?:a|an|the|der|die|das|ein|eine|einen|le|la|les|un|une|el|los|las|uno|una)"


@lru_cache(maxsize=1 << 16)
def _adjective_pattern(alias: str) -> re.Pattern[str]:
    """J20: ``alias`` after a determiner (up to two words between), with what follows it."""
    # release 20: also the second part of a compound (``a French-Canadian painter``)
    return re.compile(r"(?<!\w)" + _DETERMINERS + r"\s+(?:[\w-]+\s+){0,2}?(?:\w+-)?("
                      + re.escape(alias) + r")(?!\w)(-\w+|(?:-\w+)?\s+\w+)?", re.IGNORECASE)


@lru_cache(maxsize=1 << 17)
def _adjectival(sentence: str, alias: str) -> bool:
    """J20: ``sentence`` writes ``alias`` only as an adjective (or inside a longer name).

    An adjective: a capitalised name after a determiner, before a lower-case word or a
    hyphen suffix (``a Swedish doctor``, ``the Bulgarian capital``, ``a German-born
    physician``, ``a German-American``). Such a name describes; it names no entity for the slot (the
    guide's descriptions). An occurrence followed by another capitalised word is part of a
    longer name (``the Swedish Medical Association``) and does not name the entity either.
    At least one occurrence must be an adjective.
    """
    if len(_tokens(normalize(sentence))) <= STRING_MAX_WORDS:
        return False  # a bare line "the UNIX operating system" is a noun phrase answer
    text = _deaccent(sentence)
    adjectives: set[int] = set()
    for m in _adjective_pattern(alias).finditer(text):
        nxt = (m.group(2) or "").lstrip("-").split()
        word = nxt[-1] if nxt else ""
        hyphen = (m.group(2) or "").startswith("-") and len(nxt) == 1
        # release 20: a compound after a determiner (``a German-American who``) is an
        # adjective too; its second part only before a lower-case word (``a French-Canadian
        # painter``), never inside a longer hyphenated name (``Saint-Pierre-sur-Mer``)
        if text[m.start(1) - 1:m.start(1)] == "-" and hyphen:
            continue
        if m.group(1)[:1].isupper() and (hyphen and m.group(2).count("-") == 1 or (
                word[:1].islower() and normalize(word) not in _FUNCTION)):
            adjectives.add(m.start(1))
    if not adjectives:
        return False
    for m in _name_pattern(alias).finditer(text):
        if not m.group()[:1].isupper() or m.start() in adjectives:
            continue
        after = text[m.end():].lstrip(" -")
        if not after[:1].isupper():
            return False  # named as itself somewhere
    return True


def _qid_order(key: str) -> tuple[int, str]:
    digits = key.rsplit("_Q", 1)[-1]
    return (int(digits), key) if digits.isdigit() else (1 << 62, key)


def _contains(haystack: str, alias: str) -> bool:
    r"""Tell whether ``alias`` occurs in ``haystack``: a substring (CJK) or on word boundaries.

    The boundaries of :func:`fks.text.find_alias` (not after or before a regex ``\w``, which
    for text is ``str.isalnum()`` or ``_``), checked without a regex.
    """
    if has_cjk(alias):
        return alias in haystack
    n, k = len(haystack), len(alias)
    i = haystack.find(alias)
    while i != -1:
        j = i + k
        if (i == 0 or not _is_word(haystack[i - 1])) and (j == n or not _is_word(haystack[j])):
            return True
        i = haystack.find(alias, i + 1)
    return False


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _subject_answer(sentence: str, ctx: _Context) -> Reading:
    """J5: the sentence asserts the subject itself."""
    key, canonical, span = subject_key(sentence, ctx.mentions, ctx.lexicon, ctx.gazetteer)
    return Reading("ANSWER", span, key, canonical, 1.0 if key.startswith("ENTITY_") else 0.5,
                   "J5")


def subject_key(text: str, mentions: tuple[str, ...], lexicon: EntityLexicon,
                gazetteer: EntityLexicon | None) -> tuple[str, str, str]:
    """J5: ``(cluster id, canonical, span)`` of a text that names the subject only.

    The subject's entity when the relation's lexicon or the gazetteer names it (the longest
    alias), else ``SEMANTIC_<the longest subject alias in the text>``.
    """
    norm = normalize(text)
    names = {normalize(m) for m in mentions if m.strip()}
    for lex in (lexicon, gazetteer):
        if lex is None:
            continue
        res = lex.resolve(norm)
        # the subject's own entity only: an entity named *inside* the subject's name (Boeing
        # in "Boeing 747-8 Freighter", the gold itself for a copy-flagged fact) is not the
        # subject, and an answer repeating the subject is never that entity (issue 26)
        if res.kind == "entity" and res.key is not None and (
                not names or names & set(lex.aliases(res.key))):
            return res.key, lex.canonical(res.key), lex.alias_in(norm, res.key) or clean(text)
    named = [m for m in mentions if m.strip() and _contains(norm, normalize(m))]
    name = max(named, key=lambda m: len(normalize(m))) if named else clean(text)
    return f"SEMANTIC_{semantic_key(name)}", name, name


#: J23: the words that make a longer name a variant of the organisation it contains
#: (``BMW Motor Group``, ``Blue Moon Records``, ``Boeing Company``): legal forms and trades
ORG_SUFFIXES = frozenset("""group inc incorporated corporation corp company co ltd limited plc llc
    ag gmbh sa spa se nv bv kg ab oy records recordings music entertainment motor motors
    automobiles studios studio pictures films media broadcasting publishing holdings
    industries international technologies systems software games airlines airways""".split())


#: J23 (release 16): the words of a formal name around a place (``the Kingdom of Botswana``,
#: ``the State of Louisiana``, ``the City of Baghdad``), six languages: a variant of the place
#: unless the whole name is itself a known entity (``Kingdom of Serbia``). Written as
#: :func:`fks.text.normalize` leaves them (release 18: release 16 wrote four with accents,
#: which never matched)
FORMAL_PREFIXES = frozenset("""of the federal people peoples democratic socialist islamic
    united kingdom republic state city town province county commonwealth federation emirate
    sultanate principality municipality prefecture district region territory borough
    de du del la le von royaume republique ville etat reino republica estado ciudad provincia
    konigreich republik stadt""".split())


def _entity(lex: EntityLexicon, key: str, stripped: str, sentence: str, rule: str,
            ctx: _Context | None = None) -> Reading:
    """Read the answer ``key`` as written (J15), or J23's longer name when it is another entity.

    J23 (the guide: different entities get different keys even if one contains the other's
    name): a whole capitalised name longer than the alias (``the French Revolution``, ``the
    Swedish Medical Association``) is that name, looked up whole in the relation's lexicon and
    the gazetteer, else a string answer -- unless its extra words are an organisation's legal
    form or trade (:data:`ORG_SUFFIXES`), which make a variant of the same entity.
    """
    alias = lex.alias_in(stripped, key)
    span = _name_around(alias, stripped, sentence) if alias else clean(sentence)
    if ctx is not None and alias and span != alias:
        extra = _tokens(span.replace(alias, " ", 1))
        # release 12: the subject's name with a trade word is another entity (an invented
        # "Nickelback Records" is no name of the band Nickelback)
        renamed = alias in ctx._mention_aliases and span not in ctx._mention_aliases
        if extra and (renamed or not all(w in ORG_SUFFIXES for w in extra)):
            for other in (ctx.lexicon, ctx.gazetteer):
                keys = other.keys_of(span) if other is not None else frozenset()
                if len(keys) == 1:
                    k = next(iter(keys))
                    return Reading("ANSWER", span, k, other.canonical(k), 1.0, "J23")  # type: ignore[union-attr]
            if not renamed and span.endswith(" " + alias) \
                    and all(w in FORMAL_PREFIXES for w in extra):
                # release 16: "the Kingdom of Botswana" is Botswana by its formal name
                return Reading("ANSWER", span, key, lex.canonical(key), 1.0, rule)
            caps = {normalize(w): w for w in _WORD.findall(sentence) if w[:1].isupper()}
            shown = " ".join(caps.get(w, w) for w in span.split())
            return Reading("ANSWER", shown, f"SEMANTIC_{semantic_key(span)}", shown, 0.5, "J23")
    return Reading("ANSWER", span, key, lex.canonical(key), 1.0, rule)


def _qualified(span: str, stripped: str, sentence: str, ctx: _Context) -> Reading | None:
    """J17: ``X, Y`` or ``X in Y``: the relation's entity ``Y`` only qualifies a named ``X``.

    The guide's R-first and R-qualifier: in ``a small town in the state of Madhya Pradesh,
    India`` the first place named is Madhya Pradesh, and India is its qualifier, even where
    the relation's lexicon knows only India. ``X`` must be a gazetteer entity written as a
    name, other than the subject and the query's own entities, ending right before ``, Y``,
    `` in Y`` or ``, in the county of Y``; else the capitalised words there (a name the
    gazetteer does not know, keyed as a string).
    """
    gaz = ctx.gazetteer
    at = stripped.find(span)
    if gaz is None or at <= 0:
        return None
    m = re.search(r"(?:,\s*(?:in\s+)?|\s+in\s+)(?:the\s+\w+\s+of\s+)?$", stripped[:at])
    if m is None:
        return None
    end = m.start()
    cands = [f for f in gaz.find_all(stripped, normalized=True)
             if f[1] == end and _named_in(sentence, f[2], gaz)]
    if not cands:  # a name the gazetteer does not know: the capitalised words before
        written = _written(sentence)
        words: list[str] = []
        for w in reversed(stripped[:end].split(" ")):
            orig = written.get(w)
            if not re.fullmatch(r"\w+", w) or w in _FUNCTION or w in _ARTICLES \
                    or orig is None or not orig[:1].isupper():
                break
            words.insert(0, w)
        if not words or has_cjk(span) or sentence.lower() == sentence:
            return None
        name = " ".join(words)
        if (ctx.is_fragment(words) and not ctx.in_context(name)) \
                or ctx.from_subject_name(words):  # R-context: the distractor's name
            return None
        return Reading("ANSWER", name, f"SEMANTIC_{semantic_key(name)}", name, 0.5, "J17")
    a, b, alias = min(cands, key=lambda f: f[0])  # the longest name ending there
    keys = gaz.keys_of(alias)
    if not keys:
        return None
    key = min(keys, key=_qid_order)
    aliases = gaz.aliases(key)  # R-context (release 12): the distractor's entity may answer
    if ctx.in_query(gaz, key) and not any(ctx.in_context(a) for a in aliases) \
            or any(a in ctx._mention_aliases for a in aliases):
        return None
    if key in ctx.lexicon.keys_of(span):
        return None
    return Reading("ANSWER", alias, key, gaz.canonical(key), 1.0, "J17")


def _name_around(alias: str, stripped: str, sentence: str) -> str:
    """J15: the core answer is the whole capitalised name the alias is written in.

    ``manufactured by the BMW Motor Group`` answers ``BMW Motor Group`` and ``signed to Blue
    Moon Records`` answers ``Blue Moon Records``: the alias's first occurrence in ``stripped``
    is extended over the adjacent words (no punctuation between) that ``sentence`` writes
    with a capital and that are not function words or articles. Only the span changes; the
    cluster key stays the alias's entity (the guide reads such a name as a variant of it).
    Caseless scripts and all-lower or all-upper sentences keep the alias.
    """
    at = stripped.find(alias)
    if at < 0 or has_cjk(alias) or sentence.lower() == sentence or sentence.upper() == sentence:
        return alias
    capitalised = _capitalised_words(sentence)

    def name_word(w: str) -> bool:
        return (w not in _FUNCTION and w not in _ARTICLES and w in capitalised
                and not w.isdigit())

    before: list[str] = []
    head = stripped[:at]
    if head.endswith(" "):
        for w in reversed(head[:-1].split(" ")):
            if not re.fullmatch(r"\w+", w) or not name_word(w):
                break
            before.insert(0, w)
    if not before and re.search(r"(?:^| )(?:of|de|du|del|von) $", head):
        # release 12: "the Horn of Africa", "the 100th Judicial District of Illinois": a name
        # written with capitals before "of" is a longer name around the alias (J23 decides
        # whether it is another entity)
        words = head.rstrip().split(" ")
        of = words.pop()
        named: list[str] = []
        for w in reversed(words):
            if not re.fullmatch(r"\w+", w) or not (name_word(w) or re.fullmatch(
                    r"\d+(?:st|nd|rd|th)", w) and named):
                break
            named.insert(0, w)
        if named and name_word(named[-1]):
            before = [*named, of]
    after: list[str] = []
    rest = stripped[at + len(alias):]
    if rest.startswith(" "):
        for w in rest[1:].split(" "):
            if not re.fullmatch(r"\w+", w) or not name_word(w):
                break
            after.append(w)
    return " ".join([*before, alias, *after])


#: J12: the prepositions of place and time that open a blank a date can fill ("born in ____",
#: "passed away at", "aired on", "situé à", "成立于"; release 8: "originated from", "aus");
#: six languages
_IN_AT = frozenset("in at on into from en à au aux dans sur a el im am auf bei aus в во на из"
                   .split())


def _blank_after_in_at(query: str) -> bool:
    """J12: the query's blank (``____`` or its open end) follows an in/at/on preposition.

    ``Azis has a citizenship of ____`` or ``is represented by record label`` leave no place or
    time open: a timestamp there is the digits placeholder of J4, not a wrong-type answer.
    """
    head = query.split("____", 1)[0] if "____" in query else query
    head = head.rstrip(" \t")
    if head and is_cjk(head[-1]):
        return head[-1] in "于在"
    words = _tokens(normalize(head))
    return bool(words) and words[-1] in _IN_AT


#: J12: a line that is only a year (or decade), a date or a timestamp
_DATE_LINE = re.compile(r"^\s*(((?:1[0-9]|20)\d{2})(?:s|'s|’s|年)?)"
                        r"(?:-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?\S*)?)?\s*\.?\s*$")
#: J12 (release 14): a full date or timestamp, alone on its line after an article (a date
#: repeated on its line, ``2023-01-22 2023-01-22 2``, stays unread: the labels split on it)
_DATE_RUN = re.compile(r"^\s*(?:(?:the|la|le|el|der|die|das)\s+)?(((?:1[0-9]|20)\d{2})-\d{2}-\d{2}"
                       r"(?:[ T]\d{2}:\d{2}\S*)?)\s*\.?\s*$", re.IGNORECASE)
#: J12 (release 14): an answer frame before the date (``The answer is:``), inline or on its line
_ANSWER_FRAME = re.compile(r"(?i)^\s*(?:the\s+)?answer(?:\s+to\s+(?:this|the)\s+question)?"
                           r"\s+is\s*:?\s*")


def _framed_date(raw: str) -> re.Match[str] | None:
    """J12 (release 14): the first answer line's full date or timestamp.

    Read past an answer frame (``The answer is:`` inline or on a line of its own) and an
    article.
    """
    for line in raw.splitlines():
        if not line.strip():
            continue
        rest = _ANSWER_FRAME.sub("", line, count=1)
        if not rest.strip():
            continue  # the frame alone: its filler is on the next line
        return _DATE_RUN.match(rest)
    return None

_YEAR = re.compile(r"^\W*(?:in|en|im|в|于|在)?\s*(?:(?:the\s+)?year\s+|l'année\s+|el\s+año\s+|"
                   r"(?:dem\s+)?jahr\s+)?(\d{4})(?:s|er|年|-\d{2}(?:-\d{2})?)?(?!\d)")


#: J35: "the <noun> is <filler>" (English only: the other languages' templates gave no case)
_SLOT_NOUN_IS = re.compile(r"^\W*the (\w+) (?:is|was) (.+)$")
_CLASS_NOUN = re.compile(r"^\W*(?:the|le|la|el|der|die|das)\s+(\w+)\s+(\w+)")


#: J38 (release 16): a first-person pronoun opening a sentence, and the auxiliaries that may
#: follow it before the predicate ("I was born in", "I'm a citizen of", "Je suis né à")
_FIRST_PERSON = re.compile(r"^\W*(?:i'm|i|j'|je|ich|yo|я)(?=[\s'])")
_FIRST_PERSON_AUX = frozenset(
    "am m was have been had ai suis etais ete bin war habe soy era fui estoy estaba he".split())


def _first_person(norm: str, ctx: _Context) -> re.Match[str] | None:
    """J38 (release 16): the match of a first-person pronoun that speaks as the subject.

    ``I was born in Gary, Indiana.``, ``I am a citizen of Morocco.``, ``I worked in
    Stuttgart.``.

    Labellers read the speaker as the subject when the pronoun is followed, past auxiliaries
    and articles only, by a word of the asked predicate (a slot word of four letters or more).
    A first-person sentence about anything else (``I am a 15 year old girl``, ``I think
    ...``) and a title opening with ``I`` (``I saw her standing there``) stay what they were.
    """
    m = _FIRST_PERSON.match(norm)
    if m is None:
        return None
    for w in _tokens(norm[m.end():]):
        if w in ctx.slot and len(w) >= 4:
            return m
        if w not in _FIRST_PERSON_AUX and w not in _ARTICLES:
            return None
    return None


#: J39 (release 16): a numbered list item, once the scorer's answer cue is off
#: (``Answer: 2. Morocco``; :func:`fks.score.extract.strip_cue`)
_NUMBERED = re.compile(r"^\s*(\d{1,2})[.)．、]\s*(.*)$")


def _numbered_options(raw: str) -> bool:
    r"""J39 (release 16): a numbered list of different short items, none picked, opens ``raw``.

    ``1. France\nAnswer: 2. Morocco\nAnswer: 3. Algeria``.

    The guide's R-placeholder: a list of different options with no pick asserts no answer; a
    numbered list of one repeated entity is that entity, and a list of sentences (``1. The
    first Baron Lugard was born in 1840.``) is read sentence by sentence as before. Items are
    the lines from the first on, as long as each is numbered; the last line, when the budget
    cut it (no newline after it), is left out, so ``1. 1944年\n2. 1944年\n3. 19`` repeats one
    item. Every item read must be short (an answer on its own, J10's bare-line length), and
    the first two must differ with neither holding the other (``1. Язык Taobao\n2. Taobao``
    names Taobao twice).
    """
    items: list[str] = []
    lines = [ln for ln in _TAG.sub("", raw).splitlines() if ln.strip()]
    if lines and not raw[-1:].isspace():
        lines = lines[:-1]
    for n, line in enumerate(lines, 1):
        m = _NUMBERED.match(strip_cue(line))
        if m is None or int(m.group(1)) != n:
            break
        items.append(normalize(m.group(2)).strip(" .,;:-—–。"))
    if len(items) < 2 or not all(items):
        return False
    short = all(len(_tokens(t)) <= STRING_MAX_WORDS
                and (not has_cjk(t) or len(t) <= STRING_MAX_CJK) for t in items)
    one, two = items[0], items[1]
    # the first two differ, and neither holds the other ("Язык Taobao" then "Taobao" repeats)
    return short and not (_contains(one, two) or _contains(two, one))


def _subject_spans(norm: str, ctx: _Context, sentence: str = "") -> list[tuple[int, int]]:
    """J11: the non-overlapping spans of the subject's names (and anaphors) in ``norm``.

    J22: with no name, pronoun or anaphor, a sentence opening with a definite article and one
    lower-case noun that is not a slot word, then a slot word (``The band was founded in``),
    speaks of the subject by its class noun.
    """
    found: list[tuple[int, int]] = []
    for alias in ctx._mention_aliases:  # longest first
        for m in _name_pattern(alias).finditer(norm):
            if all(m.end() <= a or m.start() >= b for a, b in found):
                found.append(m.span())
    if not found and sentence:
        # J24 (release 15): the name inside a formal name ("Serbia" of "Kingdom of Serbia",
        # "London" of "City of London"), written with a capital, is the subject by its short
        # name ("The capital of Serbia is Belgrade." asked the Kingdom of Serbia's capital)
        written = _written(sentence)
        for tail in ctx.of_tails:
            for m in _name_pattern(tail).finditer(norm):
                if (written.get(m.group().split()[0]) or "a")[:1].isupper() \
                        and all(m.end() <= a or m.start() >= b for a, b in found):
                    found.append(m.span())
    pronoun = re.match(r"\W*\w+", norm) if opens_with_pronoun(norm) else None
    if pronoun is None and not found:
        pronoun = _first_person(norm, ctx)
    if pronoun and all(pronoun.end() <= a for a, _ in found):
        found.append((pronoun.end() - len(pronoun.group().lstrip()), pronoun.end()))
    if ctx._heads and any(h in norm for h in ctx._heads):
        for m in _anaphor_pattern(ctx._heads).finditer(norm):
            if all(m.end() <= a or m.start() >= b for a, b in found):
                found.append(m.span())
    if not found and sentence:
        # J24 (release 13): the sentence opens with the last words of the subject's name, then
        # a slot word ("Muti signed to ..." for Riccardo Muti, "London is the capital of ..."
        # for the City of London): the subject by a short name
        ws = list(_WORD.finditer(norm))
        written = _written(sentence)
        for n in (2, 1):
            if len(ws) > n and ws[n].group() in ctx.slot \
                    and ctx.is_name_tail([w.group() for w in ws[:n]]) \
                    and norm[:ws[0].start()].strip() == "" \
                    and all((written.get(w.group()) or "a")[:1].isupper() for w in ws[:n]):
                found.append((ws[0].start(), ws[n - 1].end()))
                break
    if not found and sentence:
        # J40 (release 16): a sentence opening with a word of the asked predicate ("Born in
        # 1960 in Copenhagen, Denmark.") leaves the subject implied: it is the query's
        ws = list(_WORD.finditer(norm))
        if ws and norm[:ws[0].start()].strip() == "" and ws[0].group() in ctx.slot \
                and len(ws[0].group()) >= 4 and ws[0].group() not in _FUNCTION \
                and (_written(sentence).get(ws[0].group()) or "a")[:1].isupper():
            return [(ws[0].start(), ws[0].start())]
    if not found and sentence:
        m = _CLASS_NOUN.match(norm)
        if m and m.group(1) not in ctx.slot and m.group(1) not in _FUNCTION \
                and not has_cjk(m.group(1)) and m.group(2) in ctx.slot \
                and (_written(sentence).get(m.group(1)) or "A")[:1].islower():
            found.append(m.span(1))
    return sorted(found)


def _first_named(text: str, sentence: str, lex: EntityLexicon | None, adjectives: bool = False
                 ) -> tuple[int, str, EntityLexicon] | None:
    """J11: ``(position, key, lexicon)`` of the first entity ``text`` names as a name.

    ``adjectives``: skip names used as adjectives (J20; for the gazetteer, whose entities are
    not the relation's own).
    """
    if lex is None:
        return None
    found = lex.find_all(text, normalized=True)
    starts = {x for x, _, _ in found}
    for a, b, alias in sorted(found, key=lambda m: (m[0], m[0] - m[1])):
        keys = lex.keys_of(alias)
        if keys and _named_in(sentence, alias, lex) and not (adjectives and
                                                             _adjectival(sentence, alias)) \
                and not _inside_date_or_title(text, a, b, alias, starts):
            return a, min(keys, key=_qid_order), lex
    return None


#: release 16: month names of the six languages (normalised), never a place inside a date
_MONTHS = frozenset("""january february march april may june july august september october
    november december janvier fevrier mars avril mai juin juillet aout septembre octobre
    novembre decembre enero febrero marzo abril mayo junio julio agosto septiembre octubre
    noviembre diciembre januar februar marz juni juli oktober dezember января февраля марта
    апреля мая июня июля августа сентября октября ноября декабря""".split())
_DAY_BEFORE = re.compile(r"\d{1,2}(?:st|nd|rd|th|er)?\s+(?:of\s+|de\s+)?$")
_NUMBER_AFTER = re.compile(r"^\s*,?\s*\d")


def _inside_date_or_title(text: str, a: int, b: int, alias: str, starts: set[int]) -> bool:
    """Release 16: a known name at ``text[a:b]`` that is only a word of something longer.

    A month inside a date (``born on 19th March 1980 in the United States``: the town of
    March is no answer) and a state's formal title word before ``of`` and another name the
    lexicon knows (``starts``: where its names begin in ``text``; ``the capital of the
    Republic of Senegal``: not the town of Republic; J23 reads the formal name as Senegal).
    Before a name it does not know (``the Republic of Srpska``) the title word stays.
    """
    if alias in _MONTHS and (_DAY_BEFORE.search(text[:a]) or _NUMBER_AFTER.match(text[b:])):
        return True
    if alias not in FORMAL_PREFIXES or alias in _OF or alias in _ARTICLES:
        return False
    m = re.match(r"\s+(?:of|de|du|del|von)\s+(?:the\s+)?", text[b:])
    return m is not None and b + m.end() in starts


#: J25: a parenthesis of a few words (an abbreviation: "(GDR)", "(NLD)") is an aside
_PAREN = re.compile(r"\s*[(（][^()（）]{1,40}[)）]")
_OF = frozenset("of de du des von vom del".split())
#: J37: "the <predicate noun> of <filler> is (the city of)" before the subject, at the end
_INVERSE_RESTATED = re.compile(r"^\W*the ((?:\w+ ){0,2}?\w+) of (.+?) (?:is|was)"
                               r"(?: the (?:city|town) of)? (\w+(?: \w+){0,3})\W*$")
#: J25: the sentence puts the subject in the other role of the asked predicate
_INVERSE = Reading("UNPARSEABLE", rule="J25")


def _read_slot(sentence: str, ctx: _Context) -> Reading | None:
    """J11: the filler of the asked slot when the sentence restates the query's predicate."""
    if not ctx.slot:
        return None
    sentence = _PAREN.sub("", sentence)  # J25: "the German Reichsbahn (GDR) is located in"
    norm = normalize(sentence)
    inverse = _INVERSE_RESTATED.match(norm)
    if inverse and ctx.named_before(inverse.group(1)) \
            and all(w in ctx.slot for w in _tokens(inverse.group(1))) \
            and (inverse.group(3) in ctx._mention_aliases
                 or ctx.is_name_tail(_tokens(inverse.group(3)))):
        # J37 (release 14): "The capital city of the United Kingdom is London." asked "London
        # is the capital of which place?": the predicate restated with the subject (or the
        # last words of its name) last; the filler is what the predicate noun is "of"
        filler = re.sub(r"^(?:the|la|le|el|der|die|das)\s+", "", inverse.group(2))
        return _read_filler(filler, sentence, ctx)
    spans = _subject_spans(norm, ctx, sentence)
    if not spans:
        m = _SLOT_NOUN_IS.match(norm)
        first = (_tokens(m.group(2)) or [""])[0] if m else ""
        if m and m.group(1) in ctx.slot and m.group(1) in ctx.query_words \
                and len(m.group(1)) >= 4 and has_content(m.group(2)) \
                and not (first in ctx.slot and len(first) >= 4):
            # J35 (release 13): "The position is a right fielder.", "The country is the
            # United Arab Emirates.": the question's own noun, then a copula, names the filler
            # (not "The continent is located in ...": a predicate word after the copula
            # describes the noun's own referent)
            return _read_filler(_to_sentence_end(m.group(2)), sentence, ctx)
        return None
    a, b = spans[0]
    before = _tokens(norm[:a])
    if not all(w in ctx.slot or w in _FUNCTION or w in ctx.query_words for w in before):
        return None
    # a predicate word: a slot word that is more than a copula, article or preposition
    # ("located", "founded", "capital", "née"; CJK characters count)
    def pred(w: str) -> bool:
        return w in ctx.slot and (len(w) >= 4 or has_cjk(w))

    predicate = [w for w in before if pred(w)]
    # J38: the subject is the speaker ("I am a citizen of"): its auxiliaries are walked over
    # (the first span is the pronoun itself, as _subject_spans found it)
    fp = _FIRST_PERSON.match(norm)
    speaker = fp is not None and (a, b) == (fp.end() - len(fp.group().lstrip()), fp.end())
    # walk the predicate after the subject: slot words and function words (not a name);
    # capitalised words right after the subject continue its name ("The Boeing Company was
    # founded in ..."): they are skipped
    rest = norm[b:]
    pos = 0
    ms = list(_WORD.finditer(rest))
    written = _written(sentence)
    lead = 0
    while lead < len(ms) and not has_cjk(ms[lead].group()) \
            and ms[lead].group() not in _FUNCTION and ms[lead].group() not in ctx.slot \
            and (written.get(ms[lead].group()) or "a")[:1].isupper() \
            and rest[:ms[lead].start()].strip(" ") == " ".join(
                m.group() for m in ms[:lead]):
        lead += 1
    if lead:
        pos = ms[lead - 1].end()
    asserted = common = False  # J32: a predicate word after the subject; "is a <noun>" read
    for i, m in enumerate(ms):
        if i < lead:
            continue
        w = m.group()
        if has_cjk(w) or not (w in ctx.slot or w in _FUNCTION
                              or (speaker and w in _FIRST_PERSON_AUX)):
            break
        if w in _INDEFINITE:
            nxt = ms[i + 1].group() if i + 1 < len(ms) else ""
            if nxt not in ctx.slot or nxt in _FUNCTION:
                if asserted or ctx.lexicon.common_nouns:
                    # J32 (release 11): after the predicate the article opens the filler
                    # ("plays as a receiver"); where the relation's objects are common nouns,
                    # "is a linebacker" names one (read below only when it is a known one)
                    pos = m.start()
                    common = not asserted
                    break
                got = _relative_filler(rest[m.end():], sentence, ctx)
                if got is not None:
                    return got
                if ctx.slot & _LOCATED:
                    return _located_class(rest[m.end():], sentence, ctx)
                return None  # "is a country in ..." describes; "is a citizen of" is the slot
        if pred(w):
            predicate.append(w)
            asserted = True
            nxt = ms[i + 1].group() if i + 1 < len(ms) else ""
            if nxt in _OF and ctx.object_of(w) \
                    and not ctx.mask_subject(rest[ms[i + 1].end():])[1]:
                return _INVERSE  # J25: "X is the capital of Y" asked the capital of X
        pos = m.end()
    else:
        pos = len(rest)
    if common:
        filler = rest[pos:]
        cut = re.search(r"[.;!?。,]\s|[.;!?。,]$", filler)
        named = _first_named(filler[:cut.start()] if cut else filler, sentence, ctx.lexicon)
        if named is None:
            return None  # "is a 20-year-old" names no position: a description
        return _entity(ctx.lexicon, named[1], filler, sentence, "J32", ctx)
    if not predicate:
        return None
    filler = rest[pos:].strip(" ,:;")
    filler = _to_sentence_end(filler)
    if not has_content(filler):
        return None
    return _read_filler(filler, sentence, ctx)


#: J33: the predicate words of a "where is it located" slot, in the six languages
_LOCATED = frozenset("located situé située situés encuentra ubicado ubicada befindet liegt "
                     "находится расположен расположена 位于".split())
#: J33: a class noun phrase ("small town", "tropical island") then a place preposition
_CLASS_THEN_IN = re.compile(r"^((?:[a-zà-öø-ÿ-]+ ){0,3}[a-zà-öø-ÿ-]+) (?:in|on|at|en|dans|à|au)"
                            r" (.+)$")


_RELATIVE_START = re.compile(r"^((?:[\w'’-]+ ){1,6}?)(?:who|that|which|qui|que|der|die|das|"
                             r"который|которая|которое) (.+)$")


def _relative_filler(rest: str, sentence: str, ctx: _Context) -> Reading | None:
    """J34 (release 11): ``is a bank that is based in the United Kingdom``.

    After the subject's class noun phrase (up to six words, no punctuation), a relative clause
    that restates the asked predicate (slot words up to a predicate word: ``that is based in``,
    ``who plays as``) fills the slot with what follows, read as J11 reads a filler.
    """
    m = _RELATIVE_START.match(rest.strip())
    if m is None:
        return None
    ms = list(_WORD.finditer(m.group(2)))
    end = seen = 0
    for w in ms:
        t = w.group()
        if has_cjk(t) or not (t in ctx.slot or t in _FUNCTION):
            break
        if t in _INDEFINITE and seen:
            break  # "who plays as a winger": the article opens the filler (J32)
        seen += t in ctx.slot and len(t) >= 4
        end = w.end()
    if not seen:
        return None
    filler = m.group(2)[end:].strip(" ,:;")
    filler = _to_sentence_end(filler)
    if not has_content(filler):
        return None
    got = _read_filler(filler, sentence, ctx)
    if got is None or got.kind != "ANSWER" or got.rule == "J5":
        return None
    return replace(got, rule="J34")


def _located_class(rest: str, sentence: str, ctx: _Context) -> Reading | None:
    """J33 (release 11): ``<subject> is a small town in the north of the Czech Republic``.

    Asked where the subject is located, a sentence that puts it in a class ("a small town",
    "a river", "a county") *in* a place answers with that place: the first place named after
    the preposition (J11's filler reading; ``the north of the country`` names none, and the
    sentence is then no answer). The class noun phrase is up to four lower-case words with no
    function word (``a type of protein found in the cells`` is no class phrase). For any
    other slot, "is a country in ..." stays a description (J8).
    """
    m = _CLASS_THEN_IN.match(rest.strip())
    if m is None or any(w in _FUNCTION and w not in ctx.slot for w in m.group(1).split()):
        return None  # "a county located in" keeps the slot's own word
    written = _written(sentence)
    if any((written.get(w) or "a")[:1].isupper() for w in _tokens(m.group(1))):
        return None  # a capitalised word is a name, not a class noun
    filler = m.group(2).split(" ")
    while filler and filler[0] in _ARTICLES:
        filler.pop(0)
    if not [w for w in filler if w not in _FUNCTION]:
        return None  # "is a small town in the" cut by the budget
    got = _read_filler(" ".join(filler), sentence, ctx)
    if got is None or got.kind != "ANSWER" or got.rule == "J5":
        return None  # "a small town in the <subject>": no place of its own
    return replace(got, rule="J33")


def _to_sentence_end(filler: str) -> str:
    """J11: ``filler`` up to its sentence's end (a stop, semicolon or mark, then space or end)."""
    cut = re.search(r"[.;!?。]\s|[.;!?。]$", filler)
    return filler[:cut.start()] if cut else filler


def _read_filler(filler: str, sentence: str, ctx: _Context) -> Reading | None:
    """J11: read the words that fill the asked slot (normalised ``filler`` of ``sentence``)."""
    masked, n_again = ctx.mask_subject(filler)
    if n_again and all(w in _ARTICLES or w in _FUNCTION for w in _tokens(masked)):
        return _subject_answer(sentence, ctx)  # J5: the subject fills its own slot
    first = [f for f in (_first_named(filler, sentence, ctx.lexicon),
                         _first_named(filler, sentence, ctx.gazetteer, adjectives=True))
             if f is not None]
    year = _YEAR.match(filler)
    if first:  # a named entity fills the slot even after a year adjunct ("in 1961 in X")
        pos, key, lex = min(first, key=lambda f: f[0])
        # J17: the entity may only qualify a name before it ("the city of Inoue, Japan"; the
        # relation's entity, and from release 12 any gazetteer entity)
        alias = next(m[2] for m in lex.find_all(filler, normalized=True) if m[0] == pos)
        qualified = _qualified(alias, filler, sentence, ctx)
        if qualified is not None:
            return qualified
        return _entity(lex, key, filler, sentence, "J11", ctx)
    if year is not None:
        # "founded in 1961 in the United States": a name after the year adjunct fills the slot
        after = re.match(r"\W*(?:in|at|en|à|au|im|in der|в)\s+(?:the\s+|la\s+|le\s+|l')?(.+)$",
                         filler[year.end():])
        name = _ASIDE.split(after.group(1), maxsplit=1)[0].strip() if after else ""
        part = _PART_OF.match(name)
        if part:  # J26 after the year (release 9): "in 1858 in the town of Kaman" -> Kaman
            name = name[part.end():]
        if name and len(_tokens(name)) <= STRING_MAX_WORDS and _all_capitalised(name, sentence):
            return Reading("ANSWER", name, f"SEMANTIC_{semantic_key(name)}", name, 0.5, "J11")
        y = year.group(1)
        return Reading("ANSWER", y, f"SEMANTIC_{y}", y, 0.5, "J11")
    part = _PART_OF.match(filler)
    if part:  # J26: "the north of the Caspian Sea", "the city of Vinci": the name after "of"
        filler = filler[part.end():]
    words = _tokens(filler)
    if words and words[0] in _INDEFINITE and ctx.lexicon.common_nouns:
        # J32: "plays as a receiver": where the relation's objects are common nouns, the noun
        # after the restated predicate's article is the answer (up to a function word)
        head = []
        for w in words[1:]:
            if w in _FUNCTION or has_cjk(w):
                break
            head.append(w)
        key = " ".join(head)
        if not head or len(head) > STRING_MAX_WORDS or len(key) < 3 \
                or is_placeholder(key, ctx.numeric) or ctx.is_fragment(head):
            return None
        return Reading("ANSWER", key, f"SEMANTIC_{key}", key, 0.5, "J32")
    if not words or words[0] in _INDEFINITE or len(words) > STRING_MAX_WORDS:
        return None
    head = _ASIDE.split(filler, maxsplit=1)[0].strip()
    hw = head.split(" ")
    while len(hw) > 1 and hw[-1] in ctx.slot and hw[-1] not in _FUNCTION:
        hw.pop()  # release 11: "the ABC network": the relation's own class noun qualifies
    written = _written(sentence)
    if len(hw) >= 2 and (written.get(hw[-1]) or "A")[:1].islower() \
            and hw[-1] not in _FUNCTION and _all_capitalised(" ".join(hw[:-1]), sentence) \
            and sentence.lower() != sentence:
        hw.pop()  # release 11: "the Munich region": a class noun after a name qualifies it
    head = " ".join(hw)
    key = semantic_key(head)
    # a two-letter name must be written in capitals, an abbreviation ("in the UK"): the slot
    # holds it; elsewhere two letters are a fragment
    short = len(key) == 2 and key.isalpha() and re.search(
        r"(?<!\w)" + re.escape(key.upper()) + r"(?!\w)", sentence) is not None
    # a name of the context's other sentence is its entity (R-context), not an echo's fragment
    distractor = ctx.in_context(key) \
        and not ctx.restates(normalize(sentence), key)  # not that sentence's words reshuffled
    if (len(key) < 3 and not short) or not _looks_named(head, sentence) \
            or is_placeholder(key, ctx.numeric) \
            or (ctx.is_fragment(_tokens(key)) and not distractor) \
            or not _all_capitalised(head, sentence):
        return None
    return Reading("ANSWER", head, f"SEMANTIC_{key}", head, 0.5, "J11")


#: J31: words that open a relative clause: a phrase holding one is a description
_RELATIVE = frozenset("that which who whom whose where que qui quien quienes donde dont "
                      "welcher welche welches который которая которое которые где".split())


def _read_fragment(sentence: str, ctx: _Context) -> Reading | None:
    """J31 (release 11): a sentence made only of place phrases answers a where-question.

    ``In the north of Russia, in the Ural Mountains.`` or ``In the province of Karnataka.``
    names no subject and no predicate: every clause opens with a preposition, and the whole is
    the filler of the asked slot cut out of its sentence (the guide's R-first: the first named
    entity). The clauses are read in turn, each as a slot's filler (J11, J26: ``the south of
    the country`` names nothing, so ``in the province of Sibenik`` answers); the first that
    names something is the answer. A clause that is no place phrase (``in the studio of the
    conductor, who was a member of ...``) makes the sentence something else, read by the other
    rules. A first line that is only a year or decade is J27's.
    """
    norm = normalize(_PAREN.sub("", sentence))
    clauses = [c.strip() for c in re.split(r"[,;，；]", norm) if c.strip()]
    if not clauses or ctx.mask_subject(norm)[1] or opens_with_pronoun(norm):
        return None
    fillers = []
    for clause in clauses:
        words = clause.split(" ", 1)
        if len(words) < 2 or words[0] not in _IN_AT \
                or any(w in _RELATIVE for w in _tokens(words[1])):
            return None  # "on the network that was used by the BBC" describes
        rest = words[1].split(" ")
        while len(rest) > 1 and rest[0] in _ARTICLES:
            rest.pop(0)  # as J11's walk drops them after the predicate
        fillers.append(" ".join(rest))
    for filler in fillers:
        got = _read_filler(filler, sentence, ctx) if has_content(filler) else None
        if got is not None and got.kind == "ANSWER" and got.span and (
                got.key.startswith("ENTITY_") or has_cjk(got.span)
                or any(m.group()[:1].isupper()
                       for m in _name_pattern(got.span).finditer(_deaccent(sentence)))):
            return replace(got, rule="J31")  # "in the north of the country." names nothing
    return None


def _read_sentence(sentence: str, ctx: _Context, bare: bool, completes: bool
                   ) -> Reading | None:
    """J5-J9 on one sentence, then J31: a reading, or None (nothing asserted here)."""
    got = _read_clauses(sentence, ctx, bare, completes)
    return got if got is not None else _read_fragment(sentence, ctx)


def _read_clauses(sentence: str, ctx: _Context, bare: bool, completes: bool
                  ) -> Reading | None:
    """J5-J9 on one sentence: a reading, or None (nothing asserted here).

    ``bare``: the sentence is a whole short line (at most four words), an answer on its own;
    ``completes``: it continues the prompt's own unfinished sentence (first line, same line).
    """
    slot = _read_slot(sentence, ctx)
    if slot is _INVERSE:
        return None
    if slot is not None:
        return slot
    stripped, n_subject = ctx.mask_subject(normalize(sentence))
    n_subject += ctx.anaphors(stripped) + opens_with_pronoun(stripped)
    words = _tokens(stripped)
    if len(words) == 1 and opens_with_pronoun(stripped):
        return None  # release 14: a pronoun alone ("... Versailles. She", cut by the budget)
    if not [w for w in words if w not in _FUNCTION]:
        # J5: only the subject (and articles) named; "Arisaka, who was from" echoes the prompt
        only = n_subject and all(w in _ARTICLES for w in words)
        return _subject_answer(sentence, ctx) if only else None
    long_sentence = len(words) > STRING_MAX_WORDS

    def distractor(lex: EntityLexicon, key: str, span: str) -> bool:
        """J6: a full sentence about something else asserts nothing for our subject.

        It names neither our subject nor only the entity (``The United States of America``),
        and does not complete the prompt's own sentence (``The capital of the United Arab
        Emirates is ...`` answering which country Abuja is the capital of).
        """
        if n_subject or completes or bare:
            return False  # a bare line naming the distractor's entity answers with it (R-context)
        rest_text = stripped.replace(span, " ")
        rest = [w for w in _tokens(rest_text) if w not in _FUNCTION]
        if not rest:
            return False
        if ctx.in_query(lex, key):
            return True
        # a long sentence is about something else when it names another entity or restates
        # a predicate about it ("The capital of the United Arab Emirates is"), not when it
        # only qualifies the answer ("In the north of Pakistan")
        return long_sentence and (ctx.names_other(rest_text, sentence)
                                  or any(w in ctx.query_words or w in ctx.slot for w in rest))

    content = [w for w in words if w not in _FUNCTION]
    if not n_subject and len(content) <= STRING_MAX_WORDS and ctx.from_subject_name(words):
        # J8: a bare answer made of the subject's own words (a part or a garbled form of its
        # name: "FC Leipzig" for 1. FC Lokomotive Leipzig) is an answer of its own, even where
        # it holds a known name ("Leipzig" inside the club's name is not the city); a known
        # entity that is the whole line ("Airbus" for Airbus A320) stays that entity below
        whole = ctx.lexicon.resolve(stripped)
        span = ctx.lexicon.alias_in(stripped, whole.key) if whole.key else None
        if span is None and bare and ctx.is_name_tail(content) and (
                ctx.gazetteer is None or not ctx.gazetteer.find_all(stripped, normalized=True)):
            # J24: the last words of the subject's name alone ("Martin" for George Martin,
            # a surname) name the subject, when they name no known entity of their own
            full = max((m for m in ctx.mentions if m.strip()), key=len)
            key, canonical, _ = subject_key(full, ctx.mentions, ctx.lexicon, ctx.gazetteer)
            return Reading("ANSWER", clean(sentence), key, canonical,
                           1.0 if key.startswith("ENTITY_") else 0.5, "J24")
        if span is None or [w for w in _tokens(stripped.replace(span, " "))
                            if w not in _FUNCTION]:
            key = semantic_key(sentence)
            if len(key) >= 3 and _looks_named(key, sentence):
                return Reading("ANSWER", clean(sentence), f"SEMANTIC_{key}", clean(sentence),
                               0.5, "J8")
    res = ctx.lexicon.resolve(ctx.shadow(stripped, sentence))
    if res.kind == "entity" and res.key is not None:
        span = ctx.lexicon.alias_in(stripped, res.key) or ""
        if _named_in(sentence, span, ctx.lexicon):
            if distractor(ctx.lexicon, res.key, span):
                return None  # J6: the query's other (distractor) sentence repeated
            if ctx.governed_elsewhere(stripped, span) or ctx.located(stripped, span):
                return None  # J14: "was born in Paris" asked where she died; release 20
            whole = _whole_name(stripped, span, sentence, ctx) if bare else None
            if whole is not None:
                return whole
            first = _qualified(span, stripped, sentence, ctx)
            if first is not None:
                # J14 (release 13): the qualified name may fill another predicate ("born in
                # the town of Lemberg, Ukraine" asked where he died)
                return None if ctx.governed_elsewhere(stripped, first.span or "") else first
            return _entity(ctx.lexicon, res.key, stripped, sentence, "J6", ctx)
    elif res.kind == "conflict":
        first = min(ctx.lexicon.find_all(stripped, normalized=True), default=None)
        if first is not None and ctx.governed_elsewhere(stripped, first[2]):
            return None  # J14: "born in Paris, France" asked where she died
        got = _read_conflict(stripped, sentence, ctx.lexicon)
        if got is not None:
            return got
    elif res.kind == "ambiguous_alias" and res.text is not None:
        key = semantic_key(res.text)
        return Reading("ANSWER", res.text, f"SEMANTIC_{key}", res.text, 0.7, "J6")
    if _ABSTENTION.search(stripped):
        return Reading("ABSTAIN", rule="J9")
    if _DESCRIPTION.match(stripped):
        return None  # J8: "<subject> is a country in ..." describes, answers nothing
    rest, echoed = ctx.echo_rest(stripped)
    if bare:  # J8: a bare line is its own answer (only leading function words dropped)
        lead = stripped.split()
        while lead and lead[0] in _FUNCTION:
            lead.pop(0)
        rest = " ".join(lead)
    head = _ASIDE.split(rest, maxsplit=1)[0].strip()
    if ctx.gazetteer is not None:
        short_head = head if len(_tokens(head)) <= STRING_MAX_WORDS else ""
        for text in (short_head, stripped):  # J6: the completion, else question words + entity
            g = ctx.gazetteer_entity(text, sentence) if text else None
            if g is None:
                continue
            span = ctx.gazetteer.alias_in(text, g) or text
            if text is stripped and not (n_subject or ctx.restates(stripped, span)):
                continue
            if distractor(ctx.gazetteer, g, span):
                return None
            if ctx.governed_elsewhere(stripped, span) or ctx.located(stripped, span):
                return None  # J14; release 20
            qualified = _qualified(span, stripped, sentence, ctx)
            if qualified is not None:  # J17 (release 12): "the town of Vinci, in the province of X"
                return None if ctx.governed_elsewhere(stripped, qualified.span or "") \
                    else qualified  # J14 (release 13), as above
            return _entity(ctx.gazetteer, g, text, sentence, "J6", ctx)
    if bare and not n_subject and ctx.is_echo(words) and _distractor_name(head, sentence, ctx):
        # J6: a bare line that is a name of the context sentence ("Dodge 600" after "Dodge 600
        # is produced by Dodge. Which company manufactures ...?") answers with that name
        key = semantic_key(head)
        return Reading("ANSWER", head, f"SEMANTIC_{key}", head, 0.5, "J6")
    if ctx.is_echo(words):
        return _subject_answer(sentence, ctx) if n_subject >= 2 else None  # J5 / J7
    if not (bare or n_subject or (echoed and completes)):
        return None  # J8: a string answer is a bare line or completes a sentence about ours
    if not _looks_named(head, sentence):
        return None  # J8: "the country" is no name
    if len([w for w in _tokens(head) if w not in _FUNCTION]) >= 2 and \
            not _all_capitalised(head, sentence) and not (bare and ctx.lexicon.common_nouns):
        return None  # J8: "North of the country", "рассвязь на этих элемент" describe; a
        # bare line may be a common noun where the relation names its objects so ("Defensive
        # end." asked a position)
    key = semantic_key(head)
    if len(key) < 3 or not has_content(key) or key[:1].isdigit() and not ctx.numeric:
        return None  # J8: "FC" alone is a fragment
    hw = _tokens(key)
    if (len(hw) > STRING_MAX_CJK) if has_cjk(key) else \
            (len(hw) > STRING_MAX_WORDS or hw[0] in _INDEFINITE or hw[-1] in _FUNCTION):
        return None
    if ctx.is_fragment(hw) or is_placeholder(key, ctx.numeric):
        return None
    return Reading("ANSWER", head, f"SEMANTIC_{key}", head, 0.5, "J8")


def _whole_name(stripped: str, span: str, sentence: str, ctx: _Context) -> Reading | None:
    """J13: a bare line that is one longer name around a known alias is that longer name.

    ``Dodge 600`` or ``Toyota Sprinter`` (the context sentence's product) is not ``Dodge``: the
    guide keeps an entity apart from a longer name that contains it. The whole line is looked
    up again (relation lexicon, then gazetteer); a name no lexicon knows is a string answer.
    Only in a cased script, and only when every word of the line is written with a capital
    or is a number.
    """
    line = stripped.strip(" .,:;!")
    if line == span or has_cjk(line) or not line.startswith(span):
        return None
    extra = _tokens(line[len(span):])
    if not extra or any(w in _FUNCTION for w in extra):
        return None
    written = _ASIDE.split(clean(sentence), maxsplit=1)[0].strip(" .,:;!")
    if normalize(written) != line or not all(w[:1].isupper() or w[:1].isdigit()
                                             for w in written.split()):
        return None
    for lex in (ctx.lexicon, ctx.gazetteer):
        keys = lex.keys_of(line) if lex is not None else frozenset()
        if len(keys) == 1:
            key = next(iter(keys))
            return Reading("ANSWER", written, key, lex.canonical(key), 1.0, "J13")
    return Reading("ANSWER", written, f"SEMANTIC_{semantic_key(written)}", written, 0.5, "J13")


#: release 20: a locative phrase right before a place (``located in``, ``a popular truck in``,
#: ``in the city of``), normalised text
_LOCATIVE = re.compile(
    r"(?:\b(?:located|situated|based|popular|sold|available|spoken|lives?|living|found)\b"
    r"[^.,;:]*?\bin\s+(?:the\s+)?|\bin\s+the\s+(?:city|state|province|country|region|town|"
    r"village|county|district|capital)\s+of\s+(?:the\s+)?)$")
#: lower-case words inside a name (``Bank of America``, ``Rio de Janeiro``)
_NAME_PARTICLES = frozenset("of the and de du des del la le los las y et von van der den "
                            "und di da do dos".split())


def _cued_lines(raw: str) -> frozenset[str]:
    r"""Release 19: the lines of ``raw`` written after an answer cue, normalised.

    The cue on the line itself (``Answer: Kowsar County``) or alone on the line before it
    (``Answer:`` then ``Sena Medal``); the first line answers the prompt's own question.

    >>> sorted(_cued_lines("Kowsar County is in Iran.\nAnswer: Kowsar County\nAnswer:\nIran"))
    ['iran', 'kowsar county', 'kowsar county is in iran']
    """
    out: set[str] = set()
    pending = True
    for line in raw.splitlines():
        if not line.strip():
            continue
        rest = strip_cue(line)
        if rest.strip() != line.strip():  # a cue opens the line
            value = strip_line(rest)
            if value:
                out.add(normalize(value))
            pending = not value  # "Answer:" alone: the next line is its value
            continue
        if pending:
            out.add(normalize(strip_line(line)))
        pending = False
    return frozenset(out)


def _edge_name(sentence: str, end: bool = False) -> str:
    """Return the capitalised name a sentence opens with (``end``: ends with), normalised.

    Articles before it are dropped (``The Durham Bulls …``), as are particles at its edges.

    >>> _edge_name("The Durham Bulls Athletic Park is owned by Durham.")
    'durham bulls athletic park'
    >>> _edge_name("Durham owns Durham Bulls Athletic Park.", end=True)
    'durham bulls athletic park'
    """
    words = sentence.rstrip(".").split() if end else sentence.split()
    if end:
        words.reverse()
    while not end and words and normalize(words[0]) in _ARTICLES:
        words.pop(0)
    name: list[str] = []
    for w in words:
        if not (w[:1].isupper() or (name and w in _NAME_PARTICLES)):
            break
        name.append(w)
    while name and (name[-1] in _NAME_PARTICLES or normalize(name[-1]) in _ARTICLES):
        name.pop()
    if end:
        name.reverse()
    return normalize(" ".join(name))


def _distractor_line(text: str, ctx: _Context) -> bool:
    """Release 19 (guide §9): ``text`` is only a name the query's context sentence writes.

    ``Kowsar County``, ``The Durham Bulls Athletic Park.``: the distractor's subject. Such a
    line is a bare answer of any length (R-context), and it is read even when an echoed
    context sentence before it starts with the same words: it names, it does not loop.
    """
    if not ctx.context_sentences:
        return False
    head = strip_line(text).strip().rstrip(".")
    words = head.split()
    while words and normalize(words[0]) in _ARTICLES:
        words.pop(0)
    if not words or any(w[:1].islower() and w not in _NAME_PARTICLES for w in words):
        return False  # a sentence ("Kowsar County is located in Iran."), not a name
    # the whole name the context sentence opens with (its subject), not the start of it
    # ("La Libre" cut by the budget is the echo starting again)
    return normalize(" ".join(words)) in ctx.context_subjects


def _distractor_name(head: str, sentence: str, ctx: _Context) -> bool:
    """J6: ``head`` is a capitalised name written in a query sentence before the question."""
    name = normalize(head)
    words = _tokens(name)
    if not ctx.context_sentences or not words or words[-1] in _FUNCTION \
            or not _looks_named(head, sentence) or not _all_capitalised(head, sentence):
        return False
    return ctx.in_context(name)


def _read_conflict(stripped: str, sentence: str, lex: EntityLexicon) -> Reading | None:
    """J6: several entities in one sentence.

    A list or alternative of them is ``MULTIPLE``; otherwise the first one the sentence names
    is its answer (the rest are asides).
    """
    matches = sorted(lex.find_all(stripped, normalized=True), key=lambda m: (m[0], m[0] - m[1]))
    kept: list[tuple[int, int, str]] = []
    for m in matches:
        if all(m[0] >= k[1] for k in kept) and _named_in(sentence, m[2], lex):
            kept.append(m)
    if not kept:
        return None
    between = [stripped[a[1]:b[0]] for a, b in zip(kept, kept[1:], strict=False)]
    qualifier = len(between) == 1 and re.fullmatch(r"\s*,\s*", between[0]) is not None
    if between and not qualifier and all(_JOINER.fullmatch(g) for g in between):
        return Reading("MULTIPLE", rule="J6")  # "Paris or Lyon", "Denmark, Norway and Sweden"
    # J26 (R-qualifier): two names with only a comma between ("Tokyo, Japan") are a name and
    # its qualifier: the first is the answer
    alias = kept[0][2]
    keys = lex.keys_of(alias)
    if len(keys) != 1:
        return Reading("ANSWER", alias, f"SEMANTIC_{semantic_key(alias)}", alias, 0.7, "J6")
    key = next(iter(keys))
    return Reading("ANSWER", alias, key, lex.canonical(key), 1.0, "J6")


def _wraps(line: str) -> bool:
    """J18: ``line`` stops inside a sentence (``The first step in the process of``).

    Three or more words, no closing punctuation, and a last word in lower case (a cased
    script only): the model wrapped its sentence onto the next line.
    """
    text = _TAG.sub("", line).strip()
    words = text.split()
    if len(words) < 3 or _CUE_LINE.match(text) or _QUESTION_LINE.match(text):
        return False
    last = words[-1]
    return last.isalpha() and last.islower() and not has_cjk(last)


def _join_wrapped(raw: str) -> str:
    r"""J18: join each line that continues a sentence wrapped from the line before it.

    ``...is to identify the\nproblem.`` is one sentence, not a bare line ``problem``. A line
    that opens with a cue, an option or list marker, a bullet or a question is never joined.
    """
    if "\n" not in raw:
        return raw
    out: list[str] = []
    for line in raw.split("\n"):
        head = line.strip()
        if out and head and line[:1] not in " \t" and _wraps(out[-1]) \
                and (head[:1].isalpha() or _QUOTE_OPEN.match(head)) \
                and not _SCAFFOLD_START.match(head) \
                and head.split()[:2] != out[-1].split()[:2]:  # not a loop restarting the line
            out[-1] = out[-1].rstrip() + " " + head
        else:
            out.append(line)
    return "\n".join(out)


#: J18 (release 13): a wrapped sentence's rest may open with a quotation mark
#: (``Buber's theory of the\n"double consciousness"``)
_QUOTE_OPEN = re.compile(r"^[\"“«„'‘]\w")
#: J18: lines that open with scaffolding, never a wrapped sentence's rest
_SCAFFOLD_START = re.compile(
    r"(?i)^(?:\(?[A-E][.):）]|\d{1,2}[.)]|[-*•·>#]|(?:q|question|query|pregunta|frage|"
    r"вопрос|answer|a|r[ée]ponse|respuesta|antwort|ответ|explanation)\s*\d*\s*[:：.])")
_CUE_LINE = re.compile(r"(?i)^\W*(?:answer|r[ée]ponse|respuesta|antwort|ответ)\s*[:：]")
_QUESTION_LINE = re.compile(r"[?？]\s*$|(?i:^\W*(?:q|question)\s*\d*\s*[:：.])")
#: J19: the model answering a question of its own (the guide's "answer to another question")
_OWN_QUESTION = re.compile(
    r"(?i)\banswer to (?:the |this )?question\s*[\"“«„']([^\"”»“]*)")


def _own_question_cut(raw: str, ctx: _Context) -> str:
    """J19: the continuation up to a line answering a question the model posed itself.

    ``The answer to the question "What is the capital of France?" is: Paris`` answers another
    question (the guide's R-scope): nothing from that line on counts. A quoted question that
    names our subject is ours restated, and is read.
    """
    m = _OWN_QUESTION.search(raw)
    if m is None:
        return raw
    quoted = normalize(m.group(1))
    if ctx.mask_subject(quoted)[1] or (quoted and ctx.is_echo(_tokens(quoted))
                                       and ctx.anaphors(quoted)):
        return raw
    return raw[:raw.rfind("\n", 0, m.start()) + 1]


#: J26: a part or class of a place before its name ("the north of", "the city of")
_PART_OF = re.compile(r"^(?:the\s+)?(?:[a-z-]+\s+){1,3}?(?:of|de|du|del|von)\s+(?:the\s+)?")
#: J29: an option line, ``A. text`` / ``(B) text`` / ``C: text``
_OPTION_LINE = re.compile(r"^\s*\(?([A-H])[.):）]\s*(.*?)\s*$")


def _one_repeated_option(raw: str) -> str | None:
    r"""J29 (release 9): the one text of an invented option list whose options all repeat it.

    ``A. the Middle East\nB. the Middle East\nC. the Midd`` offers no choice: every option says
    the same thing, so the list is that one answer (the labelling brief's "a list of one
    repeated entity is that entity"). Two or more different letters, every option's text equal
    after cues and marks are stripped, the last one perhaps cut short by the budget (a prefix,
    or empty); otherwise None. The text is then read as a line of its own, so a repeated
    placeholder (``A. a``), description or the subject is read as such.
    """
    opts = [(m.group(1), strip_line(m.group(2)) or "") for m in
            map(_OPTION_LINE.match, (_TAG.sub("", ln) for ln in raw.splitlines())) if m]
    if len({letter for letter, _ in opts}) < 2:
        return None
    texts = [normalize(t) for _, t in opts]
    head = texts[0]
    if not has_content(head) or any(t != head for t in texts[1:-1]) \
            or not head.startswith(texts[-1]):
        return None
    return opts[0][1]


def _option_names(text: str) -> bool:
    """J29: the repeated option is a name.

    At most four words besides articles, every content word capitalised once an article and a
    part-of head are dropped (``the city of Vienna``); a description (``the French border``,
    ``the ocean``), a placeholder (``a``, ``100%``) names nothing.
    """
    norm = normalize(text)
    if len([w for w in _tokens(norm) if w not in _ARTICLES]) > STRING_MAX_WORDS:
        return False  # release 11: an article is no word of the name (the British East ...)
    if has_cjk(text):
        return True
    part = _PART_OF.match(norm)
    words = [w for w in _tokens(norm[part.end():] if part else norm)
             if w not in _ARTICLES and w not in _FUNCTION]
    written = _written(text)
    return bool(words) and all(w[:1].isdigit() or (written.get(w) or "a")[:1].isupper()
                               for w in words)


#: J27: a line holding only a year or a decade, perhaps after "in"
_BARE_YEAR = re.compile(r"(?i)^\s*(?:in\s+)?(?:the\s+)?(((?:1[0-9]|20)\d{2})(?:s|'s|’s)?)\.?\s*$")
#: J21: ``[article] NAME [noun] is a ...``: a sentence that defines NAME
_DEFINITION = re.compile(
    r"^\W*(?:(?:the|le|la|les|der|die|das|el|los|las)\s+)?(?P<name>[^\W\d_][\w'’-]*"
    r"(?:\s+[\w'’-]+){0,3}?)\s+(?:is|was|est|ist|war|es|era)\s+"
    r"(?:a|an|un|une|ein|eine|einen|uno|una)\s", re.IGNORECASE)


def _defines_other(sentence: str, ctx: _Context) -> bool:
    """J21: the sentence defines another entity (``The Italian language is a Romance language``).

    It opens with a known name (the relation's lexicon or the gazetteer), capitalised as
    written and perhaps followed by one lower-case noun, then a copula and an indefinite
    article, and it never names our subject: it is about that entity (the guide's "a
    definition of a word in the question"), and the pronouns after it refer to it.
    """
    m = _DEFINITION.match(sentence)
    if m is None:
        return False
    norm = normalize(sentence)
    if ctx.mask_subject(norm)[1] or opens_with_pronoun(norm):
        return False
    name = m.group("name")
    words = name.split()
    if len(words) > 1 and words[-1][:1].islower():
        words = words[:-1]  # "The Italian language": the name and its class noun
    head = normalize(" ".join(words))
    if not head or not all(w[:1].isupper() or normalize(w) in _FUNCTION for w in words) \
            or not words[0][:1].isupper() or has_cjk(head):
        return False
    return True


def read_answer(raw: str, *, query: str, mentions: tuple[str, ...], lexicon: EntityLexicon,
                gazetteer: EntityLexicon | None = None, numeric: bool = False,
                slot: frozenset[str] = frozenset(),
                foreign: frozenset[str] = frozenset(), place: bool = True) -> Reading:
    r"""Read one continuation (rules J1-J10 of the module docstring).

    >>> lex = EntityLexicon({"ENTITY_Q5838": ("Kabul", ["Kabul", "喀布尔"])})
    >>> r = read_answer("\nThe capital of Afghanistan is Kabul.\nAnswer:", lexicon=lex,
    ...                 query="What is the capital of Afghanistan?", mentions=("Afghanistan",))
    >>> r.kind, r.key
    ('ANSWER', 'ENTITY_Q5838')
    >>> read_answer("\n\nAnswer:\n\nAnswer:", query="?", mentions=(), lexicon=lex).kind
    'UNPARSEABLE'
    """
    if not raw.strip():
        return Reading("UNPARSEABLE", rule="J1")
    ctx = _Context(query, mentions, lexicon, gazetteer, numeric, slot, foreign, place)
    raw = _join_wrapped(_own_question_cut(raw, ctx))
    if not raw.strip():
        return Reading("UNPARSEABLE", rule="J19")
    if not numeric and ("____" in query or not query.rstrip().endswith(_CLOSED)) \
            and _blank_after_in_at(query):
        # J12: a year, date or timestamp filling an open blank ("was created in" -> "1970",
        # "2018-01-22 12:22:12") is an answer of the wrong type, keyed on its year
        head = next((ln for ln in raw.splitlines() if ln.strip()), "")
        m = _DATE_LINE.match(strip_line(head) or "")
        if m:  # the span keeps a decade's "s" or 年 (1940s); a date or timestamp its year
            return Reading("ANSWER", m.group(1), f"SEMANTIC_{m.group(2)}", m.group(1), 0.5,
                           "J12")
        m = _framed_date(raw)
        if m:  # release 14: "The answer is: The 2019-01-22 12:22"
            return Reading("ANSWER", m.group(2), f"SEMANTIC_{m.group(2)}", m.group(2), 0.5,
                           "J12")
    if not numeric:
        # J27: a first line that is only a year or a decade ("1970.", "In 1997.", "1990s"), for
        # a relation whose objects are not numbers, is an answer of the wrong type whatever the
        # query's form (the labels read 36 of 39 such lines so; "A: 2018" is an option line)
        head = next((ln for ln in raw.splitlines() if ln.strip()), "")
        m = _BARE_YEAR.match(_TAG.sub("", head))
        if m:
            return Reading("ANSWER", m.group(1), f"SEMANTIC_{m.group(2)}", m.group(1), 0.5,
                           "J27")
    if _numbered_options(raw):
        return Reading("UNPARSEABLE", rule="J39")
    lines, letters = answer_lines(raw, numeric=numeric)
    # J4: a header's word on a line of its own is the header cut off by the budget
    # ("Explanation:" ... "Explanation"), never an answer
    headers = {normalize(m.group(1)) for m in _HEADER_LINE.finditer(_TAG.sub("", raw))}
    lines = [ln for ln in lines if normalize(ln) not in headers]
    found: list[Reading] = []
    # the first line continues the prompt's unfinished sentence when it starts on its line
    raw_lines = raw.lstrip(" \t").splitlines()
    first = strip_line(raw_lines[0]) if raw_lines and raw_lines[0].strip() else None
    continues = first is not None and not query.rstrip().endswith(_CLOSED)
    # J18: the budget's cut-off tail (the last line, no closing punctuation, no newline)
    tail = raw.rsplit("\n", 1)[-1]
    cut = normalize(strip_line(tail)) if tail.strip() and not raw[-1:].isspace() \
        and not tail.rstrip().endswith(_CLOSED) else None
    seen: list[str] = []
    cued = _cued_lines(raw) if ctx.context_subjects else frozenset()
    for i, text in enumerate(lines):
        norm_line = normalize(text)
        named = bool(cued) and normalize(strip_line(text)) in cued \
            and _distractor_line(text, ctx)
        if not named and any(prev.startswith(norm_line) for prev in seen):
            continue  # J7: the start of a line already read again (a loop cut by the budget)
        seen.append(norm_line)
        if ctx.echoes_query(text):
            continue  # J30: the prompt repeated ("Averroes es seguidor de")
        bare = named or len(_tokens(norm_line)) <= STRING_MAX_WORDS
        for j, sentence in enumerate(_sentences(text, ctx.dotted)):
            if not has_content(sentence):
                continue
            if _defines_other(sentence, ctx):
                break  # J21: the line goes on about the entity it defines
            reading = _read_sentence(sentence, ctx, bare,
                                     continues and i == 0 and j == 0 and text == first)
            if reading is not None and reading.rule == "J5" and 0 < i == len(lines) - 1 \
                    and norm_line == cut and _tokens(norm_line)[0] in _ARTICLES:
                reading = None  # J18: "Der CarPlay" cut by the budget starts a sentence
            if reading is not None and reading.rule in ("J31", "J33") and reading.span \
                    and i == len(lines) - 1 and norm_line == cut \
                    and normalize(sentence).endswith(normalize(reading.span)):
                reading = None  # J18: "a media company in the United" cut by the budget
            if reading is not None:
                found.append(reading)
                break  # one reading per line: the first sentence that says something
        if found:
            break
    if len(letters) >= 2 and not found and not lines:
        same = _one_repeated_option(raw)
        if same is not None and _option_names(same):
            # J29: "A. Japan\nB. Japan\nC. Japan" is one answer, Japan
            got = _read_sentence(same, ctx, True, False)
            if got is not None and got.kind == "ANSWER" and got.rule != "J24":
                return replace(got, rule="J29")
    if len(letters) >= 2 and not found:
        return Reading("UNPARSEABLE", rule="J4")
    if not found:
        return Reading("UNPARSEABLE", rule="J10")
    return found[0]
