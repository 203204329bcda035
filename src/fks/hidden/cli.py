"""``fks extract`` and ``fks jlens``.

Thin wrappers over :mod:`fks.hidden.extract` and :mod:`fks.hidden.jlens`. Model loading is the
generation backend's, so dtype, device and tokenizer handling match generation.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from fks.errors import FksInputError
from fks.hidden.extract import SHARE_PREFIXES
from fks.hidden.jlens import JLENS_PROMPTS

log = logging.getLogger("fks")

_LAYERS_HELP = ("Blocks to use: 'all', 'window' (l/(L-1) >= metrics.layer_window_min_frac) or a "
                "comma list such as '10,12,15'. Layer l = output of decoder block l.")


def parse_layers(spec: str, n_layers: int, window_min_frac: float) -> list[int]:
    """Turn ``all`` / ``window`` / ``"3,5,7"`` into sorted block indices.

    Raises:
        FksInputError: an unknown word, a non-integer, or an index outside ``0..n_layers-1``.
    """
    text = spec.strip().lower()
    if text == "all":
        return list(range(n_layers))
    if text == "window":
        denom = max(n_layers - 1, 1)
        return [x for x in range(n_layers) if x / denom >= window_min_frac]
    try:
        layers = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise FksInputError(f"expected 'all', 'window' or integers like '3,5'; found {spec!r}",
                            field="layers") from None
    bad = [x for x in layers if not 0 <= x < n_layers]
    if bad or not layers:
        raise FksInputError(f"layer {bad[0] if bad else spec!r} is outside 0..{n_layers - 1}",
                            field="layers")
    return layers


def _resolve_model(run: Path, model: str | None, model_path: str | None) -> tuple[str, str, Any]:
    """``(name, path, registry entry or None)`` from the options and the run's manifest.

    A run directory holds one model: when generation already recorded ``model.name`` there,
    a different ``--model`` is refused, and ``--model``/``--model-path`` default to it.
    """
    from fks.configs import current as get_configs
    from fks.generate.manifest import MANIFEST_NAME, read_run_manifest

    recorded = read_run_manifest(run).get("model") or {}
    name = model or recorded.get("name")
    entry = get_configs().models.find(name) if name else None
    path = model_path or (recorded.get("path") if recorded.get("name") == name else None) or (
        entry.path if entry else None)
    if path is None:
        raise FksInputError(
            f"model {name!r} is not in the registry; pass --model-path" if name
            else "pass --model-path (or --model with a registry name)", field="model_path")
    name = name or Path(path).name
    if recorded.get("name") and recorded["name"] != name:
        raise FksInputError(f"this run directory holds {recorded['name']!r}'s generations, not "
                            f"{name!r}; use that model or another run directory",
                            path=run / MANIFEST_NAME, field="model.name")
    return name, path, entry


def _generation_dtype(run: Path) -> str:
    """Return the dtype generation ran in (the manifest's ``backend.dtype``), else ``auto``."""
    from fks.generate.manifest import read_run_manifest

    return (read_run_manifest(run).get("backend") or {}).get("dtype") or "auto"


def _load(path: str, *, device: str | None, dtype: str | None, revision: str | None,
          trust_remote_code: bool, device_map: str | None = None) -> Any:
    from fks.configs import current as get_configs
    from fks.generate.backends.hf import HFBackend

    return HFBackend(path, generation=get_configs().models.generation, device=device,
                     dtype=dtype, revision=revision, trust_remote_code=trust_remote_code,
                     device_map=device_map)


def _check_registry(entry: Any, model: Any) -> None:
    from fks.hidden.capture import model_dims

    if entry is None:
        return
    n_layers, d_model = model_dims(model)
    for field, want, got in (("n_layers", entry.n_layers, n_layers),
                             ("d_model", entry.d_model, d_model)):
        if want != got:
            raise FksInputError(f"models.yaml says {field}={want} for {entry.name}, the loaded "
                                f"model has {got}", field=f"models.{entry.name}.{field}")


Run = Annotated[Path, typer.Argument(help="Run directory (RUN/hidden or RUN/jlens is written).")]
BenchmarkOpt = Annotated[str, typer.Option("--benchmark", help="Benchmark directory or hf[:REPO].")]
ModelPath = Annotated[str | None, typer.Option("--model-path", help="Local folder or hub id.")]
ModelName = Annotated[str | None, typer.Option("--model", help="Registry name (models.yaml).")]
Device = Annotated[str | None, typer.Option(help="cpu, cuda, cuda:1 (default: cuda if any).")]
Revision = Annotated[str | None, typer.Option(help="Hub revision.")]
Remote = Annotated[bool, typer.Option(help="Allow the model repository's own code.")]
Overwrite = Annotated[bool, typer.Option(help="Discard an existing store/fit first.")]
DeviceMap = Annotated[str | None, typer.Option(
    help="Spread a model too large for one GPU over several: 'auto' (needs accelerate); "
    "overrides --device.")]


def extract_cmd(
    run: Run,
    benchmark: BenchmarkOpt,
    model_path: ModelPath = None,
    model: ModelName = None,
    layers: Annotated[str, typer.Option(help=_LAYERS_HELP)] = "all",
    reverse: Annotated[bool, typer.Option(help="Also store reverse-analysis queries.")] = False,
    recognition: Annotated[bool, typer.Option(help="Also store recognition queries.")] = False,
    batch_size: Annotated[int, typer.Option(min=1, help="Prompts per forward pass.")] = 16,
    device: Device = None,
    dtype: Annotated[str | None, typer.Option(
        help="auto, bfloat16, float16 or float32 (default: the dtype generation recorded in "
             "the run's manifest, else auto: bf16 on GPU and on a CPU with native bf16).")
    ] = None,
    revision: Revision = None,
    trust_remote_code: Remote = False,
    overwrite: Overwrite = False,
    shard: Annotated[str | None, typer.Option(
        help="i/n (1-based): only the facts dealt to shard i (balanced by relation, the rule "
        "of every stage); writes RUN/shards/shard_i_of_n/hidden/ (join with `fks merge`).")
    ] = None,
    device_map: DeviceMap = None,
    reference_benchmark: Annotated[str | None, typer.Option(
        help="The full benchmark this run's benchmark was sliced from: also store its "
        "main-forward queries in RUN/reference/hidden/, the reference pool on which `fks "
        "metrics` fits the ISS/KTS whitening (so a slice's ISS does not depend on its size), "
        "and copy the run's own states out of it. `fks run --limit` does this itself.")
    ] = None,
    share_prefixes: Annotated[int, typer.Option(
        min=0, help="Forward a prompt prefix once when at least this many prompts share it "
        "(0: every prompt whole). Same states up to summation order; 4 forwards 72.5 % of the "
        "reference pool's tokens for Gemma 3 270M.")] = SHARE_PREFIXES,
) -> None:
    """Store query-end hidden states of every main-forward query (resumable)."""
    from fks.configs import current as get_configs
    from fks.data.load import load_benchmark
    from fks.generate.runner import parse_shard
    from fks.hidden.capture import model_dims
    from fks.hidden.extract import extract_hidden

    configs = get_configs()
    shard_t = parse_shard(shard) if shard else None
    bench = load_benchmark(benchmark)
    name, path, entry = _resolve_model(run, model, model_path)
    backend = _load(path, device=device, dtype=dtype or _generation_dtype(run), revision=revision,
                    trust_remote_code=trust_remote_code, device_map=device_map)
    _check_registry(entry, backend.model)
    n_layers, _ = model_dims(backend.model)
    common = {"model_name": name,
              "layers": parse_layers(layers, n_layers, configs.metrics.layer_window_min_frac),
              "batch_size": batch_size,
              "max_prompt_len": configs.models.generation.max_prompt_len,
              "overwrite": overwrite, "model_info": backend.describe(),
              "share_prefixes": share_prefixes}
    if reference_benchmark is None:
        extract_hidden(run, bench, backend.model, backend.tokenizer, reverse=reverse,
                       recognition=recognition, shard=shard_t, **common)
        return
    from fks.hidden.extract import extract_with_pool

    extract_with_pool(run, bench, load_benchmark(reference_benchmark), backend.model,
                      backend.tokenizer,
                      pool_layers=parse_layers("window", n_layers,
                                               configs.metrics.layer_window_min_frac),
                      reverse=reverse, recognition=recognition, shard=shard_t, **common)


def jlens_cmd(
    run: Run,
    benchmark: BenchmarkOpt,
    model_path: ModelPath = None,
    model: ModelName = None,
    n_prompts: Annotated[int, typer.Option(min=1, help="Main queries to average over.")
                         ] = JLENS_PROMPTS,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 20260101,
    layers: Annotated[str, typer.Option(help=_LAYERS_HELP)] = "all",
    batch_rows: Annotated[int | None, typer.Option(
        min=1, help="Jacobian rows per backward pass (memory knob; default d up to d = 1024 "
        "(one pass), else 512).")] = None,
    device: Device = None,
    revision: Revision = None,
    trust_remote_code: Remote = False,
    overwrite: Overwrite = False,
) -> None:
    """Fit the J-Lens transport (spec §7.3) on a stratified, seeded sample of main queries."""
    from fks.configs import current as get_configs
    from fks.data.load import load_benchmark
    from fks.hidden.capture import model_dims
    from fks.hidden.jlens import run_jlens

    configs = get_configs()
    bench = load_benchmark(benchmark)
    name, path, entry = _resolve_model(run, model, model_path)
    backend = _load(path, device=device, dtype="float32", revision=revision,
                    trust_remote_code=trust_remote_code)
    _check_registry(entry, backend.model)
    n_layers, _ = model_dims(backend.model)
    run_jlens(
        run, bench, backend.model, backend.tokenizer, model_name=name, n_prompts=n_prompts,
        seed=seed, layers=parse_layers(layers, n_layers, configs.metrics.layer_window_min_frac),
        batch_rows=batch_rows, max_prompt_len=configs.models.generation.max_prompt_len,
        overwrite=overwrite, model_info=backend.describe(),
    )


def register(app: typer.Typer) -> None:
    """Add this stage's commands to ``app``."""
    app.command("extract")(extract_cmd)
    app.command("jlens")(jlens_cmd)
