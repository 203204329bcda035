"""The vLLM backend is optional: without vllm installed, a clear input error (exit 2)."""

from __future__ import annotations

import importlib.util

import pytest

from fks.cli import main
from fks.configs import load_configs
from fks.errors import FksInputError
from fks.generate.backends import make_backend

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is not None,
                                reason="vllm is installed here; the guard cannot trigger")


def test_make_backend_vllm_without_vllm_says_how_to_install():
    with pytest.raises(FksInputError, match=r"pip install 'fks\[vllm\]'"):
        make_backend("vllm", "some/model", configs=load_configs())


def test_cli_vllm_without_vllm_exits_2(tiny_benchmark_dir, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["generate", "--backend", "vllm", "--model", "m", "--model-path", "some/model",
              "--benchmark", str(tiny_benchmark_dir), "--out", str(tmp_path / "run")])
    assert exc.value.code == 2
