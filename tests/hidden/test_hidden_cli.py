"""``fks extract`` and ``fks jlens`` end to end on the tiny benchmark and model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fks.cli import main
from fks.hidden import HiddenStore, assert_nontrivial_transport, load_jlens
from fks.io import read_json


def _run(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code


def _error_line(capsys) -> str:
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert len(lines) == 1
    return lines[0]


def test_extract_and_jlens_cli(tiny_benchmark_dir, deep_model_dir, tmp_path):
    run = tmp_path / "run"
    code = _run(["extract", str(run), "--benchmark", str(tiny_benchmark_dir),
                 "--model-path", str(deep_model_dir), "--batch-size", "4", "--layers", "window"])
    assert code == 0
    store = HiddenStore(run)
    assert store.layers == [2, 3]  # l/(L-1) >= 0.4 with L = 4
    assert store.layer(3).shape == (store.n_rows, 64)
    store.validate(checksums=True)
    manifest = read_json(run / "evaluation_manifest.json")
    assert manifest["stages"]["extract"]["model"] == deep_model_dir.name
    # no generation recorded a dtype: the CLI default --dtype auto (bf16 on a native-bf16 CPU)
    from fks.generate.backends.hf import resolve_dtype

    assert manifest["stages"]["extract"]["model_info"]["dtype"] == resolve_dtype(
        "cpu", "bfloat16", "auto")

    code = _run(["jlens", str(run), "--benchmark", str(tiny_benchmark_dir),
                 "--model-path", str(deep_model_dir), "--n-prompts", "6", "--batch-rows", "32"])
    assert code == 0
    J = load_jlens(run, checksums=True)
    assert sorted(J) == [0, 1, 2, 3] and J[0].dtype == np.float32 and J[0].shape == (64, 64)
    np.testing.assert_array_equal(J[3], np.eye(64, dtype=np.float32))
    assert_nontrivial_transport(J)
    info = read_json(run / "jlens/manifest.json")
    assert info["n"] == 6 and len(info["sample_query_ids"]) == 6 and info["dtype"] == "float32"
    assert set(info["sample_query_ids"]) <= set(store.query_ids.tolist())
    assert info["seconds"] > 0 and info["compute_dtype"] == "float32"
    assert read_json(run / "evaluation_manifest.json")["stages"]["jlens"]["n"] == 6
    # a rerun with the same arguments keeps the fit; another sample needs --overwrite
    mtime = (run / "jlens/layer_000.npy").stat().st_mtime_ns
    assert _run(["jlens", str(run), "--benchmark", str(tiny_benchmark_dir),
                 "--model-path", str(deep_model_dir), "--n-prompts", "6"]) == 0
    assert (run / "jlens/layer_000.npy").stat().st_mtime_ns == mtime
    assert _run(["jlens", str(run), "--benchmark", str(tiny_benchmark_dir),
                 "--model-path", str(deep_model_dir), "--n-prompts", "5"]) == 2


def test_cli_bad_input_exits_2(tiny_benchmark_dir, tiny_model_dir, tmp_path, capsys):
    run = tmp_path / "run"
    base = ["--benchmark", str(tiny_benchmark_dir), "--model-path", str(tiny_model_dir)]
    assert _run(["extract", str(run), *base, "--layers", "0,9"]) == 2
    assert "field 'layers'" in _error_line(capsys)
    assert _run(["extract", str(run), "--benchmark", str(tiny_benchmark_dir)]) == 2
    assert "model_path" in _error_line(capsys)
    assert _run(["extract", str(run), "--benchmark", str(tmp_path / "nope"),
                 "--model-path", str(tiny_model_dir)]) == 2
    capsys.readouterr()

    assert _run(["extract", str(run), *base, "--layers", "1"]) == 0
    # the benchmark changes under an existing store: exit 2 naming the file and field
    qfile = next(tiny_benchmark_dir.glob("evaluation_queries_*.jsonl"))
    rows = [json.loads(x) for x in qfile.read_text().splitlines()]
    rows[0]["query"] = rows[0]["query"] + " (edited)"
    qfile.write_text("".join(json.dumps(r) + "\n" for r in rows))
    capsys.readouterr()
    assert _run(["extract", str(run), *base, "--layers", "1"]) == 2
    line = _error_line(capsys)
    assert "meta.json" in line and "benchmark_checksum" in line


def test_extract_defaults_to_the_runs_model(tiny_benchmark_dir, tiny_model_dir, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "evaluation_manifest.json").write_text(json.dumps(
        {"model": {"name": "tiny-gen", "path": str(tiny_model_dir)}, "stages": {}}))
    assert _run(["extract", str(run), "--benchmark", str(tiny_benchmark_dir),
                 "--layers", "0"]) == 0
    assert HiddenStore(run).model == "tiny-gen"
    assert read_json(run / "evaluation_manifest.json")["model"]["name"] == "tiny-gen"
    capsys.readouterr()
    assert _run(["extract", str(run), "--benchmark", str(tiny_benchmark_dir),
                 "--model", "other", "--model-path", str(tiny_model_dir)]) == 2
    assert "field 'model.name'" in _error_line(capsys)
