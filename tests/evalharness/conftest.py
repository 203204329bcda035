"""Fixtures of the EvalHarness tests (the example builders live in ``harness_examples.py``)."""

from __future__ import annotations

import pytest

from fks.evalharness.config import HarnessConfig, load_harness_config
from fks.evalharness.dimensions import BatchContext


@pytest.fixture(scope="session")
def cfg() -> HarnessConfig:
    """The packaged harness configuration."""
    return load_harness_config()


@pytest.fixture
def ctx() -> BatchContext:
    """An empty batch context (no label weights, no coupling rho)."""
    return BatchContext()
