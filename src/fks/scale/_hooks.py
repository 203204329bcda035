"""The two places where scale-out meets ``fks run``'s bookkeeping (:mod:`fks.pipeline`).

* :func:`adopt_stage` -- after ``fks launch`` ran a stage shard by shard and merged it, record it
  in ``pipeline.stages`` exactly as :func:`fks.pipeline.run_pipeline` records a stage it ran
  itself (params, input digests, sha256 of every output), so the pipeline then skips it as up to
  date instead of running it again in one process.
* :func:`is_finished` -- the pipeline's own freshness check over every selected stage: a run is
  finished when no stage has a reason to run (each recorded complete, same parameters, every
  output file still has its recorded sha256, inputs unchanged).

:func:`adopt_stage` writes the record through the pipeline module's private helpers
(``_jsonable``, ``_input_digests``, ``_write_record``, ``_records``); a public
``fks.pipeline.record_stage`` would replace them (asked of the pipeline's owner).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from fks.io import sha256_file
from fks.pipeline import (
    PipelineContext,
    output_files,
    select_stages,
    stage_by_name,
    stale_reason,
)

__all__ = ["adopt_stage", "is_finished", "pipeline_records"]


def pipeline_records(ctx: PipelineContext) -> dict[str, Any]:
    """``pipeline.stages`` of the run manifest (``{}`` when the pipeline never ran)."""
    from fks.pipeline._run import _records

    return _records(ctx.run_dir)


def adopt_stage(ctx: PipelineContext, name: str, *, seconds: float, how: str) -> dict[str, Any]:
    """Record stage ``name`` as complete, its outputs produced outside the pipeline.

    Args:
        ctx: the run.
        name: a pipeline stage whose outputs now exist in ``RUN`` (merged shards).
        seconds: wall time the sharded stage took.
        how: a short note kept in the record (``reason``), e.g. ``"sharded 4 (ray)"``.

    Raises:
        RuntimeError: the stage's output files do not exist.
    """
    from fks.pipeline._run import _input_digests, _jsonable, _write_record

    stage = stage_by_name(name)
    files = output_files(ctx.run_dir, stage)
    if not files:
        raise RuntimeError(f"stage {name}: none of {', '.join(stage.outputs)} exists to adopt")
    records = pipeline_records(ctx)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    record = {"function": stage.function, "params": _jsonable(stage.params(ctx)),
              "reason": how, "started_at": now, "status": "complete", "finished_at": now,
              "seconds": round(seconds, 3), "inputs": _input_digests(stage, records),
              "outputs": {p.relative_to(ctx.run_dir).as_posix(): sha256_file(p)
                          for p in files}}
    _write_record(ctx.run_dir, name, record, ctx)
    return record


def is_finished(ctx: PipelineContext, stages: Sequence[str] | None = None) -> bool:
    """Return True when every selected stage of ``ctx`` is up to date (the pipeline's check)."""
    records = pipeline_records(ctx)
    return all(stale_reason(s, ctx, records) is None
               for s in select_stages(stages, backend=ctx.options.backend))
