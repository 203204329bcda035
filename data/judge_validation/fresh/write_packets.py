"""Write one labelling packet per (model, fact), modelled on data/judge_validation/show.py.

Usage: python write_packets.py [FRESH_DIR]   (default /work/real/fresh)

Reads FRESH/choice.json, FRESH/benchmark (queries) and FRESH/runs/<model>/generations.jsonl
(raw_response only: no scored.jsonl or judged.jsonl exists or is read). For each main-family
query (use_for_main_forward true) of the fact, in benchmark order: query_id,
condition_family/variant_id, [language], the exact prompt (fks.generate.prompts.build_prompt,
repr) and the exact raw continuation (repr of raw_response). The gold canonical name and aliases
come last, after every answer. Writes FRESH/packets/<split>/<model>__<fact_id>.txt and
FRESH/packets/INDEX.txt (counts per split, model, relation and family).
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

from fks.generate.prompts import build_prompt

MODELS = ("gemma-3-270m", "smollm2-135m-instruct")
FAMILIES = ("anchor", "paraphrase", "format", "context", "multilingual")


def main(fresh: Path) -> None:
    choice = json.loads((fresh / "choice.json").read_text(encoding="utf-8"))
    split_of = {fid: s for s in ("test", "dev") for fid in choice[s]}
    (qfile,) = (fresh / "benchmark").glob("evaluation_queries_*.jsonl")
    queries = [json.loads(x) for x in open(qfile, encoding="utf-8")]
    main_q = [q for q in queries if q["use_for_main_forward"]]
    assert {q["condition_family"] for q in main_q} <= set(FAMILIES)
    out = fresh / "packets"
    counts = collections.Counter()
    missing = collections.Counter()
    not_ok = collections.Counter()
    files = 0
    for model in MODELS:
        gens = {}
        for line in open(fresh / "runs" / model / "generations.jsonl", encoding="utf-8"):
            g = json.loads(line)
            gens[g["query_id"]] = g
        for fid in choice["test"] + choice["dev"]:
            split = split_of[fid]
            qs = [q for q in main_q if q["fact_id"] == fid]
            lines = ["=" * 30 + f" {model} {fid} {qs[0]['relation']} ({len(qs)} main queries)"]
            for q in qs:
                g = gens.get(q["query_id"])
                lines.append(f"--- {q['query_id']} {q['condition_family']}/{q['variant_id']}"
                             f" [{q['language']}]")
                lines.append("PROMPT: " + repr(build_prompt(q)))
                if g is None:
                    lines.append("RAW:    <<< NOT GENERATED >>>")
                    missing[model] += 1
                    continue
                if g.get("status") != "ok":
                    lines.append(f"STATUS: {g.get('status')} {g.get('error')!r}")
                    not_ok[model] += 1
                lines.append("RAW:    " + repr(g["raw_response"]))
                counts[(split, model, q["relation"], q["condition_family"])] += 1
            lines.append("GOLD: " + repr(qs[0]["gold_canonical"]) + " "
                         + repr(qs[0]["gold_aliases"]))
            path = out / split / f"{model}__{fid}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            files += 1
    write_index(out, counts, missing, not_ok, files, choice)
    print(f"{files} packets; answers {sum(counts.values())}; missing {dict(missing)}; "
          f"not ok {dict(not_ok)}")


def write_index(out: Path, counts, missing, not_ok, files: int, choice) -> None:
    rows = [f"Packets: {files} files (model x fact) under {out}/<split>/<model>__<fact_id>.txt",
            f"Facts: test {len(choice['test'])}, dev {len(choice['dev'])}",
            f"Main-family answers not generated: {dict(missing) or 0}; "
            f"rows with status != ok: {dict(not_ok) or 0}", ""]

    def table(title, keyf):
        c = collections.Counter()
        for k, n in counts.items():
            c[keyf(k)] += n
        rows.append(f"## {title}")
        rows.extend(f"{' | '.join(key)} | {n}" for key, n in sorted(c.items()))
        rows.append("")

    table("answers per split | model", lambda k: (k[0], k[1]))
    table("answers per split | model | family", lambda k: (k[0], k[1], k[3]))
    table("answers per split | model | relation", lambda k: (k[0], k[1], k[2]))
    table("answers per model | family", lambda k: (k[1], k[3]))
    rows.append("## facts")
    for split in ("test", "dev"):
        rows.extend(f"{split} {fid}" for fid in choice[split])
    (out / "INDEX.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/work/real/fresh"))
