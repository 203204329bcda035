"""Benchmark the shared bootstrap core and the EvalHarness batch scorer (run by hand).

    /root/venv/bin/python bench/bench_harness.py [--cases 2000] [--seed 0]

1. bootstrap -- ``percentile_bootstrap`` (vectorised, chunked) against a baseline that loops
   over the 1,000 resamples in Python, on n = 1,000 values; the speed-up ratio is printed.
2. harness -- ``score_batch`` on synthetic cases spread over the eight buckets (D1, D3, D4 and
   D7 annotated), against a baseline that only validates the same records; the ratio
   (score / validate) is printed, so a busier machine can still compare.
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np

from fks.evalharness.config import BUCKET_LABELS, load_harness_config
from fks.evalharness.inputs import CaseRecord, GoldRecord
from fks.evalharness.scoring import score_batch
from fks.metrics.stats.bootstrap import percentile_bootstrap


def _timed(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench_bootstrap(seed: int) -> None:
    """Vectorised bootstrap versus a per-resample Python loop."""
    x = np.random.default_rng(seed).normal(size=1000)

    def loop() -> None:
        rng = np.random.default_rng(seed)
        reps = [x[rng.integers(0, x.size, size=x.size)].mean() for _ in range(1000)]
        np.percentile(reps, [2.5, 97.5])

    base = _timed(loop)
    fast = _timed(lambda: percentile_bootstrap(x, n_resamples=1000, seed=seed))
    print(
        f"bootstrap n=1000 B=1000: loop {base * 1e3:.1f} ms, vectorised {fast * 1e3:.1f} ms, "
        f"speed-up x{base / fast:.1f}"
    )


def _rows(rng: random.Random, k: int) -> tuple[dict, dict]:
    labels = [f"concept {j}" for j in range(8)]
    chosen = rng.sample(labels, 5)
    nodes = [{"id": f"n{j}", "label": lab} for j, lab in enumerate(chosen)]
    edges = [{"source": f"n{j}", "target": f"n{j + 1}", "edge_type": "causal"} for j in range(4)]
    gold_graph = {
        "nodes": [{"id": f"n{j}", "label": lab} for j, lab in enumerate(labels[:5])],
        "edges": edges,
        "key_patterns": [
            {
                "name": "chain",
                "nodes": [{"id": f"n{j}", "label": labels[j]} for j in range(3)],
                "edges": edges[:2],
            }
        ],
    }
    clocks = {f"M3.t{j}": rng.choice(["early", "late"]) for j in (1, 2, 5)}
    strength = rng.random()
    case = {
        "case_id": f"case-{k}",
        "result": {
            "causal_graph": {"nodes": nodes, "edges": edges},
            "phase_evidence": {"clocks": clocks, "phase_matrix": {"M3.t1": {"M3.t2": 1}}},
            "s1": {"s1_mode": ["a-far-extrapolation"], "coupling_strength": strength},
        },
    }
    gold = {
        "case_id": f"case-{k}",
        "bucket_label": BUCKET_LABELS[k % len(BUCKET_LABELS)],
        "result": {
            "causal_graph": gold_graph,
            "phase_evidence": {
                "clocks": {"M3.t1": "early", "M3.t2": "late", "M3.t5": "early"},
                "phase_matrix": {"M3.t1": {"M3.t2": 2}},
            },
            "s1": {
                "s1_mode": [rng.choice(["a-far-extrapolation", "positive-coupling"])],
                "coupling_strength": strength + rng.gauss(0, 0.2),
                "external_sources": [
                    {
                        "name": "Damodaran",
                        "url": "https://pages.stern.nyu.edu/~adamodar/",
                        "retrieved_at": "2026-01-05T00:00:00Z",
                        "key_fields": {"implied_erp": "4.6%"},
                    }
                ],
            },
        },
    }
    return case, gold


def bench_harness(n: int, seed: int) -> None:
    """score_batch versus plain record validation."""
    rng = random.Random(seed)
    rows = [_rows(rng, k) for k in range(n)]
    cfg = load_harness_config()

    def validate() -> tuple[dict, list]:
        cases = {c["case_id"]: CaseRecord.model_validate(c) for c, _ in rows}
        golds = [GoldRecord.model_validate(g) for _, g in rows]
        return cases, golds

    base = _timed(validate, repeat=1)
    cases, golds = validate()
    t0 = time.perf_counter()
    result = score_batch(cases, golds, cfg, split="dev")
    scored = time.perf_counter() - t0
    print(
        f"harness {len(result.case_scores)} dev cases of {n}: validate {base:.2f} s, "
        f"score_batch {scored:.2f} s, ratio x{scored / base:.1f}"
    )


def main() -> None:
    """Run both benchmarks."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    bench_bootstrap(args.seed)
    bench_harness(args.cases, args.seed)


if __name__ == "__main__":
    main()
