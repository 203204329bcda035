"""``fks generate``: run (or resume) generation for one model, or ``--merge`` shard outputs."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated

import typer

from fks.errors import FksInputError
from fks.runlock import run_dir_lock

log = logging.getLogger("fks")


def _split_families(values: list[str] | None) -> list[str] | None:
    """Accept ``--families a --families b`` and ``--families a,b``."""
    if not values:
        return None
    return [f.strip() for v in values for f in v.split(",") if f.strip()]


def _require(**values: object) -> None:
    for name, value in values.items():
        if value is None:
            raise FksInputError(f"--{name.replace('_', '-')} is required (unless --merge)",
                                field=name)


def generate_cmd(
    model: Annotated[str | None, typer.Option(help="Model name recorded in every row.")] = None,
    model_path: Annotated[
        str | None,
        typer.Option(help="Local folder, hub id, .gguf file or folder holding one (hf/vllm), "
                     "or the served model name (openai). Default: the registry path of --model."),
    ] = None,
    benchmark: Annotated[
        str | None, typer.Option(help="Benchmark directory, or hf[:REPO_OR_PATH].")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Run directory RUN.")] = None,
    backend: Annotated[str, typer.Option(help="hf | openai | vllm.")] = "hf",
    families: Annotated[
        list[str] | None,
        typer.Option(help="Only these condition families (repeatable, or comma-separated)."),
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Only the first N selected queries.")] = None,
    batch_size: Annotated[int, typer.Option(help="Prompts per batch (and per append).")] = 64,
    shard: Annotated[
        str | None,
        typer.Option(help="i/n (1-based): only the facts dealt to shard i (balanced by "
                     "relation, the rule of every stage); writes RUN/shards/shard_i_of_n/."),
    ] = None,
    trust_remote_code: Annotated[
        bool, typer.Option(help="Allow the model repository's own code (hf/vllm).")
    ] = False,
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible server, e.g. http://127.0.0.1:8000.")
    ] = None,
    api_key_env: Annotated[
        str, typer.Option(help="Environment variable holding the API key (openai).")
    ] = "OPENAI_API_KEY",
    concurrency: Annotated[int, typer.Option(help="Parallel requests (openai).")] = 8,
    timeout: Annotated[float, typer.Option(help="Seconds per request (openai).")] = 60.0,
    max_retries: Annotated[int, typer.Option(help="Retries per request (openai).")] = 4,
    device: Annotated[
        str | None, typer.Option(help="torch device for hf (default: cuda if available).")
    ] = None,
    dtype: Annotated[str, typer.Option(
        help="hf: auto (bfloat16 on GPU and on a CPU with native bf16, float32 on other CPUs), "
             "bfloat16, float16 or float32.")] = "auto",
    revision: Annotated[str | None, typer.Option(help="Hub revision (hf).")] = None,
    tensor_parallel_size: Annotated[
        int, typer.Option(min=1, help="GPUs one model is split over (vllm).")] = 1,
    max_num_seqs: Annotated[
        int, typer.Option(min=1, help="Sequences decoded concurrently (vllm).")] = 256,
    retry_errors: Annotated[
        bool, typer.Option(help="Generate again the rows recorded as error/timeout.")
    ] = False,
    with_hidden: Annotated[
        bool,
        typer.Option(help="hf only: also store query-end hidden states from the prefill "
                     "(RUN/hidden, as `fks extract` writes them)."),
    ] = False,
    merge: Annotated[
        Path | None,
        typer.Option(help="Instead of generating: verify and join RUN/shards/* into RUN."),
    ] = None,
) -> None:
    """Generate answers for a benchmark under the frozen decoding protocol (resumable)."""
    from fks.configs import current as get_configs
    from fks.data.load import load_benchmark
    from fks.generate.runner import generate_run, merge_shards, parse_shard, select_queries

    if merge is not None:
        summary = merge_shards(merge, benchmark=benchmark)
        log.info("merged %d records into %s (%s)", summary.n_written, merge, summary.counts)
        return
    configs = get_configs()
    entry = configs.models.find(model) if model else None
    model_path = model_path or (entry.path if entry else None)
    _require(model=model, model_path=model_path, benchmark=benchmark, out=out)
    assert model is not None and model_path is not None and out is not None
    assert benchmark is not None
    shard_t = parse_shard(shard) if shard else None
    family_list = _split_families(families)
    # cheap input checks before the (slow) model load
    bench = load_benchmark(benchmark)
    select_queries(bench.queries, families=family_list, limit=limit)

    if with_hidden and (backend != "hf" or shard_t is not None):
        raise FksInputError("--with-hidden needs --backend hf and no --shard "
                            "(run `fks extract` after a merge instead)", field="with_hidden")
    # the run directory's writer lock before the (slow) model load: a second writer on the
    # same --out learns at once that it is busy (fks.runlock), not after loading a model
    with run_dir_lock(out, shard=shard_t, create=True):
        gen_backend = _make(backend, model_path, entry=entry, configs=configs, device=device,
                            trust_remote_code=trust_remote_code, revision=revision,
                            dtype=dtype,
                            base_url=base_url, api_key=os.environ.get(api_key_env),
                            concurrency=concurrency, timeout=timeout, max_retries=max_retries,
                            vllm_opts={"tensor_parallel_size": tensor_parallel_size,
                                       "max_num_seqs": max_num_seqs})
        fused = None
        if with_hidden:
            from fks.hidden.fused import FusedExtraction

            fused = FusedExtraction(out, bench, gen_backend, model_name=model,
                                    max_prompt_len=configs.models.generation.max_prompt_len)
            gen_backend = fused.backend
        summary = generate_run(
            bench, out, model=model, model_path=model_path, configs=configs,
            backend=gen_backend, families=family_list, limit=limit, shard=shard_t,
            batch_size=batch_size, retry_errors=retry_errors,
        )
        log.info("%s: %d records (%d new) %s", summary.out_dir,
                 summary.n_existing + summary.n_written, summary.n_written, summary.counts)
        if fused is not None:
            fused.finish(batch_size=batch_size)


def _make(kind: str, model_path: str, *, entry: object, configs: object, device: str | None,
          trust_remote_code: bool, revision: str | None, base_url: str | None,
          api_key: str | None, concurrency: int, timeout: float, max_retries: int,
          vllm_opts: dict[str, object] | None = None, dtype: str | None = None) -> object:
    """Build the backend from the command's options (only the ones that backend takes)."""
    from fks.generate.backends import make_backend

    opts: dict[str, object] = {}
    if kind == "openai":
        _require(base_url=base_url)
        opts = {"base_url": base_url, "api_key": api_key, "concurrency": concurrency,
                "timeout": timeout, "max_retries": max_retries}
    elif kind == "hf":
        opts = {"revision": revision or getattr(entry, "revision", None), "dtype": dtype}
    elif kind == "vllm":
        opts = {"revision": revision or getattr(entry, "revision", None), **(vllm_opts or {})}
    return make_backend(kind, model_path, configs=configs, device=device,  # type: ignore[arg-type]
                        trust_remote_code=trust_remote_code, **opts)


def register(app: typer.Typer) -> None:
    """Add this stage's commands to ``app``."""
    app.command("generate")(generate_cmd)
