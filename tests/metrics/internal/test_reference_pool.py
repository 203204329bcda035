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
