"""Size and load time of the fact explorer at full scale (run by hand, not pytest).

Writes a synthetic benchmark shaped like the published one -- 2,592 facts in 20 relations,
the main families drawn by :func:`fks.metrics.internal.synthetic.published_counts` (39,260 queries),
one four-option recognition query per fact and reverse queries for the rest, 44,000 queries
in all -- and, per model, a synthetic run: ``judged.jsonl`` with every field a real record
has, ``behavioral_per_fact.jsonl``, ``iss_per_fact.jsonl`` and ``iss_per_fact_layer.jsonl``
over 19 window layers (a 32-layer model). Raw answers are an abstention, the gold name, or
20-160 characters of word-like text (mean about 60 characters); ``--long`` makes every
answer 100-160 characters, about the most that 24 greedy new tokens give. The per-fact KTS
identification rate is drawn at random and handed over the way the bootstrap's
``RunStatistics.fact_identity`` would (the KTS computation is not what is measured here).

Then, for one model and for ``--models`` models side by side, it builds the explorer with
:func:`fks.report.explorer.write_explorer` (timed), reports the file size, and loads it
``--repeat`` times in Debian's chromium through playwright (fresh page each time): the wall
time of ``goto`` until the page says it is ready, the page's own ``performance.now()`` at
ready (from navigation start), then the time to filter to *Unstable* and to open a fact.

    /work/main/.venv/bin/python bench/bench_explorer.py --models 2 --repeat 3
    /work/main/.venv/bin/python bench/bench_explorer.py --models 1 --long

Goal (issue 15): under 15 MB per model, loading in under 3 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from fks.configs import load_configs  # noqa: E402
from fks.metrics.behavior import behavior_group  # noqa: E402
from fks.metrics.internal.synthetic import published_counts  # noqa: E402
from fks.report.build import ReportRun  # noqa: E402
from fks.report.explorer import write_explorer  # noqa: E402
from fks.report.inputs import load_run  # noqa: E402
from fks.report.statistics import RunStatistics  # noqa: E402

N_FACTS, N_RELATIONS, N_QUERIES = 2592, 20, 44_000
LAYERS = list(range(13, 32))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SYLLABLES = ["ka", "lo", "mi", "ne", "ra", "to", "vi", "su", "den", "mar", "ton", "berg",
             "ville", "ia", "an", "or"]


def word(rng: np.random.Generator) -> str:
    return "".join(rng.choice(SYLLABLES, size=int(rng.integers(1, 4)))).capitalize()


def text(rng: np.random.Generator, lo: int, hi: int) -> str:
    n, out = int(rng.integers(lo, hi + 1)), []
    while sum(len(w) + 1 for w in out) < n:
        out.append(word(rng).lower() if rng.random() < 0.6 else word(rng))
    return " " + " ".join(out)[: n - 1]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def write_benchmark(root: Path, rng: np.random.Generator) -> tuple[list[dict], list[dict]]:
    conditions = load_configs().eval_conditions
    rels = [f"relation_{r:02d}" for r in range(N_RELATIONS)]
    facts = []
    for i in range(N_FACTS):
        s, o = f"{word(rng)} {word(rng)}", word(rng)
        facts.append({
            "fact_id": f"fact_{i + 1:06d}", "subject": {"canonical": s, "aliases": [s]},
            "object": {"canonical": o, "aliases": [o, o.upper()]},
            "relation": {"relation_id": rels[i % N_RELATIONS], "direction": "forward"},
            "qualification_question": f"What is the {rels[i % N_RELATIONS]} of {s}?",
            "is_functional": True, "answer_type": "entity",
            "answer_in_subject_surface": i % 9 == 0})
    counts = published_counts(N_FACTS)
    n_main = sum(int(c.sum()) for c in counts.values())
    n_reverse = N_QUERIES - n_main - N_FACTS
    queries: list[dict] = []

    def add(f: dict, family: str, variant: str, query: str, **extra) -> None:
        spec = conditions.families[family]
        queries.append({
            "query_id": f"query_{len(queries) + 1:08d}", "fact_id": f["fact_id"],
            "relation": f["relation"]["relation_id"], "condition_family": family,
            "variant_id": variant, "language": extra.pop("language", "en"), "query": query,
            "target_slot": spec.target_slot, "gold_canonical": f["object"]["canonical"],
            "gold_aliases": f["object"]["aliases"], "is_assisted": spec.is_assisted,
            "is_well_posed": spec.is_well_posed, **spec.flags(),
            "answer_in_subject_surface": f["answer_in_subject_surface"], **extra})

    for i, f in enumerate(facts):
        s, rel = f["subject"]["canonical"], f["relation"]["relation_id"]
        q = f["qualification_question"]
        add(f, "anchor", "anchor", q)
        for k in range(int(counts["paraphrase"][i])):
            add(f, "paraphrase", f"para_{k:02d}", f"The {rel} of {s} is known to be")
        for k in range(int(counts["format"][i])):
            add(f, "format", f"fmt_{k:02d}", f"{q} Reply with the name only, no sentence.")
        for k in range(int(counts["context"][i])):
            add(f, "context", f"ctx_{k:02d}", f"{word(rng)} is a large place.{text(rng, 10, 40)}"
                f". {q}")
        for lang in ["fr", "de", "es", "zh", "ru"][:int(counts["multilingual"][i])]:
            add(f, "multilingual", f"ml_{lang}", f"Quelle est la {rel} de {s} ?", language=lang)
        others = [facts[(i + d) % N_FACTS]["object"]["canonical"] for d in (1, 2, 3)]
        add(f, "recognition", "rec_01", q, options=sorted([f["object"]["canonical"], *others]))
        if i < n_reverse:
            add(f, "reverse", "rev_01", f"{f['object']['canonical']} is the {rel} of which "
                "entity?")
    assert len(queries) == N_QUERIES, len(queries)
    write_jsonl(root / f"benchmark_facts_{len(facts)}.jsonl", facts)
    write_jsonl(root / f"evaluation_queries_{len(queries)}.jsonl", queries)
    return facts, queries


def write_run(root: Path, bench: Path, facts: list[dict], queries: list[dict], model: str,
              seed: int, long: bool = False) -> Path:
    rng = np.random.default_rng(seed)
    run = root / model
    (run / "metrics").mkdir(parents=True, exist_ok=True)
    (run / "evaluation_manifest.json").write_text(json.dumps(
        {"model": {"name": model}, "benchmark": {"checksum": "synthetic-44k", "path": str(bench)},
         "stages": {}}))
    skill = {f["fact_id"]: rng.uniform(0.2, 1.0) for f in facts}
    judged = []
    for q in queries:
        good = rng.random() < skill[q["fact_id"]]
        abstain = not good and rng.random() < 0.15
        corr = "CORRECT" if good else ("ABSTAIN" if abstain else "INCORRECT")
        raw = " I don't know" if abstain else (f" {q['gold_canonical']}" if good and
                                               rng.random() < 0.5 else text(rng, 20, 160))
        if long:  # worst case: every answer 100-160 characters
            raw = text(rng, 100, 160)
        judged.append({
            "model": model, "query_id": q["query_id"], "fact_id": q["fact_id"],
            "relation": q["relation"], "condition_family": q["condition_family"],
            "language": q["language"], "use_for_main_forward": q["use_for_main_forward"],
            "use_for_reverse_analysis": q["use_for_reverse_analysis"],
            "use_for_recognition_analysis": q["use_for_recognition_analysis"],
            "answer_in_subject_surface": q["answer_in_subject_surface"], "raw_response": raw,
            "generation_config": {"do_sample": False, "max_new_tokens": 24},
            "prompt_version": "fks-prompt-v1", "error": None, "n_generated_tokens": 24,
            "label": {"CORRECT": "correct", "ABSTAIN": "abstain"}.get(corr, "incorrect"),
            "cluster_id": ("ENTITY_Q" + q["fact_id"][-5:]) if good else
            ("ABSTAIN" if abstain else f"ENTITY_Q{int(rng.integers(1, 99999))}"),
            "canonical_meaning": q["gold_canonical"] if good else raw.strip()[:30],
            "status": "ABSTAIN" if abstain else "ANSWER", "confidence": 1.0,
            "correctness": corr, "judge": "alias"})
    write_jsonl(run / "judged.jsonl", judged)
    behaviour, iss, iss_layers = [], [], []
    for f in facts:
        fid, rel = f["fact_id"], f["relation"]["relation_id"]
        bcs = float(rng.uniform(0.3, 1.0))
        corr = "CORRECT" if skill[fid] > 0.5 else "INCORRECT"
        behaviour.append({
            "model": model, "fact_id": fid, "relation": rel, "bcs": bcs,
            "bes": float(max(0.0, bcs - 0.2)), "modal_cluster": "ENTITY_Q" + fid[-5:],
            "modal_correctness": corr, "behavior_group": behavior_group(bcs, corr, 0.8),
            "complete_family": True, "anchor_correct": bool(rng.random() < skill[fid]),
            "answer_in_subject_surface": f["answer_in_subject_surface"]})
        vals = np.clip(rng.normal(0.2 + 0.03 * np.arange(len(LAYERS)) * skill[fid], 0.1), -1.5,
                       1.0)
        iss.append({"model": model, "fact_id": fid, "relation": rel,
                    "iss": float(vals.mean()), "iss_peak": float(vals.max()),
                    "iss_late": float(vals[-1]), "complete_family": True,
                    "answer_in_subject_surface": f["answer_in_subject_surface"]})
        iss_layers += [{"model": model, "fact_id": fid, "relation": rel, "layer": layer,
                        "iss": float(v)} for layer, v in zip(LAYERS, vals, strict=True)]
    write_jsonl(run / "metrics" / "behavioral_per_fact.jsonl", behaviour)
    write_jsonl(run / "metrics" / "iss_per_fact.jsonl", iss)
    write_jsonl(run / "metrics" / "iss_per_fact_layer.jsonl", iss_layers)
    return run


def report_run(run: Path, seed: int) -> ReportRun:
    data = load_run(run)
    stats = RunStatistics({})
    ids = data.facts.fact_ids
    stats.fact_identity[("full_set", "all")] = (
        ids, np.random.default_rng(seed).uniform(0, 1, len(ids)))
    return ReportRun(data, stats, [], data.model)


def load_times(path: Path, repeat: int) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    walls, ready, filt, open_ = [], [], [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        for _ in range(repeat):
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            page.on("console", lambda m, errors=errors: errors.append(m.text)
                    if m.type == "error" else None)
            t = time.perf_counter()
            page.goto(path.as_uri())
            page.wait_for_selector("body[data-ready='1']", state="attached", timeout=60_000)
            walls.append(time.perf_counter() - t)
            ready.append(page.evaluate("window.fksExplorerReadyMs") / 1000)
            t = time.perf_counter()
            page.select_option("#f-group", "Unstable")
            page.wait_for_selector("#facts-body tr")
            filt.append(time.perf_counter() - t)
            fact = page.eval_on_selector("#facts-body tr", "r => r.dataset.fact")
            t = time.perf_counter()
            page.click("#facts-body tr")
            page.wait_for_selector(f"#detail h2:has-text('{fact}')")
            open_.append(time.perf_counter() - t)
            assert not errors, errors
            page.close()
        browser.close()
    med = statistics.median
    return {"load_wall_s": med(walls), "ready_after_navigation_s": med(ready),
            "filter_unstable_s": med(filt), "open_fact_s": med(open_),
            "load_wall_all_s": [round(x, 3) for x in walls]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="write here instead of a temporary folder")
    ap.add_argument("--long", action="store_true",
                    help="worst case: every raw answer 100-160 characters")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        rng = np.random.default_rng(0)
        bench = root / "bench"
        facts, queries = write_benchmark(bench, rng)
        runs = [write_run(root, bench, facts, queries, f"model-{k}", seed=k + 1, long=args.long)
                for k in range(args.models)]
        mean_raw = float(np.mean([len(json.loads(x)["raw_response"]) for x in
                                  (runs[0] / "judged.jsonl").open(encoding="utf-8")]))
        results = {"n_facts": N_FACTS, "n_queries": len(queries),
                   "mean_raw_response_chars": round(mean_raw, 1),
                   "judged_jsonl_mb": round((runs[0] / "judged.jsonl").stat().st_size / 1e6, 2)}
        for n in sorted({1, args.models}):
            t = time.perf_counter()
            rr = [report_run(r, seed=k) for k, r in enumerate(runs[:n])]
            t_load = time.perf_counter() - t
            t = time.perf_counter()
            out = write_explorer(rr, root / f"explorer_{n}.html")
            t_build = time.perf_counter() - t
            size = out.stat().st_size / 1e6
            results[f"{n}_model(s)"] = {
                "file_mb": round(size, 2), "mb_per_model": round(size / n, 2),
                "load_run_s": round(t_load, 2), "build_explorer_s": round(t_build, 2),
                **{k: (round(v, 3) if isinstance(v, float) else v)
                   for k, v in load_times(out, args.repeat).items()}}
            print(json.dumps({f"{n}_model(s)": results[f"{n}_model(s)"]}), flush=True)
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
