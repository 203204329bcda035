"""``fks harness ...`` commands of the EvalHarness suite."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Literal

import typer

log = logging.getLogger("fks")

harness_app = typer.Typer(
    help="EvalHarness: 11-dimension scoring (D1-D11), buckets, splits, IAA, degradation.",
    no_args_is_help=True,
)

Split = Literal["dev", "test", "holdout"]


@harness_app.command("score")
def score_cmd(
    cases: Annotated[Path, typer.Option(help="Cases JSONL: one system output per case.")],
    gold: Annotated[Path, typer.Option(help="Gold JSONL: bucket label and annotations per case.")],
    out: Annotated[Path, typer.Option(help="Output folder (batch_report.json, HTML, ...).")],
    baseline: Annotated[
        Path | None, typer.Option(help="Baseline batch_report.json for degradation flags.")
    ] = None,
    split: Annotated[Split, typer.Option(help="Which split to score.")] = "test",
    harness_config: Annotated[
        Path | None,
        typer.Option(help="YAML deep-merged onto the packaged harness.yaml."),
    ] = None,
    period: Annotated[
        str | None,
        typer.Option(
            help="Period of this run: YYYYQn (quarterly, can serve as a later baseline) or "
            "YYYY-MM (monthly). Required with --baseline."
        ),
    ] = None,
    split_file: Annotated[
        Path | None,
        typer.Option(
            help="Pinned split assignments (default: <gold stem>.splits.json beside the gold); "
            "created on first use, new cases appended, listed cases never move."
        ),
    ] = None,
    force_anchor_placement: Annotated[
        bool | None,
        typer.Option(
            "--force-anchor-placement/--no-force-anchor-placement",
            help="Place the self-annotated anchor cases 10/3/1 (default: harness.yaml, 'auto' = "
            "when all 14 are present).",
        ),
    ] = None,
) -> None:
    """Score the cases of one split on D1-D11 and write the BatchReport and HTML section."""
    from fks.evalharness.config import load_harness_config
    from fks.evalharness.pipeline import run_score

    cfg = load_harness_config(harness_config)
    if force_anchor_placement is not None:
        cfg = cfg.model_copy(
            update={
                "split": cfg.split.model_copy(
                    update={"force_anchor_placement": force_anchor_placement}
                )
            }
        )
    result, paths = run_score(
        cases,
        gold,
        out,
        baseline_path=baseline,
        split=split,
        config=cfg,
        split_file=split_file,
        period=period,
    )
    log.info(
        "%d case(s), %d bucket(s), %d degradation flag(s); report: %s",
        len(result.case_scores),
        len(result.report.bucket_reports),
        len(result.report.degradation_flags),
        paths.batch_report,
    )


def register(app: typer.Typer) -> None:
    """Add ``fks harness ...``."""
    app.add_typer(harness_app, name="harness")
