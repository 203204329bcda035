"""Hidden states of big models: ``device_map="auto"`` on the HF path (needs accelerate)."""

from __future__ import annotations

import importlib.util

import pytest

from fks.cli import main
from fks.configs import load_configs
from fks.errors import FksInputError
from fks.generate.backends import make_backend

CFG = load_configs()
HAS_ACCELERATE = importlib.util.find_spec("accelerate") is not None


@pytest.mark.skipif(HAS_ACCELERATE, reason="accelerate is installed: the guard cannot trigger")
def test_device_map_without_accelerate_says_how_to_install(scale_model_dir, tmp_path,
                                                           tiny_benchmark_dir):
    with pytest.raises(FksInputError, match="pip install accelerate"):
        make_backend("hf", str(scale_model_dir), configs=CFG, device_map="auto")
    with pytest.raises(SystemExit) as exc:
        main(["extract", str(tmp_path / "run"), "--benchmark", str(tiny_benchmark_dir),
              "--model-path", str(scale_model_dir), "--device-map", "auto"])
    assert exc.value.code == 2


@pytest.mark.skipif(not HAS_ACCELERATE, reason="needs accelerate")
def test_device_map_auto_generates_what_one_device_does(scale_model_dir):
    placed = make_backend("hf", str(scale_model_dir), configs=CFG, device_map="auto")
    plain = make_backend("hf", str(scale_model_dir), configs=CFG, device=placed.device)
    prompts = ["Question: What is the capital of France?\nAnswer:"]
    assert [o.text for o in placed.generate(prompts, max_new_tokens=5)] == \
        [o.text for o in plain.generate(prompts, max_new_tokens=5)]
    assert "device_map" in placed.describe()
