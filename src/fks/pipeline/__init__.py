"""``fks run``: every stage of one model's evaluation, chained and resumable.

generate -> score -> judge -> metrics (behaviour) -> extract -> jlens -> metrics (internal)
-> calibrate -> bootstrap -> report, each stage calling its own library function
(:data:`STAGES` names them), into ``RUNS/<model>/``. Stages whose recorded outputs still verify
are skipped (:func:`run_pipeline`); the headline figures are read back by
:func:`headline_figures`.
"""

from fks.pipeline._context import (
    SUBSET_DIR,
    PipelineContext,
    PipelineOptions,
    check_model_name,
    limit_facts,
)
from fks.pipeline._run import (
    PIPELINE_KEY,
    PipelineResult,
    StageOutcome,
    output_digest,
    pipeline_records,
    record_stage,
    run_pipeline,
    select_stages,
    stale_reason,
)
from fks.pipeline._stages import REASONS, STAGE_NAMES, STAGES, Stage, output_files, stage_by_name
from fks.pipeline._summary import (
    HEADLINE,
    families_absent,
    headline_figures,
    render_headline,
    render_sanity,
    reset_sanity_failures,
    sanity_failures,
)

__all__ = [
    "HEADLINE",
    "PIPELINE_KEY",
    "REASONS",
    "STAGES",
    "STAGE_NAMES",
    "SUBSET_DIR",
    "PipelineContext",
    "PipelineOptions",
    "PipelineResult",
    "Stage",
    "StageOutcome",
    "check_model_name",
    "families_absent",
    "headline_figures",
    "limit_facts",
    "output_digest",
    "output_files",
    "pipeline_records",
    "record_stage",
    "render_headline",
    "render_sanity",
    "reset_sanity_failures",
    "sanity_failures",
    "run_pipeline",
    "select_stages",
    "stage_by_name",
    "stale_reason",
]
