"""Issue 28, point 8: the EvalHarness defects (one test per defect; each fails before issue 28).

Built on the README example pair (``harness_examples.py``).
"""

from __future__ import annotations

import pytest
import yaml
from harness_examples import full_case, full_gold, ids_in, score_rows, write_jsonl

from fks.cli import main
from fks.evalharness.components import kl_score
from fks.evalharness.split import assign_split


def _score(case_rows, gold_rows, cfg, split="test", baseline=None):
    return score_rows(case_rows, gold_rows, cfg, split, baseline)


def _cli(tmp_path, capsys, cases, golds, *extra):
    c_path = write_jsonl(tmp_path / "cases.jsonl", cases)
    g_path = write_jsonl(tmp_path / "gold.jsonl", golds)
    with pytest.raises(SystemExit) as exc:
        main(["harness", "score", "--cases", str(c_path), "--gold", str(g_path),
              "--out", str(tmp_path / "out"), "--split", assign_split("C1"), *extra])
    return exc.value.code, capsys.readouterr().err


def _config(tmp_path, override) -> str:
    path = tmp_path / "harness.yaml"
    path.write_text(yaml.safe_dump(override), encoding="utf-8")
    return str(path)


# ------------------------------------------------------------- a 1e308 budget, perfect KL
def test_a_budget_past_the_float_range_gets_no_perfect_kl_term():
    """Before issue 28 ``{1e308, 1e308}`` summed to inf, normalised to zeros and scored 1.0."""
    gold = {"equity": 0.6, "bonds": 0.4}
    huge = kl_score({"equity": 1e308, "bonds": 1e308}, gold)
    assert huge == pytest.approx(kl_score({"equity": 1.0, "bonds": 1.0}, gold))
    assert huge < 0.99


def test_a_budget_past_the_float_range_is_exit_2(tmp_path, capsys):
    case = full_case("C1")
    case["harness"]["risk_budget"]["budget"] = {"equity": 1e308, "bonds": 1e308}
    code, err = _cli(tmp_path, capsys, [case], [full_gold("C1")])
    assert code == 2, err
    assert "cases.jsonl:1" in err and "harness.risk_budget.budget" in err


# ------------------------------------------------------------ D6 weights refused at load
@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"dimensions": {"d6_label_weights": {"anchoring": 0.0, "herding": 0.0}}},
         "dimensions.d6_label_weights"),
        ({"dimensions": {"d6_label_weights": {"anchoring": -1.0, "herding": 2.0}}},
         "dimensions.d6_label_weights"),
        ({"dimensions": {"d6_tier_weights": [2.0, -1.0, 0.5]}}, "dimensions.d6_tier_weights"),
        ({"dimensions": {"d6_tier_weights": [0.0, 0.0, 0.0]}}, "dimensions.d6_tier_weights"),
    ],
)
def test_zero_or_negative_d6_weights_are_exit_2_naming_the_field(tmp_path, capsys, override,
                                                                  field):
    """All-zero label weights used to write NaN and score 0; a negative one was accepted."""
    code, err = _cli(tmp_path, capsys, [full_case("C1")], [full_gold("C1")],
                     "--harness-config", _config(tmp_path, override))
    assert code == 2, err
    assert "harness.yaml" in err and field in err
    assert not (tmp_path / "out" / "case_scores.jsonl").exists()


def test_a_bucket_with_every_dimension_weight_0_is_exit_2(tmp_path, capsys):
    zero = {"bucket_weight_overrides": {"B1": {f"D{k}": 0.0 for k in range(1, 12)}}}
    code, err = _cli(tmp_path, capsys, [full_case("C1")], [full_gold("C1")],
                     "--harness-config", _config(tmp_path, zero))
    assert code == 2 and "B1" in err, err


# ------------------------------------------ a dimension lost: degraded, not silently dropped
def test_a_dimension_that_stops_being_computable_is_a_degradation(cfg):
    """D8's gold is dropped in every case: the case scores count D8 at 0 (fixed denominator).

    Before issue 28 the bucket median fell (0.864 -> 0.784 here) while D8 left the report's
    dimension medians, so §6 compared nothing and raised no flag.
    """
    ids = ids_in("test", 4, "k")

    def batch(drop_d8: bool):
        golds = [full_gold(c) for c in ids]
        for g in golds:
            if drop_d8:
                del g["harness"]["history_comparison"]
        return [full_case(c) for c in ids], golds

    base = _score(*batch(False), cfg)
    cur = _score(*batch(True), cfg, baseline=base.report)
    before, after = base.report.bucket_reports["B1"], cur.report.bucket_reports["B1"]
    assert after.median_score < before.median_score
    assert after.dimension_medians["D8"] == 0.0  # counted as the case score counts it
    (flag,) = [f for f in cur.report.degradation_flags if f.dimension_id == "D8"]
    assert flag.delta_ratio == pytest.approx(1.0) and flag.severity == "bucket_level"
    (cell,) = [c for c in cur.details["degradation_review"] if c["dimension_id"] == "D8"]
    assert set(cell["failing_cases"]) == {"not_computed"}


# ------------------------------------------------- split leakage: dev never moves test
def test_a_dev_prediction_never_moves_a_test_score(cfg):
    """B5a (D7 weight 0.15); the D7 pool admitted; rho over the bucket used every split.

    Before issue 28 two dev predictions moved every test case score from 0.953 to 0.926
    (rho 1.0 -> 0.14); now the rho is fitted on the test split alone.
    """
    modes = ["a-far-extrapolation", "b-source-missing"]
    ids = ids_in("test", 3, "x") + ids_in("dev", 3, "x")
    cases, golds = [], []
    for k, cid in enumerate(ids):
        c, g = full_case(cid), full_gold(cid, "B5a")
        g["result"]["s1"].update(s1_mode=[modes[k % 2]], self_s1_mode=modes[k % 2],
                                 coupling_strength=k / 10)
        c["result"]["s1"].update(s1_mode=[modes[k % 2]], coupling_strength=k / 10)
        cases.append(c)
        golds.append(g)
    before = {c.case_id: c.aggregate_score for c in _score(cases, golds, cfg).case_scores}
    cases[-1]["result"]["s1"]["coupling_strength"] = -5.0  # dev predictions only
    cases[-2]["result"]["s1"]["coupling_strength"] = 5.0
    res = _score(cases, golds, cfg)
    after = {c.case_id: c.aggregate_score for c in res.case_scores}
    assert set(after) == set(ids[:3])
    assert after == pytest.approx(before)
    assert res.details["d7_coupling_rho"]["B5a"] == pytest.approx(1.0)
