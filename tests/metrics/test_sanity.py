"""The §18.1-18.5 sanity checks: they pass on planted structure and each fails on a
constructed counter-example."""

from __future__ import annotations

import json

import numpy as np
from internal_synth import L, configs, main_queries, make_bench, make_run

from fks.configs import load_configs
from fks.metrics._internal_sanity import permute_within
from fks.metrics._negatives import NEGATIVES_FORMAT
from fks.metrics._sanity import (
    SanityTolerances,
    check_duplicate_query,
    check_label_shuffle,
    check_query_shuffle,
    check_raw_vs_transported,
    check_relation_negatives,
)
from fks.metrics._synthetic import planted_states, published_counts
from fks.metrics.internal import run_internal_metrics

D16 = 16
PCA = {"whitening": {"method": "pca", "pca_max_dim": 10}}  # k < d: J matters (see 18.5)
TOL = SanityTolerances()


def _checks(tmp_path, bench, run, **metrics):
    res = run_internal_metrics(run, benchmark=bench, configs=configs(tmp_path, **metrics))
    on_disk = json.loads((run / "metrics" / "sanity_checks.json").read_text())
    assert on_disk["checks"].keys() == res["sanity"]["checks"].keys()
    return res["sanity"]


def test_all_checks_pass_on_planted_structure(tmp_path):
    bench = make_bench(tmp_path, sizes=(40, 40), duplicate_prompts=2)
    base = planted_states(bench, d=D16, n_layers=L, signal=2.0)
    qs = main_queries(bench)
    first: dict[str, int] = {}
    src = np.array([first.setdefault(q.query, i) for i, q in enumerate(qs)])

    def states(layer, idx):  # identical prompts -> identical states, as a model gives
        return base(layer, np.arange(len(qs)))[src[idx]]

    run = make_run(tmp_path, bench, d=D16, states=states)
    sanity = _checks(tmp_path, bench, run, **PCA)
    assert sanity["layer"] == 3  # depth 0.75, the window layer nearest 0.7
    statuses = {k: v["status"] for k, v in sanity["checks"].items()}
    assert statuses == dict.fromkeys(statuses, "pass"), sanity["checks"]
    dup = sanity["checks"]["duplicate_query"]
    assert dup["identical_prompt_groups"] == 2 and dup["identical_prompts_min_cosine"] > 0.999
    assert sanity["summary"]["all_pass"]


def test_query_shuffle_fails_without_fact_identity(tmp_path):
    bench = make_bench(tmp_path, sizes=(30, 30))
    run = make_run(tmp_path, bench, d=D16, signal=0.0)
    check = _checks(tmp_path, bench, run, **PCA)["checks"]["query_shuffle"]
    assert check["status"] == "fail" and check["criteria"]["iss_drops"] is False


def test_duplicate_query_fails_when_identical_prompts_differ(tmp_path):
    bench = make_bench(tmp_path, sizes=(30, 30), duplicate_prompts=3)
    run = make_run(tmp_path, bench, d=D16, signal=2.0)  # fresh noise per row: duplicates differ
    check = _checks(tmp_path, bench, run, **PCA)["checks"]["duplicate_query"]
    assert check["status"] == "fail"
    assert check["criteria"] == {"reembedded_cosine": True, "duplicate_s_positive": True,
                                 "identical_prompts_cosine": False}


def test_label_shuffle_fails_when_labels_create_stability(tmp_path):
    # every (fact, family) holds two queries a_f + e and a_f - e: the true families average the
    # noise away exactly, any other grouping of the same queries does not
    n = 60
    counts = {f: np.full(n, 2) for f in ("anchor", "paraphrase", "format", "context",
                                         "multilingual")}
    bench = make_bench(tmp_path, sizes=(30, 30), counts=counts)
    qs = main_queries(bench)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, D16))
    pos = {f.fact_id: i for i, f in enumerate(bench.facts)}
    cell: dict[tuple[str, str], np.ndarray] = {}
    sign: dict[tuple[str, str], float] = {}
    rows = []
    for q in qs:
        key = (q.fact_id, q.condition_family)
        e = cell.setdefault(key, 3.0 * rng.standard_normal(D16))
        s = sign[key] = -sign.get(key, -1.0)
        rows.append(a[pos[q.fact_id]] + s * e)
    X = np.asarray(rows, dtype=np.float32)
    run = make_run(tmp_path, bench, d=D16, states=lambda layer, idx: X[idx])
    check = _checks(tmp_path, bench, run, **PCA)["checks"]["condition_label_shuffle"]
    assert check["status"] == "fail"
    assert check["iss_excess"] > TOL.label_shuffle_margin


def test_relation_negatives_fail_when_negatives_are_cherry_picked(tmp_path):
    # facts come in antipodal twins; a stored list naming each fact's twin as its only
    # negative makes the same-relation background far laxer than random facts'
    n = 40
    bench = make_bench(tmp_path, sizes=(20, 20), counts=published_counts(n, seed=3))
    rng = np.random.default_rng(1)
    half = rng.standard_normal((n // 2, D16))
    a = np.empty((n, D16))
    a[0::2], a[1::2] = half, -half
    pos = {f.fact_id: i for i, f in enumerate(bench.facts)}
    qs = main_queries(bench)
    X = np.stack([a[pos[q.fact_id]] + 1.5 * rng.standard_normal(D16) for q in qs]
                 ).astype(np.float32)
    run = make_run(tmp_path, bench, d=D16, states=lambda layer, idx: X[idx])
    ids = [f.fact_id for f in bench.facts]
    twins = {fid: [ids[i ^ 1]] for i, fid in enumerate(ids)}
    (bench.root / "negatives_seed5_max1.json").write_text(json.dumps({
        "format": NEGATIVES_FORMAT, "benchmark_checksum": bench.checksum(), "seed": 5,
        "max_per_fact": 1, "negatives": twins}))
    sanity = _checks(tmp_path, bench, run, negatives={"max_per_fact": 1, "seed": 5}, **PCA)
    check = sanity["checks"]["relation_matched_negatives"]
    assert json.loads((run / "metrics" / "negatives.json").read_text())["negatives"] == twins
    assert check["status"] == "fail"
    assert check["same_relation"]["s_background"] < -0.2 < check["random_other_relations"][
        "s_background"]


def test_raw_vs_transported_not_applicable_under_full_rank_whitening(tmp_path):
    # full PCA whitening (k = d) is invariant to any invertible J: raw == transported by
    # construction, so the check says why it cannot apply instead of failing the model
    bench = make_bench(tmp_path, sizes=(20, 20))
    run = make_run(tmp_path, bench, d=D16)
    check = _checks(tmp_path, bench, run)["checks"]["raw_vs_transported"]
    assert check["status"] == "not_applicable" and "full-rank" in check["reason"]


def test_raw_vs_transported_fails_when_the_transport_does_nothing(tmp_path):
    # k < d, but J is within ~1e-5 of the identity: accepted as a transport (not exactly I),
    # yet raw and transported ISS agree -> the ablation must flag it
    from fks.metrics._synthetic import write_synthetic_jlens

    bench = make_bench(tmp_path, sizes=(20, 20))
    run = make_run(tmp_path, bench, d=D16)
    write_synthetic_jlens(run, d=D16, layers=range(L), n_layers=L, strength=2e-5)
    check = _checks(tmp_path, bench, run, **PCA)["checks"]["raw_vs_transported"]
    assert check["status"] == "fail" and check["mean_abs_difference"] < 1e-4


# ----------------------------------------------------------------- the pure check rules
def _scores(iss, geo=0.0, top1=0.1, chance=0.1, kts=0.5):
    return {"iss": iss, "kts_geo_raw_spearman": geo, "top1": top1, "chance": chance,
            "kts_id": 0.0, "kts": kts}


def test_pure_rules():
    assert check_query_shuffle(_scores(0.6), _scores(0.01), TOL)["status"] == "pass"
    assert check_query_shuffle(_scores(0.6), _scores(0.01, geo=0.3), TOL)["status"] == "fail"
    assert check_query_shuffle(_scores(0.6), _scores(0.01, top1=0.4), TOL)["status"] == "fail"
    assert check_query_shuffle(_scores(None), _scores(None), TOL)["status"] == "not_applicable"
    assert check_label_shuffle(_scores(0.5), _scores(0.49), TOL)["status"] == "pass"
    assert check_label_shuffle(_scores(0.5, kts=0.9), _scores(0.5), TOL)["status"] == "fail"
    assert check_relation_negatives({"iss": 0.5}, {"iss": 0.45}, TOL, 0.04)["status"] == "pass"
    assert check_relation_negatives({"iss": 0.5}, {"iss": 0.45}, TOL, 0.0)["status"] == "fail"
    ok = check_duplicate_query(np.ones(5), np.ones(3), None, 0, TOL)
    assert ok["status"] == "pass" and ok["criteria"]["identical_prompts_cosine"] is None
    assert check_duplicate_query(np.array([1.0, 0.99]), np.ones(3), None, 0, TOL)["status"] \
        == "fail"
    same = np.array([0.2, np.nan, 0.4])
    assert check_raw_vs_transported(same, same.copy(), TOL)["status"] == "fail"
    assert check_raw_vs_transported(same, same + 0.01, TOL)["status"] == "pass"
    assert check_raw_vs_transported(None, None, TOL, "no jlens")["status"] == "not_applicable"


def test_permute_within_keeps_strata():
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 4, 200)
    perm = permute_within(codes, rng)
    assert sorted(perm.tolist()) == list(range(200))
    assert (codes[perm] == codes).all() and (perm != np.arange(200)).sum() > 100


def test_tolerances_are_recorded(tmp_path):
    assert load_configs([]).metrics.whitening.seed  # the sanity seed comes from the config
    assert set(TOL.as_dict()) == {"null_abs", "min_drop", "min_cosine", "label_shuffle_margin",
                                  "negatives_margin", "min_transport_diff"}
