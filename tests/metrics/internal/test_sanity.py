"""The §18.1-18.5 sanity checks: they pass on planted structure and each fails on a
constructed counter-example."""

from __future__ import annotations

import json

import numpy as np
import pytest
from internal_synth import L, configs, main_queries, make_bench, make_run

from fks.configs import load_configs
from fks.metrics.internal import run_internal_metrics
from fks.metrics.internal.checks import permute_within
from fks.metrics.internal.negatives import NEGATIVES_FORMAT
from fks.metrics.internal.sanity import (
    SanityTolerances,
    check_duplicate_query,
    check_label_shuffle,
    check_query_shuffle,
    check_raw_vs_transported,
    check_relation_negatives,
    duplicate_cosine_gap,
    sanity_line,
)
from fks.metrics.internal.synthetic import planted_states, published_counts

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

    run = make_run(tmp_path, bench, d=D16, states=states, duplicate=8)
    sanity = _checks(tmp_path, bench, run, **PCA)
    assert sanity["layer"] == 3  # depth 0.75, the window layer nearest 0.7
    statuses = {k: v["status"] for k, v in sanity["checks"].items()}
    assert statuses == dict.fromkeys(statuses, "pass"), sanity["checks"]
    dup = sanity["checks"]["duplicate_query"]
    assert dup["identical_prompt_groups"] == 2 and dup["identical_prompts_min_cosine"] > 0.999
    assert dup["second_pass"]["n_queries"] == 8
    assert sanity["summary"]["all_pass"]
    assert sanity_line(sanity).startswith("sanity checks (spec §18, layer 3): 5 pass, 0 FAIL")


def test_query_shuffle_fails_without_fact_identity(tmp_path):
    bench = make_bench(tmp_path, sizes=(30, 30))
    run = make_run(tmp_path, bench, d=D16, signal=0.0)
    check = _checks(tmp_path, bench, run, **PCA)["checks"]["query_shuffle"]
    assert check["status"] == "fail" and check["criteria"]["iss_drops_beyond_noise"] is False


def test_query_shuffle_judges_a_small_iss_by_its_noise_not_a_fixed_drop(tmp_path):
    # a weak but well-measured fact signal (ISS about 0.045, below the former fixed 0.05 drop,
    # like SmolLM2-135M's 0.048): the drop's bootstrap interval lies above 0, so it passes
    bench = make_bench(tmp_path, sizes=(80, 80, 80))
    run = make_run(tmp_path, bench, d=D16, signal=0.12)
    check = _checks(tmp_path, bench, run, **PCA)["checks"]["query_shuffle"]
    assert check["iss_drop"] < 0.05
    assert check["iss_drop_interval"]["low"] > 0 and check["status"] == "pass"


def test_duplicate_query_fails_when_identical_prompts_differ(tmp_path):
    bench = make_bench(tmp_path, sizes=(30, 30), duplicate_prompts=3)
    run = make_run(tmp_path, bench, d=D16, signal=2.0)  # fresh noise per row: duplicates differ
    check = _checks(tmp_path, bench, run, **PCA)["checks"]["duplicate_query"]
    assert check["status"] == "fail"
    assert check["criteria"]["identical_prompts_cosine"] is False
    assert check["criteria"]["identical_prompts_raw_cosine"] is False
    assert check["identical_prompts_cosine_needed"] > check["identical_prompts_min_cosine"]
    assert check["second_pass"] is None and "duplicate_pass.npz" in check["second_pass_reason"]


def test_duplicate_query_second_pass_fails_when_extraction_is_not_reproducible(tmp_path):
    # the second forward pass gives other states (relative noise 1e-2 per component, far
    # above what float16 storage explains): the check must see it; re-projecting stored rows
    # through the same map (the former check) could not
    bench = make_bench(tmp_path, sizes=(20, 20))
    run = make_run(tmp_path, bench, d=D16, duplicate=12, duplicate_noise=1e-2)
    check = _checks(tmp_path, bench, run, **PCA)["checks"]["duplicate_query"]
    assert check["status"] == "fail" and check["criteria"]["second_pass_raw_cosine"] is False
    assert check["second_pass"]["raw_min_cosine"] < check["second_pass"]["raw_cosine_needed"]
    assert check["criteria"]["second_pass_processed_cosine"] is False  # propagated rule too
    clean = make_run(tmp_path, bench, name="clean", d=D16, duplicate=12)
    ok = _checks(tmp_path, bench, clean, **PCA)["checks"]["duplicate_query"]
    assert ok["status"] == "pass" and ok["second_pass"]["n_queries"] == 12
    # float16 storage alone: 1 - cos well inside the stated tolerance
    assert 1 - ok["second_pass"]["raw_min_cosine"] < duplicate_cosine_gap("float32") / 4


def test_duplicate_cosine_gap_follows_the_dtypes():
    assert duplicate_cosine_gap("float32") == pytest.approx(8 * 2.0 ** -22)
    assert duplicate_cosine_gap("float16") == duplicate_cosine_gap("float32")
    assert duplicate_cosine_gap("torch.bfloat16") == pytest.approx(8 * 2.0 ** -16)
    # rounding in each block adds up: bf16 at block 30 (SmolLM2's last layer)
    assert duplicate_cosine_gap("bfloat16", 30) == pytest.approx(30 * 8 * 2.0 ** -16)
    # the float16 store dominates a float32 pass at any usual depth
    assert duplicate_cosine_gap("float32", 30) == pytest.approx(8 * 2.0 ** -22)
    # measured on SmolLM2-135M in bf16 (batched vs one prompt at a time, layer 29): 1 - cos =
    # 3.75e-4, which the one-rounding bound (1.2e-4) failed although the model was right
    assert 1 - 0.9996245873059405 < duplicate_cosine_gap("bfloat16", 30)
    assert 1 - 0.9996245873059405 > duplicate_cosine_gap("bfloat16", 1)


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
    assert check["criteria"]["real_iss_not_above_shuffled"] is False
    assert check["iss_excess_interval"]["low"] > TOL.label_shuffle_margin


def test_label_shuffle_passes_a_healthy_model_with_family_effects(tmp_path):
    # family main effects (removed by §7.4 with the real labels, not with shuffled ones) make
    # the refit control less stable than the real run; that is no spurious stability
    bench = make_bench(tmp_path, sizes=(40, 40))
    run = make_run(tmp_path, bench, d=D16, signal=2.0, family_shift=2.0)
    check = _checks(tmp_path, bench, run, **PCA)["checks"]["condition_label_shuffle"]
    assert check["status"] == "pass", check["criteria"]
    assert check["refit_with_shuffled_labels"]["iss"] < check["real"]["iss"]
    assert check["criteria"] == {"real_iss_not_above_shuffled": True,
                                 "refit_iss_not_above_shuffled": True}


def test_label_shuffle_refit_fails_when_residualisation_creates_stability(tmp_path, monkeypatch):
    # a planted faulty residualisation: it also removes every (fact, family) cell's deviation
    # from its fact mean, so any grouping's centroids agree. Refitted on the shuffled labels,
    # the control becomes far more stable than the exchangeable reference -- stability made
    # by the residualisation from the labels
    import fks.metrics.internal.reference as reference_mod
    from fks.metrics.internal import space as _space

    def faulty_embed(x, design, J, cfg, eps):
        res = _space.fit_residualizer(x, design.relation, design.family,
                                      len(design.relations), len(design.all_families))
        res.apply_(x, design.relation, design.family)
        def means(codes):
            _, inv = np.unique(codes, return_inverse=True)
            sums = np.zeros((inv.max() + 1, x.shape[1]))
            np.add.at(sums, inv, x)
            return (sums / np.bincount(inv)[:, None])[inv]

        # removes each (fact, family) cell's deviation from its fact mean
        x -= (means(design.fact * 16 + design.family) - means(design.fact)).astype(x.dtype)
        wh = _space.fit_whitening(x, J, cfg)
        return _space.project_normalize(x, wh, eps), res, wh

    def embed(x, design, J, cfg, eps):  # only the refit control gets the faulty step
        import inspect

        caller = inspect.stack()[2].function  # [1] is reference.embed_run (no pool here)
        return (faulty_embed if caller == "_label_shuffle" else _space.embed)(
            x, design, J, cfg, eps)

    monkeypatch.setattr(reference_mod, "embed", embed)
    bench = make_bench(tmp_path, sizes=(30, 30))
    run = make_run(tmp_path, bench, d=D16, signal=0.5, noise=2.0)
    check = _checks(tmp_path, bench, run, **PCA)["checks"]["condition_label_shuffle"]
    assert check["criteria"]["refit_iss_not_above_shuffled"] is False, check
    assert check["status"] == "fail"


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


def _least_similar_negatives(bench, k):
    """Per fact, the ``k`` facts of its relation least similar at the planted level."""
    a = np.random.default_rng(0).standard_normal((len(bench.facts), D16), dtype=np.float32)
    ids = [f.fact_id for f in bench.facts]
    rel = [f.relation.relation_id for f in bench.facts]
    out = {}
    for i, fid in enumerate(ids):
        same = [j for j in range(len(ids)) if rel[j] == rel[i] and j != i]
        out[fid] = [ids[j] for j in sorted(same, key=lambda j: float(a[i] @ a[j]))[:k]]
    return out


def test_relation_negatives_fail_when_mildly_laxer_beyond_noise(tmp_path):
    # the 20 least similar of 39 same-relation facts: laxer than random negatives by ~0.04,
    # which the former fixed allowance (0.02 + mean 1/(n_r - 1) = 0.046) swallowed
    bench = make_bench(tmp_path, sizes=(40, 40, 40))
    run = make_run(tmp_path, bench, d=D16, signal=1.0, relation_shift=0.0)
    (bench.root / "negatives_seed5_max20.json").write_text(json.dumps({
        "format": NEGATIVES_FORMAT, "benchmark_checksum": bench.checksum(), "seed": 5,
        "max_per_fact": 20, "negatives": _least_similar_negatives(bench, 20)}))
    sanity = _checks(tmp_path, bench, run, negatives={"max_per_fact": 20, "seed": 5}, **PCA)
    check = sanity["checks"]["relation_matched_negatives"]
    main = check["main_space"]
    assert main["same_relation"]["iss"] - main["random_other_relations"]["iss"] < \
        0.02 + 1 / 39
    assert check["iss_excess_interval"]["low"] > 0 and check["status"] == "fail"
    assert "relation_matched_negatives" in sanity_line(sanity)


def test_relation_negatives_pass_when_only_the_centring_makes_them_look_laxer(tmp_path):
    # the Gemma 3 pattern: after §7.4, same-relation backgrounds are negative and the
    # main-space same-relation ISS is *above* the random-negative one; in the space without
    # the relation-mean removal the same-relation negatives are the stricter ones -> pass
    bench = make_bench(tmp_path, sizes=(40, 40, 40))
    run = make_run(tmp_path, bench, d=D16, signal=1.0, relation_shift=1.0)
    check = _checks(tmp_path, bench, run, **PCA)["checks"]["relation_matched_negatives"]
    main = check["main_space"]
    assert main["same_relation"]["s_background"] < 0 < main["same_relation"]["iss"] \
        - main["random_other_relations"]["iss"]
    assert check["same_relation"]["iss"] < check["random_other_relations"]["iss"]
    assert check["status"] == "pass"


def test_relation_negatives_fail_without_relation_structure(tmp_path):
    # relation_shift = 0: facts of a relation are no closer than facts of different relations,
    # so same-relation negatives are not stricter than random ones -> fail (issue 27; the
    # former "not laxer" rule passed this)
    bench = make_bench(tmp_path, sizes=(40, 40, 40))
    run = make_run(tmp_path, bench, d=D16, signal=1.0, relation_shift=0.0)
    check = _checks(tmp_path, bench, run, **PCA)["checks"]["relation_matched_negatives"]
    assert check["iss_excess_interval"]["low"] < 0 < check["iss_excess_interval"]["high"]
    assert check["criteria"]["same_relation_not_laxer"] is True
    assert check["status"] == "fail"


def test_raw_vs_transported_not_applicable_under_full_rank_whitening(tmp_path):
    # full PCA whitening (k = d) is invariant to any invertible J: raw == transported by
    # construction, so the check says why it cannot apply instead of failing the model
    bench = make_bench(tmp_path, sizes=(20, 20))
    run = make_run(tmp_path, bench, d=D16)
    check = _checks(tmp_path, bench, run)["checks"]["raw_vs_transported"]
    assert check["status"] == "not_applicable" and "full-rank" in check["reason"]


def test_raw_vs_transported_not_applicable_when_whitening_spans_every_residual_dim(tmp_path):
    # d > pca_max_dim, but fewer main queries than pca_max_dim: the whitening keeps every
    # dimension of the residualised states (rank bound), the same invariance as k = d
    bench = make_bench(tmp_path, sizes=(3, 3))
    run = make_run(tmp_path, bench, d=160)
    res = run_internal_metrics(run, benchmark=bench, configs=configs(
        tmp_path, whitening={"method": "pca", "pca_max_dim": 128}))
    check = res["sanity"]["checks"]["raw_vs_transported"]
    assert check["status"] == "not_applicable" and "every component" in check["reason"]
    summary = json.loads((run / "metrics" / "iss_model_summary.json").read_text())
    info = summary["whitening_per_layer"]["3"]
    assert info["design_determined"] and info["k"] == info["rank_bound"] < 128
    assert info["n_dropped_rank_bound"] == 128 - info["rank_bound"]
    assert info["k_requested"] == 128 and info["n_dropped_precision_floor"] == 0
    assert "rank_bound" in summary["whitening"]["numerical_rank_rule"]


def test_raw_vs_transported_fails_when_the_transport_does_nothing(tmp_path):
    # k < d, but J is within ~1e-5 of the identity: accepted as a transport (not exactly I),
    # yet raw and transported ISS agree -> the ablation must flag it
    from fks.metrics.internal.synthetic import write_synthetic_jlens

    bench = make_bench(tmp_path, sizes=(20, 20))
    run = make_run(tmp_path, bench, d=D16)
    write_synthetic_jlens(run, d=D16, layers=range(L), n_layers=L, strength=2e-5)
    check = _checks(tmp_path, bench, run, **PCA)["checks"]["raw_vs_transported"]
    assert check["status"] == "fail" and check["mean_abs_difference"] < 1e-4


def test_raw_vs_transported_covers_the_window_with_raw_figures(tmp_path):
    bench = make_bench(tmp_path, sizes=(20, 20))
    run = make_run(tmp_path, bench, d=D16)
    res = run_internal_metrics(run, benchmark=bench, configs=configs(tmp_path, **PCA))
    check = res["sanity"]["checks"]["raw_vs_transported"]
    window = check["window"]
    assert window["layers"] == [2, 3, 4] and check["status"] == "pass"
    assert check["n_cells"] > len(bench.facts)  # facts x window layers
    assert set(window["raw"]["per_layer"]) == {"2", "3", "4"}
    assert window["transported"]["iss"] == pytest.approx(res["iss"]["iss"], abs=0.05)
    assert window["raw"]["kts"] is not None and window["transported"]["kts"] is not None


# ----------------------------------------------------------------- the pure check rules
def _scores(iss, geo=0.0, top1=0.1, chance=0.1, kts=0.5):
    return {"iss": iss, "kts_geo_raw_spearman": geo, "top1": top1, "chance": chance,
            "kts_id": 0.0, "kts": kts}


def _ci(low):
    return {"mean": low, "low": low, "high": None if low is None else low + 0.1,
            "n_facts": 10, "n_relations": 2}


def test_pure_rules():
    assert check_query_shuffle(_scores(0.6), _scores(0.01), TOL, _ci(0.5))["status"] == "pass"
    assert check_query_shuffle(_scores(0.03), _scores(0.0), TOL, _ci(0.01))["status"] == "pass"
    assert check_query_shuffle(_scores(0.03), _scores(0.0), TOL, _ci(-0.01))["status"] == "fail"
    assert check_query_shuffle(_scores(0.6), _scores(0.01, geo=0.3), TOL, _ci(0.5))["status"] \
        == "fail"
    assert check_query_shuffle(_scores(None), _scores(None), TOL, _ci(None))["status"] \
        == "not_applicable"
    assert check_label_shuffle(_scores(0.5), _scores(0.49), TOL, _ci(0.0))["status"] == "pass"
    assert check_label_shuffle(_scores(0.5), _scores(0.4), TOL, _ci(0.05))["status"] == "fail"
    refit = check_label_shuffle(_scores(0.5), _scores(0.49), TOL, _ci(0.0),
                                refit=_scores(0.7), refit_ci=_ci(0.1))
    assert refit["status"] == "fail" and refit["headline"][:2] == ["ISS refit", 0.7]
    # §18.4 asks for stricter same-relation negatives: the whole interval below 0
    assert check_relation_negatives({"iss": 0.4}, {"iss": 0.5}, TOL, _ci(-0.2))["status"] \
        == "pass"
    assert check_relation_negatives({"iss": 0.5}, {"iss": 0.5}, TOL, _ci(-0.05))["status"] \
        == "fail"  # no relation structure: the interval straddles 0
    assert check_relation_negatives({"iss": 0.5}, {"iss": 0.45}, TOL, _ci(0.02))["status"] \
        == "fail"  # laxer
    fresh = {"raw_cosines": np.ones(5), "processed_cosines": np.ones(5),
             "processed_gap_allowed": np.full(5, 1e-3), "nearest_other_cosines": np.zeros(5),
             "path_cosines": np.ones(5), "path_gap_allowed": np.full(5, 1e-9),
             "duplicate_s_positive": np.ones(3), "s_positive_gap_allowed": np.full(3, 1e-4),
             "s_positive_nearest_other": np.zeros(3), "compute_dtype": "float32"}
    ok = check_duplicate_query(fresh, None, 0, TOL)
    assert ok["status"] == "pass" and ok["criteria"]["identical_prompts_cosine"] is None
    bad = dict(fresh, processed_cosines=np.array([1.0, 0.99, 1, 1, 1]))
    assert check_duplicate_query(bad, None, 0, TOL)["status"] == "fail"
    assert check_duplicate_query(dict(fresh, duplicate_s_positive=np.array([1, 1, 0.999])),
                                 None, 0, TOL)["status"] == "fail"
    assert check_duplicate_query(dict(fresh, path_cosines=np.array([1, 1, 1, 1, 0.99999])),
                                 None, 0, TOL)["status"] == "fail"
    assert check_duplicate_query(None, None, 0, TOL, "none")["status"] == "not_applicable"
    same = np.array([0.2, np.nan, 0.4])
    assert check_raw_vs_transported(same, same.copy(), TOL)["status"] == "fail"
    assert check_raw_vs_transported(same, same + 0.01, TOL)["status"] == "pass"
    assert check_raw_vs_transported(None, None, TOL, "no jlens")["status"] == "not_applicable"


def test_sanity_line_names_the_failed_check_and_its_two_numbers():
    checks = {"query_shuffle": check_query_shuffle(_scores(0.6), _scores(0.01), TOL, _ci(0.5)),
              "condition_label_shuffle": check_label_shuffle(_scores(0.5), _scores(0.4), TOL,
                                                             _ci(0.05))}
    line = sanity_line({"layer": 7, "checks": checks})
    assert line == ("sanity checks (spec §18, layer 7): 1 pass, 1 FAIL, 0 not applicable: "
                    "condition_label_shuffle (ISS real 0.5 vs shuffled 0.4)")
    assert sanity_line(None) == "sanity checks (spec §18): not run"


def test_permute_within_keeps_strata():
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 4, 200)
    perm = permute_within(codes, rng)
    assert sorted(perm.tolist()) == list(range(200))
    assert (codes[perm] == codes).all() and (perm != np.arange(200)).sum() > 100


def test_tolerances_are_recorded(tmp_path):
    assert load_configs([]).metrics.whitening.seed  # the sanity seed comes from the config
    assert set(TOL.as_dict()) == {"null_abs", "min_cosine", "label_shuffle_margin",
                                  "negatives_margin", "min_transport_diff", "n_resamples",
                                  "confidence", "seed"}
    m = configs(tmp_path, sanity={"label_shuffle_margin": 0.03}).metrics
    assert SanityTolerances.from_config(m).label_shuffle_margin == 0.03
