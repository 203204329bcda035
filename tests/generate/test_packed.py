"""oneDNN-packed bf16 linear weights (fks.generate.backends.packed): same bytes, safe fallbacks."""

from __future__ import annotations

import pytest
import torch

from fks.configs import load_configs
from fks.generate.backends import make_backend
from fks.generate.backends import packed as packed_mod
from fks.generate.backends.packed import pack_linears, packing_supported, stock_linears

CFG = load_configs()
PROMPTS = [
    "x\nAnswer:",
    "Answer the following question with a short factual answer.\n"
    "Question: What is the capital of France?\nAnswer:",
    "法国的首都是\nAnswer:",
    "Madrid is a large city. " * 12 + "What is the capital of Japan?\nAnswer:",
    "Hola\nAnswer:",
]

needs_onednn = pytest.mark.skipif(not packing_supported(),
                                  reason="this CPU/torch has no oneDNN bf16 kernels")


@pytest.fixture(scope="module")
def bf16(tiny_model_dir):
    return make_backend("hf", str(tiny_model_dir), configs=CFG, device="cpu", dtype="bfloat16")


def _linears(model):
    return [m for m in model.modules() if isinstance(m, torch.nn.Linear)]


@needs_onednn
def test_bf16_backend_packs_every_linear_and_generates_the_same_outputs(bf16):
    assert bf16.packing == {"linear": "onednn-packed", "packed": len(_linears(bf16.model)),
                            "of": len(_linears(bf16.model))}
    assert bf16.describe()["kernels"]["linear"] == "onednn-packed"
    calls = {"n": 0}
    real = packed_mod._linear_pointwise

    def spy(*args):
        calls["n"] += 1
        return real(*args)

    packed_mod._linear_pointwise = spy
    try:
        got = bf16.generate(PROMPTS, max_new_tokens=12)
    finally:
        packed_mod._linear_pointwise = real
    assert calls["n"] > 0  # the packed path really ran
    with stock_linears():
        want = bf16.generate(PROMPTS, max_new_tokens=12)
    assert got == want  # texts, token counts and every log-prob, bit for bit
    # hidden states of a forward pass too
    ids = bf16.tokenizer(PROMPTS[1], return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        a = bf16.model(ids, output_hidden_states=True).hidden_states
        with stock_linears():
            b = bf16.model(ids, output_hidden_states=True).hidden_states
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


@needs_onednn
def test_autograd_float32_and_edited_weights_take_the_stock_path(tiny_model_dir):
    backend = make_backend("hf", str(tiny_model_dir), configs=CFG, device="cpu",
                           dtype="bfloat16")
    lin = _linears(backend.model)[0]
    x = torch.randn(3, lin.in_features).to(torch.bfloat16)
    # autograd on: the stock F.linear, so gradients flow to the weight
    y = lin(x.requires_grad_())
    y.sum().backward()
    assert lin.weight.grad is not None
    # a weight edited in place after packing: the live weight is used, not the stale copy
    with torch.no_grad():
        lin.weight.mul_(2)
        got = lin(x.detach())
        assert torch.equal(got, torch.nn.functional.linear(x.detach(), lin.weight, lin.bias))
    # a deep copy (its own weight storage) never reads the original's packed copy
    import copy

    twin = copy.deepcopy(lin)
    twin.weight.data = twin.weight.data * 2  # new storage, a fresh version counter
    with torch.no_grad():
        assert torch.equal(twin(x.detach()),
                           torch.nn.functional.linear(x.detach(), twin.weight, twin.bias))
    # the model cast to float32: nothing reads the bf16 copies any more
    backend.model.float()
    with torch.no_grad():
        x32 = torch.randn(2, lin.in_features)
        assert torch.equal(lin(x32), torch.nn.functional.linear(x32, lin.weight, lin.bias))


def test_float32_models_are_not_packed(tiny_model_dir):
    backend = make_backend("hf", str(tiny_model_dir), configs=CFG, device="cpu",
                           dtype="float32")
    assert backend.packing["linear"] == "aten" and backend.packing["packed"] == 0
    assert backend.describe()["kernels"]["linear"] == "aten"


def test_off_switch_probe_failure_and_memory_guard(tiny_model_dir, monkeypatch):
    from transformers import AutoModelForCausalLM

    def fresh():
        return AutoModelForCausalLM.from_pretrained(tiny_model_dir,
                                                    dtype=torch.bfloat16).eval()

    monkeypatch.setenv("FKS_PACKED", "0")
    off = pack_linears(fresh())
    assert off["linear"] == "aten" and off["reason"] == "FKS_PACKED=0"
    monkeypatch.delenv("FKS_PACKED")
    if not packing_supported():
        assert pack_linears(fresh())["reason"] == "no oneDNN bf16 kernels"
        return
    monkeypatch.setattr(packed_mod, "_memory_bytes", lambda: 1024)
    assert "quarter of memory" in pack_linears(fresh())["reason"]
    monkeypatch.setattr(packed_mod, "_memory_bytes", lambda: None)
    # a shape whose packed product is not bit-identical stays on the stock forward
    model = fresh()
    monkeypatch.setattr(packed_mod, "_probe", lambda *a: False)
    summary = pack_linears(model)
    assert summary["linear"] == "aten" and summary["packed"] == 0
    assert all(m.forward.__qualname__.startswith("Linear.") for m in _linears(model))
