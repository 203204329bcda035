"""File-level entry point of ``fks harness score``: read, validate, score, write.

Inputs (see ``README.md`` in this package for an example):

* ``--cases F``: JSONL, one :class:`~fks.evalharness.inputs.CaseRecord` per line
  (``{"case_id", "result": {...six S fields...}, "harness": {...}}``); case ids unique.
* ``--gold G``: JSONL, one :class:`~fks.evalharness.inputs.GoldRecord` per line, in annotation
  order; case ids unique. Every case id of the cases file must have a gold row.
* ``--baseline REPORT`` (optional): a ``batch_report.json`` written by an earlier run, with its
  ``baseline_manifest.json`` beside it: same split, period = the quarter before ``--period``,
  cells matching the report (:func:`~fks.evalharness.degradation.check_baseline`), else exit 2.
* ``--period P`` (``YYYYQn``, or ``YYYY-MM`` for a monthly run): recorded in the manifest;
  required with ``--baseline``. Only a quarterly run can serve as a later baseline.
* ``--split-file S`` (default ``<gold stem>.splits.json`` beside the gold file): the pinned
  dev/test/holdout assignments. Read when present; cases new to it are assigned (hash, bucket
  rule, anchors) and appended after a successful run; listed cases never move.

Outputs in ``--out DIR`` (each written atomically):

* ``batch_report.json`` -- the §8.2 :class:`~fks.evalharness.schema.BatchReport`;
* ``case_scores.jsonl`` -- one :class:`~fks.evalharness.schema.CaseScore` per case;
* ``harness_details.json`` -- diagnostics: splits, case percentiles, cross-bucket table, D5
  confusion matrices, D6 label weights, D7 rho, base rates and pool decision, D10 sample
  counts, batch-level flags (``batch_flags``), IAA summaries, the config;
* ``harness_report.html`` -- the self-contained HTML section (standalone page);
* ``baseline_manifest.json`` -- the provenance of ``batch_report.json`` as a later baseline.

Any bad input raises :class:`~fks.errors.FksInputError` naming the file, the line and the
pydantic field path (``result.causal_graph.edges.0.target``), which the CLI turns into exit 2.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from fks.errors import FksInputError
from fks.evalharness.config import HarnessConfig, load_harness_config
from fks.evalharness.degradation import baseline_manifest, check_baseline, parse_period
from fks.evalharness.inputs import CaseRecord, GoldRecord
from fks.evalharness.report import render_html_page
from fks.evalharness.schema import BatchReport
from fks.evalharness.scoring import CaseNotScorable, EmptySplit, HarnessResult, score_batch
from fks.evalharness.split import read_split_file, write_split_file
from fks.io import (
    atomic_write_json,
    atomic_write_jsonl,
    atomic_write_text,
    input_error,
    iter_jsonl,
    read_json,
)

__all__ = [
    "OutputPaths",
    "default_split_file",
    "load_cases",
    "load_gold",
    "load_baseline",
    "run_score",
]

log = logging.getLogger(__name__)

#: The provenance file written beside every ``batch_report.json`` (§6 baseline checks).
MANIFEST_NAME = "baseline_manifest.json"


@dataclass(frozen=True)
class OutputPaths:
    """Where :func:`run_score` wrote its files."""

    batch_report: Path
    case_scores: Path
    details: Path
    html: Path


def _unique(path: Path, model: type[CaseRecord] | type[GoldRecord]) -> tuple[list, dict[str, int]]:
    records, lines = [], {}
    for line, rec in iter_jsonl(path, model):
        if rec.case_id in lines:  # type: ignore[union-attr]
            raise FksInputError(
                f"duplicate case_id {rec.case_id!r} (first on line {lines[rec.case_id]})",  # type: ignore[union-attr]
                path=path,
                line=line,
                field="case_id",
            )
        lines[rec.case_id] = line  # type: ignore[union-attr]
        records.append(rec)
    return records, lines


def load_cases(path: str | Path) -> tuple[dict[str, CaseRecord], dict[str, int]]:
    """Read the cases file: ``({case_id: record}, {case_id: line})``."""
    records, lines = _unique(Path(path), CaseRecord)
    return {r.case_id: r for r in records}, lines


def load_gold(path: str | Path) -> tuple[list[GoldRecord], dict[str, int]]:
    """Read the gold file, in file order: ``([records], {case_id: line})``."""
    return _unique(Path(path), GoldRecord)


def load_baseline(
    path: str | Path, *, split: str | None = None, period: str | None = None
) -> BatchReport:
    """Read and validate a baseline ``batch_report.json``.

    When ``split`` is given its provenance is checked too (``baseline_manifest.json`` beside
    it; :func:`~fks.evalharness.degradation.check_baseline`).
    """
    data = read_json(path)
    try:
        report = BatchReport.model_validate(data)
    except ValidationError as exc:
        raise input_error(exc, path=path) from None
    if split is not None:
        manifest_path = Path(path).with_name(MANIFEST_NAME)
        manifest = read_json(manifest_path) if manifest_path.is_file() else None
        check_baseline(
            report,
            Path(path).read_text(encoding="utf-8"),
            manifest,
            split=split,
            period=period,
            manifest_path=manifest_path,
        )
    return report


def default_split_file(gold_path: str | Path) -> Path:
    """``<gold dir>/<gold stem>.splits.json``: the pinned split assignments of a gold file."""
    g = Path(gold_path)
    return g.with_name(f"{g.stem}.splits.json")


def run_score(
    cases_path: str | Path,
    gold_path: str | Path,
    out_dir: str | Path,
    *,
    baseline_path: str | Path | None = None,
    split: str = "test",
    config: HarnessConfig | None = None,
    split_file: str | Path | None = None,
    period: str | None = None,
) -> tuple[HarnessResult, OutputPaths]:
    """Score ``cases_path`` against ``gold_path`` for ``split`` and write the four outputs.

    Raises:
        FksInputError: a malformed row (file, line, field), a duplicate or unknown case id, a bad
            baseline, no gold case in ``split``, or a case whose gold annotates no dimension.
    """
    cfg = config or load_harness_config()
    cases, case_lines = load_cases(cases_path)
    golds, gold_lines = load_gold(gold_path)
    unknown = [cid for cid in cases if cid not in gold_lines]
    if unknown:
        cid = unknown[0]
        raise FksInputError(
            f"case {cid!r} has no gold row in {gold_path}",
            path=cases_path,
            line=case_lines[cid],
            field="case_id",
        )
    if cfg.split.force_anchor_placement is True:
        anchors = [g.case_id for g in golds if g.self_annotated_anchor]
        want = sum(cfg.split.anchor_counts.values())
        if len(anchors) != want:
            raise FksInputError(
                f"forced anchor placement needs {want} self-annotated anchor cases "
                f"({cfg.split.anchor_counts}); found {len(anchors)}",
                path=gold_path,
                field="self_annotated_anchor",
            )
    if period is not None:
        try:
            parse_period(period)
        except ValueError as exc:
            raise FksInputError(str(exc), field="--period") from None
    baseline = (
        load_baseline(baseline_path, split=split, period=period)
        if baseline_path is not None
        else None
    )
    split_path = Path(split_file) if split_file is not None else default_split_file(gold_path)
    pinned = read_split_file(split_path, salt=cfg.split.salt) if split_path.exists() else {}
    try:
        result = score_batch(
            cases, golds, cfg, split=split, baseline=baseline, pinned_splits=pinned
        )
    except CaseNotScorable as exc:
        raise FksInputError(
            str(exc), path=gold_path, line=gold_lines[exc.case_id], field="case_id"
        ) from None
    except EmptySplit as exc:
        raise FksInputError(str(exc), path=gold_path) from None
    out = Path(out_dir)
    paths = OutputPaths(
        batch_report=out / "batch_report.json",
        case_scores=out / "case_scores.jsonl",
        details=out / "harness_details.json",
        html=out / "harness_report.html",
    )
    if result.details["split_new_cases"] or not split_path.exists():
        write_split_file(
            split_path, salt=cfg.split.salt, assignments={**pinned, **result.details["splits"]}
        )
        log.info("%d new case(s) pinned in %s", len(result.details["split_new_cases"]), split_path)
    report_text = (
        json.dumps(
            result.report.model_dump(mode="json"), ensure_ascii=False, indent=2, sort_keys=True
        )
        + "\n"
    )
    atomic_write_text(paths.batch_report, report_text)
    atomic_write_json(
        out / MANIFEST_NAME,
        baseline_manifest(
            result.report, report_text, result.case_scores, period=period, salt=cfg.split.salt
        ),
    )
    atomic_write_jsonl(paths.case_scores, result.case_scores)
    atomic_write_json(paths.details, result.details)
    atomic_write_text(
        paths.html, render_html_page(result, percentile_min_cases=cfg.percentile_min_cases)
    )
    log.info("harness report for split %s written to %s", split, out)
    return result, paths
