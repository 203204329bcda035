"""Generation backends behind one interface, chosen by name.

==========  ======================================================  ==========================
kind        what                                                    needs
==========  ======================================================  ==========================
``hf``      ``transformers`` in-process, batched greedy             torch, transformers
``openai``  an OpenAI-compatible ``/v1/completions`` server         httpx (a running server)
``vllm``    vLLM in-process                                         ``pip install fks[vllm]``
==========  ======================================================  ==========================

Backends are imported lazily, so ``import fks.generate.backends`` never loads torch or vllm.
"""

from __future__ import annotations

from typing import Any

from fks.configs import ConfigSet
from fks.errors import FksInputError
from fks.generate.backends.base import GenerationBackend, GenerationOutput

__all__ = ["BACKENDS", "GenerationBackend", "GenerationOutput", "make_backend"]

#: the backend names :func:`make_backend` accepts
BACKENDS: tuple[str, ...] = ("hf", "openai", "vllm")


def make_backend(
    kind: str,
    model_path: str,
    *,
    configs: ConfigSet,
    device: str | None = None,
    trust_remote_code: bool = False,
    **opts: Any,
) -> GenerationBackend:
    """Build the backend called ``kind`` for ``model_path`` under ``configs.models.generation``.

    Args:
        kind: one of :data:`BACKENDS`.
        model_path: a local folder or hub id (``hf``/``vllm``); the served model name (``openai``).
        configs: the configs in force (the decoding protocol is read from them).
        device: ``hf``: torch device (default cuda when available, else cpu); ``vllm``: ignored.
        trust_remote_code: let ``hf``/``vllm`` run the repository's model code.
        **opts: backend-specific keyword arguments (e.g. ``base_url``, ``concurrency``,
            ``timeout`` for ``openai``; ``revision``, ``dtype`` for ``hf``).

    Raises:
        FksInputError: an unknown kind, or the backend cannot be built from the input given.
    """
    generation = configs.models.generation
    if kind == "hf":
        from fks.generate.backends.hf import HFBackend

        return HFBackend(model_path, generation=generation, device=device,
                         trust_remote_code=trust_remote_code, **opts)
    if kind == "openai":
        from fks.generate.backends.openai import OpenAICompletionsBackend

        return OpenAICompletionsBackend(model_path, generation=generation, **opts)
    if kind == "vllm":
        from fks.generate.backends.vllm import VLLMBackend

        return VLLMBackend(model_path, generation=generation,
                           trust_remote_code=trust_remote_code, **opts)
    raise FksInputError(f"unknown backend {kind!r}; expected one of {', '.join(BACKENDS)}",
                        field="backend")
