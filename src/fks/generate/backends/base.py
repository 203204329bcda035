"""The one narrow interface every generation backend implements.

A backend turns a batch of prompt strings into greedy continuations under the frozen decoding
protocol. It never drops a prompt: a failure is returned as an output with ``status`` set to
``error`` or ``timeout`` and ``error`` saying why, in the same position as its prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = ["GenerationOutput", "GenerationBackend"]


@dataclass
class GenerationOutput:
    """The result for one prompt.

    Attributes:
        text: the decoded continuation (empty when ``status`` is not ``ok``).
        status: ``ok``, ``error`` or ``timeout``.
        error: why a non-``ok`` output failed.
        n_prompt_tokens: prompt length in tokens after truncation, when known.
        prompt_truncated: the prompt was cut to ``max_prompt_len`` tokens.
        n_generated_tokens: number of generated tokens, when known.
        answer_logprobs: log-probability of each generated token, when the backend gives them.
        finish_reason: ``stop`` (EOS), ``length`` (hit max_new_tokens), or the server's value.
    """

    text: str
    status: Literal["ok", "error", "timeout"] = "ok"
    error: str | None = None
    n_prompt_tokens: int | None = None
    prompt_truncated: bool = False
    n_generated_tokens: int | None = None
    answer_logprobs: list[float] | None = None
    finish_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class GenerationBackend(Protocol):
    """Greedy batch generation. Implementations: HF transformers, OpenAI-compatible, vLLM."""

    #: short backend name recorded in manifests ("hf", "openai", "vllm", ...)
    name: str

    def generate(self, prompts: list[str], *, max_new_tokens: int) -> list[GenerationOutput]:
        """Return one output per prompt, in order, never fewer."""
        ...

    def describe(self) -> dict[str, Any]:
        """Identity for the run manifest (model path, weights/tokenizer hashes, dtype, ...)."""
        ...
