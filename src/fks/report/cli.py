"""``fks report`` and ``fks compare``: thin commands over :mod:`fks.report`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

log = logging.getLogger("fks")


def report_cmd(
    runs: Annotated[list[Path], typer.Argument(help="One or more run directories.")],
    out: Annotated[Path | None, typer.Option(
        help="The HTML file (default RUN/report.html for one run).")] = None,
    reference: Annotated[str | None, typer.Option(
        help="Reference model of the paired differences (default: the first run).")] = None,
    kts_bootstrap: Annotated[bool, typer.Option(
        help="Bootstrap KTS from the stored centroids (the slow part); --no-kts-bootstrap "
             "gives KTS points only.")] = True,
    reuse: Annotated[bool, typer.Option(
        help="Reuse RUN/metrics/bootstrap_* when inputs and settings are unchanged.")] = True,
    explorer: Annotated[bool, typer.Option(
        help="Also write the fact explorer (explorer.html beside the report).")] = True,
    labels: Annotated[Path | None, typer.Option(
        help="Hand-labelled answers (fks judge agreement format): adds a judge-validation "
             "block (spec §18.6) per run.")] = None,
) -> None:
    """Write bootstrap intervals, tables (RUN/metrics/tables), the HTML report and explorer."""
    from fks.configs import current as get_configs
    from fks.report.build import build_report

    path = build_report(runs, configs=get_configs(), out=out, reference=reference,
                        kts_bootstrap=kts_bootstrap, reuse=reuse, explorer_on=explorer,
                        labels=labels)
    log.info("wrote %s", path)


def compare_cmd(
    run_a: Annotated[Path, typer.Argument(help="Run directory of model A.")],
    run_b: Annotated[Path, typer.Argument(help="Run directory of model B.")],
    out: Annotated[Path | None, typer.Option(
        help="Write the comparison as JSON (Delta = A - B with paired 95 % intervals).")] = None,
    kts_bootstrap: Annotated[bool, typer.Option(
        help="Bootstrap KTS (slow); --no-kts-bootstrap compares KTS points only.")] = True,
    reuse: Annotated[bool, typer.Option(help="Reuse cached bootstrap files.")] = True,
) -> None:
    """Paired comparison of two runs on the same benchmark and fact set (spec §14.2)."""
    from fks.configs import current as get_configs
    from fks.io import atomic_write_json
    from fks.report.comparison import compare_runs
    from fks.report.display import print_comparison
    from fks.report.statistics import Settings

    settings = Settings.from_configs(get_configs(), kts_bootstrap=kts_bootstrap)
    result = compare_runs(run_a, run_b, settings, reuse=reuse)
    if out is not None:
        atomic_write_json(out, result)
        log.info("wrote %s", out)
    print_comparison(result)


def register(app: typer.Typer) -> None:
    """Add ``fks report`` and ``fks compare``."""
    app.command("report")(report_cmd)
    app.command("compare")(compare_cmd)
