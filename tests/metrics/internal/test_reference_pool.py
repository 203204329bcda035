"""The reference pool (issue 27): a slice's ISS in the full benchmark's geometry."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from internal_synth import L, configs, main_queries, make_bench

from fks.data.load import load_benchmark
from fks.errors import FksInputError
from fks.hidden.store import REFERENCE_DIR
from fks.metrics.internal import run_internal_metrics
from fks.metrics.internal.synthetic import planted_states, write_synthetic_store
from fks.pipeline import limit_facts

D = 48
SIZES = (60, 60, 60)  # 180 facts: the full benchmark has many more facts than dimensions


def _fixed_states(bench, **planted):
    """States computed once for every main query of ``bench`` (the same at every slice)."""
    fn = planted_states(bench, d=D, n_layers=L, **planted)
    n = len(main_queries(bench))
    X = {layer: fn(layer, np.arange(n)) for layer in range(L)}
    pos = {q.query_id: i for i, q in enumerate(main_queries(bench))}
    return X, pos


def _store(run, bench, X, pos, model="m"):
    rows = np.array([pos[q.query_id] for q in main_queries(bench)])
    write_synthetic_store(run, bench, lambda layer, idx: X[layer][rows[idx]], d=D,
                          n_layers=L, model=model)


def _iss(run, bench, tmp_path, **metrics):
    res = run_internal_metrics(run, benchmark=bench, configs=configs(tmp_path, **metrics),
                               transport="raw")
    return res["iss"]


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    root = tmp_path_factory.mktemp("pool")
    bench = make_bench(root, sizes=SIZES)
    X, pos = _fixed_states(bench, signal=0.6, noise=1.0)
    run = root / "full"
    _store(run, bench, X, pos)
    return root, bench, X, pos, run


def _slice(full, n, name, tmp_path, *, pool=True, pool_model="m"):
    root, bench, X, pos, full_run = full
    sub = load_benchmark(limit_facts(bench, n, tmp_path / f"{name}_bench"))
    run = tmp_path / name
    _store(run, sub, X, pos)
    if pool:
        shutil.copytree(full_run / "hidden", run / REFERENCE_DIR / "hidden")
        if pool_model != "m":
            meta = run / REFERENCE_DIR / "hidden" / "meta.json"
            doc = json.loads(meta.read_text())
            doc["model"] = pool_model
            meta.write_text(json.dumps(doc))
    return run, sub


def test_a_slice_reads_like_the_full_benchmark_with_the_pool(full, tmp_path):
    root, bench, _, _, full_run = full
    want = _iss(full_run, bench, tmp_path)["iss"]
    run, sub = _slice(full, 24, "slice", tmp_path)
    got = _iss(run, sub, tmp_path)
    assert got["whitening_fitted_on"] == "reference pool"
    assert got["reference_pool"]["n_facts"] == len(bench.facts)
    own, own_sub = _slice(full, 24, "own", tmp_path, pool=False)
    in_sample = _iss(own, own_sub, tmp_path)["iss"]
    # fitted on the slice itself the whitening scales down the slice's own fact directions
    assert in_sample < want - 0.1
    assert abs(got["iss"] - want) < 0.05
    # the unwhitened figure is reported beside, with its interval
    unw = got["unwhitened"]
    assert unw["iss_interval"]["low"] <= unw["iss"] <= unw["iss_interval"]["high"]


def test_the_pool_switch_turns_it_off(full, tmp_path):
    run, sub = _slice(full, 24, "slice", tmp_path)
    off = _iss(run, sub, tmp_path, whitening={"reference": False})
    assert off["whitening_fitted_on"] == "the run's own main queries"
    assert off["reference_pool"] is None


def test_a_pool_equal_to_the_run_changes_nothing(full, tmp_path):
    root, bench, X, pos, _ = full
    run = tmp_path / "same"
    _store(run, bench, X, pos)
    without = _iss(run, bench, tmp_path)
    shutil.copytree(run / "hidden", run / REFERENCE_DIR / "hidden")
    with_pool = _iss(run, bench, tmp_path)
    assert with_pool["whitening_fitted_on"] == "reference pool"
    for key in ("iss", "iss_peak", "iss_late"):
        assert with_pool[key] == pytest.approx(without[key], abs=1e-9)


def test_a_pool_of_another_model_is_refused(full, tmp_path):
    run, sub = _slice(full, 24, "other", tmp_path, pool_model="other-model")
    with pytest.raises(FksInputError, match="one model per run") as err:
        _iss(run, sub, tmp_path)
    assert err.value.field == "model"


def test_a_pool_without_a_query_of_the_run_is_refused(full, tmp_path):
    root, bench, X, pos, _ = full
    sub = load_benchmark(limit_facts(bench, 24, tmp_path / "sub_bench"))
    keep = {f.fact_id for f in bench.facts} - {sub.facts[0].fact_id}
    part = load_benchmark(_write_facts(bench, keep, tmp_path / "part_bench"))
    run = tmp_path / "missing"
    _store(run, sub, X, pos)
    _store(tmp_path / "pool_src", part, X, pos)
    shutil.copytree(tmp_path / "pool_src" / "hidden", run / REFERENCE_DIR / "hidden")
    with pytest.raises(FksInputError, match="not in the reference pool") as err:
        _iss(run, sub, tmp_path)
    assert err.value.field == "query_id"


def _write_facts(bench, keep, out):
    from fks.io import atomic_write_jsonl

    facts = [f for f in bench.facts if f.fact_id in keep]
    queries = [q for q in bench.queries if q.fact_id in keep]
    out.mkdir(parents=True)
    atomic_write_jsonl(out / f"benchmark_facts_{len(facts)}.jsonl", facts)
    atomic_write_jsonl(out / f"evaluation_queries_{len(queries)}.jsonl", queries)
    return out


def test_design_determined_iss_is_null_with_the_reason(tmp_path):
    # 10 facts, ~150 main queries, d = 200 > rank bound: PCA keeps every residual dimension,
    # so the whitened cosines are the design's; the headline is withheld, never 0.000
    bench = make_bench(tmp_path, sizes=(5, 5))
    n = len(main_queries(bench))
    d = n + 40
    fn = planted_states(bench, d=d, n_layers=L, signal=1.0)
    write_synthetic_store(tmp_path / "run", bench, fn, d=d, n_layers=L)
    res = run_internal_metrics(tmp_path / "run", benchmark=bench, transport="raw",
                               configs=configs(tmp_path, whitening={"reference": True}))
    iss, kts = res["iss"], res["kts"]
    assert iss["iss"] is None and "design-determined" in iss["iss_undefined_reason"]
    assert kts["kts"] is None and kts["kts_undefined_reason"] == iss["iss_undefined_reason"]
    assert iss["unwhitened"]["iss"] is not None


# ------------------------------------------------------------------ KTS-ID against the pool
def _kts(run, bench, tmp_path, **metrics):
    return run_internal_metrics(run, benchmark=bench, configs=configs(tmp_path, **metrics),
                                transport="raw")["kts"]


def test_pool_identity_is_the_spec_identity_when_the_pool_is_the_run():
    from fks.metrics.internal.scores import BlockGrams, PoolIdentity, kts_pair

    rng = np.random.default_rng(3)
    F, T = 36, 3
    V = rng.standard_normal((F, T, 8)).astype(np.float32)
    V /= np.linalg.norm(V, axis=2, keepdims=True)
    has = rng.random((F, T)) > 0.15
    rel = np.repeat(np.arange(3), 12)
    pairs = [(0, 1), (0, 2), (1, 2)]
    ident = PoolIdentity.from_pool(V, has, rel, np.arange(F), pairs)
    grams = BlockGrams(V, tuple(np.flatnonzero(rel == r) for r in range(3)))
    for t, u in pairs:
        shared = has[:, t] & has[:, u]
        spec = kts_pair(grams, t, u, shared, ("a", "b", "c"), min_facts=3)
        pooled = kts_pair(grams, t, u, shared, ("a", "b", "c"), min_facts=3, pool=ident)
        assert spec.keys() == pooled.keys() and spec
        for r in spec:
            for key in ("top1_ab", "top1_ba", "top5", "mrr", "chance", "id", "rho"):
                assert pooled[r][key] == pytest.approx(spec[r][key], abs=1e-12), (r, key)


def test_a_slice_identifies_its_facts_among_the_pool_facts_of_their_relation(full, tmp_path):
    from fks.metrics.stats.clustered_bootstrap import kts_point
    from fks.report.inputs import CentroidStore

    run, sub = _slice(full, 24, "slice", tmp_path)
    kts = _kts(run, sub, tmp_path)
    assert kts["kts_id_candidates"].startswith("the reference pool's facts")
    rows = [json.loads(x) for x in (run / "metrics" / "kts_per_pair_layer.jsonl").open()]
    head = [r for r in rows if r["selection"] == kts["kts_headline"]["selection"]]
    # 8 facts of each relation in the slice, 55-60 with both families in the pool: the
    # chance is about 1/60, not 1/8
    assert head and all(1 / r["chance"] > 50 for r in head)
    # the bootstrap reads the same identification from the centroid store
    store = CentroidStore.open(run / "metrics" / "hidden_family_centroids")
    assert store is not None and store.identity_facts is not None
    ids = np.array([f.fact_id for f in sub.facts])
    space = store.space(ids, store.families, min_facts=5, eps=1e-12)
    point = kts_point(space, np.array([f.relation.relation_id for f in sub.facts]))
    assert float(point.summary()["kts_id"]) == pytest.approx(kts["kts_id"], abs=1e-6)


def _among_the_run(run, bench):
    """KTS-ID of the run's centroids with the spec's identification among its own facts."""
    import dataclasses

    from fks.metrics.stats.clustered_bootstrap import kts_point
    from fks.report.inputs import CentroidStore

    store = CentroidStore.open(run / "metrics" / "hidden_family_centroids")
    space = store.space(np.array([f.fact_id for f in bench.facts]), store.families,
                        min_facts=5, eps=1e-12)
    rel = np.array([f.relation.relation_id for f in bench.facts])
    return float(kts_point(dataclasses.replace(space, identity=None), rel).summary()["kts_id"])


def test_pure_noise_kts_does_not_grow_on_a_slice_with_the_pool(tmp_path):
    root = tmp_path / "noise"
    bench = make_bench(root, sizes=SIZES)
    X, pos = _fixed_states(bench, signal=0.0, noise=1.0)
    full_run = root / "full"
    _store(full_run, bench, X, pos)
    want = _kts(full_run, bench, tmp_path)["kts_id"]
    sub = load_benchmark(limit_facts(bench, 24, tmp_path / "b"))
    run = tmp_path / "pooled"
    _store(run, sub, X, pos)
    shutil.copytree(full_run / "hidden", run / REFERENCE_DIR / "hidden")
    got = _kts(run, sub, tmp_path)["kts_id"]
    old = _among_the_run(run, sub)  # the same centroids, ranked among the slice's 8 facts
    print(f"noise KTS-ID: full {want:.4f}, slice {got:.4f}, among the slice {old:.4f}")
    assert abs(got - want) < 0.02
    assert old > got + 0.02
