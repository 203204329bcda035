"""Fact choice and dev/test split (LABELLING_GUIDE.md §5-§6).

Reads only the benchmark slice (facts and queries), never an answer.
"""

import collections
import hashlib
import json

B = "/work/real/runs/gemma-3-270m/benchmark"
F = [json.loads(x) for x in open(f"{B}/benchmark_facts_60.jsonl", encoding="utf-8")]
Q = [json.loads(x) for x in open(f"{B}/evaluation_queries_988.jsonl", encoding="utf-8")]
n_main = collections.Counter(q["fact_id"] for q in Q if q["use_for_main_forward"])
by_rel = collections.defaultdict(list)
for f in F:
    by_rel[f["relation"]["relation_id"]].append(f)
rels = sorted(by_rel)
for r in rels:
    by_rel[r].sort(key=lambda f: (-n_main[f["fact_id"]], -len(f["languages"]), f["fact_id"]))
GEMMA, SMOL = "gemma-3-270m", "smollm2-135m-instruct"
# Plan A (written before any answer existed): 16 Gemma facts and 14 SmolLM2 facts spread over
# the 23 relations.
PLAN_A = {
    GEMMA: [by_rel[r][0]["fact_id"] for r in rels[:16]],
    SMOL: [by_rel[r][1 if r in rels[:16] else 0]["fact_id"] for r in rels[9:]],
}
# Plan B (used; LABELLING_GUIDE.md §6): the runs write facts in benchmark order at about five
# answers a minute on the shared CPUs, so Plan A's late facts could not be generated before the
# deadline. Every fact is eligible, in benchmark order, and whole facts are labelled as they are
# completed. SmolLM2's run was restarted on a 20-fact slice (the first fact of each of 20
# relations, its RUN/benchmark/benchmark_facts_20.jsonl): its facts are taken in that order.
SMOL_SLICE = "/work/real/runs/smollm2-135m-instruct/benchmark/benchmark_facts_20.jsonl"
choice = {
    GEMMA: [f["fact_id"] for f in F],
    SMOL: [json.loads(x)["fact_id"] for x in open(SMOL_SLICE, encoding="utf-8")],
}


def split_of(model):
    """Dev when the sha256 of "model/fact_id" is even as an integer, else test."""
    return {
        fid: (
            "dev"
            if int(hashlib.sha256(f"{model}/{fid}".encode()).hexdigest(), 16) % 2 == 0
            else "test"
        )
        for fid in choice[model]
    }


SPLIT = {m: split_of(m) for m in choice}
if __name__ == "__main__":
    tot = 0
    for m in PLAN_A:
        for fid in PLAN_A[m]:
            f = next(x for x in F if x["fact_id"] == fid)
            tot += n_main[fid]
            print(
                m,
                SPLIT[m][fid],
                fid,
                f["relation"]["relation_id"],
                f["subject"]["canonical"],
                "->",
                f["object"]["canonical"],
                n_main[fid],
                ",".join(f["languages"]),
            )
    print("answers", tot)
