"""Hugging Face ``transformers`` backend: batched greedy generation under the frozen protocol.

* Model and tokenizer from a local folder or a hub id (``trust_remote_code`` only when asked). A
  hub id that is neither local nor cached, with the hub unreachable, raises
  :class:`~fks.errors.FksInputError` with an offline hint.
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
  ``log_softmax(logits_i)[token_i]`` from the raw (unprocessed) logits; ``finish_reason`` is
  ``stop`` when an EOS was generated, ``length`` otherwise.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import time
from pathlib import Path
from typing import Any

from fks.configs import GenerationConfig
from fks.errors import FksInputError
from fks.generate.backends.base import GenerationOutput
from fks.generate.prompts import encode_prompt
from fks.io import sha256_file

__all__ = [
    "HFBackend",
    "resolve_device",
    "files_digest",
    "local_model_dir",
    "offline_error",
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
    """``device`` as given, else ``cuda`` when available, else ``cpu``."""
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


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


def _require_accelerate() -> None:
    """Raise :class:`FksInputError` with the install hint when ``accelerate`` is missing."""
    import importlib.util

    if importlib.util.find_spec("accelerate") is None:
        raise FksInputError("device_map needs the accelerate package: pip install accelerate "
                            "(or drop --device-map and use one --device)", field="device_map")


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
    ) -> None:
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from fks.generate.gguf import resolve_model_source

        self.model_path = str(model_path)
        self.source = resolve_model_source(self.model_path)
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
        placement = {"device_map": device_map} if device_map else {}
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.source.load_path, **kwargs)
            self.model = AutoModelForCausalLM.from_pretrained(
                self.source.load_path, dtype=getattr(torch, self.dtype), **placement, **kwargs
            )
        except OSError as exc:
            raise offline_error(self.model_path, exc) from None
        if device_map:  # accelerate placed the layers; inputs go where the embedding is
            self.device = str(self.model.get_input_embeddings().weight.device)
        else:
            self.model.to(self.device)
        self.model.eval()
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.eos_ids = self._eos_ids()
        self._clear_model_generation_defaults()
        self._describe: dict[str, Any] | None = None

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
        import torch
        from transformers import GenerationConfig as HFGenerationConfig

        if not prompts:
            return []
        cap = self.generation.max_prompt_len
        encoded = [encode_prompt(self.tokenizer, p, cap) for p in prompts]
        input_ids, attention_mask = self._pad_batch([ids for ids, _ in encoded])
        config = HFGenerationConfig(
            do_sample=False,
            num_beams=1,
            max_new_tokens=max_new_tokens,
            eos_token_id=self.eos_ids,
            pad_token_id=self.tokenizer.pad_token_id,
            output_logits=True,
            return_dict_in_generate=True,
            **({"max_time": float(self.max_time_s)} if self.max_time_s is not None else {}),
        )
        started = time.monotonic()
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=input_ids, attention_mask=attention_mask, generation_config=config
            )
        elapsed = time.monotonic() - started
        new = out.sequences[:, input_ids.shape[1]:].cpu()
        # (steps, batch, vocab) logits -> (batch, steps) log-prob of the chosen token
        logits = torch.stack(out.logits, dim=1).float()
        chosen = torch.log_softmax(logits, dim=-1).gather(-1, new[:, : logits.shape[1], None].to(
            logits.device)).squeeze(-1).cpu()
        outputs = [self._output(new[row].tolist(), chosen[row].tolist(), encoded[row])
                   for row in range(len(prompts))]
        if self.max_time_s is not None and elapsed >= self.max_time_s:
            outputs = [self._timed_out(o, max_new_tokens, elapsed) for o in outputs]
        return outputs

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
                "eos_token_ids": self.eos_ids,
                "pad_token_id": self.tokenizer.pad_token_id,
                "padding_side": "left",
                "prompt_truncation": "keep BOS + last max_prompt_len tokens",
                **({"max_time_s": self.max_time_s} if self.max_time_s is not None else {}),
            }
        return dict(self._describe)
