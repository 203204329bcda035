"""J-Lens: exactness against autograd and finite differences, batching, storage, transport."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fks.data.load import load_benchmark
from fks.errors import FksInputError
from fks.generate.prompts import encode_prompt
from fks.hidden.capture import block_hidden
from fks.hidden.jlens import (
    assert_nontrivial_transport,
    fit_jlens,
    load_jlens,
    prompt_jacobians,
    sample_jlens_queries,
    save_jlens,
    transport,
)

PROMPTS = [
    "Answer the following question with a short factual answer.\nQuestion: What is the capital "
    "of France?\nAnswer:",
    "La capitale de la France est\nAnswer:",
]


def _ids(tok, prompt: str) -> list[int]:
    return encode_prompt(tok, prompt, 192)[0]


def _perturbed_output(model, ids: list[int], layer: int):
    """``f(delta)``: the raw last-block output at the last token when ``delta`` is added to
    block ``layer``'s output at the last token -- a plain full forward, no cache."""
    blocks = model.model.layers
    tokens = torch.tensor([ids])

    def f(delta):
        store = {}

        def add(module, args, output):
            h = block_hidden(output)
            return torch.cat([h[:, :-1], h[:, -1:] + delta], dim=1)

        def keep(module, args, output):
            store["y"] = block_hidden(output)[0, -1]

        handles = [blocks[layer].register_forward_hook(add),
                   blocks[-1].register_forward_hook(keep)]
        try:
            model(tokens)
        finally:
            for h in handles:
                h.remove()
        return store["y"]

    return f


def _state(model, ids, layer):
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_hidden_states=True)
    return out.hidden_states[layer + 1][0, -1]


def test_last_layer_is_exactly_identity(deep_model):
    model, tok = deep_model
    J = fit_jlens(model, tok, PROMPTS)
    assert sorted(J) == [0, 1, 2, 3]
    np.testing.assert_array_equal(J[3], np.eye(64, dtype=np.float32))
    for layer in (0, 1, 2):  # earlier layers are not the identity
        assert J[layer].dtype == np.float32 and J[layer].shape == (64, 64)
        assert np.abs(J[layer] - np.eye(64)).max() > 0.05


@pytest.mark.parametrize("layer", [0, 2])
def test_matches_autograd_jacobian_and_finite_differences(deep_model64, layer):
    model, tok = deep_model64
    ids = _ids(tok, PROMPTS[0])
    J = fit_jlens(model, tok, PROMPTS[:1], layers=[layer])[layer]
    f = _perturbed_output(model, ids, layer)
    zero = torch.zeros(64, dtype=torch.float64)
    ref = torch.autograd.functional.jacobian(f, zero).numpy()
    np.testing.assert_allclose(J, ref, atol=1e-5, rtol=0)
    # Central finite differences, step 1e-4 |h|. Llama's RMSNorm computes in float32 even in a
    # float64 model, so each evaluation carries ~1e-7 |y| rounding noise and the quotient is
    # good to ~noise/step (about 1e-3 here; measured: error grows as the step shrinks). The
    # tolerance is far below |J - I| (~1), so a wrong Jacobian cannot pass.
    step = 1e-4 * float(_state(model, ids, layer).norm())
    cols = np.arange(layer, 64, 4)  # every 4th input coordinate keeps the test fast
    fd = np.empty((64, len(cols)))
    with torch.no_grad():
        for k, j in enumerate(cols):
            e = torch.zeros(64, dtype=torch.float64)
            e[j] = step
            fd[:, k] = ((f(e) - f(-e)) / (2 * step)).numpy()
    np.testing.assert_allclose(J[:, cols], fd, atol=3e-3, rtol=0)
    assert np.linalg.norm(J[:, cols] - fd) / np.linalg.norm(J[:, cols]) < 1e-3
    assert np.abs(J[:, cols] - np.eye(64)[:, cols]).max() > 0.3


@pytest.mark.parametrize("method", ["vmap", "batched"])
@pytest.mark.parametrize("batch_rows", [64, 24, 1000])
def test_batched_prefix_cached_equals_per_coordinate_loop(deep_model64, batch_rows, method):
    model, tok = deep_model64
    for p in model.parameters():
        p.requires_grad_(False)
    for prompt in (PROMPTS[0], "P"):  # a one-token prompt has no prefix to cache
        ids = _ids(tok, prompt)
        fast = prompt_jacobians(model, ids, [0, 1, 3], batch_rows=batch_rows, method=method)
        slow = prompt_jacobians(model, ids, [0, 1, 3], method="loop")
        for layer in (0, 1, 3):
            torch.testing.assert_close(fast[layer], slow[layer], atol=1e-10, rtol=0)
    assert len(_ids(tok, "P")) == 1


def test_float32_batched_equals_loop_and_mean_over_prompts(deep_model):
    model, tok = deep_model
    flags = [p.requires_grad for p in model.parameters()]
    J = fit_jlens(model, tok, PROMPTS, layers=[1])
    assert [p.requires_grad for p in model.parameters()] == flags  # restored
    loop = fit_jlens(model, tok, PROMPTS, layers=[1], method="loop")
    np.testing.assert_allclose(J[1], loop[1], atol=2e-5, rtol=0)
    for p in model.parameters():
        p.requires_grad_(False)
    per = [prompt_jacobians(model, _ids(tok, p), [1])[1].numpy() for p in PROMPTS]
    for p, flag in zip(model.parameters(), flags, strict=True):
        p.requires_grad_(flag)
    np.testing.assert_allclose(J[1], np.mean(per, axis=0), atol=1e-6, rtol=0)
    assert np.abs(per[0] - per[1]).max() > 1e-3  # the prompts really differ


def test_gpt2_architecture_batched_equals_loop(deep_model):
    from transformers import GPT2Config, GPT2LMHeadModel

    _, tok = deep_model
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=3, n_head=4,
                                       n_positions=256)).eval().double()
    for p in model.parameters():
        p.requires_grad_(False)
    ids = _ids(tok, PROMPTS[1])
    slow = prompt_jacobians(model, ids, [0, 1, 2], method="loop")
    for method in ("vmap", "batched"):
        fast = prompt_jacobians(model, ids, [0, 1, 2], batch_rows=16, method=method)
        for layer in (0, 1):
            torch.testing.assert_close(fast[layer], slow[layer], atol=1e-10, rtol=0)
        torch.testing.assert_close(fast[2], torch.eye(32, dtype=torch.float64))


def test_transport_shapes_and_formula():
    rng = np.random.default_rng(0)
    h = rng.normal(size=(5, 4)).astype(np.float16)
    J = rng.normal(size=(4, 4)).astype(np.float32)
    z = transport(h, J)
    assert z.shape == (5, 4) and z.dtype == np.float32
    np.testing.assert_allclose(z, (J @ h.astype(np.float32).T).T, rtol=1e-6)
    np.testing.assert_allclose(z[2], J @ h[2].astype(np.float32), rtol=1e-6)
    with pytest.raises(ValueError):
        transport(h.T, J)
    with pytest.raises(ValueError):
        transport(h, J[:, :3])


def test_assert_nontrivial_transport():
    eye = np.eye(8, dtype=np.float32)
    with pytest.raises(FksInputError, match="identity"):
        assert_nontrivial_transport({3: eye, 5: eye + 1e-7})
    with pytest.raises(FksInputError):
        assert_nontrivial_transport({})
    off = eye.copy()
    off[0, 1] = 1e-3
    assert_nontrivial_transport({3: eye, 5: off})  # does not raise


def test_save_load_roundtrip_and_validation(tmp_path):
    J = {0: np.arange(9, dtype=np.float32).reshape(3, 3), 2: np.eye(3, dtype=np.float32)}
    save_jlens(tmp_path, J, {"model": "m", "n": 2})
    back = load_jlens(tmp_path, checksums=True)
    assert sorted(back) == [0, 2]
    np.testing.assert_array_equal(back[0], J[0])
    np.save(tmp_path / "jlens/layer_002.npy", np.eye(3, dtype=np.float64))
    with pytest.raises(FksInputError, match="layer 2"):
        load_jlens(tmp_path)
    np.save(tmp_path / "jlens/layer_002.npy", np.eye(3, dtype=np.float32) * 2)
    load_jlens(tmp_path)  # shape and dtype fine
    with pytest.raises(FksInputError, match="sha256"):
        load_jlens(tmp_path, checksums=True)
    with pytest.raises(FksInputError, match="not found"):
        load_jlens(tmp_path / "elsewhere")


def test_sample_is_seeded_stratified_and_main_only(tiny_benchmark_dir):
    queries = load_benchmark(tiny_benchmark_dir).queries
    main = [q for q in queries if q.use_for_main_forward]
    strata = {(q.relation, q.condition_family) for q in main}
    a = sample_jlens_queries(queries, n=len(strata), seed=1)
    assert len(a) == len(strata)
    assert {(q.relation, q.condition_family) for q in a} == strata  # one per stratum
    assert all(q.use_for_main_forward for q in a)
    assert [q.query_id for q in a] == [q.query_id for q in sample_jlens_queries(queries,
                                                                                 len(strata), 1)]
    draws = {tuple(q.query_id for q in sample_jlens_queries(queries, 5, s)) for s in range(6)}
    assert len(draws) > 1  # the seed matters
    assert len(sample_jlens_queries(queries, n=10_000)) == len(main)


def test_two_workers_fit_the_same_matrices_and_never_see_each_others_hooks(deep_model,
                                                                           monkeypatch):
    """Two worker threads share the model: each one's delta hooks must leave the other's
    forward passes alone (else its ``y`` and gradients are another prompt's)."""
    import threading

    from fks.hidden import jlens as jlens_mod

    model, tok = deep_model
    prompts = [f"Question {i}: where is city number {i}?\nAnswer:" for i in range(6)]
    one = fit_jlens(model, tok, prompts, [1, 2], workers=1)
    seen, real = set(), jlens_mod.prompt_jacobians
    barrier = threading.Barrier(2, timeout=10)

    def both_at_once(*args, **kw):
        name = threading.current_thread().name
        if name not in seen:  # each worker's first prompt starts with the other's
            seen.add(name)
            barrier.wait()
        return real(*args, **kw)

    monkeypatch.setattr(jlens_mod, "prompt_jacobians", both_at_once)
    two = fit_jlens(model, tok, prompts, [1, 2], workers=2)
    assert len(seen) == 2 and all(n.startswith("fks-jlens") for n in seen)
    for layer in (1, 2):
        np.testing.assert_allclose(two[layer], one[layer], atol=1e-6, rtol=0)
