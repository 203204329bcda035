"""The eleven dimensions D1-D11 (spec §1): one pure function each, plus the composites.

Every dimension function has the signature ``dN(pred, gold, cfg, ctx) -> DimensionResult``:
``pred`` is the system's :class:`~fks.evalharness.inputs.CaseRecord`, ``gold`` the
:class:`~fks.evalharness.inputs.GoldRecord` (which carries the harness-issued bucket), ``cfg``
the :class:`~fks.evalharness.config.HarnessConfig` and ``ctx`` the few batch-level quantities a
case cannot compute alone (:class:`BatchContext`).

"Not computed" is always ``value=None`` plus a flag naming the reason (no sentinel values):

* ``dN_not_annotated`` -- the gold row lacks a section the dimension needs;
* ``dN_undefined:<component>`` -- a component is undefined (e.g. no gold numbers for a MAPE);
  the composite is then not computed rather than silently reweighted;
* ``d9_single_bucket_skipped`` (fewer than 2 buckets compared) and
  ``d11_bucket_not_evaluated`` (bucket outside B1-B3), the §8.3 rules;
* ``d7_pool_not_admitted`` -- the batch's D7 pool failed the §1 external-vs-self cross-IAA
  admission (:func:`fks.evalharness.iaa.d7_pool_admission`); the kappa and counts sit in the
  components.

``d10_insufficient_sample`` is not a "not computed" flag: D10 is still scored, but the batch
holds fewer cases than §1 D10's minimum sample (:func:`d10_sample_counts`).

Retired C_kelly (ADR-021): D6 and D11 list ``c_kelly: None`` in their components and carry the
``c_kelly_retired`` flag. Their remaining weights sum to 0.9 and are **not** renormalised unless
``renormalize_retired_weights`` is switched on in ``harness.yaml`` (then divided by 0.9).

Gates and deductions are applied after the composite and the result is clipped to [0, 1]:
D2 -0.1 in N1 buckets when ``regulatory_uncertainty > 0``; D5 -0.1 in D3-axis buckets when
derivatives are flagged anything but not-applicable (the spec: "must be not-applicable");
D5 -0.1 when the case's FP rate exceeds its bucket's configured baseline.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fks.evalharness import gaming
from fks.evalharness.components import (
    confusion_matrix,
    kl_score,
    macro_accuracy,
    mae_score,
    mape_score,
    norm_set,
    penalized_entity_f1,
    per_label_f1,
    rank_correlation,
    rescaled_rank_correlation,
    set_f1,
    set_recall,
    weighted_and_macro_f1,
    weighted_recall,
)
from fks.evalharness.config import HarnessConfig
from fks.evalharness.graph import edge_keys, link_similarity, node_keys
from fks.evalharness.inputs import (
    CROSS_MARKET_EDGE,
    M13_CLOSED_FIELDS,
    M13_OPEN_FIELDS,
    POLICY_FIELDS,
    ApplicabilityFlags,
    BiasLabel,
    CaseRecord,
    CausalGraph,
    GoldRecord,
    PhaseEvidence,
)
from fks.evalharness.schema import D9_SKIPPED_FLAG, D11_BUCKETS, DimensionScore
from fks.evalharness.split import split_hash
from fks.text import normalize

__all__ = [
    "COMPOSITE_WEIGHTS",
    "RETIRED_WEIGHTS",
    "FLAG_C_KELLY_RETIRED",
    "FLAG_D7_POOL",
    "FLAG_D10_SAMPLE",
    "DimensionResult",
    "BatchContext",
    "composite",
    "interval_iou",
    "bimodal_correct",
    "expected_calibration_error",
    "d1_ontology",
    "d2_source_alignment",
    "d3_phase_clocks",
    "d4_scene_links",
    "d5_applicability",
    "d6_bias_uncertainty",
    "d7_s1_coupling",
    "d8_history",
    "d9_cross_market",
    "d6_batch_figures",
    "d10_sample_counts",
    "d10_data_reliability",
    "d11_risk_budget",
    "DIMENSIONS",
]

log = logging.getLogger(__name__)

#: Component weights of each composite (§1 table and the D6 line).
COMPOSITE_WEIGHTS: dict[str, dict[str, float]] = {
    "D1": {"f1_ent": 0.3, "acc_rel": 0.3, "hit_m13": 0.4},
    "D2": {"rho_source": 0.25, "hit_policy": 0.35, "recall_div": 0.25, "f1_dual": 0.15},
    "D3": {"acc_clock": 0.4, "mae_term": 0.3, "recall_contradict": 0.3},
    "D4": {"f1_scene": 0.25, "linksim": 0.30, "acc_form": 0.25, "recall_reverse": 0.20},
    "D5": {"mape_term": 0.3, "tau_factor": 0.2, "acc_appl": 0.4, "recall_pe": 0.1},
    "D6": {
        "f1w_m7a": 0.20,
        "f1m_m7a": 0.10,
        "f1w_m7b": 0.20,
        "f1m_m7b": 0.10,
        "ece_term": 0.10,
        "acc_bimodal": 0.20,
    },
    "D7": {"f1_mode": 0.3, "recall_multi": 0.2, "rho_coupling": 0.2, "hit_backtrig": 0.3},
    "D8": {"acc_select": 0.3, "f1_same_diff": 0.3, "rho_analogue": 0.2, "acc_wrong": 0.2},
    "D9": {"f1_macro_link": 0.3, "f1_diff": 0.3, "acc_mca": 0.25, "acc_spread": 0.15},
    "D10": {"acc_grade": 0.35, "recall_signal": 0.4, "fpr_term": 0.25},
    "D11": {"mape_mrc_term": 0.25, "recall_regime": 0.25, "kl_term": 0.2, "acc_factor": 0.2},
}
#: Terms retired from the composites (ADR-021: C_kelly), with the weight they had.
RETIRED_WEIGHTS: dict[str, dict[str, float]] = {"D6": {"c_kelly": 0.10}, "D11": {"c_kelly": 0.10}}
FLAG_C_KELLY_RETIRED = "c_kelly_retired"
#: §1 D7: the batch's D7 pool failed the external-vs-self cross-IAA admission (D7 is None).
FLAG_D7_POOL = "d7_pool_not_admitted"
#: §1 D10: the scored batch is below the minimum sample (D10 is still scored).
FLAG_D10_SAMPLE = "d10_insufficient_sample"

APPLICABILITY_LEVELS = ("applicable", "partial", "not-applicable")
AXES = ("L", "D", "F", "N", "C", "I")


@dataclass(frozen=True)
class DimensionResult:
    """One dimension of one case: value (None = not computed), components, flags."""

    dimension_id: str
    value: float | None
    components: dict[str, Any] = field(default_factory=dict)
    flags: tuple[str, ...] = ()

    def to_score(self) -> DimensionScore:
        """Convert to a §8.2 :class:`DimensionScore` (aggregation sets percentile, bandwidth)."""
        return DimensionScore(
            dimension_id=self.dimension_id,  # type: ignore[arg-type]
            raw_score=self.value,
            components=self.components,
            gaming_flags=list(self.flags),
        )


@dataclass(frozen=True)
class BatchContext:
    """Batch-level inputs of the per-case formulas.

    Attributes:
        label_weights: D6 frequency weight per normalised bias label (the quarterly table, or
            tiers of the batch's gold frequencies).
        coupling_rho: D7 Spearman rho of ``s1.coupling_strength`` against the external label,
            per bucket (``None`` when fewer than 2 cases or a constant label).
        d7_exceeded_modes: D7 modes whose predicted share exceeds 1.5 x their base rate.
        d7_pool: the D7 pool decision of :func:`fks.evalharness.iaa.d7_pool_admission`;
            ``None`` = not checked (a hand-built context; ``score_batch`` always checks).
        d10_sample: the D10 minimum-sample check of :func:`d10_sample_counts`; ``None`` = not
            checked.
        d6_batch: the batch figures of the §7 D6 defences (:func:`d6_batch_figures`): pooled
            per-label F1^w / F1^m per family and their gap, and the batch ECE; ``None`` = a
            hand-built context (D6 then falls back on the case's own figures).
    """

    label_weights: Mapping[str, float] = field(default_factory=dict)
    coupling_rho: Mapping[str, float | None] = field(default_factory=dict)
    d7_exceeded_modes: frozenset[str] = frozenset()
    d7_pool: Mapping[str, Any] | None = None
    d10_sample: Mapping[str, Any] | None = None
    d6_batch: Mapping[str, Any] | None = None


def d6_batch_figures(
    pairs: Sequence[tuple[CaseRecord, GoldRecord]],
    weights: Mapping[str, float],
    cfg: HarnessConfig,
) -> dict[str, Any]:
    """§7 D6 defences over a batch: pooled per-label F1 and the batch ECE.

    Within one case a label's F1 is 0 or 1, so ``|F1^w - F1^m|`` and ECE over one to three
    confidences say little. Here each label's F1 = ``2 TP / (2 TP + FP + FN)`` is pooled over
    the batch's cases (per family M7a / M7b), giving ``F1^w`` (frequency weights) and ``F1^m``;
    ``gap_exceeded`` when either family's gap exceeds ``d6_weight_gap_threshold``. The ECE is
    over every predicted label with a confidence in the batch (``correct`` = label in gold).
    """
    d = cfg.dimensions
    conf: list[float] = []
    hit: list[bool] = []
    out: dict[str, Any] = {}
    counts: dict[str, dict[str, list[int]]] = {"m7a": {}, "m7b": {}}
    for p, g in pairs:
        gb = g.harness.bias_labels
        if gb is None:
            continue
        pb = p.harness.bias_labels
        for fam in ("m7a", "m7b"):
            labels = getattr(pb, fam) if pb else []
            gold_set = norm_set(getattr(gb, fam))
            pred_set = norm_set(b.label for b in labels)
            for b in labels:
                if b.confidence is not None:
                    conf.append(b.confidence)
                    hit.append(normalize(b.label) in gold_set)
            for lab in pred_set | gold_set:
                tp_fp_fn = counts[fam].setdefault(lab, [0, 0, 0])
                tp_fp_fn[
                    0 if lab in pred_set and lab in gold_set else 1 if lab in pred_set else 2
                ] += 1
    gap = False
    for fam, table in counts.items():
        f1s = {lab: 2 * tp / (2 * tp + fp + fn) for lab, (tp, fp, fn) in table.items()}
        f1w, f1m = weighted_and_macro_f1(f1s, weights)
        out[f"f1w_{fam}"], out[f"f1m_{fam}"] = f1w, f1m
        gap = gap or gaming.weighted_macro_gap(f1w, f1m, threshold=d.d6_weight_gap_threshold)
    out["gap_exceeded"] = gap
    out["ece"] = expected_calibration_error(conf, hit, d.d6_ece_bins) if conf else None
    out["ece_n"] = len(conf)
    out["ece_exceeded"] = gaming.ece_above_threshold(out["ece"], threshold=d.d6_ece_threshold)
    return out


def composite(
    dimension_id: str,
    components: Mapping[str, Any],
    *,
    renormalize_retired: bool = False,
    not_graded: Sequence[str] = (),
) -> tuple[float | None, list[str]]:
    """``sum_k w_k c_k`` over the dimension's formula components (:data:`COMPOSITE_WEIGHTS`).

    With ``renormalize_retired`` the sum is divided by the weight left after the retired terms
    (D6, D11: 0.9). ``not_graded`` names components the gold left unannotated on purpose (an
    optional gold field, e.g. D9's ``spread_direction``): they leave the composite and the other
    weights are rescaled to their original total. Returns ``(value, undefined_components)``;
    ``value`` is ``None`` when any other component is ``None``.
    """
    full = COMPOSITE_WEIGHTS[dimension_id]
    weights = {k: w for k, w in full.items() if k not in not_graded}
    missing = [k for k in weights if components.get(k) is None]
    if missing or not weights:
        return None, missing
    value = sum(w * float(components[k]) for k, w in weights.items())
    value *= sum(full.values()) / sum(weights.values())
    if renormalize_retired and dimension_id in RETIRED_WEIGHTS:
        value /= sum(full.values())
    return value, []


def _finish(
    dim: str,
    components: dict[str, Any],
    flags: list[str],
    cfg: HarnessConfig,
    *,
    penalty: float = 0.0,
    not_graded: Sequence[str] = (),
) -> DimensionResult:
    value, missing = composite(
        dim, components, renormalize_retired=cfg.renormalize_retired_weights, not_graded=not_graded
    )
    if not_graded:
        components["not_graded"] = list(not_graded)
    if dim in RETIRED_WEIGHTS:
        components.update(dict.fromkeys(RETIRED_WEIGHTS[dim]))
        flags.append(FLAG_C_KELLY_RETIRED)
    if value is None:
        flags.extend(f"{dim.lower()}_undefined:{k}" for k in missing)
        return DimensionResult(dim, None, components, tuple(flags))
    if penalty:
        components["penalty"] = penalty
    components["composite_before_penalty"] = value
    return DimensionResult(dim, min(1.0, max(0.0, value - penalty)), components, tuple(flags))


def _not_annotated(dim: str, *extra: str) -> DimensionResult:
    return DimensionResult(dim, None, {}, (*extra, f"{dim.lower()}_not_annotated"))


def _same(a: str | None, b: str | None) -> bool:
    na = normalize(a) if a else None
    nb = normalize(b) if b else None
    return na == nb


def _label_accuracy(pred: Mapping[str, str], gold: Mapping[str, str]) -> float:
    """Share of gold keys whose predicted label matches (vacuous rule for empty gold)."""
    if not gold:
        return 1.0 if not pred else 0.0
    return float(np.mean([_same(pred.get(k), g) for k, g in gold.items()]))


def _clipped_rho(rho: float | None) -> float | None:
    """D7/D8 write rho_s unrescaled; components live in [0, 1], so negative rho scores 0."""
    return None if rho is None else max(0.0, rho)


# ------------------------------------------------------------------------------------ D1
def d1_ontology(
    pred: CaseRecord, gold: GoldRecord, cfg: HarnessConfig, ctx: BatchContext
) -> DimensionResult:
    """D1 ontology identification: ``0.3 F1_ent + 0.3 Acc_rel + 0.4 Hit_M1.3``.

    * ``F1_ent``: node-label F1 with the precision penalty when ``len(pred) > 2 len(gold)``
      (:func:`~fks.evalharness.components.penalized_entity_f1`).
    * ``Acc_rel`` = correct gold edges / gold edges, an edge being correct when the prediction
      has the same ``(label(source), label(target), edge_type)``; cross-market mapping edges
      weigh 1.5.
    * ``Hit_M1.3`` = matching M1.3 fields / graded fields; closed-class fields are graded when
      annotated, open-class ones only with >= 2 experts at kappa >= 0.7.
    """
    g_graph, g_m13 = gold.result.causal_graph, gold.harness.m13_attributes
    if g_graph is None or g_m13 is None:
        return _not_annotated("D1")
    d = cfg.dimensions
    p_graph = pred.result.causal_graph or CausalGraph()
    p_nodes, g_nodes = node_keys(p_graph), node_keys(g_graph)
    ent = penalized_entity_f1(p_nodes, g_nodes, max_ratio=d.d1_exhaustive_ratio)
    lab = {n.id: normalize(n.label) for n in g_graph.nodes}
    gold_edges = {
        (lab[e.source], lab[e.target], normalize(e.edge_type)): (
            d.d1_cross_market_edge_weight if normalize(e.edge_type) == CROSS_MARKET_EDGE else 1.0
        )
        for e in g_graph.edges
    }
    acc_rel = weighted_recall(edge_keys(p_graph), gold_edges)
    open_ok = (
        g_m13.open_fields_n_experts >= d.d1_open_fields_min_experts
        and g_m13.open_fields_kappa is not None
        and g_m13.open_fields_kappa >= d.d1_open_fields_min_kappa
    )
    fields = [f for f in M13_CLOSED_FIELDS if getattr(g_m13, f) is not None]
    if open_ok:
        fields += [f for f in M13_OPEN_FIELDS if getattr(g_m13, f) is not None]
    p_m13 = pred.harness.m13_attributes
    hits = [p_m13 is not None and _same(getattr(p_m13, f), getattr(g_m13, f)) for f in fields]
    flags = []
    if gaming.exhaustive_listing(len(p_nodes), len(g_nodes), max_ratio=d.d1_exhaustive_ratio):
        flags.append(gaming.FLAG_D1_EXHAUSTIVE)
    comps = {
        "f1_ent": ent["f1"],
        "acc_rel": acc_rel,
        "hit_m13": float(np.mean(hits)) if hits else None,
        "precision_ent": ent["precision"],
        "recall_ent": ent["recall"],
        "precision_penalty": ent["penalty"],
        "n_pred_entities": len(p_nodes),
        "n_gold_entities": len(g_nodes),
        "m13_fields_graded": fields,
        "m13_open_fields_counted": open_ok,
    }
    return _finish("D1", comps, flags, cfg)


# ------------------------------------------------------------------------------------ D2
def d2_source_alignment(
    pred: CaseRecord, gold: GoldRecord, cfg: HarnessConfig, ctx: BatchContext
) -> DimensionResult:
    """D2 information-source alignment.

    ``D2 = 0.25 rho_s' + 0.35 Hit_policy + 0.25 Recall_div + 0.15 F1_dual``

    * ``rho_s' = (rho_s + 1) / 2``, Spearman of the source reliability ranking.
    * ``Hit_policy`` = correctly decoded friction-layer fields / 4 (wording shift, same-stage
      spec, timing rarity, counterparty objective; a field both leave empty counts as correct).
    * ``Recall_div`` = homogenised groups identified / true groups.
    * ``F1_dual``: F1 over the (source, axis) pairs marked reliable on the account and channel
      axes.
    * MCA gate: in an N1 bucket, ``regulation_status.regulatory_uncertainty > 0`` costs 0.1
      (M2.4 should be dormant there).
    """
    g_src, g_reg = gold.harness.source_alignment, gold.result.regulation_status
    if g_src is None or g_reg is None:
        return _not_annotated("D2")
    p_src = pred.harness.source_alignment
    p_reg = pred.result.regulation_status
    p_sources = p_src.sources if p_src else []
    rho = rescaled_rank_correlation(
        {s.source_id: s.reliability for s in p_sources},
        {s.source_id: s.reliability for s in g_src.sources},
    )
    p_fl = p_reg.friction_layer if p_reg else None
    hit_policy = sum(
        _same(getattr(p_fl, f) if p_fl else None, getattr(g_reg.friction_layer, f))
        for f in POLICY_FIELDS
    ) / len(POLICY_FIELDS)

    def dual(sources: list[Any]) -> set[tuple[str, str]]:
        out = {(s.source_id, "account") for s in sources if s.account_reliable}
        return out | {(s.source_id, "channel") for s in sources if s.channel_reliable}

    comps = {
        "rho_source": rho,
        "hit_policy": hit_policy,
        "recall_div": set_recall(
            norm_set(p_src.homogeneous_groups if p_src else []), norm_set(g_src.homogeneous_groups)
        ),
        "f1_dual": set_f1(dual(p_sources), dual(g_src.sources)),
    }
    flags, penalty = [], 0.0
    uncertainty = p_reg.regulatory_uncertainty if p_reg else 0.0
    if "N1" in cfg.bucket_levels(gold.bucket_label, "N") and uncertainty > 0:
        penalty = cfg.dimensions.d2_n1_uncertainty_penalty
        flags.append("d2_n1_uncertainty_gate")
    return _finish("D2", comps, flags, cfg, penalty=penalty)


# ------------------------------------------------------------------------------------ D3
def _cells(pe: PhaseEvidence) -> dict[str, float]:
    return {f"{i}|{j}": float(q) for i, row in pe.phase_matrix.items() for j, q in row.items()}


def d3_phase_clocks(
    pred: CaseRecord, gold: GoldRecord, cfg: HarnessConfig, ctx: BatchContext
) -> DimensionResult:
    """D3 cross-clock phase: ``0.4 Acc_clock + 0.3 (1 - MAE/8) + 0.3 Recall_contradict``.

    * ``Acc_clock`` = sum_t 1[p_hat_t = p*_t] / N_clocks over the gold clocks (one sample).
    * ``MAE = mean_{(i,j) in C} |q_hat_ij - q*_ij|`` in whole quarters over the gold cells C; a
      missing cell counts MAE_max = 8; the term ``1 - min(MAE, 8) / 8`` stays in [0, 1].
    * ``Recall_contradict`` = gold contradictions found / gold contradictions.
    * v1 grades M3.t1, M3.t2 and M3.t5 in every case: a gold row lacking one of them is flagged
      ``d3_required_clock_missing:<clock>`` (the score still uses the clocks annotated).
    * The other clocks are graded on a 30 % sample (§1 D3 "其余抽样 30% IAA"; decision: the
      sample is deterministic, ``SHA-256(case_id|clock|d3-iaa) mod 100 < 30``, so reruns and
      the IAA double annotation see the same clocks). ``clocks_graded`` / ``clocks_sampled``
      list them; an unsampled clock counts neither way.
    """
    g = gold.result.phase_evidence
    if g is None:
        return _not_annotated("D3")
    p = pred.result.phase_evidence or PhaseEvidence()
    required = set(cfg.dimensions.d3_required_clocks)
    sampled = sorted(
        c
        for c in g.clocks
        if c not in required
        and split_hash(gold.case_id, c, "d3-iaa") % 100 < cfg.dimensions.d3_sample_percent
    )
    graded = {c: lab for c, lab in g.clocks.items() if c in required or c in sampled}
    comps = {
        "acc_clock": _label_accuracy({c: p.clocks[c] for c in graded if c in p.clocks}, graded),
        "clocks_graded": sorted(graded),
        "clocks_sampled": sampled,
        "mae_term": mae_score(_cells(p), _cells(g), max_error=cfg.dimensions.d3_mae_max_quarters),
        "recall_contradict": set_recall(norm_set(p.contradictions), norm_set(g.contradictions)),
        "n_gold_clocks": len(g.clocks),
    }
    missing = [c for c in cfg.dimensions.d3_required_clocks if c not in g.clocks]
    flags = [f"d3_required_clock_missing:{c}" for c in missing]
    return _finish("D3", comps, flags, cfg)


# ------------------------------------------------------------------------------------ D4
def _edge_forms(graph: CausalGraph) -> dict[tuple[str, str, str], str]:
    lab = {n.id: normalize(n.label) for n in graph.nodes}
    return {
        (lab[e.source], lab[e.target], normalize(e.edge_type)): e.form
        for e in graph.edges
        if e.form is not None
    }


def d4_scene_links(
    pred: CaseRecord, gold: GoldRecord, cfg: HarnessConfig, ctx: BatchContext
) -> DimensionResult:
    """D4 scene hits and transmission links.

    ``D4 = 0.25 F1_scene + 0.30 LinkSim + 0.25 Acc_form + 0.20 Recall_reverse``

    * ``F1_scene``: F1 of the scene labels.
    * ``LinkSim = 0.35 F1_node + 0.35 F1_edge + 0.30 SubIso`` (:mod:`fks.evalharness.graph`).
    * ``Acc_form``: macro accuracy over the gold shared-book forms (``edge.form``) of the gold
      edges, an edge the prediction lacks counting wrong.
    * ``Recall_reverse``: recall of the gold reverse forces and endogeneity loops.
    """
    g = gold.result.causal_graph
    if g is None:
        return _not_annotated("D4")
    p = pred.result.causal_graph or CausalGraph()
    links = link_similarity(
        p, g, g.key_patterns, exact_max_nodes=cfg.dimensions.d4_subiso_exact_max_nodes
    )
    g_forms, p_forms = _edge_forms(g), _edge_forms(p)
    if g_forms:
        acc_form = macro_accuracy(
            list(g_forms.values()), [p_forms.get(k) == f for k, f in g_forms.items()]
        )
    else:
        acc_form = 1.0 if not p_forms else 0.0

    def rev(graph: CausalGraph) -> set[tuple[str, str]]:
        return {("reverse", x) for x in norm_set(graph.reverse_forces)} | {
            ("endogeneity", x) for x in norm_set(graph.endogeneity)
        }

    comps = {
        "f1_scene": set_f1(norm_set(p.scenes), norm_set(g.scenes)),
        "linksim": links.pop("linksim"),
        "acc_form": acc_form,
        "recall_reverse": set_recall(rev(p), rev(g)),
        **links,
    }
    return _finish("D4", comps, [], cfg)


# ------------------------------------------------------------------------------------ D5
def _appl_pairs(
    pred: ApplicabilityFlags | None, gold: ApplicabilityFlags
) -> tuple[list[str], list[str | None]]:
    g_levels, p_levels = [], []
    for fam in ("valuation", "factor", "derivatives"):
        g_entry = getattr(gold, fam)
        if g_entry is None:
            continue
        p_entry = getattr(pred, fam) if pred is not None else None
        g_levels.append(g_entry.level)
        p_levels.append(p_entry.level if p_entry is not None else None)
    return g_levels, p_levels


def _na_term(pred: Any, gold: Any) -> tuple[float | None, str]:
    """D5 numeric term of a gold family marked not-applicable (see :func:`d5_applicability`).

    Returns ``(term, basis)``: basis ``"values"`` means the caller grades the numbers.
    """
    if gold is None or gold.level != "not-applicable" or gold.values:
        return None, "values"
    abstained = pred is None or (pred.level == "not-applicable" and not pred.values)
    return float(abstained), "not_applicable"


def d5_applicability(
    pred: CaseRecord, gold: GoldRecord, cfg: HarnessConfig, ctx: BatchContext
) -> DimensionResult:
    """D5 financial laws and their non-applicability.

    ``D5 = 0.3 (1 - MAPE) + 0.2 tau' + 0.4 Acc_appl + 0.1 Recall_PE``

    * ``1 - min(MAPE, 1)`` over the gold valuation values.
    * ``tau' = (tau + 1) / 2``, Kendall tau-b of the factor scores.
    * ``Acc_appl``: three-state macro accuracy of the valuation/factor/derivatives levels; the
      3 x 4 confusion matrix (last column: no prediction) and the not-applicable FP rate are
      always reported (§7).
    * ``Recall_PE``: recall of the gold PE items.
    * Gates: in a D3-axis bucket a derivatives level other than not-applicable costs 0.1; an FP
      rate above the bucket's baseline costs 0.1 (``d5_fp_rate_baseline``: v1 default 0.20 in
      every bucket, so the §7 "FP > 桶基线扣分" defence is on by default).
    * **Not-applicable half** (decision, issue 22): when the gold marks the valuation (or
      factor) family ``not-applicable`` it has no numbers, so MAPE (or tau) is undefined. The
      term then grades the abstention itself: 1 when the prediction also marks the family
      not-applicable (or leaves it out) and reports no numbers, 0 when it claims the family
      applies (a level other than not-applicable, or numbers). ``mape_basis`` / ``tau_basis``
      say which reading was used (``"values"`` or ``"not_applicable"``). A gold family marked
      applicable/partial without numbers is still an annotation gap (undefined component).
    """
    g = gold.result.applicability_flags
    if g is None:
        return _not_annotated("D5")
    d = cfg.dimensions
    p = pred.result.applicability_flags
    g_levels, p_levels = _appl_pairs(p, g)
    fp_rate = gaming.na_false_positive_rate(g_levels, p_levels)
    mape_term, mape_basis = _na_term(p.valuation if p else None, g.valuation)
    if mape_basis == "values":
        mape_term = mape_score(
            p.valuation.values if p and p.valuation else {},
            g.valuation.values if g.valuation else {},
        )
    tau_term, tau_basis = _na_term(p.factor if p else None, g.factor)
    if tau_basis == "values":
        tau_term = rescaled_rank_correlation(
            p.factor.values if p and p.factor else {},
            g.factor.values if g.factor else {},
            method="kendall",
        )
    comps: dict[str, Any] = {
        "mape_term": mape_term,
        "tau_factor": tau_term,
        "mape_basis": mape_basis,
        "tau_basis": tau_basis,
        "acc_appl": macro_accuracy(
            g_levels, [a == b for a, b in zip(g_levels, p_levels, strict=True)]
        ),
        "recall_pe": set_recall(norm_set(p.pe_items if p else []), norm_set(g.pe_items)),
        "confusion_matrix": confusion_matrix(g_levels, p_levels, classes=APPLICABILITY_LEVELS),
        "confusion_labels": [*APPLICABILITY_LEVELS, "missing"],
        "fp_rate": fp_rate,
    }
    flags, penalty = [], 0.0
    if gaming.all_not_applicable(g_levels, p_levels):
        flags.append(gaming.FLAG_D5_ALL_NA)
    deriv = p.derivatives.level if p and p.derivatives else None
    if "D3" in cfg.bucket_levels(gold.bucket_label, "D") and deriv not in (None, "not-applicable"):
        penalty += d.d5_derivatives_gate_penalty
        flags.append("d5_derivatives_gate")
    baseline = d.d5_fp_rate_baseline.get(gold.bucket_label)  # type: ignore[call-overload]
    if baseline is not None and fp_rate is not None and fp_rate > baseline:
        penalty += d.d5_fp_penalty
        flags.append(gaming.FLAG_D5_FP_BASELINE)
    return _finish("D5", comps, flags, cfg, penalty=penalty)


# ------------------------------------------------------------------------------------ D6
def interval_iou(intervals: list[tuple[float, float]]) -> float:
    """Overlap rate of expert intervals: ``|intersection| / |hull|`` (IoU; §10 (5) choice).

    Identical point intervals overlap fully (1.0).

    >>> interval_iou([(0.0, 1.0), (0.1, 1.0)])
    0.9
    """
    lo, hi = max(a for a, _ in intervals), min(b for _, b in intervals)
    hull = max(b for _, b in intervals) - min(a for a, _ in intervals)
    if hull == 0:
        return 1.0
    return max(0.0, hi - lo) / hull


def bimodal_correct(
    pred: CaseRecord, intervals: list[tuple[float, float]], *, tolerance: float
) -> bool:
    """D6 bimodal form: check the posterior stays bimodal (not collapsed to a mean).

    True when both modes are present, ``|w_a + w_b - 1| <= tolerance`` and
    ``|value_a - value_b|`` lies inside the experts' common interval.
    """
    post = pred.result.posterior
    if post is None or post.mode_a is None or post.mode_b is None:
        return False
    if abs(post.mode_a.weight + post.mode_b.weight - 1.0) > tolerance:
        return False
    lo, hi = max(a for a, _ in intervals), min(b for _, b in intervals)
    return lo <= abs(post.mode_a.value - post.mode_b.value) <= hi


def expected_calibration_error(confidence: list[float], correct: list[bool], bins: int) -> float:
    """Equal-width ECE from the shared calibration core (``fks.metrics.calibration``)."""
    from fks.metrics.calibration import calibration_summary

    summary = calibration_summary(
        np.asarray(confidence, dtype=float), np.asarray(correct, dtype=float), bins=bins
    )
    return float(summary["ece"])


def _bias_f1(
    pred: list[BiasLabel], gold: list[str], weights: Mapping[str, float]
) -> tuple[float, float]:
    f1s = per_label_f1(norm_set(b.label for b in pred), norm_set(gold))
    return weighted_and_macro_f1(f1s, weights)


def d6_bias_uncertainty(
    pred: CaseRecord, gold: GoldRecord, cfg: HarnessConfig, ctx: BatchContext
) -> DimensionResult:
    """D6 bias identification and uncertainty.

    ``D6 = 0.20 F1w_M7a + 0.10 F1m_M7a + 0.20 F1w_M7b + 0.10 F1m_M7b + 0.10 (1 - ECE/0.5)
    + 0.20 Acc_bimodal`` (+ 0.10 C_kelly, retired).

    * ``F1^w = sum_l w_l F1_l / sum_l w_l`` with frequency weights 2.0 / 1.0 / 0.5 (rare,
      middle, frequent third), ``F1^m = mean_l F1_l``; per case ``F1_l`` is 1 for a label in
      both sets and 0 for a label in one only.
    * ``ECE = sum_b |B_b|/N |acc(B_b) - conf(B_b)|`` over the predicted labels' confidences
      (10 equal-width bins; correct = label in gold); the term is ``1 - min(ECE/0.5, 1)``. With
      no confidence reported the term is 0 (no evidence, no credit) and ECE is ``None``.
    * ``Acc_bimodal`` = 1 when the posterior keeps two modes whose weights sum to 1 +- 0.05 and
      whose distance lies in the experts' common interval; it is undefined unless >= 2 expert
      intervals overlap with IoU >= 0.8.
    * Flags: ``|F1^w - F1^m| > 0.15`` (either family) and ``ECE > 0.15``.
    * **Batch defences** (§7, issue 22; when ``ctx.d6_batch`` is set, as ``score_batch`` always
      does): the gap flag reads the batch's pooled per-label F1 (:func:`d6_batch_figures`);
      the ECE term uses the batch ECE, and ``ECE_batch > 0.15`` is a strong constraint: every
      case reporting confidences gets ``ece_term = 0``, a ``d6_ece_penalty`` (0.1) deduction
      and the flag. ``components["ece"]`` stays the case's own ECE (``CaseScore.ece``).
    """
    g_bias, g_post = gold.harness.bias_labels, gold.result.posterior
    if g_bias is None or g_post is None:
        return _not_annotated("D6")
    d = cfg.dimensions
    p_bias = pred.harness.bias_labels
    p7a, p7b = (p_bias.m7a, p_bias.m7b) if p_bias else ([], [])
    f1w_a, f1m_a = _bias_f1(p7a, g_bias.m7a, ctx.label_weights)
    f1w_b, f1m_b = _bias_f1(p7b, g_bias.m7b, ctx.label_weights)
    conf, hit = [], []
    for labels, gold_set in ((p7a, norm_set(g_bias.m7a)), (p7b, norm_set(g_bias.m7b))):
        for b in labels:
            if b.confidence is not None:
                conf.append(b.confidence)
                hit.append(normalize(b.label) in gold_set)
    flags = []
    ece = expected_calibration_error(conf, hit, d.d6_ece_bins) if conf else None
    if ece is None:
        flags.append("d6_no_confidence")
    batch = ctx.d6_batch
    ece_used = batch["ece"] if batch is not None and ece is not None else ece
    ece_term = 0.0 if ece_used is None else 1.0 - min(ece_used / d.d6_ece_scale, 1.0)
    penalty = 0.0
    if batch is not None and ece is not None and batch["ece_exceeded"]:
        ece_term, penalty = 0.0, d.d6_ece_penalty  # §7 strong constraint, batch-level
    intervals = g_post.expert_intervals
    qualified = (
        len(intervals) >= d.d6_interval_min_experts
        and interval_iou(intervals) >= d.d6_interval_min_overlap
    )
    if not qualified:
        flags.append("d6_interval_unqualified")
    acc_bimodal = (
        float(bimodal_correct(pred, intervals, tolerance=d.d6_bimodal_weight_tolerance))
        if qualified
        else None
    )
    gap = d.d6_weight_gap_threshold
    if batch is not None:
        gap_hit = bool(batch["gap_exceeded"])
    else:
        gap_hit = gaming.weighted_macro_gap(
            f1w_a, f1m_a, threshold=gap
        ) or gaming.weighted_macro_gap(f1w_b, f1m_b, threshold=gap)
    if gap_hit:
        flags.append(gaming.FLAG_D6_GAP)
    if ece is not None and gaming.ece_above_threshold(ece_used, threshold=d.d6_ece_threshold):
        flags.append(gaming.FLAG_D6_ECE)
    comps = {
        "f1w_m7a": f1w_a,
        "f1m_m7a": f1m_a,
        "f1w_m7b": f1w_b,
        "f1m_m7b": f1m_b,
        "ece_term": ece_term,
        "acc_bimodal": acc_bimodal,
        "ece": ece,
        "ece_batch": batch["ece"] if batch is not None else None,
        "ece_bins": d.d6_ece_bins,
        "ece_n": len(conf),
        "interval_iou": interval_iou(intervals),
    }
    return _finish("D6", comps, flags, cfg, penalty=penalty)


# ------------------------------------------------------------------------------------ D7
def d7_s1_coupling(
    pred: CaseRecord, gold: GoldRecord, cfg: HarnessConfig, ctx: BatchContext
) -> DimensionResult:
    """D7 S1 narrative-number consistency.

    ``D7 = 0.3 F1_mode + 0.2 Recall_multi + 0.2 rho_s + 0.3 Hit_backtrig``

    * ``F1_mode``: F1 of the predicted against the gold set of the five S1 modes.
    * ``Recall_multi``: share of the gold modes found (all co-occurring modes).
    * ``rho_s``: Spearman of ``s1.coupling_strength`` against the external label over the
      case's bucket in the scored split (a batch quantity, :class:`BatchContext`; issue 28:
      never another split's predictions), clipped at 0.
    * ``Hit_backtrig`` = correct back-triggers of M5/M6/M7 / back-triggers due.
    * Flag ``d7_base_rate_exceeded:<mode>`` when the case predicts a mode whose batch share
      exceeds 1.5 x its base rate.
    * When the batch's D7 pool was refused (``ctx.d7_pool["admitted"]`` false) D7 is ``None``
      with ``d7_pool_not_admitted`` (base-rate flags kept as evidence); the components carry
      the pool kappa, threshold and counts.
    """
    g = gold.result.s1
    if g is None:
        return _not_annotated("D7")
    p = pred.result.s1
    p_modes, g_modes = set(p.s1_mode if p else []), set(g.s1_mode)
    flags = [f"{gaming.FLAG_D7_BASE_RATE}:{m}" for m in sorted(p_modes & ctx.d7_exceeded_modes)]
    if ctx.d7_pool is not None and not ctx.d7_pool["admitted"]:
        pool = {f"pool_{k}": v for k, v in ctx.d7_pool.items() if k != "admitted"}
        return DimensionResult("D7", None, pool, (FLAG_D7_POOL, *flags))
    comps = {
        "f1_mode": set_f1(p_modes, g_modes),
        "recall_multi": set_recall(p_modes, g_modes),
        "rho_coupling": _clipped_rho(ctx.coupling_rho.get(gold.bucket_label)),
        "hit_backtrig": set_recall(set(p.backtrigger if p else []), set(g.backtrigger)),
        "rho_coupling_raw": ctx.coupling_rho.get(gold.bucket_label),
        "external_sources": [s.name for s in g.external_sources],
    }
    return _finish("D7", comps, flags, cfg)


# ------------------------------------------------------------------------------------ D8
def d8_history(
    pred: CaseRecord, gold: GoldRecord, cfg: HarnessConfig, ctx: BatchContext
) -> DimensionResult:
    """D8 historical comparability.

    ``D8 = 0.3 Acc_select + 0.3 F1_same_diff + 0.2 rho_s + 0.2 Acc_wrong``

    * ``Acc_select`` = 1 when the first selected analogue is an acceptable one.
    * ``F1_same_diff``: F1 over the same points and the different points (tagged).
    * ``rho_s``: Spearman of the analogue similarity scores (over the gold candidates), clipped
      at 0.
    * ``Acc_wrong``: share of the gold misleading analogues that are rejected and not selected.
    * ``comparison_type`` (cross-period same-bucket / cross-bucket same-period) is kept so the
      two sample types are reported apart.
    """
    g = gold.harness.history_comparison
    if g is None:
        return _not_annotated("D8")
    p = pred.harness.history_comparison
    selected = [normalize(s) for s in (p.selected if p else [])]
    acceptable = norm_set(g.acceptable)

    def points(sim: list[str], diff: list[str]) -> set[tuple[str, str]]:
        return {("same", x) for x in norm_set(sim)} | {("diff", x) for x in norm_set(diff)}

    rejected = norm_set(p.rejected if p else []) - set(selected)
    comps = {
        "acc_select": 1.0 if selected and selected[0] in acceptable else 0.0,
        "f1_same_diff": set_f1(
            points(p.similarities, p.differences) if p else set(),
            points(g.similarities, g.differences),
        ),
        "rho_analogue": _clipped_rho(
            rank_correlation(p.analogue_scores if p else {}, g.analogue_scores)
        ),
        "acc_wrong": set_recall(rejected, norm_set(g.misleading)),
        "comparison_type": g.comparison_type,
    }
    return _finish("D8", comps, [], cfg)


# ------------------------------------------------------------------------------------ D9
def _link_sets(links: list[Any]) -> dict[str, set[tuple[str, str]]]:
    out: dict[str, set[tuple[str, str]]] = {}
    for link in links:
        out.setdefault(normalize(link.channel), set()).add(
            (normalize(link.source_market), normalize(link.target_market))
        )
    return out


def d9_cross_market(
    pred: CaseRecord, gold: GoldRecord, cfg: HarnessConfig, ctx: BatchContext
) -> DimensionResult:
    """D9 cross-market reasoning, only across >= 2 MCA buckets.

    ``D9 = 0.3 F1^macro_link + 0.3 F1_diff + 0.25 Acc_mca + 0.15 Acc_spread``

    * The compared buckets are the case's bucket plus the gold ``compared_buckets``; fewer than
      2 distinct buckets (or no D9 gold) gives ``None`` and ``d9_single_bucket_skipped`` (§8.3).
    * ``F1^macro_link``: mean over transmission channels of the F1 of (source, target) market
      links.
    * ``F1_diff``: F1 of the stated differences.
    * ``Acc_mca``: accuracy over the six MCA axes of "the compared buckets differ on this axis"
      (the truth is derived from the bucket axes in ``harness.yaml``).
    * ``Acc_spread`` = 1 when the spread direction matches. ``spread_direction`` is optional in
      the gold: when a genuine cross-bucket case omits it, D9 is still scored over the other
      three components, rescaled to the full weight (``0.85 -> 1``), and flagged
      ``d9_spread_not_annotated`` (decision: an optional gold field the annotator left out is
      not graded, rather than voiding the whole dimension).
    """
    g = gold.harness.cross_market
    buckets = sorted({gold.bucket_label, *(g.compared_buckets if g else [])})
    if g is None or len(buckets) < 2:
        return DimensionResult("D9", None, {"compared_buckets": buckets}, (D9_SKIPPED_FLAG,))
    p = pred.harness.cross_market
    p_links, g_links = _link_sets(p.links if p else []), _link_sets(g.links)
    channels = sorted(set(p_links) | set(g_links))
    f1_link = (
        float(np.mean([set_f1(p_links.get(c, set()), g_links.get(c, set())) for c in channels]))
        if channels
        else 1.0
    )
    differing = {
        ax for ax in AXES if len({frozenset(cfg.bucket_levels(b, ax)) for b in buckets}) > 1
    }
    p_axes = set(p.mca_axis_differences if p else [])
    comps = {
        "f1_macro_link": f1_link,
        "f1_diff": set_f1(norm_set(p.differences if p else []), norm_set(g.differences)),
        "acc_mca": float(np.mean([(ax in p_axes) == (ax in differing) for ax in AXES])),
        "acc_spread": (
            None
            if g.spread_direction is None
            else float(p is not None and p.spread_direction == g.spread_direction)
        ),
        "compared_buckets": buckets,
        "differing_axes": sorted(differing),
    }
    if g.spread_direction is None:
        return _finish("D9", comps, ["d9_spread_not_annotated"], cfg, not_graded=["acc_spread"])
    return _finish("D9", comps, [], cfg)


# ----------------------------------------------------------------------------------- D10
def d10_sample_counts(golds: Sequence[GoldRecord], cfg: HarnessConfig) -> dict[str, Any]:
    """§1 D10 minimum sample: >= 10 cases per signal class, >= 5 post-fraud, >= 15 healthy.

    Counts over the gold rows given (``score_batch`` passes every gold row: the §1 minimum is a
    property of the evaluation pool, not of one split) that annotate
    ``risk_signals``: per configured signal class, the rows whose gold signals hold it; the
    ``post_fraud`` rows; the ``healthy_control`` rows. Thresholds come from ``harness.yaml``.

    Returns:
        ``{"insufficient", "signal_counts", "post_fraud", "healthy_controls", "thresholds",
        "short"}``; ``short`` lists what falls below its minimum (``"signal:<class>"``,
        ``"post_fraud"``, ``"healthy_controls"``).
    """
    d = cfg.dimensions
    rows = [g.harness.risk_signals for g in golds if g.harness.risk_signals is not None]
    signals = [norm_set(r.signals) for r in rows]
    counts = {c: sum(normalize(c) in s for s in signals) for c in d.d10_signal_classes}
    post_fraud = sum(r.post_fraud for r in rows)
    healthy = sum(r.healthy_control for r in rows)
    short = [f"signal:{c}" for c, n in counts.items() if n < d.d10_min_cases_per_signal]
    if post_fraud < d.d10_min_post_fraud:
        short.append("post_fraud")
    if healthy < d.d10_min_healthy_controls:
        short.append("healthy_controls")
    return {
        "insufficient": bool(short),
        "signal_counts": counts,
        "post_fraud": post_fraud,
        "healthy_controls": healthy,
        "thresholds": {
            "per_signal": d.d10_min_cases_per_signal,
            "post_fraud": d.d10_min_post_fraud,
            "healthy_controls": d.d10_min_healthy_controls,
        },
        "short": short,
    }


def d10_required(cfg: HarnessConfig, bucket: str) -> bool:
    """Whether ``bucket`` sits on every position of ``d10_required_axes`` (I3+C3: forced)."""
    req = cfg.dimensions.d10_required_axes
    return bool(req) and all(lvl in cfg.bucket_levels(bucket, ax) for ax, lvl in req.items())


def d10_data_reliability(
    pred: CaseRecord, gold: GoldRecord, cfg: HarnessConfig, ctx: BatchContext
) -> DimensionResult:
    """D10 data reliability: ``0.35 Acc_grade + 0.4 Recall_signal + 0.25 (1 - FPR_healthy)``.

    * ``Acc_grade`` = 1 when the reliability grade matches.
    * ``Recall_signal``: recall of the gold risk-signal classes.
    * ``FPR_healthy = |pred - gold| / |classes - gold|``: signals raised on healthy classes
      (over-pessimism counts against, §7); a signal outside the five classes is a false
      positive too; capped at 1.
    * In I3+C3 buckets D10 is mandatory: a missing gold adds ``d10_required_missing``.
    * ``d10_insufficient_sample`` when the batch is below the §1 minimum sample
      (``ctx.d10_sample``); the score itself is kept.
    """
    g = gold.harness.risk_signals
    if g is None:
        extra = ("d10_required_missing",) if d10_required(cfg, gold.bucket_label) else ()
        return _not_annotated("D10", *extra)
    p = pred.harness.risk_signals
    p_sig, g_sig = norm_set(p.signals if p else []), norm_set(g.signals)
    classes = norm_set(cfg.dimensions.d10_signal_classes)
    false_pos, negatives = p_sig - g_sig, classes - g_sig
    if negatives:
        fpr = min(1.0, len(false_pos) / len(negatives))
    else:
        fpr = 1.0 if false_pos else 0.0
    comps = {
        "acc_grade": (
            None
            if g.reliability_grade is None
            else float(p is not None and _same(p.reliability_grade, g.reliability_grade))
        ),
        "recall_signal": set_recall(p_sig, g_sig),
        "fpr_term": 1.0 - fpr,
        "fpr_healthy": fpr,
        "healthy_control": g.healthy_control,
        "post_fraud": g.post_fraud,
    }
    short = ctx.d10_sample is not None and ctx.d10_sample["insufficient"]
    return _finish("D10", comps, [FLAG_D10_SAMPLE] if short else [], cfg)


# ----------------------------------------------------------------------------------- D11
def d11_risk_budget(
    pred: CaseRecord, gold: GoldRecord, cfg: HarnessConfig, ctx: BatchContext
) -> DimensionResult:
    """D11 risk budget and portfolio layer (v1: only B1-B3).

    ``D11 = 0.25 (1 - MAPE_MRC) + 0.25 Recall_regime + 0.2 / (1 + D_KL) + 0.2 Acc_factor``
    (+ 0.1 C_kelly, retired).

    * ``1 - min(MAPE_MRC, 1)`` over the gold marginal risk contributions.
    * ``Recall_regime``: recall of the gold correlation regimes and unbalanced-loop warnings.
    * ``D_KL(p_hat || p*) = sum_i p_hat_i log(p_hat_i / p*_i)`` of the normalised risk budgets,
      term ``1 / (1 + D_KL)``.
    * ``Acc_factor`` = 1 when the dominant factor matches.
    """
    if gold.bucket_label not in D11_BUCKETS:
        return DimensionResult("D11", None, {}, ("d11_bucket_not_evaluated",))
    g = gold.harness.risk_budget
    if g is None:
        return _not_annotated("D11")
    p = pred.harness.risk_budget
    p_graph = pred.result.causal_graph or CausalGraph()
    g_graph = gold.result.causal_graph or CausalGraph()

    def regimes(graph: CausalGraph) -> set[tuple[str, str]]:
        return {("regime", x) for x in norm_set(graph.correlation_regime)} | {
            ("loop", x) for x in norm_set(graph.unbalanced_loop_warnings)
        }

    comps = {
        "mape_mrc_term": mape_score(p.mrc if p else {}, g.mrc),
        "recall_regime": set_recall(regimes(p_graph), regimes(g_graph)),
        "kl_term": kl_score(p.budget if p else {}, g.budget),
        "acc_factor": (
            None
            if g.dominant_factor is None
            else float(p is not None and _same(p.dominant_factor, g.dominant_factor))
        ),
    }
    return _finish("D11", comps, [], cfg)


DimensionFn = Callable[[CaseRecord, GoldRecord, HarnessConfig, BatchContext], DimensionResult]

#: The registry, in order D1..D11.
DIMENSIONS: dict[str, DimensionFn] = {
    "D1": d1_ontology,
    "D2": d2_source_alignment,
    "D3": d3_phase_clocks,
    "D4": d4_scene_links,
    "D5": d5_applicability,
    "D6": d6_bias_uncertainty,
    "D7": d7_s1_coupling,
    "D8": d8_history,
    "D9": d9_cross_market,
    "D10": d10_data_reliability,
    "D11": d11_risk_budget,
}
