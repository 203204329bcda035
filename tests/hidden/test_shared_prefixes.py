"""Extraction with shared prompt prefixes (``share_prefixes``, issue 29).

A prefix that enough prompts share is forwarded once; each prompt's remaining tokens attend to
its cached keys and values. The states must be those of the whole prompt (float32, up to
summation order), with right positions (rotary and absolute embeddings), and the work must
resume after a crash to the same bytes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fks.data.load import load_benchmark
from fks.hidden import extract as extract_mod
from fks.hidden.capture import QueryEndCapture
from fks.hidden.extract import (
    extract_hidden,
    plan_extraction,
    plan_prefixes,
    plan_steps,
)
from fks.hidden.store import HiddenStore


def test_each_prompt_gets_the_longest_proper_prefix_enough_prompts_share():
    seqs = [[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 6], [1, 2, 3], [7, 8], [1, 2, 3, 4, 9]]
    plan = plan_prefixes(seqs, 3)
    # (1,2,3) is a prefix of rows 0, 1 and 5 (row 3 *is* it: a row keeps its last token);
    # (1,2) of five rows; row 4 shares nothing
    assert plan.split.tolist() == [3, 3, 2, 2, 0, 3]
    assert [plan.prefixes[i] if i >= 0 else None for i in plan.prefix_of.tolist()] == [
        (1, 2, 3), (1, 2, 3), (1, 2), (1, 2), None, (1, 2, 3)]
    assert plan_prefixes(seqs, 6).split.tolist() == [0] * 6  # no prefix is shared by six
    assert plan_prefixes(seqs, 0).prefixes == [] and plan_prefixes(seqs, 1).split.sum() == 0
    again = plan_prefixes(seqs, 3)
    assert again.prefixes == plan.prefixes and np.array_equal(again.split, plan.split)


def test_prefixes_share_their_own_prefixes_in_turn():
    seqs = [[1, 2, 3, 4, 5], [1, 2, 3, 4, 6], [1, 2, 3, 7, 8], [1, 2, 3, 7, 9], [1, 2, 9]]
    plan = plan_prefixes(seqs, 2, levels=2)
    assert plan.split.tolist() == [4, 4, 4, 4, 2]
    assert plan.prefixes == [(1, 2, 3, 4), (1, 2, 3, 7), (1, 2)]
    assert plan.sub is not None and plan.sub.sub is None
    assert plan.sub.split.tolist() == [3, 3, 1] and plan.sub.prefixes == [(1, 2, 3), (1,)]
    # forwarded: each row's last token (5), each prefix's end after its own prefix (3), the
    # two prefixes of prefixes (3 + 1): 12 of 23
    assert sum(map(len, seqs)) - plan.saved_tokens == 12
    one = plan_prefixes(seqs, 2)
    assert one.sub is None and sum(map(len, seqs)) - one.saved_tokens == 5 + 10


def test_the_schedule_covers_every_row_once_in_bounded_batches(monkeypatch):
    rng = np.random.default_rng(0)
    seqs = [[1] + rng.integers(2, 5, size=rng.integers(1, 7)).tolist() for _ in range(200)]
    prefixes = plan_prefixes(seqs, 4)
    monkeypatch.setattr(extract_mod, "PREFIX_CHUNK_TOKENS", 6)  # several chunks per length
    steps = plan_steps([len(s) for s in seqs], 8, prefixes)
    rows = np.concatenate([b for st in steps for b in st.batches])
    assert sorted(rows.tolist()) == list(range(len(seqs)))
    assert max(len(b) for st in steps for b in st.batches) <= 8
    assert len({st.prefix_len for st in steps}) > 2
    for st in steps:
        assert len(st.prefixes) * max(st.prefix_len, 1) <= 6 or len(st.prefixes) == 1
        for b in st.batches:
            assert (prefixes.split[b] == st.prefix_len).all()
            if st.prefix_len:
                assert set(prefixes.prefix_of[b].tolist()) <= set(st.prefixes.tolist())
    whole = plan_steps([len(s) for s in seqs], 8, None)
    assert len(whole) == 1 and whole[0].prefix_len == 0


class _Collect:
    """A stand-in for the store's writer: float32 rows in memory."""

    def __init__(self, n: int, layers: list[int], d: int) -> None:
        self.done = np.zeros(n, dtype=bool)
        self.out = {x: np.zeros((n, d), np.float32) for x in layers}

    def write(self, rows, states) -> None:
        for x, v in states.items():
            self.out[x][rows] = v
        self.done[rows] = True


def _states(model, tok, bench, share: int, batch_size: int = 3,
            levels: int = 1) -> tuple[dict, int]:
    plan = plan_extraction(bench, model, tok, model_name="m")
    prefixes = plan_prefixes([i for i, _ in plan.encoded], share, levels) if share else None
    writer = _Collect(len(plan.rows), plan.layers, plan.d_model)
    steps = plan_steps([len(i) for i, _ in plan.encoded], batch_size, prefixes)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    with QueryEndCapture(model, plan.layers, stop_early=True) as capture:
        for step in steps:
            extract_mod._run_step(model, capture, writer, plan, prefixes, step, pad, "left",
                                  lambda: None)
    assert writer.done.all()
    shared = 0 if prefixes is None else int((prefixes.split > 0).sum())
    return writer.out, shared


def _gpt2(tok):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=3, n_head=4, n_positions=256,
                        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                        pad_token_id=tok.pad_token_id)
    return GPT2LMHeadModel(config).eval()


@pytest.mark.parametrize("arch", ["llama", "gpt2"])  # rotary / absolute position embeddings
@pytest.mark.parametrize(("share", "levels"), [(2, 1), (4, 1), (2, 3)])
def test_shared_prefix_states_equal_whole_prompts(arch, share, levels, deep_model,
                                                  tiny_benchmark_dir):
    model, tok = deep_model
    if arch == "gpt2":
        model = _gpt2(tok)
    bench = load_benchmark(tiny_benchmark_dir)
    whole, none = _states(model, tok, bench, 0)
    shared, n_shared = _states(model, tok, bench, share, levels=levels)
    if levels > 1:  # prefixes of prefixes really occur here
        plan = plan_extraction(bench, model, tok, model_name="m")
        assert plan_prefixes([i for i, _ in plan.encoded], share, levels).sub is not None
    assert none == 0 and n_shared >= 8  # prefixes are really shared
    for layer, ref in whole.items():
        # float32, another summation order: far below what a wrong position or prefix gives
        assert np.abs(shared[layer] - ref).max() <= 1e-5 * np.abs(ref).max(), layer


@pytest.mark.parametrize("mutation", ["positions_from_zero", "prefix_token_lost"])
def test_the_comparison_catches_a_wrong_position_or_prefix(mutation, deep_model,
                                                           tiny_benchmark_dir, monkeypatch):
    """The comparison above can fail: remaining tokens placed from position 0, or a prefix
    token's keys and values lost, move the states far past its tolerance."""
    model, tok = deep_model
    bench = load_benchmark(tiny_benchmark_dir)
    whole, _ = _states(model, tok, bench, 0)
    original = extract_mod.forward_suffix_query_end
    if mutation == "positions_from_zero":
        def restart(_module, args, kwargs):
            pos = kwargs.get("position_ids")
            if pos is not None and kwargs.get("attention_mask").shape[1] > pos.shape[1]:
                kwargs["position_ids"] = pos - pos[:, :1]
            return args, kwargs

        handle = model.register_forward_pre_hook(restart, with_kwargs=True)
    else:
        handle = None

        def last_prefix_token_lost(model_, capture, kv, ids, mask):
            def drop(t):
                t = t.clone()
                t[:, :, -1] = 0
                return t

            return original(model_, capture, [(drop(k), drop(v)) for k, v in kv], ids, mask)

        monkeypatch.setattr(extract_mod, "forward_suffix_query_end", last_prefix_token_lost)
    try:
        broken, _ = _states(model, tok, bench, 2)
    finally:
        if handle is not None:
            handle.remove()
    assert max(np.abs(broken[x] - whole[x]).max() / np.abs(whole[x]).max() for x in whole) > 1e-2


def test_shared_prefixes_resume_to_identical_arrays(deep_model, tiny_benchmark_dir, tmp_path,
                                                    monkeypatch):
    model, tok = deep_model
    bench = load_benchmark(tiny_benchmark_dir)
    extract_hidden(tmp_path / "clean", bench, model, tok, model_name="m", batch_size=2,
                   share_prefixes=2, duplicate_sample=0)
    real = extract_mod.forward_suffix_query_end
    calls = {"n": 0}

    def crashing(*args):
        calls["n"] += 1
        if calls["n"] > 2:
            raise RuntimeError("injected crash")
        return real(*args)

    monkeypatch.setattr(extract_mod, "forward_suffix_query_end", crashing)
    with pytest.raises(RuntimeError, match="injected crash"):
        extract_hidden(tmp_path / "crash", bench, model, tok, model_name="m", batch_size=2,
                       share_prefixes=2, duplicate_sample=0)
    calls["n"] = -1000
    extract_hidden(tmp_path / "crash", bench, model, tok, model_name="m", batch_size=2,
                   share_prefixes=2, duplicate_sample=0)
    clean, resumed = HiddenStore(tmp_path / "clean"), HiddenStore(tmp_path / "crash")
    assert clean.meta["share_prefixes"] == 2
    for layer in clean.layers:
        np.testing.assert_array_equal(clean.layer(layer), resumed.layer(layer))
    assert clean.meta["sha256"] == resumed.meta["sha256"]


def test_a_prefix_that_reaches_a_sliding_window_turns_sharing_off(deep_model, tiny_benchmark_dir,
                                                                   tmp_path, monkeypatch):
    # a sliding layer's cache keeps its last window - 1 tokens only
    model, tok = deep_model
    monkeypatch.setattr(model.config, "sliding_window", 3, raising=False)
    calls = []
    real = extract_mod.forward_suffix_query_end
    monkeypatch.setattr(extract_mod, "forward_suffix_query_end",
                        lambda *a: calls.append(1) or real(*a))
    extract_hidden(tmp_path / "run", load_benchmark(tiny_benchmark_dir), model, tok,
                   model_name="m", duplicate_sample=0)
    assert calls == [] and HiddenStore(tmp_path / "run").meta["share_prefixes"] == 0


def test_a_shard_takes_the_prefixes_the_whole_selection_gives(deep_model, tiny_benchmark_dir):
    # merged shards must hold the unsharded store's bytes (tests/scale), so a row's prefix
    # cannot depend on which other rows its shard holds
    model, tok = deep_model
    bench = load_benchmark(tiny_benchmark_dir)
    whole = plan_extraction(bench, model, tok, model_name="m")
    full = plan_prefixes([i for i, _ in whole.encoded], 4)
    at = {r["query_id"]: k for k, r in enumerate(whole.rows)}
    moved = 0
    for shard in (1, 2):
        part = plan_extraction(bench, model, tok, model_name="m", shard=(shard, 2))
        assert part.counted is not None and len(part.counted) == len(whole.rows)
        mine = plan_prefixes([i for i, _ in part.encoded], 4, counted=part.counted)
        alone = plan_prefixes([i for i, _ in part.encoded], 4)
        rows = [at[r["query_id"]] for r in part.rows]
        assert mine.split.tolist() == full.split[rows].tolist()
        moved += int((alone.split != full.split[rows]).sum())
    assert moved > 0  # counted within the shard alone, some rows would get another prefix
    assert whole.counted is None
