"""D1-D11 on hand-computed examples (the arithmetic is written out in each test)."""

from __future__ import annotations

import math

import pytest
from harness_examples import EXTERNAL_SOURCE, full_case, full_gold, records

from fks.evalharness.dimensions import (
    DIMENSIONS,
    FLAG_C_KELLY_RETIRED,
    BatchContext,
    composite,
    d1_ontology,
    d2_source_alignment,
    d3_phase_clocks,
    d4_scene_links,
    d5_applicability,
    d6_bias_uncertainty,
    d7_s1_coupling,
    d8_history,
    d9_cross_market,
    d10_data_reliability,
    d11_risk_budget,
)
from fks.evalharness.inputs import CaseRecord, GoldRecord


def case(result=None, harness=None) -> CaseRecord:
    return CaseRecord.model_validate(
        {"case_id": "c", "result": result or {}, "harness": harness or {}}
    )


def gold(bucket="B1", result=None, harness=None) -> GoldRecord:
    return GoldRecord.model_validate(
        {"case_id": "c", "bucket_label": bucket, "result": result or {}, "harness": harness or {}}
    )


def nodes(*labels):
    return [{"id": lab, "label": lab.upper()} for lab in labels]


def edge(s, t, kind="causal", form=None):
    e = {"source": s, "target": t, "edge_type": kind}
    return e | ({"form": form} if form else {})


def with_cfg(cfg, **dims):
    return cfg.model_copy(update={"dimensions": cfg.dimensions.model_copy(update=dims)})


# ----------------------------------------------------------------------------------- D1
def test_d1_hand_example(cfg, ctx):
    # gold nodes {A, B}; pred lists 5 nodes > 2 x 2 -> exhaustive listing.
    # F1_ent: P = 2/5 = 0.4, decayed by 2*2/5 = 0.8 -> 0.32; R = 1; F1 = 0.64 / 1.32 = 0.484848
    # Acc_rel: gold A->B causal (w 1) and B->A cross-market (w 1.5); pred has A->B: 1/2.5 = 0.4
    # Hit_M1.3: open fields need kappa >= 0.7 (0.6 here) -> closed only; 2 of 3 match = 0.666667
    # D1 = 0.3*0.484848 + 0.3*0.4 + 0.4*0.666667 = 0.532121
    p = case(
        {"causal_graph": {"nodes": nodes("a", "b", "c", "d", "e"), "edges": [edge("a", "b")]}},
        {"m13_attributes": {"holder_structure": "State-Owned ", "real_economy_node": "insurer",
                            "data_availability_grade": "A", "business_model": "lending"}},
    )
    g = gold(
        result={"causal_graph": {
            "nodes": nodes("a", "b"),
            "edges": [edge("a", "b"), edge("b", "a", "cross-market-mapping")]}},
        harness={"m13_attributes": {"holder_structure": "state-owned", "real_economy_node": "bank",
                                    "data_availability_grade": "A", "business_model": "lending",
                                    "open_fields_n_experts": 2, "open_fields_kappa": 0.6}},
    )
    r = d1_ontology(p, g, cfg, ctx)
    assert r.components["f1_ent"] == pytest.approx(0.64 / 1.32)
    assert r.components["acc_rel"] == pytest.approx(0.4)
    assert r.components["hit_m13"] == pytest.approx(2 / 3)
    assert r.value == pytest.approx(0.3 * 0.64 / 1.32 + 0.3 * 0.4 + 0.4 * 2 / 3)
    assert "d1_exhaustive_listing" in r.flags
    # with kappa 0.8 the open field business_model counts too: 3 of 4
    g.harness.m13_attributes.open_fields_kappa = 0.8
    assert d1_ontology(p, g, cfg, ctx).components["hit_m13"] == pytest.approx(0.75)


# ----------------------------------------------------------------------------------- D2
def _d2_pair(bucket, uncertainty):
    p = case(
        {"regulation_status": {"friction_layer": {"wording_shift": "Hawkish",
                                                  "same_stage_spec": "Y"},
                               "regulatory_uncertainty": uncertainty}},
        {"source_alignment": {
            "sources": [{"source_id": "s1", "reliability": 0.9, "account_reliable": True,
                         "channel_reliable": False},
                        {"source_id": "s2", "reliability": 0.1},
                        {"source_id": "s3", "reliability": 0.5, "channel_reliable": True}],
            "homogeneous_groups": ["g1", "g3"]}},
    )
    g = gold(
        bucket,
        result={"regulation_status": {"friction_layer": {"wording_shift": "hawkish",
                                                         "same_stage_spec": "X",
                                                         "timing_rarity": "rare"}}},
        harness={"source_alignment": {
            "sources": [{"source_id": "s1", "reliability": 0.9, "account_reliable": True,
                         "channel_reliable": True},
                        {"source_id": "s2", "reliability": 0.5, "account_reliable": True},
                        {"source_id": "s3", "reliability": 0.1}],
            "homogeneous_groups": ["g1", "g2"]}},
    )
    return p, g


def test_d2_hand_example(cfg, ctx):
    # rho: pred ranks (s1, s2, s3) = (3, 1, 2), gold (3, 2, 1); sum d^2 = 2;
    #   rho = 1 - 6*2 / (3*8) = 0.5 -> rho' = 0.75
    # Hit_policy: wording match, same_stage miss, timing miss, counterparty None=None -> 2/4
    # Recall_div: {g1} of {g1, g2} = 0.5
    # F1_dual: gold {s1.acc, s1.ch, s2.acc}, pred {s1.acc, s3.ch}: P 1/2, R 1/3 -> F1 0.4
    # D2 = 0.25*0.75 + 0.35*0.5 + 0.25*0.5 + 0.15*0.4 = 0.5475
    p, g = _d2_pair("B2", 0.3)  # B2 is N2: no gate
    r = d2_source_alignment(p, g, cfg, ctx)
    assert r.components["rho_source"] == pytest.approx(0.75)
    assert r.components["hit_policy"] == 0.5
    assert r.components["recall_div"] == 0.5
    assert r.components["f1_dual"] == pytest.approx(0.4)
    assert r.value == pytest.approx(0.5475)
    assert not r.flags
    # B1 is an N1 bucket: regulatory_uncertainty > 0 costs 0.1 -> 0.4475
    p, g = _d2_pair("B1", 0.3)
    r = d2_source_alignment(p, g, cfg, ctx)
    assert r.value == pytest.approx(0.4475)
    assert "d2_n1_uncertainty_gate" in r.flags
    p, g = _d2_pair("B1", 0.0)
    assert d2_source_alignment(p, g, cfg, ctx).value == pytest.approx(0.5475)


# ----------------------------------------------------------------------------------- D3
def test_d3_hand_example(cfg, ctx):
    # Acc_clock: t1 right, t2 wrong, t5 missing -> 1/3
    # MAE: cell t1|t2 error |5-2| = 3, cell t1|t5 missing -> 8; MAE 5.5; term 1 - 5.5/8 = 0.3125
    # Recall_contradict: 1 of 2
    # D3 = 0.4/3 + 0.3*0.3125 + 0.3*0.5 = 0.377083
    p = case({"phase_evidence": {"clocks": {"M3.t1": "expansion", "M3.t2": "early"},
                                 "phase_matrix": {"M3.t1": {"M3.t2": 5}},
                                 "contradictions": ["c1"]}})
    g = gold(result={"phase_evidence": {
        "clocks": {"M3.t1": "expansion", "M3.t2": "late", "M3.t5": "early"},
        "phase_matrix": {"M3.t1": {"M3.t2": 2, "M3.t5": -1}},
        "contradictions": ["c1", "c2"]}})
    r = d3_phase_clocks(p, g, cfg, ctx)
    assert r.components["acc_clock"] == pytest.approx(1 / 3)
    assert r.components["mae_term"] == pytest.approx(0.3125)
    assert r.value == pytest.approx(0.4 / 3 + 0.3 * 0.3125 + 0.3 * 0.5)
    assert not r.flags  # the three v1 clocks are annotated
    # an error beyond 8 quarters is clipped: the term never goes negative
    p.result.phase_evidence.phase_matrix["M3.t1"]["M3.t2"] = 40
    assert d3_phase_clocks(p, g, cfg, ctx).components["mae_term"] == 0.0
    # a gold row without M3.t5 is flagged (annotation gap); the score uses what is annotated
    del g.result.phase_evidence.clocks["M3.t5"]
    assert "d3_required_clock_missing:M3.t5" in d3_phase_clocks(p, g, cfg, ctx).flags
    # no gold cells: MAE undefined -> D3 not computed, flagged (no sentinel)
    g.result.phase_evidence.phase_matrix = {}
    r = d3_phase_clocks(p, g, cfg, ctx)
    assert r.value is None and "d3_undefined:mae_term" in r.flags


# ----------------------------------------------------------------------------------- D4
def _d4_pair():
    p = case({"causal_graph": {
        "nodes": nodes("l1", "l2", "l3", "x"),
        "edges": [edge("l1", "l2", form="policy-credit"), edge("l3", "l2")],
        "scenes": ["s1"], "reverse_forces": ["r1"]}})
    g = gold(result={"causal_graph": {
        "nodes": nodes("l1", "l2", "l3"),
        "edges": [edge("l1", "l2", form="policy-credit"), edge("l2", "l3", form="acute-liquidity")],
        "scenes": ["s1", "s2"], "reverse_forces": ["r1"], "endogeneity": ["e1"],
        "key_patterns": [{"name": "chain", "nodes": nodes("l1", "l2", "l3"),
                          "edges": [edge("l1", "l2"), edge("l2", "l3")]}]}})
    return p, g


def test_d4_hand_example(cfg, ctx):
    # F1_scene: P 1, R 1/2 -> 2/3
    # F1_node: pred {L1, L2, L3, X} vs {L1, L2, L3}: P 3/4, R 1 -> 6/7
    # F1_edge: pred {L1->L2, L3->L2}, gold {L1->L2, L2->L3}: 1 shared -> 0.5
    # SubIso: chain L1->L2->L3 absent (pred reverses L2->L3) -> 0
    # LinkSim = 0.35*6/7 + 0.35*0.5 + 0.30*0 = 0.475
    # Acc_form: policy-credit right, acute-liquidity edge missing -> macro (1 + 0)/2 = 0.5
    # Recall_reverse: {reverse r1, endogeneity e1}, found r1 -> 0.5
    # D4 = 0.25*2/3 + 0.30*0.475 + 0.25*0.5 + 0.20*0.5 = 0.534167
    p, g = _d4_pair()
    r = d4_scene_links(p, g, cfg, ctx)
    assert r.components["f1_node"] == pytest.approx(6 / 7)
    assert r.components["f1_edge"] == pytest.approx(0.5)
    assert r.components["subiso"] == 0.0
    assert r.components["subiso_method"] == "networkx_monomorphism"
    assert r.components["linksim"] == pytest.approx(0.475)
    assert r.components["acc_form"] == pytest.approx(0.5)
    assert r.value == pytest.approx(0.25 * 2 / 3 + 0.30 * 0.475 + 0.25 * 0.5 + 0.20 * 0.5)


def test_d4_hungarian_fallback(cfg, ctx):
    # Forcing the fallback (graph larger than exact_max_nodes = 1): the Hungarian assignment maps
    # L1, L2, L3 onto themselves; the pattern edge L2->L3 is missing -> cost 1 of |V|+|E| = 5,
    # similarity 0.8 (a lower bound; the exact test says 0).
    p, g = _d4_pair()
    r = d4_scene_links(p, g, with_cfg(cfg, d4_subiso_exact_max_nodes=1), ctx)
    assert r.components["subiso_method"] == "hungarian_ged_bound"
    assert r.components["subiso"] == pytest.approx(0.8)
    # with the chain present, exact and fallback agree on 1
    p.result.causal_graph.edges.append(p.result.causal_graph.edges[0].model_copy(
        update={"source": "l2", "target": "l3", "form": None}))
    assert d4_scene_links(p, g, cfg, ctx).components["subiso"] == 1.0
    fb = d4_scene_links(p, g, with_cfg(cfg, d4_subiso_exact_max_nodes=1), ctx)
    assert fb.components["subiso"] == 1.0


# ----------------------------------------------------------------------------------- D5
def _d5_pair(bucket="B1", deriv="not-applicable"):
    p = case({"applicability_flags": {
        "valuation": {"level": "not-applicable", "values": {"pe": 12.0}},
        "factor": {"level": "partial", "values": {"v": 3, "m": 1, "s": 2}},
        "derivatives": {"level": deriv}, "pe_items": ["a"]}})
    g = gold(bucket, result={"applicability_flags": {
        "valuation": {"level": "applicable", "values": {"pe": 10.0, "pb": 2.0}},
        "factor": {"level": "partial", "values": {"v": 3, "m": 2, "s": 1}},
        "derivatives": {"level": "not-applicable"}, "pe_items": ["a", "b"]}})
    return p, g


def test_d5_hand_example(cfg, ctx):
    # MAPE: pe |12-10|/10 = 0.2, pb missing = 1 -> 0.6; term 0.4
    # Kendall: gold v>m>s, pred v>s>m: 2 concordant, 1 discordant -> tau 1/3, tau' = 2/3
    # Acc_appl: applicable->NA wrong, partial right, NA right -> macro (0+1+1)/3 = 2/3
    # Recall_PE: 1/2
    # D5 = 0.3*0.4 + 0.2*2/3 + 0.4*2/3 + 0.1*0.5 = 0.57
    p, g = _d5_pair()
    # the formula alone: the default FP baseline (0.2) is switched off here (see test_d5_gates)
    r = d5_applicability(p, g, with_cfg(cfg, d5_fp_rate_baseline={}), ctx)
    assert r.components["mape_term"] == pytest.approx(0.4)
    assert r.components["tau_factor"] == pytest.approx(2 / 3)
    assert r.components["acc_appl"] == pytest.approx(2 / 3)
    assert r.value == pytest.approx(0.57)
    # confusion matrix rows gold (applicable, partial, NA), columns + "missing"; FP rate of NA
    assert r.components["confusion_matrix"] == [[0, 0, 1, 0], [0, 1, 0, 0], [0, 0, 1, 0]]
    assert r.components["fp_rate"] == 0.5
    assert not r.flags


def test_d5_gates(cfg, ctx):
    # B7 sits on D2-D3: derivatives flagged applicable costs 0.1 -> 0.57 - 0.1
    # (the derivatives level is also wrong now: Acc_appl = (0 + 1 + 0)/3)
    p, g = _d5_pair("B7", "applicable")
    r = d5_applicability(p, g, with_cfg(cfg, d5_fp_rate_baseline={}), ctx)
    expected = 0.3 * 0.4 + 0.2 * 2 / 3 + 0.4 * 1 / 3 + 0.1 * 0.5 - 0.1
    assert r.value == pytest.approx(expected)
    assert "d5_derivatives_gate" in r.flags
    # the same answer in B1 (D1 axis) is not gated
    p, g = _d5_pair("B1", "applicable")
    assert "d5_derivatives_gate" not in d5_applicability(p, g, cfg, ctx).flags
    # FP rate 0.5 above a bucket baseline of 0.3 costs another 0.1
    p, g = _d5_pair()
    r = d5_applicability(p, g, with_cfg(cfg, d5_fp_rate_baseline={"B1": 0.3}), ctx)
    assert r.value == pytest.approx(0.47)
    assert "d5_fp_above_bucket_baseline" in r.flags
    # the packaged default baseline (0.2 in every bucket) charges the same answer
    r = d5_applicability(p, g, cfg, ctx)
    assert r.value == pytest.approx(0.47)


# ----------------------------------------------------------------------------------- D6
def _d6_pair():
    p = case(
        {"posterior": {"mode_a": {"value": 0.02, "weight": 0.6},
                       "mode_b": {"value": 0.08, "weight": 0.42}}},
        {"bias_labels": {"m7a": [{"label": "overconfidence", "confidence": 0.95},
                                 {"label": "herding", "confidence": 0.75}],
                         "m7b": [{"label": "loss aversion", "confidence": 0.65}]}},
    )
    g = gold(result={"posterior": {"expert_intervals": [[0.04, 0.08], [0.045, 0.08]]}},
             harness={"bias_labels": {"m7a": ["anchoring", "overconfidence"],
                                      "m7b": ["loss aversion"]}})
    return p, g


def test_d6_hand_example(cfg):
    ctx = BatchContext(label_weights={"anchoring": 2.0, "herding": 0.5, "overconfidence": 1.0})
    # M7a labels {anchoring (w 2), overconfidence (w 1), herding (w 0.5)}: F1 = 0, 1, 0
    #   F1w = 1 / 3.5 = 0.285714, F1m = 1/3
    # M7b {loss aversion} found: F1w = F1m = 1
    # ECE, 10 equal-width bins, one prediction per bin: (0.95, right), (0.75, wrong),
    #   (0.65, right): (0.05 + 0.75 + 0.35) / 3 = 0.383333; term 1 - 0.383333/0.5 = 0.233333
    # Bimodal: IoU of [0.04,0.08], [0.045,0.08] = 0.035/0.04 = 0.875 >= 0.8; common interval
    #   [0.045, 0.08] holds |0.02-0.08| = 0.06; weights 1.02 within 0.05 -> 1
    # D6 = 0.2*0.285714 + 0.1/3 + 0.2 + 0.1 + 0.1*0.233333 + 0.2 = 0.613810 (C_kelly retired,
    #   no renormalisation: at most 0.9)
    p, g = _d6_pair()
    r = d6_bias_uncertainty(p, g, cfg, ctx)
    assert r.components["f1w_m7a"] == pytest.approx(1 / 3.5)
    assert r.components["f1m_m7a"] == pytest.approx(1 / 3)
    assert r.components["ece"] == pytest.approx(1.15 / 3)
    assert r.components["acc_bimodal"] == 1.0
    expected = 0.2 / 3.5 + 0.1 / 3 + 0.2 + 0.1 + 0.1 * (1 - (1.15 / 3) / 0.5) + 0.2
    assert r.value == pytest.approx(expected)
    assert r.components["c_kelly"] is None
    assert FLAG_C_KELLY_RETIRED in r.flags and "d6_ece_above_threshold" in r.flags
    # the renormalisation switch divides by the 0.9 left
    renorm = cfg.model_copy(update={"renormalize_retired_weights": True})
    assert d6_bias_uncertainty(p, g, renorm, ctx).value == pytest.approx(expected / 0.9)


def test_d6_bimodal_rules(cfg):
    ctx = BatchContext()
    p, g = _d6_pair()
    p.result.posterior.mode_b.weight = 0.2  # weights sum 0.8: collapsed -> 0
    assert d6_bias_uncertainty(p, g, cfg, ctx).components["acc_bimodal"] == 0.0
    p, g = _d6_pair()
    g.result.posterior.expert_intervals = [(0.0, 0.1)]  # one expert only: undefined
    r = d6_bias_uncertainty(p, g, cfg, ctx)
    assert r.value is None
    assert {"d6_interval_unqualified", "d6_undefined:acc_bimodal"} <= set(r.flags)
    # no confidence reported: ECE None, calibration term 0 (no evidence, no credit)
    p, g = _d6_pair()
    for lab in p.harness.bias_labels.m7a + p.harness.bias_labels.m7b:
        lab.confidence = None
    r = d6_bias_uncertainty(p, g, cfg, ctx)
    assert r.components["ece"] is None and r.components["ece_term"] == 0.0
    assert "d6_no_confidence" in r.flags


# ----------------------------------------------------------------------------------- D7
def test_d7_hand_example(cfg):
    # F1_mode: pred {a, b} vs gold {a, c}: P 1/2, R 1/2 -> 0.5; Recall_multi 0.5
    # rho (bucket-level) 0.6; Hit_backtrig: M5 of {M5, M6} -> 0.5
    # D7 = 0.3*0.5 + 0.2*0.5 + 0.2*0.6 + 0.3*0.5 = 0.52
    p = case({"s1": {"s1_mode": ["a-far-extrapolation", "b-source-missing"],
                     "backtrigger": ["M5"]}})
    g = gold(result={"s1": {"s1_mode": ["a-far-extrapolation", "c-narrative-data-detachment"],
                            "backtrigger": ["M5", "M6"], "external_sources": [
                                {**EXTERNAL_SOURCE, "name": "Marks"}]}})
    r = d7_s1_coupling(p, g, cfg, BatchContext(coupling_rho={"B1": 0.6}))
    assert r.value == pytest.approx(0.52)
    # a negative rank correlation scores 0 (components live in [0, 1]): 0.52 - 0.12
    assert d7_s1_coupling(p, g, cfg, BatchContext(coupling_rho={"B1": -0.4})).value == (
        pytest.approx(0.40)
    )
    # no rho for the bucket: not computed, flagged
    r = d7_s1_coupling(p, g, cfg, BatchContext())
    assert r.value is None and "d7_undefined:rho_coupling" in r.flags


# ----------------------------------------------------------------------------------- D8
def test_d8_hand_example(cfg, ctx):
    # Acc_select: H2008 is not acceptable -> 0
    # F1_same_diff: gold {same p1, same p2, diff d1}, pred {same p1, diff d1, diff d2} -> 2/3
    # rho: gold ranks (H2015, H2008, H1997) = (3, 2, 1), pred (2, 3, 1): sum d^2 = 2 -> 0.5
    # Acc_wrong: misleading {H1997, H2000}; rejected {H1997} -> 0.5
    # D8 = 0.3*0 + 0.3*2/3 + 0.2*0.5 + 0.2*0.5 = 0.4
    p = case(harness={"history_comparison": {
        "selected": ["H2008"], "analogue_scores": {"H2015": 0.5, "H2008": 0.9, "H1997": 0.1},
        "similarities": ["p1"], "differences": ["d1", "d2"], "rejected": ["H1997"]}})
    g = gold(harness={"history_comparison": {
        "comparison_type": "cross_bucket_same_period", "acceptable": ["H2015"],
        "analogue_scores": {"H2015": 0.9, "H2008": 0.5, "H1997": 0.1},
        "similarities": ["p1", "p2"], "differences": ["d1"], "misleading": ["H1997", "H2000"]}})
    r = d8_history(p, g, cfg, ctx)
    assert r.components["rho_analogue"] == pytest.approx(0.5)
    assert r.value == pytest.approx(0.4)
    assert r.components["comparison_type"] == "cross_bucket_same_period"


# ----------------------------------------------------------------------------------- D9
def test_d9_hand_example(cfg, ctx):
    # B5a vs B5b differ on the C axis only (C2-C3 vs C2). Pred says {C, N}: 5 of 6 axes right.
    # Links per channel: liquidity gold {CN>HK, HK>US} pred {CN>HK} -> 2/3; sentiment gold
    #   {CN>US} pred {} -> 0; policy gold {} pred {CN>US} -> 0; macro = (2/3)/3 = 0.222222
    # F1_diff: {x} vs {x, y} -> 2/3; Acc_spread: narrow vs widen -> 0
    # D9 = 0.3*0.222222 + 0.3*2/3 + 0.25*5/6 + 0.15*0 = 0.475
    p = case(harness={"cross_market": {
        "links": [{"source_market": "CN", "target_market": "HK", "channel": "liquidity"},
                  {"source_market": "CN", "target_market": "US", "channel": "policy"}],
        "differences": ["x"], "mca_axis_differences": ["C", "N"], "spread_direction": "narrow"}})
    g = gold("B5a", harness={"cross_market": {
        "compared_buckets": ["B5b"],
        "links": [{"source_market": "CN", "target_market": "HK", "channel": "liquidity"},
                  {"source_market": "HK", "target_market": "US", "channel": "liquidity"},
                  {"source_market": "CN", "target_market": "US", "channel": "sentiment"}],
        "differences": ["x", "y"], "spread_direction": "widen"}})
    r = d9_cross_market(p, g, cfg, ctx)
    assert r.components["differing_axes"] == ["C"]
    assert r.components["acc_mca"] == pytest.approx(5 / 6)
    assert r.components["f1_macro_link"] == pytest.approx(2 / 9)
    assert r.value == pytest.approx(0.475)
    assert r.to_score().raw_score == pytest.approx(0.475)


def test_d9_single_bucket_is_skipped(cfg, ctx):
    p = case()
    for g in (gold("B1"), gold("B1", harness={"cross_market": {"compared_buckets": ["B1"]}})):
        r = d9_cross_market(p, g, cfg, ctx)
        assert r.value is None and r.flags == ("d9_single_bucket_skipped",)
        assert r.to_score().raw_score is None  # the §8.3 validator accepts it


# ---------------------------------------------------------------------------------- D10
def test_d10_hand_example(cfg, ctx):
    # Acc_grade: C vs B -> 0; Recall_signal: related_party of {related_party, off_balance} -> 0.5
    # FPR: false signals {accrual_anomaly, made_up} over healthy classes (5 - 2 = 3) -> 2/3
    # D10 = 0.35*0 + 0.4*0.5 + 0.25*(1 - 2/3) = 0.283333
    p = case(harness={"risk_signals": {"reliability_grade": "C",
                                       "signals": ["related_party", "accrual_anomaly", "made_up"]}})
    g = gold(harness={"risk_signals": {"reliability_grade": "B",
                                       "signals": ["related_party", "off_balance_sheet"]}})
    r = d10_data_reliability(p, g, cfg, ctx)
    assert r.components["fpr_healthy"] == pytest.approx(2 / 3)
    assert r.value == pytest.approx(0.2 + 0.25 / 3)
    # a healthy control answered with no signal: recall vacuously 1, FPR 0 -> 0.35 + 0.4 + 0.25
    p = case(harness={"risk_signals": {"reliability_grade": "A"}})
    g = gold(harness={"risk_signals": {"reliability_grade": "A", "healthy_control": True}})
    assert d10_data_reliability(p, g, cfg, ctx).value == pytest.approx(1.0)


def test_d10_required_in_i3_c3_buckets(cfg, ctx):
    r = d10_data_reliability(case(), gold("B4"), cfg, ctx)  # B4 = ... C3 + I3
    assert r.value is None and {"d10_required_missing", "d10_not_annotated"} == set(r.flags)
    r = d10_data_reliability(case(), gold("B1"), cfg, ctx)
    assert r.flags == ("d10_not_annotated",)


# ---------------------------------------------------------------------------------- D11
def _d11_pair(bucket="B2"):
    p = case({"causal_graph": {"correlation_regime": ["risk-off"]}},
             {"risk_budget": {"mrc": {"eq": 0.6, "bd": 0.3}, "budget": {"eq": 0.75, "bd": 0.25},
                              "dominant_factor": "Growth"}})
    g = gold(bucket,
             result={"causal_graph": {"correlation_regime": ["risk-off"],
                                      "unbalanced_loop_warnings": ["loop1"]}},
             harness={"risk_budget": {"mrc": {"eq": 0.5, "bd": 0.5},
                                      "budget": {"eq": 0.5, "bd": 0.5},
                                      "dominant_factor": "growth"}})
    return p, g


def test_d11_hand_example(cfg, ctx):
    # MAPE_MRC: (0.2 + 0.4)/2 = 0.3 -> 0.7; Recall_regime: risk-off of {risk-off, loop1} -> 0.5
    # KL(0.75, 0.25 || 0.5, 0.5) = 0.75 ln 1.5 + 0.25 ln 0.5 = 0.130812 -> 1/1.130812 = 0.884320
    # Acc_factor: growth = Growth -> 1
    # D11 = 0.25*0.7 + 0.25*0.5 + 0.2*0.884320 + 0.2*1 = 0.676864 (C_kelly retired, max 0.9)
    kl = 0.75 * math.log(1.5) + 0.25 * math.log(0.5)
    p, g = _d11_pair()
    r = d11_risk_budget(p, g, cfg, ctx)
    assert r.components["kl_term"] == pytest.approx(1 / (1 + kl))
    expected = 0.25 * 0.7 + 0.25 * 0.5 + 0.2 / (1 + kl) + 0.2
    assert r.value == pytest.approx(expected)
    assert r.components["c_kelly"] is None and FLAG_C_KELLY_RETIRED in r.flags
    renorm = cfg.model_copy(update={"renormalize_retired_weights": True})
    assert d11_risk_budget(p, g, renorm, ctx).value == pytest.approx(expected / 0.9)


def test_d11_only_b1_to_b3(cfg, ctx):
    p, g = _d11_pair("B4")
    r = d11_risk_budget(p, g, cfg, ctx)
    assert r.value is None and r.flags == ("d11_bucket_not_evaluated",)


# ------------------------------------------------------------------------------- generic
def test_perfect_answer_scores_full_marks(cfg):
    p, g = records(full_case(), full_gold())
    ctx = BatchContext(coupling_rho={"B1": 1.0})
    values = {d: fn(p, g, cfg, ctx).value for d, fn in DIMENSIONS.items()}
    # D6 and D11 top out at 0.9 (C_kelly retired, not renormalised); D6 also pays its ECE term
    assert all(values[d] == pytest.approx(1.0) for d in values if d not in ("D6", "D11"))
    assert values["D11"] == pytest.approx(0.9)


def test_missing_prediction_scores_like_an_empty_one(cfg, ctx):
    # the system omits every section: nothing escapes scoring, no dimension is None for that
    _, g = records(full_case(), full_gold())
    empty = CaseRecord(case_id="C1")
    for d in ("D1", "D3", "D4", "D8", "D9", "D10", "D11"):
        r = DIMENSIONS[d](empty, g, cfg, ctx)
        assert r.value is not None and r.value < 0.5, d


def test_not_annotated_gives_none_and_a_flag(cfg, ctx):
    p = case()
    g = gold("B1")
    for d, fn in DIMENSIONS.items():
        r = fn(p, g, cfg, ctx)
        assert r.value is None and r.flags, d


def test_composite_refuses_missing_components():
    value, missing = composite("D3", {"acc_clock": 1.0, "mae_term": None, "recall_contradict": 1})
    assert value is None and missing == ["mae_term"]
