"""The ``fks calibrate`` commands: ``RUN``, ``elicit RUN``, ``sample RUN``.

``fks calibrate RUN [--benchmark DIR] ...``, ``fks calibrate elicit RUN --model-path P``,
``fks calibrate sample RUN --model-path P [--k 5] [--temperature 1.0] [--limit N]``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from fks.cli_routing import default_run_group

log = logging.getLogger("fks")


calibrate_app = typer.Typer(
    cls=default_run_group("judged.jsonl"),
    help="Calibration of confidence sources against answer correctness. `fks calibrate RUN` "
    "means `fks calibrate run RUN`. A first argument that names a subcommand is that "
    "subcommand, unless a run directory of that name exists (holding judged.jsonl or "
    "evaluation_manifest.json) and the subcommand would lack its arguments: with a folder "
    "./run, `fks calibrate run` calibrates ./run.",
    no_args_is_help=True,
)


@calibrate_app.command("run")
def run_cmd(
    run: Annotated[Path, typer.Argument(help="Run directory (generations, judged, ...).")],
    benchmark: Annotated[str | None, typer.Option(
        help="Benchmark directory or hf[:REPO]; default: the one in the run manifest.")] = None,
    bins: Annotated[int, typer.Option(help="K, the number of ECE bins.")] = 10,
    coverage: Annotated[list[float] | None, typer.Option(
        help="Preset coverage for risk reporting (repeatable).")] = None,
    dev_fraction: Annotated[float, typer.Option(
        help="Share of facts in the recalibration dev split.")] = 0.5,
    nll_eps: Annotated[float, typer.Option(help="NLL clipping threshold.")] = 1e-12,
    max_curve_points: Annotated[int, typer.Option(
        help="At most this many risk-coverage points in the JSON.")] = 512,
    plots: Annotated[bool, typer.Option(
        help="Also write PNG plots (needs matplotlib).")] = False,
    min_facts_for_interval: Annotated[int, typer.Option(
        help="A sample with fewer distinct facts gets no interval (the reason is shown).")
    ] = 10,
    tokenizer: Annotated[str | None, typer.Option(
        help="Local tokenizer folder for the answer-span token offsets; default: the run "
             "manifest's model folder.")] = None,
) -> None:
    """Write RUN/metrics/calibration_summary.json (also the default: fks calibrate RUN)."""
    from fks.configs import current as get_configs
    from fks.metrics.calibration import CalibrationSettings, run_calibration

    configs = get_configs()
    boot = configs.metrics.bootstrap
    base = CalibrationSettings()
    settings = CalibrationSettings(
        bins=bins, nll_eps=nll_eps, coverages=tuple(coverage or base.coverages),
        dev_fraction=dev_fraction, max_curve_points=max_curve_points,
        n_resamples=boot.n_resamples, level=boot.confidence, seed=boot.seed,
        min_facts_for_interval=min_facts_for_interval, tokenizer=tokenizer)
    summary = run_calibration(run, configs=configs, benchmark=benchmark, settings=settings,
                              plots=plots)
    for name, reading in summary["readings"].items():
        for src, block in reading["sources"].items():
            fig = block.get("figures")
            e2e = (block.get("end_to_end") or {}).get("figures")
            if fig and e2e:
                log.info("%s / %s: n=%d brier=%.4f ece=%.4f aurc=%.4f | end-to-end n=%d "
                         "accuracy=%.4f aurc=%.4f risk@1.0=%.4f", name, src, fig["n"],
                         fig["brier"], fig["ece_equal_width"], fig["aurc"], e2e["n"],
                         e2e["accuracy"], e2e["aurc"], 1.0 - e2e["accuracy"])


@calibrate_app.command("elicit")
def elicit_cmd(
    run: Annotated[Path, typer.Argument(help="Run directory holding scored.jsonl.")],
    model_path: Annotated[str, typer.Option(
        help="Local folder or hub id (hf/vllm), or the served model name (openai).")],
    benchmark: Annotated[str | None, typer.Option(
        help="Benchmark directory or hf[:REPO]; default: the one in the run manifest.")] = None,
    backend: Annotated[str, typer.Option(help="hf | openai | vllm.")] = "hf",
    batch_size: Annotated[int, typer.Option(help="Prompts per batch.")] = 16,
    device: Annotated[str | None, typer.Option(help="torch device (hf).")] = None,
    revision: Annotated[str | None, typer.Option(help="Hub revision (hf/vllm).")] = None,
    trust_remote_code: Annotated[bool, typer.Option(
        help="Allow the model repository's own code (hf/vllm).")] = False,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server (openai).")
                        ] = None,
    api_key_env: Annotated[str, typer.Option(help="Variable holding the API key (openai).")
                           ] = "OPENAI_API_KEY",
    variants: Annotated[str, typer.Option(
        help="all: every wording/order/language variant (the protocol); primary: one prompt.")
    ] = "all",
    limit: Annotated[int | None, typer.Option(
        help="Only N answered rows: whole facts in a hash order (a spread slice).")] = None,
) -> None:
    """Ask the model for a verbalized probability of each of its answers (RUN/verbalized.jsonl)."""
    from fks.configs import current as get_configs
    from fks.data.load import load_benchmark
    from fks.errors import FksInputError
    from fks.generate.backends import make_backend
    from fks.generate.manifest import read_run_manifest
    from fks.metrics.calibration import elicit_verbalized

    configs = get_configs()
    if not (run / "scored.jsonl").is_file():
        raise FksInputError("file not found (run `fks score` first)", path=run / "scored.jsonl")
    bench = benchmark or (read_run_manifest(run).get("benchmark") or {}).get("path")
    if not bench:
        raise FksInputError("--benchmark is required (the run manifest names none)",
                            field="benchmark")
    if variants not in ("all", "primary"):
        raise FksInputError(f"must be all or primary; found {variants!r}", field="variants")
    if limit is not None and limit < 0:
        raise FksInputError(f"must be >= 0; found {limit}", field="limit")
    if backend == "openai" and not base_url:
        raise FksInputError("--base-url is required with --backend openai", field="base_url")
    loaded = load_benchmark(bench)  # cheap input checks before the (slow) model load
    opts: dict[str, Any] = {}
    if backend == "openai":
        opts = {"base_url": base_url, "api_key": os.environ.get(api_key_env)}
    elif backend in ("hf", "vllm"):
        opts = {"revision": revision}
    gen = make_backend(backend, model_path, configs=configs, device=device,
                       trust_remote_code=trust_remote_code, **opts)
    info = elicit_verbalized(run, gen, benchmark=loaded, batch_size=batch_size,
                             variants=variants, limit=limit)
    log.info("verbalized confidence: %s", info)


@calibrate_app.command("sample")
def sample_cmd(
    run: Annotated[Path, typer.Argument(help="Run directory (RUN/samples.jsonl is written).")],
    model_path: Annotated[str, typer.Option(help="Local folder or hub id (hf backend).")],
    benchmark: Annotated[str | None, typer.Option(
        help="Benchmark directory or hf[:REPO]; default: the one in the run manifest.")] = None,
    k: Annotated[int, typer.Option(help="Samples per query.")] = 5,
    temperature: Annotated[float, typer.Option(help="Frozen sampling temperature.")] = 1.0,
    limit: Annotated[int | None, typer.Option(
        help="Only N main-forward queries: whole facts in a hash order (a spread slice).")
    ] = None,
    seed: Annotated[int | None, typer.Option(
        help="Base seed (query i uses seed + i); default: generation.seed.")] = None,
    batch_size: Annotated[int, typer.Option(help="Prompts per batch.")] = 8,
    device: Annotated[str | None, typer.Option(help="torch device.")] = None,
    revision: Annotated[str | None, typer.Option(help="Hub revision.")] = None,
    trust_remote_code: Annotated[bool, typer.Option(
        help="Allow the model repository's own code.")] = False,
) -> None:
    """Draw k answers per main-forward query at a frozen temperature (RUN/samples.jsonl)."""
    from fks.configs import current as get_configs
    from fks.data.load import load_benchmark
    from fks.errors import FksInputError
    from fks.generate.backends.hf import HFBackend
    from fks.generate.manifest import read_run_manifest
    from fks.metrics.calibration.semantic_entropy import sample_run

    configs = get_configs()
    gen = configs.models.generation
    bench = benchmark or (read_run_manifest(run).get("benchmark") or {}).get("path")
    if not bench:
        raise FksInputError("--benchmark is required (the run manifest names none)",
                            field="benchmark")
    loaded = load_benchmark(bench)  # cheap input checks before the (slow) model load
    backend = HFBackend(model_path, generation=gen, device=device,
                        trust_remote_code=trust_remote_code, revision=revision)
    info = sample_run(run, backend, benchmark=loaded, k=k, temperature=temperature,
                      seed=gen.seed if seed is None else seed, max_new_tokens=gen.max_new_tokens,
                      max_prompt_len=gen.max_prompt_len, limit=limit, batch_size=batch_size)
    log.info("semantic-entropy samples: %s", info)


def register(app: typer.Typer) -> None:
    """Add ``fks calibrate ...``."""
    app.add_typer(calibrate_app, name="calibrate")
