"""``fks demo``: the embedded default, fully offline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["demo_cmd", "register"]


def demo_cmd(
    out: Annotated[Path, typer.Option(help="Where the demo writes its outputs.")] = Path(
        "fks_demo"
    ),
    model: Annotated[str | None, typer.Option(
        help="Run this registry model (e.g. gemma-3-270m, smollm2-135m-instruct; needs its "
             "package) on the demo benchmark instead of the tiny demo model.")] = None,
    limit: Annotated[int | None, typer.Option(
        help="Only N demo facts (round-robin over relations). Default: all for the demo "
             "model, 60 with --model.")] = None,
    json_out: Annotated[bool, typer.Option(
        "--json", help="Print the run's RUN/results.json document on stdout (the tables go "
                       "to stderr).")] = False,
) -> None:
    """Run the embedded default, fully offline, and write an HTML report.

    Builds the demo benchmark, trains a tiny Llama on part of its facts (first run only, then
    cached), runs every stage of fks run and writes OUT/runs/fks-demo-llama/report.html. With
    --model, that real model runs on the demo benchmark instead (OUT/runs/<model>/).
    """
    from fks.configs import current as get_configs
    from fks.demo.run import run_demo
    from fks.log import console

    extra = {k: v for k, v in (("model", model), ("limit", limit)) if v is not None}
    result = run_demo(out, configs=get_configs(), display=console if json_out else None,
                      **extra)
    if json_out:
        from fks.report.results import build_results

        typer.echo(build_results(result.run_dir).model_dump_json(indent=2))


def register(app: typer.Typer) -> None:
    """Add ``fks demo``."""
    app.command("demo")(demo_cmd)
