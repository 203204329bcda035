"""What the lm-eval and Inspect adapters share: the exported rows and the import into a run.

Export: one row per benchmark query, in benchmark order, holding the exact prompt
(:func:`fks.generate.prompts.build_prompt`) and :data:`~fks.generate.prompts.PROMPT_VERSION`.

Import (:func:`write_imported_run`): the tool's answers become ``RUN/generations.jsonl``
(:class:`~fks.data.schema.GenerationRecord` rows built by
:func:`fks.generate.runner.make_record`), ``RUN/evaluation_manifest.json`` gets the sections
``fks generate`` writes plus ``stages.generate.imported`` (tool, log, its sha256), and the
pipeline's ``generate`` stage is recorded as complete, so ``fks run`` goes on from ``score``.

Decision (partial logs): a log must hold every query of the benchmark exactly once. A log with
unknown, duplicated or missing query ids is refused (exit 2, naming the file, line and field),
because BCS/BES need every condition family of a fact and ``fks run`` would otherwise fill the
gaps with another runner's generations. To evaluate a slice, export a slice benchmark (for
instance the ``RUN/benchmark/`` folder ``fks run --limit N`` writes) and run the tool on all of
it; do not use ``lm_eval --limit`` or ``inspect eval --limit``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fks import __version__
from fks.configs import ConfigSet
from fks.data.load import Benchmark
from fks.errors import FksInputError
from fks.generate.backends.base import GenerationOutput
from fks.generate.manifest import read_run_manifest, update_run_manifest
from fks.generate.prompts import PROMPT_VERSION, build_prompt
from fks.generate.runner import GENERATIONS_NAME, SHARD_RULE, make_record
from fks.io import atomic_write_jsonl, sha256_file

__all__ = ["TASK_NAME", "export_rows", "ImportedAnswer", "check_prompt", "write_imported_run"]

log = logging.getLogger(__name__)

#: the task name in both tools (``lm_eval --tasks fks_stability``, ``...py@fks_stability``)
TASK_NAME = "fks_stability"


def export_rows(bench: Benchmark) -> list[dict[str, Any]]:
    """One row per query, benchmark order: ids, family, the exact prompt and its version."""
    return [{"query_id": q.query_id, "fact_id": q.fact_id, "relation": q.relation,
             "condition_family": q.condition_family, "prompt": build_prompt(q),
             "prompt_version": PROMPT_VERSION} for q in bench.queries]


@dataclass(frozen=True)
class ImportedAnswer:
    """One answer read from a tool's log (``line``: 1-based line, or sample position)."""

    query_id: str
    text: str
    line: int | None
    status: str = "ok"
    error: str | None = None
    finish_reason: str | None = None


def check_prompt(expected: str, found: Any, *, path: Path, line: int | None, field: str,
                 query_id: str) -> None:
    """Raise unless the prompt a tool sent is byte-for-byte fks's prompt."""
    if found != expected:
        raise FksInputError(
            f"the prompt of {query_id} is not fks's {PROMPT_VERSION} prompt: expected "
            f"{expected!r}, found {found!r} (re-export the task with this fks and run it "
            "without a chat template, system prompt, description or few-shot examples)",
            path=path, line=line, field=field)


def check_prompt_version(found: Any, *, path: Path, line: int | None, field: str) -> None:
    """Raise unless the log's recorded prompt version is :data:`PROMPT_VERSION`."""
    if found != PROMPT_VERSION:
        raise FksInputError(f"expected prompt version {PROMPT_VERSION!r}, found {found!r} "
                            "(re-export the task with this fks)", path=path, line=line,
                            field=field)


def _listing(ids: list[str], limit: int = 5) -> str:
    more = f" (+{len(ids) - limit} more)" if len(ids) > limit else ""
    return ", ".join(ids[:limit]) + more


def match_queries(answers: list[ImportedAnswer], bench: Benchmark, path: Path
                  ) -> list[ImportedAnswer]:
    """Return the answers in benchmark order; refuse unknown, duplicated or missing ids."""
    known = {q.query_id for q in bench.queries}
    by_id: dict[str, ImportedAnswer] = {}
    for ans in answers:
        if ans.query_id not in known:
            raise FksInputError(f"query {ans.query_id!r} is not in benchmark {bench.root} "
                                "(a log of another benchmark or another export?)",
                                path=path, line=ans.line, field="query_id")
        if ans.query_id in by_id:
            raise FksInputError(f"query {ans.query_id} is answered twice (first at line "
                                f"{by_id[ans.query_id].line})", path=path, line=ans.line,
                                field="query_id")
        by_id[ans.query_id] = ans
    missing = [q.query_id for q in bench.queries if q.query_id not in by_id]
    if missing:
        raise FksInputError(
            f"{len(missing)} of {len(known)} benchmark queries have no answer in the log: "
            f"{_listing(missing)} (partial logs are refused: run the tool on every query, "
            "without --limit, or export a slice benchmark)", path=path, field="query_id")
    return [by_id[q.query_id] for q in bench.queries]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_imported_run(
    run_dir: str | Path,
    bench: Benchmark,
    answers: list[ImportedAnswer],
    *,
    configs: ConfigSet,
    log_path: Path,
    tool: str,
    tool_info: Mapping[str, Any],
    model_path: str | None = None,
) -> Path:
    """Write ``RUN/generations.jsonl`` and the manifest from checked answers (module docstring).

    Args:
        run_dir: the run directory; its folder name is the model name (``fks run --model``).
        bench: the benchmark the log was produced on.
        answers: :func:`match_queries` output (benchmark order, every query once).
        configs: configs in force (the decoding protocol recorded with every row).
        log_path: the tool's log (its sha256 is recorded).
        tool: ``lm-eval`` or ``inspect``.
        tool_info: what the log says about the tool and the model (version, model args, ...).
        model_path: the model's path or id, when the log names it.

    Raises:
        FksInputError: the run folder name is not a valid model name, or it holds a
            generation from another source.
    """
    from fks.pipeline import PipelineContext, check_model_name, record_stage

    run_dir = Path(run_dir)
    model = check_model_name(run_dir.name)
    gen_cfg = configs.models.generation.model_dump(mode="json") | {
        "dtype_used": tool_info.get("dtype")}
    queries = {q.query_id: q for q in bench.queries}
    records = [make_record(queries[a.query_id], GenerationOutput(
        text=a.text if a.status == "ok" else "", status=a.status,  # type: ignore[arg-type]
        error=a.error, finish_reason=a.finish_reason), model=model, generation_config=gen_cfg)
        for a in answers]
    gen_path = run_dir / GENERATIONS_NAME
    previous = read_run_manifest(run_dir)["stages"].get("generate") or {}
    if gen_path.is_file() and previous and not previous.get("imported"):
        raise FksInputError("this run directory holds generations from fks generate; import "
                            "into a new --out", path=gen_path, field="out")
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_jsonl(gen_path, records)
    counts = {s: sum(r.status == s for r in records) for s in ("ok", "error", "timeout")}
    imported = {"tool": tool, "log": str(Path(log_path).resolve()),
                "log_sha256": sha256_file(log_path)}
    update_run_manifest(run_dir, {
        "fks_version": __version__,
        "model": {"name": model, "path": model_path},
        "weights_sha256": None,
        "tokenizer_sha256": None,
        "backend": {"backend": tool, **dict(tool_info)},
        "generation_config": gen_cfg,
        "prompt_version": PROMPT_VERSION,
        "benchmark": {"path": str(Path(bench.root).resolve()), "checksum": bench.checksum(),
                      "n_facts": len(bench.facts), "n_queries": len(bench.queries)},
        "seeds": {"generation": configs.models.generation.seed},
        "selection": {"families": None, "limit": None, "shard": None,
                      "shard_rule": SHARD_RULE, "n_selected": len(records)},
    }, stage="generate", stage_info={
        "status": "complete", "imported": imported, "finished_at": _now(),
        "file": GENERATIONS_NAME, "sha256": sha256_file(gen_path), "n_records": len(records),
        "n_selected": len(records), "counts_by_status": counts,
    })
    from fks.provenance import record_files

    record_files(run_dir, "generate", {}, [gen_path])
    ctx = PipelineContext(run_dir, model, model_path or "", bench, configs)
    record_stage(ctx, "generate", seconds=0.0, reason="imported")
    log.info("%s: imported %d generations from %s (%s)", run_dir, len(records), log_path, tool)
    return gen_path
