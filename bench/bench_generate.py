"""Throughput of the batched HF backend against a one-query-at-a-time loop (same run, same model).

Builds the tiny random Llama of ``tests/tiny_model.py`` and a synthetic benchmark of ``--queries``
queries (all eight families, prompts of varied length), then times

* **batched**: ``fks.generate.runner.generate_run`` with ``--batch-size`` (file writes included);
* **single**: ``backend.generate([prompt])`` for each prompt in turn.

Both arms run in the same process on the same machine, so the ratio is meaningful even on a
shared machine. Goal: batched >= 5x the single loop.

    python bench/bench_generate.py --queries 1024 --batch-size 64
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fks.configs import load_configs  # noqa: E402
from fks.data.load import load_benchmark  # noqa: E402
from fks.generate.backends import make_backend  # noqa: E402
from fks.generate.prompts import build_prompt  # noqa: E402
from fks.generate.runner import generate_run  # noqa: E402
from fks.io import atomic_write_jsonl, read_jsonl  # noqa: E402
from tiny_model import build_tiny_model  # noqa: E402

COUNTRIES = ["France", "Germany", "Japan", "Spain", "Russia", "China", "Italy", "Peru"]


def synthetic_benchmark(root: Path, n_queries: int) -> Path:
    """Write a schema-valid benchmark with ``n_queries`` queries (8 per fact, all families)."""
    cfg = load_configs().eval_conditions
    facts, queries = [], []
    for i in range(n_queries // 8 + 1):
        fid = f"fact_{i + 1:06d}"
        subj = f"{COUNTRIES[i % len(COUNTRIES)]} {i}"
        facts.append({
            "fact_id": fid, "subject": {"canonical": subj}, "object": {"canonical": f"City {i}"},
            "relation": {"relation_id": "capital"}, "qualification_question": f"Capital of {subj}?",
            "is_functional": True, "answer_type": "city", "answer_in_subject_surface": False,
        })
        texts = {
            "anchor": f"What is the capital of {subj}?",
            "paraphrase": f"The capital city of {subj} is",
            "format": f"What is the capital of {subj}? Reply with the name only.",
            "context": "Madrid is a large city with many museums. " * (1 + i % 6)
            + f"What is the capital of {subj}?",
            "multilingual": f"La capitale de {subj} est",
            "reverse": f"City {i} is the capital of which country?",
            "recognition": f"What is the capital of {subj}?",
            "reverse_illposed": f"Name a country whose capital is City {i}.",
        }
        for fam, text in texts.items():
            spec = cfg.families[fam]
            queries.append({
                "query_id": f"query_{len(queries) + 1:08d}", "fact_id": fid,
                "relation": "capital", "condition_family": fam, "variant_id": fam,
                "language": "fr" if fam == "multilingual" else "en", "query": text,
                "target_slot": spec.target_slot, "gold_canonical": f"City {i}",
                "gold_aliases": [f"City {i}"], "is_assisted": spec.is_assisted,
                "is_well_posed": spec.is_well_posed, **spec.flags(),
                "answer_in_subject_surface": False,
                **({"options": [f"City {i}", "Paris", "Lima"]} if fam == "recognition" else {}),
            })
    queries = queries[:n_queries]
    used = {q["fact_id"] for q in queries}
    facts = [f for f in facts if f["fact_id"] in used]
    root.mkdir(parents=True, exist_ok=True)
    atomic_write_jsonl(root / f"benchmark_facts_{len(facts)}.jsonl", facts)
    atomic_write_jsonl(root / f"evaluation_queries_{len(queries)}.jsonl", queries)
    return root


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--queries", type=int, default=1024)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (0: torch default; 1 avoids thread thrash on a shared CPU)")
    args = ap.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="fks_bench_gen_"))
    model_dir = build_tiny_model(work / "model")
    bench_dir = synthetic_benchmark(work / "bench", args.queries)
    configs = load_configs()
    backend = make_backend("hf", str(model_dir), configs=configs, device="cpu")
    max_new = configs.models.generation.max_new_tokens
    prompts = [build_prompt(q) for q in load_benchmark(bench_dir).queries]
    backend.generate(prompts[:4], max_new_tokens=max_new)  # warm-up

    t0 = time.perf_counter()
    generate_run(bench_dir, work / "run", model="tiny", model_path=str(model_dir),
                 configs=configs, backend=backend, batch_size=args.batch_size)
    t_batched = time.perf_counter() - t0
    tok_batched = sum(r["n_generated_tokens"] for r in read_jsonl(work / "run/generations.jsonl"))

    t0 = time.perf_counter()
    tok_single = 0
    for p in prompts:
        tok_single += backend.generate([p], max_new_tokens=max_new)[0].n_generated_tokens or 0
    t_single = time.perf_counter() - t0

    print(f"queries={len(prompts)} batch_size={args.batch_size} "
          f"torch_threads={torch.get_num_threads()} max_new_tokens={max_new}")
    print(f"batched : {t_batched:8.2f} s  {len(prompts) / t_batched:8.1f} q/s  "
          f"{tok_batched / t_batched:9.1f} tok/s")
    print(f"single  : {t_single:8.2f} s  {len(prompts) / t_single:8.1f} q/s  "
          f"{tok_single / t_single:9.1f} tok/s")
    print(f"speed-up (batched / single, queries per second): {t_single / t_batched:.2f}x "
          f"(goal >= 5x); same tokens generated: {tok_batched == tok_single}")


if __name__ == "__main__":
    main()
