"""Choose a FRESH set of facts for judge-validation labelling (reads benchmarks only, no answers).

Usage: python choose_facts.py [OUT_JSON]   (default /work/real/fresh/choice.json)

Inputs (facts and queries only; no generation, score or judge file is read):
* CURRENT: the full build `fks data build --source /work/shared/data --out /work/real/bench_full`
  (fks commit of /work/main, 22 relations, 2,600 facts).
* OLD: the build the existing labels (data/judge_validation/labels.jsonl) were made on,
  rebuilt with fks at commit 85c4094e82c7 (`git archive 85c4094e82c7 src`, same command, same
  seed) into /work/real/fresh/old_build/bench (23 relations incl. named_after). Checked here:
  every one of the 546 label rows matches it by query_id -> (fact_id, relation, family,
  language), and each labelled fact's main-query count equals its label count.

Exclusions (a fact of CURRENT is excluded when any applies):
 E1 it is among the first 3 facts of its relation in round-robin order (fks `--limit` order,
    fks.pipeline._context.limit_facts), i.e. one of the first 3 facts of its relation;
 E2 it is in limit_facts(CURRENT, 300) (used by another experiment);
 E3 its (relation, subject canonical, object canonical) equals that of a fact of OLD that is a
    labelled fact (labels.jsonl), or in OLD's limit_facts(60) or limit_facts(20) slices (the
    slices of the earlier labelling runs), or in OLD's limit_facts(300) (extra caution).
Ranking within each relation, over the remaining facts: facts whose main-family queries
(use_for_main_forward) cover all five families (anchor, paraphrase, format, context,
multilingual) first, then more languages among those queries, then benchmark (file) order.
TEST = rank 1 of every relation, DEV = rank 2 of every relation.
"""

from __future__ import annotations

import collections
import json
import sys
import tempfile
from pathlib import Path

from fks.data.load import load_benchmark
from fks.pipeline._context import limit_facts

CURRENT = "/work/real/bench_full"
OLD = "/work/real/fresh/old_build/bench"
LABELS = "/work/main/data/judge_validation/labels.jsonl"
MAIN_FAMILIES = ("anchor", "paraphrase", "format", "context", "multilingual")


def triple(f) -> tuple[str, str, str]:
    return (f.relation.relation_id, f.subject.canonical, f.object.canonical)


def limit_ids(bench, n: int) -> set[str]:
    """Fact ids of fks's own limit_facts(bench, n) (written to a temporary folder and read back)."""
    with tempfile.TemporaryDirectory() as tmp:
        sub = load_benchmark(limit_facts(bench, n, Path(tmp) / "b"))
        return {f.fact_id for f in sub.facts}


def old_triples() -> tuple[set, dict]:
    old = load_benchmark(OLD)
    by_q = {q.query_id: q for q in old.queries}
    labels = [json.loads(x) for x in open(LABELS, encoding="utf-8")]
    for row in labels:  # the rebuilt OLD build is the labels' build
        q = by_q[row["query_id"]]
        assert (q.fact_id, q.relation, q.condition_family, q.language) == (
            row["fact_id"], row["relation"], row["condition_family"], row["language"]), row
    labelled = {row["fact_id"] for row in labels}
    ids = labelled | limit_ids(old, 60) | limit_ids(old, 20) | limit_ids(old, 300)
    trip = {triple(f) for f in old.facts if f.fact_id in ids}
    info = {"old_labelled_facts": len(labelled), "old_fact_ids_excluded_by_triple": len(ids),
            "old_triples": len(trip)}
    return trip, info


def choose():
    bench = load_benchmark(CURRENT)
    order = {f.fact_id: i for i, f in enumerate(bench.facts)}
    by_rel: dict[str, list] = collections.defaultdict(list)
    for f in bench.facts:
        by_rel[f.relation.relation_id].append(f)
    e1 = {f.fact_id for fs in by_rel.values() for f in fs[:3]}
    e2 = limit_ids(bench, 300)
    trip, info = old_triples()
    e3 = {f.fact_id for f in bench.facts if triple(f) in trip}
    excluded = e1 | e2 | e3
    fams = collections.defaultdict(set)
    langs = collections.defaultdict(set)
    for q in bench.queries:
        if q.use_for_main_forward:
            fams[q.fact_id].add(q.condition_family)
            langs[q.fact_id].add(q.language)

    def key(f):
        return (not set(MAIN_FAMILIES) <= fams[f.fact_id], -len(langs[f.fact_id]),
                order[f.fact_id])

    test, dev, detail = [], [], []
    for rel, fs in by_rel.items():  # relations in file order
        ranked = sorted((f for f in fs if f.fact_id not in excluded), key=key)
        for split, f in (("test", ranked[0]), ("dev", ranked[1])):
            (test if split == "test" else dev).append(f.fact_id)
            detail.append({"split": split, "fact_id": f.fact_id, "relation": rel,
                           "subject": f.subject.canonical, "object": f.object.canonical,
                           "families": sorted(fams[f.fact_id]),
                           "languages": sorted(langs[f.fact_id]),
                           "rank_in_relation": order[f.fact_id] - order[fs[0].fact_id]})
    stats = {"relations": len(by_rel), "excluded_E1_first3": len(e1),
             "excluded_E2_limit300": len(e2), "excluded_E3_old_triples": len(e3),
             "excluded_total": len(excluded), **info}
    return test, dev, detail, stats


RULE = (__doc__.split("Exclusions")[1]).strip()
RULE = ("CURRENT = the full build /work/real/bench_full (fks data build --source /work/shared/data, "
        "fks at /work/main HEAD); OLD = the build of the existing labels, rebuilt with fks "
        "85c4094e82c7 (checked against all 546 label rows). Exclusions " + RULE)

if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/real/fresh/choice.json")
    test, dev, detail, stats = choose()
    assert len(set(test) | set(dev)) == len(test) + len(dev) == 2 * stats["relations"]
    out.write_text(json.dumps({"test": test, "dev": dev, "rule": " ".join(RULE.split()),
                               "current_build": CURRENT, "old_build": OLD, "stats": stats,
                               "facts": detail}, ensure_ascii=False, indent=1) + "\n",
                   encoding="utf-8")
    for d in detail:
        print(d["split"], d["fact_id"], d["relation"], d["subject"], "->", d["object"],
              len(d["families"]), ",".join(d["languages"]), "pos", d["rank_in_relation"])
    print(json.dumps(stats))
