"""``fks report RUN... --out report.html``: statistics, tables and one self-contained HTML file.

For each run: the relation-clustered bootstrap (:mod:`fks.report.statistics`, written to
``RUN/metrics/bootstrap_intervals.json``), the paper tables (:mod:`fks.report.tables`,
``RUN/metrics/tables/``), figures (:mod:`fks.report.plots`), the sanity-check panel, the
calibration diagrams when ``calibration_summary.json`` exists, and example answers per
behaviour group from ``judged.jsonl``. With several runs: a leaderboard with intervals and
paired differences against a reference model (§14.2), when the runs share benchmark and fact
set. A stage that has not run is shown as "not run"; the report renders with whatever exists.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fks import __version__
from fks.configs import ConfigSet
from fks.errors import FksInputError
from fks.io import atomic_write_text, iter_jsonl
from fks.metrics.behavior import ANCHOR_FAMILY, GROUPS
from fks.report import plots
from fks.report.comparison import check_comparable, compare_statistics
from fks.report.html import render
from fks.report.inputs import GROUP_METRICS, RunData, benchmark_checksum, load_run
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

__all__ = ["ReportRun", "build_report", "table_context", "sanity_context", "example_answers"]

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


def sanity_context(sanity: dict[str, Any] | None) -> dict[str, Any] | None:
    """Flatten ``sanity_checks.json`` for the panel: status, criteria and numbers per check."""
    if not sanity or not isinstance(sanity.get("checks"), dict):
        return None
    checks = []
    for name, c in sanity["checks"].items():
        if not isinstance(c, dict):
            continue
        numbers = []
        for k, v in c.items():
            if k in ("status", "criteria"):
                continue
            if isinstance(v, dict):
                numbers += [(f"{k}.{k2}", s) for k2, v2 in v.items()
                            if (s := _scalar(v2)) is not None]
            elif (s := _scalar(v)) is not None:
                numbers.append((k, s))
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


def _calibration_context(cal: dict[str, Any] | None, model: str) -> list[dict[str, Any]]:
    """Per reading: the reliability / risk-coverage figure and a table of the sources."""
    out: list[dict[str, Any]] = []
    for reading, rd in ((cal or {}).get("readings") or {}).items():
        sources, rows = {}, []
        for src, block in (rd.get("sources") or {}).items():
            fig = block.get("figures") if block.get("available") else None
            if not fig:
                rows.append({"source": src, "n": None, "status": block.get("reason") or
                             "not available"})
                continue
            rel = (block.get("reliability") or {}).get("equal_width")
            if rel:
                sources[src] = {"reliability": rel, "risk_coverage": block.get("risk_coverage"),
                                "ece": fig.get("ece_equal_width")}
            cov = block.get("coverage") or {}
            rows.append({"source": src, "n": fig.get("n"), "status": "ok",
                         "coverage": cov.get("confidence_coverage", cov.get("coverage")),
                         "accuracy": fig.get("accuracy"), "ece": fig.get("ece_equal_width"),
                         "brier": fig.get("brier"), "aurc": fig.get("aurc")})
        table = Table(f"calibration_{reading}", f"Calibration, reading {reading}",
                      ["source", "status", "n", "coverage", "accuracy", "ece", "brier", "aurc"],
                      rows, note="ECE with 10 equal-width bins unless configured otherwise; "
                                 "coverage = valid confidences / answered queries.")
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
    for g in GROUPS:
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
    out = [("behaviour (BCS/BES)", f"done, {nb} facts" if nb else "not run"),
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
            out[f"{r.label} ({mode})"] = {g: (v or {}).get("point") for g, v in recs.items()}
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
def _prepare(run_dirs: Sequence[str | Path], settings: Settings, *, tau_b: float,
             reuse: bool) -> list[ReportRun]:
    datas = [load_run(d) for d in run_dirs]
    out = []
    for data, lab in zip(datas, _labels(datas), strict=True):
        stats = (run_statistics(data, settings, reuse=reuse) if data.facts is not None
                 else compute_statistics(data, settings))
        tables = run_tables(data, stats, settings, tau_b=tau_b)
        if data.facts is not None:
            for t in tables:
                write_table(t, data.metrics_dir / TABLES_DIR)
        out.append(ReportRun(data, stats, tables, lab))
    return out


def _run_context(r: ReportRun, families: Sequence[str]) -> dict[str, Any]:
    examples = example_answers(r.data)
    return {
        "label": r.label, "run_dir": str(r.data.run_dir),
        "checksum": benchmark_checksum(r.data.run_dir, r.data.manifest),
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
    from fks.judge import judge_agreement

    rows: list[dict[str, Any]] = []
    for split in (None, "dev", "test"):
        try:
            rep = judge_agreement(judged, labels, split=split)
        except FksInputError:
            continue  # no labelled answer of this run (in this split)
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
                "bcs_gap": gap.get("mean_abs_gap")})
    return rows


def build_report(run_dirs: Sequence[str | Path], *, configs: ConfigSet, out: str | Path | None
                 = None, reference: str | None = None, kts_bootstrap: bool = True,
                 reuse: bool = True, labels: str | Path | None = None) -> Path:
    """Build the statistics, tables and the HTML report of one or more runs.

    Args:
        run_dirs: run directories (at least one).
        configs: configs in force (bootstrap settings, coverage modes, tau_b, families).
        out: the HTML file (default ``RUN/report.html`` for one run; required for several).
        reference: the reference model of the paired differences (default: the first run).
        kts_bootstrap: bootstrap KTS (the expensive part); otherwise KTS points only.
        reuse: reuse cached bootstrap files whose fingerprint matches.
        labels: a hand-labelled answer set (``fks judge agreement``'s format); each run's
            judge and scorer are measured against it (spec §18.6) in a judge-validation block.

    Returns:
        The path of the HTML file written.
    """
    if not run_dirs:
        raise FksInputError("give at least one run directory", field="runs")
    if out is None:
        if len(run_dirs) > 1:
            raise FksInputError("several runs need --out FILE", field="out")
        out = Path(run_dirs[0]) / "report.html"
    out = Path(out)
    settings = Settings.from_configs(configs, kts_bootstrap=kts_bootstrap)
    runs = _prepare(run_dirs, settings, tau_b=configs.metrics.tau_b, reuse=reuse)
    ref = _pick_reference(runs, reference)
    families = list(configs.metrics.main_families)
    context: dict[str, Any] = {
        "title": "fks report: " + ", ".join(r.label for r in runs),
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"), "version": __version__,
        "n_resamples": settings.n_resamples, "seed": settings.seed,
        "reference": runs[ref].label, "leaderboard": [], "deltas": [], "delta_notes": [],
        "forest": None,
        "behavior_plot": (plots.behavior_bars(s) if (s := _behavior_shares(runs)) else None),
        "iss_plot": plots.iss_by_layer(s) if (s := _iss_series(runs)) else None,
        "runs": [_run_context(r, families) | {"judge_validation": _judge_validation(r, labels)}
                 for r in runs],
    }
    if len(runs) > 1:
        boards = [leaderboard_table([(r.data, r.stats) for r in runs], mode)
                  for mode in settings.coverage_modes]
        deltas, notes, forest = _deltas(runs, ref, settings.confidence)
        folder = out.parent / f"{out.stem}_tables"
        for t in [*boards, *deltas]:
            write_table(t, folder)
        context.update(leaderboard=[table_context(t) for t in boards],
                       deltas=[table_context(t) for t in deltas], delta_notes=notes,
                       forest=plots.forest_plot(forest, title=f"Paired differences against "
                                                f"{runs[ref].label}", xlabel="Delta")
                       if forest else None)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, render(context))
    log.info("report of %d run(s) -> %s", len(runs), out)
    return out
