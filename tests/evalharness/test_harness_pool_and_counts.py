"""§1 D7 pool admission (external vs self-label cross kappa) and the D10 minimum sample."""

from __future__ import annotations

import json

import pytest
from harness_examples import full_case, full_gold, records, write_jsonl

from fks.errors import FksInputError
from fks.evalharness.config import load_harness_config
from fks.evalharness.dimensions import (
    FLAG_D7_POOL,
    FLAG_D10_SAMPLE,
    BatchContext,
    d7_s1_coupling,
    d10_data_reliability,
    d10_sample_counts,
)
from fks.evalharness.iaa import d7_pool_admission
from fks.evalharness.inputs import GoldRecord
from fks.evalharness.pipeline import run_score
from fks.evalharness.split import assign_splits

A, B, C, P = (
    "a-far-extrapolation",
    "b-source-missing",
    "c-narrative-data-detachment",
    "positive-coupling",
)
EXTERNAL = [A, A, A, B, B, B, C, C, P, P]
# one disagreement (last item: external P, self A).
# p_o = 9/10 = 0.9; marginals external a .3 b .3 c .2 p .2, self a .4 b .3 c .2 p .1
# p_e = .12 + .09 + .04 + .02 = 0.27; kappa = (0.9 - 0.27) / (1 - 0.27) = 0.63 / 0.73 = 0.863014
SELF_AGREE = [A, A, A, B, B, B, C, C, P, A]
KAPPA_AGREE = 0.63 / 0.73
# three disagreements (items 3, 6, 8). p_o = 0.7; self a .3 b .3 c .1 p .3
# p_e = .09 + .09 + .02 + .06 = 0.26; kappa = (0.7 - 0.26) / (1 - 0.26) = 0.44 / 0.74 = 0.594595
SELF_DISAGREE = [A, A, B, B, B, A, C, P, P, P]
KAPPA_DISAGREE = 0.44 / 0.74
IDS = [f"p{k:02d}" for k in range(12)]


def _gold_rows(self_labels: list[str]) -> list[dict]:
    """12 B1 gold rows: the first 10 cross-labelled, the last 2 with an external label only."""
    rows = []
    for k, cid in enumerate(IDS):
        g = full_gold(cid)
        del g["harness"]["bias_labels"]
        s1 = g["result"]["s1"]
        s1["s1_mode"] = [EXTERNAL[k % 10]]
        s1["coupling_strength"] = k / 10
        if k < 10:
            s1["self_s1_mode"] = self_labels[k]
        rows.append(g)
    return rows


def _case_rows() -> list[dict]:
    rows = []
    for k, cid in enumerate(IDS):
        c = full_case(cid)
        c["result"]["s1"]["coupling_strength"] = k / 10
        c["result"]["s1"]["s1_mode"] = [EXTERNAL[k % 10]]
        rows.append(c)
    return rows


def _largest_split() -> str:
    splits = assign_splits(dict.fromkeys(IDS, "B1"))
    return max(("dev", "test", "holdout"), key=lambda s: sum(v == s for v in splits.values()))


def _run(tmp_path, self_labels, cfg=None):
    c_path = write_jsonl(tmp_path / "cases.jsonl", _case_rows())
    g_path = write_jsonl(tmp_path / "gold.jsonl", _gold_rows(self_labels))
    result, paths = run_score(c_path, g_path, tmp_path / "out", split=_largest_split(), config=cfg)
    return result, json.loads(paths.details.read_text())


# ------------------------------------------------------------------------------- D7 pool
def test_pool_admitted_at_kappa_above_threshold():
    golds = [GoldRecord.model_validate(g) for g in _gold_rows(SELF_AGREE)]
    pool = d7_pool_admission(golds, 0.7)
    assert pool["kappa"] == pytest.approx(KAPPA_AGREE)
    assert pool["admitted"] is True and pool["reason"] is None
    assert (pool["n_cross_labelled"], pool["n_external"]) == (10, 12)


def test_pool_refused_below_threshold_and_threshold_is_read():
    golds = [GoldRecord.model_validate(g) for g in _gold_rows(SELF_DISAGREE)]
    pool = d7_pool_admission(golds, 0.7)
    assert pool["kappa"] == pytest.approx(KAPPA_DISAGREE)
    assert pool["admitted"] is False and pool["reason"] == "kappa_below_threshold"
    assert d7_pool_admission(golds, 0.55)["admitted"] is True


def test_pool_refused_without_cross_labels_or_with_undefined_kappa():
    plain = [GoldRecord.model_validate(full_gold(f"n{k}")) for k in range(3)]
    pool = d7_pool_admission(plain, 0.7)
    assert (pool["admitted"], pool["reason"], pool["kappa"]) == (False, "no_cross_labels", None)
    same = []
    for k in range(3):  # one label used by both sides throughout: p_e = 1, kappa undefined
        g = full_gold(f"s{k}")
        g["result"]["s1"]["self_s1_mode"] = A
        same.append(GoldRecord.model_validate(g))
    assert d7_pool_admission(same, 0.7)["reason"] == "kappa_undefined"


def test_d7_none_with_flag_when_pool_refused(tmp_path, cfg):
    result, details = _run(tmp_path, SELF_DISAGREE)
    assert result.case_scores
    for cs in result.case_scores:
        d7 = cs.dimensions["D7"]
        assert d7.raw_score is None and d7.bucket_percentile is None
        assert FLAG_D7_POOL in d7.gaming_flags
        assert d7.components["pool_kappa"] == pytest.approx(KAPPA_DISAGREE)
        assert d7.components["pool_n_cross_labelled"] == 10
    assert details["d7_pool"]["admitted"] is False
    assert details["d7_pool"]["kappa"] == pytest.approx(KAPPA_DISAGREE)
    (flag,) = [f for f in details["batch_flags"] if f["flag"] == FLAG_D7_POOL]
    assert flag["min_kappa"] == cfg.iaa.thresholds["D7_external"] == 0.7


def test_d7_scored_when_pool_admitted(tmp_path):
    result, details = _run(tmp_path, SELF_AGREE)
    assert details["d7_pool"]["admitted"] is True
    assert details["d7_pool"]["kappa"] == pytest.approx(KAPPA_AGREE)
    assert not [f for f in details["batch_flags"] if f["flag"] == FLAG_D7_POOL]
    for cs in result.case_scores:
        d7 = cs.dimensions["D7"]
        assert d7.raw_score is not None, d7.gaming_flags
        assert FLAG_D7_POOL not in d7.gaming_flags


def test_hand_built_context_refusal_keeps_base_rate_evidence(cfg):
    p, g = records(full_case(), full_gold())
    pool = {"admitted": False, "kappa": 0.5, "min_kappa": 0.7, "n_cross_labelled": 14,
            "n_external": 14, "reason": "kappa_below_threshold"}
    ctx = BatchContext(coupling_rho={"B1": 1.0}, d7_exceeded_modes=frozenset({A}), d7_pool=pool)
    r = d7_s1_coupling(p, g, cfg, ctx)
    assert r.value is None
    assert r.flags == (FLAG_D7_POOL, f"d7_base_rate_exceeded:{A}")
    admitted = BatchContext(coupling_rho={"B1": 1.0}, d7_pool={**pool, "admitted": True})
    assert d7_s1_coupling(p, g, cfg, admitted).value == pytest.approx(1.0)


# ----------------------------------------------------------------------- D10 minimum sample
def _d10_gold(cid: str, signals: list[str], *, healthy=False, fraud=False) -> GoldRecord:
    return GoldRecord.model_validate({
        "case_id": cid, "bucket_label": "B4",
        "harness": {"risk_signals": {"reliability_grade": "B", "signals": signals,
                                     "healthy_control": healthy, "post_fraud": fraud}},
    })


def _full_d10_sample(cfg, n_healthy=15):
    """10 cases per signal class (the first 5 post-fraud) + ``n_healthy`` healthy controls."""
    golds = []
    for j, cls in enumerate(cfg.dimensions.d10_signal_classes):
        golds += [_d10_gold(f"{cls}-{k}", [cls], fraud=j == 0 and k < 5) for k in range(10)]
    golds += [_d10_gold(f"h{k}", [], healthy=True) for k in range(n_healthy)]
    return golds


def test_d10_minimum_met_stays_silent(cfg):
    counts = d10_sample_counts(_full_d10_sample(cfg), cfg)
    assert counts["insufficient"] is False and counts["short"] == []
    assert set(counts["signal_counts"].values()) == {10}
    assert (counts["post_fraud"], counts["healthy_controls"]) == (5, 15)
    assert counts["thresholds"] == {"per_signal": 10, "post_fraud": 5, "healthy_controls": 15}
    short = d10_sample_counts(_full_d10_sample(cfg, n_healthy=14), cfg)
    assert short["insufficient"] is True and short["short"] == ["healthy_controls"]


def test_d10_flag_keeps_the_score(cfg):
    p, g = records(full_case(), full_gold())
    small = d10_sample_counts([g], cfg)
    assert small["insufficient"] is True
    assert small["signal_counts"]["related_party"] == 1
    flagged = d10_data_reliability(p, g, cfg, BatchContext(d10_sample=small))
    silent = d10_data_reliability(p, g, cfg, BatchContext(d10_sample={"insufficient": False}))
    assert flagged.value is not None and flagged.value == silent.value
    assert FLAG_D10_SAMPLE in flagged.flags and FLAG_D10_SAMPLE not in silent.flags


def test_d10_flag_fires_on_small_batch_and_not_when_minimums_lowered(tmp_path, cfg):
    result, details = _run(tmp_path, SELF_AGREE)
    (flag,) = [f for f in details["batch_flags"] if f["flag"] == FLAG_D10_SAMPLE]
    # the §1 minimum counts the whole gold pool (every split), not only the scored cases
    n = len(_gold_rows(SELF_AGREE))
    assert n > len(result.case_scores)
    assert flag["signal_counts"]["related_party"] == n  # every example gold flags related_party
    assert flag["signal_counts"]["accrual_anomaly"] == 0
    assert flag["healthy_controls"] == 0 and flag["thresholds"]["healthy_controls"] == 15
    for cs in result.case_scores:
        d10 = cs.dimensions["D10"]
        assert d10.raw_score is not None and FLAG_D10_SAMPLE in d10.gaming_flags
    lax = cfg.model_copy(update={"dimensions": cfg.dimensions.model_copy(update={
        "d10_min_cases_per_signal": 0, "d10_min_post_fraud": 0, "d10_min_healthy_controls": 0})})
    result, details = _run(tmp_path, SELF_AGREE, cfg=lax)
    assert details["d10_sample"]["insufficient"] is False
    assert not [f for f in details["batch_flags"] if f["flag"] == FLAG_D10_SAMPLE]
    assert all(FLAG_D10_SAMPLE not in cs.dimensions["D10"].gaming_flags
               for cs in result.case_scores)


def test_d10_thresholds_validated_by_the_loader(tmp_path):
    assert load_harness_config().dimensions.d10_min_healthy_controls == 15
    path = tmp_path / "h.yaml"
    path.write_text("dimensions: {d10_min_post_fraud: -1}\n")
    with pytest.raises(FksInputError, match="d10_min_post_fraud"):
        load_harness_config(path)
