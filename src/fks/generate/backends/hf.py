"""Hugging Face ``transformers`` backend: batched greedy generation under the frozen protocol.

* Model and tokenizer from a local folder or a hub id (``trust_remote_code`` only when asked). A
  hub id is checked first (:func:`hub_load_offline`, at most :data:`HUB_PROBE_TIMEOUT_S` s,
  before torch is imported): the hub answers, and the load goes as usual; it does not (or
  ``HF_HUB_OFFLINE`` is set) and the id is cached, and the cached files load with no request;
  it is not cached either, and :class:`~fks.errors.FksInputError` with an offline hint comes
  at once, not after ``from_pretrained``'s retries. A local folder's ``*.safetensors`` headers
  are checked first (:func:`check_safetensors`), so a truncated file is named.
* Prompts are tokenised by :func:`fks.generate.prompts.encode_prompt` (cut to ``max_prompt_len``
  keeping the end), LEFT-padded with an attention mask; position ids follow the mask inside
  ``generate``, so a prompt's output does not depend on the batch it is in.
* Greedy (``do_sample=False``, one beam), at most ``max_new_tokens`` new tokens, stop at EOS (the
  model's generation-config EOS ids, else the tokenizer's). The checkpoint's own generation
  defaults (sampling, repetition penalty, ``min_new_tokens``, ...) are NOT used: the model's
  ``generation_config`` is replaced by one holding only the special tokens, because ``generate``
  would otherwise fill every unset option from it.
* dtype (:func:`resolve_dtype`): ``generation.dtype`` (bfloat16) on GPU; on CPU float32 by
  default, or with ``dtype="auto"`` (the CLI's ``--dtype`` default) bfloat16 where the CPU computes
  it natively (:func:`cpu_native_bf16`: AMX-BF16 or AVX512-BF16), float32 elsewhere. The dtype
  used is recorded.
* ``model_path`` goes through :func:`fks.generate.gguf.resolve_model_source`: a ``.gguf`` file,
  a folder holding one, or ``package:MODULE/FILE`` is dequantized once into a cached checkpoint,
  and ``describe()`` then carries the GGUF's sha256, quantization and dequantized dtype
  (``gguf``) and ``weights_sha256`` is the digest of the GGUF file.
* ``device_map="auto"`` (needs ``accelerate``) spreads a model too large for one GPU over all
  visible GPUs (and CPU memory if need be); inputs go to the embedding's device. This is the
  hidden-state path for big models (generation itself can use vLLM's tensor parallelism).
* Answer = generated tokens before the first EOS. ``answer_logprobs[i]`` is
  ``log_softmax(logits_i)[token_i]`` from the raw (unprocessed) logits, recorded step by step
  (:class:`_ChosenLogprobs`, no copy of the whole logits is kept); ``finish_reason`` is
  ``stop`` when an EOS was generated, ``length`` otherwise.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from fks.configs import GenerationConfig
from fks.errors import FksInputError
from fks.generate.backends.base import GenerationOutput
from fks.generate.backends.packed import pack_linears
from fks.generate.prompts import encode_prompt
from fks.hidden.capture import cache_kwarg, last_logits_kwargs, mask_position_ids
from fks.io import sha256_file
from fks.workers import resolve_workers, shared_threads

try:
    from safetensors import SafetensorError
except ImportError:  # pragma: no cover - safetensors is a dependency
    SafetensorError = OSError  # type: ignore[assignment,misc]

__all__ = [
    "HFBackend",
    "resolve_device",
    "files_digest",
    "local_model_dir",
    "offline_error",
    "hub_load_offline",
    "check_safetensors",
    "HUB_PROBE_TIMEOUT_S",
    "kernel_settings",
    "model_file_hashes",
    "WEIGHT_PATTERNS",
    "TOKENIZER_FILES",
    "DTYPES",
    "cpu_native_bf16",
    "resolve_dtype",
]

log = logging.getLogger(__name__)

#: weight files hashed into ``weights_sha256``
WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.gguf")
#: tokenizer files hashed into ``tokenizer_sha256`` (those present)
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "added_tokens.json",
    "chat_template.jinja",
)


def resolve_device(device: str | None) -> str:
    """``device`` as given (checked), else ``cuda`` when available, else ``cpu``.

    Raises:
        FksInputError: (field ``device``) a string torch does not parse as a device
            (``tpu:7``), or a device this machine does not have: CUDA without a GPU, an index
            past the last GPU, MPS off macOS, or another backend torch reports unavailable.
    """
    if device and re.fullmatch(r"cpu(:\d+)?", device):
        return device  # without importing torch: a hub check can still fail in a second
    import torch

    if not device:
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        raise FksInputError(f"expected a torch device such as cpu, cuda, cuda:1 or mps; "
                            f"found {device!r}", field="device") from None
    kind, index = parsed.type, parsed.index
    if kind == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise FksInputError(f"found {device!r}, but this machine has no CUDA GPU visible to "
                                "torch (use --device cpu)", field="device")
        if index is not None and index >= count:
            raise FksInputError(f"found {device!r}, but this machine has {count} CUDA GPU(s) "
                                f"(cuda:0 to cuda:{count - 1})", field="device")
        return device
    module = getattr(torch.backends, kind, None) if kind == "mps" else getattr(torch, kind, None)
    available = getattr(module, "is_available", None)
    if not callable(available) or not available():
        raise FksInputError(f"found {device!r}, but torch has no {kind} device on this machine "
                            "(use cpu or cuda)", field="device")
    return device


#: values ``--dtype`` accepts (``auto``: see :func:`resolve_dtype`)
DTYPES = ("auto", "bfloat16", "float16", "float32")


@functools.cache
def cpu_native_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (so bf16 is faster than float32, not slower).

    Decided from the Linux ``/proc/cpuinfo`` flags ``amx_bf16`` (Sapphire Rapids and later) or
    ``avx512_bf16`` (Cooper Lake, Zen 4 and later): oneDNN, which torch uses for bf16 matrix
    products on CPU, has native kernels for exactly these. Anything else (no such file, e.g.
    macOS or Windows, or a CPU without the flags) is False: there bf16 is emulated and slower.
    """
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return False
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines()
                  if line.startswith("flags")), [])
    return "amx_bf16" in flags or "avx512_bf16" in flags


def resolve_dtype(device: str, generation_dtype: str, requested: str | None = None) -> str:
    """Return the dtype a model runs in on ``device``.

    Args:
        device: ``cpu``, ``cuda``, ``cuda:1``, ...
        generation_dtype: the protocol's dtype (``generation.dtype``, bfloat16).
        requested: ``None`` (the library default: the protocol's dtype on GPU, float32 on
            CPU), ``auto`` (the protocol's dtype on GPU and on a CPU with native bf16, float32
            on other CPUs) or an explicit dtype name (used as given).

    Raises:
        FksInputError: an unknown dtype name.
    """
    if requested not in (None, *DTYPES):
        raise FksInputError(f"expected one of {', '.join(DTYPES)}; found {requested!r}",
                            field="dtype")
    if requested not in (None, "auto"):
        return requested
    if not device.startswith("cpu"):
        return generation_dtype
    if requested == "auto" and generation_dtype == "bfloat16" and cpu_native_bf16():
        return "bfloat16"
    return "float32"


def files_digest(files: list[Path]) -> str | None:
    """sha256 over ``(name, sha256(file))`` of ``files`` sorted by name; None when empty."""
    if not files:
        return None
    h = hashlib.sha256()
    for p in sorted(files, key=lambda x: x.name):
        h.update(p.name.encode())
        h.update(sha256_file(p).encode())
    return h.hexdigest()


def offline_error(model_path: str, exc: BaseException) -> FksInputError:
    """Build the input error for a model neither in a local folder nor reachable on the hub."""
    offline = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    return FksInputError(
        f"cannot load model {model_path!r}: it is not a local folder and the Hugging Face hub "
        "cannot be reached" + (" (HF_HUB_OFFLINE is set)" if offline else "")
        + "; download it on a connected machine (huggingface-cli download) and pass the local "
        f"folder with --model-path ({type(exc).__name__}: {first})",
        path=model_path,
        field="model_path",
    )


#: the most seconds a hub id waits to learn whether the hub answers (DNS included)
HUB_PROBE_TIMEOUT_S = 2.0
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _hub_answers(timeout: float | None = None) -> str | None:
    """Return None when the hub endpoint answers HTTP within ``timeout`` s, else the reason.

    One ``HEAD`` of the endpoint (``HF_ENDPOINT``, default ``https://huggingface.co``) through
    httpx, proxies honoured, in a daemon thread that is given up on after ``timeout``: a
    resolver that hangs counts against the budget too, which httpx's own timeout does not
    cover. Any HTTP status is an answer.
    """
    import threading

    import httpx

    timeout = HUB_PROBE_TIMEOUT_S if timeout is None else timeout
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    result: list[str | None] = []

    def probe() -> None:
        try:
            httpx.head(endpoint, timeout=timeout, follow_redirects=False)
            result.append(None)
        except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
            result.append(f"{type(exc).__name__}: {str(exc)[:120]}")

    worker = threading.Thread(target=probe, name="fks-hub-probe", daemon=True)
    worker.start()
    worker.join(timeout + 0.5)
    if not result:
        return f"{endpoint} did not answer within {timeout:g} s"
    return None if result[0] is None else f"{endpoint}: {result[0]}"


def hub_load_offline(model_path: str, revision: str | None) -> bool:
    """Decide, in at most :data:`HUB_PROBE_TIMEOUT_S` s, how a non-local ``model_path`` loads.

    Returns ``False`` (load as usual) for a local file or folder, and for a hub id when the
    hub answers; ``True`` (``local_files_only``: no request at all) for a hub id whose files
    are in the Hugging Face cache while the hub is unreachable or ``HF_HUB_OFFLINE`` is set.
    Without this, ``from_pretrained`` spends 24-50 s retrying each file on an offline machine
    before the same error.

    Raises:
        FksInputError: a path that does not exist and is no hub id (``namespace/name``), or a
            hub id that is not cached while the hub is unreachable or offline mode is on.
    """
    if Path(model_path).exists():
        return False
    if not _REPO_ID.match(model_path) or ".." in model_path:
        raise FksInputError("no such file or folder (and not a Hugging Face hub id "
                            "namespace/name)", path=model_path, field="model_path")
    cached = False
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = isinstance(try_to_load_from_cache(model_path, "config.json",
                                                   revision=revision), str)
    except Exception:  # noqa: BLE001 - an odd id or cache: let the probe decide
        cached = False
    offline = _truthy("HF_HUB_OFFLINE") or _truthy("TRANSFORMERS_OFFLINE")
    reason = "offline mode, and not in the Hugging Face cache" if offline else _hub_answers()
    if reason is None:
        return False
    if cached:
        log.info("%s: the hub is not reachable (%s); loading the cached snapshot", model_path,
                 reason)
        return True
    raise offline_error(model_path, ConnectionError(reason))


def _folder_error(folder: str, exc: BaseException) -> FksInputError:
    """Build the input error for a local model folder that does not load (a bad file)."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    return FksInputError(f"cannot load the model in this folder ({type(exc).__name__}: "
                         f"{first})", path=folder, field="model_path")


def local_model_dir(model_path: str, revision: str | None) -> Path | None:
    """Find the folder holding the model's files: the path itself, or its hub snapshot."""
    p = Path(model_path)
    if p.is_dir():
        return p
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model_path, revision=revision, local_files_only=True))
    except Exception:  # not cached as a snapshot; hashes are then unknown
        return None


def model_file_hashes(model_path: str, revision: str | None) -> dict[str, Any]:
    """``weights_sha256`` (see :data:`WEIGHT_PATTERNS`), ``tokenizer_sha256``, ``weight_files``."""
    folder = local_model_dir(model_path, revision)
    weights = [p for pat in WEIGHT_PATTERNS for p in (folder.glob(pat) if folder else [])]
    tok = [folder / n for n in TOKENIZER_FILES if folder and (folder / n).is_file()]
    return {
        "weights_sha256": files_digest(weights),
        "weight_files": sorted(p.name for p in weights),
        "tokenizer_sha256": files_digest(tok),
    }


def check_safetensors(folder: str | Path) -> None:
    """Refuse a truncated or corrupt ``*.safetensors`` in ``folder`` before loading it.

    Reads only each file's header: the 8-byte length, the JSON header, and the end of the
    last tensor's data, which must be the file's end. A file cut short (a partial copy or
    download) is :class:`FksInputError` naming it, where safetensors' own error names none.
    """
    import json
    import struct

    for path in sorted(Path(folder).glob("*.safetensors")):
        size = path.stat().st_size
        try:
            with path.open("rb") as fh:
                head = fh.read(8)
                if len(head) < 8:
                    raise ValueError("shorter than the 8-byte header length")
                (n,) = struct.unpack("<Q", head)
                if 8 + n > size:
                    raise ValueError(f"header of {n} bytes, file of {size}")
                header = json.loads(fh.read(n))
            ends = [int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"]
        except (ValueError, KeyError, TypeError, IndexError, RecursionError) as exc:
            raise FksInputError(f"not a readable safetensors file ({str(exc)[:120]}); copy or "
                                "download it again", path=path, field="model_path") from None
        if 8 + n + max(ends, default=0) != size:
            raise FksInputError(f"truncated or padded safetensors file: its tensors end at byte "
                                f"{8 + n + max(ends, default=0)}, the file has {size}; copy or "
                                "download it again", path=path, field="model_path")


def _require_accelerate() -> None:
    """Raise :class:`FksInputError` with the install hint when ``accelerate`` is missing."""
    import importlib.util

    if importlib.util.find_spec("accelerate") is None:
        raise FksInputError("device_map needs the accelerate package: pip install accelerate "
                            "(or drop --device-map and use one --device)", field="device_map")


def kernel_settings() -> dict[str, Any]:
    """Return the numeric settings that can move a bf16 answer (recorded, issue 29).

    torch version, intra-op threads, the CPU's vector ISA as torch dispatches it, oneDNN
    (mkldnn) availability and the float32 matmul precision. Two runs that differ here may
    differ in bf16 answers; float32 answers do not move with these (``tests/generate``).
    """
    import torch

    cpu = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    return {"torch": torch.__version__, "threads": torch.get_num_threads(),
            "cpu_capability": cpu() if callable(cpu) else None,
            "mkldnn": bool(torch.backends.mkldnn.is_available()),
            "float32_matmul_precision": torch.get_float32_matmul_precision()}


#: vocabularies at least this large take the compiled log-prob kernel (Gemma's 262,144 words;
#: a small vocabulary's eager reduction costs little, and tests and the demo stay eager)
FUSED_MIN_VOCAB = 32768
_FUSED: dict[str, Any] = {}
_FUSED_LOCK = threading.Lock()
_FUSED_SEEN: set[tuple[str, int, int]] = set()  # (dtype, vocabulary, min(rows, 2))


def _fused_chosen(scores: Any) -> tuple[Any, Any]:
    """``(max - logsumexp, argmax)`` of ``(batch, vocab)`` logits in two fused passes.

    Compiled with ``torch.compile`` (inductor's C++ CPU kernels) for each vocabulary size,
    with a dynamic batch. The first pass finds each row's maximum; the second computes the
    argmax as the first index holding that maximum (``torch.argmax``'s choice among ties) and
    the sum of ``exp(logit - max)``: float32 partial sums over blocks of at most 1,024
    words, added in float64. Two reads of the logits instead of the eager path's three, and
    closer to a float64 reference than eager ``torch.logsumexp`` (``bench_real_models.py
    logprobs``). On random bf16 logits of Gemma's shape, ``(64, 262,144)``, it takes 5.9 ms a
    step against 17.3 ms for stop 35's one-pass kernel (a symbolic vocabulary, every term
    summed in float64, and an argmax inductor did not vectorise; error against float64
    1.5e-7 and 1.2e-7; the same tokens). A row whose
    maximum matches no logit (a NaN) is left to the eager path. Falls back to eager -- once,
    with a warning -- when compiling fails (no C++ compiler); ``FKS_COMPILE=0`` turns it off.
    """
    # dynamo compiles (and recompiles for a new dtype, vocabulary or a one-row batch) in the
    # calling thread and is not thread-safe then: a call of a kind not seen yet holds the
    # lock, so generation workers (HFBackend.workers) never compile at once
    kind = (str(scores.dtype), int(scores.shape[-1]), min(int(scores.shape[0]), 2))
    if kind not in _FUSED_SEEN:
        with _FUSED_LOCK:
            out = _fused_call(scores)
            _FUSED_SEEN.add(kind)
            return out
    return _fused_call(scores)


#: the most words one float32 partial sum of the fused kernel adds (then float64 across blocks)
FUSED_BLOCK = 1024


def _fused_kernel(s: Any) -> tuple[Any, Any]:
    """Compute what :func:`_fused_chosen` compiles (every shape static but the batch)."""
    import math

    import torch

    x = s.float()
    rows, vocab = x.shape
    top = x.amax(dim=-1)
    index = torch.arange(vocab, device=x.device)
    token = torch.where(x == top[:, None], index, vocab).amin(dim=-1)
    e = torch.exp(x - top[:, None])
    block = math.gcd(vocab, FUSED_BLOCK)
    if block >= 64:  # else one float64 sum over the row (a vocabulary with no such divisor)
        e = e.view(rows, vocab // block, block).sum(-1)
    return (-torch.log(e.double().sum(-1))).float(), token


def _fused_call(scores: Any) -> tuple[Any, Any]:
    """Compile (first call) and run the kernel of :func:`_fused_chosen`."""
    import torch

    fn = _FUSED.get("fn")
    if fn is None and "failed" not in _FUSED:
        fn = torch.compile(_fused_kernel, dynamic=False)
    if fn is not None:
        try:
            x = scores.contiguous()
            if x.shape[0] > 1:  # one graph for every batch size (a one-row batch is its own)
                torch._dynamo.mark_dynamic(x, 0)
            logp, token = fn(x)
            _FUSED["fn"] = fn
            if int(token.max()) < scores.shape[-1]:
                return logp, token
            return _eager_chosen(scores)  # a NaN row: torch's own argmax and logsumexp
        except Exception as exc:  # noqa: BLE001 - any compiler failure falls back to eager
            _FUSED["failed"] = repr(exc)[:200]
            _FUSED.pop("fn", None)
            log.warning("compiled log-prob kernel unavailable (%s); using eager reductions",
                        _FUSED["failed"])
    return _eager_chosen(scores)


def _eager_chosen(scores: Any) -> tuple[Any, Any]:
    import torch

    top, token = scores.float().max(dim=-1)
    return top - torch.logsumexp(scores.float(), dim=-1), token


def logprob_kernel(vocab: int) -> str:
    """Name the kernel that computes answer log-probs for a vocabulary (recorded)."""
    if vocab < FUSED_MIN_VOCAB or os.environ.get("FKS_COMPILE", "1") == "0":
        return "eager"
    return "eager (compile failed)" if "failed" in _FUSED else "inductor"


def chosen_logprobs(scores: Any) -> tuple[Any, Any]:
    """Return ``(log_softmax(scores)[argmax], argmax)`` per row of ``(batch, vocab)`` logits.

    By the kernel :func:`logprob_kernel` names for this vocabulary; ``scores`` are the raw
    logits in any float dtype.
    """
    if logprob_kernel(scores.shape[-1]) == "inductor":
        return _fused_chosen(scores)
    return _eager_chosen(scores)


def decode_loop(model: Any) -> str:
    """Name the greedy loop that generates for ``model`` (recorded with the kernel settings).

    ``fks`` (:meth:`HFBackend._greedy_loop`) when the forward takes an attention mask, position
    ids and a KV cache; else ``transformers`` (its ``generate``). ``FKS_DECODE=transformers``
    forces the latter (a cross-check; ``bench_real_models.py generate --loops`` times both). A
    cache that turns out unable to drop finished rows sends its batch to ``generate`` at run
    time (:meth:`HFBackend._greedy_loop`).
    """
    import inspect

    if os.environ.get("FKS_DECODE", "fks").strip().lower() == "transformers":
        return "transformers"
    params = inspect.signature(model.forward).parameters
    takes = {"attention_mask", "position_ids", "use_cache"} <= set(params) and (
        "cache" in params or "past_key_values" in params)
    return "fks" if takes else "transformers"


class _ChosenLogprobs:
    """A logits processor that keeps, per decoding step, the log-prob of the greedy token.

    It returns the scores unchanged. The protocol sets no other processor (the module
    docstring), so the scores it sees are the raw logits, and the greedy token is their argmax:
    ``log_softmax(logits)[argmax] = max - logsumexp``, a ``(batch,)`` vector per step. Before
    issue 29 ``generate`` kept every step's whole ``(batch, vocab)`` logits
    (``output_logits``: 1.6 GB per batch of 64 for Gemma's 262k vocabulary) only to read
    these values. :meth:`chosen` checks that each recorded argmax is the token generated.
    """

    def __init__(self) -> None:
        self.steps: list[tuple[Any, Any]] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        self.steps.append(chosen_logprobs(scores))
        return scores

    def chosen(self, new: Any, eos_ids: list[int]) -> Any:
        """``(batch, steps)`` log-probs of the generated tokens ``new`` (checked)."""
        import torch

        if not self.steps:
            return torch.zeros(new.shape[0], 0)
        logp = torch.stack([lp for lp, _ in self.steps], dim=1).cpu()
        tokens = torch.stack([t for _, t in self.steps], dim=1).cpu()
        n = min(tokens.shape[1], new.shape[1])
        # after its EOS a row gets padding, not the argmax; those steps are never read
        eos = torch.isin(new[:, :n], torch.tensor(eos_ids, dtype=new.dtype))
        live = torch.cumsum(eos, dim=1) - eos.long() == 0
        if not bool(((tokens[:, :n] == new[:, :n]) | ~live).all()):
            raise RuntimeError("a logits processor changed the greedy choice; answer_logprobs "
                               "would not be the chosen tokens'")
        return logp


class HFBackend:
    """Greedy batched generation with ``AutoModelForCausalLM`` (see the module docstring).

    Args:
        model_path: a local folder or a hub id.
        generation: the frozen decoding protocol (``configs.models.generation``).
        device: ``cpu``, ``cuda``, ``cuda:1``, ...; default: cuda when available.
        trust_remote_code: allow model code from the repository (off unless a flag sets it).
        revision: hub revision, when loading by id.
        dtype: ``auto``, a dtype name, or None (see :func:`resolve_dtype`).
        device_map: ``"auto"`` (or an explicit map) to place the layers with ``accelerate``
            across devices instead of moving the whole model to ``device``.
        max_time_s: a wall-clock budget per :meth:`generate` call (transformers'
            ``max_time``), for auxiliary models such as an LLM judge; None (the evaluated
            models' protocol) means none. A prompt whose continuation was cut by the budget
            (no EOS and fewer than ``max_new_tokens`` tokens) comes back as ``status
            "timeout"`` with no text, never as a silently shortened answer.
    """

    name = "hf"

    def __init__(
        self,
        model_path: str,
        *,
        generation: GenerationConfig,
        device: str | None = None,
        trust_remote_code: bool = False,
        revision: str | None = None,
        dtype: str | None = None,
        device_map: str | dict[str, Any] | None = None,
        max_time_s: float | None = None,
        workers: int | None = None,
    ) -> None:
        from fks.generate.gguf import resolve_model_source

        self.model_path = str(model_path)
        self.source = resolve_model_source(self.model_path)
        # before torch is imported: an offline machine fails in seconds, not after retries
        local_only = hub_load_offline(self.source.load_path, revision)
        if Path(self.source.load_path).is_dir():
            check_safetensors(self.source.load_path)

        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.generation = generation
        self.device = resolve_device(None if device_map else device)
        self.device_map = device_map
        if device_map:
            _require_accelerate()
        self.dtype = resolve_dtype(self.device, generation.dtype, dtype)
        self.revision = revision
        self.trust_remote_code = trust_remote_code
        if max_time_s is not None and not max_time_s > 0:
            raise FksInputError(f"must be > 0 seconds; found {max_time_s!r}", field="timeout")
        self.max_time_s = max_time_s
        self._transformers_version = transformers.__version__
        torch.manual_seed(generation.seed)
        kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code, "revision": revision}
        if local_only:
            kwargs["local_files_only"] = True
        placement = {"device_map": device_map} if device_map else {}
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.source.load_path, **kwargs)
            self.model = AutoModelForCausalLM.from_pretrained(
                self.source.load_path, dtype=getattr(torch, self.dtype), **placement, **kwargs
            )
        except OSError as exc:
            if Path(self.source.load_path).is_dir():
                raise _folder_error(self.source.load_path, exc) from None
            raise offline_error(self.model_path, exc) from None
        except SafetensorError as exc:  # a corrupt weight file check_safetensors let through
            raise _folder_error(self.source.load_path, exc) from None
        if device_map:  # accelerate placed the layers; inputs go where the embedding is
            self.device = str(self.model.get_input_embeddings().weight.device)
        else:
            self.model.to(self.device)
        self.model.eval()
        # bf16 on a CPU: oneDNN-packed linear weights, the same bytes (fks.generate.backends.packed)
        self.packing = pack_linears(self.model) if not device_map else {"linear": "aten"}
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.eos_ids = self._eos_ids()
        self._clear_model_generation_defaults()
        self._describe: dict[str, Any] | None = None
        self.workers = resolve_workers(self.device, device_map, workers)
        # a fast tokenizer refuses concurrent use ("Already borrowed"): workers take turns
        self._tokenizer_lock = threading.Lock()

    def _clear_model_generation_defaults(self) -> None:
        """Replace the checkpoint's ``generation_config`` by one holding only special tokens.

        ``generate`` fills every option left unset in the config it is given from
        ``model.generation_config`` (a checkpoint's ``repetition_penalty``, ``top_k``,
        ``min_new_tokens``, ...), which would silently break the greedy protocol.
        """
        from transformers import GenerationConfig as HFGenerationConfig

        self.checkpoint_generation_config = self.model.generation_config.to_diff_dict()
        self.model.generation_config = HFGenerationConfig(
            bos_token_id=self.tokenizer.bos_token_id,
            eos_token_id=self.eos_ids,
            pad_token_id=self.tokenizer.pad_token_id,
        )

    def _vocab_size(self) -> int:
        out = self.model.get_output_embeddings()
        weight = getattr(out, "weight", None)
        return int(weight.shape[0]) if weight is not None else len(self.tokenizer)

    def _eos_ids(self) -> list[int]:
        eos = getattr(self.model.generation_config, "eos_token_id", None)
        if eos is None:
            eos = self.tokenizer.eos_token_id
        if eos is None:
            raise FksInputError("the model and tokenizer define no EOS token", path=self.model_path)
        return [eos] if isinstance(eos, int) else list(eos)

    def _pad_batch(self, encoded: list[list[int]]) -> tuple[Any, Any]:
        """LEFT-pad token id lists: ``(input_ids, attention_mask)``, both ``(batch, max_len)``."""
        import torch

        width = max(len(ids) for ids in encoded)
        pad = self.tokenizer.pad_token_id
        ids = torch.full((len(encoded), width), pad, dtype=torch.long)
        mask = torch.zeros((len(encoded), width), dtype=torch.long)
        for row, seq in enumerate(encoded):
            ids[row, width - len(seq):] = torch.tensor(seq, dtype=torch.long)
            mask[row, width - len(seq):] = 1
        return ids.to(self.device), mask.to(self.device)

    def generate(self, prompts: list[str], *, max_new_tokens: int) -> list[GenerationOutput]:
        """Greedy continuations of ``prompts`` (one output per prompt, in order)."""
        if not prompts:
            return []
        cap = self.generation.max_prompt_len
        with self._tokenizer_lock:
            encoded = [encode_prompt(self.tokenizer, p, cap) for p in prompts]
        input_ids, attention_mask = self._pad_batch([ids for ids, _ in encoded])
        started = time.monotonic()
        if decode_loop(self.model) == "fks":
            tokens, logprobs = self._greedy_loop(input_ids, attention_mask, max_new_tokens,
                                                 started)
        else:
            tokens, logprobs = self._greedy_generate(input_ids, attention_mask, max_new_tokens)
        elapsed = time.monotonic() - started
        with self._tokenizer_lock:
            outputs = [self._output(tokens[row], logprobs[row], encoded[row])
                       for row in range(len(prompts))]
        if self.max_time_s is not None and elapsed >= self.max_time_s:
            outputs = [self._timed_out(o, max_new_tokens, elapsed) for o in outputs]
        return outputs

    def parallel(self) -> contextlib.AbstractContextManager[None]:
        """Let ``generate`` run in :attr:`workers` threads at once while open (the runner's).

        Each worker gets its share of the process's torch threads
        (:func:`fks.workers.shared_threads`).
        """
        return shared_threads(self.workers)

    def _greedy_loop(self, input_ids: Any, attention_mask: Any, max_new_tokens: int,
                     started: float) -> tuple[list[list[int]], list[list[float]]]:
        """Run fks's own greedy loop (issue 29): each row's tokens (to its EOS) and log-probs.

        The same computation as ``generate`` under the protocol -- one prefill of the
        left-padded batch (position ids from the mask, last position's logits only), then one
        token per step on the KV cache, the argmax of the raw logits -- without what it adds
        around it: no float32 copy of every step's ``(batch, vocab)`` logits (the log-prob
        kernel reads the model's own logits once), no processor or stopping-criteria machinery,
        and a row that has produced its EOS leaves the batch (``Cache.batch_select_indices``)
        instead of being decoded on to the longest row's end. Rows never interact (causal,
        left-padded, masked), so this changes no float32 answer (``tests/generate``); in
        bfloat16 a row's numbers can depend on the batch's shape, as they do with ``generate``.
        """
        import torch

        # the step's tokens and the row bookkeeping live on the CPU: with a device map the
        # logits and each layer's cache can sit on different devices than the embedding
        model, eos, device = self.model, torch.tensor(self.eos_ids), input_ids.device
        cache_name = cache_kwarg(model)
        positions = mask_position_ids(attention_mask)
        rows = list(range(input_ids.shape[0]))
        tokens: list[list[int]] = [[] for _ in rows]
        logprobs: list[list[float]] = [[] for _ in rows]
        with torch.inference_mode():
            out = model(input_ids=input_ids, attention_mask=attention_mask,
                        position_ids=positions, use_cache=True, **last_logits_kwargs(model))
            cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
            mask, position = attention_mask, positions[:, -1:]
            for step in range(max_new_tokens):
                logp, chosen = chosen_logprobs(out.logits[:, -1, :])
                logp, chosen = logp.cpu(), chosen.cpu()
                for row, tok, lp in zip(rows, chosen.tolist(), logp.tolist(), strict=True):
                    tokens[row].append(tok)
                    logprobs[row].append(lp)
                if step == max_new_tokens - 1 or (
                        self.max_time_s is not None
                        and time.monotonic() - started >= self.max_time_s):
                    break
                live = ~torch.isin(chosen, eos)
                if not bool(live.all()):
                    if not bool(live.any()):
                        break
                    keep = live.nonzero().squeeze(1)
                    try:
                        cache.batch_select_indices(keep.to(device))
                    except (NotImplementedError, AttributeError, TypeError) as exc:
                        # a cache layer that cannot drop rows (a recurrent or static layer):
                        # this batch again through generate, from the start
                        log.warning("the KV cache cannot drop finished rows (%s); this batch "
                                    "goes through transformers' generate", exc)
                        return self._greedy_generate(input_ids, attention_mask, max_new_tokens)
                    rows = [rows[i] for i in keep.tolist()]
                    chosen = chosen[keep]
                    mask, position = mask[keep.to(device)], position[keep.to(device)]
                mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
                position = position + 1
                out = model(input_ids=chosen[:, None].to(device), attention_mask=mask,
                            position_ids=position, use_cache=True, **{cache_name: cache})
        return tokens, logprobs

    def _greedy_generate(self, input_ids: Any, attention_mask: Any,
                         max_new_tokens: int) -> tuple[list[list[int]], list[list[float]]]:
        """Run the same greedy continuation through ``transformers``' ``generate``.

        The fallback for a model the loop cannot drive (:func:`decode_loop`).
        """
        import torch
        from transformers import GenerationConfig as HFGenerationConfig

        config = HFGenerationConfig(
            do_sample=False,
            num_beams=1,
            max_new_tokens=max_new_tokens,
            eos_token_id=self.eos_ids,
            pad_token_id=self.tokenizer.pad_token_id,
            return_dict_in_generate=True,
            **({"max_time": float(self.max_time_s)} if self.max_time_s is not None else {}),
        )
        recorder = _ChosenLogprobs()
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=input_ids, attention_mask=attention_mask, generation_config=config,
                logits_processor=[recorder],
            )
        new = out.sequences[:, input_ids.shape[1]:].cpu()
        chosen = recorder.chosen(new, self.eos_ids)
        return new.tolist(), chosen.tolist()

    def _timed_out(self, out: GenerationOutput, max_new_tokens: int,
                   elapsed: float) -> GenerationOutput:
        """Turn an output the time budget cut (no EOS, short of max_new_tokens) into a timeout."""
        if out.finish_reason != "length" or (out.n_generated_tokens or 0) >= max_new_tokens:
            return out
        return GenerationOutput(
            text="", status="timeout",
            error=f"max_time {self.max_time_s:g} s reached after {out.n_generated_tokens} "
                  f"tokens ({elapsed:.1f} s)",
            n_prompt_tokens=out.n_prompt_tokens, prompt_truncated=out.prompt_truncated,
            n_generated_tokens=out.n_generated_tokens, finish_reason="time")

    def _output(
        self, tokens: list[int], logprobs: list[float], encoded: tuple[list[int], bool]
    ) -> GenerationOutput:
        """One prompt's output: answer tokens before the first EOS, their log-probs."""
        eos = set(self.eos_ids)
        stop = next((i for i, t in enumerate(tokens) if t in eos), None)
        answer = tokens if stop is None else tokens[:stop]
        return GenerationOutput(
            text=self.tokenizer.decode(answer, skip_special_tokens=True),
            n_prompt_tokens=len(encoded[0]),
            prompt_truncated=encoded[1],
            n_generated_tokens=len(answer),
            answer_logprobs=[float(x) for x in logprobs[: len(answer)]],
            finish_reason="length" if stop is None else "stop",
        )

    def describe(self) -> dict[str, Any]:
        """Model path, weights/tokenizer sha256, dtype, device, transformers version."""
        if self._describe is None:
            hashes = model_file_hashes(self.source.load_path, self.revision)
            if self.source.gguf is not None:  # the identity is the GGUF, not its conversion
                gguf_file = Path(self.source.gguf["source_path"])
                hashes |= {"weights_sha256": files_digest([gguf_file]),
                           "weight_files": [gguf_file.name]}
            self._describe = {
                "backend": self.name,
                "model_path": self.model_path,
                "revision": self.revision,
                **hashes,
                **self.source.describe(),
                "dtype": self.dtype,
                "device": self.device,
                **({"device_map": sorted({str(d) for d in (
                    getattr(self.model, "hf_device_map", None) or {}).values()})}
                   if self.device_map else {}),
                "trust_remote_code": self.trust_remote_code,
                "transformers_version": self._transformers_version,
                "kernels": kernel_settings(),
                "eos_token_ids": self.eos_ids,
                "pad_token_id": self.tokenizer.pad_token_id,
                "padding_side": "left",
                "prompt_truncation": "keep BOS + last max_prompt_len tokens",
                **({"max_time_s": self.max_time_s} if self.max_time_s is not None else {}),
            }
        # named at each call: a compile that failed since, or workers set since, is shown
        return {**self._describe, "kernels": {**self._describe["kernels"],
                                              "logprob_kernel": logprob_kernel(
                                                  self._vocab_size()),
                                              "decode_loop": decode_loop(self.model),
                                              "linear": self.packing["linear"],
                                              "workers": self.workers}}
