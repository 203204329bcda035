"""``fks report RUN... --out report.html``: statistics, tables and one self-contained HTML file.

For each run: the relation-clustered bootstrap (:mod:`fks.report.statistics`, written to
``RUN/metrics/bootstrap_intervals.json``), the paper tables (:mod:`fks.report.tables`,
``RUN/metrics/tables/``), figures (:mod:`fks.report.plots`), the sanity-check panel, the
calibration diagrams when ``calibration_summary.json`` exists, and example answers per
behaviour group from ``judged.jsonl``. With several runs: a leaderboard with intervals and
paired differences against a reference model (§14.2), when the runs share benchmark and fact
set. Runs over different benchmarks are refused (exit 2 naming them) unless ``allow_mixed``,
which gives one leaderboard per benchmark. A stage that has not run is shown as "not run"; the
report renders with whatever exists. Beside the report, the fact explorer
(:mod:`fks.report.explorer`), linked from it; in each run directory, ``results.json``
(:mod:`fks.report.results`), whose run details the report shows in one table.

Every run's files are verified first against the digests its manifest recorded
(:func:`fks.report.comparison.verify_inputs`); bootstrap files that do not verify are
recomputed (the report makes them), and a per-fact file that disagrees with its summary is
refused (:func:`fks.report.comparison.check_consistent`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fks import __version__
from fks.configs import ConfigSet
from fks.errors import FksInputError
from fks.io import atomic_write_text, iter_jsonl
from fks.metrics.behavior import ALL_GROUPS, ANCHOR_FAMILY, UNSCORABLE
from fks.report import plots
from fks.report.comparison import (
    benchmark_groups,
    check_comparable,
    check_consistent,
    check_same_benchmark,
    compare_statistics,
    verify_inputs,
)
from fks.report.explorer import explorer_path, write_explorer
from fks.report.html import render
from fks.report.inputs import GROUP_METRICS, RunData, load_run
from fks.report.results import Results, RunDetails, build_results, write_results
from fks.report.statistics import RunStatistics, Settings, compute_statistics, run_statistics
from fks.report.tables import (
    TABLES_DIR,
    Table,
    cell,
    label,
    leaderboard_table,
    run_tables,
    write_table,
)
from fks.runlock import locks_run_dir

__all__ = ["ReportRun", "build_report", "table_context", "sanity_context", "example_answers",
           "details_context"]

log = logging.getLogger(__name__)

#: figures shown in the paired-difference tables and forest plot
DELTA_METRICS = ("anchor_accuracy", "bcs", "bes", "scr", "swr", "sar", "ur", "iss", "kts_geo",
                 "kts_id", "kts")
MAX_RESPONSE_CHARS = 300


@dataclass
class ReportRun:
    """One run of the report: its data, statistics, tables and display label."""

    data: RunData
    stats: RunStatistics
    tables: list[Table]
    label: str
    results: Results


# ============================================================================ small pieces
def table_context(t: Table) -> dict[str, Any]:
    """Return the template's view of a table: header labels and display cells (strings)."""
    text_cols = {i for i, c in enumerate(t.columns)
                 if any(isinstance(r.get(c), str) for r in t.rows)}
    return {"name": t.name, "title": t.title, "note": t.note,
            "header": [label(c) for c in t.columns], "text_cols": text_cols,
            "rows": [[cell(r, c, t.ci) for c in t.columns] for r in t.rows]}


def _scalar(v: Any) -> str | None:
    if isinstance(v, bool) or v is None:
        return None if v is None else str(v)
    if isinstance(v, int | float):
        return f"{v:.4g}"
    if isinstance(v, str) and len(v) <= 80:
        return v
    return None


def _flatten(out: list[tuple[str, str]], prefix: str, v: Any, depth: int) -> None:
    """Append ``(dotted.key, display)`` of scalars, nested blocks down to two levels."""
    if isinstance(v, dict):
        if depth < 2:  # 18.5's window.raw.iss, window.transported.kts
            for k2, v2 in v.items():
                if k2 != "per_layer":
                    _flatten(out, f"{prefix}.{k2}", v2, depth + 1)
    elif (s := _scalar(v)) is not None:
        out.append((prefix, s))


def sanity_context(sanity: dict[str, Any] | None) -> dict[str, Any] | None:
    """Flatten ``sanity_checks.json`` for the panel: status, criteria and numbers per check."""
    if not sanity or not isinstance(sanity.get("checks"), dict):
        return None
    checks = []
    for name, c in sanity["checks"].items():
        if not isinstance(c, dict):
            continue
        numbers: list[tuple[str, str]] = []
        for k, v in c.items():
            if k not in ("status", "criteria", "headline"):
                _flatten(numbers, k, v, 0)
        crit = c.get("criteria") if isinstance(c.get("criteria"), dict) else {}
        checks.append({"name": name, "status": str(c.get("status", "unknown")),
                       "criteria": [(k, "n/a" if v is None else str(v)) for k, v in crit.items()],
                       "numbers": numbers})
    summary = sanity.get("summary") or {}
    text = (f"{summary.get('n_pass', 0)} pass, {summary.get('n_fail', 0)} fail, "
            f"{summary.get('n_not_applicable', 0)} not applicable"
            + (f"; failed: {', '.join(summary.get('failed') or [])}"
               if summary.get("failed") else ""))
    return {"layer": sanity.get("layer"), "selection": sanity.get("selection"),
            "summary": text, "checks": checks}


#: the run-details table: column -> the :class:`RunDetails` fields shown in it
DETAIL_COLUMNS: dict[str, tuple[str, ...]] = {
    "model": ("model",), "weights sha256": ("weights_sha256",),
    "benchmark checksum": ("benchmark_checksum",), "backend": ("backend",),
    "dtype": ("dtype",), "batch size": ("batch_size",), "kernels": ("kernels",),
    "prompt version": ("prompt_version",),
    "judge": ("judge", "judge_revision"), "fks version": ("fks_version",),
}


def details_context(runs: Sequence[tuple[str, RunDetails]]) -> dict[str, Any]:
    """Build the run-details table: one row per run, each cell ``{"value", "reason", "hash"}``.

    Escaped on render; a null value shows its reason from :attr:`RunDetails.missing`.
    """
    rows = []
    for lab, d in runs:
        row: list[dict[str, Any]] = [{"value": lab, "reason": None, "hash": False}]
        for col, fields in DETAIL_COLUMNS.items():
            vals = [getattr(d, f) for f in fields]
            value = None if vals[0] is None else " ".join(
                str(v) if i == 0 else f"({v})" for i, v in enumerate(vals) if v is not None)
            row.append({"value": value, "reason": d.missing.get(fields[0]),
                        "hash": col in ("weights sha256", "benchmark checksum")})
        rows.append(row)
    return {"header": ["run", *DETAIL_COLUMNS], "rows": rows}


def _alerts(runs: Sequence[ReportRun]) -> list[str]:
    """List what the report must say first: failed §18 checks, absent main families."""
    from fks.metrics.internal.sanity import sanity_line, summarize_checks

    out = []
    for r in runs:
        san = r.data.sanity
        if isinstance(san, dict) and isinstance(san.get("checks"), dict) \
                and summarize_checks(san["checks"])["failed"]:
            out.append(f"{r.label}: {sanity_line(san)}")
        absent = families_absent(r.data)
        if absent:
            out.append(f"{r.label}: configured main families absent from the run: "
                       f"{', '.join(absent)} (complete-family sets use the families present)")
    return out


def families_absent(run: RunData) -> list[str]:
    """Return the configured main families without any record in the run."""
    absent: list[str] = []
    iss = run.iss_summary or {}
    absent += list(iss.get("families_absent") or [])
    beh = run.behavior_summary or {}
    for reading in (beh.get("readings") or {}).values():
        conf = reading.get("families_configured") or []
        seen = set(reading.get("families_observed") or [])
        absent += [f for f in conf if f not in seen]
    return list(dict.fromkeys(absent))


def _interval_text(intervals: dict[str, Any] | None, name: str) -> str | None:
    """``"[low, high]"`` of one figure, or the reason there is none."""
    if not intervals:
        return None
    if intervals.get("status", "ok") != "ok":
        return f"none: {intervals.get('reason', 'not computed')}"
    rec = intervals.get(name) or {}
    if rec.get("low") is None:
        return None
    return f"[{rec['low']:.3f}, {rec['high']:.3f}]"


def _full_risk(fig: dict[str, Any] | None) -> float | None:
    """Risk at full coverage of one view (the last risk-at-coverage entry reaching 1.0)."""
    for r in (fig or {}).get("risk_at_coverage") or []:
        if r.get("coverage") == 1.0:
            return r.get("risk")
    return None


def _calibration_context(cal: dict[str, Any] | None, model: str) -> list[dict[str, Any]]:
    """Per reading: the figure and a table of the sources, in both coverage views.

    Confidence coverage (answered rows with a valid confidence) and end-to-end coverage (every
    query of the reading; a query without an answer counts as not correctly answered) sit side
    by side in the table and in the risk-coverage plot, so abstention is never rewarded
    silently.
    """
    out: list[dict[str, Any]] = []
    for reading, rd in ((cal or {}).get("readings") or {}).items():
        sources, rows = {}, []
        for src, block in (rd.get("sources") or {}).items():
            fig = block.get("figures") if block.get("available") else None
            if not fig:
                rows.append({"source": src, "n": None, "status": block.get("reason") or
                             "not available"})
                continue
            e2e_block = block.get("end_to_end") or {}
            e2e = e2e_block.get("figures") or {}
            rel = (block.get("reliability") or {}).get("equal_width")
            if rel:
                sources[src] = {"reliability": rel, "risk_coverage": block.get("risk_coverage"),
                                "end_to_end_risk_coverage": e2e_block.get("risk_coverage"),
                                "ece": fig.get("ece_equal_width")}
            cov = block.get("coverage") or {}
            rows.append({
                "source": src, "n": fig.get("n"), "status": "ok",
                "confidence_coverage": cov.get("confidence_coverage", cov.get("coverage")),
                "end_to_end_coverage": cov.get("end_to_end_coverage"),
                "accuracy": fig.get("accuracy"), "ece": fig.get("ece_equal_width"),
                "ece_interval": _interval_text(block.get("intervals"), "ece_equal_width"),
                "brier": fig.get("brier"), "aurc": fig.get("aurc"),
                "risk_at_full_coverage": _full_risk(fig),
                "end_to_end_n": e2e.get("n"), "end_to_end_accuracy": e2e.get("accuracy"),
                "end_to_end_aurc": e2e.get("aurc"),
                "end_to_end_risk_at_full_coverage": _full_risk(e2e)})
        table = Table(
            f"calibration_{reading}", f"Calibration, reading {reading}",
            ["source", "status", "n", "confidence_coverage", "end_to_end_coverage", "accuracy",
             "ece", "ece_interval", "brier", "aurc", "risk_at_full_coverage", "end_to_end_n",
             "end_to_end_accuracy", "end_to_end_aurc", "end_to_end_risk_at_full_coverage"],
            rows, note="Two coverage views. Confidence coverage = valid confidences / answered "
                       "queries; accuracy, ECE, Brier, AURC and risk at full coverage are over "
                       "those rows. End-to-end coverage = valid confidences / all queries of "
                       "the reading; the end_to_end columns count every query, a query "
                       "without a valid answer (abstained, invalid, timed out, unjudged) as "
                       "not correctly answered. ECE with equal-width bins (K in the summary); "
                       "interval: fact-clustered bootstrap, or the reason there is none.")
        image = (plots.calibration_figure(sources, title=f"{model}, {reading}")
                 if sources else None)
        out.append({"image": image, "table": table_context(table)})
    return out


def example_answers(run: RunData, n_per_group: int = 3, per_fact: int = 2
                    ) -> list[dict[str, Any]]:
    """Pick a few ``raw_response`` strings per behaviour group (untrusted; escaped on render).

    Facts: the first ``n_per_group`` of each group by id; answers: the anchor first, then
    other main-forward queries, ``per_fact`` in all.
    """
    path, facts = run.judged_path(), run.facts
    if path is None or facts is None:
        return []
    chosen: dict[str, str] = {}
    for g in ALL_GROUPS:
        for fid in facts.fact_ids[facts.behavior_group == g][:n_per_group].tolist():
            chosen[fid] = g
    picked: dict[str, list[dict[str, Any]]] = {f: [] for f in chosen}
    for _, rec in iter_jsonl(path):
        if not isinstance(rec, dict) or rec.get("fact_id") not in chosen \
                or not rec.get("use_for_main_forward"):
            continue
        picked[rec["fact_id"]].append(rec)
    out = []
    modal = dict(zip(facts.fact_ids.tolist(), facts.modal_cluster.tolist(), strict=True))
    rel = dict(zip(facts.fact_ids.tolist(), facts.relation.tolist(), strict=True))
    for fid, g in chosen.items():
        recs = sorted(picked[fid], key=lambda r: r.get("condition_family") != ANCHOR_FAMILY)
        for r in recs[:per_fact]:
            text = str(r.get("raw_response", ""))
            if len(text) > MAX_RESPONSE_CHARS:
                text = text[:MAX_RESPONSE_CHARS] + " [...]"
            out.append({"group": g, "fact_id": fid, "relation": rel[fid], "modal": modal[fid],
                        "family": str(r.get("condition_family")),
                        "correctness": str(r.get("correctness")), "raw_response": text})
    return out


def _stages(run: RunData, stats: RunStatistics) -> list[tuple[str, str]]:
    f = run.facts
    nb = int((f.behavior_group != "").sum()) if f is not None else 0
    nu = int((f.behavior_group == UNSCORABLE).sum()) if f is not None else 0
    out = [("behaviour (BCS/BES)", f"done, {nb} facts ({nu} unscorable: too few scorable "
                                   "answers)" if nb else "not run"),
           ("internal ISS", "done" if run.iss_summary is not None else "not run"),
           ("internal KTS", "done" if run.kts_summary is not None else "not run"),
           ("KTS intervals (centroids)", "done" if run.centroids is not None else "not run"),
           ("sanity checks", "done" if run.sanity is not None else "not run"),
           ("calibration", "done" if run.calibration is not None else "not run"),
           ("bootstrap", "done" if stats.estimates else "not run")]
    return out


# ================================================================================ figures
def _headline_mode(stats: RunStatistics) -> str | None:
    modes = list(stats.document.get("coverage_modes", {}))
    return modes[0] if modes else None


def _iss_series(runs: Sequence[ReportRun]) -> dict[str, dict[str, Any]]:
    out = {}
    for r in runs:
        mode = _headline_mode(r.stats)
        band = (r.stats.document["coverage_modes"][mode]["subsets"]["all"].get("iss_per_layer")
                if mode else None)
        if band:
            layers = sorted(band, key=int)
            out[r.label] = {"layers": [int(x) for x in layers],
                            **{k: [band[x][k] for x in layers] for k in ("point", "low", "high")}}
    return out


def _behavior_shares(runs: Sequence[ReportRun]) -> dict[str, dict[str, float | None]]:
    out = {}
    for r in runs:
        mode = _headline_mode(r.stats)
        recs = {g: r.stats.metric(mode, "all", key) if mode else None
                for g, key in GROUP_METRICS.items()}
        if any(v is not None for v in recs.values()):
            point = {g: (v or {}).get("point") for g, v in recs.items()}
            if all(v is not None for v in point.values()):  # the facts outside the four
                point[plots.OTHER_GROUPS_LABEL] = max(0.0, 1.0 - sum(point.values()))
            out[f"{r.label} ({mode})"] = point
    return out


def _kts_heatmaps(r: ReportRun, families: Sequence[str]) -> list[str]:
    mode = _headline_mode(r.stats)
    info = (r.stats.document["coverage_modes"][mode]["subsets"]["all"].get("kts")
            if mode else None)
    if info:
        vals = {p: (r.stats.metric(mode, "all", f"kts[{p}]") or {}).get("point")
                for p in info["pairs"]}
    elif r.data.kts_summary is not None:
        vals = {p: v.get("kts") for p, v in (r.data.kts_summary.get("family_pairs") or {}).items()}
        mode = (r.data.kts_summary.get("headline") or {}).get("coverage", mode)
    else:
        return []
    fams = [f for f in families if any(f in p.split("__") for p in vals)]
    return [plots.kts_heatmap(fams, vals, model=f"{r.label}, {mode}")] if vals else []


def _relation_plot(r: ReportRun) -> str | None:
    t = next((t for t in r.tables if t.name == "per_relation"), None)
    mode = _headline_mode(r.stats)
    rows = [row for row in (t.rows if t else []) if row["coverage_mode"] == mode]
    if not rows:
        return None
    series = {label(k): [row.get(k) for row in rows] for k in ("bcs", "iss", "kts_id")
              if any(row.get(k) is not None for row in rows)}
    return plots.per_relation_bars([row["relation"] for row in rows], series,
                                   model=f"{r.label}, {mode}") if series else None


# ========================================================================= several runs
def _labels(runs: Sequence[RunData]) -> list[str]:
    names = [r.model for r in runs]
    return [f"{n} ({r.run_dir.name})" if names.count(n) > 1 else n
            for n, r in zip(names, runs, strict=True)]


def _pick_reference(runs: Sequence[ReportRun], reference: str | None) -> int:
    if reference is None:
        return 0
    for i, r in enumerate(runs):
        if reference in (r.label, r.data.model, r.data.run_dir.name, str(r.data.run_dir)):
            return i
    raise FksInputError(f"no run named {reference!r}; runs: "
                        f"{', '.join(r.label for r in runs)}", field="reference")


def _deltas(runs: Sequence[ReportRun], ref: int, confidence: float
            ) -> tuple[list[Table], list[str], list[dict[str, Any]]]:
    """Paired-difference tables (and forest rows) of every run against the reference."""
    tables, notes, forest = [], [], []
    base = runs[ref]
    for i, r in enumerate(runs):
        if i == ref:
            continue
        try:
            check_comparable(r.data, base.data)
        except FksInputError as exc:
            notes.append(f"{r.label} versus {base.label}: not compared ({exc.message})")
            continue
        deltas = compare_statistics(r.stats, base.stats, confidence=confidence)
        for mode, subsets in deltas.items():
            d = subsets.get("all", {})
            rows = [{"figure": label(m), "delta": d[m]["point"], "delta_low": d[m]["low"],
                     "delta_high": d[m]["high"], "model": d[m]["a"], "reference": d[m]["b"]}
                    for m in DELTA_METRICS if m in d]
            tables.append(Table(f"delta_{i}_{mode}", f"{r.label} - {base.label} ({mode})",
                                ["figure", "delta", "model", "reference"], rows, ci=("delta",)))
            if mode == _headline_mode(base.stats):
                forest += [{"label": f"{r.label}: {label(m)}", "point": d[m]["point"],
                            "low": d[m]["low"], "high": d[m]["high"]}
                           for m in ("bcs", "iss", "kts") if m in d and d[m]["point"] is not None]
    return tables, notes, forest


# ================================================================================ the stage
def _verified(run_dir: str | Path) -> bool:
    """Verify a run's files (:func:`verify_inputs`); return whether its bootstrap verifies.

    Bootstrap files that do not verify are not an error here: the report recomputes them.
    """
    from fks.provenance import verify_run

    verify_inputs(run_dir, skip=("bootstrap",))
    try:
        verify_run(Path(run_dir), ["bootstrap"])
    except FksInputError as exc:
        log.warning("%s: recomputing the bootstrap (%s)", run_dir, exc.one_line())
        return False
    return True


def _load(run_dirs: Sequence[str | Path], *, allow_mixed: bool
          ) -> tuple[list[RunData], list[str], list[bool]]:
    """Verify and read the runs; refuse mixed benchmarks unless ``allow_mixed``."""
    fresh = [_verified(d) for d in run_dirs]
    datas = [load_run(d) for d in run_dirs]
    for data in datas:
        check_consistent(data)
    labels = _labels(datas)
    if len(datas) > 1 and not allow_mixed:
        try:
            check_same_benchmark(datas, labels)
        except FksInputError as exc:
            raise FksInputError(f"{exc.message}; one leaderboard needs one benchmark (pass "
                                "--allow-mixed for one leaderboard per benchmark)",
                                path=exc.path, field=exc.field) from None
    return datas, labels, fresh


def _prepare(run_dirs: Sequence[str | Path], settings: Settings, *, tau_b: float,
             reuse: bool, allow_mixed: bool = False) -> list[ReportRun]:
    datas, labels, fresh = _load(run_dirs, allow_mixed=allow_mixed)
    out = []
    for data, lab, ok in zip(datas, labels, fresh, strict=True):
        stats = (run_statistics(data, settings, reuse=reuse and ok) if data.facts is not None
                 else compute_statistics(data, settings))
        tables = run_tables(data, stats, settings, tau_b=tau_b)
        if data.facts is not None:
            for t in tables:
                write_table(t, data.metrics_dir / TABLES_DIR)
        out.append(ReportRun(data, stats, tables, lab, build_results(data.run_dir, data=data)))
    return out


def _leaderboards(runs: Sequence[ReportRun], modes: Sequence[str]) -> tuple[list[Table], str]:
    """One leaderboard per coverage mode, and per benchmark when the runs use several."""
    groups = benchmark_groups([r.data for r in runs])
    if len(groups) == 1:
        return [leaderboard_table([(r.data, r.stats) for r in runs], m) for m in modes], ""
    boards = []
    for cs, idx in groups.items():
        slug = re.sub(r"[^A-Za-z0-9]", "", cs or "")[:12] or "unrecorded"
        for m in modes:
            t = leaderboard_table([(runs[i].data, runs[i].stats) for i in idx], m)
            t.name = f"{t.name}_{slug}"
            t.title = (f"{t.title}, benchmark {cs[:12] if cs else '(no checksum recorded)'}: "
                       + ", ".join(runs[i].label for i in idx))
            boards.append(t)
    note = (f"These runs use {len(groups)} different benchmarks (--allow-mixed): one leaderboard "
            "per benchmark checksum; figures from different benchmarks are not comparable, and "
            "paired differences are given only for runs on the reference's benchmark.")
    return boards, note


def _run_context(r: ReportRun, families: Sequence[str]) -> dict[str, Any]:
    examples = example_answers(r.data)
    return {
        "label": r.label, "run_dir": str(r.data.run_dir),
        "checksum": r.results.run.benchmark_checksum,
        "stages": _stages(r.data, r.stats),
        "tables": [table_context(t) for t in r.tables],
        "kts_heatmaps": _kts_heatmaps(r, families), "relation_plot": _relation_plot(r),
        "sanity": sanity_context(r.data.sanity),
        "calibration": _calibration_context(r.data.calibration, r.label),
        "examples": examples,
        "examples_note": ("judged.jsonl absent" if r.data.judged_path() is None
                          else "no behavioural metrics"),
    }


def _judge_validation(r: ReportRun, labels: str | Path | None) -> list[dict[str, Any]]:
    """§18.6 figures of this run's judge (and scorer) against a labelled set, per split."""
    judged = r.data.judged_path()
    if labels is None or judged is None:
        return []
    from fks.judge import NoOverlap, judge_agreement

    rows: list[dict[str, Any]] = []
    for split in (None, "dev", "test"):
        try:
            rep = judge_agreement(judged, labels, split=split)
        except NoOverlap:
            continue  # no labelled answer of this run (in this split); other errors: exit 2
        for who, part in (("judge", rep), ("scorer", rep.get("scorer"))):
            if part is None:
                continue
            gap = part.get("bcs_gap") or {}
            rows.append({
                "split": split or "all", "who": who, "n": part["n_overlap"],
                "kind": part["kind"]["accuracy"], "extraction": part["extraction"]["accuracy"],
                "pairs": (part.get("cluster_equivalence") or {}).get("accuracy"),
                "accuracy": part["correctness"]["accuracy"],
                "kappa": part["correctness"]["cohen_kappa"],
                "alpha": part["correctness"]["krippendorff_alpha"],
                "bcs_gap": gap.get("mean_abs_gap"), "bcs_gap_ci95": gap.get("mean_abs_gap_ci95")})
    return rows


@locks_run_dir("run_dirs")
def build_report(run_dirs: Sequence[str | Path], *, configs: ConfigSet, out: str | Path | None
                 = None, reference: str | None = None, kts_bootstrap: bool = True,
                 reuse: bool = True, explorer_on: bool = True,
                 labels: str | Path | None = None, allow_mixed: bool = False) -> Path:
    """Build the statistics, tables and the HTML report of one or more runs.

    Args:
        run_dirs: run directories (at least one).
        configs: configs in force (bootstrap settings, coverage modes, tau_b, families).
        out: the HTML file (default ``RUN/report.html`` for one run; required for several).
        reference: the reference model of the paired differences (default: the first run).
        kts_bootstrap: bootstrap KTS (the expensive part); otherwise KTS points only.
        reuse: reuse cached bootstrap files whose fingerprint matches.
        explorer_on: also write the fact explorer beside the report
            (:func:`fks.report.explorer.explorer_path`) and link it.
        labels: a hand-labelled answer set (``fks judge agreement``'s format); each run's
            judge and scorer are measured against it (spec §18.6) in a judge-validation block.
        allow_mixed: accept runs over different benchmarks (one leaderboard per benchmark
            checksum); by default they are refused.

    Also writes ``RUN/results.json`` (:func:`fks.report.results.write_results`) for every run.

    Returns:
        The path of the HTML file written.

    Raises:
        FksInputError: no run, a run file that does not verify or disagrees with its summary,
            runs over different benchmarks (without ``allow_mixed``), an unknown reference.
    """
    if not run_dirs:
        raise FksInputError("give at least one run directory", field="runs")
    if out is None:
        if len(run_dirs) > 1:
            raise FksInputError("several runs need --out FILE", field="out")
        out = Path(run_dirs[0]) / "report.html"
    out = Path(out)
    settings = Settings.from_configs(configs, kts_bootstrap=kts_bootstrap)
    runs = _prepare(run_dirs, settings, tau_b=configs.metrics.tau_b, reuse=reuse,
                    allow_mixed=allow_mixed)
    ref = _pick_reference(runs, reference)
    families = list(configs.metrics.main_families)
    context: dict[str, Any] = {
        "title": "fks report: " + ", ".join(r.label for r in runs),
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"), "version": __version__,
        "n_resamples": settings.n_resamples, "seed": settings.seed,
        "reference": runs[ref].label, "leaderboard": [], "leaderboard_note": "",
        "deltas": [], "delta_notes": [], "forest": None,
        "details": details_context([(r.label, r.results.run) for r in runs]),
        "behavior_plot": (plots.behavior_bars(s) if (s := _behavior_shares(runs)) else None),
        "iss_plot": plots.iss_by_layer(s) if (s := _iss_series(runs)) else None,
        "runs": [_run_context(r, families) | {"judge_validation": _judge_validation(r, labels)}
                 for r in runs], "explorer_href": None,
        "alerts": _alerts(runs),
    }
    if len(runs) > 1:
        boards, board_note = _leaderboards(runs, settings.coverage_modes)
        deltas, notes, forest = _deltas(runs, ref, settings.confidence)
        folder = out.parent / f"{out.stem}_tables"
        for t in [*boards, *deltas]:
            write_table(t, folder)
        context.update(leaderboard=[table_context(t) for t in boards],
                       leaderboard_note=board_note,
                       deltas=[table_context(t) for t in deltas], delta_notes=notes,
                       forest=plots.forest_plot(forest, title=f"Paired differences against "
                                                f"{runs[ref].label}", xlabel="Delta")
                       if forest else None)
    out.parent.mkdir(parents=True, exist_ok=True)
    explorer = None
    if explorer_on:
        explorer = write_explorer(runs, explorer_path(out), report=out)
        context["explorer_href"] = explorer.name
    atomic_write_text(out, render(context))
    for r in runs:
        write_results(r.data.run_dir, results=r.results)
    log.info("report of %d run(s) -> %s; results.json in each run", len(runs), out)
    return out
