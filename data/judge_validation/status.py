"""Which facts are fully generated (all main-family queries) per model, with split."""

import os

from choose_facts import SPLIT
from show import RUNS, load

for model in RUNS:
    if not os.path.exists(f"{RUNS[model]}/generations.jsonl"):
        print(model, "no generations yet")
        continue
    queries, gens = load(model)
    done = {}
    for q in queries.values():
        if q["use_for_main_forward"]:
            done.setdefault(q["fact_id"], []).append(q["query_id"] in gens)
    full = [f for f, v in sorted(done.items()) if all(v)]
    print(
        model,
        len(gens),
        "rows;",
        "complete:",
        " ".join(f"{f[-4:]}{SPLIT[model][f][0]}" for f in full),
    )
