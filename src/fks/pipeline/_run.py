"""Run the stages in order, skipping those whose recorded outputs still verify.

Freshness (stage granularity). After a stage finishes, ``RUN/evaluation_manifest.json`` gets
``pipeline.stages.<name>``: ``status: complete``, the sha256 of every output file, the
parameters that shaped it and the output digests of the stages it reads (its inputs). Before a
stage runs again the pipeline decides (:func:`stale_reason`):

* no record -> ``new``; a record that is not ``complete`` (stopped, failed) -> ``resume``;
* other parameters (model, benchmark, metric settings, ...) -> ``params_changed``;
* a recorded output missing or with another sha256 -> ``outputs_changed``;
* an input stage whose outputs changed since (it reran) -> ``inputs_changed``;
* else the stage is skipped.

With ``--stages``, a stage left out is not rerun: when a selected stage reads (directly or
further up) a left-out stage whose recorded outputs changed, the run is refused
(:func:`check_upstream`, exit 2) instead of building on it or printing old figures as "up to
date". Each stage's library function also verifies the files it reads against the chain the
manifest records (:mod:`fks.provenance`), standalone or not.

So a deleted or corrupted file reruns its stage, and every stage reading it reruns because its
inputs changed; stages that do not read it are kept. Stages that resume on their own
(``generate``, ``extract``) continue a stopped pass instead of starting over.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fks.errors import FksInputError
from fks.generate.manifest import read_run_manifest, update_run_manifest
from fks.pipeline._context import PipelineContext
from fks.pipeline._stages import STAGE_NAMES, STAGES, Stage, output_files, stage_by_name
from fks.provenance import file_sha256
from fks.runlock import locks_run_dir

__all__ = ["PIPELINE_KEY", "StageOutcome", "PipelineResult", "select_stages", "stale_reason",
           "run_pipeline", "record_stage", "pipeline_records", "check_upstream"]

log = logging.getLogger(__name__)

#: the manifest section the pipeline owns
PIPELINE_KEY = "pipeline"


@dataclass(frozen=True)
class StageOutcome:
    """What happened to one stage: ``ran`` (with the reason) or ``skipped``."""

    name: str
    action: str
    reason: str | None
    seconds: float


@dataclass
class PipelineResult:
    """The outcome of :func:`run_pipeline`."""

    run_dir: Path
    outcomes: list[StageOutcome] = field(default_factory=list)

    @property
    def ran(self) -> list[str]:
        """Names of the stages that ran."""
        return [o.name for o in self.outcomes if o.action == "ran"]

    @property
    def skipped(self) -> list[str]:
        """Names of the stages skipped as up to date."""
        return [o.name for o in self.outcomes if o.action == "skipped"]

    @property
    def report(self) -> Path | None:
        """``RUN/report.html`` when it exists."""
        path = self.run_dir / "report.html"
        return path if path.is_file() else None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _jsonable(obj: Any) -> Any:
    """``obj`` as it reads back from JSON (tuples become lists), for comparisons."""
    return json.loads(json.dumps(obj, sort_keys=True, default=str))


def select_stages(names: Sequence[str] | None, *, backend: str) -> list[Stage]:
    """Return the stages to run, in pipeline order.

    ``names`` None: every stage, except those that need the model in process (hidden states)
    when the backend is a server (``openai``). Names may be given in any order.

    Raises:
        FksInputError: an unknown stage name.
    """
    if names is None:
        keep = [s for s in STAGES if not (s.hidden and backend == "openai")]
        dropped = [s.name for s in STAGES if s not in keep]
        if dropped:
            log.info("backend %s serves no hidden states: skipping %s", backend,
                     ", ".join(dropped))
        return keep
    unknown = [n for n in names if n not in STAGE_NAMES]
    if unknown or not names:
        raise FksInputError(f"unknown stage {unknown[0] if unknown else ''!r}; expected some "
                            f"of {', '.join(STAGE_NAMES)}", field="stages")
    return [s for s in STAGES if s.name in set(names)]


def pipeline_records(run_dir: Path) -> dict[str, Any]:
    """``pipeline.stages`` of the run manifest (``{}`` when the pipeline never ran)."""
    section = read_run_manifest(run_dir).get(PIPELINE_KEY) or {}
    stages = section.get("stages") if isinstance(section, dict) else None
    return dict(stages) if isinstance(stages, dict) else {}


def _write_record(run_dir: Path, name: str, record: dict[str, Any], ctx: PipelineContext
                  ) -> None:
    manifest = read_run_manifest(run_dir)
    section = manifest.get(PIPELINE_KEY)
    section = dict(section) if isinstance(section, dict) else {}
    stages = dict(section.get("stages") or {})
    stages[name] = record
    section.update(order=list(STAGE_NAMES), model=ctx.model, model_path=ctx.model_path,
                   benchmark=str(ctx.benchmark.root), stages=stages)
    update_run_manifest(run_dir, {PIPELINE_KEY: section})


def output_digest(record: dict[str, Any] | None) -> str | None:
    """sha256 over a complete stage record's output checksums (None: the stage has not run)."""
    if not record or record.get("status") != "complete":
        return None
    text = json.dumps(record.get("outputs") or {}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _input_digests(stage: Stage, records: dict[str, Any]) -> dict[str, str | None]:
    return {dep: output_digest(records.get(dep)) for dep in stage.inputs}


def stale_reason(stage: Stage, ctx: PipelineContext, records: dict[str, Any]) -> str | None:
    """Why ``stage`` must run (see the module docstring), or None when it is up to date."""
    record = records.get(stage.name)
    if not isinstance(record, dict):
        return "new"
    if record.get("status") != "complete":
        return "resume"
    if record.get("params") != _jsonable(stage.params(ctx)):
        return "params_changed"
    outputs = record.get("outputs")
    if not isinstance(outputs, dict) or not outputs:
        return "outputs_changed"
    for rel, sha in outputs.items():
        path = ctx.run_dir / rel
        if not path.is_file() or file_sha256(path) != sha:
            log.info("%s: %s is missing or changed", stage.name, rel)
            return "outputs_changed"
    if record.get("inputs") != _input_digests(stage, records):
        return "inputs_changed"
    return None


def _run_stage(stage: Stage, ctx: PipelineContext, reason: str, records: dict[str, Any]
               ) -> float:
    """Run one stage body and record its outputs; returns the seconds it took."""
    params = _jsonable(stage.params(ctx))
    base = {"function": stage.function, "params": params, "reason": reason,
            "started_at": _now()}
    _write_record(ctx.run_dir, stage.name, {**base, "status": "running"}, ctx)
    started, cpu = time.perf_counter(), time.process_time()
    try:
        stage.run(ctx, reason)
    except BaseException as exc:
        _write_record(ctx.run_dir, stage.name, {**base, "status": "failed",
                                                "error": f"{type(exc).__name__}: {exc}"}, ctx)
        raise
    seconds = time.perf_counter() - started
    # CPU seconds of this process (all its threads: torch's intra-op pool included); their
    # ratio to the wall seconds is the cores the stage kept busy (the profile of issue 29)
    base["cpu_seconds"] = round(time.process_time() - cpu, 3)
    records[stage.name] = _complete(stage, ctx, base, seconds, records)
    return seconds


def _complete(stage: Stage, ctx: PipelineContext, base: dict[str, Any], seconds: float,
              records: dict[str, Any]) -> dict[str, Any]:
    """Write the ``complete`` record of ``stage``: input digests and sha256 of every output."""
    files = output_files(ctx.run_dir, stage)
    if not files:
        raise RuntimeError(f"stage {stage.name} ({stage.function}) wrote none of "
                           f"{', '.join(stage.outputs)}")
    record = {**base, "status": "complete", "finished_at": _now(),
              "seconds": round(seconds, 3), "inputs": _input_digests(stage, records),
              "outputs": {p.relative_to(ctx.run_dir).as_posix(): file_sha256(p) for p in files}}
    _write_record(ctx.run_dir, stage.name, record, ctx)
    return record


def record_stage(ctx: PipelineContext, name: str, *, seconds: float, reason: str
                 ) -> dict[str, Any]:
    """Record stage ``name`` as complete although its outputs were produced outside the pipeline.

    ``fks launch`` runs some stages shard by shard and merges them; this writes the same record
    :func:`run_pipeline` writes for a stage it ran (params, input digests, output sha256), so
    the pipeline then skips the stage as up to date.

    Raises:
        RuntimeError: none of the stage's output files exists.
    """
    stage = stage_by_name(name)
    base = {"function": stage.function, "params": _jsonable(stage.params(ctx)),
            "reason": reason, "started_at": _now()}
    return _complete(stage, ctx, base, seconds, pipeline_records(ctx.run_dir))


def _upstream(stage: Stage) -> list[str]:
    """Every stage ``stage`` reads from, directly or through others."""
    out: list[str] = []
    todo = list(stage.inputs)
    while todo:
        name = todo.pop()
        if name not in out:
            out.append(name)
            todo.extend(stage_by_name(name).inputs)
    return out


def check_upstream(selected: Sequence[Stage], ctx: PipelineContext, records: dict[str, Any]
                   ) -> None:
    """Refuse ``--stages`` that would build on an upstream output changed since it was made.

    A stage left out of ``--stages`` is not rerun, so its recorded outputs must still be on
    disk as recorded; otherwise the selected stages would read (or skip over) a file that is
    not what the run made.

    Raises:
        FksInputError: an unselected upstream stage's output is missing or changed (naming
            the file and the stage to add).
    """
    chosen = {s.name for s in selected}
    for stage in selected:
        for dep in _upstream(stage):
            record = records.get(dep)
            if dep in chosen or not isinstance(record, dict) or record.get("status") != \
                    "complete":
                continue
            for rel, sha in (record.get("outputs") or {}).items():
                path = ctx.run_dir / rel
                if not path.is_file() or file_sha256(path) != sha:
                    raise FksInputError(
                        f"{rel} is missing or changed since stage {dep} wrote it, and --stages "
                        f"leaves {dep} out, so {stage.name} would build on it: add {dep} to "
                        "--stages (it and what depends on it rerun) or restore the file",
                        path=path, field="stages")


@locks_run_dir("ctx")
def run_pipeline(ctx: PipelineContext, *, stages: Sequence[str] | None = None
                 ) -> PipelineResult:
    """Run (or resume) the selected stages of ``ctx`` in order (see the module docstring).

    Args:
        ctx: the run (:meth:`PipelineContext.create`).
        stages: stage names (default: all; see :func:`select_stages`).

    Returns:
        which stages ran (and why) or were skipped; ``result.report`` is the HTML report.

    Raises:
        FksInputError: an unknown stage, or bad input met by a stage (file, line, field).
    """
    selected = select_stages(stages, backend=ctx.options.backend)
    result = PipelineResult(ctx.run_dir)
    records = pipeline_records(ctx.run_dir)
    try:
        check_upstream(selected, ctx, records)
        for stage in selected:
            reason = stale_reason(stage, ctx, records)
            if reason is None:
                log.info("stage %s: up to date (outputs verified), skipped", stage.name)
                result.outcomes.append(StageOutcome(stage.name, "skipped", None, 0.0))
                continue
            log.info("stage %s (%s): running (%s)", stage.name, stage.function, reason)
            seconds = _run_stage(stage, ctx, reason, records)
            result.outcomes.append(StageOutcome(stage.name, "ran", reason, seconds))
    finally:
        ctx.close()
    return result
