"""Benchmark: the relation-clustered bootstrap at full scale (run by hand, not by pytest).

Synthetic data shaped like the benchmark: 2,592 facts in 21 relations of uneven size, per-fact
BCS / BES / ISS / behaviour indicators, and family centroids of 5 condition families (10 KTS
pairs; multilingual missing for ~7 % of the facts, as in the published coverage) at one layer.
Measures 1,000 replicates of every headline figure (fact means, relation macros, KTS-Geo by
weighted Spearman on the stored per-relation distance orders, KTS-ID, composite), in both
coverage modes, against the goal of <= 60 s; then times a naive per-replicate loop (expand the
resample, rebuild each relation's distance vectors, scipy Spearman, argmax retrieval) on a few
replicates and reports the speed ratio on the same draws, after checking that both agree.

    /root/venv/bin/python bench/bench_bootstrap.py [--replicates 1000] [--naive 10]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import scipy.stats

from fks.metrics.stats.clustered_bootstrap import (
    KtsSpace,
    draw_clusters,
    fact_estimates,
    kts_bootstrap,
)

N_FACTS, N_REL, T, K_DIM = 2592, 21, 5, 64


def synthetic(seed: int = 0):
    """Facts, per-fact values and a one-layer centroid space with planted structure."""
    rng = np.random.default_rng(seed)
    weights = rng.gamma(1.5, size=N_REL)
    sizes = 20 + rng.multinomial(N_FACTS - 20 * N_REL, weights / weights.sum())
    rel = np.repeat([f"rel{r:02d}" for r in range(N_REL)], sizes)
    bcs = rng.beta(5, 2, size=N_FACTS)
    values = {"bcs": bcs, "bes": np.clip(bcs - rng.uniform(0, 0.2, N_FACTS), 0, 1),
              "iss": rng.normal(0.3, 0.25, N_FACTS), "anchor_accuracy": (bcs > 0.5) * 1.0}
    for g, key in enumerate(("scr", "swr", "sar", "ur")):
        values[key] = (np.minimum((bcs * 4).astype(int), 3) == g) * 1.0
    base = rng.normal(size=(N_FACTS, K_DIM))
    V = (base[:, None, :] + 1.6 * rng.normal(size=(N_FACTS, T, K_DIM))).astype(np.float32)
    has = np.ones((N_FACTS, T), dtype=bool)
    has[rng.random(N_FACTS) < 0.073, T - 1] = False  # multilingual: 2,402 of 2,592
    has[0, 3] = False  # context: 2,591
    space = KtsSpace(np.array([f"fact_{i:06d}" for i in range(N_FACTS)]),
                     ("anchor", "paraphrase", "format", "context", "multilingual"), (0,),
                     has, lambda layer: V)
    return rel, values, space, sizes


def vectorised(rel, values, space, n_resamples: int, mode: str):
    keep = space.has.all(axis=1) if mode == "complete_family" else np.ones(len(rel), bool)
    sub = space.subset(keep)
    draws = draw_clusters(rel[keep], n_resamples=n_resamples, seed=20260101)
    est = fact_estimates(draws, {k: v[keep] for k, v in values.items()}, key="bench")
    res = kts_bootstrap(sub, draws)
    return draws, est, res, keep


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def naive_replicate(draws, b, values, V, has, rel, min_facts=5):
    """One replicate the slow way: expanded resample, per-slot scipy Spearman and argmax."""
    slots = draws.replicate(b)
    expanded = np.concatenate([f for _, f in slots])
    out = {"bcs": float(np.mean(values["bcs"][expanded]))}
    geo, ident = [], []
    for a in range(T):
        for c in range(a + 1, T):
            rhos, ids = [], []
            for _, facts in slots:
                shared = np.flatnonzero((rel == rel[facts[0]]) & has[:, a] & has[:, c])
                if len(shared) < min_facts:
                    continue
                drawn = facts[np.isin(facts, shared)]
                va, vc = _unit(V[drawn, a]), _unit(V[drawn, c])
                iu = np.triu_indices(len(drawn), k=1)
                keep = drawn[iu[0]] != drawn[iu[1]]
                da, dc = (1 - va @ va.T)[iu][keep], (1 - vc @ vc.T)[iu][keep]
                if len(np.unique(drawn)) >= 3:
                    rhos.append(scipy.stats.spearmanr(da, dc).statistic)
                sa, sc = _unit(V[shared, a]), _unit(V[shared, c])
                sim = sa @ sc.T
                gold = np.arange(len(shared))
                hit = 0.5 * ((np.argmax(sim, 1) == gold) * 1.0 + (np.argmax(sim, 0) == gold))
                pos = np.searchsorted(shared, drawn)
                chance = 1 / len(shared)
                ids.append(np.clip((hit[pos].mean() - chance) / (1 - chance + 1e-12), 0, 1))
            geo.append(np.mean(rhos))
            ident.append(np.mean(ids))
    out["kts_geo_raw_spearman"] = float(np.mean(geo))
    out["kts_id"] = float(np.mean(ident))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=1000)
    ap.add_argument("--naive", type=int, default=10, help="replicates of the naive loop")
    args = ap.parse_args()
    rel, values, space, sizes = synthetic()
    print(f"facts {N_FACTS}, relations {N_REL} (sizes {sizes.min()}..{sizes.max()}), "
          f"families {T} ({T * (T - 1) // 2} pairs), 1 layer, d={K_DIM}; "
          f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} (shared machine)")
    total = 0.0
    for mode in ("complete_family", "full_set"):
        t0 = time.perf_counter()
        draws, est, res, keep = vectorised(rel, values, space, args.replicates, mode)
        dt = time.perf_counter() - t0
        total += dt
        s = res.summary()
        print(f"{mode:16s} {args.replicates} replicates: {dt:6.1f} s  (facts {keep.sum()}, "
              f"BCS {est['bcs'].point:.3f}, KTS {float(s['kts']):.3f}, "
              f"KTS-Geo rho {float(s['kts_geo_raw_spearman']):.3f}, "
              f"KTS-ID {float(s['kts_id']):.3f})")
    print(f"both coverage modes: {total:.1f} s (goal: <= 60 s per mode)")
    # naive loop on a few replicates of the full-set draws, checked against the fast path
    V = np.asarray(space.load(0), dtype=np.float64)
    t0 = time.perf_counter()
    naive = [naive_replicate(draws, b, values, V, space.has, rel) for b in range(args.naive)]
    per_naive = (time.perf_counter() - t0) / args.naive
    fast = res.summary(replicates=True)
    fm = est["bcs"].replicates
    for b, nv in enumerate(naive):
        assert abs(nv["bcs"] - fm[b]) < 1e-9
        assert abs(nv["kts_geo_raw_spearman"] - fast["kts_geo_raw_spearman"][b]) < 1e-4
        assert abs(nv["kts_id"] - fast["kts_id"][b]) < 1e-9
    per_fast = dt / args.replicates
    print(f"naive loop: {per_naive:.2f} s per replicate (x{args.replicates} = "
          f"{per_naive * args.replicates / 60:.0f} min); vectorised {per_fast * 1e3:.1f} ms per "
          f"replicate; ratio {per_naive / per_fast:.0f}x (same draws, results agree)")


if __name__ == "__main__":
    main()
