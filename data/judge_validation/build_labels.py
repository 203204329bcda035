"""Assemble labels.jsonl from the labeller's typed decisions in hand/*.txt and check them.

A decision line is `query_id | KIND | extracted | cluster | correctness | note` where the last
fields may be omitted for the special kinds, whose key and correctness follow from the kind
(LABELLING_GUIDE.md §1): `U` = UNPARSEABLE, `ABS` = ABSTAIN, `M` = MULTIPLE; an ANSWER is
`ANS | core answer as written | cluster key | C or I | note`. Lines starting with '#' are
comments. The raw answer, family, language, relation and split are copied from the run and
choose_facts.py; nothing about kind, key or correctness is inferred from the answer text. `E`
(typed for an empty answer) means UNPARSEABLE like `U`, and the script checks that such an
answer is indeed empty or whitespace only.
"""

import json
import sys
from pathlib import Path

from choose_facts import SPLIT, choice
from show import load

HERE = Path(__file__).resolve().parent
SPECIAL = {
    "U": ("UNPARSEABLE", "REVIEW_REQUIRED"),
    "E": ("UNPARSEABLE", "REVIEW_REQUIRED"),
    "ABS": ("ABSTAIN", "ABSTAIN"),
    "M": ("MULTIPLE", "AMBIGUOUS"),
}
CORR = {"C": "CORRECT", "I": "INCORRECT"}


def main() -> int:
    """Build labels.jsonl from hand/*.txt; print every problem; exit 1 if there is one."""
    rows, errors = [], []
    for path in sorted((HERE / "hand").glob("*.txt")):
        model = path.stem.split("__")[0]
        queries, gens = load(model)
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split("|")]
            qid, code = parts[0], parts[1]
            where = f"{path.name}:{n}"
            q, g = queries.get(qid), gens.get(qid)
            if q is None or g is None:
                errors.append(f"{where}: unknown or ungenerated {qid}")
                continue
            raw = g["raw_response"]
            note = ""
            if code in SPECIAL:
                kind, corr = SPECIAL[code]
                extracted, cluster = None, kind
                note = parts[2] if len(parts) > 2 else ""
                if code == "E" and raw.strip():
                    errors.append(f"{where}: typed E but answer is not empty")
            elif code == "ANS":
                kind = "ANSWER"
                extracted, cluster = parts[2], parts[3]
                corr = CORR[parts[4]]
                note = parts[5] if len(parts) > 5 else ""
                if extracted.casefold() not in raw.casefold():
                    errors.append(f"{where}: extracted {extracted!r} not found in raw answer")
            else:
                errors.append(f"{where}: bad code {code!r}")
                continue
            fid = q["fact_id"]
            if fid not in SPLIT[model]:
                errors.append(f"{where}: {fid} is not a chosen fact of {model}")
                continue
            rows.append(
                {
                    "query_id": qid,
                    "fact_id": fid,
                    "model": model,
                    "relation": q["relation"],
                    "condition_family": q["condition_family"],
                    "language": q["language"],
                    "split": SPLIT[model][fid],
                    "raw_answer": raw,
                    "kind": kind,
                    "extracted_answer": extracted,
                    "cluster_id": cluster,
                    "correctness": corr,
                    "note": note,
                }
            )
    # consistency: one label per query; whole facts; same cluster -> same correctness
    seen = {}
    for r in rows:
        k = (r["model"], r["query_id"])
        if k in seen:
            errors.append(f"duplicate label {k}")
        seen[k] = r
    by_fact = {}
    for r in rows:
        by_fact.setdefault((r["model"], r["fact_id"]), []).append(r)
    for (model, fid), rs in by_fact.items():
        queries, _ = load(model)
        want = {
            q["query_id"]
            for q in queries.values()
            if q["fact_id"] == fid and q["use_for_main_forward"]
        }
        got = {r["query_id"] for r in rs}
        if want != got:
            errors.append(f"{model} {fid}: missing {sorted(want - got)} extra {sorted(got - want)}")
        corr_of = {}
        for r in rs:
            if corr_of.setdefault(r["cluster_id"], r["correctness"]) != r["correctness"]:
                errors.append(
                    f"{model} {fid}: cluster {r['cluster_id']} has two correctness labels"
                )
    for e in errors:
        print("ERROR", e)
    rows.sort(
        key=lambda r: (
            list(choice).index(r["model"]),
            r["split"] != "dev",
            r["fact_id"],
            r["query_id"],
        )
    )
    out = HERE / "labels.jsonl"
    tmp = out.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    tmp.replace(out)
    print(f"wrote {len(rows)} rows, {len(by_fact)} facts, {len(errors)} errors")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
