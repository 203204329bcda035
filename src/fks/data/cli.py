"""``fks data build|validate|summary``."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

log = logging.getLogger("fks")

data_app = typer.Typer(help="Build, validate and summarise benchmarks.", no_args_is_help=True)


@data_app.command("build")
def build_cmd(
    source: Annotated[Path, typer.Option(help="ParaRel/mParaRel-format source folder.")],
    out: Annotated[Path, typer.Option(help="Output benchmark directory.")],
    max_facts: Annotated[
        int | None, typer.Option(help="Cap on the number of facts (default: about 2,600).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Sampling seed (same seed, same bytes).")] = 20260101,
) -> None:
    """Build a benchmark (facts + queries of all eight families) from ParaRel/mParaRel data."""
    from fks.configs import current as get_configs
    from fks.data.build import DEFAULT_MAX_FACTS, build_benchmark

    result = build_benchmark(
        source,
        out,
        configs=get_configs(),
        max_facts=DEFAULT_MAX_FACTS if max_facts is None else max_facts,
        seed=seed,
    )
    _print_summary(result.statistics)
    if not result.report["passed"]:
        from fks.errors import FksInputError

        first = result.report["hard_errors"][0]
        raise FksInputError(
            f"built benchmark fails validation gate {first['gate']}: {first['message']}",
            path=first.get("path"), line=first.get("line"), field=first.get("field"),
        )
    log.info("benchmark written to %s", out)


@data_app.command("validate")
def validate_cmd(
    benchmark: Annotated[str, typer.Argument(help="Benchmark directory, or hf[:REPO_OR_PATH].")],
    report: Annotated[
        Path | None,
        typer.Option(help="Where to write the report (default: DIR/validation_report.json)."),
    ] = None,
) -> None:
    """Check every hard gate of the construction log; exit 2 on any hard error."""
    from fks.configs import current as get_configs
    from fks.data.validate import run_validation

    run_validation(benchmark, configs=get_configs(), report_path=report)


@data_app.command("summary")
def summary_cmd(
    benchmark: Annotated[str, typer.Argument(help="Benchmark directory, or hf[:REPO_OR_PATH].")],
) -> None:
    """Print the family / relation / language table of a benchmark."""
    from fks.data.load import load_benchmark
    from fks.data.stats import dataset_statistics

    _print_summary(dataset_statistics(load_benchmark(benchmark)))


def _print_summary(stats: dict) -> None:
    from fks.data.stats import render_statistics

    render_statistics(stats)


def register(app: typer.Typer) -> None:
    """Add ``fks data ...``."""
    app.add_typer(data_app, name="data")
