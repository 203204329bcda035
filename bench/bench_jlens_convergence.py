"""How many prompts J-Lens needs: J_n against J_1024, and ISS with each (issue 29).

One pass over the stratified 1,024-prompt sample of a finished run's benchmark accumulates the
per-prompt Jacobians into the means of the nested samples n = 64, 128, 256, 512 and 1,024
(:func:`fks.hidden.jlens.sample_jlens_queries` takes its first n of the same seeded
round-robin, checked here). It reports each J_n's error against J_1024 (max and relative
Frobenius over the window layers), then writes each J_n into a hard-linked copy of the run and
reruns ``metrics --part internal`` there: ISS with its interval per n. By hand:

    python bench/bench_jlens_convergence.py RUNS/gemma-3-270m --model gemma-3-270m --out /tmp/jc
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import time
from pathlib import Path

SIZES = (64, 128, 256, 512, 1024)


def main() -> None:
    import numpy as np
    import torch

    from fks.configs import load_configs
    from fks.data.load import load_benchmark
    from fks.generate.backends.hf import HFBackend
    from fks.generate.prompts import build_prompt, encode_prompt
    from fks.hidden.jlens import _frozen, prompt_jacobians, sample_jlens_queries, save_jlens
    from fks.io import read_json
    from fks.metrics.internal import run_internal_metrics
    from fks.provenance import record_files

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run")
    p.add_argument("--model", default="gemma-3-270m")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    run, out = Path(args.run), Path(args.out)
    configs = load_configs()
    bench = load_benchmark(run / "benchmark") if (run / "benchmark").is_dir() else None
    manifest = read_json(run / "evaluation_manifest.json")
    bench = bench or load_benchmark(manifest["benchmark"]["path"])
    old = read_json(run / "jlens" / "manifest.json")
    layers, seed = old["layers"], old["seed"]
    samples = {n: sample_jlens_queries(bench.queries, n, seed) for n in SIZES}
    ids = {n: {q.query_id for q in s} for n, s in samples.items()}
    nested = all(ids[a] <= ids[b] for a, b in zip(SIZES, SIZES[1:], strict=False))
    entry = configs.models.find(args.model)
    backend = HFBackend(entry.path, generation=configs.models.generation, device="cpu",
                        dtype="float32")
    model, tok = backend.model, backend.tokenizer
    d = model.config.hidden_size
    acc = {n: {x: torch.zeros(d, d) for x in layers} for n in SIZES}
    started = time.perf_counter()
    with _frozen(model):
        for i, q in enumerate(samples[SIZES[-1]]):
            toks, _ = encode_prompt(tok, build_prompt(q), configs.models.generation.max_prompt_len)
            J = prompt_jacobians(model, toks, layers)
            for n in SIZES:
                if q.query_id in ids[n]:
                    for x in layers:
                        acc[n][x] += J[x]
            if i % 64 == 63:
                print(f"{i + 1} prompts, {time.perf_counter() - started:.0f} s", flush=True)
    means = {n: {x: (acc[n][x] / len(samples[n])).numpy() for x in layers} for n in SIZES}
    ref = means[SIZES[-1]]
    result: dict = {"run": str(run), "layers": layers, "nested_samples": nested,
                    "fit_seconds": round(time.perf_counter() - started, 1), "by_n": {}}
    for n in SIZES:
        err = max(float(np.abs(means[n][x] - ref[x]).max()) for x in layers)
        rel = float(np.mean([np.linalg.norm(means[n][x] - ref[x])
                             / np.linalg.norm(ref[x] - np.eye(d)) for x in layers[:-1]]))
        copy = out / f"n{n}" / run.name
        if copy.parent.exists():
            shutil.rmtree(copy.parent)
        copy.parent.mkdir(parents=True)
        subprocess.run(["cp", "-al", str(run), str(copy)], check=True)
        info = {k: v for k, v in old.items() if k not in ("sha256",)}
        info.update(n=len(samples[n]), sample_query_ids=[q.query_id for q in samples[n]])
        save_jlens(copy, means[n], info)
        record_files(copy, "jlens", {})
        summary = run_internal_metrics(copy, benchmark=bench, configs=configs)
        per_fact = {r["fact_id"]: r.get("iss") for r in map(json.loads, (
            copy / "metrics" / "iss_per_fact.jsonl").read_text().splitlines())}
        checks = (summary.get("sanity") or {}).get("checks") or {}
        result["by_n"][n] = {
            "max_abs_vs_1024": err, "rel_frob_vs_1024_of_J_minus_I": rel,
            "iss": summary["iss"].get("iss"), "kts": (summary.get("kts") or {}).get("kts"),
            "sanity": {k: (v or {}).get("status") for k, v in checks.items()},
            "per_fact": per_fact}
    ref_facts = result["by_n"][SIZES[-1]]["per_fact"]
    for n in SIZES:
        mine = result["by_n"][n].pop("per_fact")
        diffs = [abs(mine[f] - ref_facts[f]) for f in ref_facts
                 if mine.get(f) is not None and ref_facts[f] is not None]
        result["by_n"][n]["per_fact_iss_max_abs_vs_1024"] = max(diffs) if diffs else None
        result["by_n"][n]["per_fact_iss_mean_abs_vs_1024"] = (sum(diffs) / len(diffs)
                                                              if diffs else None)
    text = json.dumps(result, indent=1, default=str)
    (out / "convergence.json").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
