"""Assemble labels_dev.jsonl / labels_test.jsonl of the fresh set from hand/<split>/*.txt.

The same decision-line format and checks as ../build_labels.py (one label per main query of
each labelled fact, whole facts, the core answer occurring in the raw text, one correctness
per cluster within a fact); the raw answer and metadata are copied from the runs.
Usage: python build_fresh_labels.py [dev|test|all] [RUNS_ROOT=/work/real/fresh] [LABEL_DIR=.]

LABEL_DIR (default: this folder) holds ``hand/`` and receives ``labels_<split>.jsonl``; the rows'
split is ``<LABEL_DIR name>_<split>`` (``fresh_test`` here, ``fresh2_test`` for ``../fresh2``).
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPLITS = {"all": ("dev", "test")}.get(sys.argv[1] if len(sys.argv) > 1 else "all",
                                     (sys.argv[1],) if len(sys.argv) > 1 else ())
ROOT = Path(sys.argv[2] if len(sys.argv) > 2 else "/work/real/fresh")
if len(sys.argv) > 3:
    HERE = Path(sys.argv[3]).resolve()
SPECIAL = {"U": ("UNPARSEABLE", "REVIEW_REQUIRED"), "E": ("UNPARSEABLE", "REVIEW_REQUIRED"),
           "ABS": ("ABSTAIN", "ABSTAIN"), "M": ("MULTIPLE", "AMBIGUOUS")}
CORR = {"C": "CORRECT", "I": "INCORRECT"}


def load(model):
    (qfile,) = (ROOT / "benchmark").glob("evaluation_queries_*.jsonl")
    queries = {q["query_id"]: q for q in map(json.loads, open(qfile, encoding="utf-8"))}
    gens = {g["query_id"]: g for g in map(
        json.loads, open(ROOT / "runs" / model / "generations.jsonl", encoding="utf-8"))}
    return queries, gens


def main() -> int:
    errors, out = [], {"dev": [], "test": []}
    cache = {}
    for split in SPLITS:
        for path in sorted((HERE / "hand" / split).glob("*.txt")):
            model, fid = path.stem.split("__")
            queries, gens = cache.setdefault(model, load(model))
            rows = []
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip() or line.startswith("#"):
                    continue
                parts = [p.strip() for p in line.split("|")]
                qid, code, where = parts[0], parts[1], f"{path.name}:{n}"
                q, g = queries.get(qid), gens.get(qid)
                if q is None or g is None or q["fact_id"] != fid:
                    errors.append(f"{where}: unknown, ungenerated or other-fact {qid}")
                    continue
                raw, note = g["raw_response"], ""
                if code in SPECIAL:
                    kind, corr = SPECIAL[code]
                    extracted, cluster = None, kind
                    note = parts[2] if len(parts) > 2 else ""
                    if code == "E" and raw.strip():
                        errors.append(f"{where}: typed E but the answer is not empty")
                elif code == "ANS" and len(parts) >= 5 and parts[4] in CORR:
                    kind, extracted, cluster, corr = "ANSWER", parts[2], parts[3], CORR[parts[4]]
                    note = parts[5] if len(parts) > 5 else ""
                    if extracted.casefold() not in raw.casefold():
                        errors.append(f"{where}: {extracted!r} not in the raw answer")
                else:
                    errors.append(f"{where}: bad decision line")
                    continue
                rows.append({"query_id": qid, "fact_id": fid, "model": model,
                             "relation": q["relation"], "condition_family": q["condition_family"],
                             "language": q["language"], "split": f"{HERE.name}_{split}",
                             "raw_answer": raw, "kind": kind, "extracted_answer": extracted,
                             "cluster_id": cluster, "correctness": corr, "note": note})
            want = {q["query_id"] for q in queries.values()
                    if q["fact_id"] == fid and q["use_for_main_forward"]}
            got = [r["query_id"] for r in rows]
            if set(got) != want or len(got) != len(set(got)):
                errors.append(f"{path.name}: labels do not cover the fact's main queries once")
            corr_of = {}
            for r in rows:
                if corr_of.setdefault(r["cluster_id"], r["correctness"]) != r["correctness"]:
                    errors.append(f"{path.name}: cluster {r['cluster_id']} has two correctness")
            out[split] += rows
    for e in errors:
        print("ERROR", e)
    for split, rows in out.items():
        if rows:
            dst = HERE / f"labels_{split}.jsonl"
            dst.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                           encoding="utf-8")
            print(f"{dst.name}: {len(rows)} rows, "
                  f"{len({(r['model'], r['fact_id']) for r in rows})} facts")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
