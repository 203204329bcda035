"""``fks launch``: one model's ``fks run``, its heavy stages fanned out over shards.

The plan (one task per shard and stage, waves separated by merges)::

    wave 1   generate 1/n ... n/n   +   extract 1/n ... n/n      (GPU tasks, independent)
    merge    RUN/generations.jsonl, RUN/hidden/                   (fks merge: verified)
    score    once, in the driver (seconds of CPU)
    wave 2   judge 1/n ... n/n                                    (GPU tasks only for hf: judges)
    merge    RUN/judged.jsonl
    rest     fks run's remaining stages in the driver: metrics, J-Lens, calibration,
             bootstrap, report (they need every fact at once; J-Lens fits one average)

Each merged stage is then recorded in the pipeline's bookkeeping (:func:`adopt_stage`), so the
final :func:`fks.pipeline.run_pipeline` call skips it and runs only what is left; rerunning a
launch skips every stage that is up to date, and a shard task resumes its own partial output
(generation and extraction are resumable), so a retried task continues where it stopped.

Executors: :class:`LocalExecutor` runs the tasks one after another in this process (one
machine, or tests); :class:`RayExecutor` submits them to a Ray cluster (``ray.init(address)``,
or a local instance), declaring ``num_gpus``/``num_cpus`` per task and retrying a failed task
``max_retries`` times. Bad input (:class:`~fks.errors.FksInputError`) is never retried: a task
returns it and the driver raises it (exit 2).

Task isolation: a Ray task already runs in its own worker process, and Ray caps a worker's
OpenMP/torch threads at the task's ``num_cpus``; GPU tasks get ``max_calls=1``, so the worker
exits after its task and hands its GPU memory back. So a task calls fks's library functions
directly (no subprocess). The payload a task receives is plain JSON-able data (paths, options,
the configs in force as a dict), never a live object.

Testing hook: ``FKS_LAUNCH_FAIL_ONCE="generate:1,judge:2"`` with ``FKS_LAUNCH_FAULT_DIR=DIR``
makes the named tasks raise on their first attempt (a marker file in ``DIR`` remembers it), to
exercise the retries.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from fks.errors import FksInputError
from fks.pipeline import PipelineContext, PipelineOptions, run_pipeline, select_stages, stale_reason
from fks.runlock import locks_run_dir, run_dir_lock

__all__ = [
    "SHARDED_STAGES",
    "LaunchSettings",
    "ShardTask",
    "LaunchResult",
    "Executor",
    "LocalExecutor",
    "task_payload",
    "run_shard_task",
    "run_model_task",
    "plan_tasks",
    "launch",
]

log = logging.getLogger(__name__)

#: the stages run shard by shard, in pipeline order
SHARDED_STAGES: tuple[str, ...] = ("generate", "extract", "judge")
FAULT_ENV = "FKS_LAUNCH_FAIL_ONCE"
FAULT_DIR_ENV = "FKS_LAUNCH_FAULT_DIR"


@dataclass(frozen=True)
class LaunchSettings:
    """How to fan out.

    Attributes:
        shards: ``n``, the number of shards (1 <= n <= facts).
        gpus_per_task: GPUs declared per generate/extract task (and per judge task when the
            judge is an in-process model, ``hf:``); set it to the tensor-parallel size with vLLM.
        cpus_per_task: CPUs declared per task.
        max_retries: times a failed task is retried (bad input is never retried).
        stages: the pipeline stages to run (None: all that the backend allows).
    """

    shards: int
    gpus_per_task: float = 0.0
    cpus_per_task: float = 1.0
    max_retries: int = 2
    stages: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.shards < 1:
            raise FksInputError(f"must be >= 1; found {self.shards}", field="shards")
        if self.gpus_per_task < 0 or self.cpus_per_task < 0 or self.max_retries < 0:
            raise FksInputError("gpus_per_task, cpus_per_task and max_retries must be >= 0",
                                field="launch")


@dataclass(frozen=True)
class ShardTask:
    """One stage of one shard, with the resources it declares."""

    stage: str
    shard: int
    n: int
    num_gpus: float = 0.0
    num_cpus: float = 1.0

    @property
    def label(self) -> str:
        """``stage i/n``."""
        return f"{self.stage} {self.shard}/{self.n}"


@dataclass
class LaunchResult:
    """What :func:`launch` did: the tasks (with seconds and attempts), merges, the pipeline."""

    run_dir: Path
    executor: str
    n_shards: int
    tasks: list[dict[str, Any]] = field(default_factory=list)
    merged: dict[str, int] = field(default_factory=dict)
    adopted: list[str] = field(default_factory=list)
    pipeline: Any = None
    seconds: dict[str, float] = field(default_factory=dict)


class Executor(Protocol):
    """Runs a wave of shard tasks and returns their results in order."""

    name: str

    def run(self, tasks: Sequence[ShardTask], payload: dict[str, Any]) -> list[dict[str, Any]]:
        """Run every task (retrying failures) and return one result dict per task."""
        ...

    def close(self) -> None:
        """Release what the executor started."""
        ...


# ----------------------------------------------------------------------------- payload
def task_payload(ctx: PipelineContext) -> dict[str, Any]:
    """Describe the run as JSON-able data; every shard task rebuilds its context from it."""
    faults = [f.strip() for f in os.environ.get(FAULT_ENV, "").split(",") if f.strip()]
    return {
        "run_dir": str(Path(ctx.run_dir).resolve()),
        "model": ctx.model,
        "model_path": ctx.model_path,
        "benchmark": str(Path(ctx.benchmark.root).resolve()),
        "configs": ctx.configs.model_dump(mode="json"),
        "options": dataclasses.asdict(ctx.options),
        "fault_once": faults,
        "fault_dir": os.environ.get(FAULT_DIR_ENV) if faults else None,
    }


def _context(payload: dict[str, Any]) -> PipelineContext:
    from fks.configs import ConfigSet
    from fks.data.load import load_benchmark

    return PipelineContext(Path(payload["run_dir"]), payload["model"], payload["model_path"],
                           load_benchmark(payload["benchmark"]),
                           ConfigSet.model_validate(payload["configs"]),
                           PipelineOptions(**payload["options"]))


def _inject_fault(payload: dict[str, Any], stage: str, shard: int) -> None:
    """Raise on the first attempt of a task named in ``fault_once`` (the testing hook)."""
    key = f"{stage}:{shard}"
    if key not in payload.get("fault_once", []) or not payload.get("fault_dir"):
        return
    marker = Path(payload["fault_dir"]) / f"fault_{stage}_{shard}"
    if not marker.exists():
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("failed once\n", encoding="utf-8")
        raise RuntimeError(f"injected fault ({FAULT_ENV}={key}): first attempt fails")


def _stage_body(ctx: PipelineContext, stage: str, shard: tuple[int, int]) -> dict[str, Any]:
    """Call the stage's library function for one shard; returns counts."""
    if stage == "generate":
        from fks.generate.runner import generate_run

        s = generate_run(ctx.benchmark, ctx.run_dir, model=ctx.model, model_path=ctx.model_path,
                         configs=ctx.configs, backend=ctx.generation_backend(),
                         batch_size=ctx.options.batch_size, shard=shard)
        if not s.complete:
            raise RuntimeError(f"shard {shard[0]}/{shard[1]} stopped at "
                               f"{s.n_existing + s.n_written} of {s.n_selected} records")
        return {"records": s.n_selected, "written": s.n_written}
    if stage == "extract":
        from fks.hidden.extract import extract_hidden

        hf = ctx.hf_model()
        meta = extract_hidden(ctx.run_dir, ctx.benchmark, hf.model, hf.tokenizer,
                              model_name=ctx.model, batch_size=ctx.options.batch_size,
                              max_prompt_len=ctx.configs.models.generation.max_prompt_len,
                              model_info=hf.describe(), shard=shard)
        return {"records": meta["n_rows"]}
    if stage == "judge":
        from fks.generate.runner import shard_dir
        from fks.judge import judge_run, make_judge

        # the judge's cache (LLM judges) stays in the shard folder: shards may run at once
        info = judge_run(ctx.run_dir, ctx.benchmark,
                         make_judge(ctx.options.judge, configs=ctx.configs,
                                    run_dir=shard_dir(ctx.run_dir, shard)), shard=shard)
        return {"records": info["counts"]["records"]}
    raise ValueError(f"stage {stage!r} is not sharded; sharded: {', '.join(SHARDED_STAGES)}")


def run_shard_task(payload: dict[str, Any], stage: str, shard: int, n: int) -> dict[str, Any]:
    """Run one stage of one shard in this process (a Ray worker, or the driver).

    Returns:
        ``{"stage", "shard", "seconds", "records", ...}``, or ``{"input_error": message, ...}``
        for bad input (which no retry can fix, so it is returned rather than raised).

    Raises:
        Exception: any other failure, for the executor to retry.
    """
    started = time.perf_counter()
    _inject_fault(payload, stage, shard)
    ctx = _context(payload)
    try:
        # a retry may start while the first attempt still lives (a lost heartbeat, a node
        # thought dead): it queues behind that attempt's lock on the shard folder, then resumes
        # from what the attempt wrote, so no record is ever written twice (fks.runlock)
        with run_dir_lock(ctx.run_dir, shard=(shard, n), wait=True):
            out = _stage_body(ctx, stage, (shard, n))
    except FksInputError as exc:
        return {"stage": stage, "shard": shard, "input_error": exc.one_line()}
    finally:
        ctx.close()
    return {"stage": stage, "shard": shard, "seconds": round(time.perf_counter() - started, 3),
            "pid": os.getpid(), **out}


def run_model_task(payload: dict[str, Any], stages: Sequence[str] | None) -> dict[str, Any]:
    """Run one model's whole ``fks run`` in this process (one task per model of a sweep).

    Returns:
        ``{"model", "ran", "seconds", "pid"}``, or ``{"model", "error", "internal": False}``
        for bad input (never retried).

    Raises:
        Exception: any other failure, for the executor to retry.
    """
    started = time.perf_counter()
    _inject_fault(payload, "model", 0)
    ctx = _context(payload)
    try:
        ran = run_pipeline(ctx, stages=stages).ran
    except FksInputError as exc:
        return {"model": ctx.model, "error": exc.one_line(), "internal": False}
    return {"model": ctx.model, "ran": ran, "seconds": round(time.perf_counter() - started, 3),
            "pid": os.getpid()}


# ---------------------------------------------------------------------------- executors
class LocalExecutor:
    """Run the tasks one after another in this process, retrying each up to ``max_retries``."""

    name = "local"

    def __init__(self, *, max_retries: int = 2) -> None:
        self.max_retries = max_retries

    def run(self, tasks: Sequence[ShardTask], payload: dict[str, Any]) -> list[dict[str, Any]]:
        """Run every task in order (see the class docstring)."""
        results = []
        for task in tasks:
            for attempt in range(1, self.max_retries + 2):
                try:
                    res = run_shard_task(payload, task.stage, task.shard, task.n)
                except Exception as exc:
                    if attempt > self.max_retries:
                        raise RuntimeError(f"task {task.label} failed after {attempt} "
                                           f"attempt(s): {type(exc).__name__}: {exc}") from exc
                    log.warning("task %s failed (attempt %d): %s; retrying", task.label,
                                attempt, exc)
                    continue
                results.append({**res, "attempts": attempt})
                break
        return results

    def close(self) -> None:
        """Nothing to release."""


# ------------------------------------------------------------------------------ driver
def plan_tasks(stage: str, settings: LaunchSettings, options: PipelineOptions
               ) -> list[ShardTask]:
    """List the ``n`` tasks of one stage, with their declared resources."""
    gpus = settings.gpus_per_task
    if stage == "judge" and not options.judge.startswith("hf:"):
        gpus = 0.0  # the alias judge and server judges need no GPU here
    return [ShardTask(stage, i, settings.shards, gpus, settings.cpus_per_task)
            for i in range(1, settings.shards + 1)]


def _fresh(ctx: PipelineContext, name: str) -> bool:
    from fks.pipeline import stage_by_name
    from fks.scale._hooks import pipeline_records

    return stale_reason(stage_by_name(name), ctx, pipeline_records(ctx)) is None


def _wave(executor: Executor, tasks: list[ShardTask], payload: dict[str, Any],
          result: LaunchResult, label: str) -> None:
    """Run one wave, record its results; raise the first bad-input error a task returned."""
    if not tasks:
        return
    started = time.perf_counter()
    log.info("%s: %d task(s) on %s: %s", label, len(tasks), executor.name,
             ", ".join(t.label for t in tasks))
    outs = executor.run(tasks, payload)
    result.seconds[label] = round(time.perf_counter() - started, 3)
    result.tasks += outs
    bad = next((o for o in outs if "input_error" in o), None)
    if bad is not None:
        raise FksInputError(f"task {bad['stage']} {bad['shard']}/{result.n_shards}: "
                            f"{bad['input_error']}")


def _merge_and_adopt(ctx: PipelineContext, stages: list[str], result: LaunchResult,
                     seconds: float, how: str) -> None:
    from fks.scale._hooks import adopt_stage
    from fks.scale.merge import merge_run

    if not stages:
        return
    merged = merge_run(ctx.run_dir, benchmark=ctx.benchmark, stages=stages)
    result.merged.update(merged.merged)
    for name in stages:
        adopt_stage(ctx, name, seconds=seconds, how=how)
        result.adopted.append(name)


def _check_existing_split(run_dir: Path, n: int) -> None:
    """Refuse to mix splits: ``RUN/shards`` may only hold ``shard_i_of_n`` folders of this n."""
    import re

    found = {int(m.group(1)) for p in (Path(run_dir) / "shards").glob("shard_*_of_*")
             if (m := re.fullmatch(r"shard_\d+_of_(\d+)", p.name))}
    if found - {n}:
        raise FksInputError(f"RUN/shards holds a split into {sorted(found)} shard(s), not "
                            f"{n}; resume with that --shards, or remove RUN/shards",
                            path=Path(run_dir) / "shards", field="shards")


@locks_run_dir("ctx")
def launch(ctx: PipelineContext, settings: LaunchSettings, executor: Executor) -> LaunchResult:
    """Run ``fks run`` for ``ctx`` with its heavy stages sharded (see the module docstring).

    Returns:
        the tasks run, the merges, and the final pipeline result (``result.pipeline``).

    Raises:
        FksInputError: bad settings (more shards than facts, an unknown stage), bad input met
            by a task, or a merge that finds gaps.
        RuntimeError: a task that still failed after its retries.
    """
    n_facts = len(ctx.benchmark.facts)
    if settings.shards > n_facts:
        raise FksInputError(f"{settings.shards} shards for {n_facts} facts: every shard needs "
                            "at least one fact", field="shards")
    _check_existing_split(ctx.run_dir, settings.shards)
    names = [s.name for s in select_stages(settings.stages, backend=ctx.options.backend)]
    result = LaunchResult(ctx.run_dir, executor.name, settings.shards)
    payload = task_payload(ctx)
    how = f"sharded {settings.shards} ({executor.name})"
    todo = [s for s in SHARDED_STAGES if s in names and not _fresh(ctx, s)]
    first = [s for s in ("generate", "extract") if s in todo]
    started = time.perf_counter()
    _wave(executor, [t for s in first for t in plan_tasks(s, settings, ctx.options)], payload,
          result, "wave 1")
    _merge_and_adopt(ctx, first, result, time.perf_counter() - started, how)
    if "judge" in todo:
        if "score" in names:
            run_pipeline(ctx, stages=["score"])  # cheap; the judge shards read RUN/scored.jsonl
        started = time.perf_counter()
        _wave(executor, plan_tasks("judge", settings, ctx.options), payload, result, "wave 2")
        _merge_and_adopt(ctx, ["judge"], result, time.perf_counter() - started, how)
    started = time.perf_counter()
    result.pipeline = run_pipeline(ctx, stages=names)
    result.seconds["rest"] = round(time.perf_counter() - started, 3)
    return result
