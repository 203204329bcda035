"""Real models on CPU: bf16 against float32 generation, J-Lens passes, time per pipeline stage.

Three measurements, each within one process (ratios, never absolute goals in tests):

* ``dtype``: the same greedy queries through :class:`fks.generate.backends.hf.HFBackend` in
  float32 and in bfloat16 (both loaded through the one GGUF resolver), interleaved arms, best
  of ``--repeats``: new tokens per second of each and the share of answers that differ::

      python bench/bench_real_models.py dtype --model gemma-3-270m --benchmark B --n 32

* ``jlens``: :func:`fks.hidden.jlens.fit_jlens` on the same prompts with 512 Jacobian rows per
  backward pass (the old default; two passes for d = 640) and with d rows (one pass, the new
  default for d <= 1024); the matrices must agree. With ``--old PATH/jlens.py`` (the module of
  an older checkout, e.g. ``git show 85c4094:src/fks/hidden/jlens.py > /tmp/old_jlens.py``) the
  old code's default is a third arm (it also ran the final norm and the unembedding)::

      python bench/bench_real_models.py jlens --model gemma-3-270m --benchmark B --prompts 8

* ``stages``: the seconds per stage recorded in the ``pipeline`` section of run manifests
  (``fks run`` writes them), side by side::

      python bench/bench_real_models.py stages RUNS/before RUNS/after
"""

from __future__ import annotations

import argparse
import json
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


def _generate(backend, prompts: list[str], batch: int) -> tuple[float, int, list[str]]:
    started, tokens, texts = time.perf_counter(), 0, []
    for i in range(0, len(prompts), batch):
        outs = backend.generate(prompts[i:i + batch], max_new_tokens=24)
        tokens += sum(o.n_generated_tokens or 0 for o in outs)
        texts += [o.text for o in outs]
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
    import numpy as np

    from fks.generate.prompts import build_prompt
    from fks.hidden.capture import model_dims
    from fks.hidden.cli import parse_layers
    from fks.hidden.jlens import fit_jlens

    backend = _backend(args.model, "float32")
    n_layers, d = model_dims(backend.model)
    layers = parse_layers("window", n_layers, 0.4)
    prompts = [build_prompt(q) for q in _queries(args.benchmark, args.prompts)]
    arms = {"new_512_rows": lambda: fit_jlens(backend.model, backend.tokenizer, prompts, layers,
                                              batch_rows=512),
            f"new_{d}_rows": lambda: fit_jlens(backend.model, backend.tokenizer, prompts, layers)}
    if args.old:
        import importlib.util

        spec = importlib.util.spec_from_file_location("old_jlens", args.old)
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
        arms["old_default"] = lambda: old.fit_jlens(backend.model, backend.tokenizer, prompts,
                                                    layers)
    out, secs = {}, {}
    for name, fn in arms.items():
        fn() if name == next(iter(arms)) and args.warmup else None
        started = time.perf_counter()
        out[name] = fn()
        secs[name] = round(time.perf_counter() - started, 2)
    ref = out[f"new_{d}_rows"]
    diff = {k: max(float(np.max(np.abs(v[x] - ref[x]))) for x in layers) for k, v in out.items()}
    return {"model": args.model, "d": d, "layers": len(layers), "prompts": len(prompts),
            "seconds": secs, "max_abs_diff_vs_new_default": diff,
            "speedup_vs_first_arm": {k: round(secs[next(iter(arms))] / v, 2)
                                     for k, v in secs.items()}}


def bench_stages(args: argparse.Namespace) -> dict:
    table = {}
    for run in args.runs:
        manifest = json.loads((Path(run) / "evaluation_manifest.json").read_text())
        stages = manifest.get("pipeline", {}).get("stages", {})
        table[run] = {k: v.get("seconds") for k, v in stages.items()}
        table[run]["total"] = round(sum(v or 0 for v in table[run].values()), 1)
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
    p.add_argument("--old", default=None, help="an older jlens.py to time as a third arm")
    p.add_argument("--warmup", action="store_true", help="run the first arm once untimed")
    p = sub.add_parser("stages")
    p.add_argument("runs", nargs="+")
    args = parser.parse_args()
    fn = {"dtype": bench_dtype, "jlens": bench_jlens, "stages": bench_stages}[args.cmd]
    print(json.dumps(fn(args), indent=2))


if __name__ == "__main__":
    main()
