"""The stages of ``fks run``: a registry of (name, library function, inputs, outputs).

Each stage body only calls the stage's library function (named in :attr:`Stage.function`);
nothing is re-implemented here. A body gets the :class:`~fks.pipeline.PipelineContext` and the
reason it runs (:data:`REASONS`): resumable stages (``generate``, ``extract``, ``jlens``) resume
a stopped pass (``new``/``resume``) and start over when their finished outputs changed or their
parameters did (``outputs_changed``/``params_changed``).

==================  ===========================================  ==================================
stage               function                                     outputs (relative to RUN)
==================  ===========================================  ==================================
generate            fks.generate.runner.generate_run             generations.jsonl
score               fks.score.score_run                          scored.jsonl, known_labels.json
judge               fks.judge.judge_run                          judged.jsonl
metrics_behavior    fks.metrics.behavior.run_behavior_metrics    metrics/behavioral_*
extract             fks.hidden.extract.extract_hidden            hidden/
jlens               fks.hidden.jlens.run_jlens                   jlens/
metrics_internal    fks.metrics.internal.run_internal_metrics    metrics/iss_*, kts_*, sanity, ...
calibrate           fks.metrics.calibration.run_calibration      metrics/calibration_*
bootstrap           fks.report.statistics.run_statistics         metrics/bootstrap_*
report              fks.report.build.build_report                report.html, explorer.html, ...
==================  ===========================================  ==================================
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from fks.pipeline._context import PipelineContext
from fks.provenance import STAGE_OUTPUTS

__all__ = ["Stage", "STAGES", "STAGE_NAMES", "REASONS", "Reason", "stage_by_name", "output_files"]

log = logging.getLogger(__name__)

Reason = Literal["new", "resume", "outputs_changed", "inputs_changed", "params_changed"]
#: why a stage runs: never ran, stopped before its end, a recorded output is missing or
#: differs, an input stage's outputs changed, or its parameters changed
REASONS: tuple[str, ...] = ("new", "resume", "outputs_changed", "inputs_changed",
                            "params_changed")


@dataclass(frozen=True)
class Stage:
    """One pipeline stage.

    Attributes:
        name: the stage name (``--stages``; the key under ``pipeline.stages`` in the manifest).
        function: the dotted name of the library function the body calls.
        run: the body, ``run(ctx, reason)``.
        outputs: glob patterns (relative to RUN) of the files it writes; every match is
            checksummed after the stage and verified before it is skipped.
        inputs: stages whose outputs it reads (their checksums are part of its freshness).
        params: the settings that change its result, ``params(ctx) -> JSON-able dict``.
        hidden: needs the model in process (hidden states); dropped by default for servers.
    """

    name: str
    function: str
    run: Callable[[PipelineContext, str], None]
    outputs: tuple[str, ...]
    inputs: tuple[str, ...] = ()
    params: Callable[[PipelineContext], dict[str, Any]] = lambda ctx: {}
    hidden: bool = False


# ------------------------------------------------------------------------------- params
def _model_params(ctx: PipelineContext) -> dict[str, Any]:
    params = {"model": ctx.model, "model_path": ctx.model_path, "backend": ctx.options.backend,
              "revision": ctx.options.revision, "benchmark": ctx.benchmark.checksum(),
              "generation": ctx.configs.models.generation.model_dump(mode="json")}
    if ctx.options.dtype is not None:  # the dtype it resolves to here (auto differs by CPU)
        from fks.generate.backends.hf import resolve_device, resolve_dtype

        params["dtype"] = resolve_dtype(resolve_device(ctx.options.device),
                                        ctx.configs.models.generation.dtype, ctx.options.dtype)
    return params


def _generate_params(ctx: PipelineContext) -> dict[str, Any]:
    """Return the model's params, or the source log of an ``fks import``-ed generation.

    An imported generation is kept by ``fks run`` whatever ``--model-path``/``--backend`` it is
    given, as long as the log, the benchmark and the decoding protocol are unchanged.
    """
    from fks.generate.manifest import read_run_manifest

    imported = (read_run_manifest(ctx.run_dir)["stages"].get("generate") or {}).get("imported")
    if isinstance(imported, dict):
        return {"imported": imported, "benchmark": ctx.benchmark.checksum(),
                "generation": ctx.configs.models.generation.model_dump(mode="json")}
    return _model_params(ctx)


def _metrics_params(ctx: PipelineContext) -> dict[str, Any]:
    return {"metrics": ctx.configs.metrics.model_dump(mode="json")}


# ------------------------------------------------------------------------------- bodies
def _generate(ctx: PipelineContext, reason: str) -> None:
    from fks.generate.runner import GENERATIONS_NAME, generate_run

    path = ctx.run_dir / GENERATIONS_NAME
    if reason == "outputs_changed" and path.is_file():
        backup = path.with_name(path.name + ".stale")
        path.replace(backup)
        log.warning("%s changed after generation finished; kept it as %s and generating anew",
                    path, backup.name)
    summary = generate_run(ctx.benchmark, ctx.run_dir, model=ctx.model,
                           model_path=ctx.model_path, configs=ctx.configs,
                           backend=ctx.generation_backend(), batch_size=ctx.options.batch_size)
    if not summary.complete:
        raise RuntimeError(f"generation stopped with {summary.n_existing + summary.n_written} "
                           f"of {summary.n_selected} records")


def _score(ctx: PipelineContext, reason: str) -> None:
    from fks.score import score_run

    score_run(ctx.run_dir, ctx.benchmark.root, configs=ctx.configs)


def _judge(ctx: PipelineContext, reason: str) -> None:
    from fks.judge import judge_run, make_judge

    judge_run(ctx.run_dir, ctx.benchmark,
              make_judge(ctx.options.judge, configs=ctx.configs, run_dir=ctx.run_dir))


def _behavior(ctx: PipelineContext, reason: str) -> None:
    from fks.metrics.behavior import run_behavior_metrics

    m = ctx.configs.metrics
    run_behavior_metrics(ctx.run_dir, main_families=m.main_families, tau_b=m.tau_b,
                         tau_sensitivity=m.tau_b_sensitivity, benchmark=ctx.benchmark)


def _layers(ctx: PipelineContext, spec: str, model: Any) -> list[int]:
    from fks.hidden.capture import model_dims
    from fks.hidden.cli import parse_layers

    n_layers, _ = model_dims(model)
    return parse_layers(spec, n_layers, ctx.configs.metrics.layer_window_min_frac)


def _extract_params(ctx: PipelineContext) -> dict[str, Any]:
    """Return the model's parameters, and the reference pool's benchmark if there is one."""
    if ctx.parent is None or not ctx.configs.metrics.whitening.reference:
        return _model_params(ctx)  # unchanged for runs without a pool
    return {**_model_params(ctx), "reference_benchmark": ctx.parent.checksum()}


def _extract(ctx: PipelineContext, reason: str) -> None:
    from fks.hidden.extract import extract_hidden, extract_with_pool

    hf = ctx.hf_model()
    common = {"model_name": ctx.model, "layers": _layers(ctx, "all", hf.model),
              "batch_size": ctx.options.batch_size,
              "max_prompt_len": ctx.configs.models.generation.max_prompt_len,
              "overwrite": reason in ("outputs_changed", "params_changed"),
              "model_info": hf.describe(),
              "duplicate_sample": ctx.configs.metrics.sanity.duplicate_sample}
    if ctx.parent is not None and ctx.configs.metrics.whitening.reference:
        # the reference pool (fks.metrics.internal.reference): the parent benchmark's main
        # queries, so the ISS/KTS geometry does not depend on --limit; the run's own states
        # are copied out of it
        extract_with_pool(ctx.run_dir, ctx.benchmark, ctx.parent, hf.model, hf.tokenizer,
                          pool_layers=_layers(ctx, "window", hf.model), **common)
    else:
        extract_hidden(ctx.run_dir, ctx.benchmark, hf.model, hf.tokenizer, **common)


def _jlens(ctx: PipelineContext, reason: str) -> None:
    from fks.hidden.jlens import run_jlens

    hf = ctx.hf_model("float32")
    run_jlens(ctx.run_dir, ctx.benchmark, hf.model, hf.tokenizer, model_name=ctx.model,
              n_prompts=ctx.options.jlens_prompts, seed=ctx.options.jlens_seed,
              layers=_layers(ctx, ctx.options.jlens_layers, hf.model),
              max_prompt_len=ctx.configs.models.generation.max_prompt_len,
              overwrite=reason in ("outputs_changed", "params_changed"),
              model_info=hf.describe())


def _internal(ctx: PipelineContext, reason: str) -> None:
    from fks.metrics.internal import run_internal_metrics

    ctx.close()  # the model is no longer needed
    run_internal_metrics(ctx.run_dir, benchmark=ctx.benchmark, configs=ctx.configs,
                         transport=ctx.options.transport)


def _calibrate(ctx: PipelineContext, reason: str) -> None:
    from fks.metrics.calibration import run_calibration

    run_calibration(ctx.run_dir, configs=ctx.configs, benchmark=ctx.benchmark)


def _report_settings(ctx: PipelineContext) -> Any:
    from fks.report.statistics import Settings

    return Settings.from_configs(ctx.configs, kts_bootstrap=ctx.options.kts_bootstrap)


def _bootstrap(ctx: PipelineContext, reason: str) -> None:
    from fks.report.inputs import load_run
    from fks.report.statistics import run_statistics

    run_statistics(load_run(ctx.run_dir), _report_settings(ctx), reuse=False)


def _report(ctx: PipelineContext, reason: str) -> None:
    from fks.report.build import build_report

    # reuse=True: the bootstrap stage has just written intervals with the same fingerprint
    build_report([ctx.run_dir], configs=ctx.configs, kts_bootstrap=ctx.options.kts_bootstrap,
                 reuse=True)


# ----------------------------------------------------------------------------- registry
STAGES: tuple[Stage, ...] = (
    Stage("generate", "fks.generate.runner.generate_run", _generate,
          STAGE_OUTPUTS["generate"], params=_generate_params),
    Stage("score", "fks.score.score_run", _score, STAGE_OUTPUTS["score"],
          inputs=("generate",), params=lambda ctx: {"benchmark": ctx.benchmark.checksum()}),
    Stage("judge", "fks.judge.judge_run", _judge, STAGE_OUTPUTS["judge"], inputs=("score",),
          params=lambda ctx: {"judge": ctx.options.judge}),
    Stage("metrics_behavior", "fks.metrics.behavior.run_behavior_metrics", _behavior,
          STAGE_OUTPUTS["metrics_behavior"], inputs=("judge",), params=_metrics_params),
    Stage("extract", "fks.hidden.extract.extract_hidden", _extract, STAGE_OUTPUTS["extract"],
          params=_extract_params, hidden=True),
    Stage("jlens", "fks.hidden.jlens.run_jlens", _jlens, STAGE_OUTPUTS["jlens"],
          params=lambda ctx: {**_model_params(ctx), "n": ctx.options.jlens_prompts,
                              "seed": ctx.options.jlens_seed,
                              "layers": ctx.options.jlens_layers}, hidden=True),
    Stage("metrics_internal", "fks.metrics.internal.run_internal_metrics", _internal,
          STAGE_OUTPUTS["metrics_internal"], inputs=("extract", "jlens", "metrics_behavior"),
          params=lambda ctx: {**_metrics_params(ctx), "transport": ctx.options.transport},
          hidden=True),
    Stage("calibrate", "fks.metrics.calibration.run_calibration", _calibrate,
          STAGE_OUTPUTS["calibrate"], inputs=("generate", "score", "judge"),
          params=_metrics_params),
    Stage("bootstrap", "fks.report.statistics.run_statistics", _bootstrap,
          STAGE_OUTPUTS["bootstrap"], inputs=("metrics_behavior", "metrics_internal", "calibrate"),
          params=lambda ctx: {**_metrics_params(ctx), "kts_bootstrap": ctx.options.kts_bootstrap}),
    Stage("report", "fks.report.build.build_report", _report, STAGE_OUTPUTS["report"],
          inputs=("judge", "metrics_behavior", "metrics_internal", "calibrate", "bootstrap"),
          params=lambda ctx: {**_metrics_params(ctx), "kts_bootstrap": ctx.options.kts_bootstrap}),
)

#: stage names in pipeline order
STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)


_BY_NAME: dict[str, Stage] = {s.name: s for s in STAGES}


def stage_by_name(name: str) -> Stage:
    """Return the registered stage called ``name`` (KeyError when there is none)."""
    return _BY_NAME[name]


def output_files(run_dir: Path, stage: Stage) -> list[Path]:
    """Every existing file matching the stage's output patterns, sorted."""
    found: set[Path] = set()
    for pattern in stage.outputs:
        found.update(p for p in run_dir.glob(pattern) if p.is_file())
    return sorted(found)
