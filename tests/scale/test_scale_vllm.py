"""The vLLM backend: engine settings, the same records as ``hf``, and greedy parity.

vLLM needs a CUDA GPU. On CPU the backend's own code runs against a stand-in engine
(:class:`FakeLLM`, below) that decodes greedily with the Hugging Face model and answers in
vLLM's output format, so what is checked here is fks's side: prompts as token ids, sampling
parameters, EOS handling, decoding, log-probs, statuses, records. The real engine's parity with
``hf`` is :func:`test_greedy_parity_with_hf_on_a_gpu`, skipped unless vLLM and a GPU exist.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from dataclasses import dataclass

import pytest
import torch

from fks.configs import load_configs
from fks.data.load import load_benchmark
from fks.errors import FksInputError
from fks.generate.backends import make_backend
from fks.generate.backends.vllm import completion_output, engine_kwargs
from fks.generate.prompts import build_prompt, encode_prompt
from fks.generate.runner import generate_run
from fks.io import read_jsonl
from tiny_benchmark import tiny_benchmark_rows, write_benchmark

CFG = load_configs()
GEN = CFG.models.generation


# ------------------------------------------------------------------------ engine settings
def test_engine_kwargs_defaults_and_overrides():
    kw = engine_kwargs("m", GEN, supported=None)
    assert kw["enable_prefix_caching"] is True and kw["tensor_parallel_size"] == 1
    assert kw["max_num_seqs"] == 256 and kw["dtype"] == GEN.dtype and kw["seed"] == GEN.seed
    assert kw["max_model_len"] == GEN.max_prompt_len + GEN.max_new_tokens
    assert "generation_config" not in kw  # unknown engine: do not pass what it may not take
    kw = engine_kwargs("m", GEN, tensor_parallel_size=4, max_num_seqs=64, enforce_eager=True,
                       supported={"generation_config", "model"})
    assert (kw["tensor_parallel_size"], kw["max_num_seqs"], kw["enforce_eager"]) == (4, 64, True)
    assert kw["generation_config"] == "vllm"  # the checkpoint's sampling defaults are ignored
    assert engine_kwargs("m", GEN, enable_prefix_caching=False)["enable_prefix_caching"] is False
    for bad in ({"tensor_parallel_size": 0}, {"max_num_seqs": 0},
                {"gpu_memory_utilization": 1.5}):
        with pytest.raises(FksInputError):
            engine_kwargs("m", GEN, **bad)


# ------------------------------------------------------------------- output conversion
@dataclass
class Logprob:
    logprob: float


@pytest.fixture(scope="module")
def hf(scale_model_dir):
    return make_backend("hf", str(scale_model_dir), configs=CFG, device="cpu")


def test_completion_output_matches_the_hf_conversion(hf):
    eos = hf.eos_ids[0]
    enc = ([1, 2, 3], False)
    for tokens in ([40, 41, 42], [40, eos], [eos], [40, 41, eos, 43], []):
        lps = [{t: Logprob(-0.5 - k), 7: Logprob(-9.0)} for k, t in enumerate(tokens)]
        got = completion_output(tokens, lps, eos_ids=set(hf.eos_ids), tokenizer=hf.tokenizer,
                                encoded=enc)
        want = hf._output(tokens, [-0.5 - k for k in range(len(tokens))], enc)
        assert got == want, tokens
    no_lp = completion_output([40, eos], None, eos_ids={eos}, tokenizer=hf.tokenizer,
                              encoded=enc)
    assert no_lp.answer_logprobs is None and no_lp.finish_reason == "stop"


# -------------------------------------------------------------------- stand-in engine
class FakeLLM:
    """vLLM's ``LLM`` interface over the Hugging Face model: greedy, one prompt at a time."""

    instances: list[FakeLLM] = []

    def __init__(self, model: str, max_model_len: int, **kwargs):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.kwargs = {"model": model, "max_model_len": max_model_len, **kwargs}
        self.tok = AutoTokenizer.from_pretrained(model)
        self.model = AutoModelForCausalLM.from_pretrained(model).eval()
        self.calls: list[tuple[int, object]] = []
        FakeLLM.instances.append(self)

    def get_tokenizer(self):
        return self.tok

    def generate(self, requests, params, use_tqdm=True):
        self.calls.append((len(requests), params))
        if any(len(r["prompt_token_ids"]) > self.kwargs["max_model_len"] for r in requests):
            raise ValueError("prompt is longer than the maximum model length")
        return [self._one(r["prompt_token_ids"], params) for r in requests]

    def _one(self, ids, params):
        x = torch.tensor([ids])
        with torch.inference_mode():
            out = self.model.generate(x, attention_mask=torch.ones_like(x), do_sample=False,
                                      max_new_tokens=params.max_tokens,
                                      eos_token_id=params.stop_token_ids,
                                      pad_token_id=self.tok.pad_token_id, output_logits=True,
                                      return_dict_in_generate=True)
        new = out.sequences[0, len(ids):].tolist()
        steps = torch.log_softmax(torch.stack(out.logits, 1)[0].float(), -1)
        lps = [{t: Logprob(float(steps[k, t]))} for k, t in enumerate(new)]
        comp = types.SimpleNamespace(token_ids=new, logprobs=lps if params.logprobs else None,
                                     text="(vLLM's own detokenisation, not used)",
                                     finish_reason="stop" if set(new) & set(
                                         params.stop_token_ids) else "length")
        return types.SimpleNamespace(outputs=[comp])


class SamplingParams:
    def __init__(self, **kw):
        self.__dict__.update(kw)


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.LLM, module.SamplingParams, module.__version__ = FakeLLM, SamplingParams, "fake"
    monkeypatch.setitem(sys.modules, "vllm", module)
    FakeLLM.instances.clear()
    return module


def test_vllm_backend_writes_the_same_records_as_hf(fake_vllm, hf, scale_model_dir, tmp_path):
    bench = write_benchmark(tmp_path / "bench", *tiny_benchmark_rows())
    kw = {"model": "tiny", "model_path": str(scale_model_dir), "configs": CFG}
    generate_run(bench, tmp_path / "hf", backend=hf, batch_size=1, **kw)
    vb = make_backend("vllm", str(scale_model_dir), configs=CFG, tensor_parallel_size=2,
                      max_num_seqs=8)
    generate_run(bench, tmp_path / "vllm", backend=vb, batch_size=8, **kw)
    engine = FakeLLM.instances[0]
    assert engine.kwargs["tensor_parallel_size"] == 2 and engine.kwargs["max_num_seqs"] == 8
    assert engine.kwargs["enable_prefix_caching"] is True
    params = engine.calls[0][1]
    assert (params.temperature, params.max_tokens, params.logprobs) == (0.0, 24, 1)
    assert params.stop_token_ids == sorted(hf.eos_ids) and params.repetition_penalty == 1.0
    a = read_jsonl(tmp_path / "hf/generations.jsonl")
    b = read_jsonl(tmp_path / "vllm/generations.jsonl")
    assert len(a) == len(b) == len(load_benchmark(bench).queries)
    for x, y in zip(a, b, strict=True):
        lp_x, lp_y = x.pop("answer_logprobs"), y.pop("answer_logprobs")
        cfg_x, cfg_y = x.pop("generation_config"), y.pop("generation_config")
        assert (cfg_x.pop("dtype_used"), cfg_y.pop("dtype_used")) == ("float32", GEN.dtype)
        assert cfg_x == cfg_y
        assert x == y  # text, statuses, token counts, finish reasons, flags: identical
        assert lp_y == pytest.approx(lp_x, abs=1e-4)
    assert {r["finish_reason"] for r in a} <= {"stop", "length"}


def test_a_rejected_prompt_is_an_error_row_and_the_rest_are_kept(fake_vllm, hf,
                                                                 scale_model_dir, tmp_path):
    bench = load_benchmark(write_benchmark(tmp_path / "bench", *tiny_benchmark_rows()))
    prompts = [build_prompt(q) for q in bench.queries[:6]]
    lengths = [len(encode_prompt(hf.tokenizer, p, GEN.max_prompt_len)[0]) for p in prompts]
    cap = sorted(lengths)[-2]  # the longest prompt(s) exceed the engine's context
    vb = make_backend("vllm", str(scale_model_dir), configs=CFG, max_model_len=cap)
    outs = vb.generate(prompts, max_new_tokens=4)
    want = hf.generate(prompts, max_new_tokens=4)
    for n, o, w in zip(lengths, outs, want, strict=True):
        if n > cap:
            assert o.status == "error" and "rejected" in o.error and o.text == ""
        else:
            assert (o.status, o.text, o.n_generated_tokens) == ("ok", w.text,
                                                                w.n_generated_tokens)
    assert any(n > cap for n in lengths) and any(n <= cap for n in lengths)
    assert FakeLLM.instances[0].calls[0][0] == 6  # one batch first, then one by one
    assert vb.describe()["engine"]["max_model_len"] == cap


# ------------------------------------------------------------------ the real engine
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None or not torch.cuda.is_available(),
                    reason="needs vLLM and a CUDA GPU")
def test_greedy_parity_with_hf_on_a_gpu(tmp_path):  # pragma: no cover - GPU only
    from tiny_model import build_tiny_model

    # head dim 64: a size vLLM's attention kernels support (the default tiny model has 16)
    model = build_tiny_model(tmp_path / "m", n_layers=2, hidden=256, n_heads=4, n_kv_heads=2,
                             intermediate=512)
    bench = load_benchmark(write_benchmark(tmp_path / "bench", *tiny_benchmark_rows()))
    prompts = [build_prompt(q) for q in bench.queries]
    hf_b = make_backend("hf", str(model), configs=CFG, device="cuda")
    vb = make_backend("vllm", str(model), configs=CFG, gpu_memory_utilization=0.3,
                      enforce_eager=True)
    want = hf_b.generate(prompts, max_new_tokens=GEN.max_new_tokens)
    got = vb.generate(prompts, max_new_tokens=GEN.max_new_tokens)
    assert all(g.status == "ok" for g in got)
    same = [g.text == w.text for g, w in zip(got, want, strict=True)]
    # bfloat16 on both sides, different kernels: a near-tie may flip a late token, never the
    # first one, and nearly every answer must agree
    assert all(g.answer_logprobs and w.answer_logprobs for g, w in zip(got, want, strict=True))
    first = [(hf_b.tokenizer.encode(g.text) or [None])[:1] == (hf_b.tokenizer.encode(w.text)
                                                               or [None])[:1]
             for g, w in zip(got, want, strict=True)]
    assert all(first) and sum(same) >= 0.9 * len(same)
    for g, w, s in zip(got, want, same, strict=True):
        if s:
            assert g.answer_logprobs == pytest.approx(w.answer_logprobs, abs=0.1)
