"""Fixtures of the hidden-state tests: a deeper tiny Llama for J-Lens (4 blocks, d = 64)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def deep_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama with 4 blocks (J-Lens needs layers between the first and last)."""
    from tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_llama4"), n_layers=4, seed=1)


@pytest.fixture(scope="session")
def deep_model(deep_model_dir: Path):
    """``(model, tokenizer)`` of :func:`deep_model_dir`, float32, eval mode."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(deep_model_dir).eval()
    return model, AutoTokenizer.from_pretrained(deep_model_dir)


@pytest.fixture(scope="session")
def deep_model64(deep_model_dir: Path):
    """The same model in float64 (exact references: autograd, finite differences)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(deep_model_dir, dtype=torch.float64).eval()
    return model, AutoTokenizer.from_pretrained(deep_model_dir)
