"""Counts of labels.jsonl per model, split and kind (for README.md and the report)."""

import collections
import json

rows = [json.loads(x) for x in open("labels.jsonl", encoding="utf-8")]
REQ = [
    "query_id",
    "fact_id",
    "model",
    "relation",
    "condition_family",
    "language",
    "split",
    "raw_answer",
    "kind",
    "extracted_answer",
    "cluster_id",
    "correctness",
    "note",
]
assert all(list(r) == REQ for r in rows), "field set"
facts = {(r["model"], r["fact_id"]) for r in rows}
print(f"{len(rows)} answers, {len(facts)} facts, {len({r['relation'] for r in rows})} relations")
COLS = [
    "model",
    "split",
    "facts",
    "answers",
    "ANSWER",
    "ABSTAIN",
    "MULTIPLE",
    "UNPARSEABLE",
    "CORRECT",
    "INCORRECT",
    "non-en",
]
print("| " + " | ".join(COLS) + " |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for m in sorted({r["model"] for r in rows}):
    for s in ("dev", "test", None):
        rs = [r for r in rows if r["model"] == m and (s is None or r["split"] == s)]
        k = collections.Counter(r["kind"] for r in rs)
        c = collections.Counter(r["correctness"] for r in rs)
        nf = len({r["fact_id"] for r in rs})
        non_en = sum(r["language"] != "en" for r in rs)
        cells = [
            m,
            s or "all",
            nf,
            len(rs),
            k["ANSWER"],
            k["ABSTAIN"],
            k["MULTIPLE"],
            k["UNPARSEABLE"],
            c["CORRECT"],
            c["INCORRECT"],
            non_en,
        ]
        print("| " + " | ".join(str(x) for x in cells) + " |")
print("families:", dict(collections.Counter(r["condition_family"] for r in rows)))
print("languages:", dict(collections.Counter(r["language"] for r in rows)))
print("relations:", dict(collections.Counter(r["relation"] for r in rows)))
for s in ("dev", "test"):
    print(
        s,
        "facts:",
        " ".join(sorted({r["fact_id"][-4:] + r["model"][0] for r in rows if r["split"] == s})),
    )
