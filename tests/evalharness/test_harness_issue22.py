"""Issue 22: the EvalHarness to the letter of its formula table (one section per point).

Each test here fails on the code before issue 22 and passes after it.
"""

from __future__ import annotations

import pytest
from harness_examples import full_case, full_gold, records, write_jsonl

from fks.cli import main
from fks.evalharness.inputs import CaseRecord, GoldRecord
from fks.evalharness.scoring import score_batch
from fks.evalharness.split import assign_split

#: Spelled out, so that the tests also run (and fail) against the code before issue 22.
REQUIRED_NOT_COMPUTED = "required_not_computed"


def _ids_in(split: str, n: int, prefix: str = "k") -> list[str]:
    """The first ``n`` ids ``prefix000...`` whose plain hash split is ``split``."""
    out, k = [], 0
    while len(out) < n:
        cid = f"{prefix}{k:03d}"
        if assign_split(cid) == split:
            out.append(cid)
        k += 1
    return out


def _score(case_rows, gold_rows, cfg, split):
    cases = {c["case_id"]: CaseRecord.model_validate(c) for c in case_rows}
    golds = [GoldRecord.model_validate(g) for g in gold_rows]
    return score_batch(cases, golds, cfg, split=split)


# ------------------------------------------------------------------ point 1: fixed denominator
def test_perfect_answer_keeps_an_uncomputed_d7_in_the_denominator(cfg):
    """The README example has no self labels, so the D7 pool is refused: D7 is not computed.

    Before issue 22 D7 silently left Σw (0.976); now it stays in Σw at 0 and says why.
    """
    res = _score([full_case("C1")], [full_gold("C1")], cfg, assign_split("C1"))
    cs = res.case_scores[0]
    d7 = cs.dimensions["D7"]
    assert d7.raw_score is None
    assert REQUIRED_NOT_COMPUTED in d7.gaming_flags
    assert d7.components["state"] == REQUIRED_NOT_COMPUTED
    assert "d7_pool_not_admitted" in d7.components["reasons"]
    w = cfg.weights_for("B1")
    expected = sum(
        w[d] * (cs.dimensions[d].raw_score or 0.0) for d in w
    ) / sum(w.values())
    assert cs.aggregate_score == pytest.approx(expected)
    assert cs.aggregate_score < 0.9


def test_unqualified_expert_intervals_keep_d6_in_the_denominator(cfg):
    case, gold = full_case("C1"), full_gold("C1")
    gold["result"]["posterior"]["expert_intervals"] = [[0.04, 0.08]]  # one expert only
    res = _score([case], [gold], cfg, assign_split("C1"))
    d6 = res.case_scores[0].dimensions["D6"]
    assert d6.raw_score is None and REQUIRED_NOT_COMPUTED in d6.gaming_flags
    assert "d6_undefined:acc_bimodal" in d6.components["reasons"]


def test_only_the_d9_and_d11_gates_leave_the_denominator(cfg):
    """B4: D11 gated (outside B1-B3), D9 single bucket gated; every other weight stays."""
    case, gold = full_case("C1"), full_gold("C1", "B4")
    gold["harness"]["cross_market"]["compared_buckets"] = ["B4"]
    res = _score([case], [gold], cfg, assign_split("C1"))
    cs = res.case_scores[0]
    assert "d9_single_bucket_skipped" in cs.dimensions["D9"].gaming_flags
    assert REQUIRED_NOT_COMPUTED not in cs.dimensions["D9"].gaming_flags
    assert REQUIRED_NOT_COMPUTED not in cs.dimensions["D11"].gaming_flags
    w = cfg.weights_for("B4")
    den = sum(v for d, v in w.items() if d not in ("D9", "D11"))
    num = sum(w[d] * (cs.dimensions[d].raw_score or 0.0) for d in w if d not in ("D9", "D11"))
    assert cs.aggregate_score == pytest.approx(num / den)


def test_b6_must_evaluate_d9_stays_in_the_denominator(cfg):
    """§3.1: D9 必评 in B6 -- a B6 case comparing no second bucket is charged, not dropped."""
    case, gold = full_case("C1"), full_gold("C1", "B6")
    gold["harness"]["cross_market"]["compared_buckets"] = ["B6"]
    res = _score([case], [gold], cfg, assign_split("C1"))
    d9 = res.case_scores[0].dimensions["D9"]
    assert {"d9_single_bucket_skipped", "d9_required_missing", REQUIRED_NOT_COMPUTED} <= set(
        d9.gaming_flags
    )


def test_must_evaluate_d11_missing_in_b1_is_flagged(cfg):
    case, gold = full_case("C1"), full_gold("C1", "B2")
    del gold["harness"]["risk_budget"]
    res = _score([case], [gold], cfg, assign_split("C1"))
    assert "d11_required_missing" in res.case_scores[0].dimensions["D11"].gaming_flags


def test_computed_denominator_is_the_opt_in_older_reading(cfg):
    old = cfg.model_copy(update={"aggregate_denominator": "computed"})
    res = _score([full_case("C1")], [full_gold("C1")], old, assign_split("C1"))
    cs = res.case_scores[0]
    assert REQUIRED_NOT_COMPUTED not in cs.dimensions["D7"].gaming_flags
    assert cs.aggregate_score > 0.97


# --------------------------------------------------------------- point 6: D9 optional gold
def test_cross_bucket_gold_without_spread_direction_is_scored_not_a_crash(cfg, tmp_path, capsys):
    case, gold = full_case("C1"), full_gold("C1")
    del gold["harness"]["cross_market"]["spread_direction"]
    res = _score([case], [gold], cfg, assign_split("C1"))
    d9 = res.case_scores[0].dimensions["D9"]
    assert d9.raw_score == pytest.approx(1.0)  # the three graded components are perfect
    assert "d9_spread_not_annotated" in d9.gaming_flags
    assert d9.components["not_graded"] == ["acc_spread"]
    c_path = write_jsonl(tmp_path / "cases.jsonl", [case])
    g_path = write_jsonl(tmp_path / "gold.jsonl", [gold])
    with pytest.raises(SystemExit) as exc:
        main(["harness", "score", "--cases", str(c_path), "--gold", str(g_path),
              "--out", str(tmp_path / "out"), "--split", assign_split("C1")])
    assert exc.value.code == 0, capsys.readouterr().err


def test_d9_without_spread_still_scores_a_wrong_link(cfg, ctx):
    from fks.evalharness.dimensions import d9_cross_market

    case, gold = full_case("C1"), full_gold("C1")
    del gold["harness"]["cross_market"]["spread_direction"]
    case["harness"]["cross_market"]["links"] = []
    p, g = records(case, gold)
    r = d9_cross_market(p, g, cfg, ctx)
    assert r.value == pytest.approx((0.3 * 0.0 + 0.3 * 1.0 + 0.25 * 1.0) / 0.85)


# --------------------------------------------------------- point 2: D5 not-applicable half
def _all_na_gold(gold: dict) -> dict:
    gold["result"]["applicability_flags"] = {
        "valuation": {"level": "not-applicable"},
        "factor": {"level": "not-applicable"},
        "derivatives": {"level": "not-applicable"},
    }
    return gold


def test_d5_scores_a_truly_not_applicable_case(cfg, ctx):
    from fks.evalharness.dimensions import d5_applicability

    case = full_case("C1")
    case["result"]["applicability_flags"] = {
        "valuation": {"level": "not-applicable"},
        "factor": {"level": "not-applicable"},
        "derivatives": {"level": "not-applicable"},
    }
    r = d5_applicability(*records(case, _all_na_gold(full_gold("C1"))), cfg, ctx)
    assert r.value == pytest.approx(1.0)
    assert r.components["mape_basis"] == r.components["tau_basis"] == "not_applicable"


def test_d5_false_applicable_on_a_not_applicable_case_costs(cfg, ctx):
    from fks.evalharness.dimensions import d5_applicability

    case = full_case("C1")  # claims valuation applicable with a fair PE, factor partial
    r = d5_applicability(*records(case, _all_na_gold(full_gold("C1"))), cfg, ctx)
    assert r.value is not None
    assert r.components["mape_term"] == 0.0 and r.components["tau_factor"] == 0.0
    # Acc_appl: 1 of 3 families right; Recall_PE: gold lists none, prediction lists one
    assert r.value < 0.5


def test_d5_fp_baseline_is_on_by_default(cfg, ctx):
    """§7: labelling everything not-applicable costs by default, not only a flag."""
    from fks.evalharness.dimensions import d5_applicability

    case = full_case("C1")
    for fam in ("valuation", "factor", "derivatives"):
        case["result"]["applicability_flags"][fam] = {"level": "not-applicable"}
    r = d5_applicability(*records(case, full_gold("C1")), cfg, ctx)
    assert "d5_fp_above_bucket_baseline" in r.flags
    assert r.components["penalty"] == pytest.approx(cfg.dimensions.d5_fp_penalty)
