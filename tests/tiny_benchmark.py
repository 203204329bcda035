"""The tiny hand-written benchmark: 4 facts, 2 relations, all eight families, valid.

Importable from any test module (``tests/`` is on pytest's ``pythonpath``):
``from tiny_benchmark import tiny_benchmark_rows, write_benchmark``. Never import from
``conftest``: several ``conftest.py`` files exist and the name is ambiguous.
"""

from __future__ import annotations

import json
from pathlib import Path

from fks.configs import load_configs

__all__ = ["FACTS", "ANCHOR", "tiny_benchmark_rows", "write_benchmark"]

FACTS = [
    # fact_id, relation, subject (en, id), object (en, id), object aliases
    ("fact_000001", "capital", ("France", "Q142"), ("Paris", "Q90"), ["Paris", "巴黎", "Париж"]),
    (
        "fact_000002",
        "capital",
        ("Germany", "Q183"),
        ("Berlin", "Q64"),
        ["Berlin", "柏林", "Берлин"],
    ),
    (
        "fact_000003",
        "capital",
        ("Japan", "Q17"),
        ("Tokyo", "Q1490"),
        ["Tokyo", "東京", "东京", "Токио"],
    ),
    ("fact_000004", "manufacturer", ("Airbus A320", "Q6475"), ("Airbus", "Q67"), ["Airbus"]),
]

ANCHOR = {
    "capital": "What is the capital of {s}?",
    "manufacturer": "Which company manufactures {s}?",
}


def _fact_row(fid, rel, subj, obj, aliases):
    return {
        "fact_id": fid,
        "subject": {"canonical": subj[0], "entity_id": subj[1], "aliases": [subj[0]]},
        "object": {"canonical": obj[0], "entity_id": obj[1], "aliases": aliases},
        "relation": {
            "relation_id": rel,
            "source_relations": ["P36" if rel == "capital" else "P176"],
            "direction": "forward",
        },
        "qualification_question": ANCHOR[rel].format(s=subj[0]),
        "sources": ["test"],
        "source_records": [],
        "is_functional": True,
        "answer_type": "city" if rel == "capital" else "organization",
        "answer_granularity": "entity",
        "answer_in_subject_surface": obj[0].lower() in subj[0].lower(),
        "spec_6_2_flag": rel == "manufacturer",
    }


def tiny_benchmark_rows() -> tuple[list[dict], list[dict]]:
    """Facts and queries of the tiny benchmark (plain dicts, valid against the schema)."""
    cfg = load_configs().eval_conditions
    facts = [_fact_row(*f) for f in FACTS]
    queries: list[dict] = []

    def add(fact, family, variant, query, language="en", options=None, gold=None):
        spec = cfg.families[family]
        gold_c, gold_a = gold or (fact["object"]["canonical"], fact["object"]["aliases"])
        queries.append(
            {
                "query_id": f"query_{len(queries) + 1:08d}",
                "fact_id": fact["fact_id"],
                "relation": fact["relation"]["relation_id"],
                "condition_family": family,
                "variant_id": variant,
                "language": language,
                "query": query,
                "target_slot": spec.target_slot,
                "gold_canonical": gold_c,
                "gold_aliases": gold_a,
                "is_assisted": spec.is_assisted,
                "is_well_posed": spec.is_well_posed,
                **spec.flags(),
                "answer_in_subject_surface": fact["answer_in_subject_surface"],
                **({"options": options} if options is not None else {}),
            }
        )

    for f in facts:
        s = f["subject"]["canonical"]
        o = f["object"]["canonical"]
        add(f, "anchor", "anchor", f["qualification_question"])
        capital = f["relation"]["relation_id"] == "capital"
        add(
            f,
            "paraphrase",
            "para_01",
            f"The capital city of {s} is" if capital else f"{s} is produced by",
        )
        add(f, "paraphrase", "para_02", f"{s}'s capital is" if capital else f"{s} is made by")
        add(f, "format", "fmt_short", f"{f['qualification_question']} Reply with the name only.")
        if f["fact_id"] != "fact_000004":  # ragged: one fact lacks context
            add(f, "context", "ctx_01", f"Madrid is a large city. {f['qualification_question']}")
        if f["relation"]["relation_id"] == "capital":  # ragged: one fact lacks multilingual
            add(f, "multilingual", "ml_fr", f"La capitale de {s} est", language="fr")
        others = [x["object"]["canonical"] for x in facts if x["object"]["canonical"] != o][:2]
        add(f, "recognition", "rec_01", f["qualification_question"], options=sorted([o, *others]))
    # reverse: Paris -> France is unique; Airbus -> Airbus A320 only one product here too
    add(
        facts[0],
        "reverse",
        "rev_01",
        "Paris is the capital of which place?",
        gold=("France", ["France"]),
    )
    add(
        facts[3],
        "reverse_illposed",
        "revill_01",
        "Name a product manufactured by Airbus.",
        gold=("Airbus A320", ["Airbus A320"]),
    )
    return facts, queries


def write_benchmark(root: Path, facts: list[dict], queries: list[dict]) -> Path:
    """Write rows as a benchmark directory (file names carry the row counts)."""
    root.mkdir(parents=True, exist_ok=True)
    for old in root.glob("*.jsonl"):
        old.unlink()
    with (root / f"benchmark_facts_{len(facts)}.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in facts)
    with (root / f"evaluation_queries_{len(queries)}.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in queries)
    return root
