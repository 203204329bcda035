"""A hand-written run directory for the calibration tests (the tiny benchmark, 4 facts).

Each main query gets a plan: generation status and log-probs, judge cluster/status/verdict and
judge confidence. The plan exercises every outcome of the coverage accounting:

================  =========================================================================
fact              main queries (anchor, para_01, para_02, format, context, multilingual)
================  =========================================================================
fact_000001       correct, correct, ABSTAIN, timeout, correct (no log-probs), correct
fact_000002       wrong, wrong, MULTIPLE, wrong, generation error, (no judged row)
fact_000003       correct, wrong, UNPARSEABLE, correct, (no generation at all), correct
fact_000004       correct, correct, judge failure (REVIEW_REQUIRED), wrong
================  =========================================================================

Non-main queries (recognition, reverse, reverse_illposed) are correct; they enter no reading.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from tiny_benchmark import tiny_benchmark_rows

MODEL = "tiny-model"
LN = math.log

# (fact, variant) -> plan; variants: anchor, para_01, para_02, fmt_short, ctx_01, ml_fr
PLANS: dict[tuple[str, str], dict[str, Any]] = {
    ("fact_000001", "anchor"): {"lp": [LN(0.9)], "cl": "A", "corr": "CORRECT", "jc": 0.9},
    ("fact_000001", "para_01"): {"lp": [LN(0.9), LN(0.5)], "cl": "A", "corr": "CORRECT"},
    ("fact_000001", "para_02"): {"lp": [LN(0.3)], "cl": "ABSTAIN", "st": "ABSTAIN",
                                 "corr": "ABSTAIN"},
    ("fact_000001", "fmt_short"): {"gen": "timeout"},
    ("fact_000001", "ctx_01"): {"lp": None, "cl": "A", "corr": "CORRECT"},
    ("fact_000001", "ml_fr"): {"lp": [LN(0.7)], "cl": "A", "corr": "CORRECT"},
    ("fact_000002", "anchor"): {"lp": [LN(0.8), LN(0.5)], "cl": "B", "corr": "INCORRECT",
                                "jc": 0.6},
    ("fact_000002", "para_01"): {"lp": [LN(0.6)], "cl": "B", "corr": "INCORRECT"},
    ("fact_000002", "para_02"): {"lp": [LN(0.5)], "cl": "MULTIPLE", "st": "MULTIPLE",
                                 "corr": "AMBIGUOUS"},
    ("fact_000002", "fmt_short"): {"lp": [LN(0.95)], "cl": "B", "corr": "INCORRECT"},
    ("fact_000002", "ctx_01"): {"gen": "error"},
    ("fact_000002", "ml_fr"): {"lp": [LN(0.4)], "cl": "B", "corr": "INCORRECT",
                               "no_judged": True},
    ("fact_000003", "anchor"): {"lp": [LN(0.6)], "cl": "C", "corr": "CORRECT", "jc": 0.8},
    ("fact_000003", "para_01"): {"lp": [LN(0.2)], "cl": "X", "corr": "INCORRECT"},
    ("fact_000003", "para_02"): {"lp": [LN(0.5)], "cl": "UNPARSEABLE", "st": "UNPARSEABLE",
                                 "corr": "REVIEW_REQUIRED"},
    ("fact_000003", "fmt_short"): {"lp": [LN(0.7)], "cl": "C", "corr": "CORRECT"},
    ("fact_000003", "ctx_01"): {"missing": True},
    ("fact_000003", "ml_fr"): {"lp": [LN(0.9)], "cl": "C", "corr": "CORRECT"},
    ("fact_000004", "anchor"): {"lp": [LN(0.5)], "cl": "D", "corr": "CORRECT", "jc": 0.7},
    ("fact_000004", "para_01"): {"lp": [LN(0.9)], "cl": "D", "corr": "CORRECT"},
    ("fact_000004", "para_02"): {"lp": [LN(0.5)], "cl": "REVIEW_REQUIRED", "st": "UNPARSEABLE",
                                 "corr": "REVIEW_REQUIRED"},
    ("fact_000004", "fmt_short"): {"lp": [LN(0.4)], "cl": "Y", "corr": "INCORRECT"},
}
#: the anchor reading by hand: sequence probability and outcome per fact
ANCHOR_SEQ = {"fact_000001": (0.9, 1), "fact_000002": (0.4, 0), "fact_000003": (0.6, 1),
              "fact_000004": (0.5, 1)}
#: main_families reading (22 queries), sequence_probability source
MAIN_COUNTS = {"valid": 13, "invalid_confidence": 1, "abstain": 1, "invalid_answer": 2,
               "judge_missing": 2, "timeout": 1, "infrastructure_error": 1,
               "missing_generation": 1}


def _gen_row(q: dict, plan: dict) -> dict:
    status = plan.get("gen", "ok")
    lp = plan.get("lp") if status == "ok" else None
    return {
        "model": MODEL, "query_id": q["query_id"], "fact_id": q["fact_id"],
        "relation": q["relation"], "condition_family": q["condition_family"],
        "language": q["language"], "use_for_main_forward": q["use_for_main_forward"],
        "use_for_reverse_analysis": q["use_for_reverse_analysis"],
        "use_for_recognition_analysis": q["use_for_recognition_analysis"],
        "answer_in_subject_surface": q["answer_in_subject_surface"],
        "raw_response": q["gold_canonical"] if status == "ok" else "",
        "generation_config": {"do_sample": False}, "prompt_version": "test-v1",
        "status": status, "error": None if status == "ok" else f"{status} in test",
        "n_generated_tokens": len(lp) if lp is not None else None, "answer_logprobs": lp,
    }


def _judged_row(scored: dict, plan: dict) -> dict:
    ok = scored["status"] == "ok"
    row = {**scored, "generation_status": scored["status"]}
    row.update(cluster_id=plan.get("cl", "UNPARSEABLE") if ok else "UNPARSEABLE",
               canonical_meaning=None, status=plan.get("st", "ANSWER") if ok else "UNPARSEABLE",
               confidence=plan.get("jc", 1.0) if ok else 0.0,
               correctness=plan.get("corr", "CORRECT") if ok else "REVIEW_REQUIRED",
               judge="hand")
    return row


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def build_run(run: Path) -> Path:
    """Write generations.jsonl, scored.jsonl and judged.jsonl of the plan into ``run``."""
    _, queries = tiny_benchmark_rows()
    run.mkdir(parents=True, exist_ok=True)
    gens, scored, judged = [], [], []
    for q in queries:
        plan = PLANS.get((q["fact_id"], q["variant_id"]), {"lp": [LN(0.9)], "cl": "R"})
        if plan.get("missing"):
            continue
        g = _gen_row(q, plan)
        s = {**g, "label": "correct" if g["status"] == "ok" else "unparseable",
             "extracted_answer": g["raw_response"] or None}
        gens.append(g)
        scored.append(s)
        if not plan.get("no_judged"):
            judged.append(_judged_row(s, plan))
    write_jsonl(run / "generations.jsonl", gens)
    write_jsonl(run / "scored.jsonl", scored)
    write_jsonl(run / "judged.jsonl", judged)
    return run


def query_id_of(fact_id: str, variant: str) -> str:
    """The query id of a (fact, variant) of the tiny benchmark."""
    _, queries = tiny_benchmark_rows()
    return next(q["query_id"] for q in queries
                if q["fact_id"] == fact_id and q["variant_id"] == variant)


def query_row(i: int, outcome: str, correct: int | None = None, p: float | None = None) -> Any:
    """Return a planted calibration row ``q{i}`` of fact ``f{i}`` (a main anchor query).

    ``p``, when given, is its sequence-probability confidence.
    """
    from fks.metrics.calibration.run import QueryRow

    row = QueryRow(query_id=f"q{i}", fact_id=f"f{i}", relation="r", condition_family="anchor",
                   language="en", copy=False, main=True, outcome=outcome, correct=correct)
    if p is not None:
        row.confidence["sequence_probability"] = (p, None)
    return row
