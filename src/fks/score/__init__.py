r"""The five-label scorer: ``correct``, ``incorrect``, ``ambiguous``, ``abstain``, ``unparseable``.

The benchmark README asks that the scorer be shared, not re-implemented ("Share the scorer,
not just the data"): label boundaries (negation, year granularity, alias matching) decide
``K_m`` (stage V, ``known_labels.json``) and every stability number built on it. So every rule
is written down here, numbered, and the code cites the numbers.

:func:`score_answer` applies, to one raw response:

**R1 Segment.** Leading whitespace, leading lines without any letter or digit (``---``) and
cue echoes are stripped repeatedly; the cues are ``Answer:``, ``A:`` (only when text follows
it), ``The answer is``, ``My/Final answer is``, ``Réponse :``, ``La réponse est``,
``Respuesta:``, ``Antwort:``, ``Die Antwort ist/lautet``, ``Ответ:``, ``答案是``/``答案：``,
``答：``, ``回答：`` (a colon after a cue goes with it). The first answer segment then ends
at the first newline, at the first new turn marker (``Q:``, ``Question:``, ``Query:``,
``Answer:``, ``A:``, ``Réponse:``, ``Pregunta:``, ``Frage:``, ``Вопрос:``, ``问：``,
``问题：`` ...), and before a later sentence that is itself a question of three or more
words or in CJK (``Paris. What is the capital of Spain? Madrid`` scores on ``Paris``;
``St. Louis?`` is kept whole). Only this segment is scored: a run-on
continuation (``Paris\nQ: ...\nA: Madrid``) never counts. Within the segment, sentences
(ending in ``.``/``!`` before a space, or ``。``/``！``; a ``?`` is a hedge, not an end) are
read one at a time: the shortest run of leading sentences that names a candidate (R4, not
negated by R5) is the answer and the rest is continuation (``Paris. The capital of Germany
is Berlin.`` is correct; ``It is not Lyon. It is Paris. Berlin is in Germany.`` scores on its
first two sentences). A cut that splits an alias (``St. Louis``) is no sentence end. If no
run of sentences names a candidate, the whole segment is scored; so a first sentence naming
something the scorer does not recognise (``Lyon. The capital of France is Paris.`` with Lyon
in no alias list) does not end the answer -- the competitor lists of :func:`score_run` (all
objects of the relation) keep this case rare. The segment is cleaned of surrounding
whitespace, quotes, markdown marks (``**``, `````, ``#``), bullets and trailing punctuation;
the cleaned segment (or the run of sentences scored) is the ``extracted_answer`` of every
label except ``unparseable``.

**R2 Normalisation.** Both the segment and every alias go through
:func:`fks.text.normalize` (NFKC, casefold, diacritics dropped: ``Zürich`` = ``Zurich``,
``weiß`` = ``weiss``), curly apostrophes are straightened, and a space is put between a CJK
character and an adjacent letter/digit of another script (``答案是Paris`` holds ``paris`` on
word boundaries). An alias opening with an article also matches without it: en
``the/a/an``, fr ``le/la/les/un/une/l'``, es ``el/la/los/las/un/una``, de
``der/die/das/den/dem/des/ein/eine``, and ``d'`` (``The Hague`` matches ``Hague``).

**R3 Alias matching.** :func:`fks.text.find_alias`: in spaced scripts an alias matches on word
boundaries only (``Parisian`` is not ``Paris``); a CJK alias matches as a substring
(``法国的首都是巴黎`` holds ``巴黎``). Every occurrence is found; where mentions overlap the
longest wins (``South Georgia`` hides ``Georgia``; on equal length the gold wins).

**R4 Candidates.** The candidates the scorer can recognise are the gold (all its aliases are one
candidate), each competitor alias (aliases of OTHER objects of the same relation, or other
subjects for reverse queries; a competitor spelled exactly like a gold alias or an option is
dropped; one-character spaced-script competitors such as ``I`` are ignored), and, for
recognition, each option. Two aliases of the same competitor object count as two candidates
(the scorer receives them as a flat list).

**R5 Negation.** A candidate preceded by a negation cue is rejected, not named: en ``not``,
``n't`` (``isn't``), ``never``, ``no``, ``neither``/``nor``, ``cannot``, ``rather than``,
``instead of``; fr ``pas`` (``n'est pas``), ``non``, ``ni``, ``jamais``, ``au lieu de``; es
``no``, ``ni``, ``nunca``, ``en lugar de``; de ``nicht``, ``kein(e)``, ``weder``/``noch``,
``statt``; ru ``не``, ``нет``, ``ни``, ``вместо``; zh ``不是``, ``并非``, ``而不是``, ``不在``,
``没有``. The cue must come before the candidate, lie outside every candidate (the ``不`` of
``大不列颠`` is no cue), and the gap between them must hold at most three words (CJK: two
characters a word), no clause punctuation (``, ; : . ! ?``, ``，。、``, brackets), no contrast
word (``but``, ``mais``, ``pero``, ``sino``, ``aber``, ``sondern``, ``но``, ``а``, ``而是``,
``但``, ``是``) and no other candidate. So ``not Lyon but Paris`` names Paris, ``It is not
Paris`` names nothing, ``不是巴黎，是东京`` names 东京. A cue after the candidate (``Paris is
wrong``) is not read.

**R6 Year and date granularity.** When the fact's ``answer_granularity`` is ``year``, the
candidates are the years in the segment (3-4 digits, not inside a longer number, not a
decade such as ``1870s``): ``1879``, ``in 1879`` and ``March 14, 1879`` all name 1879 and
match gold ``1879``; another year is ``incorrect``; two years are ``ambiguous``. For
``date``, when the gold and the segment both hold a full date (``1879-03-14``,
``14.03.1879``, ``14 March 1879``, ``March 14, 1879``, ``14 de marzo de 1879``,
``14. März 1879``, ``14 марта 1879``, ``1879年3月14日``; numeric dates are read day first
unless the "month" exceeds 12), the full dates are compared; otherwise the years are (an
answer giving only the year is judged on its year). Negation (R5) applies to years and dates;
R7b does not. A gold without any year falls back to the entity rules. ``number`` and
``entity`` use the entity rules (word boundaries keep ``12`` from matching ``120``).

**R7 Ambiguity.** (a) Two or more distinct candidates named (not negated) in the segment are
``ambiguous``: gold plus a competitor (``Paris, not Berlin`` is fine; ``Paris and Berlin``
is not), two competitors, two options. (b) Structural: a joining word that puts two distinct
things side by side (joining words count only between spaces, so the ``o`` of ``O'Hare`` is
none; CJK ones anywhere): alternatives (``or``, ``ou``, ``o``, ``oder``, ``или``, ``либо``,
``或``, ``还是``, ``/``) whose neighbours are a candidate or at most five words, and
coordinated lists within one comma item (``and``, ``et``, ``y``, ``und``, ``и``, ``和``,
``与``, ``及``) whose neighbours are a candidate or at most two words: ``Paris or Lyon`` and
``Paris, Lyon and Marseille`` are ambiguous even when Lyon is unknown to the scorer.
``Paris or Paname`` (both gold) is not. A bare comma is apposition (``Paris, France`` is
correct). Fillers (``maybe``, ``either``, ``perhaps`` ...) are ignored, a part opening with a
negation is a rejected alternative, and idioms (``whether or not``, ``more or less``) offer
no alternative.

**R8 Abstention.** A segment that names no candidate and holds an abstention phrase is
``abstain``: en ``I don't know``, ``I'm not sure``, ``not sure``, ``unknown``, ``cannot
answer``, ``no idea``, ``n/a`` ...; zh ``不知道``, ``无法回答``, ``不清楚``, ``不确定``, ``未知``;
fr ``je ne sais pas``, ``aucune idée``, ``inconnu``, ``je ne peux pas répondre``; es ``no lo
sé``, ``no sé``, ``no estoy seguro``, ``desconocido``; de ``ich weiß nicht``, ``weiß ich
nicht``, ``keine Ahnung``, ``unbekannt``; ru ``не знаю``, ``не уверен``, ``неизвестно``, ``не
могу ответить`` (full lists in :mod:`fks.score.lexicon`). A hedge that still names a
candidate is scored on the candidate (``I'm not sure, but I think Paris`` is correct;
``I'm not sure it's Paris`` negates Paris and abstains).

**R9 Unparseable.** An empty response, or one with no letter and no digit before its
first answer segment ends (only punctuation, whitespace or repeated symbols: ``...``,
``???``, ``####``), is ``unparseable`` with ``extracted_answer`` None.

**R10 Recognition.** When ``options`` are given, each option is a candidate; an option spelled
like a gold alias is the gold. When the prompt lettered the options (``option_letters``, see
:func:`lettered_options`), a segment opening with an upper-case letter (``B``, ``(B)``,
``B)``, ``B.``, ``B: Paris``, ``Option B``) names that option; a lower-case ``a`` or ``A city``
is no letter. Naming exactly one option scores it against the gold; naming several (by text
or by letter and a different text) is ``ambiguous``; the granularity rules (R6) are not used.

**R11 Otherwise.** Exactly one candidate named and it is the gold: ``correct``, with
``matched_alias`` the gold alias (or gold option) found. Anything else parseable:
``incorrect``, with ``extracted_answer`` the cleaned segment.

Precedence: R9, then R7a, then R8, then R7b, then R11.

**R12 Runs.** :func:`score_run` keeps every generation record: one whose ``status`` is not
``ok`` (error, timeout) is ``unparseable`` with ``extracted_answer`` None.

**R13 Line reading** (when :func:`score_answer` gets the ``query``; :func:`score_run` passes it
for every open question, recognition keeps R1/R10). Real continuations are read line by line,
with the alias judge's line reader (:func:`fks.score.extract.answer_lines`, judge rules J2-J4):
marks and cues are stripped per line; headers (``Explanation:``), option letters with no
options (``The answer is C.``), list numbers, digit runs and evaluations (``100 % correct``) are
skipped; a question line ends the answer once a line was read; an option list the model made
up (two or more different letters) keeps only the option picked after an answer cue, else it
is ``unparseable``; a line that is the start of a line already read (a loop cut by the budget)
is skipped. Each remaining line is scored with R1-R11 in order; the first that names a
candidate (and is not a full sentence about something else: no subject, not completing the
prompt, other words besides the candidate) decides, and ``extracted_answer`` is then the alias
named. A line naming no candidate is skipped when it echoes the question (all its words are
the words of the query's sentences that name the subject, or function words) or describes the
subject (``Albania is a country in ...``); otherwise it is ``incorrect`` when it is a short
answer (at most four words after the question's own words, looking like a name: a capitalised
word) given bare, about the subject or completing the prompt. No line decides:
``unparseable``. So the first committed answer counts, and rival later lines do not.

**R14 Subject echo.** The names of the entity the query asks about are blanked out of each line
before matching (an occurrence inside a longer candidate name stays), so a line naming only the
subject -- ``Apple II series`` asked which company makes the Apple II series, or ``Albania is
the capital of Albania`` -- is ``incorrect`` with the subject as ``extracted_answer``, never
correct for containing the gold ``Apple`` in its surface. A copy-flagged fact
(``answer_in_subject_surface``) is correct only when the answer names the object itself.

Version ``fks-score-2`` (R13, R14); ``fks-score-1`` read the first segment only.
"""

from fks.score._run import ScoreSummary, competitor_index, render_summary, score_run
from fks.score._scorer import (
    SCORER_VERSION,
    AliasSet,
    ScoreResult,
    lettered_options,
    score_answer,
)

__all__ = [
    "SCORER_VERSION",
    "AliasSet",
    "ScoreResult",
    "ScoreSummary",
    "competitor_index",
    "lettered_options",
    "render_summary",
    "score_answer",
    "score_run",
]
