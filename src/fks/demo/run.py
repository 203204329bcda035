"""``fks demo``: the embedded benchmark, the demo model and every stage, fully offline.

``run_demo`` is the body of ``fks demo``; it composes library calls only: the benchmark
build (:mod:`fks.demo.benchmark`), :func:`fks.demo.model.ensure_demo_model` (a tiny Llama fks
trains itself, cached) and :func:`fks.pipeline.run_pipeline` (every stage of ``fks run``,
ending in ``report.html``).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fks.configs import ConfigSet
from fks.data.stats import render_statistics
from fks.demo.benchmark import build_demo
from fks.errors import FksInputError
from fks.io import atomic_write_json, read_json
from fks.log import results_console

if TYPE_CHECKING:
    from rich.console import Console

    from fks.demo.model import DemoModelConfig

__all__ = ["DEMO_MODEL_NAME", "DemoResult", "run_demo"]

log = logging.getLogger(__name__)

#: the demo model's run folder name (``OUT/runs/<name>/``)
DEMO_MODEL_NAME = "fks-demo-llama"
#: figures printed at the end of ``fks demo``
DEMO_HEADLINE = ("anchor_accuracy", "bcs", "iss", "kts")
_DEMO_STATE = "demo.json"
#: ``fks demo --model``: facts (round-robin over the ten relations) and J-Lens prompts, sized so
#: a 135M-270M model finishes in about 10 minutes on 2 CPU cores (the whole demo benchmark, 3,835
#: queries with 256 J-Lens prompts, would take about 25)
REAL_DEMO_LIMIT = 60
REAL_DEMO_JLENS_PROMPTS = 64


@dataclass(frozen=True)
class DemoResult:
    """Where ``fks demo`` wrote what."""

    benchmark: Path
    model_dir: Path
    run_dir: Path
    report: Path | None
    headline: dict[str, Any]


@contextlib.contextmanager
def _torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` torch threads (None: leave as is), restored afterwards."""
    if n is None:
        yield
        return
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _reset_stale_run(out: Path, state: dict[str, Any], name: str = DEMO_MODEL_NAME) -> None:
    """Remove ``OUT/runs/<name>`` when it was made by another demo model or limit.

    The folder is the demo's own output; a run of another model there would make ``generate``
    refuse to resume (rightly, for a user's run). Each model keeps its own state file.
    """
    path = out / (_DEMO_STATE if name == DEMO_MODEL_NAME else f"demo-{name}.json")
    old = read_json(path) if path.is_file() else None
    run_dir = out / "runs" / name
    if old != state and run_dir.exists():
        log.warning("the demo run in %s was made with another demo model or limit; starting "
                    "it anew", run_dir)
        shutil.rmtree(run_dir)
    atomic_write_json(path, state)


def run_demo(
    out: Path,
    *,
    configs: ConfigSet,
    model_config: DemoModelConfig | None = None,
    limit: int | None = None,
    cache_dir: Path | None = None,
    jlens_prompts: int = 256,
    threads: int | None = 1,
    model: str | None = None,
    display: Console | None = None,
) -> DemoResult:
    """Run the offline demo: benchmark, demo model, every ``fks run`` stage, report.

    With ``model`` (a registry name, e.g. ``gemma-3-270m`` or ``smollm2-135m-instruct``) step 2
    is skipped and that real model runs on the demo benchmark instead, into
    ``out/runs/<model>/``, in ``--dtype auto`` (bfloat16 on a CPU with native bf16) and with
    torch's own thread count (``threads`` is ignored). It evaluates :data:`REAL_DEMO_LIMIT`
    facts unless ``limit`` says otherwise, and fits J-Lens on at most
    :data:`REAL_DEMO_JLENS_PROMPTS` prompts.

    1. build and validate the demo benchmark into ``out/benchmark/`` (and print its table);
    2. :func:`fks.demo.model.ensure_demo_model`: train the demo model on part of the demo
       facts (first run only; cached under ``$FKS_CACHE`` or ``~/.cache/fks``);
    3. :func:`fks.pipeline.run_pipeline` with the ``hf`` backend on CPU into
       ``out/runs/fks-demo-llama/``: generate, score, judge, behaviour metrics, hidden states,
       J-Lens, ISS/KTS, calibration, bootstrap, ``report.html``; a rerun skips what is done;
    4. print anchor accuracy, BCS, ISS and KTS with 95 % intervals, and the report path.

    Args:
        out: the demo's output folder.
        configs: the configs in force.
        model_config: demo model settings (default :class:`~fks.demo.model.DemoModelConfig`;
            smaller ones make quick tests).
        limit: evaluate only this many facts (round-robin over relations); the model is still
            trained on the full demo split.
        cache_dir: where trained demo models are cached (default: see
            :func:`fks.demo.model.cache_root`).
        jlens_prompts: main queries the J-Lens average runs over.
        threads: torch threads while the demo runs (default 1: the demo model is so small
            that more threads only add synchronisation; None leaves torch's setting).
        model: run this registry model instead of the demo model (see above).
        display: where step 4 prints (default :data:`fks.log.results_console`, stdout;
            ``fks demo --json`` passes stderr's, so stdout holds only the JSON).

    Raises:
        FksInputError: ``model`` is not in the registry (or its package is not installed).
    """
    from fks.demo.model import DemoModelConfig, ensure_demo_model
    from fks.pipeline import PipelineContext, PipelineOptions, render_headline, run_pipeline

    out = Path(out)
    if model is not None:
        return _run_real_model(out, model, configs=configs,
                               limit=REAL_DEMO_LIMIT if limit is None else limit,
                               jlens_prompts=min(jlens_prompts, REAL_DEMO_JLENS_PROMPTS),
                               display=display)
    result = build_demo(out / "benchmark", configs)
    render_statistics(result.statistics)
    log.info("demo benchmark (validation passed): %s", result.out)
    with _torch_threads(threads):
        model_dir = ensure_demo_model(configs=configs, cache_dir=cache_dir,
                                      benchmark=result.out,
                                      config=model_config or DemoModelConfig())
        _reset_stale_run(out, {"model_dir": str(model_dir.resolve()), "limit": limit,
                               "jlens_prompts": jlens_prompts})
        ctx = PipelineContext.create(
            runs_dir=out / "runs", model=DEMO_MODEL_NAME, model_path=str(model_dir),
            benchmark=result.out, configs=configs, limit=limit,
            options=PipelineOptions(backend="hf", device="cpu", jlens_prompts=jlens_prompts))
        run = run_pipeline(ctx)
    display = display or results_console
    headline = render_headline(run.run_dir, keys=DEMO_HEADLINE, out=display,
                               title=f"fks demo ({DEMO_MODEL_NAME}, trained by fks on part of "
                               "the demo facts)")
    display.print(f"report: {run.report}" if run.report else f"run: {run.run_dir}",
                  soft_wrap=True, highlight=False)
    return DemoResult(result.out, model_dir, run.run_dir, run.report, headline)


def _run_real_model(out: Path, model: str, *, configs: ConfigSet, limit: int | None,
                    jlens_prompts: int, display: Console | None = None) -> DemoResult:
    """``fks demo --model NAME``: the registry model on the demo benchmark, every stage."""
    from fks.generate.gguf import PACKAGE_SCHEME, locate_package_file
    from fks.pipeline import PipelineContext, PipelineOptions, render_headline, run_pipeline

    entry = configs.models.find(model)
    if entry is None:
        names = ", ".join(m.name for m in configs.models.models)
        raise FksInputError(f"model {model!r} is not in the registry (models.yaml: {names})",
                            field="model")
    if entry.path.startswith(PACKAGE_SCHEME):
        locate_package_file(entry.path)  # a missing package: exit 2 before the build
    result = build_demo(out / "benchmark", configs)
    render_statistics(result.statistics)
    log.info("demo benchmark (validation passed): %s", result.out)
    _reset_stale_run(out, {"model": model, "model_path": entry.path, "limit": limit,
                           "jlens_prompts": jlens_prompts}, name=model)
    ctx = PipelineContext.create(
        runs_dir=out / "runs", model=model, model_path=entry.path, benchmark=result.out,
        configs=configs, limit=limit,
        options=PipelineOptions(backend="hf", device="cpu", dtype="auto",
                                revision=entry.revision, jlens_prompts=jlens_prompts))
    run = run_pipeline(ctx)
    display = display or results_console
    headline = render_headline(run.run_dir, keys=DEMO_HEADLINE, out=display,
                               title=f"fks demo ({model} on the demo benchmark)")
    display.print(f"report: {run.report}" if run.report else f"run: {run.run_dir}",
                  soft_wrap=True, highlight=False)
    return DemoResult(result.out, Path(entry.path), run.run_dir, run.report, headline)
