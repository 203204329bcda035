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

The parser (:func:`parse_verbalized_confidence`) is strict and records why a value is invalid,
so invalid confidences are counted, never guessed: it reads the first non-blank line of the
continuation, which must be exactly one number -- ``0.8``, ``.8``, ``1``, ``80%`` (a percent
is divided by 100), optionally followed by a full stop -- and the value must lie in [0, 1].
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

import logging
import re
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

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
    "VerbalizedRecord",
    "build_elicitation_prompt",
    "parse_verbalized_confidence",
    "elicit_verbalized",
]

log = logging.getLogger(__name__)

ELICITATION_VERSION = "fks-verbalized-v1"
ELICITATION_TEMPLATE = (
    "{prompt} {answer}\n"
    "How likely is it that this answer is correct? Reply with one probability between 0 and 1.\n"
    "Probability:"
)
ELICITATION_MAX_NEW_TOKENS = 8
VERBALIZED_NAME = "verbalized.jsonl"
ParseStatus = Literal["ok", "empty", "no_number", "malformed", "out_of_range"]
PARSE_STATUSES: tuple[str, ...] = ("ok", "empty", "no_number", "malformed", "out_of_range")

_NUMBER = re.compile(r"^(?P<num>\d+(?:\.\d+)?|\.\d+)\s*(?P<pct>%)?\s*\.?$")
_MAX_LINE = 200


class VerbalizedRecord(BaseModel):
    """One row of ``RUN/verbalized.jsonl``: the elicitation of one answered query."""

    model_config = ConfigDict(extra="allow")

    model: str
    query_id: str
    fact_id: str
    elicitation_version: str
    answer: str
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
    return ELICITATION_TEMPLATE.format(prompt=build_prompt(query), answer=" ".join(answer.split()))


def parse_verbalized_confidence(text: str) -> tuple[float | None, ParseStatus]:
    r"""Parse a verbalized probability strictly (rules in the module docstring).

    Returns:
        ``(value, "ok")`` with ``value`` in [0, 1], or ``(None, status)`` saying why not.

    >>> parse_verbalized_confidence(" 0.85\nQuestion: ...")
    (0.85, 'ok')
    >>> parse_verbalized_confidence("80%")
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
    value = float(m.group("num")) / (100.0 if m.group("pct") else 1.0)
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


def _done_ids(path: Path) -> set[str]:
    done: set[str] = set()
    if path.is_file():
        for line, rec in iter_jsonl(path, VerbalizedRecord):
            qid = rec.query_id  # type: ignore[union-attr]
            if qid in done:
                raise FksInputError(f"{qid} is recorded twice", path=path, line=line,
                                    field="query_id")
            done.add(qid)
    return done


def _record(rec: ScoredRecord, answer: str, output: Any) -> VerbalizedRecord:
    text = output.text if output.status == "ok" else ""
    value, status = parse_verbalized_confidence(text)
    return VerbalizedRecord(
        model=rec.model, query_id=rec.query_id, fact_id=rec.fact_id,
        elicitation_version=ELICITATION_VERSION, answer=answer, raw_response=text,
        status=output.status, error=output.error, confidence=value, parse_status=status,
        n_generated_tokens=output.n_generated_tokens,
    )


@locks_run_dir("run_dir")
def elicit_verbalized(
    run_dir: str | Path, backend: GenerationBackend, *,
    benchmark: str | Path | Benchmark, batch_size: int = 16,
    max_new_tokens: int = ELICITATION_MAX_NEW_TOKENS,
) -> dict[str, Any]:
    """Run the elicitation pass of ``RUN/scored.jsonl`` into ``RUN/verbalized.jsonl``.

    Every scored row with an ok generation and a non-empty answer span is elicited once
    (rows already in the file are skipped, so a rerun resumes); failures are written with
    their ``status``/``error`` and count as invalid confidences later. The manifest gains
    ``stages.calibrate_elicit``.

    Returns:
        ``{"n_candidates", "n_existing", "n_written", "parse_status": {status: n}}``.

    Raises:
        FksInputError: a bad scored/verbalized row, or a scored query missing from the
            benchmark.
    """
    from fks.judge import answer_span

    if batch_size < 1:
        raise FksInputError(f"must be >= 1; found {batch_size}", field="batch_size")
    run_dir = Path(run_dir)
    bench = benchmark if isinstance(benchmark, Benchmark) else load_benchmark(benchmark)
    queries: dict[str, Query] = {q.query_id: q for q in bench.queries}
    scored_path = run_dir / "scored.jsonl"
    rows = _answered_rows(scored_path)
    missing = next((r for r in rows if r.query_id not in queries), None)
    if missing is not None:
        raise FksInputError(f"{missing.query_id} is not in the benchmark {bench.root}",
                            path=scored_path, field="query_id")
    out_path = run_dir / VERBALIZED_NAME
    done = _done_ids(out_path)
    todo = [r for r in rows if r.query_id not in done]
    counts: Counter = Counter()
    with JsonlAppender(out_path) as out, progress_bar() as progress:
        task = progress.add_task("verbalized confidence", total=len(todo))
        for start in range(0, len(todo), batch_size):
            batch = todo[start:start + batch_size]
            answers = [answer_span(r.raw_response, r.extracted_answer) for r in batch]
            prompts = [build_elicitation_prompt(queries[r.query_id], a)
                       for r, a in zip(batch, answers, strict=True)]
            outputs = backend.generate(prompts, max_new_tokens=max_new_tokens)
            if len(outputs) != len(batch):
                raise RuntimeError(f"backend returned {len(outputs)} outputs for {len(batch)}")
            records = [_record(r, a, o) for r, a, o in zip(batch, answers, outputs, strict=True)]
            out.write_batch(records)
            counts.update(r.parse_status if r.status == "ok" else r.status for r in records)
            progress.update(task, advance=len(batch))
    info = {"n_candidates": len(rows), "n_existing": len(done), "n_written": len(todo),
            "parse_status": dict(counts)}
    update_run_manifest(run_dir, stage="calibrate_elicit", stage_info={
        **info, "elicitation_version": ELICITATION_VERSION, "template": ELICITATION_TEMPLATE,
        "max_new_tokens": max_new_tokens, "backend": backend.describe(),
        "sha256": sha256_file(out_path),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
    })
    log.info("verbalized confidence: %d elicited, %d already there", len(todo), len(done))
    return info

