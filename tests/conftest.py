"""Shared pytest fixtures.

* ``tiny_benchmark_dir`` -- a hand-written benchmark (4 facts, 2 relations, all eight families)
  that passes validation; tests copy and corrupt it.
* the tiny random Llama model and offline-trained tokenizer live in ``tests/tiny_model.py`` and
  are exposed here as fixtures.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tiny_benchmark import tiny_benchmark_rows, write_benchmark


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """One torch thread for the whole suite: the test models are tiny, and on a small shared CPU
    extra threads only contend (tiny matmuls ran up to 15x slower with two threads)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(autouse=True, scope="session")
def _no_reference_cache():
    """No test writes the reference pool's cache into the user's ``~/.cache/fks``: it is off
    (``FKS_REFERENCE_CACHE=0``) unless a test turns it on with a cache folder of its own
    (``tests/hidden/test_pool_cache.py``)."""
    import os

    old = os.environ.get("FKS_REFERENCE_CACHE")
    os.environ["FKS_REFERENCE_CACHE"] = "0"
    yield
    if old is None:
        os.environ.pop("FKS_REFERENCE_CACHE", None)
    else:
        os.environ["FKS_REFERENCE_CACHE"] = old


@pytest.fixture
def tiny_benchmark_dir(tmp_path: Path) -> Path:
    """A valid hand-written benchmark directory (fresh copy per test)."""
    facts, queries = tiny_benchmark_rows()
    return write_benchmark(tmp_path / "bench", facts, queries)


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """``../shared/data`` beside the checkout; tests using it skip when it is absent."""
    here = Path(__file__).resolve().parents[1]
    for cand in (here.parent / "shared" / "data", here / ".." / "shared" / "data"):
        if (cand / "mpararel").is_dir():
            return cand.resolve()
    pytest.skip("../shared/data is absent (the ParaRel/mParaRel source is read at run time only)")


# ------------------------------------------------------------------ tiny random Llama model
@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama (2 layers, d=64) + offline BPE tokenizer, saved once per session.

    Read-only by convention: tests that change weights build their own with
    ``tiny_model.build_tiny_model``.
    """
    from tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_llama"))


@pytest.fixture(scope="session")
def tiny_model_and_tokenizer(tiny_model_dir: Path):
    """``(model, tokenizer)`` loaded from :func:`tiny_model_dir` (float32, cpu, eval mode)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    return model, tokenizer
