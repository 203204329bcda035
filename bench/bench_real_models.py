"""Real models on CPU: bf16 against float32 generation, J-Lens passes, time per pipeline stage.

Nine measurements, each within one process (ratios, never absolute goals in tests):

* ``dtype``: the same greedy queries through :class:`fks.generate.backends.hf.HFBackend` in
  float32 and in bfloat16 (both loaded through the one GGUF resolver), interleaved arms, best
  of ``--repeats``: new tokens per second of each and the share of answers that differ::

      python bench/bench_real_models.py dtype --model gemma-3-270m --benchmark B --n 32

* ``jlens``: :func:`fks.hidden.jlens.fit_jlens` on the same prompts and window layers with the
  default ``vmap`` method (one forward row, vectorised VJPs) and the ``batched`` method it
  replaced in issue 29 (``d`` copies of the last token forward); the matrices must agree, and
  ``--exact N`` measures both arms' error against a float64 fit; the matrix-product floor of
  ``vmap`` bounds any implementation of the same reverse-mode sweep::

      python bench/bench_real_models.py jlens --model gemma-3-270m --benchmark B --prompts 8

* ``jlens-stage``: the J-Lens fit as issue 29 found it (``batched``, 256 prompts) against the
  fit ``fks run`` makes now (``vmap``, 128 prompts, a count justified by convergence)::

      python bench/bench_real_models.py jlens-stage --model gemma-3-270m --benchmark B

* ``generate``: fks's HF backend (its own greedy loop; ``--loops`` adds the same backend
  through ``transformers``' ``generate``) against plain ``transformers`` ``generate`` (left
  padding) on the same main queries and model object, at several batch sizes, interleaved;
  the matrix-product floor (the seconds inside ``aten::mm``/``addmm``/``bmm``, which bound
  any implementation of the same products); plus the bar: float32 answers equal to plain
  transformers one prompt at a time::

      python bench/bench_real_models.py generate --model gemma-3-270m --benchmark B --n 128 \
          --dtype bfloat16 --batches 64 128 --loops

* ``profile``: where generation time goes at the default batch: shares of the wall time in
  prefill forwards, decode forwards, fks's log-prob processor and Python overhead, tokens per
  second, the padding share of prefill positions and the share of decode rows past EOS::

      python bench/bench_real_models.py profile --model gemma-3-270m --benchmark B --n 128

* ``logprobs``: the per-step log-prob kernel alone, eager against the compiled fused pass
  (issue 29), with both arms' error against float64::

      python bench/bench_real_models.py logprobs --batch-size 64 --vocab 262144

* ``extract``: the extract stage's forward passes on a sample of the reference pool, ending
  after the highest stored block (the default) against the full forward pass (same bytes),
  with the matrix-product share and the hardware's limit::

      python bench/bench_real_models.py extract --model gemma-3-270m --benchmark FULL --n 2048

* ``prefixes``: shared prompt prefixes (the extract stage's default since stop 43) against
  whole prompts on the first ``--n`` rows of the pool in file order: seconds, tokens
  forwarded, and how far the states move, beside batch 1 against batch 64::

      python bench/bench_real_models.py prefixes --model gemma-3-270m --benchmark FULL --n 6000

* ``stages``: the wall and CPU seconds per stage (and the cores each kept busy) recorded in
  the ``pipeline`` section of run manifests (``fks run`` writes them), side by side::

      python bench/bench_real_models.py stages RUNS/before RUNS/after
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from pathlib import Path


def _queries(benchmark: str, n: int) -> list:
    from fks.data.load import load_benchmark
    from fks.hidden.jlens import sample_jlens_queries

    return sample_jlens_queries(load_benchmark(benchmark).queries, n, seed=20260101)


def _backend(model: str, dtype: str):
    from fks.configs import load_configs
    from fks.generate.backends.hf import HFBackend

    configs = load_configs()
    entry = configs.models.find(model)
    path = entry.path if entry else model
    return HFBackend(path, generation=configs.models.generation, device="cpu", dtype=dtype)


def _generate(backend, prompts: list[str], batch: int,
              workers: int | None = None) -> tuple[float, int, list[str]]:
    """Generate as ``fks generate`` does: batches through the runner's
    :func:`fks.generate.runner.batch_outputs`, ``workers`` at once (default: the backend's)."""
    from fks.generate.runner import batch_outputs

    saved = backend.workers
    backend.workers = saved if workers is None else workers
    started, tokens, texts = time.perf_counter(), 0, []
    try:
        batches = [prompts[i:i + batch] for i in range(0, len(prompts), batch)]
        with batch_outputs(backend, batches, 24) as results:
            for outs in results:
                tokens += sum(o.n_generated_tokens or 0 for o in outs)
                texts += [o.text for o in outs]
    finally:
        backend.workers = saved
    return time.perf_counter() - started, tokens, texts


def bench_dtype(args: argparse.Namespace) -> dict:
    from fks.generate.backends.hf import cpu_native_bf16
    from fks.generate.prompts import build_prompt

    prompts = [build_prompt(q) for q in _queries(args.benchmark, args.n)]
    arms = {d: _backend(args.model, d) for d in ("float32", "bfloat16")}
    best: dict[str, tuple[float, int]] = {}
    texts: dict[str, list[str]] = {}
    for _ in range(args.repeats):
        for name, backend in arms.items():
            secs, tokens, out = _generate(backend, prompts, args.batch_size)
            if name not in best or secs < best[name][0]:
                best[name] = (secs, tokens)
            texts[name] = out
    differ = sum(a != b for a, b in zip(texts["float32"], texts["bfloat16"], strict=True))
    rate = {k: v[1] / v[0] for k, v in best.items()}
    return {"model": args.model, "n_prompts": len(prompts), "batch_size": args.batch_size,
            "cpu_native_bf16": cpu_native_bf16(),
            "seconds": {k: round(v[0], 2) for k, v in best.items()},
            "new_tokens": {k: v[1] for k, v in best.items()},
            "tokens_per_s": {k: round(v, 1) for k, v in rate.items()},
            "bf16_over_fp32": round(rate["bfloat16"] / rate["float32"], 2),
            "answers_differ": differ, "answers_differ_share": round(differ / len(prompts), 3)}


def bench_jlens(args: argparse.Namespace) -> dict:
    """J-Lens arms on the same prompts and window layers, in one run (issue 29).

    ``vmap`` (the default: one forward row, vectorised VJPs) against ``batched`` (the default
    before issue 29: ``d`` copies of the last token forward), both float32, timed in turn;
    ``--exact N`` also fits the first N prompts in float64 with both methods and reports each
    float32 arm's max |J - J_float64| there (the matrices' own rounding error). Then the
    matrix-product floor of ``vmap`` (:func:`_gemm_seconds`): ``batched_over_gemm_floor``
    bounds the speed-up over ``batched`` that any implementation of the same sweep can reach.
    """
    import numpy as np
    import torch

    from fks.configs import load_configs
    from fks.generate.prompts import build_prompt
    from fks.hidden.capture import model_dims
    from fks.hidden.cli import parse_layers
    from fks.hidden.jlens import fit_jlens

    backend = _backend(args.model, "float32")
    n_layers, d = model_dims(backend.model)
    layers = parse_layers("window", n_layers, load_configs().metrics.layer_window_min_frac)
    prompts = [build_prompt(q) for q in _queries(args.benchmark, args.prompts)]
    arms = {m: (lambda m=m, p=prompts: fit_jlens(backend.model, backend.tokenizer, p, layers,
                                                  method=m, workers=1))
            for m in ("batched", "vmap")}
    if args.workers:  # vmap as fks run fits it: 2 worker threads on a CPU with 2+ threads
        arms["vmap_workers"] = lambda p=prompts: fit_jlens(backend.model, backend.tokenizer, p,
                                                           layers)
    out, secs = {}, {}
    if args.warmup:
        fit_jlens(backend.model, backend.tokenizer, prompts[:1], layers)
    for name, fn in arms.items():
        started = time.perf_counter()
        out[name] = fn()
        secs[name] = round(time.perf_counter() - started, 2)
    diff = max(float(np.max(np.abs(out["vmap"][x] - out["batched"][x]))) for x in layers)
    workers = {}
    if "vmap_workers" in out:
        from fks.workers import resolve_workers

        workers = {"workers": resolve_workers("cpu"),
                   "speedup_vmap_workers_over_batched": round(
                       secs["batched"] / secs["vmap_workers"], 2),
                   "speedup_vmap_workers_over_vmap": round(secs["vmap"] / secs["vmap_workers"],
                                                           2),
                   "max_abs_diff_vmap_workers_vs_vmap": max(
                       float(np.max(np.abs(out["vmap_workers"][x] - out["vmap"][x])))
                       for x in layers)}
    # the floor: vmap's matrix products alone (any implementation of the same reverse-mode
    # sweep computes them; everything else -- elementwise backward, attention, vmap's
    # bookkeeping, Python -- is what it could at best remove)
    profiled, gemm, _ = _gemm_seconds(arms["vmap"])
    result = {"model": args.model, "d": d, "layers": layers, "prompts": len(prompts),
              "threads": torch.get_num_threads(), "seconds": secs,
              "prompts_per_s": {k: round(len(prompts) / v, 3) for k, v in secs.items()},
              "speedup_vmap_over_batched": round(secs["batched"] / secs["vmap"], 2),
              "max_abs_diff_vmap_vs_batched": diff, **workers,
              "gemm_floor": {"profiled_vmap_s": round(profiled, 2), "gemm_s": round(gemm, 2),
                             # of the unprofiled time: the profiler slows vmap's many small
                             # ops far more than its matrix products
                             "gemm_share_of_vmap": round(gemm / secs["vmap"], 3),
                             "batched_over_gemm_floor": round(secs["batched"] / gemm, 2)}}
    if args.exact:
        few = prompts[: args.exact]
        f32 = {m: fit_jlens(backend.model, backend.tokenizer, few, layers, method=m, workers=1)
               for m in ("batched", "vmap")}
        backend.model.double()
        ref = fit_jlens(backend.model, backend.tokenizer, few, layers, method="batched",
                        workers=1)
        backend.model.float()
        result["exact_prompts"] = len(few)
        result["max_abs_err_vs_float64"] = {
            m: max(float(np.max(np.abs(f32[m][x] - ref[x]))) for x in layers) for m in f32}
    return result


def _plain_generate(backend, prompts: list[str], batch: int) -> tuple[float, list[str]]:
    """Plain ``transformers`` greedy generation: left padding, prompts in the given order,
    no log-probs kept, the same model object (issue 29's baseline)."""
    import torch

    from fks.generate.prompts import encode_prompt

    tok, model = backend.tokenizer, backend.model
    cap = backend.generation.max_prompt_len
    started, texts = time.perf_counter(), []
    for i in range(0, len(prompts), batch):
        ids, mask = backend._pad_batch([encode_prompt(tok, p, cap)[0]
                                        for p in prompts[i:i + batch]])
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                                 num_beams=1, max_new_tokens=24, eos_token_id=backend.eos_ids,
                                 pad_token_id=tok.pad_token_id)
        for row in out[:, ids.shape[1]:].tolist():
            stop = next((k for k, t in enumerate(row) if t in set(backend.eos_ids)), len(row))
            texts.append(tok.decode(row[:stop], skip_special_tokens=True))
    return time.perf_counter() - started, texts


def bench_jlens_stage(args: argparse.Namespace) -> dict:
    """The J-Lens fit as issue 29 found it against the fit ``fks run`` makes now, one run.

    ``issue``: the ``batched`` method over the stratified sample of ``--before`` prompts (256,
    the default then), one stream; ``now``: the default method (``vmap``) over
    :data:`fks.hidden.jlens.JLENS_PROMPTS` (128) with the default workers (:mod:`fks.workers`).
    Both float32, the same model and window layers, each prompt sample drawn as the stage
    draws it. The matrices differ by the prompt
    count, not only by rounding: the count is justified by J's convergence against a
    1,024-prompt fit (``bench/bench_jlens_convergence.py``), the method by ``jlens`` above.
    """
    import torch

    from fks.configs import load_configs
    from fks.generate.prompts import build_prompt
    from fks.hidden.capture import model_dims
    from fks.hidden.cli import parse_layers
    from fks.hidden.jlens import JLENS_PROMPTS, fit_jlens

    backend = _backend(args.model, "float32")
    n_layers, _ = model_dims(backend.model)
    layers = parse_layers("window", n_layers, load_configs().metrics.layer_window_min_frac)
    # (method, prompts, workers): the fit ran one stream; fks run's now runs the
    # default workers (fks.workers: 2 on a CPU with 2+ threads)
    arms = {"issue": ("batched", args.before, 1), "now": ("vmap", JLENS_PROMPTS, None)}
    fit_jlens(backend.model, backend.tokenizer,
              [build_prompt(q) for q in _queries(args.benchmark, 1)], layers)  # warm-up
    secs = {}
    for name, (method, n, workers) in arms.items():
        prompts = [build_prompt(q) for q in _queries(args.benchmark, n)]
        started = time.perf_counter()
        fit_jlens(backend.model, backend.tokenizer, prompts, layers, method=method,
                  workers=workers)
        secs[name] = round(time.perf_counter() - started, 1)
    return {"model": args.model, "layers": layers, "threads": torch.get_num_threads(),
            "arms": {k: {"method": m, "prompts": n, "workers": w}
                     for k, (m, n, w) in arms.items()},
            "seconds": secs, "now_over_issue": round(secs["issue"] / secs["now"], 2)}


#: the profiler's names for dense matrix products on CPU (oneDNN and BLAS paths alike)
GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_mkldnn_linear",
            "mkldnn::_linear_pointwise", "aten::mkldnn_rnn_layer")


def _gemm_seconds(fn) -> tuple[float, float, float]:
    """Run ``fn()`` under ``torch.profiler``: ``(wall s, s inside matrix products, their FLOPs)``.

    The matrix products' own (self) time summed over :data:`GEMM_OPS`. The profiler times an
    op on the thread that calls it, from its start to its end, while the op's intra-op threads
    work in parallel: so this is wall time, not CPU time. Everything else -- attention, norms,
    activations, copies, Python -- is what an implementation could at best remove: ``wall /
    gemm`` bounds its speed-up. The FLOPs are the profiler's count (``with_flops``: 2·m·n·k
    per product) over the same ops.
    """
    wall, events = _profiled(fn, with_flops=True)
    events = [e for e in events if e.key in GEMM_OPS]
    gemm = sum(e.self_cpu_time_total for e in events) / 1e6
    return wall, gemm, float(sum(e.flops for e in events))


def _profiled(fn, with_flops: bool = False) -> tuple[float, list]:
    """Run ``fn()`` under ``torch.profiler`` (CPU): ``(wall s, the profiler's per-op averages)``."""
    from torch.profiler import ProfilerActivity, profile

    started = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU], with_flops=with_flops) as prof:
        fn()
    return time.perf_counter() - started, prof.key_averages()


#: the profiler's names for scaled dot-product attention on CPU (every SDPA backend)
ATTENTION_OPS = ("aten::scaled_dot_product_attention",)
#: the record_function label :func:`_required_seconds` puts around the per-step log-prob kernel
LOGPROB_LABEL = "fks::chosen_logprobs"


def _required_seconds(fn) -> dict:
    """Run ``fn()`` (an fks generation) under ``torch.profiler``; split its time by what it is.

    ``gemm_s``: the matrix products (:data:`GEMM_OPS`, self time); ``logprob_s``: the per-step
    log-prob kernel (:func:`fks.generate.backends.hf.chosen_logprobs`: the argmax and the
    logsumexp over the vocabulary that the protocol's ``answer_logprobs`` need);
    ``attention_s``: attention (:data:`ATTENTION_OPS`, total time). The three are the work any
    implementation of the same answers and log-probs does; norms, activations, rotary, cache
    copies and Python are what it could remove. Wall seconds, as in :func:`_gemm_seconds`.
    """
    import torch

    import fks.generate.backends.hf as hf

    kernel = hf.chosen_logprobs

    def labelled(scores):
        with torch.profiler.record_function(LOGPROB_LABEL):
            return kernel(scores)

    hf.chosen_logprobs = labelled
    try:
        wall, events = _profiled(fn)
    finally:
        hf.chosen_logprobs = kernel
    gemm = sum(e.self_cpu_time_total for e in events if e.key in GEMM_OPS) / 1e6
    attention = sum(e.cpu_time_total for e in events if e.key in ATTENTION_OPS) / 1e6
    logprob = sum(e.cpu_time_total for e in events if e.key == LOGPROB_LABEL) / 1e6
    return {"profiled_s": round(wall, 2), "gemm_s": round(gemm, 2),
            "logprob_s": round(logprob, 2), "attention_s": round(attention, 2),
            "required_s": round(gemm + logprob + attention, 2)}


def _peak_gflops(dtype, repeats: int = 5) -> dict:
    """The machine's matrix-product rate as torch reaches it: best of ``repeats`` over shapes.

    Square 2048 products and the transformer shapes of a batch of prompts (4,096 rows against
    a 640 x 2,048 weight, both ways), in ``dtype``, on torch's current thread count. The best
    of these is the rate the hardware limit below divides by: no implementation of the same
    products on these cores computes them faster than torch's own best shape does.
    """
    import torch

    shapes = [(2048, 2048, 2048), (4096, 640, 2048), (4096, 2048, 640)]
    rates = {}
    for m, k, n in shapes:
        a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
        torch.mm(a, b)
        best = min(_timed(lambda a=a, b=b: torch.mm(a, b)) for _ in range(repeats))
        rates[f"{m}x{k}x{n}"] = round(2 * m * k * n / best / 1e9, 1)
    return {"dtype": str(dtype).replace("torch.", ""), "threads": torch.get_num_threads(),
            "gflops_by_shape": rates, "peak_gflops": max(rates.values())}


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _hardware_bound(flops: float, peak: dict, baseline_s: float, name: str) -> dict:
    """``baseline_s`` against the seconds ``flops`` of matrix products take at ``peak``."""
    at_peak = flops / (peak["peak_gflops"] * 1e9)
    return {"gemm_tflop": round(flops / 1e12, 3), "peak": peak,
            "gemm_seconds_at_peak": round(at_peak, 2),
            f"{name}_over_peak_bound": round(baseline_s / at_peak, 2)}


def bench_generate(args: argparse.Namespace) -> dict:
    """fks's HF backend against plain ``transformers`` on the same main queries, one process.

    Arms (model loaded once, load excluded everywhere), interleaved over ``--repeats``, best
    time of each, at each of ``--batches``:

    * ``fks``: :meth:`HFBackend.generate` at its defaults (its own greedy loop, issue 29) on
      batches formed from the length-sorted queries, as :func:`fks.generate.runner.generate_run`
      does, through the runner's :func:`~fks.generate.runner.batch_outputs` (on a CPU with 2+
      threads: 2 worker threads, one batch each);
    * ``fks_stock_linear`` (``--stock``): the same with torch's own linear layers, without
      the oneDNN-packed weights (:mod:`fks.generate.backends.packed`);
    * ``fks_one_worker`` (``--workers``): the same with one batch at a time (before workers);
    * ``fks_transformers_loop`` (``--loops``): the same backend through ``transformers``'
      ``generate`` (``FKS_DECODE=transformers``, the loop before issue 29's own), one worker;
    * ``fks_eager`` (``--eager``): the eager log-prob kernel (``FKS_COMPILE=0``);
    * ``plain``: left-padded ``model.generate``, the prompts in the order given (no sorting),
      with torch's own linear layers.

    Then the matrix-product floor: one more one-worker ``fks`` pass at fks's default batch
    (``--default-batch``, 64 as ``fks run``/``fks generate``; else the last of ``--batches``) under
    ``torch.profiler``; the seconds inside matrix products are a floor for any implementation
    that computes the same products (``plain_best_over_gemm_floor`` bounds the speed-up over
    plain's best batch that removing everything else could reach). Then the float32 bar:
    fks's answers at its default batch against plain transformers one prompt at a time on the
    first ``--bar`` prompts.

    ``hardware_limit``: the profiled pass's matrix-product FLOPs over the best rate torch's
    products reach on these cores (:func:`_peak_gflops`); plain's best batch over those seconds
    bounds the speed-up of any implementation that computes the same products.

    ``required_work`` (:func:`_required_seconds`, the same profiled pass): the products, the
    log-prob kernel and attention; plain's best over the products at the machine's best rate
    plus the other two is the most any implementation of the same answers and log-probs can
    gain over plain, with every other operation at zero cost.
    """
    from fks.generate.backends.packed import stock_linears
    from fks.generate.prompts import build_prompt
    from fks.generate.runner import length_sorted

    backend = _backend(args.model, args.dtype)
    queries = _queries(args.benchmark, args.n)
    prompts = [build_prompt(q) for q in queries]
    # fks's runner forms its batches from the length-sorted queries (generate_run)
    by_length = [build_prompt(q) for q in length_sorted(queries)]
    back = {p: i for i, p in enumerate(by_length)}
    # (arm, FKS_COMPILE, FKS_DECODE, workers: None = the backend's default)
    arms = [("fks", "1", "fks", None),
            *((("fks_stock_linear", "1", "fks", None),) if args.stock else ()),
            *((("fks_one_worker", "1", "fks", 1),) if args.workers else ()),
            *((("fks_transformers_loop", "1", "transformers", 1),) if args.loops else ()),
            *((("fks_eager", "0", "fks", None),) if args.eager else ())]
    best: dict[str, float] = {}
    texts: dict[str, list[str]] = {}
    backend.generate(by_length[:8], max_new_tokens=24)  # compiles the log-prob kernel
    for _ in range(args.repeats):
        for batch in args.batches:
            for arm, compile_env, loop, workers in arms:
                os.environ["FKS_COMPILE"], os.environ["FKS_DECODE"] = compile_env, loop
                with stock_linears() if arm == "fks_stock_linear" else contextlib.nullcontext():
                    secs, _, out = _generate(backend, by_length, batch, workers)
                out = [out[back[p]] for p in prompts]
                best[f"{arm}_b{batch}"] = min(best.get(f"{arm}_b{batch}", secs), secs)
                texts[f"{arm}_b{batch}"] = out
            os.environ["FKS_COMPILE"], os.environ["FKS_DECODE"] = "1", "fks"
            with stock_linears():  # plain transformers: torch's own linear layers
                secs, out = _plain_generate(backend, prompts, batch)
            best[f"plain_b{batch}"] = min(best.get(f"plain_b{batch}", secs), secs)
            texts[f"plain_b{batch}"] = out
    default = args.default_batch if args.default_batch in args.batches else args.batches[-1]
    plain_best = min(v for k, v in best.items() if k.startswith("plain"))
    fks_default = best[f"fks_b{default}"]
    # one worker: the profiler's seconds are then wall seconds
    required = _required_seconds(lambda: _generate(backend, by_length, default, 1))
    profiled, gemm = required["profiled_s"], required["gemm_s"]
    with stock_linears():  # the profiler counts FLOPs of aten's products, not oneDNN's op
        _, _, flops = _gemm_seconds(lambda: _generate(backend, by_length, default, 1))
    peak = _peak_gflops(next(backend.model.parameters()).dtype)
    bar_fks = texts[f"fks_b{default}"][: args.bar]
    with stock_linears():
        _, single = _plain_generate(backend, prompts[: args.bar], 1)
    n_equal = sum(a == b for a, b in zip(bar_fks, single, strict=True))
    eager = best.get(f"fks_eager_b{default}")
    hf_loop = best.get(f"fks_transformers_loop_b{default}")
    one = best.get(f"fks_one_worker_b{default}")
    stock = best.get(f"fks_stock_linear_b{default}")
    kernels = backend.describe()["kernels"]
    return {"model": args.model, "dtype": backend.dtype, "queries": len(prompts),
            "default_batch": default,
            "threads": kernels["threads"], "logprob_kernel": kernels["logprob_kernel"],
            "decode_loop": kernels["decode_loop"], "linear": kernels["linear"],
            "workers": backend.workers,
            "seconds_best_of": {k: round(v, 2) for k, v in best.items()},
            "fks_default_over_plain_best": round(plain_best / fks_default, 2),
            **({"fks_loop_over_transformers_loop": round(hf_loop / fks_default, 2)}
               if hf_loop else {}),
            **({"workers_over_one_worker": round(one / fks_default, 2),
                "fks_one_worker_over_plain_best": round(plain_best / one, 2)} if one else {}),
            **({"packed_over_stock_linear": round(stock / fks_default, 2),
                "fks_stock_linear_over_plain_best": round(plain_best / stock, 2)}
               if stock else {}),
            **({"fks_compiled_over_eager_kernel": round(eager / fks_default, 2)}
               if eager else {}),
            "gemm_floor": {"profiled_fks_s": round(profiled, 2), "gemm_s": round(gemm, 2),
                           "gemm_share_of_fks": round(gemm / fks_default, 3),
                           "plain_best_over_gemm_floor": round(plain_best / gemm, 2)},
            # the hardware's limit: fks's matrix products (the same ones plain computes, less
            # its padding) at the best rate torch reaches on these cores; plain's best over
            # that bounds the speed-up of ANY implementation of the same products
            "hardware_limit": _hardware_bound(flops, peak, plain_best, "plain_best"),
            # what any implementation of the same answers and log-probs must compute: the
            # products at the machine's best rate, plus the log-prob kernel and attention as
            # fks runs them; plain's best over that bounds the speed-up even with every
            # norm, activation, copy and Python line at zero cost
            "required_work": {**required, "plain_best_over_required": round(
                plain_best / required["required_s"], 2),
                "plain_best_over_products_at_peak_plus_logprob_attention": round(
                    plain_best / (flops / (peak["peak_gflops"] * 1e9) + required["logprob_s"]
                                  + required["attention_s"]), 2)},
            "answers_equal_to_plain_one_at_a_time": f"{n_equal} of {len(single)}",
            "answers_equal_fks_to_plain_same_batch": {
                f"b{b}": sum(x == y for x, y in zip(texts[f"fks_b{b}"], texts[f"plain_b{b}"],
                                                    strict=True)) for b in args.batches},
            "answers_equal_across_fks_batches": sum(
                len(set(col)) == 1 for col in zip(*(texts[f"fks_b{b}"] for b in args.batches),
                                                  strict=True))}


def bench_profile(args: argparse.Namespace) -> dict:
    """Where fks's generation time goes, on ``--n`` main queries at the default batch (issue 29).

    One process, the model loaded once (load excluded), fks's length-sorted batches, one
    untimed warm-up batch. Hooks time every forward of the model; the first forward of each
    ``generate`` call is the prefill, the others are decode steps; fks's log-prob processor is
    timed on its own; the rest of the wall time is Python overhead (the greedy loop,
    tokenisation, padding, decoding the text). Padding: the share of prefill positions that are
    padding, and the share of decode rows already past their EOS (computed, never read; 0 with
    fks's own loop, which drops a row at its EOS, unless ``FKS_DECODE=transformers``).
    """
    import torch

    from fks.generate.backends import hf as hf_mod
    from fks.generate.prompts import build_prompt, encode_prompt
    from fks.generate.runner import length_sorted

    backend = _backend(args.model, args.dtype)
    tok, model = backend.tokenizer, backend.model
    prompts = [build_prompt(q) for q in length_sorted(_queries(args.benchmark, args.n))]
    clock: dict[str, float] = {"forward_prefill": 0.0, "forward_decode": 0.0, "logprobs": 0.0}
    state = {"calls": 0, "t": 0.0, "fed": 0}

    def pre(_module, _args, kwargs):
        state["t"] = time.perf_counter()
        if state["calls"]:
            state["fed"] += int(kwargs["input_ids"].shape[0])

    def post(_module, _args, _out):
        part = "forward_prefill" if state["calls"] == 0 else "forward_decode"
        clock[part] += time.perf_counter() - state["t"]
        state["calls"] += 1

    original = hf_mod.chosen_logprobs

    def timed(scores):
        t = time.perf_counter()
        out = original(scores)
        clock["logprobs"] += time.perf_counter() - t
        return out

    h1 = model.register_forward_pre_hook(pre, with_kwargs=True)
    h2 = model.register_forward_hook(post)
    hf_mod.chosen_logprobs = timed
    batch = args.batch_size
    try:
        backend.generate(prompts[:batch], max_new_tokens=24)  # warm-up, untimed
        for k in clock:
            clock[k] = 0.0
        # prompt lengths counted before the clock starts (the backend tokenises them again)
        cap = backend.generation.max_prompt_len
        lengths = [len(encode_prompt(tok, p, cap)[0]) for p in prompts]
        real = sum(lengths)
        pad = sum(len(c) * max(c) - sum(c) for c in
                  (lengths[i:i + batch] for i in range(0, len(prompts), batch)))
        needed = tokens = 0
        state["fed"] = 0
        started = time.perf_counter()
        for i in range(0, len(prompts), batch):
            chunk = prompts[i:i + batch]
            state["calls"] = 0
            outs = backend.generate(chunk, max_new_tokens=24)
            tokens += sum(o.n_generated_tokens or 0 for o in outs)
            # decode forwards a row needs: one per token after the first, its EOS not fed
            needed += sum((o.n_generated_tokens or 0) if o.finish_reason == "stop" else 23
                          for o in outs)
        wall = time.perf_counter() - started
    finally:
        h1.remove()
        h2.remove()
        hf_mod.chosen_logprobs = original
    inside = clock["forward_prefill"] + clock["forward_decode"] + clock["logprobs"]
    share = {k: round(v / wall, 3) for k, v in clock.items()}
    share["python_overhead"] = round((wall - inside) / wall, 3)
    return {"model": args.model, "dtype": str(backend.dtype), "threads": torch.get_num_threads(),
            "queries": len(prompts), "batch": batch, "wall_s": round(wall, 2),
            "generated_tokens": tokens, "tokens_per_s": round(tokens / wall, 1),
            "prompt_tokens": real, "prompt_tokens_per_s_prefill":
                round(real / clock["forward_prefill"], 1) if clock["forward_prefill"] else None,
            "share_of_wall": share,
            "prefill_padding_share": round(pad / (pad + real), 3),
            "decode_loop": backend.describe()["kernels"]["decode_loop"],
            "decode_rows_past_eos_share": round((state["fed"] - needed) / state["fed"], 3)
            if state["fed"] else None}


def bench_logprobs(args: argparse.Namespace) -> dict:
    """The per-step log-prob kernel alone on random ``(batch, vocab)`` float32 logits (issue 29).

    Eager (``max`` then ``torch.logsumexp``: three passes) against the compiled fused pass
    (:func:`fks.generate.backends.hf._fused_chosen`), interleaved, best of ``--repeats``, the
    compile timed apart; both arms' error against a float64 reference, and the argmax agreement.
    """
    import torch

    from fks.generate.backends import hf

    torch.manual_seed(0)
    x = torch.randn(args.batch_size, args.vocab) * 4
    out: dict[str, float] = {}
    with torch.inference_mode():
        t = time.perf_counter()
        hf._fused_chosen(x)
        out["compile_and_first_call_s"] = round(time.perf_counter() - t, 2)
        best = {"eager": float("inf"), "fused": float("inf")}
        for _ in range(args.repeats):
            for name, fn in (("eager", hf._eager_chosen), ("fused", hf._fused_chosen)):
                t = time.perf_counter()
                fn(x)
                best[name] = min(best[name], time.perf_counter() - t)
        ref = x.double().max(-1).values - torch.logsumexp(x.double(), -1)
        (e, te), (f, tf) = hf._eager_chosen(x), hf._fused_chosen(x)
    return {"batch": args.batch_size, "vocab": args.vocab, "threads": torch.get_num_threads(),
            **out, "ms_per_step": {k: round(v * 1000, 2) for k, v in best.items()},
            "fused_over_eager": round(best["eager"] / best["fused"], 2),
            "max_abs_error_vs_float64": {"eager": float((e.double() - ref).abs().max()),
                                         "fused": float((f.double() - ref).abs().max())},
            "argmax_equal": bool(torch.equal(te, tf)),
            "kernel": hf.logprob_kernel(args.vocab)}


def _pool_plan(args: argparse.Namespace):
    """The backend, its stored layers and the extraction plan of ``--benchmark``'s main
    queries (the reference pool a ``--limit`` run extracts), for the extract benches."""
    from fks.configs import load_configs
    from fks.data import load_benchmark
    from fks.hidden.capture import model_dims
    from fks.hidden.cli import parse_layers
    from fks.hidden.extract import plan_extraction

    backend = _backend(args.model, args.dtype)
    n_layers, _ = model_dims(backend.model)
    layers = parse_layers(args.layers, n_layers, load_configs().metrics.layer_window_min_frac)
    plan = plan_extraction(load_benchmark(args.benchmark), backend.model, backend.tokenizer,
                           model_name=args.model, layers=layers)
    return backend, layers, plan


def bench_extract(args: argparse.Namespace) -> dict:
    """The extract stage's forward passes on a sample of the reference pool, one process.

    ``--n`` main queries of ``--benchmark`` (the parent benchmark a ``--limit`` run's pool
    covers) drawn with seed 0, the pool's window layers (``--layers all``: the run's own store),
    batches as :func:`fks.hidden.extract.extract_hidden` forms them (``--batch-size``, 64 as
    ``fks run``). Arms, interleaved, best of ``--repeats``: ``stop_early`` (the default since
    stop 42: the pass ends after the highest stored block), ``full_forward`` (every block, the
    final norm and the last position's unembedding, as before) and ``stop_early_stock_linear``
    (torch's own linear layers instead of the oneDNN-packed weights); all three must give the
    same bytes. Then the stop-early arm under the profiler: the matrix products' share of its
    time and the hardware's limit (their FLOPs at the best rate torch reaches on these cores),
    and the whole pool's seconds at the measured rate.
    """
    import numpy as np

    from fks.generate.backends.packed import stock_linears
    from fks.hidden.capture import QueryEndCapture
    from fks.hidden.extract import forward_query_end, pad_batch, plan_batches

    backend, layers, plan = _pool_plan(args)
    model, tok = backend.model, backend.tokenizer
    lengths = [len(ids) for ids, _ in plan.encoded]
    pick = np.sort(np.random.default_rng(0).choice(len(lengths), min(args.n, len(lengths)),
                                                   replace=False))
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    batches = [pick[b] for b in plan_batches([lengths[i] for i in pick], args.batch_size)]

    slot = {int(i): k for k, i in enumerate(pick)}  # pool row -> row of the sample's arrays

    def run(stop: bool) -> dict[int, np.ndarray]:
        out = {x: np.zeros((len(pick), plan.d_model), np.float32) for x in layers}
        with QueryEndCapture(model, layers, stop_early=stop) as capture:
            for rows in batches:
                ids, mask = pad_batch([plan.encoded[i][0] for i in rows], pad, "left")
                at = [slot[int(i)] for i in rows]
                for x, states in forward_query_end(model, capture, ids, mask).items():
                    out[x][at] = states
        return out

    best: dict[str, float] = {}
    states = {}
    run(True)  # warm-up
    for _ in range(args.repeats):
        for arm, stop in (("stop_early", True), ("full_forward", False),
                          ("stop_early_stock_linear", True)):
            started = time.perf_counter()
            with stock_linears() if arm.endswith("stock_linear") else contextlib.nullcontext():
                states[arm] = run(stop)
            best[arm] = min(best.get(arm, 1e9), time.perf_counter() - started)
    same = {arm: all(np.array_equal(states["stop_early"][x], states[arm][x]) for x in layers)
            for arm in ("full_forward", "stop_early_stock_linear")}
    profiled, gemm, _ = _gemm_seconds(lambda: run(True))
    with stock_linears():  # the profiler counts FLOPs of aten's products, not oneDNN's op
        _, _, flops = _gemm_seconds(lambda: run(True))
    peak = _peak_gflops(next(model.parameters()).dtype)
    rate = len(pick) / best["stop_early"]
    return {"model": args.model, "dtype": backend.dtype, "layers": layers, "rows": len(pick),
            "pool_rows": len(lengths), "batch_size": args.batch_size,
            "prompt_tokens": int(sum(lengths[i] for i in pick)),
            "seconds_best_of": {k: round(v, 2) for k, v in best.items()},
            "rows_per_s": {k: round(len(pick) / v, 1) for k, v in best.items()},
            "stop_early_over_full_forward": round(best["full_forward"] / best["stop_early"], 2),
            "packed_over_stock_linear": round(best["stop_early_stock_linear"]
                                              / best["stop_early"], 2),
            "states_identical_to_stop_early": same,
            "pool_seconds_at_this_rate": round(len(lengths) / rate, 1),
            "gemm_floor": {"profiled_s": round(profiled, 2), "gemm_s": round(gemm, 2),
                           # both under the profiler, which slows the small ops the most
                           "gemm_share_of_profiled": round(gemm / profiled, 3)},
            "hardware_limit": _hardware_bound(flops, peak, best["stop_early"], "stop_early")}


def bench_prefixes(args: argparse.Namespace) -> dict:
    """Shared prompt prefixes against whole prompts, on the first ``--n`` pool rows in file order.

    File order keeps a relation's facts together, as the whole pool does, so the rows share
    prefixes as they would there (a random sample would share far fewer). Each arm is
    ``min_share[:levels]`` (``0``: whole prompts) through the extract stage's own schedule
    (:func:`fks.hidden.extract.plan_steps`), interleaved, best of ``--repeats``. Against the
    whole-prompt arm: each layer's smallest cosine and mean ``1 - cos``, beside the same for
    ``--noise`` rows forwarded one at a time (the rounding a batch's composition already
    brings).
    """
    import numpy as np

    from fks.hidden import extract as ex
    from fks.hidden.capture import QueryEndCapture

    backend, layers, full = _pool_plan(args)
    model, tok = backend.model, backend.tokenizer
    n = min(args.n, len(full.rows))
    plan = ex.ExtractionPlan(full.queries[:n], full.encoded[:n], full.rows[:n], layers,
                             full.d_model, full.identity)
    lengths = [len(ids) for ids, _ in plan.encoded]
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0

    class Rows:  # the store writer's interface, in memory
        def __init__(self) -> None:
            self.done = np.zeros(n, dtype=bool)
            self.out = {x: np.zeros((n, plan.d_model), np.float32) for x in layers}

        def write(self, rows, states) -> None:
            for x, v in states.items():
                self.out[x][rows] = v
            self.done[rows] = True

    def run(arm: str, batch_size: int = args.batch_size, only=None) -> tuple[dict, int]:
        share, _, levels = arm.partition(":")
        prefixes = (ex.plan_prefixes([ids for ids, _ in plan.encoded], int(share),
                                     int(levels or 1)) if int(share) > 1 else None)
        rows = Rows()
        with QueryEndCapture(model, layers, stop_early=True) as capture:
            for step in ex.plan_steps(lengths, batch_size, prefixes):
                if only is not None:
                    step = ex.ExtractionStep(step.prefix_len, step.prefixes,
                                             [b for b in step.batches if np.isin(b, only).all()])
                ex._run_step(model, capture, rows, plan, prefixes, step, pad, "left",
                             lambda: None)
        return rows.out, sum(lengths) - (prefixes.saved_tokens if prefixes else 0)

    def agreement(a: dict, b: dict, rows) -> dict:
        worst, mean = 1.0, []
        for x in layers:
            u, v = a[x][rows].astype(np.float64), b[x][rows].astype(np.float64)
            cos = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
            worst, mean = min(worst, float(cos.min())), mean + [float((1 - cos).mean())]
        return {"min_cos": round(worst, 7), "mean_1_minus_cos": float(np.mean(mean))}

    arms = ["0", *[a for a in args.arms if a != "0"]]
    best: dict[str, float] = {}
    states, tokens = {}, {}
    run(arms[-1])  # warm-up
    for _ in range(args.repeats):
        for arm in arms:
            started = time.perf_counter()
            states[arm], tokens[arm] = run(arm)
            best[arm] = min(best.get(arm, 1e9), time.perf_counter() - started)
    noise = np.sort(np.random.default_rng(0).choice(n, min(args.noise, n), replace=False))
    one_at_a_time, _ = run("0", batch_size=1, only=noise)
    return {"model": args.model, "dtype": backend.dtype, "layers": layers, "rows": n,
            "batch_size": args.batch_size, "prompt_tokens": int(sum(lengths)),
            "tokens_forwarded": tokens,
            "seconds_best_of": {k: round(v, 2) for k, v in best.items()},
            "whole_over_arm": {k: round(best["0"] / v, 3) for k, v in best.items()},
            "against_whole_prompts": {k: agreement(states["0"], v, np.arange(n))
                                      for k, v in states.items() if k != "0"},
            "batch_1_against_batch": {"rows": len(noise), **agreement(
                states["0"], one_at_a_time, noise)}}


def bench_stages(args: argparse.Namespace) -> dict:
    table = {}
    for run in args.runs:
        manifest = json.loads((Path(run) / "evaluation_manifest.json").read_text())
        stages = manifest.get("pipeline", {}).get("stages", {})
        wall = {k: v.get("seconds") for k, v in stages.items()}
        cpu = {k: v.get("cpu_seconds") for k, v in stages.items()}
        table[run] = {k: {"wall_s": wall[k], "cpu_s": cpu[k],
                          "cores_busy": round(cpu[k] / wall[k], 2) if cpu[k] and wall[k]
                          else None} for k in stages}
        table[run]["total"] = {"wall_s": round(sum(v or 0 for v in wall.values()), 1),
                               "cpu_s": round(sum(v or 0 for v in cpu.values()), 1)}
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("dtype")
    p.add_argument("--model", default="gemma-3-270m")
    p.add_argument("--benchmark", required=True)
    p.add_argument("--n", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--repeats", type=int, default=1)
    p = sub.add_parser("jlens")
    p.add_argument("--model", default="gemma-3-270m")
    p.add_argument("--benchmark", required=True)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--exact", type=int, default=0,
                   help="also compare both float32 arms with a float64 fit on N prompts")
    p.add_argument("--warmup", action="store_true", help="fit one prompt untimed first")
    p.add_argument("--workers", action="store_true",
                   help="also fit vmap with fks's default workers (2 threads on a 2-core CPU)")
    p = sub.add_parser("jlens-stage")
    p.add_argument("--model", default="gemma-3-270m")
    p.add_argument("--benchmark", required=True)
    p.add_argument("--before", type=int, default=256,
                   help="prompts of the fit issue 29 found (the default then)")
    p = sub.add_parser("generate")
    p.add_argument("--model", default="gemma-3-270m")
    p.add_argument("--benchmark", required=True)
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--batches", type=int, nargs="+", default=[16, 64])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--bar", type=int, default=24)
    p.add_argument("--eager", action="store_true",
                   help="also time fks with the eager log-prob kernel (FKS_COMPILE=0)")
    p.add_argument("--default-batch", type=int, default=64,
                   help="fks's default batch (fks run / fks generate): the arm compared with "
                        "plain's best and profiled for the floor")
    p.add_argument("--workers", action="store_true",
                   help="also time fks with one worker (the default is the backend's: 2 on a "
                   "CPU with 2+ threads)")
    p.add_argument("--stock", action="store_true",
                   help="also time fks with torch's own linear layers (no oneDNN packing)")
    p.add_argument("--loops", action="store_true",
                   help="also time fks through transformers' generate (FKS_DECODE=transformers)")
    p = sub.add_parser("logprobs")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--vocab", type=int, default=262144)
    p.add_argument("--repeats", type=int, default=20)
    p = sub.add_parser("profile")
    p.add_argument("--model", default="gemma-3-270m")
    p.add_argument("--benchmark", required=True)
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--dtype", default="auto")
    p.add_argument("--batch-size", type=int, default=64)
    for name, n, repeats in (("extract", 2048, 2), ("prefixes", 6000, 1)):  # pool rows
        p = sub.add_parser(name)
        p.add_argument("--model", default="gemma-3-270m")
        p.add_argument("--benchmark", required=True)
        p.add_argument("--n", type=int, default=n)
        p.add_argument("--dtype", default="bfloat16")
        p.add_argument("--layers", default="window",
                       help="window (the pool's) or all (the run's)")
        p.add_argument("--batch-size", type=int, default=64)
        p.add_argument("--repeats", type=int, default=repeats)
    p.add_argument("--arms", nargs="+", default=["4", "2:2"],
                   help="min_share[:levels] per arm (0, whole prompts, always runs)")
    p.add_argument("--noise", type=int, default=300, help="rows forwarded one at a time")
    p = sub.add_parser("stages")
    p.add_argument("runs", nargs="+")
    args = parser.parse_args()
    fn = {"dtype": bench_dtype, "jlens": bench_jlens, "jlens-stage": bench_jlens_stage,
          "generate": bench_generate, "extract": bench_extract, "prefixes": bench_prefixes,
          "profile": bench_profile, "stages": bench_stages, "logprobs": bench_logprobs}[args.cmd]
    print(json.dumps(fn(args), indent=2))


if __name__ == "__main__":
    main()
