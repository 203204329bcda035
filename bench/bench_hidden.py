"""Cost of storing query-end states: fused into generation vs a separate extraction pass.

Three arms on the same tiny random Llama and a replicated tiny benchmark, in one run:

* ``generate``           -- ``generate_run`` with the HF backend alone (the baseline);
* ``generate+fused``     -- the same, with :class:`fks.hidden.fused.FusedExtraction` (states
  read from generation's own prefill) and ``finish()`` (checksums, meta.json);
* ``generate+separate``  -- the baseline followed by ``extract_hidden`` (a second forward pass).

Goal: fused adds at most 15 % to generation time; a separate pass costs far more (about +100 %
was the estimate for real models). Run by hand:

    /root/venv/bin/python bench/bench_hidden.py [--copies 8] [--n-layers 8] [--hidden 256]

Each arm runs ``--repeats`` times, interleaved, and the best time is kept. Both wall-clock and
process CPU seconds are reported: on a shared machine the CPU time (one torch thread by
default) is the steadier figure, and the ratios use it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def _benchmark(root: Path, copies: int) -> Path:
    from conftest import tiny_benchmark_rows, write_benchmark

    facts, queries = tiny_benchmark_rows()
    rows = []
    for c in range(copies):
        for q in queries:
            rows.append({**q, "query_id": f"query_{len(rows) + 1:08d}",
                         "query": q["query"] if c == 0 else f"{q['query']} ({c})"})
    return write_benchmark(root / "bench", facts, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=8, help="benchmark replicas")
    parser.add_argument("--n-layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()

    import torch

    from fks.configs import load_configs
    from fks.data.load import load_benchmark
    from fks.generate.backends.hf import HFBackend
    from fks.generate.runner import generate_run
    from fks.hidden.extract import extract_hidden
    from fks.hidden.fused import FusedExtraction
    from tiny_model import build_tiny_model

    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="bench_hidden_"))
    model_dir = build_tiny_model(tmp / "model", n_layers=args.n_layers, hidden=args.hidden,
                                 n_heads=8, n_kv_heads=4, intermediate=2 * args.hidden)
    bench = load_benchmark(_benchmark(tmp, args.copies))
    configs = load_configs()
    backend = HFBackend(str(model_dir), generation=configs.models.generation, device="cpu")
    n_main = sum(q.use_for_main_forward for q in bench.queries)

    def gen(run: Path, be) -> None:
        generate_run(bench, run, model="tiny", model_path=str(model_dir), configs=configs,
                     backend=be, batch_size=args.batch_size)

    def arm_plain(run: Path) -> None:
        gen(run, backend)

    def arm_fused(run: Path) -> None:
        fused = FusedExtraction(run, bench, backend, model_name="tiny")
        gen(run, fused.backend)
        fused.finish(batch_size=args.batch_size)

    def arm_separate(run: Path) -> None:
        gen(run, backend)
        extract_hidden(run, bench, backend.model, backend.tokenizer, model_name="tiny",
                       batch_size=args.batch_size)

    arms = {"generate": arm_plain, "generate+fused": arm_fused,
            "generate+separate": arm_separate}
    wall = {name: float("inf") for name in arms}
    cpu = dict(wall)
    arm_plain(tmp / "warmup")
    for rep in range(args.repeats):
        for name, fn in arms.items():
            run = tmp / f"{name}_{rep}"
            t0, c0 = time.perf_counter(), time.process_time()
            fn(run)
            wall[name] = min(wall[name], time.perf_counter() - t0)
            cpu[name] = min(cpu[name], time.process_time() - c0)
            shutil.rmtree(run)
    print(f"model: {args.n_layers} layers, d={args.hidden}; {len(bench.queries)} queries "
          f"({n_main} stored), batch {args.batch_size}, 24 new tokens, cpu, "
          f"{torch.get_num_threads()} thread(s), best of {args.repeats}")
    for name in arms:
        dc = 100 * (cpu[name] / cpu["generate"] - 1)
        dw = 100 * (wall[name] / wall["generate"] - 1)
        print(f"  {name:<18} cpu {cpu[name]:7.2f} s ({dc:+6.1f} %)"
              f"   wall {wall[name]:7.2f} s ({dw:+6.1f} %)")
    fused_pct = 100 * (cpu["generate+fused"] / cpu["generate"] - 1)
    print(f"goal fused <= +15 % (cpu): {'met' if fused_pct <= 15 else 'NOT met'} "
          f"({fused_pct:+.1f} %)")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
