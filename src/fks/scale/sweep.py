"""``fks sweep MODELS.yaml --benchmark DIR --out RUNS/``: many models, one leaderboard.

``MODELS.yaml`` lists the models (validated by :class:`SweepFile`; unknown keys are refused)::

    models:
      - name: llama-3.1-8b            # the run folder RUNS/<name>/
        model_path: /models/llama-3.1-8b
        backend: vllm                 # hf (default) | vllm | openai
        backend_options: {tensor_parallel_size: 1, max_num_seqs: 256}
      - name: qwen2.5-7b
        model_path: Qwen/Qwen2.5-7B
        revision: a09a3545            # optional: device, batch_size, judge, trust_remote_code

(a bare list of entries is accepted too). Each model runs ``fks run`` into ``RUNS/<name>/``
(:func:`fks.pipeline.run_pipeline`), one model after another; or each model is sharded over the
cluster (``launcher``: :func:`fks.scale.launch.launch`); or the models run at once, one Ray task
per model (``parallel``: :meth:`fks.scale.ray_executor.RayExecutor.run_models`) -- the faster
way to a many-model table, since J-Lens, model loading and the CPU stages do not shard (see
the README's wall-time estimate). A model whose run is already finished
-- every selected stage up to date by the pipeline's own check, outputs verified by sha256
(:func:`fks.scale._hooks.is_finished`) -- is skipped. A model that fails is reported and the
sweep goes on with the next. At the end, ``RUNS/leaderboard.html`` is written over every
finished run by :func:`fks.report.build.build_report`: the leaderboard with bootstrap intervals
and the paired differences against the reference model (the first, unless named).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fks.configs import ConfigSet
from fks.errors import FksInputError
from fks.io import input_error, read_yaml
from fks.pipeline import PipelineContext, PipelineOptions, check_model_name, run_pipeline

__all__ = ["LEADERBOARD_NAME", "SweepEntry", "SweepFile", "SweepResult", "load_sweep", "sweep"]

log = logging.getLogger(__name__)

LEADERBOARD_NAME = "leaderboard.html"


class SweepEntry(BaseModel):
    """One model of a sweep (see the module docstring); unset options take the sweep's."""

    model_config = ConfigDict(extra="forbid")

    name: str
    model_path: str = Field(min_length=1)
    backend: str = "hf"
    revision: str | None = None
    device: str | None = None
    trust_remote_code: bool = False
    batch_size: int | None = Field(default=None, ge=1)
    judge: str | None = None
    backend_options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _folder_name(cls, value: str) -> str:
        try:
            return check_model_name(value)
        except FksInputError as exc:
            raise ValueError(exc.message) from None

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        from fks.generate.backends import BACKENDS

        if value not in BACKENDS:
            raise ValueError(f"expected one of {', '.join(BACKENDS)}; found {value!r}")
        return value

    def options(self, base: PipelineOptions) -> PipelineOptions:
        """Return ``base`` with this entry's settings applied."""
        changes: dict[str, Any] = {"backend": self.backend,
                                   "trust_remote_code": self.trust_remote_code,
                                   "backend_options": {**base.backend_options,
                                                       **self.backend_options}}
        for key in ("revision", "device", "batch_size", "judge"):
            if getattr(self, key) is not None:
                changes[key] = getattr(self, key)
        return replace(base, **changes)


class SweepFile(BaseModel):
    """``MODELS.yaml``: the models, names unique."""

    model_config = ConfigDict(extra="forbid")

    models: list[SweepEntry] = Field(min_length=1)

    @field_validator("models")
    @classmethod
    def _unique(cls, value: list[SweepEntry]) -> list[SweepEntry]:
        seen: set[str] = set()
        for entry in value:
            if entry.name in seen:
                raise ValueError(f"model name {entry.name!r} is listed twice")
            seen.add(entry.name)
        return value


def load_sweep(path: str | Path) -> SweepFile:
    """Read and validate ``MODELS.yaml``.

    Raises:
        FksInputError: unreadable YAML or an invalid entry, naming the file and the field
            (e.g. ``models.1.backend``).
    """
    data = read_yaml(path)
    if isinstance(data, list):
        data = {"models": data}
    if not isinstance(data, dict):
        raise FksInputError("expected a list of models or {models: [...]}", path=path)
    try:
        return SweepFile.model_validate(data)
    except ValidationError as exc:
        raise input_error(exc, path=path) from None


@dataclass
class SweepResult:
    """What :func:`sweep` did per model, and the leaderboard it wrote."""

    out: Path
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    stages_ran: dict[str, list[str]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    internal_errors: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    leaderboard: Path | None = None
    leaderboard_error: str | None = None


def _run_one(ctx: PipelineContext, stages: Sequence[str] | None,
             launcher: Callable[[PipelineContext], Any] | None) -> list[str]:
    """Run one model; returns the names of the pipeline stages that ran."""
    if launcher is not None:
        done = launcher(ctx)
        return [*getattr(done, "adopted", []), *getattr(getattr(done, "pipeline", None), "ran",
                                                        [])]
    return run_pipeline(ctx, stages=stages).ran


def sweep(
    models: str | Path | SweepFile,
    benchmark: str | Path,
    out: str | Path,
    *,
    configs: ConfigSet,
    options: PipelineOptions | None = None,
    limit: int | None = None,
    stages: Sequence[str] | None = None,
    launcher: Callable[[PipelineContext], Any] | None = None,
    parallel: Callable[[list[PipelineContext], Sequence[str] | None], dict[str, dict[str, Any]]]
    | None = None,
    reference: str | None = None,
) -> SweepResult:
    """Run every model of ``models`` into ``out/<name>/`` and write the leaderboard.

    Args:
        models: ``MODELS.yaml`` (or a loaded :class:`SweepFile`).
        benchmark: the benchmark every model runs on.
        out: ``RUNS``, one folder per model; the leaderboard is ``RUNS/leaderboard.html``.
        configs: the configs in force.
        options: the sweep's pipeline options; each entry overrides its own.
        limit: only N facts (the same subset for every model).
        stages: only these pipeline stages (default: all).
        launcher: run a model with this instead of :func:`run_pipeline` (e.g. a sharded
            :func:`fks.scale.launch.launch`); models still run one after another.
        parallel: run the unfinished models at once instead:
            ``parallel(contexts, stages) -> {model: {"ran": [...]} or {"error", "internal"}}``
            (e.g. :meth:`fks.scale.ray_executor.RayExecutor.run_models`, one task per model).
        reference: the reference model of the paired differences (default: the first).

    Raises:
        FksInputError: a bad sweep file, an unknown reference, or (after every model was
            tried) models that failed on bad input; other failures re-raised as RuntimeError.
    """
    spec = models if isinstance(models, SweepFile) else load_sweep(models)
    names = [e.name for e in spec.models]
    if reference is not None and reference not in names:
        raise FksInputError(f"reference {reference!r} is not a model of the sweep "
                            f"({', '.join(names)})", field="reference")
    if launcher is not None and parallel is not None:
        raise FksInputError("shard each model (launcher) or run models in parallel, not both",
                            field="parallel")
    base = options or PipelineOptions()
    result = SweepResult(Path(out))
    pending = _prepare(spec, benchmark, out, configs, base, limit, stages, result)
    if parallel is not None and pending:
        outcomes = parallel(pending, stages)
        for ctx in pending:
            _record(result, ctx.model, outcomes.get(ctx.model,
                                                     {"error": "no result", "internal": True}))
    else:
        for ctx in pending:
            started = time.perf_counter()
            try:
                outcome: dict[str, Any] = {"ran": _run_one(ctx, stages, launcher)}
            except Exception as exc:  # keep going: one broken model must not stop the sweep
                outcome = _failure(exc)
            outcome["seconds"] = round(time.perf_counter() - started, 3)
            _record(result, ctx.model, outcome)
    finished = [Path(out) / n for n in names if n in result.ran or n in result.skipped]
    if finished:
        result.leaderboard = _leaderboard(finished, Path(out), configs, base, reference, result)
    if result.failed or result.leaderboard_error:
        text = "; ".join([f"{len(result.failed)} of {len(names)} model(s) failed", *(
            f"{k}: {v}" for k, v in result.failed.items())] + (
            [f"leaderboard: {result.leaderboard_error}"] if result.leaderboard_error else []))
        if result.internal_errors:
            raise RuntimeError(text)
        raise FksInputError(text, field="models")
    return result


def _failure(exc: BaseException) -> dict[str, Any]:
    """Turn an exception into an outcome ``{"error", "internal"}`` (bad input: not internal)."""
    if isinstance(exc, FksInputError):
        return {"error": exc.one_line(), "internal": False}
    return {"error": f"{type(exc).__name__}: {exc}", "internal": True}


def _record(result: SweepResult, name: str, outcome: dict[str, Any]) -> None:
    """File one model's outcome (``{"ran": [...]}`` or ``{"error", "internal"}``)."""
    if "seconds" in outcome:
        result.seconds[name] = outcome["seconds"]
    if "error" in outcome:
        log.error("%s failed: %s", name, outcome["error"])
        result.failed[name] = outcome["error"]
        if outcome.get("internal", True):
            result.internal_errors.append(name)
        return
    result.ran.append(name)
    result.stages_ran[name] = list(outcome.get("ran", []))


def _prepare(spec: SweepFile, benchmark: str | Path, out: str | Path, configs: ConfigSet,
             base: PipelineOptions, limit: int | None, stages: Sequence[str] | None,
             result: SweepResult) -> list[PipelineContext]:
    """Create every model's run; file the finished ones as skipped; return those to run."""
    from fks.scale._hooks import is_finished

    pending = []
    for entry in spec.models:
        try:
            ctx = PipelineContext.create(runs_dir=out, model=entry.name,
                                         model_path=entry.model_path, benchmark=benchmark,
                                         configs=configs, options=entry.options(base),
                                         limit=limit)
            if is_finished(ctx, stages):
                log.info("%s: finished run (every stage verified), skipped", entry.name)
                result.skipped.append(entry.name)
            else:
                pending.append(ctx)
        except Exception as exc:
            _record(result, entry.name, _failure(exc))
    return pending


def _leaderboard(runs: list[Path], out: Path, configs: ConfigSet, options: PipelineOptions,
                 reference: str | None, result: SweepResult) -> Path | None:
    """Write ``RUNS/leaderboard.html`` over the finished runs (None when it cannot be built)."""
    from fks.report.build import build_report

    ref = reference if reference is not None and out / reference in runs else None
    try:
        return build_report(runs, configs=configs, out=out / LEADERBOARD_NAME, reference=ref,
                            kts_bootstrap=options.kts_bootstrap, reuse=True)
    except FksInputError as exc:
        result.leaderboard_error = exc.one_line()
        log.error("leaderboard not written: %s", exc.one_line())
        return None
