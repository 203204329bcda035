"""Paper tables of one run (spec §12, §13.1-13.3, §20) as CSV and Markdown.

Every table is a list of row dicts with a fixed column order (:class:`Table`), written to
``RUN/metrics/tables/<name>.csv`` and ``.md``. Figures with a bootstrap interval have
``<figure>_low`` / ``<figure>_high`` columns in the CSV and read ``0.812 [0.790, 0.830]`` in
Markdown.

Tables:

* ``main`` (§13.1, §20): per coverage mode and aggregation (``fact_mean`` = the spec's
  model-level figures; ``relation_macro`` = every relation weighs the same), anchor accuracy,
  BCS, BES, the four behaviour shares, ISS, KTS-Geo, KTS-ID and KTS with 95 % intervals.
* ``real_copy``: the same fact-level figures for all / real / copy facts
  (``answer_in_subject_surface``); KTS points from the internal metrics' selections.
* ``per_relation`` (§20): per relation and coverage mode, the fact means and KTS terms.
* ``behavior_groups`` (§13.2): per behaviour group, facts, ISS, KTS-Geo, KTS-ID, KTS; the four
  §6 groups and the three beside them (``Stable Multiple``, ``Stable Review``, ``Unscorable``).
* ``behavior_breakdown`` (§6): per coverage mode and subset, the facts of every behaviour group
  and the four §6 shares over the fixed set (unscorable facts in the denominator).
* ``answer_coverage``: per main family, main answers, scorable ones, empty ones and their
  share, generation errors, judge failures, unparseable outputs.

Every fact table has an ``n_unscorable`` column: facts without enough scorable answers (no
BCS; counted in the fixed N of the shares, left out of the BCS/BES means).
* ``kts_pairs`` (§13.3): per condition pair, shared facts and the KTS terms with intervals.
* ``joint_quadrants`` (§12): facts per cell of high/low BCS x ISS x KTS (thresholds below).
* ``joint_correlations`` (§12): Spearman correlations between per-fact BCS, BES, ISS and the
  per-fact identification rate.

Joint-reading thresholds (§12), fixed so that models are comparable:

* BCS high: ``BCS >= tau_b`` (the pre-registered behaviour threshold, §6);
* ISS high: ``ISS > 0`` (the fact's own states agree better than same-relation background;
  §7.9's zero point);
* KTS high: the fact is identified as itself (KTS-ID top-1, §10.1) in at least half of its
  retrievals over window layers, condition pairs and both directions.

A fact without a value is counted in an ``n/a`` cell, so the cells always sum to the facts.
"""

from __future__ import annotations

import csv
import io
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.stats

from fks.io import atomic_write_text
from fks.metrics.behavior import ALL_GROUPS, GROUPS, UNSCORABLE, UNSCORABLE_REASONS
from fks.metrics.stats.clustered_bootstrap import FACT_METRICS, KTS_METRICS, MACRO_SUFFIX, kts_point
from fks.report.inputs import RunData
from fks.report.statistics import SUBSETS, RunStatistics, Settings

__all__ = [
    "Table",
    "TABLES_DIR",
    "ISS_HIGH",
    "KTS_HIGH",
    "main_table",
    "real_copy_table",
    "per_relation_table",
    "readings_table",
    "behavior_group_table",
    "behavior_breakdown_table",
    "answer_coverage_table",
    "kts_pair_table",
    "joint_quadrants",
    "joint_correlations",
    "run_tables",
    "write_table",
    "leaderboard_table",
]

TABLES_DIR = "tables"
#: ISS threshold of the joint reading (§7.9: 0 = no better than background)
ISS_HIGH = 0.0
#: per-fact identification rate threshold of the joint reading
KTS_HIGH = 0.5
HEADLINE = ("anchor_accuracy", "bcs", "bes", "scr", "swr", "sar", "ur", "iss", "iss_unwhitened",
            "kts_geo",
            "kts_geo_raw_spearman", "kts_id", "kts")
_FACT_HEADLINE = tuple(m for m in HEADLINE if m in FACT_METRICS)
_LABELS = {"anchor_accuracy": "Anchor Acc.", "bcs": "BCS", "bes": "BES",
           "scr": "Stable Correct", "swr": "Stable Wrong", "sar": "Stable Abstention",
           "ur": "Unstable", "iss": "ISS", "iss_peak": "ISS peak", "iss_late": "ISS late",
           "iss_unwhitened": "ISS unwhitened",
           "kts_geo": "KTS-Geo", "kts_geo_raw_spearman": "KTS-Geo rho", "kts_id": "KTS-ID",
           "kts": "KTS"}


@dataclass
class Table:
    """A table: name, title, column order, rows; ``ci`` lists columns with intervals."""

    name: str
    title: str
    columns: list[str]
    rows: list[dict[str, Any]]
    ci: tuple[str, ...] = ()
    note: str = ""

    def csv_columns(self) -> list[str]:
        """Columns of the CSV: each interval column followed by ``_low`` and ``_high``."""
        out = []
        for c in self.columns:
            out.append(c)
            if c in self.ci:
                out += [f"{c}_low", f"{c}_high"]
        return out


def label(name: str) -> str:
    """Display label of a figure name (``kts_id`` -> ``KTS-ID``)."""
    return _LABELS.get(name, name)


# ================================================================================ helpers
def _put(row: dict[str, Any], name: str, rec: dict[str, Any] | None) -> None:
    """Copy an interval record's point/low/high into ``row`` (None when absent)."""
    row[name] = None if rec is None else rec.get("point")
    row[f"{name}_low"] = None if rec is None else rec.get("low")
    row[f"{name}_high"] = None if rec is None else rec.get("high")


def _mean(x: np.ndarray) -> float | None:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else None


def _n_unscorable(run: RunData, mode: str, subset: str = "all") -> int | None:
    """Facts of a coverage mode and subset without enough scorable answers (None: not run)."""
    facts = run.facts
    if facts is None or not (facts.behavior_group != "").any():
        return None
    m = facts.coverage_mask(mode) & facts.subset_mask(subset)
    return int((m & (facts.behavior_group == UNSCORABLE)).sum())


def _modes(stats: RunStatistics) -> list[str]:
    return list(stats.document.get("coverage_modes", {}))


def _kts_fallback(run: RunData, mode: str, name: str, pair: str | None = None
                  ) -> dict[str, Any] | None:
    """Return a KTS point (no interval) from ``kts_model_summary.json``.

    Used when the bootstrap has none (the centroids are absent).
    """
    sel = _internal_selection(run, f"{mode}/all") or {}
    if pair is not None:
        sel = (sel.get("family_pairs") or {}).get(pair) or {}
    value = sel.get(name)
    return None if value is None else {"point": value, "low": None, "high": None}


def _kts_record(run: RunData, stats: RunStatistics, mode: str, name: str
                ) -> dict[str, Any] | None:
    rec = stats.metric(mode, "all", name)
    return rec if rec is not None else _kts_fallback(run, mode, name)


def _internal_selection(run: RunData, name: str) -> dict[str, Any] | None:
    """Return the internal metrics' KTS block of a selection (``reading/coverage/subset``)."""
    if run.kts_summary is None:
        return None
    reading = (run.kts_summary.get("headline") or {}).get("reading")
    return (run.kts_summary.get("selections") or {}).get(f"{reading}/{name}")


# ================================================================================= tables
def main_table(run: RunData, stats: RunStatistics) -> Table:
    """§13.1 / §20: headline figures per coverage mode and aggregation, with intervals."""
    rows = []
    for mode in _modes(stats):
        block = stats.document["coverage_modes"][mode]["subsets"]["all"]
        for agg, suffix in (("fact_mean", ""), ("relation_macro", MACRO_SUFFIX)):
            row: dict[str, Any] = {"model": run.model, "coverage_mode": mode,
                                   "aggregation": agg, "n_facts": block["n_facts"],
                                   "n_unscorable": _n_unscorable(run, mode),
                                   "n_relations": block["n_relations"]}
            for m in HEADLINE:
                if m in KTS_METRICS:
                    _put(row, m, _kts_record(run, stats, mode, m))
                else:
                    _put(row, m, stats.metric(mode, "all", m + suffix))
            rows.append(row)
    return Table("main", "Main results (spec §13.1), 95 % relation-clustered bootstrap "
                 "intervals", ["model", "coverage_mode", "aggregation", "n_facts",
                               "n_unscorable", "n_relations", *HEADLINE], rows, ci=HEADLINE,
                 note="KTS figures are relation macro-averages by definition (§9.3, §10.4); "
                      "they are the same in both aggregation rows. n_unscorable: facts without "
                      "enough scorable answers; they stay in n_facts (the fixed N of the four "
                      "shares) and have no BCS/BES.")


def real_copy_table(run: RunData, stats: RunStatistics) -> Table:
    """Fact-level figures for all / real / copy facts; KTS points from the internal metrics."""
    rows = []
    for mode in _modes(stats):
        for sub in SUBSETS:
            block = stats.document["coverage_modes"][mode]["subsets"][sub]
            row: dict[str, Any] = {"model": run.model, "coverage_mode": mode, "subset": sub,
                                   "n_facts": block["n_facts"],
                                   "n_unscorable": _n_unscorable(run, mode, sub)}
            for m in _FACT_HEADLINE:
                _put(row, m, stats.metric(mode, sub, m))
            sel = _internal_selection(run, f"{mode}/{sub}") or {}
            for m in ("kts_geo", "kts_id", "kts"):
                rec = stats.metric(mode, sub, m)
                row[m] = rec["point"] if rec is not None else sel.get(m)
            rows.append(row)
    return Table("real_copy", "Real versus copy-answerable facts (README caveat 2)",
                 ["model", "coverage_mode", "subset", "n_facts", "n_unscorable",
                  *_FACT_HEADLINE, "kts_geo",
                  "kts_id", "kts"], rows, ci=_FACT_HEADLINE,
                 note="copy = answer_in_subject_surface. KTS: the bootstrap's point for all "
                      "facts; for real/copy the point of kts_model_summary.json (no interval).")


def per_relation_table(run: RunData, stats: RunStatistics) -> Table:
    """§20 per-relation results: fact means per relation and KTS terms per relation."""
    facts = run.facts
    rows = []
    cols = ["coverage_mode", "relation", "n_facts", "n_unscorable", *_FACT_HEADLINE,
            "kts_geo_raw_spearman", "kts_id"]
    if facts is None:
        return Table("per_relation", "Per relation", cols, rows)
    for mode in _modes(stats):
        cov = facts.coverage_mask(mode)
        kts_rel = (stats.document["coverage_modes"][mode]["subsets"]["all"].get("kts") or {}
                   ).get("per_relation", {})
        for rel in sorted(set(facts.relation[cov].tolist())):
            m = cov & (facts.relation == rel)
            row: dict[str, Any] = {"coverage_mode": mode, "relation": rel,
                                   "n_facts": int(m.sum()),
                                   "n_unscorable": int((m & (facts.behavior_group
                                                             == UNSCORABLE)).sum())}
            for key in _FACT_HEADLINE:
                row[key] = _mean(facts.values[key][m])
            k = kts_rel.get(rel) or {}
            row["kts_geo_raw_spearman"] = k.get("kts_geo_raw_spearman")
            row["kts_id"] = k.get("kts_id")
            rows.append(row)
    return Table("per_relation", "Per relation (fact means; KTS terms averaged over pairs and "
                 "window layers)", cols, rows)


def _group_kts(run: RunData, mode: str, group: str, mask: np.ndarray,
               settings: Settings) -> dict[str, Any]:
    """Return the KTS of one behaviour group's facts.

    The internal metrics' selection when present, else recomputed from the centroids (point
    only), else empty.
    """
    sel = _internal_selection(run, f"{mode}/group:{group}")
    if sel is not None:
        return sel
    if run.centroids is None or run.facts is None or not mask.any():
        return {}
    ids = run.facts.fact_ids[mask]
    space = run.centroids.space(ids, settings.main_families, min_facts=settings.kts_min_facts,
                                eps=settings.eps)
    res = kts_point(space, run.facts.relation[mask])
    return {k: (None if not np.isfinite(v) else float(v)) for k, v in res.summary().items()
            if k in KTS_METRICS}


def behavior_group_table(run: RunData, stats: RunStatistics, settings: Settings) -> Table:
    """§13.2: internal stability per behaviour group."""
    facts = run.facts
    cols = ["coverage_mode", "behavior_group", "facts", "iss", "kts_geo", "kts_id", "kts"]
    rows: list[dict[str, Any]] = []
    if facts is None or not (facts.behavior_group != "").any():
        return Table("behavior_groups", "Internal stability by behaviour group (§13.2)", cols,
                     rows, note="behavioural metrics not run")
    for mode in _modes(stats):
        cov = facts.coverage_mask(mode)
        for g in ALL_GROUPS:
            m = cov & (facts.behavior_group == g)
            k = _group_kts(run, mode, g, m, settings) if g in GROUPS else {}
            rows.append({"coverage_mode": mode, "behavior_group": g, "facts": int(m.sum()),
                         "iss": _mean(facts.values["iss"][m]),
                         **{key: k.get(key) for key in ("kts_geo", "kts_id", "kts")}})
    return Table("behavior_groups", "Internal stability by behaviour group (§13.2)", cols, rows,
                 note="KTS of a group is computed on the group's facts (relations with at "
                      "least kts_geo_min_facts of them), for the four §6 groups.")


def behavior_breakdown_table(run: RunData, stats: RunStatistics) -> Table:
    """§6: facts per behaviour group and the four shares over the fixed set, per subset."""
    facts = run.facts
    keys = {"Stable Correct": "scr", "Stable Wrong": "swr", "Stable Abstention": "sar",
            "Unstable": "ur"}
    cols = ["coverage_mode", "subset", "n_facts", *ALL_GROUPS, *keys.values()]
    rows: list[dict[str, Any]] = []
    if facts is None or not (facts.behavior_group != "").any():
        return Table("behavior_breakdown", "Behaviour groups (§6)", cols, rows,
                     note="behavioural metrics not run")
    for mode in _modes(stats):
        for sub in SUBSETS:
            m = facts.coverage_mask(mode) & facts.subset_mask(sub)
            n = int(m.sum())
            row: dict[str, Any] = {"coverage_mode": mode, "subset": sub, "n_facts": n}
            for g in ALL_GROUPS:
                row[g] = int((m & (facts.behavior_group == g)).sum())
            for g, key in keys.items():
                row[key] = row[g] / n if n else None
            rows.append(row)
    return Table("behavior_breakdown", "Behaviour groups (§6): facts per group and the four "
                 "shares over the fixed set", cols, rows,
                 note="Stable Abstention = modal cluster ABSTAIN (§6.3). Stable Multiple (modal "
                      "MULTIPLE), Stable Review (modal cluster REVIEW_REQUIRED) and Unscorable "
                      "(too few scorable answers: generation errors, empty answers, judge "
                      "failures, unparseable outputs) are outside the four §6 groups, so "
                      "scr + swr + sar + ur = 1 - their share.")


def answer_coverage_table(run: RunData) -> Table:
    """Per main family: answers, scorable ones and why the others are not scorable."""
    cols = ["family", "n", "scorable", "scorable_share", "empty", "empty_share",
            *[r for r in UNSCORABLE_REASONS if r != "empty"]]
    cov = ((run.behavior_summary or {}).get("records") or {}).get("main_by_family")
    if not cov:
        return Table("answer_coverage", "Main-forward answers per family", cols, [],
                     note="behavioural metrics not run (or written by an older fks)")
    rows = [{"family": fam, **{c: v.get(c) for c in cols if c != "family"}}
            for fam, v in cov.items()]
    return Table("answer_coverage", "Main-forward answers per family: scorable, empty, failed",
                 cols, rows, note="Only scorable answers enter BCS/BES. empty: the model "
                 "returned nothing (no answer, never stable behaviour); generation_error: "
                 "error or timeout; judge_failure: the judge gave no cluster "
                 "(REVIEW_REQUIRED); unparseable: no claim could be extracted.")


def kts_pair_table(run: RunData, stats: RunStatistics) -> Table:
    """§13.3: KTS per condition pair with intervals."""
    ci = ("kts_geo", "kts_geo_raw_spearman", "kts_id", "kts")
    cols = ["coverage_mode", "pair", "shared_facts", *ci]
    rows = []
    note = ""
    for mode in _modes(stats):
        block = stats.document["coverage_modes"][mode]["subsets"]["all"]
        info = block.get("kts")
        if info is None:  # no centroids: the internal metrics' points, without intervals
            pairs = (_internal_selection(run, f"{mode}/all") or {}).get("family_pairs") or {}
            info = {"pairs": list(pairs),
                    "shared_facts": {p: v.get("shared_facts") for p, v in pairs.items()}}
            note = "no centroids: points from kts_model_summary.json, no intervals" \
                if pairs else note
        for pair in info["pairs"]:
            row: dict[str, Any] = {"coverage_mode": mode, "pair": pair,
                                   "shared_facts": info["shared_facts"][pair]}
            for m in ci:
                rec = stats.metric(mode, "all", f"{m}[{pair}]")
                _put(row, m, rec if rec is not None else _kts_fallback(run, mode, m, pair))
            rows.append(row)
    label_note = ("full_set: each pair on its shared facts D_t ∩ D_t' (the headline, spec "
                  "§8.2); complete_family: every pair on D∩, the facts with every main family.")
    return Table("kts_pairs", "KTS by condition pair (§13.3)", cols, rows, ci=ci,
                 note=(f"{label_note} {note}".strip() if rows
                       else "KTS not available (internal metrics not run)"))


def _fact_kts(stats: RunStatistics, mode: str, ids: np.ndarray) -> np.ndarray:
    """Per-fact identification rate aligned with ``ids`` (nan where not computed)."""
    out = np.full(len(ids), np.nan)
    got = stats.fact_identity.get((mode, "all"))
    if got is None:
        return out
    pos = {f: i for i, f in enumerate(ids.tolist())}
    for f, v in zip(got[0].tolist(), got[1].tolist(), strict=True):
        if f in pos:
            out[pos[f]] = v
    return out


def _level(x: np.ndarray, threshold: float, inclusive: bool) -> np.ndarray:
    hi = x >= threshold if inclusive else x > threshold
    return np.where(np.isfinite(x), np.where(hi, "high", "low"), "n/a")


_JOINT_READING = {  # §12's table: (BCS, ISS, KTS) -> interpretation
    ("high", "high", "high"): "output, single-fact state and knowledge structure all stable",
    ("high", "low", "low"): "consistent surface answers, unstable internal state and "
                            "organisation",
    ("high", "high", "low"): "locally consistent states; global space may collapse or "
                             "rearrange",
    ("low", "high", "high"): "internal knowledge stable; failure likely in late selection or "
                             "expression",
    ("low", "low", "high"): "conditions shift coordinates uniformly; topology preserved",
    ("low", "low", "low"): "behaviour, single-fact state and knowledge space all unstable",
}


def joint_quadrants(run: RunData, stats: RunStatistics, *, tau_b: float) -> Table:
    """§12: facts per (BCS, ISS, KTS) high/low cell, per coverage mode."""
    cols = ["coverage_mode", "bcs", "iss", "kts", "facts", "share", "reading"]
    rows: list[dict[str, Any]] = []
    facts = run.facts
    if facts is None:
        return Table("joint_quadrants", "Joint reading (§12)", cols, rows)
    for mode in _modes(stats):
        cov = facts.coverage_mask(mode)
        ids = facts.fact_ids[cov]
        b = _level(facts.values["bcs"][cov], tau_b - 1e-9, True)
        i = _level(facts.values["iss"][cov], ISS_HIGH, False)
        k = _level(_fact_kts(stats, mode, ids), KTS_HIGH, True)
        n = int(cov.sum())
        cells: dict[tuple[str, str, str], int] = {}
        for key in zip(b.tolist(), i.tolist(), k.tolist(), strict=True):
            cells[key] = cells.get(key, 0) + 1
        for key in sorted(cells, key=lambda t: tuple({"high": 0, "low": 1}.get(x, 2)
                                                    for x in t)):
            rows.append({"coverage_mode": mode, "bcs": key[0], "iss": key[1], "kts": key[2],
                         "facts": cells[key], "share": cells[key] / n if n else None,
                         "reading": _JOINT_READING.get(key, "")})
    return Table("joint_quadrants", "Joint internal x external reading (§12): facts per cell",
                 cols, rows, note=f"BCS high: BCS >= tau_b = {tau_b:g}; ISS high: ISS > "
                 f"{ISS_HIGH:g}; KTS high: the fact is identified as itself (KTS-ID top-1) in "
                 f">= {KTS_HIGH:g} of its retrievals over window layers, pairs and both "
                 "directions. n/a: no value (stage not run or undefined). Cells sum to the "
                 "facts of the coverage mode.")


def joint_correlations(run: RunData, stats: RunStatistics) -> Table:
    """§12: Spearman correlations between per-fact external and internal figures."""
    cols = ["coverage_mode", "x", "y", "n_facts", "spearman", "p_value"]
    rows: list[dict[str, Any]] = []
    facts = run.facts
    if facts is None:
        return Table("joint_correlations", "Joint reading (§12): correlations", cols, rows)
    for mode in _modes(stats):
        cov = facts.coverage_mask(mode)
        series = {"bcs": facts.values["bcs"][cov], "bes": facts.values["bes"][cov],
                  "iss": facts.values["iss"][cov],
                  "kts_fact_identity": _fact_kts(stats, mode, facts.fact_ids[cov])}
        for x, y in (("bcs", "iss"), ("bes", "iss"), ("bcs", "kts_fact_identity"),
                     ("iss", "kts_fact_identity"), ("bes", "kts_fact_identity")):
            ok = np.isfinite(series[x]) & np.isfinite(series[y])
            rho = p = None
            if ok.sum() >= 3:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    res = scipy.stats.spearmanr(series[x][ok], series[y][ok])
                if np.isfinite(res.statistic):
                    rho, p = float(res.statistic), float(res.pvalue)
            rows.append({"coverage_mode": mode, "x": x, "y": y, "n_facts": int(ok.sum()),
                         "spearman": rho, "p_value": p})
    return Table("joint_correlations", "Joint reading (§12): Spearman correlations of per-fact "
                 "figures", cols, rows, note="kts_fact_identity: the fact's KTS-ID top-1 rate "
                 "over window layers, pairs and directions. Undefined (fewer than 3 facts or "
                 "a constant series): empty.")


def readings_table(run: RunData) -> Table:
    """Both readings of README caveat 4 (with and without ``anchor``), points per coverage.

    BCS/BES from ``behavioral_model_summary.json`` (fixed denominator, all facts); ISS and
    KTS from ``kts_model_summary.json`` (``tables.by_reading``). The configured reading (the
    one every other table uses) is marked ``default``.
    """
    cols = ["reading", "default", "families", "coverage_mode", "n_facts", "bcs", "bes", "iss",
            "kts_geo", "kts_id", "kts"]
    internal = {r["reading"]: r for r in
                ((run.kts_summary or {}).get("tables") or {}).get("by_reading") or []}
    beh = (run.behavior_summary or {}).get("readings") or {}
    primary = (run.behavior_summary or {}).get("primary_reading") or next(
        (r for r, v in internal.items() if v.get("default")), None)
    rows = []
    for reading in dict.fromkeys([*internal, *beh]):
        fams = internal.get(reading, {}).get("families") or \
            beh.get(reading, {}).get("families_configured") or []
        for mode in ("complete_family", "full_set"):
            b = ((beh.get(reading) or {}).get(mode) or {}).get("fixed", {}).get("all") or {}
            i = (internal.get(reading) or {}).get(mode) or {}
            if not b and not i:
                continue
            rows.append({"reading": reading, "default": "yes" if reading == primary else "",
                         "families": " ".join(fams), "coverage_mode": mode,
                         "n_facts": b.get("n_facts", i.get("n_facts")), "bcs": b.get("bcs"),
                         "bes": b.get("bes"), "iss": i.get("iss"), "kts_geo": i.get("kts_geo"),
                         "kts_id": i.get("kts_id"), "kts": i.get("kts")})
    return Table("readings", "Both readings: with and without anchor (README caveat 4)", cols,
                 rows, note="Points (no intervals); the other tables use the default reading "
                 "(metrics.yaml: main_families). KTS: full_set scores each pair on D_t ∩ D_t', "
                 "complete_family on D∩.")


def run_tables(run: RunData, stats: RunStatistics, settings: Settings, *, tau_b: float
               ) -> list[Table]:
    """Every table of one run, in report order."""
    return [main_table(run, stats), readings_table(run), real_copy_table(run, stats),
            per_relation_table(run, stats),
            behavior_group_table(run, stats, settings), behavior_breakdown_table(run, stats),
            answer_coverage_table(run), kts_pair_table(run, stats),
            joint_quadrants(run, stats, tau_b=tau_b), joint_correlations(run, stats)]


def leaderboard_table(runs: Sequence[tuple[RunData, RunStatistics]], mode: str) -> Table:
    """One row per model: the headline figures of one coverage mode (fact means)."""
    rows = []
    for run, stats in runs:
        block = stats.document.get("coverage_modes", {}).get(mode, {}).get("subsets", {})
        row: dict[str, Any] = {"model": run.model,
                               "n_facts": (block.get("all") or {}).get("n_facts")}
        for m in HEADLINE:
            _put(row, m, _kts_record(run, stats, mode, m) if m in KTS_METRICS
                 else stats.metric(mode, "all", m))
        rows.append(row)
    return Table(f"leaderboard_{mode}", f"Leaderboard ({mode})", ["model", "n_facts",
                                                                   *HEADLINE], rows, ci=HEADLINE)


# ================================================================================ writers
def fmt(value: Any, digits: int = 3) -> str:
    """Display a cell: floats to ``digits`` decimals, None as an empty cell."""
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.{digits}f}"
    return str(value)


def cell(row: dict[str, Any], col: str, ci: Sequence[str]) -> str:
    """Display a cell with its interval: ``0.812 [0.790, 0.830]``."""
    text = fmt(row.get(col))
    if col in ci and text and row.get(f"{col}_low") is not None:
        text += f" [{fmt(row.get(f'{col}_low'))}, {fmt(row.get(f'{col}_high'))}]"
    return text


def to_csv(table: Table) -> str:
    """CSV text (full precision)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    cols = table.csv_columns()
    w.writerow(cols)
    for r in table.rows:
        w.writerow(["" if r.get(c) is None else r.get(c) for c in cols])
    return buf.getvalue()


def to_markdown(table: Table) -> str:
    """Markdown pipe table with a title and note (3 decimals; ``|`` escaped)."""
    def esc(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")

    lines = [f"### {esc(table.title)}", ""]
    lines.append("| " + " | ".join(esc(label(c)) for c in table.columns) + " |")
    lines.append("|" + "|".join("---" if not table.rows or not isinstance(
        table.rows[0].get(c), int | float) else "---:" for c in table.columns) + "|")
    for r in table.rows:
        lines.append("| " + " | ".join(esc(cell(r, c, table.ci)) for c in table.columns) + " |")
    if table.note:
        lines += ["", esc(table.note)]
    return "\n".join(lines) + "\n"


def write_table(table: Table, folder: Path) -> list[Path]:
    """Write ``<name>.csv`` and ``<name>.md`` under ``folder`` (atomically)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{table.name}.csv", folder / f"{table.name}.md"]
    atomic_write_text(paths[0], to_csv(table))
    atomic_write_text(paths[1], to_markdown(table))
    return paths

