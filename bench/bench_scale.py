"""Scale-out: two shards on a local Ray instance against one process (run by hand, not pytest).

Builds the tiny random Llama of ``tests/tiny_model.py`` and the embedded demo benchmark (cut to
``--facts`` facts, round-robin over its relations), then runs the sharded stages of ``fks run``
(generation and hidden-state extraction) twice, in the same session:

* **one process**: :func:`fks.pipeline.run_pipeline`, twice: torch on one thread, and on
  ``--cpus`` threads (on a busy machine, tiny matmuls often run slower on more threads, so the
  ratio is reported against the faster of the two);
* **Ray**: :func:`fks.scale.launch.launch` with ``--shards`` shards on a local Ray instance of
  ``--cpus`` CPUs (one CPU, so one torch thread, per task), merges included.

It reports both throughputs (queries per second) and their ratio, with and without Ray's
start-up (instance + worker processes importing torch), checks that the merged generations
carry the same answers as the one-process run, and prints the measured per-query costs the
README's wall-time estimate uses (prompt characters and tokens per query, share of
main-forward queries, hidden-state bytes per query and layer).

    /root/venv/bin/python bench/bench_scale.py --facts 60 --shards 2 --cpus 2

On a machine whose few cores are shared, the ratio can be below 1: two processes on two busy
cores do not run twice as fast as one process that already uses both cores for its matmuls, and
Ray's start-up is paid once per run. The gain Ray is for is across GPUs and machines, where
each shard owns its device.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import torch  # noqa: E402

from fks.configs import load_configs  # noqa: E402
from fks.data.load import load_benchmark  # noqa: E402
from fks.demo.benchmark import build_demo_benchmark  # noqa: E402
from fks.generate.prompts import build_prompt, encode_prompt  # noqa: E402
from fks.io import read_jsonl  # noqa: E402
from fks.pipeline import PipelineContext, PipelineOptions, limit_facts, run_pipeline  # noqa: E402
from fks.scale.launch import LaunchSettings, launch  # noqa: E402
from fks.scale.ray_executor import RayExecutor  # noqa: E402
from tiny_model import build_tiny_model  # noqa: E402

STAGES = ("generate", "extract")


def per_query_costs(bench_dir: Path, model_dir: Path) -> dict[str, float]:
    """Measured per-query prompt sizes of a benchmark (characters; tiny-tokenizer tokens)."""
    from transformers import AutoTokenizer

    bench = load_benchmark(bench_dir)
    tok = AutoTokenizer.from_pretrained(model_dir)
    prompts = [build_prompt(q) for q in bench.queries]
    cap = load_configs().models.generation.max_prompt_len
    tokens = [len(encode_prompt(tok, p, cap)[0]) for p in prompts]
    return {
        "queries": len(prompts),
        "chars_per_query": sum(map(len, prompts)) / len(prompts),
        "words_per_query": sum(len(p.split()) for p in prompts) / len(prompts),
        "tiny_bpe_tokens_per_query": sum(tokens) / len(tokens),
        "main_forward_share": sum(q.use_for_main_forward for q in bench.queries) / len(prompts),
    }


def one_process(ctx: PipelineContext, cpus: int) -> float:
    torch.set_num_threads(cpus)
    started = time.perf_counter()
    run_pipeline(ctx, stages=list(STAGES))
    return time.perf_counter() - started


def on_ray(ctx: PipelineContext, shards: int, cpus: int) -> tuple[float, float, dict]:
    started = time.perf_counter()
    executor = RayExecutor(num_cpus=cpus, max_retries=0)
    try:
        result = launch(ctx, LaunchSettings(shards=shards, stages=STAGES), executor)
    finally:
        executor.close()
    return time.perf_counter() - started, result.seconds["wave 1"], result.merged


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--facts", type=int, default=60)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=128, help="tiny model width")
    args = ap.parse_args()
    configs = load_configs()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = build_tiny_model(root / "model", n_layers=4, hidden=args.hidden,
                                 intermediate=2 * args.hidden)
        full = build_demo_benchmark(root / "demo", configs=configs)
        bench = limit_facts(load_benchmark(full), args.facts, root / "bench")
        costs = per_query_costs(full, model)
        opts = PipelineOptions(device="cpu", batch_size=args.batch_size)
        n = len(load_benchmark(bench).queries)

        def ctx(name: str) -> PipelineContext:
            return PipelineContext.create(runs_dir=root / "runs", model=name,
                                          model_path=str(model), benchmark=bench,
                                          configs=configs, options=opts)

        t_one1 = one_process(ctx("one"), 1)
        t_onen = one_process(ctx(f"one{args.cpus}"), args.cpus)
        t_one = min(t_one1, t_onen)
        t_ray, t_wave, merged = on_ray(ctx("ray"), args.shards, args.cpus)
        a = read_jsonl(root / "runs/one/generations.jsonl")
        b = read_jsonl(root / "runs/ray/generations.jsonl")
        same = sum(x["raw_response"] == y["raw_response"] for x, y in zip(a, b, strict=True))
        report = {
            "queries": n, "facts": args.facts, "shards": args.shards, "cpus": args.cpus,
            "one_process_1_thread_s": round(t_one1, 2),
            f"one_process_{args.cpus}_threads_s": round(t_onen, 2),
            "one_process_s": round(t_one, 2), "ray_total_s": round(t_ray, 2),
            "ray_tasks_wave_s": round(t_wave, 2),
            "one_process_q_per_s": round(n / t_one, 1),
            "ray_q_per_s_total": round(n / t_ray, 1),
            "ray_q_per_s_tasks_only": round(n / t_wave, 1),
            "ratio_ray_total_over_one": round(t_one / t_ray, 3),
            "ratio_ray_tasks_over_one": round(t_one / t_wave, 3),
            "merged": merged, "identical_answers": f"{same}/{len(a)}",
            "demo_benchmark_per_query": {k: round(v, 3) for k, v in costs.items()},
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
