"""Issue 28: a run directory named ``run``; ``fks judge agreement`` across two benchmarks.

Each test fails on the code before issue 28.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fks.cli import main
from fks.io import read_jsonl


def fks(*args) -> int:
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return int(exc.value.code or 0)


# ===================================================== a run directory literally named run
def test_judge_run_reads_a_folder_named_run(tiny_run, tiny_benchmark_dir, monkeypatch):
    """``tiny_run`` is ``<tmp>/run``: ``fks judge run --benchmark B`` judges it."""
    assert tiny_run.name == "run"
    monkeypatch.chdir(tiny_run.parent)
    assert fks("judge", "run", "--benchmark", tiny_benchmark_dir) == 0
    assert (tiny_run / "judged.jsonl").is_file()
    # the explicit forms still work
    (tiny_run / "judged.jsonl").unlink()
    assert fks("judge", "run", "run", "--benchmark", tiny_benchmark_dir) == 0
    assert fks("judge", "./run", "--benchmark", tiny_benchmark_dir) == 0


def test_subcommand_names_win_without_such_a_run_folder(tmp_path, tiny_benchmark_dir,
                                                         monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run").mkdir()  # a folder named run, but not a run directory
    assert fks("judge", "run", "--benchmark", tiny_benchmark_dir) == 2
    assert "Missing argument" in capsys.readouterr().err


# ====================================================== agreement across two benchmarks
def _judged(tiny_run, tiny_benchmark_dir) -> Path:
    assert fks("judge", tiny_run, "--benchmark", tiny_benchmark_dir) == 0
    return tiny_run / "judged.jsonl"


def _copy_run(judged: Path, dest: Path) -> Path:
    dest.mkdir()
    shutil.copy(judged, dest / "judged.jsonl")
    return dest / "judged.jsonl"


def test_agreement_refuses_rows_of_another_benchmark(tiny_run, tiny_benchmark_dir, tmp_path,
                                                      capsys):
    """Same query ids, other facts: before issue 28 every row was "common"."""
    a = _judged(tiny_run, tiny_benchmark_dir)
    b = _copy_run(a, tmp_path / "other")
    rows = read_jsonl(b)
    rows[2]["fact_id"] = "fact_009999"
    b.write_text("".join(json.dumps(r) + "\n" for r in rows))
    capsys.readouterr()
    assert fks("judge", "agreement", a, b) == 2
    err = capsys.readouterr().err
    assert f"{b}:3: field 'fact_id'" in err and str(a) in err


def test_agreement_refuses_two_manifests_of_different_benchmarks(tiny_run, tiny_benchmark_dir,
                                                                 tmp_path, capsys):
    a = _judged(tiny_run, tiny_benchmark_dir)
    b = _copy_run(a, tmp_path / "other")
    assert fks("judge", "agreement", a, b) == 0  # the same rows: agreement 1.0
    for path, checksum in ((a, "a" * 64), (b, "b" * 64)):
        manifest = path.parent / "evaluation_manifest.json"
        data = json.loads(manifest.read_text()) if manifest.is_file() else {}
        data["benchmark"] = {**(data.get("benchmark") or {}), "checksum": checksum}
        manifest.write_text(json.dumps(data))
    capsys.readouterr()
    assert fks("judge", "agreement", a, b) == 2
    err = capsys.readouterr().err
    assert "other/evaluation_manifest.json" in err and "benchmark.checksum" in err
    assert str(a) in err
