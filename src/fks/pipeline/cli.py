"""``fks run``: the whole evaluation of one model, stage by stage, resumable."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated

import typer

from fks.errors import FksInputError
from fks.hidden.jlens import JLENS_PROMPTS

log = logging.getLogger("fks")


def split_option(values: list[str] | None) -> list[str] | None:
    """Accept ``--stages a --stages b`` and ``--stages a,b``."""
    if not values:
        return None
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def run_cmd(
    model: Annotated[str, typer.Option(help="Model name: the run folder RUNS/<NAME>/.")],
    benchmark: Annotated[str, typer.Option(help="Benchmark directory, or hf[:REPO_OR_PATH].")],
    model_path: Annotated[str | None, typer.Option(
        help="Local folder, hub id, .gguf file or folder holding one (hf/vllm), or the served "
             "model name (openai). Default: the registry path of --model.")] = None,
    out: Annotated[Path, typer.Option(help="RUNS: the folder holding one run per model.")
                   ] = Path("runs"),
    backend: Annotated[str, typer.Option(help="Generation backend: hf | openai | vllm.")] = "hf",
    stages: Annotated[list[str] | None, typer.Option(
        help="Only these stages (repeatable or comma-separated): generate, score, judge, "
             "metrics_behavior, extract, jlens, metrics_internal, calibrate, bootstrap, "
             "report. Default: all.")] = None,
    limit: Annotated[int | None, typer.Option(
        help="Only N facts (round-robin over relations) with all their queries, written to "
             "RUN/benchmark/.")] = None,
    device: Annotated[str | None, typer.Option(
        help="torch device for the in-process model (default: cuda if available).")] = None,
    dtype: Annotated[str, typer.Option(
        help="Model dtype for generation and extraction: auto (bfloat16 on GPU and on a CPU "
             "with native bf16 (AMX/AVX512-BF16), float32 on other CPUs), bfloat16, float16 "
             "or float32. J-Lens always fits in float32.")] = "auto",
    revision: Annotated[str | None, typer.Option(help="Hub revision of the model.")] = None,
    trust_remote_code: Annotated[bool, typer.Option(
        help="Allow the model repository's own code.")] = False,
    batch_size: Annotated[int, typer.Option(
        min=1, help="Prompts per batch (generation and extraction).")] = 64,
    judge: Annotated[str, typer.Option(
        help="Judge: alias (default, deterministic), hf:PATH or openai:URL.")] = "alias",
    jlens_prompts: Annotated[int, typer.Option(
        min=1, help="Main queries the J-Lens Jacobian is averaged over (128: ISS within 2e-5 "
        "of a 1,024-prompt fit, bench/bench_jlens_convergence.py).")] = JLENS_PROMPTS,
    transport: Annotated[str, typer.Option(
        help="ISS/KTS on J-Lens transported states (jlens) or raw ones (raw).")] = "jlens",
    kts_bootstrap: Annotated[bool, typer.Option(
        help="Bootstrap KTS too (slow); --no-kts-bootstrap gives KTS points only.")] = True,
    base_url: Annotated[str | None, typer.Option(
        help="OpenAI-compatible server (--backend openai).")] = None,
    api_key_env: Annotated[str, typer.Option(
        help="Environment variable holding the API key (openai).")] = "OPENAI_API_KEY",
    strict: Annotated[bool, typer.Option(
        help="Exit with code 3 when a spec §18 sanity check fails (outputs still written).")
    ] = False,
    json_out: Annotated[bool, typer.Option(
        "--json", help="Print RUN/results.json's document on stdout (the headline table and "
                       "the report path go to stderr).")] = False,
) -> None:
    """Run every stage for one model into RUNS/<NAME>/ (skips stages that are up to date)."""
    from fks.configs import current as get_configs
    from fks.errors import set_strict
    from fks.generate.backends import BACKENDS
    from fks.generate.backends.hf import resolve_dtype
    from fks.pipeline import (
        PipelineContext,
        PipelineOptions,
        run_pipeline,
        select_stages,
    )

    set_strict(strict)
    configs = get_configs()
    entry = configs.models.find(model)
    model_path = model_path or (entry.path if entry else None)
    if model_path is None:
        raise FksInputError(f"model {model!r} is not in the registry; pass --model-path",
                            field="model_path")
    if backend not in BACKENDS:
        raise FksInputError(f"unknown backend {backend!r}; expected one of "
                            f"{', '.join(BACKENDS)}", field="backend")
    if transport not in ("jlens", "raw"):
        raise FksInputError(f"expected jlens or raw; found {transport!r}", field="transport")
    stage_names = split_option(stages)
    if stage_names is not None:
        select_stages(stage_names, backend=backend)  # check the names before any work
    extra: dict[str, object] = {}
    if backend == "openai":
        if not base_url:
            raise FksInputError("--base-url is required with --backend openai", field="base_url")
        extra = {"base_url": base_url, "api_key": os.environ.get(api_key_env)}
    elif backend == "hf":
        revision = revision or (entry.revision if entry else None)
    resolve_dtype("cpu", "bfloat16", dtype)  # check the name before any work
    options = PipelineOptions(backend=backend, device=device, dtype=dtype, revision=revision,
                              trust_remote_code=trust_remote_code, batch_size=batch_size,
                              judge=judge, jlens_prompts=jlens_prompts, transport=transport,
                              kts_bootstrap=kts_bootstrap, backend_options=extra)
    ctx = PipelineContext.create(runs_dir=out, model=model, model_path=model_path,
                                 benchmark=benchmark, configs=configs, options=options,
                                 limit=limit)
    result = run_pipeline(ctx, stages=stage_names)
    log.info("stages run: %s; up to date: %s", ", ".join(result.ran) or "none",
             ", ".join(result.skipped) or "none")
    print_results(result.run_dir, report=result.report, json_out=json_out)


def print_results(run_dir: Path, *, report: Path | None, json_out: bool,
                  title: str | None = None, keys: tuple[str, ...] | None = None) -> None:
    """Print the end of ``fks run``: the headline table and the report path.

    On stdout; with ``json_out``, those go to stderr and the results document
    (:mod:`fks.report.results`) alone to stdout.
    """
    from fks.log import console
    from fks.pipeline import render_headline
    from fks.report.results import build_results

    render_headline(run_dir, title=title, keys=keys, out=console if json_out else None)
    where = f"report: {report}" if report else f"run directory: {run_dir}"
    if json_out:
        console.print(where, soft_wrap=True, highlight=False)
        typer.echo(build_results(run_dir).model_dump_json(indent=2))
    else:
        typer.echo(where)


def register(app: typer.Typer) -> None:
    """Add ``fks run``."""
    app.command("run")(run_cmd)
