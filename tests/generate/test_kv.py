"""The KV cache that grows in place (fks.generate.backends.kv): the same states as torch.cat."""

from __future__ import annotations

import pytest
import torch
from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer

from fks.configs import load_configs
from fks.generate.backends import make_backend
from fks.generate.backends.kv import kv_mode, preallocate

CFG = load_configs()


def _kv(gen, batch=3, n=1):
    return (torch.randn(batch, 2, n, 8, generator=gen), torch.randn(batch, 2, n, 8, generator=gen))


def _twins(make_layer, prompt_len=4, n_layers=2):
    gen = torch.Generator().manual_seed(0)
    caches = []
    for _ in range(2):
        cache = DynamicCache()
        cache.layers = [make_layer() for _ in range(n_layers)]
        caches.append(cache)
    for idx in range(n_layers):
        k, v = _kv(gen, n=prompt_len)
        for cache in caches:
            cache.update(k, v, idx)
    return caches, gen


def test_in_place_steps_row_drops_and_overflow_equal_torch_cat():
    (plain, grown), gen = _twins(DynamicLayer)
    assert preallocate(grown, 3) == 2
    for step in range(5):  # 3 steps in the buffer, then past it (the layer's own update)
        if step == 1:  # a row finished: both caches drop it
            keep = torch.tensor([0, 2])
            plain.batch_select_indices(keep)
            grown.batch_select_indices(keep)
        for idx in range(2):
            k, v = _kv(gen, batch=plain.layers[idx].keys.shape[0])
            a, b = plain.update(k, v, idx), grown.update(k, v, idx)
            assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
            assert plain.get_seq_length(idx) == grown.get_seq_length(idx)
    assert "update" not in vars(grown.layers[0])  # overflow handed the layer back


def test_sliding_layers_are_grown_only_while_their_window_is_never_reached():
    (plain, grown), gen = _twins(lambda: DynamicSlidingWindowLayer(sliding_window=16))
    assert preallocate(grown, 30) == 0  # 4 + 30 positions would slide
    assert preallocate(grown, 5) == 2
    for _ in range(5):
        for idx in range(2):
            k, v = _kv(gen)
            a, b = plain.update(k, v, idx), grown.update(k, v, idx)
            assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
            assert plain.layers[idx].get_mask_sizes(1) == grown.layers[idx].get_mask_sizes(1)


def test_switch_off(monkeypatch):
    (_, grown), _ = _twins(DynamicLayer)
    monkeypatch.setenv("FKS_KV", "cat")
    assert kv_mode() == "cat" and preallocate(grown, 3) == 0


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_generations_equal_with_and_without_the_grown_cache(tiny_model_dir, monkeypatch, dtype):
    backend = make_backend("hf", str(tiny_model_dir), configs=CFG, device="cpu", dtype=dtype)
    prompts = ["x\nAnswer:", "Madrid is a large city. " * 6 + "Capital?\nAnswer:", "Hola\nAnswer:"]
    calls = {"n": 0}
    import fks.generate.backends.hf as hf

    real = hf.preallocate

    def spy(cache, extra):
        calls["n"] += real(cache, extra)
        return calls["n"]

    monkeypatch.setattr(hf, "preallocate", spy)
    grown = backend.generate(prompts, max_new_tokens=10)
    assert calls["n"] == len(backend.model.model.layers)  # every layer grew in place
    assert backend.describe()["kernels"]["kv_cache"] == "preallocated"
    monkeypatch.setenv("FKS_KV", "cat")
    assert backend.generate(prompts, max_new_tokens=10) == grown
