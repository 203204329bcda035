"""Bad inputs of the ISS/KTS engine give FksInputError naming the query_id and/or the layer."""

from __future__ import annotations

import json

import numpy as np
import pytest
from internal_synth import D, L, configs, main_queries, make_bench, make_run

from fks.errors import FksInputError
from fks.hidden.jlens import save_jlens
from fks.metrics.internal import run_internal_metrics
from fks.metrics.internal.synthetic import planted_states


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    return make_bench(tmp_path_factory.mktemp("bad"), sizes=(8, 8))


def _run(run, bench, tmp_path, **kw):
    return run_internal_metrics(run, benchmark=bench, configs=configs(tmp_path), **kw)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
@pytest.mark.parametrize("value", [np.nan, np.inf, 1e6])  # 1e6 overflows float16 to inf
def test_non_finite_row_names_query_and_layer(bench, tmp_path, value):
    base = planted_states(bench, d=D, n_layers=L)
    victim = 7

    def states(layer, idx):
        out = base(layer, idx)
        if layer == 3:
            out[idx == victim, 2] = value
        return out

    run = make_run(tmp_path, bench, states=states)
    qid = main_queries(bench)[victim].query_id
    with pytest.raises(FksInputError) as err:
        _run(run, bench, tmp_path)
    assert qid in str(err.value) and "layer 3" in str(err.value)


def test_layer_with_wrong_width_names_layer(bench, tmp_path):
    run = make_run(tmp_path, bench)
    path = run / "hidden" / "layer_004.npy"
    n = np.load(path, mmap_mode="r").shape[0]
    np.save(path, np.zeros((n, D + 1), dtype=np.float16))
    with pytest.raises(FksInputError, match="layer 4"):
        _run(run, bench, tmp_path)


def test_jlens_with_wrong_width_names_layer(bench, tmp_path):
    run = make_run(tmp_path, bench, jlens=False)
    save_jlens(run, {x: np.eye(D + 2, dtype=np.float32) * 2 for x in range(L)}, {"n": 0})
    with pytest.raises(FksInputError, match="layer 2"):
        _run(run, bench, tmp_path)


def test_missing_window_layer_names_layer(bench, tmp_path):
    run = make_run(tmp_path, bench, layers=[0, 1, 2, 4])
    with pytest.raises(FksInputError, match="window layer 3"):
        _run(run, bench, tmp_path, transport="raw")


def _edit_index(run, line_no, **changes):
    path = run / "hidden" / "index.jsonl"
    lines = path.read_text().splitlines()
    rec = json.loads(lines[line_no])
    rec.update(changes)
    lines[line_no] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    return rec


def test_index_row_disagreeing_with_benchmark_names_query(bench, tmp_path):
    run = make_run(tmp_path, bench)
    other = main_queries(bench)[-1].fact_id
    rec = _edit_index(run, 5, fact_id=other)
    with pytest.raises(FksInputError) as err:
        _run(run, bench, tmp_path)
    msg = str(err.value)
    assert rec["query_id"] in msg and "fact_id" in msg and ":6:" in msg


def test_index_query_unknown_to_benchmark(bench, tmp_path):
    run = make_run(tmp_path, bench)
    _edit_index(run, 2, query_id="query_99999999")
    with pytest.raises(FksInputError, match="query_99999999 is not a query of the benchmark"):
        _run(run, bench, tmp_path)


def _bench_plus_one_query(bench, root):
    """A copy of the benchmark with one more main-forward query (a new id)."""
    import shutil

    from fks.data.load import load_benchmark

    shutil.copytree(bench.root, root)
    qpath = next(root.glob("evaluation_queries_*.jsonl"))
    lines = qpath.read_text().splitlines()
    extra = json.loads(lines[-1])
    extra["query_id"] = "query_99999998"
    extra["query"] += " (again)"
    qpath.unlink()
    (root / f"evaluation_queries_{len(lines) + 1}.jsonl").write_text(
        "\n".join([*lines, json.dumps(extra)]) + "\n")
    return load_benchmark(root), extra["query_id"]


def test_duplicate_missing_query_and_checksum(bench, tmp_path):
    run = make_run(tmp_path, bench)
    second = main_queries(bench)[1]
    _edit_index(run, 0, query_id=second.query_id, fact_id=second.fact_id,
                condition_family=second.condition_family)
    with pytest.raises(FksInputError, match=f"{second.query_id} appears twice"):
        _run(run, bench, tmp_path)
    first = main_queries(bench)[0]
    _edit_index(run, 0, query_id=first.query_id, fact_id=first.fact_id,
                condition_family=first.condition_family)
    # a store of another benchmark is refused by its checksum first ...
    bigger, missing = _bench_plus_one_query(bench, tmp_path / "bigger")
    with pytest.raises(FksInputError, match="benchmark_checksum"):
        _run(run, bigger, tmp_path)
    # ... and without a recorded checksum the index check names the missing query
    meta_path = run / "hidden" / "meta.json"
    meta = json.loads(meta_path.read_text())
    del meta["benchmark_checksum"]
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(FksInputError, match=f"{missing} .*not in the hidden store"):
        _run(run, bigger, tmp_path)
