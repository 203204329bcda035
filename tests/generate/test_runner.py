"""The resumable runner and ``fks generate`` on the tiny model: resume, selection, shards, merge."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fks.cli import main
from fks.configs import load_configs
from fks.data.load import load_benchmark
from fks.data.schema import GenerationRecord
from fks.errors import FksInputError
from fks.generate.backends import make_backend
from fks.generate.prompts import PROMPT_VERSION
from fks.generate.runner import generate_run, parse_shard, select_queries, shard_of
from fks.io import read_json, read_jsonl, sha256_file

# a short answer budget keeps these tests fast (the protocol's 24 is tested in test_hf_backend)
MAX_NEW = 6


def _short(cfg):
    gen = cfg.models.generation.model_copy(update={"max_new_tokens": MAX_NEW})
    return cfg.model_copy(update={"models": cfg.models.model_copy(update={"generation": gen})})


CFG = _short(load_configs())



class Interrupt(Exception):
    pass


@pytest.fixture(scope="module")
def backend(tiny_model_dir):
    return make_backend("hf", str(tiny_model_dir), configs=CFG, device="cpu")


def _run(bench, out, backend, **kw):
    return generate_run(bench, out, model="tiny", model_path="tiny-path", configs=CFG,
                        backend=backend, **kw)


def _cli(*args: str) -> int:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return exc.value.code


@pytest.fixture(scope="module")
def full_run(tmp_path_factory, backend):
    """One uninterrupted run over the whole tiny benchmark (batch 4)."""
    from tiny_benchmark import tiny_benchmark_rows, write_benchmark

    root = tmp_path_factory.mktemp("full")
    bench = write_benchmark(root / "bench", *tiny_benchmark_rows())
    summary = _run(bench, root / "run", backend, batch_size=4)
    return bench, root / "run", summary


def test_uninterrupted_run_writes_records_and_manifest(full_run):
    bench, run, summary = full_run
    b = load_benchmark(bench)
    recs = read_jsonl(run / "generations.jsonl", GenerationRecord)
    assert [r.query_id for r in recs] == [q.query_id for q in b.queries]  # benchmark order
    assert summary.complete and summary.counts == {"ok": len(b.queries)}
    by_id = {q.query_id: q for q in b.queries}
    for r in recs:
        q = by_id[r.query_id]
        assert (r.fact_id, r.relation, r.condition_family, r.language) == (
            q.fact_id, q.relation, q.condition_family, q.language)
        assert r.use_for_main_forward == q.use_for_main_forward
        assert r.answer_in_subject_surface == q.answer_in_subject_surface
        assert r.prompt_version == PROMPT_VERSION and r.model == "tiny"
        assert r.generation_config["max_new_tokens"] == MAX_NEW
        assert r.n_generated_tokens <= MAX_NEW
        assert r.generation_config["dtype_used"] == "float32"
        assert r.n_generated_tokens == len(r.answer_logprobs)
    man = read_json(run / "evaluation_manifest.json")
    st = man["stages"]["generate"]
    assert st["status"] == "complete" and st["n_records"] == len(recs)
    assert st["sha256"] == sha256_file(run / "generations.jsonl")
    assert st["counts_by_status"] == {"ok": len(recs), "error": 0, "timeout": 0}
    assert man["benchmark"]["checksum"] == b.checksum()
    assert man["generation_config"]["do_sample"] is False
    assert man["generation_config"]["dtype_used"] == "float32"
    assert man["prompt_version"] == PROMPT_VERSION
    assert man["seeds"]["generation"] == CFG.models.generation.seed
    assert len(man["weights_sha256"]) == 64 and len(man["tokenizer_sha256"]) == 64
    assert man["backend"]["backend"] == "hf"
    assert man["stages"]["generate"]["started_at"] <= man["stages"]["generate"]["finished_at"]


@pytest.mark.parametrize("workers", [1, 2])
def test_resume_after_interruption_and_torn_line_equals_uninterrupted(full_run, tmp_path,
                                                                      request, workers):
    """Under two workers too (batch 3 is in flight when batch 2's callback raises): only
    whole batches are on disk, and the resumed file equals the uninterrupted one."""
    bench, run, _ = full_run
    backend = (request.getfixturevalue("backend") if workers == 1
               else request.getfixturevalue("two_workers")[0])
    out = tmp_path / "run"

    def boom(index, records):
        if index == 2:
            raise Interrupt

    with pytest.raises(Interrupt):
        _run(bench, out, backend, batch_size=4, on_batch=boom)
    gen = out / "generations.jsonl"
    assert len(gen.read_text().splitlines()) == 12  # three batches of 4 are on disk
    # an interruption the process sees (Ctrl-C, a full disk) is recorded as stopped, with why
    gen_info = read_json(out / "evaluation_manifest.json")["stages"]["generate"]
    assert gen_info["status"] == "stopped" and "Interrupt" in gen_info["stopped_early"]
    with gen.open("a", encoding="utf-8") as fh:  # a kill -9 in the middle of a write
        fh.write('{"model":"tiny","query_id":"query_000000')
    summary = _run(bench, out, backend, batch_size=4)
    assert summary.n_existing == 12 and summary.complete
    assert gen.read_bytes() == (run / "generations.jsonl").read_bytes()
    again = _run(bench, out, backend, batch_size=4)  # nothing left: a no-op
    assert again.n_written == 0 and gen.read_bytes() == (run / "generations.jsonl").read_bytes()


def _assert_same_records(path_a: Path, path_b: Path) -> None:
    """Same rows in the same order; log-probs equal up to float32 summation order."""
    a = read_jsonl(path_a, GenerationRecord)
    b = read_jsonl(path_b, GenerationRecord)
    assert [r.query_id for r in a] == [r.query_id for r in b]
    for x, y in zip(a, b, strict=True):
        dx, dy = x.model_dump(), y.model_dump()
        lx, ly = dx.pop("answer_logprobs"), dy.pop("answer_logprobs")
        assert dx == dy
        assert lx == pytest.approx(ly, abs=1e-4)


def test_resume_mid_batch_with_another_batch_size(full_run, tmp_path, backend):
    bench, run, _ = full_run
    out = tmp_path / "run"

    def boom(index, records):
        if index == 1:
            raise Interrupt

    with pytest.raises(Interrupt):
        _run(bench, out, backend, batch_size=5, on_batch=boom)
    gen = out / "generations.jsonl"
    lines = gen.read_text().splitlines(keepends=True)
    assert len(lines) == 10
    gen.write_text("".join(lines[:7]) + lines[7][:40])  # torn inside the second batch
    summary = _run(bench, out, backend, batch_size=3)
    assert summary.n_existing == 7 and summary.complete
    _assert_same_records(gen, run / "generations.jsonl")


def test_resume_refuses_a_different_run(full_run, tmp_path, backend):
    bench, _, _ = full_run
    out = tmp_path / "run"
    _run(bench, out, backend, limit=3)
    with pytest.raises(FksInputError, match="selection.families"):
        _run(bench, out, backend, families=["anchor"], limit=3)
    with pytest.raises(FksInputError, match="selection.limit"):
        _run(bench, out, backend, limit=5)


def test_resume_refuses_foreign_records(full_run, tmp_path, backend):
    bench, run, _ = full_run
    out = tmp_path / "run"
    _run(bench, out, backend, families=["anchor"])
    with (out / "generations.jsonl").open("a") as fh:  # a record outside the selection
        fh.write((run / "generations.jsonl").read_text().splitlines()[1] + "\n")
    with pytest.raises(FksInputError, match="not in this run's selection"):
        _run(bench, out, backend, families=["anchor"])


def test_selection_families_then_limit(full_run):
    bench, _, _ = full_run
    qs = load_benchmark(bench).queries
    sel = select_queries(qs, families=["anchor", "recognition"], limit=5)
    assert [q.query_id for q in sel] == [
        q.query_id for q in qs if q.condition_family in ("anchor", "recognition")][:5]
    assert select_queries(qs, limit=0) == []
    with pytest.raises(FksInputError, match="unknown family"):
        select_queries(qs, families=["anchors"])


def test_shard_rule_and_parse():
    assert parse_shard("1/4") == (1, 4) and parse_shard(" 4 / 4 ") == (4, 4)
    for bad in ("0/4", "5/4", "1-4", "a/b"):
        with pytest.raises(FksInputError, match="shard"):
            parse_shard(bad)
    ids = [f"fact_{i:06d}" for i in range(400)]
    counts = [sum(shard_of(f, 4) == s for f in ids) for s in (1, 2, 3, 4)]
    assert sum(counts) == 400 and min(counts) > 60  # every fact in one shard, roughly balanced
    assert [shard_of(f, 4) for f in ids] == [shard_of(f, 4) for f in ids]


def _gen_args(tiny_model_dir, bench, out, *extra):
    cfg_dir = Path(tiny_model_dir).parent / "short_cfg"  # the same short answer budget as CFG
    cfg_dir.mkdir(exist_ok=True)
    (cfg_dir / "models.yaml").write_text(f"generation:\n  max_new_tokens: {MAX_NEW}\n")
    return ("--config", str(cfg_dir), "generate", "--model", "tiny", "--model-path",
            str(tiny_model_dir), "--benchmark", str(bench), "--out", str(out), "--device", "cpu",
            "--batch-size", "5", "--dtype", "float32", *extra)  # the library arms' dtype


def test_cli_shards_then_merge_equal_the_unsharded_run(full_run, tmp_path, tiny_model_dir):
    bench, run, _ = full_run
    out = tmp_path / "run"
    for i in (1, 2, 3):
        assert _cli(*_gen_args(tiny_model_dir, bench, out, "--shard", f"{i}/3")) == 0
        assert (out / "shards" / f"shard_{i}_of_3" / "generations.jsonl").is_file()
    assert _cli("generate", "--merge", str(out)) == 0
    _assert_same_records(out / "generations.jsonl", run / "generations.jsonl")
    man = read_json(out / "evaluation_manifest.json")
    assert man["stages"]["generate"]["status"] == "complete"
    assert man["selection"]["merged_from_shards"] == 3
    assert man["stages"]["generate"]["sha256"] == sha256_file(out / "generations.jsonl")
    # a shard record doubled into another shard: exit 2
    s1 = out / "shards" / "shard_1_of_3" / "generations.jsonl"
    s2 = out / "shards" / "shard_2_of_3" / "generations.jsonl"
    extra = s1.read_text().splitlines()[0]
    s2.write_text(s2.read_text() + extra + "\n")
    assert _cli("generate", "--merge", str(out)) == 2
    with pytest.raises(FksInputError, match="1 recorded twice: " + json.loads(extra)["query_id"]):
        from fks.generate.runner import merge_shards

        merge_shards(out)


def test_cli_merge_detects_missing_shard_and_gaps(full_run, tmp_path, tiny_model_dir):
    bench, _, _ = full_run
    out = tmp_path / "run"
    for i in (1, 3):
        assert _cli(*_gen_args(tiny_model_dir, bench, out, "--shard", f"{i}/3")) == 0
    from fks.generate.runner import merge_shards

    assert _cli("generate", "--merge", str(out)) == 2
    with pytest.raises(FksInputError, match="missing shard.*2/3"):
        merge_shards(out)
    # shard 2 run with another selection: the shard manifests disagree
    assert _cli(*_gen_args(tiny_model_dir, bench, out, "--shard", "2/3", "--limit", "100")) == 0
    with pytest.raises(FksInputError, match="selection.limit"):
        merge_shards(out)
    # and it cannot be resumed with the right selection either
    assert _cli(*_gen_args(tiny_model_dir, bench, out, "--shard", "2/3")) == 2
    shutil.rmtree(out / "shards" / "shard_2_of_3")
    # shard 2 ran, but one of its records is lost: a gap
    assert _cli(*_gen_args(tiny_model_dir, bench, out, "--shard", "2/3")) == 0
    s2 = out / "shards" / "shard_2_of_3" / "generations.jsonl"
    lines = s2.read_text().splitlines()
    lost = json.loads(lines[-1])["query_id"]
    s2.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(FksInputError, match=f"1 missing: {lost}"):
        merge_shards(out)
    assert _cli("generate", "--merge", str(out)) == 2


def test_cli_filters_and_bad_input(full_run, tmp_path, tiny_model_dir):
    bench, _, _ = full_run
    out = tmp_path / "run"
    assert _cli(*_gen_args(tiny_model_dir, bench, out, "--families", "anchor,reverse",
                           "--limit", "3")) == 0
    recs = read_jsonl(out / "generations.jsonl", GenerationRecord)
    assert [r.condition_family for r in recs] == ["anchor"] * 3
    assert _cli(*_gen_args(tiny_model_dir, bench, tmp_path / "r2", "--families", "nope")) == 2
    assert _cli("generate", "--model", "tiny", "--benchmark", str(bench)) == 2  # no path/out
    assert _cli(*_gen_args(tiny_model_dir, tmp_path / "nobench", tmp_path / "r3")) == 2
    assert not Path(tmp_path / "r2" / "generations.jsonl").exists()


@pytest.mark.slow
def test_real_kill_9_then_resume(full_run, tmp_path, tiny_model_dir):
    """SIGKILL a real ``fks generate`` process mid-run; the resumed file has every row once."""
    import os
    import signal
    import subprocess
    import sys
    import time

    bench, _, _ = full_run
    out = tmp_path / "run"
    gen = out / "generations.jsonl"
    args = list(_gen_args(tiny_model_dir, bench, out))
    args[args.index("--batch-size") + 1] = "1"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "fks", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if gen.is_file() and gen.read_bytes().count(b"\n") >= 3:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the run ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    n_before = gen.read_bytes().count(b"\n")
    assert 3 <= n_before < 28
    backend = make_backend("hf", str(tiny_model_dir), configs=CFG, device="cpu")
    summary = _run(bench, out, backend, batch_size=1)
    assert summary.complete and summary.n_existing + summary.n_written == 28
    _assert_same_records(gen, full_run[1] / "generations.jsonl")


def test_cli_with_hidden_stores_states_and_same_generations(full_run, tmp_path, tiny_model_dir):
    bench, run, _ = full_run
    out = tmp_path / "run"
    assert _cli(*_gen_args(tiny_model_dir, bench, out, "--with-hidden", "--shard", "1/2")) == 2
    assert _cli(*_gen_args(tiny_model_dir, bench, out, "--with-hidden")) == 0
    _assert_same_records(out / "generations.jsonl", run / "generations.jsonl")
    n_main = sum(q.use_for_main_forward for q in load_benchmark(bench).queries)
    index = (out / "hidden" / "index.jsonl").read_text().splitlines()
    assert len(index) == n_main and (out / "hidden" / "meta.json").is_file()
    man = read_json(out / "evaluation_manifest.json")
    assert man["stages"]["generate"]["status"] == "complete" and "extract" in man["stages"]


# ------------------------------------------------------------------ generation workers
@pytest.fixture
def two_workers(tiny_model_dir, monkeypatch):
    """The tiny model's HF backend with 2 workers, and the most batches it had in flight."""
    import threading
    import time as time_mod

    backend2 = make_backend("hf", str(tiny_model_dir), configs=CFG, device="cpu")
    backend2.workers = 2
    real, lock, state = backend2.generate, threading.Lock(), {"now": 0, "max": 0,
                                                               "threads": set()}

    def spy(prompts, *, max_new_tokens):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
            state["threads"].add(threading.current_thread().name)
        try:
            time_mod.sleep(0.05)  # long enough for the other worker to start its batch
            return real(prompts, max_new_tokens=max_new_tokens)
        finally:
            with lock:
                state["now"] -= 1

    monkeypatch.setattr(backend2, "generate", spy)
    return backend2, state


def test_two_workers_write_the_same_file_as_one(full_run, tmp_path, two_workers):
    import torch

    bench, run, _ = full_run
    backend2, state = two_workers
    threads = torch.get_num_threads()
    summary = _run(bench, tmp_path / "run", backend2, batch_size=4)
    assert summary.complete and state["max"] == 2  # two batches really ran at once
    assert all(name.startswith("fks-generate") for name in state["threads"])
    assert torch.get_num_threads() == threads  # the workers' thread share is given back
    assert (tmp_path / "run" / "generations.jsonl").read_bytes() == \
        (run / "generations.jsonl").read_bytes()
    stage = read_json(tmp_path / "run" / "evaluation_manifest.json")["backend"]["kernels"]
    assert stage["workers"] == 2


def test_worker_count_resolution(monkeypatch):
    import torch

    from fks.workers import resolve_workers

    monkeypatch.delenv("FKS_WORKERS", raising=False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert resolve_workers("cpu", None) == 2
    assert resolve_workers("cuda:0", None) == 1 and resolve_workers("cpu", "auto") == 1
    assert resolve_workers("cpu", None, 3) == 3
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert resolve_workers("cpu", None) == 1
    monkeypatch.setenv("FKS_WORKERS", "4")
    assert resolve_workers("cpu", None) == 4
    for bad in ("0", "two"):
        monkeypatch.setenv("FKS_WORKERS", bad)
        with pytest.raises(FksInputError):
            resolve_workers("cpu", None)
