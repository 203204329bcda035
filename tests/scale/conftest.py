"""Fixtures of the scale-out tests: tiny Llamas with 4 blocks (J-Lens needs inner layers)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def scale_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama, 4 blocks, d = 64 (seed 1)."""
    from tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("scale_llama"), n_layers=4, seed=1)


@pytest.fixture(scope="session")
def scale_model_b_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second tiny Llama with other weights (seed 2), for sweeps over two models."""
    from tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("scale_llama_b"), n_layers=4, seed=2)


