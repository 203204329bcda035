"""``fks score``: the five-label scorer over a run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def score_cmd(
    run: Annotated[Path, typer.Argument(help="Run directory holding generations.jsonl.")],
    benchmark: Annotated[
        str | None,
        typer.Option(
            "--benchmark",
            help="Benchmark directory, or hf[:REPO_OR_PATH] (default: the one recorded in "
            "RUN/evaluation_manifest.json by fks generate).",
        ),
    ] = None,
) -> None:
    """Score RUN/generations.jsonl to five labels: writes scored.jsonl and known_labels.json."""
    from fks.configs import current as get_configs
    from fks.score import render_summary, score_run

    render_summary(score_run(run, benchmark, configs=get_configs()))


def register(app: typer.Typer) -> None:
    """Add ``fks score``."""
    app.command("score")(score_cmd)
