"""Where scale-out meets ``fks run``'s bookkeeping (:mod:`fks.pipeline`).

* :func:`adopt_stage` -- after ``fks launch`` ran a stage shard by shard and merged it, record it
  in ``pipeline.stages`` exactly as :func:`fks.pipeline.run_pipeline` records a stage it ran
  itself (:func:`fks.pipeline.record_stage`), so the pipeline then skips it as up to date.
* :func:`is_finished` -- the pipeline's own freshness check over every selected stage.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fks.pipeline import (
    PipelineContext,
    record_stage,
    select_stages,
    stale_reason,
)
from fks.pipeline import pipeline_records as _pipeline_records

__all__ = ["adopt_stage", "is_finished", "pipeline_records"]


def pipeline_records(ctx: PipelineContext) -> dict[str, Any]:
    """``pipeline.stages`` of the run manifest (``{}`` when the pipeline never ran)."""
    return _pipeline_records(ctx.run_dir)


def adopt_stage(ctx: PipelineContext, name: str, *, seconds: float, how: str) -> dict[str, Any]:
    """Record stage ``name`` as complete, its outputs produced outside the pipeline.

    Raises:
        RuntimeError: the stage's output files do not exist.
    """
    return record_stage(ctx, name, seconds=seconds, reason=how)


def is_finished(ctx: PipelineContext, stages: Sequence[str] | None = None) -> bool:
    """Return True when every selected stage of ``ctx`` is up to date (the pipeline's check)."""
    records = pipeline_records(ctx)
    return all(stale_reason(s, ctx, records) is None
               for s in select_stages(stages, backend=ctx.options.backend))
