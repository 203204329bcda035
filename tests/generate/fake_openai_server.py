"""A fake OpenAI-compatible completions server with fault injection (test helper, stdlib only).

Usage: ``python fake_openai_server.py --port 0 [--sleep 2.0] [--lifetime 120]
[--models fake-model,other]``; prints ``PORT <n>`` on its first stdout line, then serves
``POST /v1/completions`` and ``GET /v1/models`` (the ``--models`` ids) on 127.0.0.1 until
terminated or ``--lifetime`` seconds have passed (so a stray server always exits).

The reply depends on a marker in the prompt:

* ``FAIL500``   -- always HTTP 500
* ``FLAKY``     -- HTTP 500 on the first two requests for that prompt, then a normal answer
* ``SLEEP``     -- sleeps ``--sleep`` seconds (past the client timeout), then answers
* ``SLOT``      -- one slot, like llama-cpp-python's server: such requests are served one
  at a time, each taking ``--slot-time`` seconds, also when its client has given up
* ``BADJSON``   -- HTTP 200 with a body that is not JSON
* ``NOCHOICES`` -- HTTP 200 with ``{"choices": []}``
* ``BAD400``    -- HTTP 400
* ``BADFIELD:<name>`` -- a normal answer with one field malformed (``<name>`` a key of
  :data:`BAD_FIELDS`: ``lp_nan``, ``lp_pos``, ``lp_str``, ``tokens_str``, ``finish_obj``)
* otherwise     -- ``" ans<len(prompt)>"`` with ``finish_reason "stop"``, usage counts, and
  ``logprobs.token_logprobs = [-0.25, -0.5]`` when the request asks for ``logprobs``.

``GET /stats`` returns ``{"attempts": {prompt: n}, "requests": [body...], "auth": [header...]}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ATTEMPTS: Counter = Counter()
REQUESTS: list[dict] = []
AUTH: list[str | None] = []
LOCK = threading.Lock()
SLOT_LOCK = threading.Lock()
SLEEP = 2.0
SLOT_TIME = 0.2
MODELS: list[str] = ["fake-model"]


#: ``BADFIELD:<name>`` markers: one malformed field in an otherwise normal 200 reply
BAD_FIELDS = {
    "lp_nan": lambda r: r["choices"][0]["logprobs"]["token_logprobs"].__setitem__(1, float("nan")),
    "lp_pos": lambda r: r["choices"][0]["logprobs"]["token_logprobs"].__setitem__(0, 2.5),
    "lp_str": lambda r: r["choices"][0]["logprobs"]["token_logprobs"].__setitem__(0, "-0.1"),
    "tokens_str": lambda r: r["usage"].__setitem__("completion_tokens", "two"),
    "finish_obj": lambda r: r["choices"][0].__setitem__("finish_reason", {"type": "stop"}),
}


def answer(body: dict) -> dict:
    prompt = body["prompt"]
    text = f" ans{len(prompt)}"
    choice = {"index": 0, "text": text, "finish_reason": "stop"}
    if body.get("logprobs"):
        choice["logprobs"] = {"tokens": [" ans", str(len(prompt))],
                              "token_logprobs": [-0.25, -0.5]}
    return {"id": "cmpl-fake", "object": "text_completion", "model": body.get("model"),
            "choices": [choice],
            "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": 2,
                      "total_tokens": len(prompt.split()) + 2}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def _send(self, code: int, payload: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            data = [{"id": m, "object": "model", "owned_by": "fake"} for m in MODELS]
            self._send(200, json.dumps({"object": "list", "data": data}).encode())
            return
        if self.path != "/stats":
            self._send(404, b'{"error": "not found"}')
            return
        with LOCK:
            data = {"attempts": dict(ATTEMPTS), "requests": list(REQUESTS), "auth": list(AUTH)}
        self._send(200, json.dumps(data).encode())

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path != "/v1/completions":
            self._send(404, b'{"error": "not found"}')
            return
        body = json.loads(raw)
        prompt = body["prompt"]
        with LOCK:
            ATTEMPTS[prompt] += 1
            n = ATTEMPTS[prompt]
            REQUESTS.append(body)
            AUTH.append(self.headers.get("Authorization"))
        if "FAIL500" in prompt or ("FLAKY" in prompt and n <= 2):
            self._send(500, b'{"error": "internal"}')
        elif "BAD400" in prompt:
            self._send(400, b'{"error": "bad request"}')
        elif "BADJSON" in prompt:
            self._send(200, b'{"choices": [ this is not json')
        elif "NOCHOICES" in prompt:
            self._send(200, b'{"choices": []}')
        else:
            if "SLEEP" in prompt:
                time.sleep(SLEEP)
            if "SLOT" in prompt:
                with SLOT_LOCK:
                    time.sleep(SLOT_TIME)
            reply = answer(body)
            if "BADFIELD:" in prompt:
                BAD_FIELDS[prompt.split("BADFIELD:", 1)[1].split()[0]](reply)
            try:
                self._send(200, json.dumps(reply).encode())  # NaN is written as NaN
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                pass


def main() -> None:
    global SLEEP, MODELS, SLOT_TIME
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--sleep", type=float, default=2.0)
    ap.add_argument("--slot-time", type=float, default=0.2)
    ap.add_argument("--lifetime", type=float, default=120.0)
    ap.add_argument("--models", default="fake-model", help="comma-separated served model ids")
    args = ap.parse_args()
    SLEEP = args.sleep
    SLOT_TIME = args.slot_time
    MODELS = [m for m in args.models.split(",") if m]
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    timer = threading.Timer(args.lifetime, server.shutdown)
    timer.daemon = True
    timer.start()
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
    sys.exit(0)


if __name__ == "__main__":
    main()
