"""§18.6 agreement of the judge with hand labels, by model, family and relation (issue 26).

    .venv/bin/python bench/judge_heldout.py --labels L.jsonl [L2.jsonl ...] \
        --judged RUN_A/judged.jsonl RUN_B/judged.jsonl [--split S] [--out report.json]
    .venv/bin/python bench/judge_heldout.py --labels L.jsonl --scored RUN/scored.jsonl \
        --benchmark FULL [--split S]
    .venv/bin/python bench/judge_heldout.py --labels L1.jsonl L2.jsonl --from-labels \
        --benchmark BENCH1 BENCH2 [--split S]

Run by hand on judged runs of the labelled answers, or judge in process with
``--scored RUN/scored.jsonl ... --benchmark FULL``: the scored rows are judged by the alias
judge against FULL's lexicon (the parent benchmark, as a ``--limit`` run of it would be
judged; the CLI refuses that on purpose, since the run's manifest names the subset). This is
the dev loop of issue 26: pass ``--split dev`` / ``--split fresh_dev`` while tuning.

``--from-labels`` needs no run at all: every label row carries the model's raw answer byte for
byte (``raw_answer``, copied from ``generations.jsonl`` by the label builders), so the rows of
each labels file are scored by fks's scorer against that file's benchmark (``--benchmark``, one
for all files or one per file: the old labels are of the old build, the fresh sets of the
current one) and judged in process. Scores and judgements depend only on the raw answer and
the benchmark, so this equals scoring the real generations; it is how a later session re-runs
the dev loop without regenerating every labelled set.

For every model (and both pooled) it prints the five §18.6 figures of ``fks judge
agreement`` (kind agreement, extraction where both say ANSWER, within-fact cluster pairs,
correctness Cohen's kappa, mean per-fact BCS gap), then the same per condition family (the
context family on its own line) and per relation ("leave one relation out": the figures of
each relation alone, the worst one printed), so a rule that only works on some relations
shows. Nothing is tuned here.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from fks.judge import NoOverlap, judge_agreement

GOALS = {"kind": 0.90, "extraction": 0.90, "pairs": 0.90, "kappa": 0.80, "bcs_gap": 0.05}


def _figures(rep: dict[str, Any]) -> dict[str, float | None]:
    return {"n": rep.get("n_overlap"), "kind": (rep.get("kind") or {}).get("accuracy"),
            "extraction": (rep.get("extraction") or {}).get("accuracy"),
            "pairs": (rep.get("cluster_equivalence") or {}).get("accuracy"),
            "kappa": (rep.get("correctness") or {}).get("cohen_kappa"),
            "bcs_gap": (rep.get("bcs_gap") or {}).get("mean_abs_gap"),
            "bcs_gap_ci95": (rep.get("bcs_gap") or {}).get("mean_abs_gap_ci95")}


def _agree(judged: list[Path], rows: list[dict], tmp: Path) -> dict[str, float | None]:
    models = {r["model"] for r in rows}
    lab = tmp / "labels.jsonl"
    lab.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                   encoding="utf-8")
    jd = tmp / "judged.jsonl"
    with jd.open("w", encoding="utf-8") as fh:
        for p in judged:
            for line in open(p, encoding="utf-8"):
                if json.loads(line).get("model") in models:
                    fh.write(line)
    try:
        return _figures(judge_agreement(jd, lab))
    except NoOverlap:
        return dict.fromkeys(("n", *GOALS, "bcs_gap_ci95"), None)


def _judge_in_process(scored: list[Path], benches: list[Path], tmp: Path) -> list[Path]:
    """Judge each scored file with the alias judge against its parent benchmark's lexicon."""
    from fks.data.load import load_benchmark
    from fks.judge import AliasJudge, judge_records, read_scored

    if scored and len(benches) not in (1, len(scored)):
        raise SystemExit("--benchmark: give one, or one per --scored file")
    loaded: dict[Path, Any] = {}
    out = []
    for i, path in enumerate(scored):
        bpath = benches[0] if len(benches) == 1 else benches[i]
        bench = loaded.setdefault(bpath, load_benchmark(bpath))
        rows, _ = judge_records(read_scored(path, bench), bench, AliasJudge())
        dst = tmp / f"judged_{i}.jsonl"
        dst.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                       encoding="utf-8")
        out.append(dst)
    return out


def _score_labels(labels: list[Path], benches: list[Path], tmp: Path) -> list[Path]:
    """Write ``scored.jsonl`` files from the label rows' raw answers (``--from-labels``)."""
    from fks.data.load import load_benchmark
    from fks.data.schema import GenerationRecord, ScoredRecord
    from fks.score._run import _Scorer

    if len(benches) not in (1, len(labels)):
        raise SystemExit("--benchmark: give one, or one per --labels file")
    config = {"do_sample": False, "num_beams": 1, "max_new_tokens": 24}
    out: list[Path] = []
    for i, path in enumerate(labels):
        bench = load_benchmark(benches[0] if len(benches) == 1 else benches[i])
        scorer = _Scorer(bench)
        by_model: dict[str, list[str]] = {}
        for line_no, line in enumerate(open(path, encoding="utf-8"), 1):
            row = json.loads(line)
            gen = GenerationRecord.model_validate({
                **{k: row[k] for k in ("model", "query_id", "fact_id", "relation",
                                       "condition_family")},
                "raw_response": row["raw_answer"], "generation_config": config,
                "prompt_version": "labels"})
            q = scorer.query_for(gen, path, line_no)  # exit 2 on a foreign or mismatched row
            gen = gen.model_copy(update={k: getattr(q, k) for k in (
                "language", "use_for_main_forward", "use_for_reverse_analysis",
                "use_for_recognition_analysis", "answer_in_subject_surface")})
            res = scorer.score(gen, q)
            rec = ScoredRecord.model_validate(gen.model_dump() | {
                "label": res.label, "extracted_answer": res.extracted_answer,
                "matched_alias": res.matched_alias})
            by_model.setdefault(row["model"], []).append(json.dumps(rec.model_dump(mode="json"),
                                                                    ensure_ascii=False))
        for model, recs in by_model.items():
            dst = tmp / f"scored_{i}_{model}.jsonl"
            dst.write_text("".join(r + "\n" for r in recs), encoding="utf-8")
            out.append(dst)
    return out


def _fmt(f: dict[str, Any], ci: bool = False) -> str:
    """One line of figures; ``ci``: the BCS gap's bootstrap interval over facts after it."""
    def one(k: str) -> str:
        v = f[k]
        if v is None:
            return f"{k} -"
        ok = v <= GOALS[k] if k == "bcs_gap" else v >= GOALS[k]
        band = f.get("bcs_gap_ci95") if ci and k == "bcs_gap" else None
        interval = f" [{band[0]:.3f}, {band[1]:.3f}]" if band else ""
        return f"{k} {v:.3f}{interval}{'' if ok else '!'}"
    if f["n"] is None:
        return "no judged rows"
    return f"n={f['n']:4d}  " + "  ".join(one(k) for k in GOALS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--labels", type=Path, nargs="+", required=True)
    ap.add_argument("--judged", type=Path, nargs="+", default=[])
    ap.add_argument("--scored", type=Path, nargs="+", default=[],
                    help="scored.jsonl files to judge in process (needs --benchmark)")
    ap.add_argument("--benchmark", type=Path, nargs="+", default=[],
                    help="parent benchmark per --scored file (one for all, or one each)")
    ap.add_argument("--from-labels", action="store_true",
                    help="score the label rows' own raw answers (no run needed; needs "
                         "--benchmark, one for all --labels files or one each)")
    ap.add_argument("--split", default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rows = [json.loads(x) for p in args.labels for x in open(p, encoding="utf-8")]
    if args.split:
        rows = [r for r in rows if r.get("split") == args.split]
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        if args.from_labels:
            if args.scored or args.judged:
                ap.error("--from-labels takes neither --scored nor --judged")
            args.scored = _score_labels(args.labels, args.benchmark, tmp)
            benches = args.benchmark if len(args.benchmark) == 1 else [
                b for b, lab in zip(args.benchmark, args.labels, strict=True)
                for _ in {json.loads(x)["model"]: 0 for x in open(lab, encoding="utf-8")}]
        else:
            benches = args.benchmark
        judged = list(args.judged) + _judge_in_process(args.scored, benches, tmp)
        if not judged:
            ap.error("give --judged or --scored")
        args.judged = judged
        for model in sorted({r["model"] for r in rows}) + ["pooled"]:
            mine = rows if model == "pooled" else [r for r in rows if r["model"] == model]
            block: dict[str, Any] = {"all": _agree(args.judged, mine, tmp)}
            print(f"{model:24s} {_fmt(block['all'], ci=True)}")
            for fam in sorted({r["condition_family"] for r in mine}):
                block[f"family:{fam}"] = f = _agree(
                    args.judged, [r for r in mine if r["condition_family"] == fam], tmp)
                print(f"  {fam:22s} {_fmt(f)}")
            per_rel = {rel: _agree(args.judged, [r for r in mine if r["relation"] == rel], tmp)
                       for rel in sorted({r["relation"] for r in mine})}
            block["relations"] = per_rel
            for k in ("kind", "kappa"):
                vals = {rel: f[k] for rel, f in per_rel.items() if f[k] is not None}
                if vals:
                    worst = min(vals, key=vals.get)
                    print(f"  per relation {k:6s} mean {sum(vals.values()) / len(vals):.3f}, "
                          f"worst {worst} {vals[worst]:.3f} ({len(vals)} relations)")
            report[model] = block
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    from fks.errors import FksInputError

    try:
        main()
    except FksInputError as exc:  # a bad label row or benchmark: file, line and field, exit 2
        import sys

        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
