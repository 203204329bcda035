"""``fks export lm-eval|inspect BENCH OUT`` and ``fks import lm-eval|inspect LOG ...``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

export_app = typer.Typer(help="Write fks's benchmark as an lm-eval or Inspect AI task.",
                         no_args_is_help=True)
import_app = typer.Typer(help="Turn an lm-eval or Inspect AI sample log into "
                         "RUN/generations.jsonl (then `fks run` goes on from score).",
                         no_args_is_help=True)

_Bench = Annotated[str, typer.Argument(help="Benchmark directory, or hf[:REPO_OR_PATH].")]
_Out = Annotated[Path, typer.Argument(help="Task folder to write.")]
_BenchOpt = Annotated[str, typer.Option(
    "--benchmark", help="The benchmark the log was produced on (the exported one).")]
_Run = Annotated[Path, typer.Option(
    "--out", help="Run directory RUN; its folder name is the model name for `fks run`.")]


def _load(bench: str):
    from fks.data.load import load_benchmark

    return load_benchmark(bench)


@export_app.command("lm-eval")
def export_lmeval_cmd(benchmark: _Bench, out: _Out) -> None:
    """Write OUT/fks_stability.yaml + utils.py: lm_eval --include_path OUT --tasks fks_stability."""
    from fks.configs import current as get_configs
    from fks.interop.lmeval import export_lmeval

    folder = export_lmeval(_load(benchmark), out, configs=get_configs())
    typer.echo(f"lm-eval task fks_stability written to {folder}")


@export_app.command("inspect")
def export_inspect_cmd(benchmark: _Bench, out: _Out) -> None:
    """Write OUT/fks_stability.py (an Inspect AI task) + its samples and hf model config."""
    from fks.configs import current as get_configs
    from fks.interop.inspect_ai import export_inspect

    folder = export_inspect(_load(benchmark), out, configs=get_configs())
    typer.echo(f"Inspect task fks_stability written to {folder}")


@import_app.command("lm-eval")
def import_lmeval_cmd(
    samples: Annotated[Path, typer.Argument(
        help="lm_eval --log_samples output: samples_fks_stability_<time>.jsonl.")],
    benchmark: _BenchOpt,
    out: _Run,
) -> None:
    """Check an lm-eval samples file against fks's prompts and write RUN/generations.jsonl."""
    from fks.configs import current as get_configs
    from fks.interop.lmeval import import_lmeval

    path = import_lmeval(samples, _load(benchmark), out, configs=get_configs())
    typer.echo(f"imported {path}")


@import_app.command("inspect")
def import_inspect_cmd(
    log: Annotated[Path, typer.Argument(help="Inspect eval log (.eval or .json).")],
    benchmark: _BenchOpt,
    out: _Run,
) -> None:
    """Check an Inspect log against fks's prompts and write RUN/generations.jsonl."""
    from fks.configs import current as get_configs
    from fks.interop.inspect_ai import import_inspect

    path = import_inspect(log, _load(benchmark), out, configs=get_configs())
    typer.echo(f"imported {path}")


def register(app: typer.Typer) -> None:
    """Add ``fks export`` and ``fks import``."""
    app.add_typer(export_app, name="export")
    app.add_typer(import_app, name="import")
