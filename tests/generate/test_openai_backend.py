"""OpenAI-compatible backend against a real local HTTP server process with fault injection."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import httpx
import pytest

from fake_server import running_fake_server
from fks.cli import main
from fks.configs import load_configs
from fks.data.schema import GenerationRecord
from fks.errors import FksInputError
from fks.generate.backends import make_backend
from fks.io import read_json, read_jsonl

CFG = load_configs()


@pytest.fixture(scope="module")
def server():
    """The fake server on a free port (each reply delayed 1.5 s), stopped after the module."""
    with running_fake_server("--sleep", "1.5") as url:
        yield url


def _closed_port() -> int:
    """A port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mark(bench_dir: Path, markers: dict[int, str]) -> list[dict]:
    """Append ``markers[i]`` to query ``i`` of the benchmark (fault injection); returns rows."""
    from fks.data.load import find_benchmark_files

    qfile = find_benchmark_files(bench_dir).queries
    rows = [json.loads(line) for line in qfile.read_text().splitlines()]
    for i, m in markers.items():
        rows[i]["query"] += m
    qfile.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return rows


def _stats(base_url: str) -> dict:
    return httpx.get(f"{base_url}/stats", timeout=5).json()


def _backend(base_url, **kw):
    opts = {"base_url": base_url, "timeout": 0.5, "max_retries": 2, "backoff_base": 0.01,
            "backoff_max": 0.05, "concurrency": 4} | kw
    return make_backend("openai", "fake-model", configs=CFG, **opts)


def test_answers_logprobs_and_request_body(server):
    b = _backend(server, api_key="sk-test-123")
    prompts = ["okA one\nAnswer:", "okA two words\nAnswer:"]
    outs = b.generate(prompts, max_new_tokens=24)
    for p, o in zip(prompts, outs, strict=True):
        assert o.status == "ok" and o.error is None
        assert o.text == f" ans{len(p)}"
        assert o.answer_logprobs == [-0.25, -0.5]
        assert o.n_generated_tokens == 2 and o.finish_reason == "stop"
        assert o.n_prompt_tokens == len(p.split())
    stats = _stats(server)
    bodies = [r for r in stats["requests"] if r["prompt"] in prompts]
    assert len(bodies) == 2
    for body in bodies:
        assert body["model"] == "fake-model" and body["temperature"] == 0
        assert body["max_tokens"] == 24 and body["logprobs"] == 1
        # greedy stays greedy on llama.cpp (repeat_penalty) and vLLM (repetition_penalty)
        assert body["repeat_penalty"] == body["repetition_penalty"] == 1.0
        assert body["frequency_penalty"] == body["presence_penalty"] == 0.0
    assert "Bearer sk-test-123" in stats["auth"]
    assert "sk-test-123" not in json.dumps(b.describe())
    (no_lp,) = _backend(server, logprobs=False, extra_body={"repetition_penalty": 1.0}).generate(
        ["okA three\nAnswer:"], max_new_tokens=5)
    assert no_lp.status == "ok" and no_lp.answer_logprobs is None
    (body,) = [r for r in _stats(server)["requests"] if r["prompt"] == "okA three\nAnswer:"]
    assert body["repetition_penalty"] == 1.0 and "logprobs" not in body
    (plain,) = _backend(server, neutral_penalties=False).generate(["okA four"], max_new_tokens=5)
    (body,) = [r for r in _stats(server)["requests"] if r["prompt"] == "okA four"]
    assert plain.status == "ok" and "repeat_penalty" not in body


def test_faults_are_retried_then_recorded_never_dropped(server):
    prompts = ["f1 ok", "f1 FAIL500", "f1 FLAKY", "f1 SLEEP", "f1 BADJSON", "f1 NOCHOICES",
               "f1 BAD400", "f1 ok again"]
    outs = _backend(server).generate(prompts, max_new_tokens=8)
    assert len(outs) == len(prompts)
    got = dict(zip(prompts, outs, strict=True))
    assert got["f1 ok"].text == f" ans{len('f1 ok')}" and got["f1 ok again"].status == "ok"
    assert got["f1 FLAKY"].status == "ok"  # 500, 500, then an answer: retries worked
    assert got["f1 FAIL500"].status == "error" and "HTTP 500" in got["f1 FAIL500"].error
    assert got["f1 SLEEP"].status == "timeout" and "timed out" in got["f1 SLEEP"].error
    for p in ("f1 BADJSON", "f1 NOCHOICES"):
        assert got[p].status == "error" and "malformed" in got[p].error
    assert got["f1 BAD400"].status == "error" and "HTTP 400" in got["f1 BAD400"].error
    for p in ("f1 FAIL500", "f1 SLEEP", "f1 BADJSON", "f1 NOCHOICES"):
        assert got[p].text == "" and "after 3 attempts" in got[p].error
    attempts = _stats(server)["attempts"]
    assert attempts["f1 FLAKY"] == 3
    for p in ("f1 FAIL500", "f1 SLEEP", "f1 BADJSON", "f1 NOCHOICES"):
        assert attempts[p] == 3  # 1 + max_retries, bounded
    assert attempts["f1 BAD400"] == 1  # a 4xx is not retried
    assert attempts["f1 ok"] == 1


def test_connection_refused_is_an_error_record():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (out,) = _backend(f"http://127.0.0.1:{port}", max_retries=1, preflight=False).generate(
        ["x"], max_new_tokens=4)
    assert out.status == "error" and "connection error" in out.error


def test_needs_a_base_url():
    with pytest.raises(FksInputError, match="base-url"):
        make_backend("openai", "m", configs=CFG)


def test_cli_run_through_the_server_keeps_every_query(server, tiny_benchmark_dir, tmp_path,
                                                      monkeypatch):
    from fks.data.load import find_benchmark_files

    qfile = find_benchmark_files(tiny_benchmark_dir).queries
    rows = [json.loads(line) for line in qfile.read_text().splitlines()]
    markers = {1: " c1 FAIL500", 3: " c1 SLEEP", 5: " c1 BADJSON", 7: " c1 FLAKY"}
    for i, m in markers.items():
        rows[i]["query"] += m
    qfile.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-never-written")
    out = tmp_path / "run"
    args = ["generate", "--backend", "openai", "--base-url", server, "--model", "fake",
            "--model-path", "fake-model", "--benchmark", str(tiny_benchmark_dir), "--out",
            str(out), "--timeout", "0.5", "--max-retries", "1", "--concurrency", "4",
            "--batch-size", "6"]
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 0
    recs = read_jsonl(out / "generations.jsonl", GenerationRecord)
    assert [r.query_id for r in recs] == [r["query_id"] for r in rows]  # each exactly once
    status = {r.query_id: r.status for r in recs}
    assert status[rows[1]["query_id"]] == "error"
    assert status[rows[3]["query_id"]] == "timeout"
    assert status[rows[5]["query_id"]] == "error"
    assert status[rows[7]["query_id"]] == "error"  # FLAKY needs 3 attempts; only 2 allowed
    assert sum(s == "ok" for s in status.values()) == len(rows) - 4
    for r in recs:
        assert (r.raw_response == "") == (r.status != "ok")
        assert (r.error is None) == (r.status == "ok")
        if r.status == "ok":
            assert r.answer_logprobs == [-0.25, -0.5]
    man = read_json(out / "evaluation_manifest.json")
    assert man["stages"]["generate"]["counts_by_status"] == {
        "ok": len(rows) - 4, "error": 3, "timeout": 1}
    assert man["backend"]["backend"] == "openai" and man["backend"]["max_retries"] == 1
    for p in out.iterdir():
        assert "sk-secret-never-written" not in p.read_text()


def test_retry_errors_regenerates_only_failed_rows_in_order(server, tiny_benchmark_dir, tmp_path):
    from fks.data.load import find_benchmark_files
    from fks.generate.runner import generate_run

    qfile = find_benchmark_files(tiny_benchmark_dir).queries
    rows = [json.loads(line) for line in qfile.read_text().splitlines()]
    rows[2]["query"] += " r1 FLAKY"  # fails twice, then answers
    rows[4]["query"] += " r1 FAIL500"  # always fails
    qfile.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    out = tmp_path / "run"

    def run(retry: bool):
        b = _backend(server, max_retries=0)  # one attempt per run
        return generate_run(tiny_benchmark_dir, out, model="fake", model_path="fake-model",
                            configs=CFG, backend=b, batch_size=4, retry_errors=retry)

    run(False)
    first = read_jsonl(out / "generations.jsonl", GenerationRecord)
    assert [r.status for r in first].count("error") == 2
    run(False)  # a plain rerun keeps the error rows
    assert read_jsonl(out / "generations.jsonl", GenerationRecord) == first
    before = _stats(server)["attempts"]
    summary = run(True)  # FLAKY: 2nd attempt fails again
    assert summary.n_written == 2
    summary = run(True)  # FLAKY: 3rd attempt answers
    after = _stats(server)["attempts"]
    recs = read_jsonl(out / "generations.jsonl", GenerationRecord)
    assert [r.query_id for r in recs] == [r["query_id"] for r in rows]  # benchmark order again
    status = {r.query_id: r.status for r in recs}
    assert status[rows[2]["query_id"]] == "ok" and status[rows[4]["query_id"]] == "error"
    assert summary.counts == {"ok": len(rows) - 1, "error": 1}
    # only the failed prompts were sent again, never the answered ones
    resent = {p for p in after if after[p] != before.get(p, 0)}
    assert all(("r1 FLAKY" in p or "r1 FAIL500" in p) for p in resent) and len(resent) == 2
    for r, old in zip(recs, first, strict=True):
        if old.status == "ok":
            assert r == old


# ------------------------------------------------------------------------------ fail fast
def test_preflight_lists_the_served_models(server):
    b = _backend(server)
    assert b.served_models == ["fake-model"]
    assert b.models_url == f"{server}/v1/models"
    assert _backend(server + "/v1").models_url == f"{server}/v1/models"


def test_preflight_refuses_a_closed_port_naming_the_url():
    url = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(FksInputError, match="cannot be reached") as exc:
        _backend(url)
    assert f"{url}/v1/models" in str(exc.value) and exc.value.field == "base_url"


def test_preflight_refuses_a_model_the_server_does_not_serve(server):
    with pytest.raises(FksInputError, match="does not serve model 'other-model'") as exc:
        make_backend("openai", "other-model", configs=CFG, base_url=server)
    assert "'fake-model'" in str(exc.value)  # it names what the server does serve


def test_preflight_refuses_a_server_without_a_model_list(server):
    with pytest.raises(FksInputError, match="HTTP 404"):
        _backend(server + "/not-an-api")


def test_cli_exits_2_at_once_when_the_server_is_down(tiny_benchmark_dir, tmp_path, capsys):
    url = f"http://127.0.0.1:{_closed_port()}"
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exc:
        main(["generate", "--backend", "openai", "--base-url", url, "--model", "fake",
              "--model-path", "fake-model", "--benchmark", str(tiny_benchmark_dir), "--out",
              str(out), "--limit", "20"])
    assert exc.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{url}/v1/models" in err and "cannot be reached" in err
    assert not (out / "generations.jsonl").exists()  # no file of error records


def test_cli_stops_early_when_most_requests_fail(server, tiny_benchmark_dir, tmp_path, capsys):
    from fks.generate.runner import FAILURE_MIN_REQUESTS

    rows = _mark(tiny_benchmark_dir, {i: " e1 FAIL500" for i in range(28)})
    assert len(rows) > FAILURE_MIN_REQUESTS + 4
    out = tmp_path / "run"
    args = ["generate", "--backend", "openai", "--base-url", server, "--model", "fake",
            "--model-path", "fake-model", "--benchmark", str(tiny_benchmark_dir), "--out",
            str(out), "--timeout", "0.5", "--max-retries", "0", "--batch-size", "4"]
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "stopped early" in err and server in err and "HTTP 500" in err
    recs = read_jsonl(out / "generations.jsonl", GenerationRecord)
    assert len(recs) == FAILURE_MIN_REQUESTS  # four batches of 4, then the guard fired
    assert [r.query_id for r in recs] == [r["query_id"] for r in rows[:FAILURE_MIN_REQUESTS]]
    attempts = _stats(server)["attempts"]
    assert sum(n for p, n in attempts.items() if "e1 FAIL500" in p) == FAILURE_MIN_REQUESTS
    gen = read_json(out / "evaluation_manifest.json")["stages"]["generate"]
    assert gen["status"] == "incomplete" and "16 of the last 16" in gen["stopped_early"]
    assert gen["counts_by_status"]["error"] == FAILURE_MIN_REQUESTS


def test_early_stop_looks_at_recent_requests_not_the_whole_run(server, tiny_benchmark_dir,
                                                               tmp_path, monkeypatch):
    """A server that starts failing after good answers is noticed within a window."""
    from fks.generate import runner

    monkeypatch.setattr(runner, "FAILURE_WINDOW", 8)
    monkeypatch.setattr(runner, "FAILURE_MIN_REQUESTS", 8)
    rows = _mark(tiny_benchmark_dir, {i: " w1 FAIL500" for i in range(12, 28)})
    out = tmp_path / "run"

    def run():
        return runner.generate_run(tiny_benchmark_dir, out, model="fake", model_path="fake-model",
                                   configs=CFG, backend=_backend(server, max_retries=0),
                                   batch_size=4)

    with pytest.raises(FksInputError, match="8 of the last 8 requests failed"):
        run()
    recs = read_jsonl(out / "generations.jsonl", GenerationRecord)
    # batches 4 (rows 12-15) and 5 (16-19) fail: 8 of the last 8, though only 8 of 20 overall
    assert len(recs) == 20 and [r.status for r in recs].count("error") == 8
    assert [r.query_id for r in recs] == [r["query_id"] for r in rows[:20]]


def test_a_stopped_run_resumes_once_the_server_is_back(server, tiny_benchmark_dir, tmp_path):
    from fks.generate.runner import FAILURE_MIN_REQUESTS, generate_run

    out = tmp_path / "run"
    down = _backend(f"http://127.0.0.1:{_closed_port()}", max_retries=0, preflight=False)
    with pytest.raises(FksInputError, match="stopped early"):
        generate_run(tiny_benchmark_dir, out, model="fake", model_path="fake-model",
                     configs=CFG, backend=down, batch_size=4)
    gen = read_json(out / "evaluation_manifest.json")["stages"]["generate"]
    assert gen["status"] == "incomplete" and "connection error" in gen["stopped_early"]
    assert gen["counts_by_status"]["error"] == FAILURE_MIN_REQUESTS
    summary = generate_run(tiny_benchmark_dir, out, model="fake", model_path="fake-model",
                           configs=CFG, backend=_backend(server), batch_size=4,
                           retry_errors=True)
    assert summary.complete and summary.counts == {"ok": 28}
    gen = read_json(out / "evaluation_manifest.json")["stages"]["generate"]
    assert gen["status"] == "complete" and gen["stopped_early"] is None


# ---------------------------------------------------- a one-slot server slower than the timeout
def _one_slot(concurrency: int, *, adaptive: bool, monkeypatch) -> tuple[list, int]:
    """16 prompts against a one-slot server (0.25 s each) under a 1 s timeout."""
    from fks.generate.backends import openai as oa

    if not adaptive:  # fks before stop 33: the number in flight never changes
        monkeypatch.setattr(oa._InFlight, "timed_out", lambda self, epoch, timeout: None)
    with running_fake_server("--slot-time", "0.25") as url:
        b = _backend(url, timeout=1.0, max_retries=3, concurrency=concurrency)
        outs = b.generate([f"q{i} SLOT" for i in range(16)], max_new_tokens=4)
        limit = b._in_flight.limit
        b.close()
    return outs, limit


def test_a_timeout_halves_the_requests_in_flight(monkeypatch, caplog):
    outs, limit = _one_slot(8, adaptive=True, monkeypatch=monkeypatch)
    assert [o.status for o in outs] == ["ok"] * 16
    assert limit < 8  # 8 in flight x 0.25 s queue past the 1 s timeout; 4 or fewer do not
    assert "sending at most" in caplog.text


def test_without_the_limit_a_one_slot_server_times_out(monkeypatch):
    outs, limit = _one_slot(8, adaptive=False, monkeypatch=monkeypatch)
    assert limit == 8
    assert sum(o.status == "timeout" for o in outs) >= 1
