"""Write the benchmark subset of the chosen facts (all their queries, every family, rows unchanged).

Usage: python write_subset.py [CHOICE_JSON] [OUT_DIR]
(defaults /work/real/fresh/choice.json, /work/real/fresh/benchmark)

Named and laid out the way fks.pipeline._context.limit_facts writes RUN/benchmark/
(benchmark_facts_<n>.jsonl + evaluation_queries_<n>.jsonl, rows in the benchmark's order, no
manifest), but each row is the full build's line copied byte for byte: limit_facts re-serialises
the loaded models, which adds default fields (e.g. relation.inverse_of: null), so it is not
reused for the writing. The facts/queries to keep are selected with fks.data.load.load_benchmark,
and the written folder is loaded back with it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fks.data.load import load_benchmark

CURRENT = "/work/real/bench_full"

if __name__ == "__main__":
    choice = json.loads(Path(sys.argv[1] if len(sys.argv) > 1 else
                             "/work/real/fresh/choice.json").read_text(encoding="utf-8"))
    out = Path(sys.argv[2] if len(sys.argv) > 2 else "/work/real/fresh/benchmark")
    keep = set(choice["test"]) | set(choice["dev"])
    bench = load_benchmark(CURRENT)
    facts = [f for f in bench.facts if f.fact_id in keep]
    queries = [q for q in bench.queries if q.fact_id in keep]
    assert {f.fact_id for f in facts} == keep
    out.mkdir(parents=True, exist_ok=True)
    for stale in [*out.glob("benchmark_facts_*.jsonl"), *out.glob("evaluation_queries_*.jsonl")]:
        stale.unlink()
    for pattern, n, key in (("benchmark_facts_*.jsonl", len(facts), "fact_id"),
                            ("evaluation_queries_*.jsonl", len(queries), "fact_id")):
        (src,) = Path(CURRENT).glob(pattern)
        lines = [line for line in open(src, encoding="utf-8", newline="")
                 if json.loads(line)[key] in keep]
        assert len(lines) == n, (pattern, len(lines), n)
        dst = out / pattern.replace("*", str(n))
        tmp = dst.with_suffix(".tmp")
        tmp.write_text("".join(lines), encoding="utf-8", newline="")
        tmp.replace(dst)
    back = load_benchmark(out)
    assert [f.fact_id for f in back.facts] == [f.fact_id for f in facts]
    assert [q.query_id for q in back.queries] == [q.query_id for q in queries]
    main = sum(q.use_for_main_forward for q in queries)
    print(f"{len(facts)} facts, {len(queries)} queries ({main} main-family) -> {out}")
