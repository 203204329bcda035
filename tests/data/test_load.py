"""Loading a benchmark: a local directory, a Hugging Face dataset folder, and offline failure.

No test here touches the network: a socket guard records (and refuses) every connection
attempt, and each Hugging Face test asserts that none was made.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from fks.cli import main
from fks.configs import load_configs
from fks.data.load import find_benchmark_files, load_benchmark, resolve_benchmark
from fks.data.schema import Fact, Query
from fks.data.validate import run_validation, validate_benchmark
from fks.errors import FksInputError
from tiny_benchmark import tiny_benchmark_rows, write_benchmark

HF_README = """---
license: cc-by-4.0
pretty_name: tiny fks benchmark
configs:
  - config_name: queries
    default: true
    data_files: data/evaluation_queries_{m}.jsonl
  - config_name: facts
    data_files: data/benchmark_facts_{n}.jsonl
---

# tiny benchmark (test fixture)
"""


# ------------------------------------------------------------------------ local directory
def test_load_local_directory(tiny_benchmark_dir):
    facts, queries = tiny_benchmark_rows()
    bench = load_benchmark(tiny_benchmark_dir)
    assert bench.root == tiny_benchmark_dir
    assert [f.fact_id for f in bench.facts] == [f["fact_id"] for f in facts]
    assert [q.query_id for q in bench.queries] == [q["query_id"] for q in queries]
    assert all(isinstance(f, Fact) for f in bench.facts)
    assert all(isinstance(q, Query) for q in bench.queries)
    assert bench.facts_by_id["fact_000004"].object.canonical == "Airbus"
    assert (bench.files.n_facts_in_name, bench.files.n_queries_in_name) == (4, 28)
    assert bench.files.manifest is None
    assert bench.checksum() == load_benchmark(str(tiny_benchmark_dir)).checksum()
    assert len(bench.checksum()) == 64


def test_checksum_changes_with_content(tiny_benchmark_dir):
    before = load_benchmark(tiny_benchmark_dir).checksum()
    facts, queries = tiny_benchmark_rows()
    queries[0]["query"] = "What is the capital city of France?"
    write_benchmark(tiny_benchmark_dir, facts, queries)
    assert load_benchmark(tiny_benchmark_dir).checksum() != before


def test_manifest_is_found(tiny_benchmark_dir):
    (tiny_benchmark_dir / "benchmark_manifest.json").write_text("{}")
    assert find_benchmark_files(tiny_benchmark_dir).manifest == (
        tiny_benchmark_dir / "benchmark_manifest.json")


def test_missing_directory(tmp_path):
    with pytest.raises(FksInputError, match="not found") as exc:
        load_benchmark(tmp_path / "absent")
    assert exc.value.path == str(tmp_path / "absent")


@pytest.mark.parametrize("kind", ["facts", "queries"])
def test_missing_file(tiny_benchmark_dir, kind):
    next(tiny_benchmark_dir.glob(f"*{kind}_*.jsonl")).unlink()
    with pytest.raises(FksInputError) as exc:
        load_benchmark(tiny_benchmark_dir)
    assert exc.value.path == str(tiny_benchmark_dir)
    assert "found none" in exc.value.message


def test_duplicate_file(tiny_benchmark_dir):
    src = tiny_benchmark_dir / "evaluation_queries_28.jsonl"
    (tiny_benchmark_dir / "evaluation_queries_27.jsonl").write_bytes(src.read_bytes())
    with pytest.raises(FksInputError) as exc:
        load_benchmark(tiny_benchmark_dir)
    assert "evaluation_queries_27.jsonl, evaluation_queries_28.jsonl" in exc.value.message


def test_bad_row_names_file_line_field(tiny_benchmark_dir):
    facts, queries = tiny_benchmark_rows()
    queries[7]["target_slot"] = "verb"
    write_benchmark(tiny_benchmark_dir, facts, queries)
    with pytest.raises(FksInputError) as exc:
        load_benchmark(tiny_benchmark_dir)
    assert (Path(exc.value.path).name, exc.value.line, exc.value.field) == (
        "evaluation_queries_28.jsonl", 8, "target_slot")


# --------------------------------------------------------------------------- Hugging Face
@pytest.fixture
def no_network(monkeypatch):
    """Refuse (and record) every socket connection and DNS lookup."""
    attempts: list[tuple] = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network access is blocked in tests")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


@pytest.fixture
def hf_offline(tmp_path, monkeypatch, no_network):
    """Offline Hugging Face settings with every cache in tmp (env and the imported constants)."""
    import datasets
    import huggingface_hub.constants as hub_constants

    caches = {name: tmp_path / "caches" / name.lower()
              for name in ("FKS_CACHE", "HF_HOME", "HF_DATASETS_CACHE")}
    for name, path in caches.items():
        monkeypatch.setenv(name, str(path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    # both libraries read these once at import; the test process may have imported them already
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", caches["HF_DATASETS_CACHE"])
    monkeypatch.setattr(hub_constants, "HF_HOME", str(caches["HF_HOME"]))
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(caches["HF_HOME"] / "hub"))
    return caches


def _write_hf_folder(root: Path, facts: list[dict], queries: list[dict]) -> Path:
    """A dataset folder laid out like the published repo (README front-matter ``configs:``)."""
    (root / "data").mkdir(parents=True, exist_ok=True)
    for old in (root / "data").glob("*.jsonl"):
        old.unlink()
    for name, rows in ((f"benchmark_facts_{len(facts)}.jsonl", facts),
                       (f"evaluation_queries_{len(queries)}.jsonl", queries)):
        (root / "data" / name).write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    (root / "README.md").write_text(HF_README.format(n=len(facts), m=len(queries)))
    return root


def _comparable(report: dict) -> dict:
    keep = ("passed", "n_facts", "n_queries", "gates", "counts")
    return {k: report[k] for k in keep} | {
        "hard_errors": [(e["gate"], e["message"], e["line"], e["field"])
                        for e in report["hard_errors"]],
        "warnings": [(w["gate"], w["message"]) for w in report["warnings"]
                     if "no expected counts" not in w["message"]],
    }


def test_hf_local_folder_materialises_and_validates_like_the_directory(
        tmp_path, hf_offline, no_network, tiny_benchmark_dir):
    facts, queries = tiny_benchmark_rows()
    repo = _write_hf_folder(tmp_path / "hf_repo", facts, queries)
    configs = load_configs()

    bench = load_benchmark(f"hf:{repo}")
    assert bench.root.is_relative_to(hf_offline["FKS_CACHE"])
    direct = load_benchmark(tiny_benchmark_dir)
    assert bench.facts == direct.facts
    assert bench.queries == direct.queries
    assert (bench.files.n_facts_in_name, bench.files.n_queries_in_name) == (4, 28)

    via_hf = run_validation(f"hf:{repo}", configs=configs)
    assert via_hf["benchmark"] == f"hf:{repo}"
    assert (bench.root / "validation_report.json").is_file()  # beside the materialised files
    assert _comparable(via_hf) == _comparable(validate_benchmark(tiny_benchmark_dir,
                                                                 configs=configs))
    assert no_network == []


def test_hf_validation_fails_like_the_directory(tmp_path, hf_offline, no_network, capsys):
    facts, queries = tiny_benchmark_rows()
    queries[3]["use_for_main_forward"] = not queries[3]["use_for_main_forward"]
    repo = _write_hf_folder(tmp_path / "hf_repo", facts, queries)
    local = write_benchmark(tmp_path / "local", facts, queries)
    configs = load_configs()
    assert _comparable(validate_benchmark(f"hf:{repo}", configs=configs)) == _comparable(
        validate_benchmark(local, configs=configs))
    with pytest.raises(SystemExit) as exc:
        main(["data", "validate", f"hf:{repo}"])
    assert exc.value.code == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert len(err) == 1 and "evaluation_queries_28.jsonl:4:" in err[0]
    assert "field 'use_for_main_forward'" in err[0]
    assert no_network == []


def test_hf_materialisation_follows_the_source(tmp_path, hf_offline, no_network):
    # the cache is keyed by repo name; a changed source with the same row counts must not be
    # served from a stale copy
    facts, queries = tiny_benchmark_rows()
    repo = _write_hf_folder(tmp_path / "hf_repo", facts, queries)
    assert load_benchmark(f"hf:{repo}").queries[0].query == "What is the capital of France?"
    queries[0]["query"] = "Which city is the capital of France?"
    _write_hf_folder(repo, facts, queries)
    assert load_benchmark(f"hf:{repo}").queries[0].query == "Which city is the capital of France?"
    del queries[-1]
    _write_hf_folder(repo, facts, queries)
    root = resolve_benchmark(f"hf:{repo}")
    assert sorted(p.name for p in root.glob("*.jsonl")) == [
        "benchmark_facts_4.jsonl", "evaluation_queries_27.jsonl"]


def test_hf_offline_missing_repo_gives_the_offline_hint(hf_offline, no_network, capsys):
    with pytest.raises(FksInputError) as exc:
        load_benchmark("hf:someorg/missing")
    msg = exc.value.message
    assert exc.value.path == "someorg/missing"
    assert "cannot be reached" in msg and "HF_HUB_OFFLINE is set" in msg
    assert "local folder" in msg
    with pytest.raises(SystemExit) as sys_exit:
        main(["data", "validate", "hf:someorg/missing"])
    assert sys_exit.value.code == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert len(err) == 1 and err[0].startswith("error: someorg/missing: ")
    assert no_network == []
