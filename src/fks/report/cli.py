"""``fks report``, ``fks compare`` and ``fks results schema``: thin commands.

They call :mod:`fks.report`. Tables go to stdout and logs to stderr; with ``--json`` stdout
holds only the JSON document.
"""

from __future__ import annotations

import json
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
    allow_mixed: Annotated[bool, typer.Option(
        help="Accept runs over different benchmarks: one leaderboard per benchmark checksum "
             "(refused by default).")] = False,
) -> None:
    """Write bootstrap intervals, tables, RUN/results.json, the HTML report and explorer."""
    from fks.configs import current as get_configs
    from fks.report.build import build_report

    if labels is not None:  # a broken F is exit 2 (file:line: field), never a silent skip
        from fks.judge import validate_labels

        validate_labels(labels)
    path = build_report(runs, configs=get_configs(), out=out, reference=reference,
                        kts_bootstrap=kts_bootstrap, reuse=reuse, explorer_on=explorer,
                        labels=labels, allow_mixed=allow_mixed)
    log.info("wrote %s", path)


def compare_cmd(
    run_a: Annotated[Path, typer.Argument(help="Run directory of model A.")],
    run_b: Annotated[Path, typer.Argument(help="Run directory of model B.")],
    out: Annotated[Path | None, typer.Option(
        help="Write the comparison as JSON (Delta = A - B with paired 95 % intervals).")] = None,
    kts_bootstrap: Annotated[bool, typer.Option(
        help="Bootstrap KTS (slow); --no-kts-bootstrap compares KTS points only.")] = True,
    reuse: Annotated[bool, typer.Option(help="Reuse cached bootstrap files.")] = True,
    json_out: Annotated[bool, typer.Option(
        "--json", help="Print the comparison as JSON on stdout (the --out document; the table "
                       "goes to stderr).")] = False,
) -> None:
    """Paired comparison of two runs on the same benchmark and fact set (spec §14.2)."""
    from fks.configs import current as get_configs
    from fks.io import atomic_write_json
    from fks.log import console
    from fks.report.comparison import compare_runs
    from fks.report.display import print_comparison
    from fks.report.statistics import Settings

    settings = Settings.from_configs(get_configs(), kts_bootstrap=kts_bootstrap)
    result = compare_runs(run_a, run_b, settings, reuse=reuse)
    if out is not None:
        atomic_write_json(out, result)
        log.info("wrote %s", out)
    print_comparison(result, out=console if json_out else None)
    if json_out:
        typer.echo(json.dumps(result, ensure_ascii=False, indent=2, sort_keys=True))


def results_schema_cmd(
    comparison: Annotated[bool, typer.Option(
        help="The schema of `fks compare --json` instead of RUN/results.json's.")] = False,
) -> None:
    """Print the JSON schema of RUN/results.json (fks run/demo --json) on stdout."""
    from fks.report.results import Comparison, Results

    model = Comparison if comparison else Results
    typer.echo(json.dumps(model.model_json_schema(), ensure_ascii=False, indent=2))


def register(app: typer.Typer) -> None:
    """Add ``fks report``, ``fks compare`` and ``fks results schema``."""
    app.command("report")(report_cmd)
    app.command("compare")(compare_cmd)
    results = typer.Typer(help="RUN/results.json: the schema other tools read.",
                          no_args_is_help=True)
    results.command("schema")(results_schema_cmd)
    app.add_typer(results, name="results")
