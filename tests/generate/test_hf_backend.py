"""HF backend on the tiny random Llama: greedy correctness, batch invariance, truncation, EOS."""

from __future__ import annotations

import pytest
import torch

from fks.configs import load_configs
from fks.errors import FksInputError
from fks.generate.backends import GenerationBackend, make_backend
from fks.generate.prompts import encode_prompt

CFG = load_configs()
MAX_NEW = CFG.models.generation.max_new_tokens
LONG = " ".join(f"Paris Berlin Tokyo {i}" for i in range(120)) + "\nAnswer:"
PROMPTS = [
    "x\nAnswer:",
    "Answer the following question with a short factual answer.\n"
    "Question: What is the capital of France?\nAnswer:",
    "法国的首都是\nAnswer:",
    "Столица Франции\nAnswer:",
    "Madrid is a large city. " * 12 + "What is the capital of Japan?\nAnswer:",
    LONG,
    "Hola\nAnswer:",
]



@pytest.fixture(scope="module")
def backend(tiny_model_dir):
    return make_backend("hf", str(tiny_model_dir), configs=CFG, device="cpu")


def _reference_greedy(model, ids: list[int], eos: set[int], max_new: int):
    """Plain greedy loop: full forward per step, no cache, no padding, no generate()."""
    seq = list(ids)
    tokens, logps = [], []
    with torch.inference_mode():
        for _ in range(max_new):
            logits = model(torch.tensor([seq])).logits[0, -1].float()
            tok = int(logits.argmax())
            if tok in eos:
                return tokens, logps, "stop"
            tokens.append(tok)
            logps.append(float(torch.log_softmax(logits, -1)[tok]))
            seq.append(tok)
    return tokens, logps, "length"


def _same(a, b):
    assert a.text == b.text
    assert (a.n_prompt_tokens, a.prompt_truncated, a.n_generated_tokens, a.finish_reason) == (
        b.n_prompt_tokens, b.prompt_truncated, b.n_generated_tokens, b.finish_reason)
    assert a.answer_logprobs == pytest.approx(b.answer_logprobs, abs=1e-4)


def test_protocol_interface_and_describe(backend, tiny_model_dir):
    assert isinstance(backend, GenerationBackend)
    d = backend.describe()
    assert d["dtype"] == "float32" and d["device"] == "cpu"
    assert d["weight_files"] == ["model.safetensors"]
    assert len(d["weights_sha256"]) == 64 and len(d["tokenizer_sha256"]) == 64
    assert d["transformers_version"] and d["model_path"] == str(tiny_model_dir)


def test_matches_a_plain_greedy_loop(backend):
    outs = backend.generate(PROMPTS, max_new_tokens=MAX_NEW)
    eos = set(backend.eos_ids)
    for prompt, out in zip(PROMPTS, outs, strict=True):
        ids, _ = encode_prompt(backend.tokenizer, prompt, CFG.models.generation.max_prompt_len)
        tokens, logps, finish = _reference_greedy(backend.model, ids, eos, MAX_NEW)
        assert out.text == backend.tokenizer.decode(tokens, skip_special_tokens=True)
        assert out.n_generated_tokens == len(tokens) and out.finish_reason == finish
        assert out.answer_logprobs == pytest.approx(logps, abs=1e-4)
        assert all(lp <= 0 for lp in out.answer_logprobs)


def test_batched_equals_one_at_a_time(backend):
    lengths = [len(encode_prompt(backend.tokenizer, p, 192)[0]) for p in PROMPTS]
    assert max(lengths) >= 20 * min(lengths)  # very different lengths in one batch
    batched = backend.generate(PROMPTS, max_new_tokens=MAX_NEW)
    single = [backend.generate([p], max_new_tokens=MAX_NEW)[0] for p in PROMPTS]
    other = backend.generate(PROMPTS[::-1][:3], max_new_tokens=MAX_NEW)[::-1]
    for a, b in zip(batched, single, strict=True):
        _same(a, b)
    for a, b in zip(batched[-3:], other, strict=True):
        _same(a, b)


def test_prompt_is_cut_to_max_prompt_len_keeping_the_end(backend):
    (out,) = backend.generate([LONG], max_new_tokens=4)
    full = backend.tokenizer(LONG)["input_ids"]
    assert len(full) > 192
    assert out.prompt_truncated and out.n_prompt_tokens == 192
    eos = set(backend.eos_ids)
    tokens, _, _ = _reference_greedy(backend.model, full[-192:], eos, 4)
    assert out.text == backend.tokenizer.decode(tokens, skip_special_tokens=True)
    (short,) = backend.generate(["x\nAnswer:"], max_new_tokens=4)
    assert not short.prompt_truncated and short.n_prompt_tokens < 192


def test_stops_at_eos_and_cuts_the_answer_there(backend, monkeypatch):
    (free,) = backend.generate([PROMPTS[1]], max_new_tokens=MAX_NEW)
    ids, _ = encode_prompt(backend.tokenizer, PROMPTS[1], 192)
    tokens, _, _ = _reference_greedy(backend.model, ids, set(backend.eos_ids), MAX_NEW)
    assert len(tokens) >= 4
    stop_tok = tokens[3]  # pretend the 4th greedy token is an end-of-sequence token
    first = tokens.index(stop_tok)
    monkeypatch.setattr(backend, "eos_ids", [*backend.eos_ids, stop_tok])
    outs = backend.generate([PROMPTS[1], PROMPTS[0]], max_new_tokens=MAX_NEW)
    assert outs[0].finish_reason == "stop" and outs[0].n_generated_tokens == first
    assert outs[0].text == backend.tokenizer.decode(tokens[:first], skip_special_tokens=True)
    assert len(outs[0].answer_logprobs) == first
    assert free.text.startswith(outs[0].text)


def test_length_finish_when_no_eos(backend):
    outs = backend.generate(PROMPTS, max_new_tokens=3)
    for o in outs:
        assert o.n_generated_tokens <= 3
        assert (o.finish_reason == "length") == (o.n_generated_tokens == 3)


def test_a_time_budget_cut_is_a_timeout_never_a_short_answer(tiny_model_dir, monkeypatch):
    """``max_time_s`` (an LLM judge's budget): a continuation cut by it is ``timeout``."""
    timed = make_backend("hf", str(tiny_model_dir), configs=CFG, device="cpu", max_time_s=0.5)
    assert timed.describe()["max_time_s"] == 0.5
    assert "max_time_s" not in make_backend("hf", str(tiny_model_dir), configs=CFG,
                                             device="cpu").describe()
    monkeypatch.setattr(timed, "eos_ids", [-1])  # never stops by itself
    # within budget: the same greedy output as without one
    (fast,) = timed.generate([PROMPTS[1]], max_new_tokens=3)
    assert fast.status == "ok" and fast.n_generated_tokens == 3
    # a clock that jumps past the budget at once: transformers stops after the first step
    import time as _time

    start = _time.time()
    ticks = iter(range(10**6))
    monkeypatch.setattr(_time, "time", lambda: start + 10.0 * next(ticks))
    monkeypatch.setattr(_time, "monotonic", lambda: 10.0 * next(ticks))
    (cut,) = timed.generate([PROMPTS[1]], max_new_tokens=50)
    assert cut.status == "timeout" and cut.text == "" and cut.finish_reason == "time"
    assert "max_time 0.5 s" in cut.error and cut.n_generated_tokens < 50
    with pytest.raises(FksInputError):
        make_backend("hf", str(tiny_model_dir), configs=CFG, device="cpu", max_time_s=0)


def test_unreachable_hub_id_is_an_input_error(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(FksInputError, match="not a local folder.*hub cannot be reached"):
        make_backend("hf", "some-org/not-local", configs=CFG, device="cpu")


def test_unknown_backend_kind():
    with pytest.raises(FksInputError, match="unknown backend"):
        make_backend("tgi", "x", configs=CFG)


def test_missing_pad_token_falls_back_to_eos(tiny_model_dir, tmp_path):
    import json
    import shutil

    model_dir = tmp_path / "nopad"
    shutil.copytree(tiny_model_dir, model_dir)
    tc = json.loads((model_dir / "tokenizer_config.json").read_text())
    del tc["pad_token"]
    (model_dir / "tokenizer_config.json").write_text(json.dumps(tc))
    b = make_backend("hf", str(model_dir), configs=CFG, device="cpu")
    assert b.tokenizer.pad_token_id == b.tokenizer.eos_token_id
    prompts = [PROMPTS[0], PROMPTS[4]]
    batched = b.generate(prompts, max_new_tokens=8)
    for p, out in zip(prompts, batched, strict=True):
        _same(out, b.generate([p], max_new_tokens=8)[0])


def test_model_generation_defaults_are_ignored(tiny_model_dir, tmp_path):
    """A checkpoint's own generation_config (sampling, repetition penalty, ...) never leaks in."""
    import json
    import shutil

    model_dir = tmp_path / "chatty"
    shutil.copytree(tiny_model_dir, model_dir)
    gc = json.loads((model_dir / "generation_config.json").read_text())
    gc.update({"do_sample": True, "temperature": 0.7, "top_k": 5, "top_p": 0.8,
               "repetition_penalty": 5.0, "no_repeat_ngram_size": 1, "min_new_tokens": 3})
    (model_dir / "generation_config.json").write_text(json.dumps(gc))
    b = make_backend("hf", str(model_dir), configs=CFG, device="cpu")
    eos = set(b.eos_ids)
    for prompt, out in zip(PROMPTS[:3], b.generate(PROMPTS[:3], max_new_tokens=MAX_NEW),
                           strict=True):
        ids, _ = encode_prompt(b.tokenizer, prompt, 192)
        tokens, logps, finish = _reference_greedy(b.model, ids, eos, MAX_NEW)
        assert out.text == b.tokenizer.decode(tokens, skip_special_tokens=True)
        assert out.answer_logprobs == pytest.approx(logps, abs=1e-4)


def test_the_fused_logprob_kernel_matches_eager_and_a_float64_reference():
    # issue 29: a large vocabulary's log-probs come from one compiled pass (float64 sums)
    import torch

    from fks.generate.backends import hf

    torch.manual_seed(0)
    for batch in (3, 8):  # a dynamic batch: one compile serves both
        x = torch.randn(batch, hf.FUSED_MIN_VOCAB * 2) * 4
        with torch.inference_mode():
            fused, tok = hf._fused_chosen(x)
            eager, tok_eager = hf._eager_chosen(x)
        ref = x.double().max(-1).values - torch.logsumexp(x.double(), -1)
        assert torch.equal(tok, tok_eager)
        assert (fused.double() - ref).abs().max() < 1e-5
        assert (fused - eager).abs().max() < 1e-5
    assert hf.logprob_kernel(hf.FUSED_MIN_VOCAB) == "inductor"
    assert hf.logprob_kernel(hf.FUSED_MIN_VOCAB - 1) == "eager"


@pytest.mark.parametrize("vocab", [65536, 50257])  # blocks of 1,024; no power-of-2 divisor
def test_the_fused_kernel_picks_torchs_argmax_among_ties_in_bf16_at_any_batch(vocab):
    # the argmax is the first index holding the maximum, as torch.argmax's; bf16 logits (the
    # models' own) and one-row batches (a batch whose other rows ended) give the same values
    import torch

    from fks.generate.backends import hf

    torch.manual_seed(1)
    x = (torch.randn(5, vocab) * 4).bfloat16()
    x[0, 7] = x[0, vocab - 3] = 30.0  # a tie: the first index wins
    x[2, vocab - 1] = 40.0  # the last word
    ref = x.double().max(-1).values - torch.logsumexp(x.double(), -1)
    with torch.inference_mode():
        for start, stop in ((0, 5), (0, 2), (0, 1), (3, 5)):
            lp, tok = hf._fused_chosen(x[start:stop])
            assert torch.equal(tok, x[start:stop].argmax(-1))
            assert (lp.double() - ref[start:stop]).abs().max() < 1e-5
    assert tok.dtype == torch.int64 and lp.dtype == torch.float32
    assert hf.logprob_kernel(vocab) == "inductor"  # the compiled kernel ran, not the fallback


def test_a_nan_row_gets_torchs_own_argmax():
    # a row whose maximum matches no logit (NaN) would get an index past the vocabulary from
    # the fused kernel; it takes the eager path instead
    import torch

    from fks.generate.backends import hf

    x = torch.randn(3, hf.FUSED_MIN_VOCAB)
    x[1, 11] = float("nan")
    with torch.inference_mode():
        lp, tok = hf._fused_chosen(x)
        eager, tok_eager = hf._eager_chosen(x)
    assert torch.equal(tok, tok_eager) and int(tok[1]) == 11
    assert torch.equal(lp.isnan(), eager.isnan())
    assert hf.logprob_kernel(hf.FUSED_MIN_VOCAB) == "inductor"  # a NaN row is no failure


def test_a_failed_compile_falls_back_to_eager_once_and_says_so(monkeypatch, caplog):
    import torch

    from fks.generate.backends import hf

    def broken(fn, **kw):
        def call(*a):
            raise RuntimeError("no C++ compiler")
        return call

    monkeypatch.setattr(hf, "_FUSED", {})
    monkeypatch.setattr(torch, "compile", broken)
    x = torch.randn(2, hf.FUSED_MIN_VOCAB)
    lp, tok = hf._fused_chosen(x)
    eager, tok_eager = hf._eager_chosen(x)
    assert torch.equal(lp, eager) and torch.equal(tok, tok_eager)
    assert "using eager reductions" in caplog.text
    assert hf.logprob_kernel(hf.FUSED_MIN_VOCAB) == "eager (compile failed)"
    monkeypatch.setenv("FKS_COMPILE", "0")
    assert hf.logprob_kernel(hf.FUSED_MIN_VOCAB) == "eager"


# ------------------------------------------------------------------ issue 29: fks's own loop
def test_the_backend_generates_through_its_own_loop_unless_told_otherwise(backend, monkeypatch):
    from fks.generate.backends import hf

    assert hf.decode_loop(backend.model) == "fks"
    assert backend.describe()["kernels"]["decode_loop"] == "fks"
    monkeypatch.setenv("FKS_DECODE", "transformers")
    assert hf.decode_loop(backend.model) == "transformers"
    assert backend.describe()["kernels"]["decode_loop"] == "transformers"


@pytest.mark.parametrize("loop", ["fks", "transformers"])
def test_both_loops_match_the_plain_greedy_loop(backend, monkeypatch, loop):
    monkeypatch.setenv("FKS_DECODE", loop)
    eos = set(backend.eos_ids)
    for prompt, out in zip(PROMPTS, backend.generate(PROMPTS, max_new_tokens=MAX_NEW),
                           strict=True):
        ids, _ = encode_prompt(backend.tokenizer, prompt, CFG.models.generation.max_prompt_len)
        tokens, logps, finish = _reference_greedy(backend.model, ids, eos, MAX_NEW)
        assert out.text == backend.tokenizer.decode(tokens, skip_special_tokens=True)
        assert (out.n_generated_tokens, out.finish_reason) == (len(tokens), finish)
        assert out.answer_logprobs == pytest.approx(logps, abs=1e-4)


def _early_eos(backend) -> tuple[int, list[int]]:
    """A token some prompts generate early and others never: made an EOS, rows stop apart."""
    cap = CFG.models.generation.max_prompt_len
    seqs = [_reference_greedy(backend.model, encode_prompt(backend.tokenizer, p, cap)[0],
                              set(backend.eos_ids), MAX_NEW)[0] for p in PROMPTS]
    firsts: dict[int, dict[int, int]] = {}
    for row, seq in enumerate(seqs):
        for pos, tok in enumerate(seq[:MAX_NEW // 2]):
            firsts.setdefault(tok, {}).setdefault(row, pos)
    tok = max(firsts, key=lambda t: (0 < len(firsts[t]) < len(PROMPTS), len(firsts[t])))
    return tok, sorted(firsts[tok])


def test_a_row_leaves_the_batch_at_its_eos_and_the_others_do_not_move(backend, monkeypatch):
    """fks's loop drops a finished row from the batch (and its KV cache): the other rows'
    answers and log-probs are those of ``generate``, which decodes every row to the end."""
    stop_tok, stopping = _early_eos(backend)
    assert 0 < len(stopping) < len(PROMPTS)
    monkeypatch.setattr(backend, "eos_ids", [*backend.eos_ids, stop_tok])
    fed: list[int] = []
    hook = backend.model.register_forward_pre_hook(
        lambda _m, _a, kw: fed.append(int(kw["input_ids"].shape[0])), with_kwargs=True)
    try:
        ours = backend.generate(PROMPTS, max_new_tokens=MAX_NEW)
    finally:
        hook.remove()
    monkeypatch.setenv("FKS_DECODE", "transformers")
    theirs = backend.generate(PROMPTS, max_new_tokens=MAX_NEW)
    assert [o.finish_reason for o in ours].count("stop") >= len(stopping)
    for a, b in zip(ours, theirs, strict=True):
        _same(a, b)
    # the decode forwards fed exactly the rows still running: one per token after the first,
    # a stopped row's EOS never fed back; fewer rows than the batch once one has stopped
    needed = sum(o.n_generated_tokens if o.finish_reason == "stop" else MAX_NEW - 1
                 for o in ours)
    assert fed[0] == len(PROMPTS) and sum(fed[1:]) == needed
    assert min(fed[1:]) < len(PROMPTS)


def test_a_cache_that_cannot_drop_rows_sends_the_batch_through_generate(backend, monkeypatch):
    """A cache layer without row selection (a recurrent or static layer) is no crash and no
    wrong answer: the batch is generated again by ``transformers``' ``generate``."""
    from transformers import DynamicCache

    stop_tok, _ = _early_eos(backend)
    monkeypatch.setattr(backend, "eos_ids", [*backend.eos_ids, stop_tok])
    monkeypatch.setenv("FKS_DECODE", "transformers")
    want = backend.generate(PROMPTS, max_new_tokens=MAX_NEW)
    monkeypatch.setenv("FKS_DECODE", "fks")

    def cannot(self, indices):
        raise NotImplementedError("no row selection here")

    monkeypatch.setattr(DynamicCache, "batch_select_indices", cannot)
    for a, b in zip(backend.generate(PROMPTS, max_new_tokens=MAX_NEW), want, strict=True):
        _same(a, b)
