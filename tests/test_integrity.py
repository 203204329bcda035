"""Data integrity (issue 14): one writer per run directory, one reader contract, exit 2 on paths."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from fks.cli import main
from fks.data.load import load_benchmark
from fks.errors import FksInputError
from fks.io import load_npy, unique_rows
from fks.runlock import LOCK_NAME, RunLockedError, run_dir_lock
from provenance_util import drop_provenance

MAX_NEW = 6
DEMO_SOURCE = Path(__import__("fks.data", fromlist=["x"]).__file__).parent / "demo_source"


def _cli(*args: str) -> int:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return exc.value.code


# ------------------------------------------------------------------------------------ locks
_HOLDER = textwrap.dedent("""
    import sys, time
    from fks.runlock import run_dir_lock
    with run_dir_lock(sys.argv[1], create=True):
        print("held", flush=True)
        time.sleep(float(sys.argv[2]))
""")


def _hold(run: Path, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(run), str(seconds)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_second_writer_fails_at_once_naming_the_holder(tmp_path):
    run = tmp_path / "run"
    proc = _hold(run, 30)
    try:
        with pytest.raises(RunLockedError) as err, run_dir_lock(run, wait=None):
            pass
        msg = err.value.one_line()
        assert f"pid {proc.pid}" in msg and "host" in msg and LOCK_NAME in msg
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_kill_9_leaves_no_stale_lock(tmp_path):
    run = tmp_path / "run"
    proc = _hold(run, 30)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert (run / LOCK_NAME).exists()  # the file stays; the lock died with its process
    with run_dir_lock(run, wait=None):
        pass


def test_wait_queues_behind_the_holder(tmp_path):
    run = tmp_path / "run"
    proc = _hold(run, 1.0)
    try:
        t0 = time.monotonic()
        with run_dir_lock(run, wait=30):
            waited = time.monotonic() - t0
        assert waited > 0.5  # we got it only once the holder had let go (after ~1 s)
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_lock_is_reentrant_in_one_process(tmp_path):
    with run_dir_lock(tmp_path), run_dir_lock(tmp_path), run_dir_lock(tmp_path / "."):
        pass
    with run_dir_lock(tmp_path, wait=None):  # and released afterwards
        pass


def _gen_args(tiny_model_dir: Path, bench: Path, out: Path) -> list[str]:
    cfg_dir = tmp_cfg = Path(tiny_model_dir).parent / "short_cfg_integrity"
    tmp_cfg.mkdir(exist_ok=True)
    (cfg_dir / "models.yaml").write_text(f"generation:\n  max_new_tokens: {MAX_NEW}\n")
    return ["--config", str(cfg_dir), "generate", "--model", "tiny", "--model-path",
            str(tiny_model_dir), "--benchmark", str(bench), "--out", str(out), "--device",
            "cpu", "--batch-size", "1"]


@pytest.mark.slow
def test_two_real_generate_processes_on_one_directory(tmp_path, tiny_model_dir):
    """Two ``fks generate`` on one --out: one record per query, and a clear word from the loser.

    The first writer works through the demo benchmark one prompt at a time (about half a
    minute), so the second certainly starts while it runs; the first is then killed with
    SIGKILL, and a third run resumes: every query exactly once.
    """
    bench = tmp_path / "bench"
    assert _cli("data", "build", "--source", str(DEMO_SOURCE), "--out", str(bench)) == 0
    out = tmp_path / "run"
    gen = out / "generations.jsonl"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "fks", *_gen_args(tiny_model_dir, bench, out)]
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and first.poll() is None:
            if gen.is_file() and gen.read_bytes().count(b"\n") >= 2:
                break
            time.sleep(0.05)
        assert first.poll() is None, "the first writer ended before the second could start"
        second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert first.poll() is None, "the first writer ended before the second was refused"
        assert second.returncode == 2
        message = " ".join((second.stderr + second.stdout).split())
        assert f"pid {first.pid}" in message and "--wait" in message
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=10)
    resume = [*cmd]
    resume[resume.index("--batch-size") + 1] = "64"
    assert subprocess.run(resume, env=env, capture_output=True, timeout=600).returncode == 0
    ids = [json.loads(line)["query_id"] for line in gen.read_text().split("\n") if line]
    n_queries = len(load_benchmark(bench).queries)
    assert len(ids) == len(set(ids)) == n_queries


# ---------------------------------------------------------------------------- reader contract
def test_unique_rows_names_both_lines_and_refuses_empty(tmp_path):
    rows = [(1, {"query_id": "a"}), (2, {"query_id": "b"}), (3, {"query_id": "a"})]
    with pytest.raises(FksInputError) as err:
        list(unique_rows(rows, tmp_path / "x.jsonl"))
    assert "x.jsonl:3" in err.value.one_line() and "line 1" in err.value.one_line()
    with pytest.raises(FksInputError, match="empty"):
        list(unique_rows([], tmp_path / "x.jsonl"))


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory, tiny_model_dir):
    """A tiny run through generate, score and judge (the files the readers are fed)."""
    from tiny_benchmark import tiny_benchmark_rows, write_benchmark

    root = tmp_path_factory.mktemp("integrity")
    bench = write_benchmark(root / "bench", *tiny_benchmark_rows())
    run = root / "run"
    args = _gen_args(tiny_model_dir, bench, run)
    args[args.index("--batch-size") + 1] = "8"
    assert _cli(*args) == 0
    assert _cli("score", str(run), "--benchmark", str(bench)) == 0
    assert _cli("judge", str(run), "--benchmark", str(bench)) == 0
    return bench, run


def _copy_run(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(LOCK_NAME))
    return dst


def _double_first_line(path: Path) -> None:
    lines = path.read_text().split("\n")[:-1]
    lines = [x + "\n" for x in lines]
    path.write_text("".join([lines[0], *lines]))


@pytest.mark.parametrize(("file", "command"), [
    ("generations.jsonl", ["score"]),
    ("scored.jsonl", ["judge"]),
    ("judged.jsonl", ["metrics", "--part", "behavior"]),
])
def test_every_stage_refuses_a_duplicated_record(judged_run, tmp_path, file, command, capsys):
    bench, run = judged_run
    run = _copy_run(run, tmp_path / "run")
    drop_provenance(run)  # else the chain check (fks.provenance) refuses the edit first
    _double_first_line(run / file)
    extra = [] if command[0] == "metrics" else ["--benchmark", str(bench)]
    assert _cli(*command[:1], str(run), *command[1:], *extra) == 2
    out = "".join(capsys.readouterr())
    assert "duplicate" in out and file in out


def test_empty_generations_is_bad_input(judged_run, tmp_path, capsys):
    bench, run = judged_run
    run = _copy_run(run, tmp_path / "run")
    (run / "generations.jsonl").write_text("")
    assert _cli("score", str(run), "--benchmark", str(bench)) == 2
    assert "empty" in "".join(capsys.readouterr())
    assert not (run / "scored.jsonl").read_text() == ""  # the old output was not replaced


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity", "1e400", "0.5"])
def test_impossible_logprobs_are_bad_input(judged_run, tmp_path, bad, capsys):
    bench, run = judged_run
    run = _copy_run(run, tmp_path / "run")
    drop_provenance(run)  # the row reader, not the chain check, must meet the value
    path = run / "generations.jsonl"
    lines = path.read_text().split("\n")[:-1]
    row = json.loads(lines[1])
    lines[1] = json.dumps(row | {"answer_logprobs": [-0.1]})[:-1].replace(
        '"answer_logprobs": [-0.1]', f'"answer_logprobs": [-0.1, {bad}]') + "}"
    path.write_text("\n".join(lines) + "\n")
    assert _cli("score", str(run), "--benchmark", str(bench)) == 2
    out = "".join(capsys.readouterr())
    assert "generations.jsonl:2" in out and "answer_logprobs" in out


def test_logprob_rounding_of_log_one_is_allowed(judged_run):
    """A token the model is sure of may round to just above 0; a real excess is refused."""
    from pydantic import ValidationError

    from fks.data.schema import LOGPROB_SLACK, GenerationRecord

    _, run = judged_run
    row = json.loads((run / "generations.jsonl").read_text().split("\n")[0])
    ok = GenerationRecord.model_validate(row | {"answer_logprobs": [LOGPROB_SLACK / 2, -0.3]})
    assert ok.answer_logprobs == [LOGPROB_SLACK / 2, -0.3]
    with pytest.raises(ValidationError, match="answer_logprobs"):
        GenerationRecord.model_validate(row | {"answer_logprobs": [-0.3, LOGPROB_SLACK * 2]})


# ------------------------------------------------------------------------------- bad paths
def test_generations_that_is_a_directory_or_a_symlink_loop(judged_run, tmp_path, capsys):
    bench, run = judged_run
    for kind in ("dir", "loop"):
        r = _copy_run(run, tmp_path / kind)
        (r / "generations.jsonl").unlink()
        if kind == "dir":
            (r / "generations.jsonl").mkdir()
        else:
            (r / "generations.jsonl").symlink_to(r / "generations.jsonl")
        assert _cli("score", str(r), "--benchmark", str(bench)) == 2
        assert "generations.jsonl" in "".join(capsys.readouterr())


def test_out_that_is_an_existing_file(tmp_path, capsys):
    out = tmp_path / "file"
    out.write_text("x")
    assert _cli("data", "build", "--source", str(DEMO_SOURCE), "--out", str(out)) == 2
    assert str(out) in "".join(capsys.readouterr()).replace("\n", "")


def test_model_name_too_long_for_a_file_name(tmp_path, capsys):
    assert _cli("run", "--model", "m" * 300, "--benchmark", str(tmp_path),
                "--out", str(tmp_path / "runs")) == 2
    assert "model" in "".join(capsys.readouterr())


@pytest.mark.parametrize("content", [b"", b"\x93NUMPY\x01\x00v\x00{'descr'", "half"])
def test_empty_or_truncated_npy_is_bad_input(tmp_path, content):
    path = tmp_path / "layer_000.npy"
    if content == "half":
        np.save(path, np.ones((8, 4), np.float16))
        path.write_bytes(path.read_bytes()[:-10])
    else:
        path.write_bytes(content)
    with pytest.raises(FksInputError) as err:
        load_npy(path, field="layer 0")
    assert "layer_000.npy" in err.value.one_line()


def test_object_dtype_npy_is_bad_input(tmp_path):
    path = tmp_path / "layer_000.npy"
    np.save(path, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(FksInputError, match="object dtype"):
        load_npy(path)


def test_yaml_config_with_a_5000_digit_integer(tmp_path, capsys):
    cfg = tmp_path / "metrics.yaml"
    cfg.write_text("tau_b: " + "9" * 5000 + "\n")
    assert _cli("--config", str(cfg), "data", "build", "--source", str(DEMO_SOURCE), "--out",
                str(tmp_path / "b")) == 2
    assert "metrics.yaml" in "".join(capsys.readouterr())
