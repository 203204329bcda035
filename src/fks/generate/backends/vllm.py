"""vLLM in-process backend (optional: ``pip install 'fks[vllm]'``; needs a GPU).

Prompts are tokenised with the model's tokenizer by :func:`fks.generate.prompts.encode_prompt`
(the same ids and the same truncation rule as the ``hf`` backend) and passed to vLLM as token ids,
so both backends feed the model the identical prompt. Decoding is greedy:
``SamplingParams(temperature=0, max_tokens=max_new_tokens, logprobs=1)``. The answer is the
generated tokens before the first EOS; ``answer_logprobs`` are the chosen tokens' log-probs;
``finish_reason`` is vLLM's (``stop``/``length``).

Not exercised by the CPU test-suite (vLLM needs a GPU); the import guard is tested.
"""

from __future__ import annotations

import importlib
from typing import Any

from fks.configs import GenerationConfig
from fks.errors import FksInputError
from fks.generate.backends.base import GenerationOutput
from fks.generate.prompts import encode_prompt

__all__ = ["VLLMBackend", "import_vllm"]

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


class VLLMBackend:
    """Greedy generation with ``vllm.LLM`` (see the module docstring).

    Args:
        model_path: local folder or hub id.
        generation: the frozen decoding protocol (``dtype`` is used as is: vLLM runs on GPU).
        trust_remote_code: allow the repository's model code.
        revision: hub revision.
        **llm_kwargs: passed to ``vllm.LLM`` (e.g. ``gpu_memory_utilization``,
            ``tensor_parallel_size``).
    """

    name = "vllm"

    def __init__(
        self,
        model_path: str,
        *,
        generation: GenerationConfig,
        trust_remote_code: bool = False,
        revision: str | None = None,
        **llm_kwargs: Any,
    ) -> None:
        vllm = import_vllm()
        self.model_path = str(model_path)
        self.generation = generation
        self.revision = revision
        self.trust_remote_code = trust_remote_code
        self._vllm_version = getattr(vllm, "__version__", None)
        try:
            self.llm = vllm.LLM(model=self.model_path, dtype=generation.dtype,
                                trust_remote_code=trust_remote_code, revision=revision,
                                seed=generation.seed, **llm_kwargs)
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
        return ids  # type: ignore[return-value]

    def generate(self, prompts: list[str], *, max_new_tokens: int) -> list[GenerationOutput]:
        """Greedy continuations of ``prompts`` (one output per prompt, in order)."""
        if not prompts:
            return []
        cap = self.generation.max_prompt_len
        encoded = [encode_prompt(self.tokenizer, p, cap) for p in prompts]
        params = self._sampling(temperature=0.0, max_tokens=max_new_tokens, logprobs=1)
        results = self.llm.generate([{"prompt_token_ids": ids} for ids, _ in encoded], params,
                                    use_tqdm=False)
        return [self._output(res, enc) for res, enc in zip(results, encoded, strict=True)]

    def _output(self, result: Any, encoded: tuple[list[int], bool]) -> GenerationOutput:
        """One vLLM ``RequestOutput`` as a :class:`GenerationOutput`."""
        comp = result.outputs[0]
        tokens = list(comp.token_ids)
        stop = next((i for i, t in enumerate(tokens) if t in self.eos_ids), len(tokens))
        steps = list(comp.logprobs or [])[:stop]
        logprobs = [float(step[tok].logprob) for step, tok in zip(steps, tokens, strict=False)]
        return GenerationOutput(
            text=comp.text,
            n_prompt_tokens=len(encoded[0]),
            prompt_truncated=encoded[1],
            n_generated_tokens=stop,
            answer_logprobs=logprobs if comp.logprobs is not None else None,
            finish_reason=comp.finish_reason,
        )

    def describe(self) -> dict[str, Any]:
        """Model path, weights/tokenizer sha256, dtype and vLLM version."""
        from fks.generate.backends.hf import model_file_hashes

        if self._describe is None:
            self._describe = {
                "backend": self.name,
                "model_path": self.model_path,
                "revision": self.revision,
                **model_file_hashes(self.model_path, self.revision),
                "dtype": self.generation.dtype,
                "device": "cuda",
                "trust_remote_code": self.trust_remote_code,
                "vllm_version": self._vllm_version,
                "eos_token_ids": sorted(self.eos_ids),
                "prompt_truncation": "keep BOS + last max_prompt_len tokens",
            }
        return dict(self._describe)
