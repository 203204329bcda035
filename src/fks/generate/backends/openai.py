"""OpenAI-compatible ``/v1/completions`` backend (vLLM server, TGI, llama.cpp server, ...).

Each prompt is one ``POST {base_url}/v1/completions`` with ``model``, ``prompt``,
``max_tokens``, ``temperature: 0`` (greedy) and ``logprobs: 1`` when log-probs are wanted. Prompts
of a batch are sent concurrently (a thread pool of ``concurrency`` workers sharing one
``httpx.Client``).

Fail fast. Building the backend sends one ``GET {base_url}/v1/models`` (at most
:data:`PREFLIGHT_TIMEOUT_S`, no retry): when the server cannot be reached, times out, answers an
HTTP error, or does not list ``model_path`` among its model ids, :class:`FksInputError` (exit
code 2) names the URL and the reason (and the ids it does serve) before any query is sent and
before a run directory is touched. During a run, :func:`fks.generate.runner.generate_run` stops
early (exit code 2) when more than half of the last 32 requests failed.

Failures are bounded and never drop a prompt:

* retried: HTTP 5xx and 429, timeouts, connection errors, and a malformed body (not JSON, no
  ``choices[0].text``, or one field of the wrong kind: a NaN or positive log-prob, a string
  token count, an object ``finish_reason``; see :func:`_parse`); the wait before retry ``k``
  (0-based) is ``min(backoff_max, backoff_base * 2**k) * U(0.5, 1.5)`` with ``U`` from a
  ``random.Random`` seeded by ``(seed, prompt)``, so the schedule is reproducible;
* not retried: other 4xx (a bad request stays bad);
* after the last attempt the output has ``status`` ``timeout`` (the last failure was a timeout)
  or ``error``, and ``error`` gives the reason.

A timeout halves the requests in flight (:class:`_InFlight`, down to one, for the rest of the
run). A server with one slot (llama-cpp-python's) queues concurrent requests, so a request
waits for every one ahead of it: once ``concurrency`` times the server's time per request
passes ``timeout``, every request times out, and each retry joins the same queue. On Gemma 3
270M, llama-cpp-python takes about 20 s per request with ``logprobs`` (it sorts the
262,144-token vocabulary in Python for every generated token) and about 1 s without. So 8
requests in flight under a 60 s timeout finished 0 of 128 queries in 9 minutes. With the
limit, the backend settles at the concurrency the server can serve within the timeout and
logs each step down.

Greedy stays greedy: every request also carries :data:`NEUTRAL_PENALTIES`. Against
llama-cpp-python's server on SmolLM2-135M-Instruct Q4_1 (first 32 demo queries), 19 of 32 answers
equalled the HF backend's on the dequantized weights without them and 30 of 32 with them: its
default ``repeat_penalty`` 1.1 covers the prompt and cuts greedy loops short with an early
``finish_reason: "stop"``. What still differs from HF, and why (README, "Through an
OpenAI-compatible server"): llama.cpp multiplies quantized weights with 8-bit-quantized
activations, so near-ties of the argmax can flip; it stops on every end-of-generation token of
the GGUF (SmolLM2: ids 0, 2, 4) where HF stops on ``eos_token_id`` only; tokenization (no BOS
for SmolLM2) agrees.

Log-probs are taken from ``choices[0].logprobs.token_logprobs`` when the server returns them.
The API key is read by the caller (e.g. from ``OPENAI_API_KEY``) and sent as a bearer token; it is
never part of :meth:`OpenAICompletionsBackend.describe`.

Prompt truncation to ``max_prompt_len`` needs the server's tokenizer and is not done here; the
benchmark's prompts are far shorter than 192 tokens. With ``server_truncation=True`` the request
carries ``truncate_prompt_tokens`` (a vLLM extension that keeps the last tokens).
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from fks.configs import GenerationConfig
from fks.data.schema import LOGPROB_SLACK
from fks.errors import FksInputError
from fks.generate.backends.base import GenerationOutput

__all__ = ["OpenAICompletionsBackend", "backoff_delay"]

log = logging.getLogger(__name__)

#: sent with every request so that greedy stays greedy: llama-cpp-python's server applies
#: ``repeat_penalty`` 1.1 over the last 64 tokens (prompt included) even at temperature 0, and
#: vLLM applies a checkpoint's ``repetition_penalty`` unless the request says otherwise; each
#: server ignores the names it does not know
NEUTRAL_PENALTIES: dict[str, float] = {"frequency_penalty": 0.0, "presence_penalty": 0.0,
                                       "repeat_penalty": 1.0, "repetition_penalty": 1.0}

#: the most seconds the preflight ``GET /v1/models`` waits (less when ``timeout`` is less)
PREFLIGHT_TIMEOUT_S = 10.0


class _InFlight:
    """How many requests may be in flight: ``limit``, halved on a timeout (at least 1).

    Requests sent together time out together, so a timeout lowers the limit only when the
    request was sent under the current limit (its ``epoch``): one crowded moment halves it
    once, and a second halving needs a timeout under the new limit.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.epoch = 0
        self._active = 0
        self._cond = threading.Condition()

    def acquire(self) -> int:
        """Wait for a free slot; return the epoch the request is sent in."""
        with self._cond:
            while self._active >= self.limit:
                self._cond.wait()
            self._active += 1
            return self.epoch

    def release(self) -> None:
        """Free the slot."""
        with self._cond:
            self._active -= 1
            self._cond.notify_all()

    def timed_out(self, epoch: int, timeout: float) -> None:
        """Halve the limit after a timeout of a request sent in ``epoch`` (logged)."""
        with self._cond:
            if epoch != self.epoch or self.limit <= 1:
                return
            self.limit //= 2
            self.epoch += 1
            log.warning("a request timed out after %g s: the server is slower than %d "
                        "requests in flight allow; sending at most %d at a time from now "
                        "(raise --timeout or lower --concurrency to choose)", timeout,
                        self.limit * 2, self.limit)


class _Retryable(Exception):
    """A failure worth retrying; ``kind`` is ``timeout`` or ``error``."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


class _Fatal(Exception):
    """A failure that retrying will not fix (e.g. HTTP 400)."""


def backoff_delay(attempt: int, rng: random.Random, base: float, cap: float) -> float:
    """Seconds to wait before retry ``attempt`` (0-based): capped exponential with jitter.

    ``min(cap, base * 2**attempt) * U(0.5, 1.5)``.

    >>> 0.5 <= backoff_delay(0, random.Random(1), 1.0, 8.0) <= 1.5
    True
    """
    return min(cap, base * 2**attempt) * (0.5 + rng.random())


class _Malformed(ValueError):
    """One field of a 200 reply that is not what the completions API specifies."""

    def __init__(self, field: str, expected: str, found: Any) -> None:
        text = json.dumps(found, default=str) if not isinstance(found, float) else repr(found)
        super().__init__(f"{field}: expected {expected}, found "
                         f"{text[:60] + '...' if len(text) > 60 else text}")


def _logprobs(lp: Any) -> list[float] | None:
    """``choices[0].logprobs.token_logprobs`` checked: finite numbers <= 0 (``None`` skipped)."""
    where = "choices[0].logprobs"
    if lp is None:
        return None
    if not isinstance(lp, dict):
        raise _Malformed(where, "an object", lp)
    values = lp.get("token_logprobs")
    if values is None:
        return None
    if not isinstance(values, list):
        raise _Malformed(f"{where}.token_logprobs", "a list of log-probabilities", values)
    out: list[float] = []
    for i, x in enumerate(values):
        if x is None:  # the first prompt token of an echo has none
            continue
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) \
                or x > LOGPROB_SLACK:
            raise _Malformed(f"{where}.token_logprobs[{i}]", "a finite log-probability <= 0", x)
        out.append(float(x))
    return out


def _count(value: Any, field: str) -> int | None:
    """Check a token count: absent, or a non-negative integer (never a string or float)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Malformed(field, "a non-negative integer token count", value)
    return value


def _parse(body: bytes, status_code: int) -> GenerationOutput:
    """Turn a 200 response body into an output; malformed bodies raise :class:`_Retryable`.

    Malformed is a body that is not JSON or has no ``choices[0].text`` string, and also one
    field that is there but wrong: a log-prob that is not a finite number <= 0 (NaN, 2.5,
    ``"-0.1"``), a token count that is not a non-negative integer, a ``finish_reason`` that is
    not a string, ``usage``/``logprobs`` that are not objects. The reason names the field, so
    after the last attempt the query's record (``status`` ``error``) says which one was bad;
    the rest of the batch is kept.
    """
    try:
        data = json.loads(body)
        choice = data["choices"][0]
        text = choice["text"]
        if not isinstance(text, str):
            raise _Malformed("choices[0].text", "a string", text)
        lp = choice.get("logprobs")
        logprobs = _logprobs(lp)
        usage = data.get("usage")
        if usage is None:
            usage = {}
        elif not isinstance(usage, dict):
            raise _Malformed("usage", "an object", usage)
        n_prompt = _count(usage.get("prompt_tokens"), "usage.prompt_tokens")
        n_gen = _count(usage.get("completion_tokens"), "usage.completion_tokens")
        if n_gen is None and isinstance(lp, dict) and isinstance(lp.get("tokens"), list):
            n_gen = len(lp["tokens"])
        finish = choice.get("finish_reason")
        if finish is not None and not isinstance(finish, str):
            raise _Malformed("choices[0].finish_reason", "a string", finish)
    except _Malformed as exc:
        raise _Retryable("error", f"malformed response (HTTP {status_code}): {exc}") from None
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise _Retryable("error", f"malformed response (HTTP {status_code}): "
                         f"{type(exc).__name__}: {str(exc)[:120]}") from None
    return GenerationOutput(text=text, n_prompt_tokens=n_prompt, n_generated_tokens=n_gen,
                            answer_logprobs=logprobs, finish_reason=finish)


class OpenAICompletionsBackend:
    """Greedy generation through an OpenAI-compatible completions server.

    Args:
        model_path: the model name the server serves (sent as ``model``).
        generation: the frozen decoding protocol.
        base_url: server root, e.g. ``http://127.0.0.1:8000`` (``/v1/completions`` is appended;
            a trailing ``/v1`` is accepted too).
        api_key: bearer token (default: the ``OPENAI_API_KEY`` environment variable, if set).
        concurrency: parallel requests.
        timeout: seconds per request (connect, read, write).
        max_retries: retries after the first attempt.
        backoff_base, backoff_max: the retry wait schedule (seconds), see :func:`backoff_delay`.
        logprobs: request ``logprobs: 1``.
        server_truncation: send ``truncate_prompt_tokens = max_prompt_len`` (vLLM servers).
        extra_body: more request fields, e.g. ``{"repetition_penalty": 1.0}`` for a vLLM server
            that would otherwise apply the checkpoint's generation defaults.
        seed: seeds the jitter of the retry waits.
        neutral_penalties: send :data:`NEUTRAL_PENALTIES` (off for a server that rejects
            fields it does not know).
        preflight: check at once that the server answers and serves ``model_path``
            (:meth:`check_server`); off only for tests of the per-request failure handling.
    """

    name = "openai"
    #: the server batches on its own, so the runner sends only prompts that lack a record
    regenerate_whole_batches = False

    def __init__(
        self,
        model_path: str,
        *,
        generation: GenerationConfig,
        base_url: str | None = None,
        api_key: str | None = None,
        concurrency: int = 8,
        timeout: float = 60.0,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        logprobs: bool = True,
        server_truncation: bool = False,
        extra_body: dict[str, Any] | None = None,
        seed: int | None = None,
        preflight: bool = True,
        neutral_penalties: bool = True,
    ) -> None:
        if not base_url:
            raise FksInputError("the openai backend needs --base-url", field="base_url")
        if concurrency < 1 or max_retries < 0 or timeout <= 0:
            raise FksInputError(
                f"need concurrency >= 1, max_retries >= 0, timeout > 0; found {concurrency}, "
                f"{max_retries}, {timeout}", field="concurrency")
        root = base_url.rstrip("/")
        api = root if root.endswith("/v1") else root + "/v1"
        self.url = api + "/completions"
        self.models_url = api + "/models"
        self.model = model_path
        self.generation = generation
        self.concurrency = concurrency
        self._in_flight = _InFlight(concurrency)
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = (backoff_base, backoff_max)
        self.logprobs = logprobs
        self.server_truncation = server_truncation
        self.extra_body = dict(extra_body or {})
        self.neutral_penalties = neutral_penalties
        self.seed = generation.seed if seed is None else seed
        if api_key is None:
            api_key = os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=httpx.Timeout(timeout), headers=headers,
                                    limits=httpx.Limits(max_connections=concurrency))
        self.served_models: list[str] | None = None
        if preflight:
            self.check_server()

    def check_server(self) -> list[str]:
        """Fail fast unless the server answers ``GET /v1/models`` and lists :attr:`model`.

        One request, no retries, at most :data:`PREFLIGHT_TIMEOUT_S` seconds.

        Returns:
            the served model ids.

        Raises:
            FksInputError: (exit code 2) naming the URL and the reason: connection refused or
                timed out, an HTTP error (401/403: check the API key; 404: the server has no
                ``/v1/models``), a body without ``data[].id``, or a model list without
                :attr:`model` (the message lists what it serves).
        """
        url = self.models_url

        def fail(reason: str) -> FksInputError:
            return FksInputError(f"the OpenAI-compatible server at {url} {reason}",
                                 field="base_url")

        try:
            resp = self._client.get(url, timeout=min(self.timeout, PREFLIGHT_TIMEOUT_S))
        except httpx.TimeoutException as exc:
            raise fail(f"did not answer within {min(self.timeout, PREFLIGHT_TIMEOUT_S):g} s "
                       f"({type(exc).__name__}); is it running?") from None
        except httpx.TransportError as exc:
            raise fail(f"cannot be reached ({type(exc).__name__}: {exc}); is it running?"
                       ) from None
        if resp.status_code in (401, 403):
            raise fail(f"refused the request (HTTP {resp.status_code}); check the API key "
                       "(--api-key-env)")
        if resp.status_code != 200:
            raise fail(f"answered HTTP {resp.status_code}: {resp.text[:160]!r}")
        try:
            served = [str(m["id"]) for m in json.loads(resp.content)["data"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise fail(f"sent a model list without data[].id ({type(exc).__name__}: "
                       f"{str(exc)[:80]})") from None
        if self.model not in served:
            shown = ", ".join(repr(m) for m in served[:5]) + (" ..." if len(served) > 5 else "")
            raise fail(f"does not serve model {self.model!r}; it serves {shown or 'nothing'} "
                       "(pass one of them as --model-path)")
        self.served_models = served
        return served

    def _payload(self, prompt: str, max_new_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "prompt": prompt,
                                "max_tokens": max_new_tokens, "temperature": 0}
        if self.neutral_penalties:
            body |= NEUTRAL_PENALTIES
        if self.logprobs:
            body["logprobs"] = 1
        if self.server_truncation:
            body["truncate_prompt_tokens"] = self.generation.max_prompt_len
        return body | self.extra_body

    def _attempt(self, payload: dict[str, Any]) -> GenerationOutput:
        """One request; raises :class:`_Retryable` or :class:`_Fatal` on failure."""
        try:
            resp = self._client.post(self.url, json=payload)
        except httpx.TimeoutException as exc:
            raise _Retryable("timeout", f"timed out after {self.timeout:g}s "
                             f"({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            raise _Retryable("error", f"connection error: {type(exc).__name__}: {exc}") from None
        if resp.status_code >= 500 or resp.status_code == 429:
            raise _Retryable("error", f"HTTP {resp.status_code}: {resp.text[:160]}")
        if resp.status_code >= 400:
            raise _Fatal(f"HTTP {resp.status_code}: {resp.text[:160]}")
        return _parse(resp.content, resp.status_code)

    def _one(self, prompt: str, max_new_tokens: int) -> GenerationOutput:
        """Send one prompt with bounded retries; always returns an output."""
        rng = random.Random(f"{self.seed}:{prompt}")
        payload = self._payload(prompt, max_new_tokens)
        last: _Retryable | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(backoff_delay(attempt - 1, rng, *self.backoff))
            epoch = self._in_flight.acquire()
            try:
                return self._attempt(payload)
            except _Retryable as exc:
                last = exc
                if exc.kind == "timeout":
                    self._in_flight.timed_out(epoch, self.timeout)
                log.debug("attempt %d failed: %s", attempt + 1, exc.reason)
            except _Fatal as exc:
                return GenerationOutput(text="", status="error", error=str(exc))
            except Exception as exc:  # noqa: BLE001 - one bad reply never loses the batch
                return GenerationOutput(text="", status="error",
                                        error=f"unexpected {type(exc).__name__}: "
                                              f"{str(exc)[:160]}")
            finally:
                self._in_flight.release()
        assert last is not None
        return GenerationOutput(
            text="", status="timeout" if last.kind == "timeout" else "error",
            error=f"{last.reason} (after {self.max_retries + 1} attempts)",
        )

    def generate(self, prompts: list[str], *, max_new_tokens: int) -> list[GenerationOutput]:
        """Greedy continuations of ``prompts``, requested concurrently, returned in order."""
        if not prompts:
            return []
        workers = min(self.concurrency, len(prompts))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda p: self._one(p, max_new_tokens), prompts))

    def describe(self) -> dict[str, Any]:
        """Server URL, model name and the request/retry settings (never the API key)."""
        return {
            "backend": self.name,
            "model_path": self.model,
            "url": self.url,
            "weights_sha256": None,
            "tokenizer_sha256": None,
            "dtype": None,
            "concurrency": self.concurrency,
            "timeout_s": self.timeout,
            "max_retries": self.max_retries,
            "backoff_s": list(self.backoff),
            "logprobs": self.logprobs,
            "extra_body": self.extra_body,
            "neutral_penalties": NEUTRAL_PENALTIES if self.neutral_penalties else None,
            "prompt_truncation": (
                "server: truncate_prompt_tokens" if self.server_truncation else "none"),
        }

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()
