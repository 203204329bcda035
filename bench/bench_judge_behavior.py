"""Benchmark the alias judge and the behavioural metrics (run by hand, not by pytest).

    /root/venv/bin/python bench/bench_judge_behavior.py [--out /tmp/fks_bench_judge] [--seed 0]

Builds a realistic synthetic run: a benchmark of 2,604 facts in 21 relations (objects shared
within a relation, aliases in six languages) with about 17 queries per fact across the eight
families (about 44,000 queries), and a ``scored.jsonl`` whose answers mix correct aliases in
several languages and phrasings, wrong known entities, unknown strings, abstentions,
multiple answers, unparseable outputs and generation errors. Then times, in this process:

* baseline -- read and validate ``scored.jsonl`` as ``ScoredRecord`` rows (a floor any
  stage that reads the run pays);
* judge    -- ``judge_run`` with the alias judge (load benchmark, read, group, cluster, mark,
  write ``judged.jsonl``, manifest);
* metrics  -- ``run_behavior_metrics`` (read ``judged.jsonl``, both readings, all figures,
  write the three ``RUN/metrics/behavioral_*`` files).

Goal: judge + metrics at most 15 s. The (judge + metrics) / baseline ratio is printed too, so a
slower or busier machine can still be compared.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from pathlib import Path

from fks.configs import load_configs

GOAL_S = 15.0
LANGS = ("en", "zh", "fr", "es", "de", "ru")
N_RELATIONS, FACTS_PER_RELATION, OBJECTS_PER_RELATION = 21, 124, 40


def _entity(rng: random.Random, qid: int, stem: str) -> dict:
    aliases = [stem, f"{stem} City", f"{stem}城", f"{stem}ville", f"{stem}grad"]
    return {"canonical": stem, "entity_id": f"Q{qid}", "aliases": aliases[: rng.randint(2, 5)]}


def build_benchmark(rng: random.Random) -> tuple[list[dict], list[dict]]:
    """Facts and queries (plain dicts valid against the schema)."""
    fams = load_configs().eval_conditions.families
    facts, queries = [], []
    qid = 1000
    for r in range(N_RELATIONS):
        rel = f"rel_{r:02d}"
        objects = []
        for o in range(OBJECTS_PER_RELATION):
            qid += 1
            objects.append(_entity(rng, qid, f"Obj{r}x{o}"))
        for i in range(FACTS_PER_RELATION):
            qid += 1
            subj = {"canonical": f"Subj{r}x{i}", "entity_id": f"Q{qid}",
                    "aliases": [f"Subj{r}x{i}"]}
            obj = objects[rng.randrange(OBJECTS_PER_RELATION)]
            fid = f"fact_{len(facts) + 1:06d}"
            facts.append({
                "fact_id": fid, "subject": subj, "object": obj,
                "relation": {"relation_id": rel, "source_relations": [f"P{r + 1}"]},
                "qualification_question": f"What is the {rel} of {subj['canonical']}?",
                "is_functional": True, "answer_type": "thing",
                "answer_in_subject_surface": rng.random() < 0.29,
            })
            plan = {"anchor": 1, "paraphrase": rng.choice((3, 4, 4, 4)), "format": 3,
                    "context": rng.choice((2, 3, 3)),
                    "multilingual": 5 if rng.random() < 0.93 else 0,
                    "recognition": 1 if rng.random() < 0.8 else 2,
                    "reverse": 1 if rng.random() < 0.1 else 0,
                    "reverse_illposed": 1 if rng.random() < 0.43 else 0}
            for fam, n in plan.items():
                spec = fams[fam]
                gold = subj if spec.target_slot == "subject" else obj
                for k in range(n):
                    queries.append({
                        "query_id": f"query_{len(queries) + 1:08d}", "fact_id": fid,
                        "relation": rel, "condition_family": fam, "variant_id": f"{fam}_{k}",
                        "language": LANGS[k + 1] if fam == "multilingual" else "en",
                        "query": f"{fam} {k}: {subj['canonical']}?",
                        "target_slot": spec.target_slot, "gold_canonical": gold["canonical"],
                        "gold_aliases": gold["aliases"], "is_assisted": spec.is_assisted,
                        "is_well_posed": spec.is_well_posed, **spec.flags(),
                        "answer_in_subject_surface": facts[-1]["answer_in_subject_surface"],
                    })
    return facts, queries


def answer(rng: random.Random, fact: dict, query: dict, facts_by_rel: dict) -> dict:
    """A scored answer: raw response, label, extracted answer, status."""
    gold = fact["subject"] if query["target_slot"] == "subject" else fact["object"]
    u = rng.random()
    if u < 0.70:
        alias = rng.choice([gold["canonical"], *gold["aliases"]])
        raw = rng.choice((alias, f"The answer is {alias}.", f"{alias}, I think"))
        return {"raw_response": raw, "label": "correct", "extracted_answer": alias}
    if u < 0.85:
        other = rng.choice(facts_by_rel[fact["relation"]["relation_id"]])["object"]
        return {"raw_response": other["canonical"], "label": "incorrect",
                "extracted_answer": other["canonical"]}
    if u < 0.90:
        w = f"Unknown thing {rng.randrange(50)}"
        return {"raw_response": w, "label": "incorrect", "extracted_answer": w}
    if u < 0.94:
        return {"raw_response": "I don't know.", "label": "abstain", "extracted_answer": None}
    if u < 0.97:
        return {"raw_response": "Either A or B", "label": "ambiguous", "extracted_answer": None}
    if u < 0.99:
        return {"raw_response": "...", "label": "unparseable", "extracted_answer": None}
    return {"raw_response": "", "label": "unparseable", "extracted_answer": None,
            "status": "error", "error": "timeout"}


def write_run(root: Path, seed: int) -> tuple[Path, Path, int]:
    rng = random.Random(seed)
    facts, queries = build_benchmark(rng)
    bench = root / "bench"
    bench.mkdir(parents=True)
    for name, rows in ((f"benchmark_facts_{len(facts)}.jsonl", facts),
                       (f"evaluation_queries_{len(queries)}.jsonl", queries)):
        (bench / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n"
                                          for r in rows), encoding="utf-8")
    by_id = {f["fact_id"]: f for f in facts}
    by_rel: dict[str, list[dict]] = {}
    for f in facts:
        by_rel.setdefault(f["relation"]["relation_id"], []).append(f)
    run = root / "run"
    run.mkdir()
    with (run / "scored.jsonl").open("w", encoding="utf-8") as fh:
        for q in queries:
            row = {"model": "bench-model", "query_id": q["query_id"], "fact_id": q["fact_id"],
                   "relation": q["relation"], "condition_family": q["condition_family"],
                   "language": q["language"],
                   **{k: q[k] for k in ("use_for_main_forward", "use_for_reverse_analysis",
                                        "use_for_recognition_analysis",
                                        "answer_in_subject_surface")},
                   "generation_config": {"do_sample": False}, "prompt_version": "bench",
                   "status": "ok", "matched_alias": None,
                   **answer(rng, by_id[q["fact_id"]], q, by_rel)}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return bench, run, len(queries)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("/tmp/fks_bench_judge"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.out.exists():
        shutil.rmtree(args.out)
    bench, run, n = write_run(args.out, args.seed)

    from fks.data.load import load_benchmark
    from fks.data.schema import ScoredRecord
    from fks.io import iter_jsonl
    from fks.judge import AliasJudge, judge_run
    from fks.metrics.behavior import run_behavior_metrics

    cfg = load_configs().metrics
    clock = [(time.perf_counter(), time.process_time())]

    def lap() -> tuple[float, float]:
        clock.append((time.perf_counter(), time.process_time()))
        return clock[-1][0] - clock[-2][0], clock[-1][1] - clock[-2][1]

    n_read = sum(1 for _ in iter_jsonl(run / "scored.jsonl", ScoredRecord))
    base = lap()
    n_facts = len(load_benchmark(bench).facts)
    load = lap()
    info = judge_run(run, bench, AliasJudge())  # loads the benchmark itself again
    judge_t = lap()
    summary = run_behavior_metrics(run, main_families=cfg.main_families, tau_b=cfg.tau_b,
                                   tau_sensitivity=cfg.tau_b_sensitivity)
    metrics_t = lap()
    total = (judge_t[0] + metrics_t[0], judge_t[1] + metrics_t[1])
    block = summary["readings"]["with_anchor"]["full_set"]["fixed"]["all"]
    print(f"records: {n} ({n_read} read), facts: {n_facts}, relations: {N_RELATIONS}")
    print("| step | wall s | cpu s |\n|---|---:|---:|")
    for name, (w, c) in (("baseline: read+validate scored.jsonl", base),
                         ("load benchmark (also inside judge)", load),
                         ("alias judge (judge_run)", judge_t),
                         ("behavioural metrics", metrics_t),
                         ("**judge + metrics**", total)):
        print(f"| {name} | {w:.2f} | {c:.2f} |")
    print(f"goal: judge + metrics <= {GOAL_S:.0f} s wall; ratio (judge + metrics) / baseline: "
          f"{total[0] / base[0]:.1f}x wall, {total[1] / base[1]:.1f}x cpu")
    print(f"review required: {info['counts']['review_required']}; "
          f"BCS {block['bcs']:.3f}, BES {block['bes']:.3f}, SCR {block['scr']:.3f}")
    print("PASS" if total[0] <= GOAL_S else "OVER GOAL (wall; compare cpu s on a busy machine)")


if __name__ == "__main__":
    main()
