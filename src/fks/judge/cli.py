"""``fks judge RUN --benchmark DIR [--judge NAME]`` and ``fks judge agreement A B``."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated

import typer

from fks.cli_routing import default_run_group

log = logging.getLogger("fks")


judge_app = typer.Typer(
    cls=default_run_group("scored.jsonl"),
    help="Cluster answers (reference-blind) and mark cluster correctness (spec §3). "
    "`fks judge RUN` means `fks judge run RUN`. A first argument that names a subcommand is "
    "that subcommand, unless a run directory of that name exists (holding scored.jsonl or "
    "evaluation_manifest.json) and the subcommand would lack its arguments: with a folder "
    "./run, `fks judge run --benchmark B` judges ./run.",
    no_args_is_help=True,
)


@judge_app.command("run")
def run_cmd(
    run: Annotated[Path, typer.Argument(help="Run directory holding scored.jsonl.")],
    benchmark: Annotated[str, typer.Option(help="Benchmark directory, or hf[:REPO_OR_PATH].")],
    judge: Annotated[str, typer.Option(
        help="alias (default, deterministic), hf:PATH, or openai:URL.")] = "alias",
    shard: Annotated[str | None, typer.Option(
        help="i/n (1-based): judge only the facts dealt to shard i (the rule of every stage); "
        "writes RUN/shards/shard_i_of_n/judged.jsonl (join with `fks merge`).")] = None,
) -> None:
    """Judge RUN/scored.jsonl into RUN/judged.jsonl (also the default: fks judge RUN ...)."""
    from fks.configs import current as get_configs
    from fks.generate.runner import parse_shard, shard_dir
    from fks.judge import judge_run, make_judge

    shard_t = parse_shard(shard) if shard else None
    # an LLM judge's cache stays in the shard folder (judge_run creates it; shards may run at once)
    home = shard_dir(run, shard_t) if shard_t is not None else run
    info = judge_run(run, benchmark, make_judge(judge, configs=get_configs(), run_dir=home),
                     shard=shard_t)
    c = info["counts"]
    log.info("%s: %d records, %d facts, %d REVIEW_REQUIRED", info["name"], c["records"],
             c["facts"], c["review_required"])


@judge_app.command("agreement")
def agreement_cmd(
    judged: Annotated[Path, typer.Argument(help="A judged file (RUN/judged.jsonl).")],
    other: Annotated[Path, typer.Argument(
        help="Another judged file, or a human-labelled JSONL sample (query_id + any of "
        "extracted_answer, cluster_id, correctness).")],
    out: Annotated[Path | None, typer.Option(help="Also write the report here (JSON).")] = None,
    split: Annotated[str | None, typer.Option(
        help="Compare only the labelled rows of this split (their `split` field: dev, test)."
    )] = None,
) -> None:
    """Judge consistency (spec §18.6): kinds, extraction, clusters, correctness, BCS gap.

    Also kappa and alpha, and the five-label scorer's labels against the same rows.
    """
    from fks.io import atomic_write_json
    from fks.judge import judge_agreement

    report = judge_agreement(judged, other, split=split)
    if out is not None:
        atomic_write_json(out, report)
    typer.echo(json.dumps(report, ensure_ascii=False, indent=2))


def register(app: typer.Typer) -> None:
    """Add ``fks judge ...``."""
    app.add_typer(judge_app, name="judge")
