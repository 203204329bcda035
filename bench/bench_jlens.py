"""J-Lens fitting: prefix-cached, batched reverse mode vs the one-backward-per-coordinate loop.

Both arms fit ``fit_jlens`` on the same prompts of a tiny random Llama (float32, cpu) and must
give the same matrices; the goal is batched >= 10x faster. Run by hand:

    /root/venv/bin/python bench/bench_jlens.py [--hidden 128] [--n-layers 6] [--prompts 8]

Timings are process CPU seconds and wall seconds (best of ``--repeats``, interleaved), one torch
thread by default so a shared machine disturbs them less.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

PROMPTS = [
    "Answer the following question with a short factual answer.\nQuestion: What is the capital "
    "of France?\nAnswer:",
    "The capital city of Japan is\nAnswer:",
    "La capitale de l'Allemagne est\nAnswer:",
    "Madrid is a large city. Which company manufactures Airbus A320?\nAnswer:",
    "Столица Германии —\nAnswer:",
    "法国的首都是\nAnswer:",
    "Born in 1961 in Honolulu. Reply with the name only.\nAnswer:",
    "Name a product manufactured by Airbus.\nAnswer:",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--n-layers", type=int, default=6)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--batch-rows", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from fks.hidden.jlens import fit_jlens
    from tiny_model import build_tiny_model

    torch.set_num_threads(args.threads)
    path = build_tiny_model(Path(tempfile.mkdtemp(prefix="bench_jlens_")) / "m",
                            n_layers=args.n_layers, hidden=args.hidden, n_heads=8, n_kv_heads=4,
                            intermediate=2 * args.hidden)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    tok = AutoTokenizer.from_pretrained(path)
    prompts = (PROMPTS * (1 + args.prompts // len(PROMPTS)))[: args.prompts]
    fit_jlens(model, tok, prompts[:1], batch_rows=args.batch_rows)  # warm-up

    results, wall, cpu = {}, {}, {}
    for _ in range(args.repeats):
        for method in ("batched", "loop"):
            t0, c0 = time.perf_counter(), time.process_time()
            results[method] = fit_jlens(model, tok, prompts, batch_rows=args.batch_rows,
                                        method=method)
            wall[method] = min(wall.get(method, float("inf")), time.perf_counter() - t0)
            cpu[method] = min(cpu.get(method, float("inf")), time.process_time() - c0)
    diff = max(float(np.abs(results["batched"][x] - results["loop"][x]).max())
               for x in results["loop"])
    scale = max(float(np.abs(J).max()) for J in results["loop"].values())
    n_tokens = [len(tok(p)["input_ids"]) for p in prompts]
    print(f"model: {args.n_layers} layers, d={args.hidden}; {len(prompts)} prompts of "
          f"{min(n_tokens)}-{max(n_tokens)} tokens; float32 cpu, {args.threads} thread(s); "
          f"best of {args.repeats}")
    for method in ("batched", "loop"):
        print(f"  {method:<8} cpu {cpu[method]:7.2f} s   wall {wall[method]:7.2f} s")
    speed = cpu["loop"] / cpu["batched"]
    print(f"speed-up (cpu) {speed:.1f}x  (wall {wall['loop'] / wall['batched']:.1f}x); "
          f"goal >= 10x: {'met' if speed >= 10 else 'NOT met'}")
    print(f"max |J_batched - J_loop| = {diff:.2e} (max |J| = {scale:.2f})")


if __name__ == "__main__":
    main()
