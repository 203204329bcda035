"""Builders of the EvalHarness tests: one fully annotated example case and its gold.

``full_case()`` / ``full_gold()`` return fresh dicts (tests mutate them freely); the same
example is shown in ``src/fks/evalharness/README.md``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from fks.evalharness.inputs import CaseRecord, GoldRecord

CHAIN = [
    {"id": "n1", "label": "policy ignition"},
    {"id": "n2", "label": "liquidity absorption"},
    {"id": "n3", "label": "reflexive reinforcement"},
]

#: A verifiable D7 external source (§7: URL + timestamp + extracted key fields).
EXTERNAL_SOURCE = {
    "name": "Damodaran",
    "url": "https://pages.stern.nyu.edu/~adamodar/",
    "retrieved_at": "2026-01-05T00:00:00Z",
    "key_fields": {"implied_erp": "4.6%"},
}

_CASE = {
    "case_id": "C1",
    "result": {
        "causal_graph": {
            "nodes": [*CHAIN, {"id": "n4", "label": "HK property"}],
            "edges": [
                {"source": "n1", "target": "n2", "edge_type": "causal", "form": "policy-credit"},
                {"source": "n2", "target": "n3", "edge_type": "causal"},
                {"source": "n3", "target": "n4", "edge_type": "cross-market-mapping"},
            ],
            "scenes": ["credit easing"],
            "reverse_forces": ["deleveraging"],
            "correlation_regime": ["risk-on"],
        },
        "phase_evidence": {
            "clocks": {"M3.t1": "expansion", "M3.t2": "late", "M3.t5": "early"},
            "phase_matrix": {"M3.t1": {"M3.t2": 2}},
            "contradictions": ["t1 vs t5"],
        },
        "regulation_status": {
            "friction_layer": {
                "wording_shift": "hawkish",
                "same_stage_spec": "standing committee",
                "timing_rarity": "rare",
                "counterparty_objective": "stability",
            },
            "regulatory_uncertainty": 0.0,
        },
        "applicability_flags": {
            "valuation": {"level": "applicable", "values": {"fair_pe": 14.0}},
            "factor": {"level": "partial", "values": {"value": 0.6, "momentum": 0.3, "size": 0.1}},
            "derivatives": {"level": "not-applicable"},
            "pe_items": ["earnings cyclicality"],
        },
        "posterior": {
            "mode_a": {"value": 0.02, "weight": 0.6},
            "mode_b": {"value": 0.08, "weight": 0.4},
        },
        "s1": {
            "s1_mode": ["a-far-extrapolation"],
            "coupling_direction": "negative",
            "coupling_strength": 0.7,
            "backtrigger": ["M5"],
        },
    },
    "harness": {
        "m13_attributes": {
            "holder_structure": "state-owned",
            "real_economy_node": "bank",
            "data_availability_grade": "A",
            "business_model": "lending",
        },
        "source_alignment": {
            "sources": [
                {
                    "source_id": "pboc",
                    "reliability": 0.9,
                    "account_reliable": True,
                    "channel_reliable": True,
                },
                {"source_id": "wire", "reliability": 0.6, "account_reliable": True},
                {"source_id": "blog", "reliability": 0.2, "channel_reliable": True},
            ],
            "homogeneous_groups": ["sell-side chorus"],
        },
        "bias_labels": {
            "m7a": [{"label": "anchoring", "confidence": 0.8}],
            "m7b": [{"label": "herding", "confidence": 0.6}],
        },
        "history_comparison": {
            "selected": ["H2015"],
            "analogue_scores": {"H2015": 0.9, "H2008": 0.5, "H1997": 0.1},
            "similarities": ["policy put"],
            "differences": ["leverage level"],
            "rejected": ["H1997"],
        },
        "cross_market": {
            "links": [{"source_market": "CN", "target_market": "HK", "channel": "liquidity"}],
            "differences": ["capital controls"],
            "mca_axis_differences": ["L", "D", "F", "N", "C", "I"],
            "spread_direction": "widen",
        },
        "risk_signals": {"reliability_grade": "B", "signals": ["related_party"]},
        "risk_budget": {
            "mrc": {"equity": 0.6, "bonds": 0.4},
            "budget": {"equity": 0.6, "bonds": 0.4},
            "dominant_factor": "growth",
        },
    },
}

_GOLD = {
    "case_id": "C1",
    "bucket_label": "B1",
    "iaa_kappa": 0.8,
    "result": {
        "causal_graph": {
            "nodes": [*CHAIN, {"id": "n4", "label": "HK property"}],
            "edges": [
                {"source": "n1", "target": "n2", "edge_type": "causal", "form": "policy-credit"},
                {"source": "n2", "target": "n3", "edge_type": "causal"},
                {"source": "n3", "target": "n4", "edge_type": "cross-market-mapping"},
            ],
            "scenes": ["credit easing"],
            "reverse_forces": ["deleveraging"],
            "correlation_regime": ["risk-on"],
            "key_patterns": [
                {
                    "name": "policy-liquidity-reflexivity",
                    "nodes": CHAIN,
                    "edges": [
                        {"source": "n1", "target": "n2", "edge_type": "causal"},
                        {"source": "n2", "target": "n3", "edge_type": "causal"},
                    ],
                }
            ],
        },
        "phase_evidence": {
            "clocks": {"M3.t1": "expansion", "M3.t2": "late", "M3.t5": "early"},
            "phase_matrix": {"M3.t1": {"M3.t2": 2}},
            "contradictions": ["t1 vs t5"],
        },
        "regulation_status": {
            "friction_layer": {
                "wording_shift": "hawkish",
                "same_stage_spec": "standing committee",
                "timing_rarity": "rare",
                "counterparty_objective": "stability",
            }
        },
        "applicability_flags": {
            "valuation": {"level": "applicable", "values": {"fair_pe": 14.0}},
            "factor": {"level": "partial", "values": {"value": 0.6, "momentum": 0.3, "size": 0.1}},
            "derivatives": {"level": "not-applicable"},
            "pe_items": ["earnings cyclicality"],
        },
        "posterior": {"expert_intervals": [[0.04, 0.08], [0.045, 0.08]]},
        "s1": {
            "s1_mode": ["a-far-extrapolation"],
            "coupling_strength": 0.7,
            "backtrigger": ["M5"],
            "external_sources": [EXTERNAL_SOURCE],
        },
    },
    "harness": {
        "m13_attributes": {
            "holder_structure": "state-owned",
            "real_economy_node": "bank",
            "data_availability_grade": "A",
            "business_model": "lending",
            "open_fields_n_experts": 2,
            "open_fields_kappa": 0.8,
        },
        "source_alignment": {
            "sources": [
                {
                    "source_id": "pboc",
                    "reliability": 0.9,
                    "account_reliable": True,
                    "channel_reliable": True,
                },
                {"source_id": "wire", "reliability": 0.6, "account_reliable": True},
                {"source_id": "blog", "reliability": 0.2, "channel_reliable": True},
            ],
            "homogeneous_groups": ["sell-side chorus"],
        },
        "bias_labels": {"m7a": ["anchoring"], "m7b": ["herding"]},
        "history_comparison": {
            "comparison_type": "cross_period_same_bucket",
            "acceptable": ["H2015"],
            "analogue_scores": {"H2015": 0.9, "H2008": 0.5, "H1997": 0.1},
            "similarities": ["policy put"],
            "differences": ["leverage level"],
            "misleading": ["H1997"],
        },
        "cross_market": {
            "compared_buckets": ["B5a"],
            "links": [{"source_market": "CN", "target_market": "HK", "channel": "liquidity"}],
            "differences": ["capital controls"],
            "spread_direction": "widen",
        },
        "risk_signals": {"reliability_grade": "B", "signals": ["related_party"]},
        "risk_budget": {
            "mrc": {"equity": 0.6, "bonds": 0.4},
            "budget": {"equity": 0.6, "bonds": 0.4},
            "dominant_factor": "growth",
        },
    },
}


def full_case(case_id: str = "C1") -> dict:
    """A fully filled prediction row (a deep copy)."""
    row = copy.deepcopy(_CASE)
    row["case_id"] = case_id
    return row


def full_gold(case_id: str = "C1", bucket: str = "B1") -> dict:
    """The gold row matching :func:`full_case` exactly (a deep copy)."""
    row = copy.deepcopy(_GOLD)
    row["case_id"] = case_id
    row["bucket_label"] = bucket
    return row


def empty_gold(case_id: str = "C1", bucket: str = "B1") -> dict:
    """A gold row with no annotated section."""
    return {"case_id": case_id, "bucket_label": bucket}


def records(case: dict, gold: dict) -> tuple[CaseRecord, GoldRecord]:
    """Validate a (case, gold) pair of dicts."""
    return CaseRecord.model_validate(case), GoldRecord.model_validate(gold)


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    """Write ``rows`` as JSONL."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def ids_in(split: str, n: int, prefix: str = "k") -> list[str]:
    """Return the first ``n`` ids ``prefix000...`` whose plain hash split is ``split``."""
    from fks.evalharness.split import assign_split

    out, k = [], 0
    while len(out) < n:
        cid = f"{prefix}{k:03d}"
        if assign_split(cid) == split:
            out.append(cid)
        k += 1
    return out


def score_rows(case_rows: list[dict], gold_rows: list[dict], cfg, split: str,
               baseline=None):
    """Validate plain case and gold rows and score them (:func:`score_batch`) on ``split``."""
    from fks.evalharness.scoring import score_batch

    cases = {c["case_id"]: CaseRecord.model_validate(c) for c in case_rows}
    golds = [GoldRecord.model_validate(g) for g in gold_rows]
    return score_batch(cases, golds, cfg, split=split, baseline=baseline)
