"""``fks merge``, ``fks launch`` and ``fks sweep``: thin commands over :mod:`fks.scale`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from fks.errors import FksInputError
from fks.hidden.jlens import JLENS_PROMPTS
from fks.pipeline.cli import split_option

log = logging.getLogger("fks")


def merge_cmd(
    run: Annotated[Path, typer.Argument(help="Run directory holding shards/shard_i_of_n/.")],
    benchmark: Annotated[str | None, typer.Option(
        help="Benchmark (default: the one generation recorded).")] = None,
    stages: Annotated[list[str] | None, typer.Option(
        help="Only these of generate, judge, extract (default: every stage with shards).")
    ] = None,
) -> None:
    """Verify every shard (each query once, same config, checksums), then join them into RUN."""
    from fks.scale.merge import merge_run

    result = merge_run(run, benchmark=benchmark, stages=split_option(stages))
    for stage, n in result.merged.items():
        log.info("%s: merged %d from %d shards", stage, n, result.n_shards)


# ------------------------------------------------------------------------ shared options
Benchmark = Annotated[str, typer.Option(help="Benchmark directory, or hf[:REPO_OR_PATH].")]
Out = Annotated[Path, typer.Option(help="RUNS: the folder holding one run per model.")]
Stages = Annotated[list[str] | None, typer.Option(
    help="Only these pipeline stages (repeatable or comma-separated). Default: all.")]
Limit = Annotated[int | None, typer.Option(
    help="Only N facts (round-robin over relations), written to RUN/benchmark/.")]
Device = Annotated[str | None, typer.Option(help="torch device (default: cuda if available).")]
BatchSize = Annotated[int, typer.Option(min=1, help="Prompts per batch (use ~512 with vllm).")]
Judge = Annotated[str, typer.Option(help="alias (default), hf:PATH or openai:URL.")]
JlensPrompts = Annotated[int, typer.Option(min=1, help="Main queries the J-Lens averages.")]
Transport = Annotated[str, typer.Option(help="jlens or raw (ISS/KTS states).")]
KtsBoot = Annotated[bool, typer.Option(help="Bootstrap KTS too (slow).")]
Ray = Annotated[bool, typer.Option(
    "--ray", help="Run the shard tasks on Ray (pip install 'fks[ray]'); without it they run "
    "one after another in this process.")]
Address = Annotated[str | None, typer.Option(
    help="Ray cluster address (auto, ray://host:10001); default: a local Ray instance.")]
Shards = Annotated[int, typer.Option(min=1, help="Number of shards n.")]
NumCpus = Annotated[int | None, typer.Option(help="CPUs a local Ray instance offers.")]
GpusPerTask = Annotated[float, typer.Option(
    help="GPUs declared per generate/extract task (the tensor-parallel size with vllm).")]
CpusPerTask = Annotated[float, typer.Option(help="CPUs declared per task.")]
MaxRetries = Annotated[int, typer.Option(min=0, help="Retries of a failed task.")]
TensorParallel = Annotated[int | None, typer.Option(help="vllm: GPUs one model is split over.")]
MaxNumSeqs = Annotated[int | None, typer.Option(help="vllm: sequences decoded concurrently.")]


def _options(*, backend: str, device: str | None, batch_size: int, judge: str,
             jlens_prompts: int, transport: str, kts_bootstrap: bool,
             tensor_parallel_size: int | None, max_num_seqs: int | None,
             revision: str | None = None, trust_remote_code: bool = False) -> Any:
    """Build :class:`fks.pipeline.PipelineOptions` from the command's options."""
    from fks.generate.backends import BACKENDS
    from fks.pipeline import PipelineOptions

    if backend not in BACKENDS:
        raise FksInputError(f"unknown backend {backend!r}; expected one of "
                            f"{', '.join(BACKENDS)}", field="backend")
    if transport not in ("jlens", "raw"):
        raise FksInputError(f"expected jlens or raw; found {transport!r}", field="transport")
    extra = {k: v for k, v in (("tensor_parallel_size", tensor_parallel_size),
                               ("max_num_seqs", max_num_seqs)) if v is not None}
    if extra and backend != "vllm":
        raise FksInputError("--tensor-parallel-size/--max-num-seqs need --backend vllm",
                            field="backend")
    return PipelineOptions(backend=backend, device=device, revision=revision,
                           trust_remote_code=trust_remote_code, batch_size=batch_size,
                           judge=judge, jlens_prompts=jlens_prompts, transport=transport,
                           kts_bootstrap=kts_bootstrap, backend_options=extra)


def _executor(ray: bool, *, address: str | None, num_cpus: int | None, max_retries: int) -> Any:
    if not ray:
        if address:
            raise FksInputError("--address needs --ray", field="address")
        from fks.scale.launch import LocalExecutor

        return LocalExecutor(max_retries=max_retries)
    from fks.scale.ray_executor import RayExecutor

    return RayExecutor(address=address, num_cpus=num_cpus, max_retries=max_retries)


def launch_cmd(
    model: Annotated[str, typer.Option(help="Model name: the run folder RUNS/<NAME>/.")],
    benchmark: Benchmark,
    shards: Shards,
    model_path: Annotated[str | None, typer.Option(
        help="Local folder or hub id. Default: the registry path of --model.")] = None,
    out: Out = Path("runs"),
    backend: Annotated[str, typer.Option(help="hf | vllm (openai: no hidden states).")] = "hf",
    ray: Ray = False,
    address: Address = None,
    num_cpus: NumCpus = None,
    gpus_per_task: GpusPerTask = 0.0,
    cpus_per_task: CpusPerTask = 1.0,
    max_retries: MaxRetries = 2,
    stages: Stages = None,
    limit: Limit = None,
    device: Device = None,
    revision: Annotated[str | None, typer.Option(help="Hub revision.")] = None,
    trust_remote_code: Annotated[bool, typer.Option(help="Allow repository code.")] = False,
    batch_size: BatchSize = 16,
    judge: Judge = "alias",
    jlens_prompts: JlensPrompts = JLENS_PROMPTS,
    transport: Transport = "jlens",
    kts_bootstrap: KtsBoot = True,
    tensor_parallel_size: TensorParallel = None,
    max_num_seqs: MaxNumSeqs = None,
) -> None:
    """Run `fks run` for one model with generate, extract and judge split into N shards."""
    from fks.configs import current as get_configs
    from fks.pipeline import PipelineContext, select_stages
    from fks.scale.launch import LaunchSettings, launch

    configs = get_configs()
    entry = configs.models.find(model)
    model_path = model_path or (entry.path if entry else None)
    if model_path is None:
        raise FksInputError(f"model {model!r} is not in the registry; pass --model-path",
                            field="model_path")
    options = _options(backend=backend, device=device, batch_size=batch_size, judge=judge,
                       jlens_prompts=jlens_prompts, transport=transport,
                       kts_bootstrap=kts_bootstrap, tensor_parallel_size=tensor_parallel_size,
                       max_num_seqs=max_num_seqs, trust_remote_code=trust_remote_code,
                       revision=revision or (entry.revision if entry else None))
    stage_names = split_option(stages)
    select_stages(stage_names, backend=backend)  # check the names before any work
    if ray:  # fail before creating the run folder when Ray is missing
        from fks.scale.ray_executor import import_ray

        import_ray()
    settings = LaunchSettings(shards=shards, gpus_per_task=gpus_per_task,
                              cpus_per_task=cpus_per_task, max_retries=max_retries,
                              stages=tuple(stage_names) if stage_names else None)
    ctx = PipelineContext.create(runs_dir=out, model=model, model_path=model_path,
                                 benchmark=benchmark, configs=configs, options=options,
                                 limit=limit)
    executor = _executor(ray, address=address, num_cpus=num_cpus, max_retries=max_retries)
    try:
        result = launch(ctx, settings, executor)
    finally:
        executor.close()
    log.info("%d shard task(s) on %s; merged %s; then ran %s", len(result.tasks),
             result.executor, result.merged, ", ".join(result.pipeline.ran) or "nothing")


def sweep_cmd(
    models: Annotated[Path, typer.Argument(help="MODELS.yaml: name, model_path, backend, ...")],
    benchmark: Benchmark,
    out: Out = Path("runs"),
    stages: Stages = None,
    limit: Limit = None,
    reference: Annotated[str | None, typer.Option(
        help="Reference model of the paired differences (default: the first).")] = None,
    device: Device = None,
    batch_size: BatchSize = 16,
    judge: Judge = "alias",
    jlens_prompts: JlensPrompts = JLENS_PROMPTS,
    transport: Transport = "jlens",
    kts_bootstrap: KtsBoot = True,
    shards: Annotated[int, typer.Option(
        min=1, help="Split each model's heavy stages into N shards (fks launch).")] = 1,
    ray: Ray = False,
    address: Address = None,
    num_cpus: NumCpus = None,
    gpus_per_task: GpusPerTask = 0.0,
    max_retries: MaxRetries = 2,
    parallel_models: Annotated[bool, typer.Option(
        help="With --ray: run the models at once, one Ray task (--gpus-per-task GPUs) per "
        "model, instead of one after another.")] = False,
) -> None:
    """Run many models (skipping finished runs) and write RUNS/leaderboard.html."""
    from fks.configs import current as get_configs
    from fks.pipeline import select_stages
    from fks.scale.launch import LaunchSettings, launch
    from fks.scale.sweep import load_sweep, sweep

    configs = get_configs()
    spec = load_sweep(models)  # bad YAML: exit 2 before any work
    stage_names = split_option(stages)
    for entry in spec.models:
        select_stages(stage_names, backend=entry.backend)
    base = _options(backend="hf", device=device, batch_size=batch_size, judge=judge,
                    jlens_prompts=jlens_prompts, transport=transport,
                    kts_bootstrap=kts_bootstrap, tensor_parallel_size=None, max_num_seqs=None)
    if parallel_models and (not ray or shards > 1):
        raise FksInputError("--parallel-models needs --ray and no --shards", field="parallel")
    executor: Any = None
    launcher = parallel = None
    if shards > 1 or ray:
        executor = _executor(ray, address=address, num_cpus=num_cpus, max_retries=max_retries)
    if parallel_models:
        def parallel(ctxs: Any, names: Any) -> Any:
            return executor.run_models(ctxs, names, num_gpus=gpus_per_task)
    elif executor is not None:
        settings = LaunchSettings(shards=shards, gpus_per_task=gpus_per_task,
                                  max_retries=max_retries,
                                  stages=tuple(stage_names) if stage_names else None)

        def launcher(ctx: Any) -> Any:
            return launch(ctx, settings, executor)
    try:
        result = sweep(spec, benchmark, out, configs=configs, options=base, limit=limit,
                       stages=stage_names, launcher=launcher, parallel=parallel,
                       reference=reference)
    finally:
        if executor is not None:
            executor.close()
    log.info("ran %s; skipped (finished) %s; leaderboard %s", ", ".join(result.ran) or "none",
             ", ".join(result.skipped) or "none", result.leaderboard)


def register(app: typer.Typer) -> None:
    """Add ``fks merge``, ``fks launch`` and ``fks sweep``."""
    app.command("merge")(merge_cmd)
    app.command("launch")(launch_cmd)
    app.command("sweep")(sweep_cmd)
