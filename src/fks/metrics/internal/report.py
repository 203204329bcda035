"""Aggregates per-layer ISS/KTS into the §17.2/§17.3 files and summaries, and writes them.

Across layers (spec §7.10, §11.2): per fact, ``iss`` is the window mean, ``iss_peak`` the
window maximum, ``iss_late`` the mean over window layers with depth >= 0.8; model figures are
means over the facts of a selection whose ISS is defined (the others are counted, never filled
with zeros), with a relation-macro version beside them. KTS: per pair and layer the
relation-macro values; per layer the mean over the reading's pairs (every pair weighs the
same, §11.1); the window mean over layers. Raw ISS is what is averaged; ``iss_clip`` is
``clip(iss, -1, 1)``, for display only.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from fks.io import atomic_write_json, atomic_write_jsonl, sha256_file
from fks.metrics.internal.coverage import families_absent
from fks.metrics.internal.scores import kts_macro
from fks.metrics.internal.space import WHITENING_RULE

if TYPE_CHECKING:
    from fks.metrics.internal.context import Context, LayerScores, Selection

__all__ = ["assemble_outputs"]

_KTS_KEYS = ("kts_geo_raw_spearman", "kts_geo", "kts_id", "kts", "kts_id_unclipped", "top1",
             "top5", "mrr", "chance")

log = logging.getLogger(__name__)


def _f(x: Any) -> float | None:
    """Convert to a JSON float (None for NaN/None)."""
    if x is None:
        return None
    x = float(x)
    return None if np.isnan(x) else x


def _mean(values: Any) -> float | None:
    vals = [v for v in values if v is not None and not np.isnan(v)]
    return float(np.mean(vals)) if vals else None


# ================================================================================== ISS
def _stack(ctx: Context, layers: Sequence[LayerScores], reading: str) -> dict[str, np.ndarray]:
    """Per reading: ``(F, L_w)`` arrays over the window and the per-fact window aggregates."""
    get = {k: np.stack([ls.iss[reading][k] for ls in layers], axis=1)
           for k in ("iss", "s_positive", "s_background")}
    late = [i for i, ls in enumerate(layers) if ls.layer in ctx.late]
    iss = get["iss"]  # NaN rows where the fact's ISS is undefined (at every layer alike)
    agg = {
        "iss": iss.mean(axis=1),
        "iss_peak": iss.max(axis=1),
        "iss_late": iss[:, late].mean(axis=1) if late else np.full(len(iss), np.nan),
        "s_positive": get["s_positive"].mean(axis=1),
        "s_background": get["s_background"].mean(axis=1),
    }
    defined = layers[0].iss[reading]["defined"]
    agg["iss_clip"] = np.clip(agg["iss"], -1.0, 1.0)
    return {**agg, "layers": iss, "defined": defined,
            "status": layers[0].iss[reading]["status"],
            "n_pairs": layers[0].iss[reading]["n_pairs"]}


def _iss_block(ctx: Context, st: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, Any]:
    """ISS figures of one selection of facts (means over facts with a defined ISS)."""
    keep = mask & st["defined"]
    rel = ctx.design.fact_relation
    per_rel = {}
    for r, name in enumerate(ctx.design.relations):
        k = keep & (rel == r)
        if k.any():
            per_rel[name] = {"n_facts": int(k.sum()),
                             **{key: _f(st[key][k].mean()) for key in ("iss", "iss_peak")},
                             "iss_late": _mean(st["iss_late"][k].tolist())}
    return {
        "n_facts": int(mask.sum()), "n_defined": int(keep.sum()),
        "n_undefined": int((mask & ~st["defined"]).sum()),
        **{key: _mean(st[key][keep].tolist()) for key in
           ("iss", "iss_peak", "iss_late", "iss_clip", "s_positive", "s_background")},
        "per_layer": {str(layer): _mean(st["layers"][keep, i].tolist())
                      for i, layer in enumerate(ctx.window)},
        "relation_macro": {"n_relations": len(per_rel),
                           **{key: _mean([v[key] for v in per_rel.values()])
                              for key in ("iss", "iss_peak", "iss_late")}},
        "per_relation": per_rel,
    }


def _fact_rows(ctx: Context, stacks: dict[str, dict[str, np.ndarray]], model: str,
               unwhitened: np.ndarray | None = None, undefined: str | None = None
               ) -> list[dict[str, Any]]:
    """``iss_per_fact.jsonl``: §17.2 fields (primary reading) plus coverage and other readings.

    ``unwhitened``: the per-fact unwhitened ISS (window mean, headline reading);
    ``undefined``: why the whitened ISS is withheld (design-determined), its fields then null.
    """
    d, names = ctx.design, list(stacks)
    st = stacks[names[0]]
    complete = next((s.mask for s in ctx.selections if s.reading == names[0]
                     and s.coverage == "complete_family" and s.subset == "all"), None)

    def fields(s: dict[str, np.ndarray], i: int) -> dict[str, Any]:
        if undefined:
            return {"iss": None, "iss_peak": None, "iss_late": None, "iss_clip": None,
                    "s_positive": None, "s_background": None, "status": "design_determined",
                    "n_pairs": int(s["n_pairs"][i])}
        return {"iss": _f(s["iss"][i]), "iss_peak": _f(s["iss_peak"][i]),
                "iss_late": _f(s["iss_late"][i]), "iss_clip": _f(s["iss_clip"][i]),
                "s_positive": _f(s["s_positive"][i]), "s_background": _f(s["s_background"][i]),
                "status": str(s["status"][i]), "n_pairs": int(s["n_pairs"][i])}

    rows = []
    for i, fid in enumerate(d.fact_ids.tolist()):
        row = {"model": model, "fact_id": fid, "relation": d.relations[d.fact_relation[i]],
               **fields(st, i),
               "iss_unwhitened": None if unwhitened is None else _f(unwhitened[i]),
               "layers_used": list(ctx.window), "late_layers": list(ctx.late),
               "transport": ctx.transport, "reading": names[0],
               "valid_families": [f for t, f in enumerate(d.families) if d.has[i, t]],
               "complete_family": None if complete is None else bool(complete[i]),
               "answer_in_subject_surface": bool(d.copy[i]),
               "n_negatives": int(ctx.neg.counts[i]),
               "other_readings": {n: fields(stacks[n], i) for n in names[1:]}}
        if ctx.groups is not None:
            row["behavior_group"] = ctx.groups[i] or None
        rows.append(row)
    return rows


def _layer_fields(r: dict[str, np.ndarray], i: int) -> dict[str, Any]:
    """ISS fields of fact ``i`` in one reading's per-layer arrays."""
    v = _f(r["iss"][i])
    return {"s_positive": _f(r["s_positive"][i]), "s_background": _f(r["s_background"][i]),
            "iss": v, "iss_clip": None if v is None else float(np.clip(v, -1.0, 1.0)),
            "n_pairs": int(r["n_pairs"][i]), "n_background_pairs": int(r["n_background_pairs"][i]),
            "status": str(r["status"][i])}


def _fact_layer_rows(ctx: Context, stacks: dict[str, dict[str, np.ndarray]], model: str,
                     layers: Sequence[LayerScores]) -> Iterator[dict[str, Any]]:
    """Yield the ``iss_per_fact_layer.jsonl`` rows (F x L_w of them)."""
    d, names = ctx.design, list(stacks)
    n_layers = ctx.store.n_layers
    for ls in layers:
        per = {n: ls.iss[n] for n in names}
        for i, fid in enumerate(d.fact_ids.tolist()):
            yield {"model": model, "fact_id": fid, "relation": d.relations[d.fact_relation[i]],
                   "layer": ls.layer, "depth": ls.layer / max(n_layers - 1, 1),
                   "transport": ctx.transport, "reading": names[0],
                   **_layer_fields(per[names[0]], i),
                   "other_readings": {n: _layer_fields(per[n], i) for n in names[1:]}}


# ================================================================================== KTS
def _pair_name(ctx: Context, p: int) -> str:
    i, j = ctx.pairs[p]
    return f"{ctx.design.families[i]}__{ctx.design.families[j]}"


def _kts_block(ctx: Context, sel: Selection, macros: dict[Any, list[dict[str, Any]]]
               ) -> dict[str, Any]:
    """KTS figures of one selection: per pair (window means, per layer), per layer, overall."""
    from fks.metrics.internal.context import mask_key

    key = mask_key(sel.mask)
    d = ctx.design
    pair_ids = np.flatnonzero(ctx.reading_pairs[sel.reading]).tolist()
    family_pairs = {}
    for p in pair_ids:
        i, j = ctx.pairs[p]
        shared = sel.mask & d.has[:, i] & d.has[:, j]
        per_layer = macros[(p, key)]
        family_pairs[_pair_name(ctx, p)] = {
            "families": [d.families[i], d.families[j]],
            "shared_facts": int(shared.sum()),
            "fact_set_sha256": hashlib.sha256(
                "\n".join(d.fact_ids[shared].tolist()).encode()).hexdigest(),
            "n_relations": per_layer[0]["n_relations"],
            # relations whose distances are constant in a family: Spearman undefined (left
            # out of KTS-Geo); the most over the window layers
            "n_relations_geo_constant": max(mm["n_relations_geo_constant"] for mm in per_layer),
            **{k: _mean([mm[k] for mm in per_layer]) for k in _KTS_KEYS},
            "per_layer": {str(layer): {**{k: per_layer[li][k] for k in _KTS_KEYS},
                                       "n_relations_geo_constant":
                                           per_layer[li]["n_relations_geo_constant"]}
                          for li, layer in enumerate(ctx.window)},
        }
    per_layer = {}
    for li, layer in enumerate(ctx.window):
        vals = [macros[(p, key)][li] for p in pair_ids]
        per_layer[str(layer)] = {k: _mean([v[k] for v in vals]) for k in _KTS_KEYS}
        per_layer[str(layer)]["n_pairs_defined"] = sum(v["kts"] is not None for v in vals)
    return {
        "n_facts": int(sel.mask.sum()), "n_pairs": len(pair_ids),
        "n_relations_geo_constant": sum(v["n_relations_geo_constant"]
                                        for v in family_pairs.values()),
        **{k: _mean([pl[k] for pl in per_layer.values()]) for k in _KTS_KEYS},
        "per_layer": per_layer, "family_pairs": family_pairs,
    }


def _kts_rows(ctx: Context, layers: Sequence[LayerScores], model: str
              ) -> list[dict[str, Any]]:
    """``kts_per_pair_layer.jsonl``: one row per (layer, selection, pair)."""
    from fks.metrics.internal.context import mask_key

    rows = []
    eps = ctx.configs.metrics.eps
    for ls in layers:
        for sel in ctx.selections:
            key = mask_key(sel.mask)
            for p in np.flatnonzero(ctx.reading_pairs[sel.reading]).tolist():
                i, j = ctx.pairs[p]
                per_rel = ls.kts[(p, key)]
                rows.append({
                    "model": model, "transport": ctx.transport, "layer": ls.layer,
                    "depth": ls.layer / max(ctx.store.n_layers - 1, 1),
                    "selection": sel.name, "reading": sel.reading, "coverage": sel.coverage,
                    "subset": sel.subset, "pair": _pair_name(ctx, p),
                    "shared_facts": int((sel.mask & ctx.design.has[:, i]
                                         & ctx.design.has[:, j]).sum()),
                    **kts_macro(per_rel, eps), "per_relation": per_rel,
                })
    return rows


# ================================================================================ tables
#: how each coverage mode's KTS fact sets are defined (labels of the tables and the report)
COVERAGE_LABELS = {
    "full_set": "each pair on its shared facts D_t ∩ D_t' (spec §8.2; the headline KTS)",
    "complete_family": "complete-family D∩: facts having every family of the reading",
}


def kts_headline_selection(ctx: Context) -> str:
    """Name the headline KTS selection: the configured reading, pair-shared facts, all."""
    reading = ctx.selections[0].reading
    name = f"{reading}/full_set/all"
    return name if any(s.name == name for s in ctx.selections) else ctx.selections[0].name


def _tables(ctx: Context, iss_blocks: dict[str, Any], kts_blocks: dict[str, Any]
            ) -> dict[str, Any]:
    """§13.1 (both readings), §13.2 (by behaviour group) and §13.3 (by pair, both readings)."""
    by_pair = [{"reading": sel.reading, "pair": name, "coverage": sel.coverage,
                "coverage_label": COVERAGE_LABELS.get(sel.coverage, sel.coverage),
                "shared_facts": v["shared_facts"],
                "kts_geo": v["kts_geo"], "kts_geo_raw_spearman": v["kts_geo_raw_spearman"],
                "kts_id": v["kts_id"], "kts": v["kts"],
                "n_relations_geo_constant": v["n_relations_geo_constant"]}
               for sel in ctx.selections if sel.subset == "all"
               for name, v in kts_blocks[sel.name]["family_pairs"].items()]
    by_reading = []
    for reading in ctx.readings:
        row: dict[str, Any] = {"reading": reading, "families": list(ctx.readings[reading]),
                               "default": reading == ctx.selections[0].reading}
        for cov in ctx.configs.metrics.coverage_modes:
            name = f"{reading}/{cov}/all"
            if name in iss_blocks:
                row[cov] = {"n_facts": iss_blocks[name]["n_facts"],
                            "iss": iss_blocks[name]["iss"],
                            **{k: kts_blocks[name][k] for k in ("kts_geo", "kts_id", "kts")}}
        by_reading.append(row)
    by_group = None
    if ctx.groups is not None:
        by_group = [{"behavior_group": sel.subset, "coverage": sel.coverage,
                     "facts": iss_blocks[sel.name]["n_facts"],
                     "iss": iss_blocks[sel.name]["iss"],
                     **{k: kts_blocks[sel.name][k] for k in ("kts_geo", "kts_id", "kts")}}
                    for sel in ctx.selections if sel.name.split("/")[-1].startswith("group:")]
    return {"by_reading": by_reading, "by_behavior_group": by_group, "by_pair": by_pair,
            "by_behavior_group_note": None if by_group is not None else
            "behavioral_per_fact.jsonl absent when the internal metrics ran"}


# ================================================================================= write
def _common(ctx: Context, model: str) -> dict[str, Any]:
    m = ctx.configs.metrics
    return {
        "model": model, "transport": ctx.transport,
        "n_layers": ctx.store.n_layers, "d_model": ctx.store.d_model,
        "layer_window_min_frac": m.layer_window_min_frac, "window_layers": list(ctx.window),
        "late_layers": list(ctx.late), "main_families": list(m.main_families),
        "readings": {r: list(f) for r, f in ctx.readings.items()},
        "coverage_modes": list(m.coverage_modes),
        "headline": {"selection": ctx.selections[0].name, "reading": ctx.selections[0].reading,
                     "coverage": ctx.selections[0].coverage, "subset": "all"},
        "families_absent": families_absent(ctx.design.families, m.main_families),
        "coverage_labels": {c: COVERAGE_LABELS.get(c, c) for c in m.coverage_modes},
        "whitening": {**m.whitening.model_dump(mode="json"),
                      **({"numerical_rank_rule": WHITENING_RULE}
                         if m.whitening.method == "pca" else {})},
        "benchmark": {"path": str(ctx.bench.root), "checksum": ctx.bench.checksum()},
        "reference_pool": None if ctx.reference is None else ctx.reference.info,
        "whitening_fitted_on": "reference pool" if ctx.reference is not None else
        "the run's own main queries",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


UNWHITENED_RULE = ("the same transported, residualised states (fitted as the headline), "
                   "L2-normalised without whitening; ISS = window mean per fact, then the "
                   "headline facts' mean; KTS = window mean of the headline pair average")


def _unwhitened_summary(ctx: Context, layers: Sequence[LayerScores]) -> dict[str, Any]:
    """Summarise the unwhitened figures beside the headline (issue 27), ISS with interval."""
    from fks.metrics.internal.sanity import SanityTolerances, difference_interval

    got = [ls for ls in layers if ls.unwhitened is not None]
    out: dict[str, Any] = {"iss": None, "iss_interval": None, "iss_per_layer": {}, "per_fact": None,
                           "kts": None, "kts_id": None, "kts_geo_raw_spearman": None,
                           "kts_per_layer": {}, "rule": UNWHITENED_RULE}
    if not got:
        return out
    per_fact = np.stack([ls.unwhitened["per_fact_iss"] for ls in got], axis=1).mean(axis=1)
    out["per_fact"] = per_fact
    ci = difference_interval(per_fact, ctx.design.fact_relation,
                             SanityTolerances.from_config(ctx.configs.metrics))
    out.update(iss=ci["mean"], iss_interval={k: ci[k] for k in ("low", "high", "confidence",
                                                                   "n_facts", "n_relations")})
    out["iss_per_layer"] = {str(ls.layer): ls.unwhitened["iss"] for ls in got}
    out["kts_per_layer"] = {str(ls.layer): ls.unwhitened.get("kts") for ls in got}
    for key in ("kts", "kts_id", "kts_geo_raw_spearman"):
        vals = [ls.unwhitened.get(key) for ls in got if ls.unwhitened.get(key) is not None]
        out[key] = float(np.mean(vals)) if vals else None
    return out


def assemble_outputs(ctx: Context, layers: Sequence[LayerScores], sanity: dict[str, Any],
                     *, seconds: float) -> dict[str, Any]:
    """Aggregate, write every output file under ``ctx.out_dir`` and record the stage."""
    from fks.generate.manifest import update_run_manifest

    out, model, m = ctx.out_dir, ctx.store.model, ctx.configs.metrics
    stacks = {r: _stack(ctx, layers, r) for r in ctx.readings}
    eps = m.eps
    keys = {(p, k) for ls in layers for (p, k) in ls.kts}
    macros = {pk: [kts_macro(ls.kts[pk], eps) for ls in layers] for pk in keys}
    iss_blocks = {s.name: _iss_block(ctx, stacks[s.reading], s.mask) for s in ctx.selections}
    kts_blocks = {s.name: _kts_block(ctx, s, macros) for s in ctx.selections}
    common = _common(ctx, model)
    head = ctx.selections[0].name
    kts_head = kts_headline_selection(ctx)

    unwhitened = _unwhitened_summary(ctx, layers)
    determined = [ls.layer for ls in layers if ls.whitening.get("design_determined")]
    undefined = None if not determined else (
        f"design-determined whitening at window layer(s) {determined}: PCA keeps every "
        "dimension the residualised states span, so the whitened cosines are a function of "
        "which queries share a fact, relation and family, not of the model (too few main "
        "queries for min(pca_max_dim, d) components and no reference pool; see "
        "fks.metrics.internal.reference)")
    if undefined:
        log.warning("ISS/KTS headline withheld: %s", undefined)
    head_iss = {k: iss_blocks[head][k] for k in ("iss", "iss_peak", "iss_late", "iss_clip",
                                                 "n_facts", "n_defined")}
    if undefined:
        head_iss.update(iss=None, iss_peak=None, iss_late=None, iss_clip=None)
    iss_summary = {
        **common,
        **head_iss,
        "iss_undefined_reason": undefined,
        "unwhitened": {"iss": unwhitened["iss"], "iss_interval": unwhitened["iss_interval"],
                       "per_layer": unwhitened["iss_per_layer"], "rule": unwhitened["rule"]},
        "negatives": ctx.neg_info,
        "whitening_per_layer": {str(ls.layer): ls.whitening for ls in layers},
        "seconds_per_layer": {str(ls.layer): ls.seconds for ls in layers},
        "selections": iss_blocks,
        "sanity_checks": sanity.get("summary"),
        "seconds": round(seconds, 3),
    }
    head_kts = {k: kts_blocks[kts_head][k] for k in ("kts_geo", "kts_id", "kts",
                                                     "kts_geo_raw_spearman", "top1", "top5",
                                                     "mrr", "n_relations_geo_constant")}
    if undefined:
        head_kts.update(kts_geo=None, kts_id=None, kts=None, kts_geo_raw_spearman=None)
    kts_summary = {
        **common,
        **head_kts,
        "kts_undefined_reason": undefined,
        "kts_id_candidates": "the reference pool's facts of the fact's relation having both "
                             "families (issue 27)" if ctx.reference is not None else
                             "the run's facts of the fact's relation in the selection "
                             "having both families (spec §10)",
        "unwhitened": {"kts": unwhitened["kts"], "kts_id": unwhitened["kts_id"],
                       "kts_geo_raw_spearman": unwhitened["kts_geo_raw_spearman"],
                       "per_layer": unwhitened["kts_per_layer"], "rule": unwhitened["rule"]},
        "kts_headline": {"selection": kts_head,
                         "fact_sets": COVERAGE_LABELS.get(kts_head.split("/")[1], kts_head)},
        "family_pairs": kts_blocks[kts_head]["family_pairs"],
        "per_layer": kts_blocks[kts_head]["per_layer"],
        "kts_geo_min_facts": m.kts_geo_min_facts,
        "selections": kts_blocks,
        "tables": _tables(ctx, iss_blocks, kts_blocks),
        "sanity_checks": sanity.get("summary"),
    }
    atomic_write_jsonl(out / "iss_per_fact_layer.jsonl", _fact_layer_rows(ctx, stacks, model,
                                                                          layers))
    atomic_write_jsonl(out / "iss_per_fact.jsonl",
                       _fact_rows(ctx, stacks, model, unwhitened["per_fact"], undefined))
    atomic_write_json(out / "iss_model_summary.json", iss_summary)
    atomic_write_jsonl(out / "kts_per_pair_layer.jsonl", _kts_rows(ctx, layers, model))
    atomic_write_json(out / "kts_model_summary.json", kts_summary)
    atomic_write_json(out / "sanity_checks.json", {"model": model, **sanity})
    _write_centroid_index(ctx, layers)
    names = ["iss_per_fact_layer.jsonl", "iss_per_fact.jsonl", "iss_model_summary.json",
             "kts_per_pair_layer.jsonl", "kts_model_summary.json", "sanity_checks.json",
             "negatives.json"]
    if ctx.out_dir == ctx.run_dir / "metrics":
        update_run_manifest(ctx.run_dir, stage="metrics_internal", stage_info={
            "outputs": {n: sha256_file(out / n) for n in names}, "transport": ctx.transport,
            "window_layers": list(ctx.window), "sanity_all_pass":
            (sanity.get("summary") or {}).get("all_pass"), "seconds": round(seconds, 3),
            "finished_at": common["created_at"]})
    return {"iss": iss_summary, "kts": kts_summary, "sanity": sanity}


def _write_centroid_index(ctx: Context, layers: Sequence[LayerScores]) -> None:
    """``hidden_family_centroids/index.jsonl`` (row -> fact, family) and ``meta.json``."""
    d = ctx.design
    folder = ctx.out_dir / "hidden_family_centroids"
    cells = np.argwhere(d.has)
    atomic_write_jsonl(folder / "index.jsonl", (
        {"row": k, "fact_id": str(d.fact_ids[f]), "relation": d.relations[d.fact_relation[f]],
         "condition_family": d.families[t], "n_queries": int(d.counts[f, t])}
        for k, (f, t) in enumerate(cells.tolist())))
    atomic_write_json(folder / "meta.json", {
        "model": ctx.store.model, "transport": ctx.transport, "dtype": "float16",
        "layers": [ls.layer for ls in layers], "families": list(d.families),
        "n_rows": int(len(cells)), "k_per_layer": {str(ls.layer): ls.whitening["k"]
                                                    for ls in layers},
        "space": "unit family centroids v_{f,t} after transport, residualisation, whitening "
                 "(spec §7.3-7.6); row order = index.jsonl",
        "identity": None if ctx.reference is None else {
            "files": "identity_{layer:03d}.npy", "shape": "(facts, pairs, 2)",
            "fact_ids": [str(f) for f in d.fact_ids],
            "pairs": [f"{d.families[i]}__{d.families[j]}" for i, j in ctx.pairs],
            "rule": "[..., 0]: the fact's symmetric top-1 rate among the reference pool's "
                    "facts of its relation having both families; [..., 1]: its chance "
                    "1/candidates (0: the fact lacks a family of the pair)"},
    })
