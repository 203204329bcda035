"""Benchmark ``fks calibrate`` on a realistic synthetic run (run by hand, not by pytest).

    /root/venv/bin/python bench/bench_calibration.py [--facts 2600] [--out /tmp/fks_bench_cal]

Writes a run directory without a benchmark (the generated queries are the set): ``facts``
facts in 21 relations, 15 main-forward queries per fact over five families and two
non-main ones (about 44,000 rows at 2,600 facts), with log-probs, judge clusters, abstentions,
multiple/unparseable answers, judge failures and generation errors. Then times, in this process:

* baseline  -- read and validate ``generations.jsonl`` and ``judged.jsonl`` (the floor any
  stage reading them pays);
* calibrate -- ``run_calibration`` (both readings x four sources, 1,000 fact-clustered
  bootstrap replicates per figure and slice, recalibration, the per-query file);
* bootstrap -- the vectorised fact-clustered replicates against a direct per-replicate
  recomputation (expanding the drawn facts' rows and calling ``calibration_report``), timed on
  a few replicates and scaled to 1,000.

Goal: calibrate at most 60 s at 2,600 facts. The calibrate / baseline ratio is printed (wall
and CPU seconds, ``time.process_time``), so a slower or busier machine can still be compared.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import time
from pathlib import Path

import numpy as np

from fks.configs import load_configs
from fks.data.schema import GenerationRecord, JudgedRecord
from fks.io import read_jsonl

GOAL_S = 60.0
FAMILIES = {"anchor": 1, "paraphrase": 4, "format": 3, "context": 3, "multilingual": 4}
LANGS = ("fr", "es", "de", "ru")


def _rows(n_facts: int, rng: np.random.Generator) -> tuple[list[dict], list[dict]]:
    gens, judged = [], []
    qn = 0
    for f in range(n_facts):
        fid, rel = f"fact_{f + 1:06d}", f"rel_{f % 21:02d}"
        skill = rng.random()
        families = [(fam, True) for fam, k in FAMILIES.items() for _ in range(k)]
        families += [("recognition", False), ("reverse", False)]
        for j, (fam, main) in enumerate(families):
            qn += 1
            lang = LANGS[j % 4] if fam == "multilingual" else "en"
            u = rng.random()
            status = "timeout" if u < 0.005 else "error" if u < 0.01 else "ok"
            n_tok = int(rng.integers(1, 6))
            p_tok = np.clip(rng.beta(2 + 6 * skill, 2), 1e-6, 1.0)
            lps = [float(math.log(p_tok))] + [float(math.log(0.95))] * (n_tok - 1)
            gens.append({
                "model": "bench", "query_id": f"query_{qn:08d}", "fact_id": fid,
                "relation": rel, "condition_family": fam, "language": lang,
                "use_for_main_forward": main, "use_for_reverse_analysis": fam == "reverse",
                "use_for_recognition_analysis": fam == "recognition",
                "answer_in_subject_surface": f % 10 == 0, "raw_response": "x",
                "generation_config": {}, "prompt_version": "bench", "status": status,
                "n_generated_tokens": n_tok if status == "ok" else None,
                "answer_logprobs": lps if status == "ok" and rng.random() > 0.01 else None})
            v = rng.random()
            correct = rng.random() < 0.2 + 0.7 * skill
            cluster, st, corr = ("G", "ANSWER", "CORRECT") if correct else (
                f"W{int(rng.integers(3))}", "ANSWER", "INCORRECT")
            if status != "ok" or v < 0.02:
                cluster, st, corr = "UNPARSEABLE", "UNPARSEABLE", "REVIEW_REQUIRED"
            elif v < 0.06:
                cluster, st, corr = "ABSTAIN", "ABSTAIN", "ABSTAIN"
            elif v < 0.08:
                cluster, st, corr = "MULTIPLE", "MULTIPLE", "AMBIGUOUS"
            elif v < 0.085:
                cluster, st, corr = "REVIEW_REQUIRED", "UNPARSEABLE", "REVIEW_REQUIRED"
            judged.append({**gens[-1], "label": "correct", "generation_status": status,
                           "cluster_id": cluster, "status": st, "correctness": corr,
                           "confidence": float(rng.choice([0.6, 0.8, 1.0])), "judge": "bench"})
    return gens, judged


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _bootstrap_ratio(rng: np.random.Generator, n_facts: int) -> tuple[float, float]:
    from fks.metrics.calibration import calibration_report
    from fks.metrics.calibration.bootstrap import fact_clustered_replicates
    from fks.metrics.stats.bootstrap import resample_indices

    codes = np.repeat(np.arange(n_facts), 15)
    conf = rng.random(codes.size)
    y = (rng.random(codes.size) < conf).astype(float)
    t0 = time.perf_counter()
    fact_clustered_replicates(conf, y, codes, n_resamples=1000, with_aurc=True)
    fast = time.perf_counter() - t0
    rows_of = [np.flatnonzero(codes == f) for f in range(n_facts)]
    draws = resample_indices(n_facts, 5, rng=np.random.default_rng(0))
    t0 = time.perf_counter()
    for b in range(5):
        idx = np.concatenate([rows_of[f] for f in draws[b]])
        calibration_report(conf[idx], y[idx])
    slow = (time.perf_counter() - t0) / 5 * 1000
    return fast, slow


def main() -> None:
    """Build the run, time the stage, print the figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--facts", type=int, default=2600)
    ap.add_argument("--out", type=Path, default=Path("/tmp/fks_bench_cal"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    gens, judged = _rows(args.facts, rng)
    _write(args.out / "generations.jsonl", gens)
    _write(args.out / "judged.jsonl", judged)
    print(f"{len(gens)} rows, {args.facts} facts -> {args.out}")

    from fks.metrics.calibration import run_calibration

    configs = load_configs()
    import sklearn.isotonic  # noqa: F401  (import cost is not the stage's)

    t0, c0 = time.perf_counter(), time.process_time()
    read_jsonl(args.out / "generations.jsonl", GenerationRecord)
    read_jsonl(args.out / "judged.jsonl", JudgedRecord)
    baseline, baseline_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    run_calibration(args.out, configs=configs)
    calibrate, calibrate_cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"baseline (read + validate) {baseline:6.2f} s  (CPU {baseline_cpu:.2f} s)")
    print(f"calibrate                  {calibrate:6.2f} s  (CPU {calibrate_cpu:.2f} s; "
          f"{calibrate / baseline:.1f}x baseline, CPU {calibrate_cpu / baseline_cpu:.1f}x;"
          f" goal <= {GOAL_S:.0f} s: {'met' if calibrate <= GOAL_S else 'MISSED'})")
    fast, slow = _bootstrap_ratio(rng, args.facts)
    print(f"bootstrap 1000 replicates: vectorised {fast:.2f} s, direct ~{slow:.1f} s "
          f"({slow / fast:.0f}x)")


if __name__ == "__main__":
    main()
