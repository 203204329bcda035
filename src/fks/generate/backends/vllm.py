"""vLLM in-process backend (optional: ``pip install 'fks[vllm]'``; needs a CUDA GPU).

Same records as the ``hf`` backend, from a faster engine:

* **Prompts**: tokenised by :func:`fks.generate.prompts.encode_prompt` with the model's own
  tokenizer (the same ids and the same cut to ``max_prompt_len`` as ``hf``) and passed to vLLM
  as token ids, so both backends feed the model the identical prompt.
* **Decoding**: greedy, ``SamplingParams(temperature=0, max_tokens=max_new_tokens, logprobs=1,
  stop_token_ids=EOS ids, repetition_penalty=1)``. The checkpoint's generation defaults are not
  applied (``generation_config="vllm"`` where the installed vLLM has that engine argument, and
  explicit sampling parameters in any case), as with ``hf``.
* **Answer**: the generated tokens before the first EOS, decoded with
  ``tokenizer.decode(..., skip_special_tokens=True)`` exactly as ``hf`` decodes them (not vLLM's
  incremental detokeniser, whose spacing can differ); ``answer_logprobs`` are the chosen tokens'
  log-probs (vLLM's default ``raw_logprobs``: before any logits processing, like ``hf``);
  ``finish_reason`` is ``stop`` when an EOS ended the answer, ``length`` otherwise.
* **Statuses**: a request vLLM rejects (e.g. a prompt longer than ``max_model_len``) makes the
  batch fall back to one request at a time, and only the rejected prompt gets
  ``status="error"``; nothing is dropped.
* **Engine**: ``tensor_parallel_size`` (GPUs per model), ``max_num_seqs`` (concurrent sequences),
  ``enable_prefix_caching=True`` (the instruction wrapper and the ``Answer:`` cue are shared by
  many prompts, and with fact-grouped batches so is the subject's context), and
  ``max_model_len = max_prompt_len + max_new_tokens`` (the protocol never needs more, and a short
  context leaves more memory for the KV cache). Give the runner large batches
  (``--batch-size 512``): vLLM schedules each batch continuously, and a large batch keeps its
  ``max_num_seqs`` slots full.

Hidden states are not taken from vLLM: ``fks extract`` and J-Lens run on the Hugging Face model
(``--device-map auto`` for models larger than one GPU).

The CPU test-suite checks the import guard, the engine arguments and the output conversion
against a stand-in engine; the greedy parity with ``hf`` runs only where vLLM and a GPU exist.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
from collections.abc import Sequence
from typing import Any

from fks.configs import GenerationConfig
from fks.errors import FksInputError
from fks.generate.backends.base import GenerationOutput
from fks.generate.prompts import encode_prompt

__all__ = ["VLLMBackend", "import_vllm", "engine_kwargs", "completion_output"]

log = logging.getLogger(__name__)

INSTALL_HINT = (
    "the vllm backend needs the optional vLLM package: pip install 'fks[vllm]' "
    "(on a machine with a CUDA GPU); or use --backend hf, or --backend openai against a "
    "running `vllm serve`"
)


def import_vllm() -> Any:
    """Import :mod:`vllm`, or raise :class:`FksInputError` saying how to install it."""
    try:
        return importlib.import_module("vllm")
    except ImportError as exc:
        raise FksInputError(f"{INSTALL_HINT} ({type(exc).__name__}: {exc})",
                            field="backend") from None


def _engine_fields(vllm: Any) -> set[str] | None:
    """Names of the installed vLLM's engine arguments (None when they cannot be read)."""
    try:
        from vllm.engine.arg_utils import EngineArgs  # type: ignore[import-not-found]

        return {f.name for f in dataclasses.fields(EngineArgs)}
    except Exception:  # an unexpected vLLM layout: pass only what the caller asked for
        return None


def engine_kwargs(
    model_path: str,
    generation: GenerationConfig,
    *,
    trust_remote_code: bool = False,
    revision: str | None = None,
    tensor_parallel_size: int = 1,
    max_num_seqs: int = 256,
    enable_prefix_caching: bool = True,
    gpu_memory_utilization: float = 0.9,
    max_model_len: int | None = None,
    supported: set[str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Build the keyword arguments of ``vllm.LLM`` for the frozen protocol (a pure function).

    ``generation_config="vllm"`` (ignore the checkpoint's sampling defaults) is added when
    ``supported`` (the installed engine's argument names) contains it; ``extra`` (any other
    engine argument) wins over every default.

    >>> from fks.configs import load_configs
    >>> kw = engine_kwargs("m", load_configs().models.generation, supported={"generation_config"})
    >>> kw["enable_prefix_caching"], kw["max_model_len"], kw["generation_config"]
    (True, 216, 'vllm')

    Raises:
        FksInputError: ``tensor_parallel_size`` or ``max_num_seqs`` below 1, or a memory
            fraction outside (0, 1].
    """
    if tensor_parallel_size < 1 or max_num_seqs < 1:
        raise FksInputError(f"need tensor_parallel_size >= 1 and max_num_seqs >= 1; found "
                            f"{tensor_parallel_size}, {max_num_seqs}", field="backend_options")
    if not 0 < gpu_memory_utilization <= 1:
        raise FksInputError(f"must be in (0, 1]; found {gpu_memory_utilization}",
                            field="gpu_memory_utilization")
    kwargs: dict[str, Any] = {
        "model": str(model_path),
        "tokenizer": str(model_path),
        "revision": revision,
        "dtype": generation.dtype,
        "trust_remote_code": trust_remote_code,
        "seed": generation.seed,
        "tensor_parallel_size": tensor_parallel_size,
        "max_num_seqs": max_num_seqs,
        "enable_prefix_caching": enable_prefix_caching,
        "gpu_memory_utilization": gpu_memory_utilization,
        "max_model_len": max_model_len or generation.max_prompt_len + generation.max_new_tokens,
    }
    if supported is not None and "generation_config" in supported:
        kwargs["generation_config"] = "vllm"
    return kwargs | extra


def completion_output(
    token_ids: Sequence[int],
    step_logprobs: Sequence[dict[int, Any]] | None,
    *,
    eos_ids: set[int],
    tokenizer: Any,
    encoded: tuple[list[int], bool],
) -> GenerationOutput:
    """One vLLM completion as a :class:`GenerationOutput`, with the ``hf`` backend's semantics.

    Args:
        token_ids: the generated ids (an EOS that ended decoding may or may not be included).
        step_logprobs: per generated token, ``{token_id: Logprob}`` (vLLM's ``logprobs``), or
            None when log-probs were not requested.
        eos_ids: the ids that end an answer.
        tokenizer: decodes the answer ids (``skip_special_tokens=True``, as ``hf``).
        encoded: ``(prompt ids, truncated)`` from :func:`encode_prompt`.
    """
    tokens = list(token_ids)
    stop = next((i for i, t in enumerate(tokens) if t in eos_ids), None)
    answer = tokens if stop is None else tokens[:stop]
    logprobs = None
    if step_logprobs is not None:
        logprobs = [float(step[tok].logprob)
                    for step, tok in zip(list(step_logprobs)[:len(answer)], answer, strict=True)]
    return GenerationOutput(
        text=tokenizer.decode(answer, skip_special_tokens=True),
        n_prompt_tokens=len(encoded[0]),
        prompt_truncated=encoded[1],
        n_generated_tokens=len(answer),
        answer_logprobs=logprobs,
        finish_reason="length" if stop is None else "stop",
    )


class VLLMBackend:
    """Greedy generation with ``vllm.LLM`` (see the module docstring).

    Args:
        model_path: local folder or hub id.
        generation: the frozen decoding protocol (``dtype`` is used as is: vLLM runs on GPU).
        trust_remote_code: allow the repository's model code.
        revision: hub revision.
        tensor_parallel_size: GPUs one model is split over.
        max_num_seqs: sequences decoded concurrently.
        enable_prefix_caching: reuse the KV cache of shared prompt prefixes.
        gpu_memory_utilization: fraction of GPU memory vLLM may take.
        max_model_len: context length (default ``max_prompt_len + max_new_tokens``).
        logprobs: record ``answer_logprobs``.
        **llm_kwargs: any other ``vllm.LLM`` argument (wins over the defaults above).
    """

    name = "vllm"

    def __init__(
        self,
        model_path: str,
        *,
        generation: GenerationConfig,
        trust_remote_code: bool = False,
        revision: str | None = None,
        tensor_parallel_size: int = 1,
        max_num_seqs: int = 256,
        enable_prefix_caching: bool = True,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        logprobs: bool = True,
        **llm_kwargs: Any,
    ) -> None:
        vllm = import_vllm()
        self.model_path = str(model_path)
        self.generation = generation
        self.revision = revision
        self.trust_remote_code = trust_remote_code
        self.logprobs = logprobs
        self._vllm_version = getattr(vllm, "__version__", None)
        self.engine = engine_kwargs(
            self.model_path, generation, trust_remote_code=trust_remote_code, revision=revision,
            tensor_parallel_size=tensor_parallel_size, max_num_seqs=max_num_seqs,
            enable_prefix_caching=enable_prefix_caching,
            gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
            supported=_engine_fields(vllm), **llm_kwargs)
        try:
            self.llm = vllm.LLM(**self.engine)
        except OSError as exc:
            from fks.generate.backends.hf import offline_error

            raise offline_error(self.model_path, exc) from None
        self.tokenizer = self.llm.get_tokenizer()
        self._sampling = vllm.SamplingParams
        self.eos_ids = self._eos_ids()
        self._describe: dict[str, Any] | None = None

    def _eos_ids(self) -> set[int]:
        """Collect the tokenizer's EOS and the model generation config's EOS ids (Llama 3)."""
        ids = {self.tokenizer.eos_token_id} - {None}
        try:
            from transformers import GenerationConfig as HFGenerationConfig

            eos = HFGenerationConfig.from_pretrained(self.model_path, revision=self.revision
                                                     ).eos_token_id
            ids |= {eos} if isinstance(eos, int) else set(eos or [])
        except OSError:  # no generation_config.json: the tokenizer's EOS is all there is
            pass
        if not ids:
            raise FksInputError("the model and tokenizer define no EOS token", path=self.model_path)
        return ids  # type: ignore[return-value]

    def sampling_params(self, max_new_tokens: int) -> Any:
        """Greedy sampling parameters of the protocol (see the module docstring)."""
        return self._sampling(temperature=0.0, max_tokens=max_new_tokens,
                              logprobs=1 if self.logprobs else None,
                              stop_token_ids=sorted(self.eos_ids), repetition_penalty=1.0)

    def generate(self, prompts: list[str], *, max_new_tokens: int) -> list[GenerationOutput]:
        """Greedy continuations of ``prompts`` (one output per prompt, in order)."""
        if not prompts:
            return []
        cap = self.generation.max_prompt_len
        encoded = [encode_prompt(self.tokenizer, p, cap) for p in prompts]
        params = self.sampling_params(max_new_tokens)
        requests = [{"prompt_token_ids": ids} for ids, _ in encoded]
        try:
            results: list[Any] = list(self.llm.generate(requests, params, use_tqdm=False))
        except ValueError as exc:  # a rejected request: find it, keep the others
            log.warning("vLLM rejected a batch (%s); retrying its prompts one by one", exc)
            results = [self._one(req, params) for req in requests]
        return [self._output(res, enc) for res, enc in zip(results, encoded, strict=True)]

    def _one(self, request: dict[str, Any], params: Any) -> Any:
        """One request on its own; a rejected one comes back as the exception."""
        try:
            return self.llm.generate([request], params, use_tqdm=False)[0]
        except ValueError as exc:
            return exc

    def _output(self, result: Any, encoded: tuple[list[int], bool]) -> GenerationOutput:
        """One vLLM ``RequestOutput`` (or the error it raised) as a :class:`GenerationOutput`."""
        if isinstance(result, Exception):
            return GenerationOutput(text="", status="error", n_prompt_tokens=len(encoded[0]),
                                    prompt_truncated=encoded[1],
                                    error=f"vLLM rejected the request: {result}"[:500])
        comp = result.outputs[0]
        return completion_output(comp.token_ids, comp.logprobs if self.logprobs else None,
                                 eos_ids=self.eos_ids, tokenizer=self.tokenizer, encoded=encoded)

    def describe(self) -> dict[str, Any]:
        """Model path, weights/tokenizer sha256, dtype, vLLM version and engine settings."""
        from fks.generate.backends.hf import model_file_hashes

        if self._describe is None:
            engine = {k: self.engine[k] for k in (
                "tensor_parallel_size", "max_num_seqs", "enable_prefix_caching",
                "gpu_memory_utilization", "max_model_len") if k in self.engine}
            self._describe = {
                "backend": self.name,
                "model_path": self.model_path,
                "revision": self.revision,
                **model_file_hashes(self.model_path, self.revision),
                "dtype": self.generation.dtype,
                "device": "cuda",
                "trust_remote_code": self.trust_remote_code,
                "vllm_version": self._vllm_version,
                "engine": engine,
                "eos_token_ids": sorted(self.eos_ids),
                "logprobs": self.logprobs,
                "prompt_truncation": "keep BOS + last max_prompt_len tokens",
            }
        return dict(self._describe)
