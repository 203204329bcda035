"""§7 anti-gaming flags: each fires on a crafted case and stays silent on a clean one."""

from __future__ import annotations

import pytest
from harness_examples import full_case, full_gold, records

from fks.evalharness import gaming
from fks.evalharness.dimensions import (
    BatchContext,
    d1_ontology,
    d5_applicability,
    d6_bias_uncertainty,
    d7_s1_coupling,
)
from fks.evalharness.scoring import batch_context

CTX = BatchContext(coupling_rho={"B1": 1.0})


def test_d1_exhaustive_listing(cfg):
    p, g = records(full_case(), full_gold())
    assert gaming.FLAG_D1_EXHAUSTIVE not in d1_ontology(p, g, cfg, CTX).flags
    row = full_case()
    row["result"]["causal_graph"]["nodes"] += [{"id": f"x{k}", "label": f"extra {k}"}
                                               for k in range(5)]  # 9 listed > 2 x 4 gold
    p, g = records(row, full_gold())
    r = d1_ontology(p, g, cfg, CTX)
    assert gaming.FLAG_D1_EXHAUSTIVE in r.flags
    assert r.components["precision_penalty"] == pytest.approx(8 / 9)


def test_d6_weighted_macro_gap(cfg):
    ctx = BatchContext(label_weights={"rare1": 2.0, "rare2": 2.0, "common": 0.5})
    row, gold = full_case(), full_gold()
    # hits only the common label, misses both rare ones: F1w = 0.5/4.5 = 0.111, F1m = 1/3
    row["harness"]["bias_labels"]["m7a"] = [{"label": "common", "confidence": 0.9}]
    gold["harness"]["bias_labels"]["m7a"] = ["common", "rare1", "rare2"]
    p, g = records(row, gold)
    assert gaming.FLAG_D6_GAP in d6_bias_uncertainty(p, g, cfg, ctx).flags
    p, g = records(full_case(), full_gold())
    assert gaming.FLAG_D6_GAP not in d6_bias_uncertainty(p, g, cfg, ctx).flags


def test_d6_ece_threshold(cfg):
    row = full_case()
    row["harness"]["bias_labels"]["m7a"] = [{"label": "anchoring", "confidence": 0.95},
                                            {"label": "x1", "confidence": 0.95},
                                            {"label": "x2", "confidence": 0.95}]
    p, g = records(row, full_gold())
    assert gaming.FLAG_D6_ECE in d6_bias_uncertainty(p, g, cfg, CTX).flags
    # the example's own confidences (0.8, 0.6, both right) give ECE (0.2 + 0.4)/2 = 0.3 > 0.15;
    # at 0.97 each: ECE 0.03 -> silent
    row = full_case()
    for lab in row["harness"]["bias_labels"]["m7a"] + row["harness"]["bias_labels"]["m7b"]:
        lab["confidence"] = 0.97
    p, g = records(row, full_gold())
    r = d6_bias_uncertainty(p, g, cfg, CTX)
    assert r.components["ece"] == pytest.approx(0.03)
    assert gaming.FLAG_D6_ECE not in r.flags


def test_d7_base_rate(cfg):
    # base rate of a-far-extrapolation: 1 of 4 gold cases (0.25); predicted in 4 of 4 (1.0 > 0.375)
    pairs = []
    modes = ["a-far-extrapolation", "b-source-missing", "c-narrative-data-detachment",
             "positive-coupling"]
    for k, mode in enumerate(modes):
        row, gold = full_case(f"c{k}"), full_gold(f"c{k}")
        gold["result"]["s1"]["s1_mode"] = [mode]
        row["result"]["s1"]["s1_mode"] = ["a-far-extrapolation"]
        pairs.append(records(row, gold))
    ctx = batch_context(pairs, cfg)
    assert ctx.d7_exceeded_modes == {"a-far-extrapolation"}
    r = d7_s1_coupling(*pairs[1], cfg, ctx)
    assert "d7_base_rate_exceeded:a-far-extrapolation" in r.flags
    # a system that predicts the gold modes stays silent
    clean = [records(full_case(f"c{k}"), full_gold(f"c{k}")) for k in range(4)]
    ctx = batch_context(clean, cfg)
    assert not ctx.d7_exceeded_modes
    assert not any(f.startswith("d7_base") for f in d7_s1_coupling(*clean[0], cfg, ctx).flags)
    table = gaming.base_rate_check([{"a"}, {"b"}], [{"a"}, {"a"}], factor=1.5)
    assert table["a"]["exceeded"] is False and table["b"]["exceeded"] is True


def test_d5_all_not_applicable_and_fp_rate(cfg):
    row = full_case()
    for fam in ("valuation", "factor", "derivatives"):
        row["result"]["applicability_flags"][fam]["level"] = "not-applicable"
    p, g = records(row, full_gold())
    r = d5_applicability(p, g, cfg, CTX)
    assert gaming.FLAG_D5_ALL_NA in r.flags
    assert r.components["fp_rate"] == 1.0  # both applicable gold items called not-applicable
    assert r.components["confusion_matrix"] == [[0, 0, 1, 0], [0, 0, 1, 0], [0, 0, 1, 0]]
    strict = cfg.model_copy(update={"dimensions": cfg.dimensions.model_copy(
        update={"d5_fp_rate_baseline": {"B1": 0.25}})})
    r = d5_applicability(p, g, strict, CTX)
    assert gaming.FLAG_D5_FP_BASELINE in r.flags
    p, g = records(full_case(), full_gold())
    clean = d5_applicability(p, g, strict, CTX)
    assert not {gaming.FLAG_D5_ALL_NA, gaming.FLAG_D5_FP_BASELINE} & set(clean.flags)
    assert clean.components["fp_rate"] == 0.0


def test_gaming_flags_are_told_from_other_flags():
    assert gaming.is_gaming_flag("d7_base_rate_exceeded:positive-coupling")
    assert gaming.is_gaming_flag("d1_exhaustive_listing")
    assert not gaming.is_gaming_flag("c_kelly_retired")
    assert not gaming.is_gaming_flag("d9_single_bucket_skipped")
