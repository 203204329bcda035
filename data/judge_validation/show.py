"""Print the main-family answers of one model's facts for the labeller to read.

Usage: python show.py MODEL FACT_ID [FACT_ID ...]. Shows prompt, family, language and the exact
raw continuation; the gold is printed last, after the answers (kind/key are decided first).
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from fks.generate.prompts import build_prompt  # noqa: E402

RUNS = {
    "gemma-3-270m": "/work/real/runs/gemma-3-270m",
    "smollm2-135m-instruct": "/work/real/runs/smollm2-135m-instruct",
}


def load(model):
    """Return (queries by id, generation records by id) of one model's run."""
    run = RUNS[model]
    queries = {}
    (qfile,) = Path(f"{run}/benchmark").glob("evaluation_queries_*.jsonl")
    for line in open(qfile, encoding="utf-8"):
        q = json.loads(line)
        queries[q["query_id"]] = q
    gens = {}
    for line in open(f"{run}/generations.jsonl", encoding="utf-8"):
        g = json.loads(line)
        gens[g["query_id"]] = g
    return queries, gens


if __name__ == "__main__":
    model, fids = sys.argv[1], sys.argv[2:]
    queries, gens = load(model)
    for fid in fids:
        qs = [q for q in queries.values() if q["fact_id"] == fid and q["use_for_main_forward"]]
        print("=" * 30, model, fid, qs[0]["relation"], f"({len(qs)} main queries)")
        for q in qs:
            g = gens.get(q["query_id"])
            print(
                f"--- {q['query_id']} {q['condition_family']}/{q['variant_id']} [{q['language']}]"
            )
            print("PROMPT:", repr(build_prompt(q)))
            print("RAW:   ", repr(g["raw_response"]) if g else "<<< NOT GENERATED YET >>>")
        print("GOLD:", qs[0]["gold_canonical"], qs[0]["gold_aliases"])
