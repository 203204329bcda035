"""The vectorised ISS/KTS engine against the kernels, planted structure, and its outputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.spatial.distance
import scipy.stats
from internal_synth import D, L, configs, main_queries, make_bench, make_run

from fks.errors import FksInputError
from fks.hidden.jlens import load_jlens
from fks.hidden.store import HiddenStore
from fks.metrics.behavior import readings_for
from fks.metrics.internal import (
    compute_iss_for_fact,
    cross_condition_top1,
    family_centroid,
    run_internal_metrics,
)
from fks.metrics.internal.engine import build_design, load_layer, window_layers
from fks.metrics.internal.negatives import negatives_from_lists, sample_negatives
from fks.metrics.internal.scores import RelationGrams, iss_from_pairs, kts_pair, pair_scores
from fks.metrics.internal.space import embed, family_centroids, pairs_of

FAMS = ["anchor", "paraphrase", "format", "context", "multilingual"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("iss")
    bench = make_bench(root)
    run = make_run(root, bench, signal=1.0)
    return root, bench, run


def reference_centroids(bench, x, J, cfg):
    """Spec §7.3-7.6 the slow way: transport rows, explicit group means, numpy eigh on the data
    covariance, whiten, then the §16.2 kernel per (fact, family)."""
    qs = main_queries(bench)
    Z = x @ J.T if J is not None else x.copy()
    rel = np.array([q.relation for q in qs])
    fam = np.array([q.condition_family for q in qs])
    mu = Z.mean(axis=0)
    mu_r = {r: Z[rel == r].mean(axis=0) for r in set(rel)}
    mu_t = {t: Z[fam == t].mean(axis=0) for t in set(fam)}
    Zb = np.stack([Z[i] - mu_r[rel[i]] - mu_t[fam[i]] + mu for i in range(len(Z))])
    cov = Zb.T @ Zb / len(Zb)
    if cfg.method == "pca":
        w, U = np.linalg.eigh(cov)
        w, U = w[::-1][:cfg.pca_max_dim], U[:, ::-1][:, :cfg.pca_max_dim]
        Zw = Zb @ (U / np.sqrt(w))
    else:
        a = cfg.shrinkage_lambda
        S = (1 - a) * cov + a * np.trace(cov) / len(cov) * np.eye(len(cov))
        w, U = np.linalg.eigh(S)
        Zw = Zb @ (U @ np.diag(w ** -0.5) @ U.T)
    out = {}
    for fid in {q.fact_id for q in qs}:
        for t in FAMS:
            rows = [i for i, q in enumerate(qs) if q.fact_id == fid and q.condition_family == t]
            if rows:
                out[(fid, t)] = family_centroid(Zw[rows])
    return out


@pytest.mark.parametrize("whitening,max_neg", [
    ({"method": "pca", "pca_max_dim": 8}, 5),
    ({"method": "pca", "pca_max_dim": 512}, 100),
    ({"method": "shrinkage", "shrinkage_lambda": 0.3}, 7),
])
def test_vectorised_layer_matches_kernels(world, whitening, max_neg):
    root, bench, run = world
    cfg = configs(root, whitening=whitening, negatives={"max_per_fact": max_neg})
    m = cfg.metrics
    store = HiddenStore(run)
    design = build_design(bench, store, FAMS)
    layer = window_layers(L, m.layer_window_min_frac)[1]
    x = load_layer(store, layer, design).astype(np.float64)
    J = np.asarray(load_jlens(run)[layer], dtype=np.float64)
    q, _, _ = embed(x.copy(), design, J, m.whitening, m.eps)
    V = family_centroids(q, design, m.eps)
    ref = reference_centroids(bench, x, J, m.whitening)
    fids = design.fact_ids.tolist()

    # centroids: every cosine (the whitened basis itself is only defined up to rotation)
    for i, ti in enumerate(design.families):
        for j, tj in enumerate(design.families):
            for a, fa in enumerate(fids):
                for b in (a, (a + 3) % len(fids)):
                    if (fa, ti) in ref and (fids[b], tj) in ref:
                        want = ref[(fa, ti)] @ ref[(fids[b], tj)]
                        assert V[a, i] @ V[b, j] == pytest.approx(want, abs=1e-6)

    # ISS per fact, both readings, against compute_iss_for_fact
    rels = [design.relations[r] for r in design.fact_relation]
    lists = sample_negatives(fids, rels, max_per_fact=max_neg, seed=m.negatives.seed)
    neg = negatives_from_lists(lists, fids, design.fact_relation)
    pairs = pairs_of(design.families)
    ps = pair_scores(V, design.has, neg, pairs)
    for fams in readings_for(m.main_families).values():
        select = np.array([design.families[i] in fams and design.families[j] in fams
                           for i, j in pairs])
        got = iss_from_pairs(ps, select, m.eps)
        n_checked = 0
        for a, fid in enumerate(fids):
            fv = {t: ref[(fid, t)] for t in fams if (fid, t) in ref}
            others = [{t: ref[(g, t)] for t in fams if (g, t) in ref} for g in lists[fid]]
            if len(fv) < 2:
                assert got["status"][a] == "fewer_than_two_families"
                continue
            want = compute_iss_for_fact(fv, others, eps=m.eps)
            assert got["status"][a] == "ok"
            for k in ("s_positive", "s_background", "iss"):
                assert got[k][a] == pytest.approx(want[k], abs=1e-6)
            n_checked += 1
        assert n_checked > 30

    # KTS per relation: identity against cross_condition_top1, geometry against scipy
    grams = RelationGrams(V, [np.flatnonzero(design.fact_relation == r)
                              for r in range(len(design.relations))])
    for i, j in pairs:
        shared = design.has[:, i] & design.has[:, j]
        per_rel = kts_pair(grams, i, j, shared, design.relations, min_facts=5)
        assert per_rel
        for rel, got in per_rel.items():
            sub = [f for a, f in enumerate(fids) if shared[a] and rels[a] == rel]
            A = np.array([ref[(f, design.families[i])] for f in sub])
            B = np.array([ref[(f, design.families[j])] for f in sub])
            want = cross_condition_top1(A, B, sub)
            assert got["n"] == len(sub)
            assert got["top1"] == pytest.approx(want["top1_symmetric"], abs=1e-12)
            assert got["chance"] == pytest.approx(want["chance"], abs=1e-12)
            assert got["id"] == pytest.approx(want["chance_corrected"], abs=1e-12)
            rho = scipy.stats.spearmanr(scipy.spatial.distance.pdist(A, "cosine"),
                                        scipy.spatial.distance.pdist(B, "cosine")).statistic
            assert got["rho"] == pytest.approx(rho, abs=1e-6)


def _read_jsonl(path: Path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def outputs(world, tmp_path_factory):
    root, bench, run = world
    res = run_internal_metrics(run, benchmark=bench, configs=configs(root))
    return res, run / "metrics"


def test_end_to_end_iss_equals_float64_reference(world, outputs):
    root, bench, run = world
    _, out = outputs
    cfg = configs(root)
    m = cfg.metrics
    store = HiddenStore(run)
    design = build_design(bench, store, FAMS)
    layer = 3
    x = load_layer(store, layer, design).astype(np.float64)
    ref = reference_centroids(bench, x, np.asarray(load_jlens(run)[layer], float), m.whitening)
    rels = [design.relations[r] for r in design.fact_relation]
    lists = sample_negatives(design.fact_ids.tolist(), rels, max_per_fact=100,
                             seed=m.negatives.seed)
    rows = [r for r in _read_jsonl(out / "iss_per_fact_layer.jsonl") if r["layer"] == layer]
    assert len(rows) == len(bench.facts)
    for r in rows:
        fv = {t: ref[(r["fact_id"], t)] for t in FAMS if (r["fact_id"], t) in ref}
        if r["status"] != "ok":
            assert len(fv) < 2 and r["iss"] is None
            continue
        others = [{t: ref[(g, t)] for t in FAMS if (g, t) in ref} for g in lists[r["fact_id"]]]
        want = compute_iss_for_fact(fv, others)
        # float32 arithmetic in production: agreement to 1e-4 (float64 path: 1e-6, above)
        assert r["iss"] == pytest.approx(want["iss"], abs=1e-4)
        assert r["s_positive"] == pytest.approx(want["s_positive"], abs=1e-4)


def test_output_files_and_spec_fields(world, outputs):
    _, bench, run = world
    res, out = outputs
    for name in ("iss_per_fact_layer.jsonl", "iss_per_fact.jsonl", "iss_model_summary.json",
                 "kts_per_pair_layer.jsonl", "kts_model_summary.json", "sanity_checks.json",
                 "negatives.json"):
        assert (out / name).is_file(), name
    facts = _read_jsonl(out / "iss_per_fact.jsonl")
    assert len(facts) == len(bench.facts)
    assert {"model", "fact_id", "relation", "iss", "iss_peak", "iss_late",
            "layers_used"} <= set(facts[0])  # §17.2
    assert facts[0]["layers_used"] == [2, 3, 4]
    kts = json.loads((out / "kts_model_summary.json").read_text())
    assert {"model", "kts_geo", "kts_id", "kts", "family_pairs", "kts_geo_raw_spearman"} <= \
        set(kts)  # §17.3
    assert len(kts["family_pairs"]) == 10
    pair = kts["family_pairs"]["anchor__paraphrase"]
    assert {"shared_facts", "kts_geo", "kts_id", "kts"} <= set(pair)
    assert kts["kts_geo"] == pytest.approx((kts["kts_geo_raw_spearman"] + 1) / 2)
    # centroids: float16, one row per (fact, family) cell, index names each row
    index = _read_jsonl(out / "hidden_family_centroids" / "index.jsonl")
    arr = np.load(out / "hidden_family_centroids" / "layer_003.npy", allow_pickle=False)
    assert arr.dtype == np.float16 and arr.shape[0] == len(index)
    assert np.allclose(np.linalg.norm(arr.astype(np.float32), axis=1), 1, atol=2e-3)
    manifest = json.loads((run / "evaluation_manifest.json").read_text())
    assert "metrics_internal" in manifest["stages"]


def test_window_aggregates_and_clipping(outputs):
    _, out = outputs
    layer_rows = _read_jsonl(out / "iss_per_fact_layer.jsonl")
    by_fact: dict[str, dict[int, float]] = {}
    for r in layer_rows:
        if r["iss"] is not None:
            by_fact.setdefault(r["fact_id"], {})[r["layer"]] = r["iss"]
            assert r["iss_clip"] == pytest.approx(min(1.0, max(-1.0, r["iss"])))
    for r in _read_jsonl(out / "iss_per_fact.jsonl"):
        if r["iss"] is None:
            continue
        per = by_fact[r["fact_id"]]
        assert r["iss"] == pytest.approx(np.mean(list(per.values())))
        assert r["iss_peak"] == pytest.approx(max(per.values()))
        assert r["iss_late"] == pytest.approx(per[4])  # depth 4/4 >= 0.8; 3/4 is not


def test_coverage_modes_fact_counts_and_equal_pair_weights(world, outputs):
    _, bench, _ = world
    res, _ = outputs
    qs = main_queries(bench)
    fams_of: dict[str, set] = {}
    for q in qs:
        fams_of.setdefault(q.fact_id, set()).add(q.condition_family)
    complete = sum(fams_of.get(f.fact_id, set()) >= set(FAMS) for f in bench.facts)
    sel = res["iss"]["selections"]
    assert sel["with_anchor/complete_family/all"]["n_facts"] == complete
    assert sel["with_anchor/full_set/all"]["n_facts"] == len(bench.facts)
    assert complete < len(bench.facts)  # the synthetic benchmark is ragged
    kts_sel = res["kts"]["selections"]["with_anchor/full_set/all"]
    ml = kts_sel["family_pairs"]["anchor__multilingual"]
    assert ml["shared_facts"] == sum("multilingual" in v for v in fams_of.values())
    for layer, v in kts_sel["per_layer"].items():  # every pair weighs the same
        vals = [p["per_layer"][layer]["kts"] for p in kts_sel["family_pairs"].values()]
        assert v["kts"] == pytest.approx(np.mean(vals))
    assert len(res["kts"]["selections"]["without_anchor/full_set/all"]["family_pairs"]) == 6


@pytest.mark.parametrize("signal", [4.0, 0.0])
def test_planted_structure_is_recovered_and_absent_structure_gives_chance(tmp_path, signal):
    bench = make_bench(tmp_path, sizes=(30, 30))
    run = make_run(tmp_path, bench, signal=signal, noise=1.0)
    res = run_internal_metrics(run, benchmark=bench, configs=configs(tmp_path))
    iss, kts = res["iss"], res["kts"]
    if signal:
        assert iss["iss"] > 0.5 and kts["kts_id"] > 0.5
        assert kts["kts_geo_raw_spearman"] > 0.2 and kts["top1"] > 0.5
    else:
        assert abs(iss["iss"]) < 0.05
        assert kts["kts_id"] < 0.05 and abs(kts["kts_geo_raw_spearman"]) < 0.05
        assert abs(kts["top1"] - kts["selections"]["with_anchor/complete_family/all"]
                   ["family_pairs"]["anchor__format"]["chance"]) < 0.05


def test_negatives_are_stored_once_and_shared_by_models(world, tmp_path):
    root, bench, _ = world
    bdir = tmp_path / "bench"
    shutil.copytree(bench.root, bdir)
    runs = [make_run(tmp_path, bench, name=f"m{k}", seed=k) for k in (1, 2)]
    cfg = configs(tmp_path, negatives={"max_per_fact": 6, "seed": 7})
    for run in runs:
        run_internal_metrics(run, benchmark=bdir, configs=cfg)
    shared = bdir / "negatives_seed7_max6.json"
    assert shared.is_file()
    a, b = (json.loads((r / "metrics" / "negatives.json").read_text()) for r in runs)
    assert a == b == json.loads(shared.read_text())
    assert all(len(v) <= 6 for v in a["negatives"].values())
    # identical fact sets per pair for both models (§8.2)
    ka, kb = (json.loads((r / "metrics" / "kts_model_summary.json").read_text()) for r in runs)
    assert {p: v["fact_set_sha256"] for p, v in ka["family_pairs"].items()} == \
        {p: v["fact_set_sha256"] for p, v in kb["family_pairs"].items()}
    # a stored list that does not fit the benchmark is refused
    doc = json.loads(shared.read_text())
    first = next(iter(doc["negatives"]))
    doc["negatives"][first] = [first]
    shared.write_text(json.dumps(doc))
    with pytest.raises(FksInputError, match=first):
        run_internal_metrics(runs[0], benchmark=bdir, configs=cfg)


def test_behaviour_group_table(world, tmp_path):
    root, bench, run0 = world
    run = tmp_path / "run"
    shutil.copytree(run0, run, ignore=shutil.ignore_patterns("metrics"))
    groups = ["Stable Correct", "Stable Wrong", "Stable Abstention", "Unstable"]
    (run / "metrics").mkdir()
    with (run / "metrics" / "behavioral_per_fact.jsonl").open("w") as fh:
        for k, f in enumerate(bench.facts):
            fh.write(json.dumps({"fact_id": f.fact_id, "behavior_group": groups[k % 4]}) + "\n")
    res = run_internal_metrics(run, benchmark=bench, configs=configs(tmp_path))
    table = res["kts"]["tables"]["by_behavior_group"]
    full = {r["behavior_group"]: r for r in table if r["coverage"] == "full_set"}
    assert set(full) == set(groups)
    assert sum(r["facts"] for r in full.values()) == len(bench.facts)
    assert all(r["iss"] is not None for r in full.values())
    rows = _read_jsonl(run / "metrics" / "iss_per_fact.jsonl")
    assert rows[5]["behavior_group"] == groups[1]
    by_pair = res["kts"]["tables"]["by_pair"]
    assert {r["pair"] for r in by_pair} >= {"anchor__paraphrase", "context__multilingual"}


def test_transport_choices(world, tmp_path):
    root, bench, _ = world
    run = make_run(tmp_path, bench, jlens=False)
    with pytest.raises(FksInputError, match="--transport raw"):
        run_internal_metrics(run, benchmark=bench, configs=configs(tmp_path))
    res = run_internal_metrics(run, benchmark=bench, configs=configs(tmp_path), transport="raw")
    assert res["iss"]["transport"] == "raw"
    assert res["sanity"]["checks"]["raw_vs_transported"]["status"] == "not_applicable"
    from fks.hidden.jlens import save_jlens

    save_jlens(run, {x: np.eye(D, dtype=np.float32) for x in range(L)}, {"n": 0})
    with pytest.raises(FksInputError, match="identity"):
        run_internal_metrics(run, benchmark=bench, configs=configs(tmp_path))
    with pytest.raises(FksInputError, match="transport"):
        run_internal_metrics(run, benchmark=bench, configs=configs(tmp_path), transport="x")


def _fks(*args) -> int:
    from fks.cli import main

    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return int(exc.value.code or 0)


def test_cli_metrics_internal_part(world, tmp_path, capsys):
    root, bench, run0 = world
    run = tmp_path / "run"
    shutil.copytree(run0, run, ignore=shutil.ignore_patterns("metrics"))
    assert _fks("metrics", run, "--part", "internal", "--benchmark", bench.root) == 0
    assert (run / "metrics" / "kts_model_summary.json").is_file()
    # the benchmark path comes from the run manifest when not given
    manifest = json.loads((run / "evaluation_manifest.json").read_text())
    manifest["benchmark"] = {"path": str(bench.root)}
    (run / "evaluation_manifest.json").write_text(json.dumps(manifest))
    assert _fks("metrics", run, "--part", "internal", "--transport", "raw") == 0
    assert json.loads((run / "metrics" / "iss_model_summary.json").read_text())[
        "transport"] == "raw"
    shutil.rmtree(run / "jlens")
    capsys.readouterr()
    assert _fks("metrics", run, "--part", "internal") == 2
    assert "--transport raw" in capsys.readouterr().err


def test_fast_ranks_equal_scipy_rankdata():
    from fks.metrics.internal.scores import _ranks

    rng = np.random.default_rng(0)
    x = rng.standard_normal(500)
    np.testing.assert_array_equal(_ranks(x), scipy.stats.rankdata(x))
    x[::7] = 0.25  # ties: averaged
    np.testing.assert_array_equal(_ranks(x), scipy.stats.rankdata(x))
