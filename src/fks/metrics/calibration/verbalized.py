r"""Verbalized confidence: a frozen elicitation prompt, a strict parser, a resumable pass.

The event is the same as for every other source: *the answer the model gave to the query is
correct*. So the elicitation shows the model the exact prompt of the query
(:func:`fks.generate.prompts.build_prompt`) followed by its own answer (the judge's answer
span, :func:`fks.judge.answer_span`), then asks for one probability:

.. code-block:: text

    {prompt} {answer}
    How likely is it that this answer is correct? Reply with one probability between 0 and 1.
    Probability:

(:data:`ELICITATION_TEMPLATE`, version :data:`ELICITATION_VERSION`.) Decoding is the frozen
protocol of the run (greedy, no chat template) with at most :data:`ELICITATION_MAX_NEW_TOKENS`
new tokens.

**Perturbations** (the text: test rewording, order and language). Besides this primary
prompt (variant ``en/w1/answer_first``, the one behind the ``verbalized`` source) the pass
elicits every variant ``{language}/{wording}/{order}`` (:data:`VARIANTS`):

* language ``en`` or ``query`` -- the question in English, or in the query's own language
  (:data:`ASK_TEMPLATES` has ``en fr es de ru zh``; a query in another language has no ``query``
  variant, counted as ``no_template``; for an English query the ``query`` variants are the
  ``en`` ones and are not asked twice);
* wording ``w1`` or ``w2`` -- two phrasings of the question;
* order ``answer_first`` (query prompt and answer, then the question) or ``question_first``
  (the question, then the query prompt and answer).

``fks calibrate`` reports each variant's ECE/Brier and the spread of ECE across them.

**Protocol as data.** Each row records ``elicitation_version``, ``variant`` and the eliciting
model (``eliciting_model``: the backend's model path and weights hash). ``fks calibrate``
refuses (exit 2, file, line, field) a row of another ``elicitation_version`` or elicited from
another model than the run's generations.

The parser (:func:`parse_verbalized_confidence`) is strict and records why a value is invalid,
so invalid confidences are counted, never guessed: it reads the first non-blank line of the
continuation, which must be exactly one number -- ``0.8``, ``.8``, ``0,8`` (a decimal comma),
``1``, ``80%`` / ``80 %`` / ``80％`` / ``80,5%`` (a percent is divided by 100), optionally
followed by a full stop -- and the value must lie in [0, 1].
Statuses: ``ok``, ``empty``, ``no_number``, ``malformed`` (digits with anything else on the
line: ``about 0.8``, ``0.7-0.8``, ``8/10``), ``out_of_range`` (``85``, ``150%``).

Model text is untrusted: it is only matched against the regular expression, never evaluated,
and a first line longer than 200 characters is ``malformed`` without being parsed.

:func:`elicit_verbalized` runs the pass through any generation backend
(:func:`fks.generate.backends.make_backend`) and writes ``RUN/verbalized.jsonl`` in durable
batches, resuming where it stopped. ``fks calibrate`` uses this source only when that file
exists.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict

from fks.data.load import Benchmark, load_benchmark
from fks.data.schema import GenerationStatus, Query, ScoredRecord
from fks.errors import FksInputError
from fks.generate.backends.base import GenerationBackend
from fks.generate.manifest import update_run_manifest
from fks.generate.prompts import build_prompt
from fks.io import JsonlAppender, iter_jsonl, sha256_file
from fks.log import progress_bar
from fks.runlock import locks_run_dir

__all__ = [
    "ELICITATION_VERSION",
    "ELICITATION_TEMPLATE",
    "ELICITATION_MAX_NEW_TOKENS",
    "VERBALIZED_NAME",
    "PARSE_STATUSES",
    "ASK_TEMPLATES",
    "VARIANTS",
    "PRIMARY_VARIANT",
    "build_variant_prompt",
    "VerbalizedRecord",
    "build_elicitation_prompt",
    "parse_verbalized_confidence",
    "elicit_verbalized",
]

log = logging.getLogger(__name__)

ELICITATION_VERSION = "fks-verbalized-v2"
ELICITATION_TEMPLATE = (
    "{prompt} {answer}\n"
    "How likely is it that this answer is correct? Reply with one probability between 0 and 1.\n"
    "Probability:"
)
#: the question in each language, two wordings each, and the label that ends the prompt
ASK_TEMPLATES: dict[str, dict[str, str]] = {
    "en": {"w1": "How likely is it that this answer is correct? Reply with one probability "
                 "between 0 and 1.",
           "w2": "What is the probability that the answer above is right? Give a single "
                 "number from 0 to 1.",
           "label": "Probability:"},
    "fr": {"w1": "Quelle est la probabilité que cette réponse soit correcte ? Répondez par une "
                 "probabilité entre 0 et 1.",
           "w2": "Avec quelle probabilité la réponse ci-dessus est-elle juste ? Donnez un seul "
                 "nombre de 0 à 1.",
           "label": "Probabilité :"},
    "es": {"w1": "¿Qué probabilidad hay de que esta respuesta sea correcta? Responda con una "
                 "probabilidad entre 0 y 1.",
           "w2": "¿Cuál es la probabilidad de que la respuesta anterior sea acertada? Dé un "
                 "solo número de 0 a 1.",
           "label": "Probabilidad:"},
    "de": {"w1": "Wie wahrscheinlich ist es, dass diese Antwort richtig ist? Antworten Sie mit "
                 "einer Wahrscheinlichkeit zwischen 0 und 1.",
           "w2": "Mit welcher Wahrscheinlichkeit ist die obige Antwort korrekt? Geben Sie eine "
                 "einzige Zahl von 0 bis 1 an.",
           "label": "Wahrscheinlichkeit:"},
    "ru": {"w1": "Насколько вероятно, что этот ответ правильный? Ответьте одной вероятностью "
                 "от 0 до 1.",
           "w2": "Какова вероятность того, что ответ выше верен? Дайте одно число от 0 до 1.",
           "label": "Вероятность:"},
    "zh": {"w1": "这个答案正确的可能性有多大？请用一个0到1之间的概率回答。",
           "w2": "上面的答案是对的概率是多少？请给出一个0到1之间的数字。",
           "label": "概率："},
}
ORDERS: tuple[str, ...] = ("answer_first", "question_first")
WORDINGS: tuple[str, ...] = ("w1", "w2")
#: every variant id ``{language}/{wording}/{order}``, the primary first
VARIANTS: tuple[str, ...] = tuple(f"{lang}/{w}/{o}" for lang in ("en", "query")
                                  for w in WORDINGS for o in ORDERS)
PRIMARY_VARIANT = "en/w1/answer_first"
ELICITATION_MAX_NEW_TOKENS = 8
VERBALIZED_NAME = "verbalized.jsonl"
ParseStatus = Literal["ok", "empty", "no_number", "malformed", "out_of_range"]
PARSE_STATUSES: tuple[str, ...] = ("ok", "empty", "no_number", "malformed", "out_of_range")

_NUMBER = re.compile(r"^(?P<num>\d+(?:[.,]\d+)?|[.,]\d+)\s*(?P<pct>[%％])?\s*\.?$")
_MAX_LINE = 200


class VerbalizedRecord(BaseModel):
    """One row of ``RUN/verbalized.jsonl``: the elicitation of one answered query."""

    model_config = ConfigDict(extra="allow")

    model: str
    query_id: str
    fact_id: str
    elicitation_version: str
    answer: str
    #: ``{language}/{wording}/{order}`` (:data:`VARIANTS`)
    variant: str = PRIMARY_VARIANT
    #: the eliciting backend's identity: ``{"model_path", "weights_sha256"}``
    eliciting_model: dict[str, Any] | None = None
    raw_response: str
    status: GenerationStatus = "ok"
    error: str | None = None
    #: what the frozen parser read (recomputed from ``raw_response`` by ``fks calibrate``)
    confidence: float | None = None
    parse_status: str


def build_elicitation_prompt(query: Any, answer: str) -> str:
    r"""Build the frozen elicitation prompt for a query record and the model's answer.

    >>> print(build_elicitation_prompt({"condition_family": "paraphrase",
    ...                                 "query": "The capital of France is"}, "Paris"))
    The capital of France is
    Answer: Paris
    How likely is it that this answer is correct? Reply with one probability between 0 and 1.
    Probability:
    """
    return build_variant_prompt(query, answer, PRIMARY_VARIANT)


def variant_language(query: Any, variant: str) -> str:
    """Return the language a variant asks in: ``en``, or the query's own language."""
    lang = variant.split("/")[0]
    if lang == "en":
        return "en"
    value = query.get("language") if isinstance(query, dict) else getattr(query, "language", None)
    return str(value or "en")


def build_variant_prompt(query: Any, answer: str, variant: str) -> str:
    r"""Build the elicitation prompt of one variant (module docstring).

    Raises:
        KeyError: no question template for the variant's language.

    >>> q = {"condition_family": "paraphrase", "query": "La capitale de la France est",
    ...      "language": "fr"}
    >>> print(build_variant_prompt(q, "Paris", "query/w2/question_first"))
    Avec quelle probabilité la réponse ci-dessus est-elle juste ? Donnez un seul nombre de 0 à 1.
    La capitale de la France est
    Answer: Paris
    Probabilité :
    """
    lang, wording, order = variant.split("/")
    if wording not in WORDINGS or order not in ORDERS or lang not in ("en", "query"):
        raise ValueError(f"unknown elicitation variant {variant!r}")
    ask = ASK_TEMPLATES[variant_language(query, variant)]
    shown = f"{build_prompt(query)} {' '.join(answer.split())}"
    if order == "answer_first":
        return f"{shown}\n{ask[wording]}\n{ask['label']}"
    return f"{ask[wording]}\n{shown}\n{ask['label']}"


def parse_verbalized_confidence(text: str) -> tuple[float | None, ParseStatus]:
    r"""Parse a verbalized probability strictly (rules in the module docstring).

    Returns:
        ``(value, "ok")`` with ``value`` in [0, 1], or ``(None, status)`` saying why not.

    >>> parse_verbalized_confidence(" 0.85\nQuestion: ...")
    (0.85, 'ok')
    >>> parse_verbalized_confidence("80%")
    (0.8, 'ok')
    >>> parse_verbalized_confidence("0,8")
    (0.8, 'ok')
    >>> parse_verbalized_confidence("85")
    (None, 'out_of_range')
    >>> parse_verbalized_confidence("about 0.8")
    (None, 'malformed')
    >>> parse_verbalized_confidence("very likely")
    (None, 'no_number')
    """
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    if not line:
        return None, "empty"
    if len(line) > _MAX_LINE:  # never cut a number short; no probability is this long
        return None, "malformed"
    if not any(ch.isdigit() for ch in line):
        return None, "no_number"
    m = _NUMBER.match(line)
    if m is None:
        return None, "malformed"
    value = float(m.group("num").replace(",", ".")) / (100.0 if m.group("pct") else 1.0)
    if not 0.0 <= value <= 1.0:
        return None, "out_of_range"
    return value, "ok"


# ============================================================================ the pass
def _answered_rows(path: Path) -> list[ScoredRecord]:
    """Scored rows with an ok generation and a non-empty answer span (the ones to elicit)."""
    from fks.judge import answer_span

    rows: list[ScoredRecord] = []
    for _, rec in iter_jsonl(path, ScoredRecord):
        assert isinstance(rec, ScoredRecord)
        if rec.status == "ok" and answer_span(rec.raw_response, rec.extracted_answer):
            rows.append(rec)
    return rows


def _done_ids(path: Path) -> set[tuple[str, str]]:
    done: set[tuple[str, str]] = set()
    if path.is_file():
        for line, rec in iter_jsonl(path, VerbalizedRecord):
            assert isinstance(rec, VerbalizedRecord)
            if rec.elicitation_version != ELICITATION_VERSION:
                raise FksInputError(f"elicited under {rec.elicitation_version!r}, not "
                                    f"{ELICITATION_VERSION!r} (use a fresh file)", path=path,
                                    line=line, field="elicitation_version")
            key = (rec.query_id, rec.variant)
            if key in done:
                raise FksInputError(f"{rec.query_id} / {rec.variant} is recorded twice",
                                    path=path, line=line, field="query_id")
            done.add(key)
    return done


def eliciting_identity(backend: GenerationBackend) -> dict[str, Any]:
    """``{"model_path", "weights_sha256"}`` of a backend (from its ``describe()``)."""
    d = backend.describe() or {}
    return {"model_path": d.get("model_path") or d.get("model"),
            "weights_sha256": d.get("weights_sha256")}


def _record(rec: ScoredRecord, answer: str, output: Any, variant: str,
            identity: dict[str, Any]) -> VerbalizedRecord:
    text = output.text if output.status == "ok" else ""
    value, status = parse_verbalized_confidence(text)
    return VerbalizedRecord(
        model=rec.model, query_id=rec.query_id, fact_id=rec.fact_id,
        elicitation_version=ELICITATION_VERSION, answer=answer, variant=variant,
        eliciting_model=identity, raw_response=text,
        status=output.status, error=output.error, confidence=value, parse_status=status,
        n_generated_tokens=output.n_generated_tokens,
    )


def _variants_of(query: Query, variants: tuple[str, ...]) -> tuple[list[str], int]:
    """List the variants to ask for one query; count those lacking a template."""
    todo, missing = [], 0
    for v in variants:
        if v.startswith("query/"):
            lang = variant_language(query, v)
            if lang == "en":
                continue  # the same prompt as the en variant
            if lang not in ASK_TEMPLATES:
                missing += 1
                continue
        todo.append(v)
    return todo, missing


class _HasFact(Protocol):
    fact_id: str


#: any row with a ``fact_id``
_R = TypeVar("_R", bound=_HasFact)


def spread_slice(rows: Sequence[_R], limit: int | None, *, salt: str) -> list[_R]:
    """Order ``rows`` by whole facts in ``sha256(salt + ":" + fact_id)`` order; keep ``limit``.

    A fact's rows keep their given order, so a fact is cut at most once (at the end), and a
    slice spreads over relations and facts instead of being the head of the file. Any rows
    with a ``fact_id`` (scored records for ``elicit --limit``, queries for ``sample
    --limit``); ``limit`` None keeps them all.

    Raises:
        FksInputError: a negative ``limit``.
    """
    if limit is not None and limit < 0:
        raise FksInputError(f"must be >= 0; found {limit}", field="limit")
    rank = {f: hashlib.sha256(f"{salt}:{f}".encode()).hexdigest()
            for f in {r.fact_id for r in rows}}
    ordered = [r for _, r in sorted(enumerate(rows),
                                    key=lambda ir: (rank[ir[1].fact_id], ir[0]))]
    return ordered if limit is None else ordered[:limit]


@locks_run_dir("run_dir")
def elicit_verbalized(
    run_dir: str | Path, backend: GenerationBackend, *,
    benchmark: str | Path | Benchmark, batch_size: int = 16,
    max_new_tokens: int = ELICITATION_MAX_NEW_TOKENS, variants: str = "all",
    limit: int | None = None,
) -> dict[str, Any]:
    """Run the elicitation pass of ``RUN/scored.jsonl`` into ``RUN/verbalized.jsonl``.

    Every scored row with an ok generation and a non-empty answer span is elicited once per
    variant (``variants="all"``: :data:`VARIANTS`; ``"primary"``: the primary prompt only);
    (query, variant) pairs already in the file are skipped, so a rerun resumes; failures are
    written with their ``status``/``error`` and count as invalid confidences later. The
    manifest gains ``stages.calibrate_elicit``. ``limit`` keeps the first ``limit`` candidate
    rows in a spread order (:func:`spread_slice`: whole facts in a hash order), so a slice
    covers relations and facts instead of the head of the file, and a rerun with the same
    limit resumes the same slice.

    Returns:
        ``{"n_candidates", "n_existing", "n_written", "n_no_template", "variants",
        "parse_status": {status: n}}``.

    Raises:
        FksInputError: a bad scored/verbalized row (another elicitation version included), a
            scored query missing from the benchmark, or unknown ``variants``.
    """
    from fks.judge import answer_span

    if batch_size < 1:
        raise FksInputError(f"must be >= 1; found {batch_size}", field="batch_size")
    if variants not in ("all", "primary"):
        raise FksInputError(f"must be all or primary; found {variants!r}", field="variants")
    wanted = VARIANTS if variants == "all" else (PRIMARY_VARIANT,)
    run_dir = Path(run_dir)
    bench = benchmark if isinstance(benchmark, Benchmark) else load_benchmark(benchmark)
    queries: dict[str, Query] = {q.query_id: q for q in bench.queries}
    scored_path = run_dir / "scored.jsonl"
    rows = _answered_rows(scored_path)
    if limit is not None:
        rows = spread_slice(rows, limit, salt=ELICITATION_VERSION)
    missing = next((r for r in rows if r.query_id not in queries), None)
    if missing is not None:
        raise FksInputError(f"{missing.query_id} is not in the benchmark {bench.root}",
                            path=scored_path, field="query_id")
    out_path = run_dir / VERBALIZED_NAME
    done = _done_ids(out_path)
    identity = eliciting_identity(backend)
    todo: list[tuple[ScoredRecord, str]] = []
    n_no_template = 0
    for r in rows:
        these, lacking = _variants_of(queries[r.query_id], wanted)
        n_no_template += lacking
        todo += [(r, v) for v in these if (r.query_id, v) not in done]
    counts: Counter = Counter()
    with JsonlAppender(out_path) as out, progress_bar() as progress:
        task = progress.add_task("verbalized confidence", total=len(todo))
        for start in range(0, len(todo), batch_size):
            batch = todo[start:start + batch_size]
            answers = [answer_span(r.raw_response, r.extracted_answer) for r, _ in batch]
            prompts = [build_variant_prompt(queries[r.query_id], a, v)
                       for (r, v), a in zip(batch, answers, strict=True)]
            outputs = backend.generate(prompts, max_new_tokens=max_new_tokens)
            if len(outputs) != len(batch):
                raise RuntimeError(f"backend returned {len(outputs)} outputs for {len(batch)}")
            records = [_record(r, a, o, v, identity)
                       for (r, v), a, o in zip(batch, answers, outputs, strict=True)]
            out.write_batch(records)
            counts.update(r.parse_status if r.status == "ok" else r.status for r in records)
            progress.update(task, advance=len(batch))
    info = {"n_candidates": len(rows), "n_existing": len(done), "n_written": len(todo),
            "n_no_template": n_no_template, "variants": list(wanted),
            "parse_status": dict(counts)}
    update_run_manifest(run_dir, stage="calibrate_elicit", stage_info={
        **info, "elicitation_version": ELICITATION_VERSION, "template": ELICITATION_TEMPLATE,
        "ask_templates": ASK_TEMPLATES, "max_new_tokens": max_new_tokens,
        "backend": backend.describe(), "eliciting_model": identity,
        "sha256": sha256_file(out_path),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
    })
    from fks.provenance import record_files

    record_files(run_dir, "calibrate_elicit", {}, [out_path])
    log.info("verbalized confidence: %d elicited, %d already there", len(todo), len(done))
    return info
