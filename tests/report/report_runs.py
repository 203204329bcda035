"""Hand-made run directories for the report tests.

* :func:`synthetic_run` -- metric files written by hand with plausible values (behaviour,
  ISS per fact and per layer, KTS summary, centroids with planted structure, sanity checks, a
  small calibration summary, a few judged records with a hostile ``raw_response``).
* :func:`tiny_run` -- ``judged.jsonl`` hand-written for the tiny benchmark and the real
  behavioural stage (:func:`fks.metrics.behavior.run_behavior_metrics`) run on it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from fks.data.load import load_benchmark
from fks.metrics.behavior import behavior_group, run_behavior_metrics
from provenance_util import drop_provenance
from tiny_benchmark import tiny_benchmark_rows

FAMILIES = ["anchor", "paraphrase", "format", "context", "multilingual"]
XSS = "<script>alert(1)</script>"
#: a second hostile answer: closes the script element, an event handler, line separators
HOSTILE = "</script><img src=x onerror=alert(2)><!-- \u2028\u2029 & \"'"
LAYERS = (2, 3)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def synthetic_facts(n_relations: int = 3, per_relation: int = 10) -> list[tuple[str, str]]:
    """``(fact_id, relation)`` of the synthetic fact set."""
    return [(f"fact_{r * per_relation + i + 1:06d}", f"rel{r}")
            for r in range(n_relations) for i in range(per_relation)]


def _behavior_rows(model: str, facts: list[tuple[str, str]], rng: np.random.Generator,
                   complete: np.ndarray, shift: float) -> list[dict[str, Any]]:
    rows = []
    for k, (fid, rel) in enumerate(facts):
        bcs = float(np.clip(rng.uniform(0.45, 1.0) + shift, 0.2, 1.0))
        corr = ["CORRECT", "INCORRECT", "ABSTAIN"][k % 3]
        rows.append({"model": model, "fact_id": fid, "relation": rel, "bcs": bcs,
                     "bes": float(np.clip(bcs - 0.1 + rng.normal(0, 0.05), 0, 1)),
                     "modal_cluster": f"C{k % 4}", "modal_correctness": corr,
                     "behavior_group": behavior_group(bcs, corr, 0.8),
                     "valid_families": FAMILIES if complete[k] else FAMILIES[:-1],
                     "complete_family": bool(complete[k]), "anchor_correct": k % 5 != 0,
                     "answer_in_subject_surface": k % 4 == 0})
    return rows


def _iss_rows(model: str, facts: list[tuple[str, str]], rng: np.random.Generator,
              complete: np.ndarray, shift: float) -> tuple[list[dict], list[dict]]:
    per_fact, per_layer = [], []
    for k, (fid, rel) in enumerate(facts):
        vals = [float(rng.normal(0.3 + 0.1 * i + shift, 0.2)) for i in range(len(LAYERS))]
        per_fact.append({"model": model, "fact_id": fid, "relation": rel,
                         "iss": float(np.mean(vals)), "iss_peak": max(vals),
                         "iss_late": vals[-1], "layers_used": list(LAYERS),
                         "complete_family": bool(complete[k]),
                         "answer_in_subject_surface": k % 4 == 0})
        per_layer += [{"model": model, "fact_id": fid, "relation": rel, "layer": layer,
                       "iss": v} for layer, v in zip(LAYERS, vals, strict=True)]
    return per_fact, per_layer


def _centroids(folder: Path, facts: list[tuple[str, str]], complete: np.ndarray,
               rng: np.random.Generator, noise: float, k: int = 12) -> None:
    """Planted centroids: a fact vector plus family noise; incomplete facts lack the last family."""
    index, per_layer = [], {layer: [] for layer in LAYERS}
    base = rng.normal(size=(len(facts), k))
    for f, (fid, rel) in enumerate(facts):
        for t, fam in enumerate(FAMILIES):
            if t == len(FAMILIES) - 1 and not complete[f]:
                continue
            index.append({"row": len(index), "fact_id": fid, "relation": rel,
                          "condition_family": fam, "n_queries": 1})
            for layer in LAYERS:
                v = base[f] + noise * rng.normal(size=k)
                per_layer[layer].append(v / np.linalg.norm(v))
    write_jsonl(folder / "index.jsonl", index)
    write_json(folder / "meta.json", {"layers": list(LAYERS), "families": FAMILIES,
                                      "dtype": "float16", "n_rows": len(index)})
    for layer, rows in per_layer.items():
        np.save(folder / f"layer_{layer:03d}.npy", np.asarray(rows, dtype=np.float16),
                allow_pickle=False)


def _sanity() -> dict[str, Any]:
    return {"model": "m", "layer": LAYERS[0], "selection": "with_anchor/complete_family/all",
            "checks": {
                "query_shuffle": {"status": "pass", "iss_drop": 0.41,
                                  "real": {"iss": 0.45, "kts_id": 0.8},
                                  "criteria": {"iss_drops": True, "iss_near_zero": True}},
                "raw_vs_transported": {"status": "fail", "mean_abs_difference": 0.0,
                                       "criteria": {"differ": False}},
                "duplicate_query": {"status": "not_applicable", "criteria": {}}},
            "summary": {"all_pass": False, "n_pass": 1, "n_fail": 1, "n_not_applicable": 1,
                        "failed": ["raw_vs_transported"]}}


def _calibration() -> dict[str, Any]:
    rel = {"mean_confidence": [0.15, None, 0.55, 0.9], "accuracy": [0.2, None, 0.5, 0.85],
           "counts": [10, 0, 12, 30], "ece": 0.05, "bins": 4}
    block = {"available": True,
             "coverage": {"confidence_coverage": 0.9, "end_to_end_coverage": 0.65},
             "figures": {"n": 52, "accuracy": 0.6, "ece_equal_width": 0.05, "brier": 0.18,
                         "aurc": 0.2, "risk_at_coverage": [
                             {"coverage_view": "confidence", "coverage": 1.0, "risk": 0.4}]},
             "intervals": {"status": "ok", "ece_equal_width": {"low": 0.03, "high": 0.08}},
             "reliability": {"equal_width": rel},
             "risk_coverage": {"coverage": [0.2, 0.6, 1.0], "risk": [0.1, 0.2, 0.4]},
             "end_to_end": {
                 "figures": {"n": 80, "accuracy": 0.39, "aurc": 0.35, "risk_at_coverage": [
                     {"coverage_view": "end_to_end", "coverage": 1.0, "risk": 0.61}]},
                 "risk_coverage": {"coverage": [0.13, 0.39, 0.65, 1.0],
                                   "risk": [0.1, 0.2, 0.4, 0.61]}}}
    return {"readings": {"anchor": {"sources": {
        "sequence_probability": block,
        "verbalized": {"available": False, "reason": "verbalized.jsonl not found"}}}}}


def _judged(model: str, facts: list[tuple[str, str]]) -> list[dict[str, Any]]:
    rows = []
    for k, (fid, rel) in enumerate(facts):
        for fam in ("anchor", "paraphrase"):
            text = XSS if k == 1 and fam == "anchor" else f"answer {k} & more"
            rows.append({"model": model, "query_id": f"query_{len(rows) + 1:08d}",
                         "fact_id": fid, "relation": rel, "condition_family": fam,
                         "use_for_main_forward": True, "raw_response": text,
                         "cluster_id": f"C{k % 4}", "correctness": "CORRECT"})
    return rows


def synthetic_run(root: Path, name: str = "run_a", *, model: str = "model-a", seed: int = 0,
                  n_relations: int = 3, per_relation: int = 10, checksum: str = "bench-1",
                  shift: float = 0.0, noise: float = 0.6, internal: bool = True,
                  extras: bool = True, facts: list[tuple[str, str]] | None = None) -> Path:
    """Write a run directory with hand-made metric files (see the module docstring).

    Args:
        root: parent folder; the run is ``root / name``.
        model: the model name in every file.
        seed: of the random values (two seeds = two "models" on the same facts).
        checksum: the benchmark checksum of the manifest.
        shift: added to BCS and ISS (a better or worse model).
        noise: family noise of the centroids (lower = more stable geometry).
        internal: write ISS/KTS files and centroids.
        extras: write sanity checks, calibration and judged records.
        facts: the fact set (default :func:`synthetic_facts`).
    """
    run = root / name
    mdir = run / "metrics"
    rng = np.random.default_rng(seed)
    facts = facts or synthetic_facts(n_relations, per_relation)
    complete = np.array([k % 7 != 3 for k in range(len(facts))])
    write_json(run / "evaluation_manifest.json",
               {"model": {"name": model}, "benchmark": {"checksum": checksum}, "stages": {}})
    write_jsonl(mdir / "behavioral_per_fact.jsonl",
                _behavior_rows(model, facts, rng, complete, shift))
    if internal:
        per_fact, per_layer = _iss_rows(model, facts, rng, complete, shift)
        write_jsonl(mdir / "iss_per_fact.jsonl", per_fact)
        write_jsonl(mdir / "iss_per_fact_layer.jsonl", per_layer)
        write_json(mdir / "iss_model_summary.json", {"model": model, "iss": 0.35})
        _centroids(mdir / "hidden_family_centroids", facts, complete, rng, noise)
        write_json(mdir / "kts_model_summary.json", {
            "model": model, "kts": 0.6, "kts_geo": 0.7, "kts_id": 0.5,
            "headline": {"reading": "with_anchor", "coverage": "complete_family"},
            "family_pairs": {}, "selections": {}})
    if extras:
        write_json(mdir / "sanity_checks.json", _sanity())
        write_json(mdir / "calibration_summary.json", _calibration())
        write_jsonl(run / "judged.jsonl", _judged(model, facts))
    return run


# ============================================================================ tiny benchmark
def _tiny_judged_row(q: dict[str, Any], model: str, unstable: bool = False) -> dict[str, Any]:
    good = q["fact_id"] != "fact_000002" or q["condition_family"] == "paraphrase"
    if unstable and q["fact_id"] == "fact_000003" and q["condition_family"] in (
            "format", "context", "multilingual"):
        good = False
    text = XSS if q["fact_id"] == "fact_000002" and q["condition_family"] == "anchor" else (
        q["gold_canonical"] if good else "Madrid")
    return {
        "model": model, "query_id": q["query_id"], "fact_id": q["fact_id"],
        "relation": q["relation"], "condition_family": q["condition_family"],
        "language": q["language"], "use_for_main_forward": q["use_for_main_forward"],
        "use_for_reverse_analysis": q["use_for_reverse_analysis"],
        "use_for_recognition_analysis": q["use_for_recognition_analysis"],
        "answer_in_subject_surface": q["answer_in_subject_surface"], "raw_response": text,
        "generation_config": {"do_sample": False}, "prompt_version": "test-v1",
        "label": "correct" if good else "incorrect", "cluster_id": "GOLD" if good else "WRONG",
        "status": "ANSWER", "confidence": 1.0,
        "correctness": "CORRECT" if good else "INCORRECT", "judge": "hand",
    }


def tiny_run(root: Path, bench_dir: Path, *, model: str = "tiny-model",
             name: str = "tiny", iss_layers: bool = False, unstable: bool = False) -> Path:
    """A run on the tiny benchmark: hand-written judged.jsonl, real behavioural metrics.

    With ``iss_layers``, also a hand-made ``iss_per_fact_layer.jsonl`` (layers 2 and 3; fact
    ``k`` gets ISS ``0.2 k`` and ``0.2 k + 0.1``). With ``unstable``, fact_000003 is answered
    wrongly in format, context and multilingual (2 of 5 families right: ``Unstable``).
    """
    _, queries = tiny_benchmark_rows()
    run = root / name
    write_jsonl(run / "judged.jsonl", [_tiny_judged_row(q, model, unstable) for q in queries])
    write_json(run / "evaluation_manifest.json",
               {"model": {"name": model}, "stages": {},
                "benchmark": {"checksum": load_benchmark(bench_dir).checksum(),
                              "path": str(bench_dir)}})
    run_behavior_metrics(run, main_families=FAMILIES, tau_b=0.8, tau_sensitivity=[0.7, 0.9])
    if iss_layers:
        write_jsonl(run / "metrics" / "iss_per_fact_layer.jsonl", [
            {"model": model, "fact_id": f["fact_id"], "relation": f["relation"]["relation_id"],
             "layer": layer, "iss": 0.2 * k + 0.1 * (layer - LAYERS[0])}
            for k, f in enumerate(tiny_benchmark_rows()[0]) for layer in LAYERS])
    return run


def hostile_tiny_run(root: Path, bench: Path, **kw: Any) -> Path:
    """:func:`tiny_run` with fact_000002 context answer :data:`HOSTILE` (anchor: XSS)."""
    run = tiny_run(root, bench, **kw)
    path = run / "judged.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    for r in rows:
        if r["fact_id"] == "fact_000002" and r["condition_family"] == "context":
            r["raw_response"] = HOSTILE
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    drop_provenance(run)  # judged.jsonl is edited after the metrics: a hand-made run
    return run


def page_data(html: str) -> dict[str, Any]:
    """The JSON document inlined in an explorer page."""
    m = re.search(r'<script type="application/json" id="fks-data">(.*?)</script>', html, re.S)
    assert m is not None
    return json.loads(m.group(1))
