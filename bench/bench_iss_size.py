"""ISS and KTS against the run's size: candidate whitening fits on planted states (issue 27).

    .venv/bin/python bench/bench_iss_size.py [--d 576 2304] [--signal 0 0.3 1 3]
        [--facts 20 50 100 200 600 2592] [--out bench_iss_size.json]

Run by hand (minutes; not by pytest). One generative model of planted states
(:mod:`fks.metrics.internal.synthetic`'s ``h = s a_f + b_t + c_r + 3 m + e``, float16-rounded as
the store keeps them) over a published-shaped benchmark of 2,592 facts and 22 relations; a run
of ``F`` facts is the first ``F`` of ``--limit``'s round-robin order, with the same states for
the same query at every size. Each candidate fits the §7.4 residualisation and the §7.5 PCA
whitening (k = min(512, d), fks's own rank rules) on some rows and scores the run's facts with
fks's own centroid, ISS and KTS code (headline: complete-family facts; KTS: every family pair
on its shared facts, relation-macro, ``kts_geo_min_facts = 5``):

* ``run``: fitted on the run's own main queries (the spec's rule, fks before issue 27);
* ``fact_k``: the same with ``k = min(512, d) F / 2592`` (the full benchmark's facts per
  whitened dimension);
* ``crossfit``: five folds of facts (dealt in relation order); a fact is scored in the space
  fitted on the other four folds;
* ``reference``: fitted once on the full benchmark's main queries (the reference pool) and
  applied to the run's (fks's rule since issue 27); at 2,592 facts it *is* ``run``;
* ``unwhitened``: residualised (on the reference pool) and L2-normalised, not whitened.

For ``reference`` and ``unwhitened`` KTS-ID ranks each fact among the pool's facts of its
relation (:class:`fks.metrics.internal.scores.PoolIdentity`, fks's rule since stop 33);
``reference_run_id`` is the reference fit with the spec's identification among the run's own
facts (fks's rule before), to show what the pool identification changes.

Printed: one line per (d, s, F) and, at the end, the largest deviation of each candidate from
its own 2,592-fact value over F >= 200, F = 50 and s = 0.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from fks.configs import WhiteningConfig
from fks.metrics.internal.coverage import complete_family_mask
from fks.metrics.internal.negatives import negatives_from_lists, sample_negatives
from fks.metrics.internal.scores import (
    BlockGrams,
    PoolIdentity,
    iss_from_pairs,
    kts_macro,
    kts_pair,
    pair_scores,
)
from fks.metrics.internal.space import (
    Design,
    Residualizer,
    Whitening,
    family_centroids,
    fit_residualizer,
    fit_whitening,
    pairs_of,
    project_normalize,
    residual_rank,
    rounding_variance,
)
from fks.metrics.internal.synthetic import published_counts

FAMS = ("anchor", "paraphrase", "format", "context", "multilingual")
N_FACTS, N_REL, EPS, MIN_FACTS = 2592, 22, 1e-12, 5


def relation_of_facts() -> np.ndarray:
    rng = np.random.default_rng(0)
    w = rng.uniform(0.3, 1.7, N_REL)
    sizes = np.maximum(5, np.floor(w / w.sum() * N_FACTS)).astype(int)
    sizes[np.argmax(sizes)] += N_FACTS - sizes.sum()
    return np.repeat(np.arange(N_REL), sizes)


FACT_REL = relation_of_facts()
COUNTS = published_counts(N_FACTS, 1)


def round_robin() -> np.ndarray:
    members = [np.flatnonzero(FACT_REL == r) for r in range(N_REL)]
    order, depth = [], 0
    while len(order) < N_FACTS:
        order += [int(m[depth]) for m in members if depth < len(m)]
        depth += 1
    return np.array(order)


def design_for(facts: np.ndarray) -> tuple[Design, np.ndarray]:
    """The design of a run over ``facts`` (global indices; benchmark order) and its row facts."""
    facts = np.sort(facts)
    fact, fam = [], []
    for j, f in enumerate(facts):
        for t, name in enumerate(FAMS):
            fact += [j] * int(COUNTS[name][f])
            fam += [t] * int(COUNTS[name][f])
    fact, fam = np.array(fact), np.array(fam)
    rels = np.unique(FACT_REL[facts])
    fr = np.searchsorted(rels, FACT_REL[facts])
    d = Design(rows=np.arange(len(fact)), query_ids=np.arange(len(fact)).astype(str),
               fact=fact, relation=fr[fact], family=fam,
               fact_ids=np.array([f"fact_{f:06d}" for f in facts]), fact_relation=fr,
               copy=np.zeros(len(facts), bool), relations=tuple(f"rel_{r:02d}" for r in rels),
               all_families=FAMS, families=FAMS)
    return d, facts[fact]


class Planted:
    """One fixed generative model; a query's state depends only on its fact and row."""

    def __init__(self, d: int, signal: float, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.d, self.s, self.seed = d, signal, seed
        self.A = rng.standard_normal((N_FACTS, d), dtype=np.float32)
        self.B = rng.standard_normal((len(FAMS), d), dtype=np.float32)
        self.C = rng.standard_normal((N_REL, d), dtype=np.float32)
        self.m = rng.standard_normal(d, dtype=np.float32)

    def states(self, design: Design, gfact: np.ndarray) -> np.ndarray:
        x = np.empty((design.n, self.d), np.float32)
        for f in np.unique(gfact):
            idx = np.flatnonzero(gfact == f)
            e = np.random.default_rng([self.seed, 7, int(f)]).standard_normal(
                (len(idx), self.d), dtype=np.float32)
            x[idx] = (e + self.s * self.A[f] + self.B[design.family[idx]] + self.C[FACT_REL[f]]
                      + 3.0 * self.m)
        return x.astype(np.float16).astype(np.float32)


def fit(x: np.ndarray, design: Design, rows: np.ndarray | None = None,
        k: int = 512) -> tuple[Residualizer, Whitening]:
    rows = np.arange(design.n) if rows is None else rows
    R, T = len(design.relations), len(FAMS)
    xs = x[rows]
    rvar = rounding_variance(xs, np.float16)
    res = fit_residualizer(xs, design.relation[rows], design.family[rows], R, T)
    xb = res.apply_(xs.copy(), design.relation[rows], design.family[rows])
    wh = fit_whitening(xb, None, WhiteningConfig(pca_max_dim=k),
                       rank_bound=residual_rank(design.relation[rows], design.family[rows], R, T),
                       rounding_var=rvar)
    return res, wh


def scores(q: np.ndarray, design: Design, pool: tuple | None = None
           ) -> tuple[np.ndarray, np.ndarray, float | None]:
    """Per-fact ISS, the headline mask and the mean KTS over the family pairs.

    ``pool``: ``(Vp, pool_design)``, the pool's centroids in the same space; KTS-ID then ranks
    among the pool's facts of each relation.
    """
    V = family_centroids(q, design, EPS)
    neg = negatives_from_lists(
        sample_negatives(design.fact_ids.tolist(),
                         [design.relations[r] for r in design.fact_relation],
                         max_per_fact=100, seed=0),
        design.fact_ids.tolist(), design.fact_relation)
    pairs = pairs_of(FAMS)
    grams = BlockGrams(V, neg.blocks)
    ident = None
    if pool is not None:
        Vp, pd = pool
        fact_pos = np.array([int(f[5:]) for f in design.fact_ids])  # pool = every fact, sorted
        ident = PoolIdentity.from_pool(Vp, pd.has, pd.fact_relation, fact_pos, pairs)
    r = iss_from_pairs(pair_scores(V, design.has, neg, pairs, grams), np.ones(len(pairs), bool),
                       EPS)
    sel = complete_family_mask(design.has, design.families, FAMS) & r["defined"]
    kts = [kts_macro(kts_pair(grams, i, j, design.has[:, i] & design.has[:, j],
                              design.relations, min_facts=MIN_FACTS, pool=ident), EPS)["kts"]
           for i, j in pairs]
    kts = [v for v in kts if v is not None]
    return r["iss"], sel, float(np.mean(kts)) if kts else None


def apply_fit(x: np.ndarray, relation: np.ndarray, family: np.ndarray, res: Residualizer,
              wh: Whitening | None) -> np.ndarray:
    xb = res.apply_(x.copy(), relation, family)
    if wh is None:
        return xb / np.maximum(np.linalg.norm(xb, axis=1, keepdims=True), EPS)
    return project_normalize(xb, wh, EPS)


def candidates(x: np.ndarray, design: Design, F: int, pool: tuple) -> dict[str, dict]:
    """Every candidate's ISS and KTS on the run ``x``; ``pool``: the pool's fit and centroids."""
    out: dict[str, dict] = {}

    def record(name: str, iss: np.ndarray, sel: np.ndarray, kts: float | None,
               extra: dict | None = None) -> None:
        out[name] = {"iss": float(np.mean(iss[sel])) if sel.any() else None, "kts": kts,
                     **(extra or {})}

    res, wh = fit(x, design)
    iss, sel, kts = scores(apply_fit(x, design.relation, design.family, res, wh), design)
    record("run", iss, sel, kts, {"design_determined": wh.design_determined, "k": wh.k})
    k_f = max(1, round(512 * F / N_FACTS))
    res, wh = fit(x, design, k=k_f)
    record("fact_k", *scores(apply_fit(x, design.relation, design.family, res, wh), design),
           {"k": wh.k})
    if F < N_FACTS:
        # folds dealt over the facts in relation order (stratified by relation)
        fold = np.empty(len(design.fact_ids), int)
        fold[np.argsort(design.fact_relation, kind="stable")] = np.arange(len(fold)) % 5
        iss_cf, sel_cf = np.full(len(fold), np.nan), np.zeros(len(fold), bool)
        for j in range(5):
            res, wh = fit(x, design, rows=np.flatnonzero(fold[design.fact] != j))
            iss, sel, _ = scores(apply_fit(x, design.relation, design.family, res, wh), design)
            iss_cf[fold == j], sel_cf[fold == j] = iss[fold == j], sel[fold == j]
        record("crossfit", iss_cf, sel_cf, None)
    res_p, wh_p, pool_rel, Vp, Vp_raw, pool_design = pool
    rel = pool_rel[np.array([int(r[4:]) for r in design.relations])][design.relation]
    q = apply_fit(x, rel, design.family, res_p, wh_p)
    record("reference", *scores(q, design, (Vp, pool_design)))
    record("reference_run_id", *scores(q, design))
    record("unwhitened", *scores(apply_fit(x, rel, design.family, res_p, None), design,
                                 (Vp_raw, pool_design)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--d", type=int, nargs="+", default=[576, 2304])
    ap.add_argument("--signal", type=float, nargs="+", default=[0.0, 0.3, 1.0, 3.0])
    ap.add_argument("--facts", type=int, nargs="+", default=[20, 50, 100, 200, 600, 2592])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    order = round_robin()
    pool_design, pool_gfact = design_for(order)
    pool_rel = np.arange(N_REL)  # the pool has every relation: global code = pool code
    rows = []
    for d in args.d:
        for s in args.signal:
            model = Planted(d, s)
            xp = model.states(pool_design, pool_gfact)
            res_p, wh_p = fit(xp, pool_design)
            Vp = family_centroids(apply_fit(xp, pool_design.relation, pool_design.family,
                                            res_p, wh_p), pool_design, EPS)
            Vp_raw = family_centroids(apply_fit(xp, pool_design.relation, pool_design.family,
                                                res_p, None), pool_design, EPS)
            del xp
            for F in sorted(args.facts):
                t0 = time.perf_counter()
                design, gfact = design_for(order[:F])
                x = model.states(design, gfact)
                c = candidates(x, design, F, (res_p, wh_p, pool_rel, Vp, Vp_raw, pool_design))
                rows.append({"d": d, "signal": s, "facts": F, "main_queries": design.n, **{
                    name: v for name, v in c.items()}})
                cells = "  ".join(
                    f"{n}={v['iss']:.3f}" + ("*" if v.get("design_determined") else "")
                    + (f"/{v['kts']:.3f}" if v.get("kts") is not None else "")
                    for n, v in c.items() if v["iss"] is not None)
                print(f"d={d:4d} s={s:3.1f} F={F:4d} n={design.n:5d}  {cells}  "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)
    print("\nlargest |ISS(F) - ISS(2592)| (and KTS) per candidate:")
    for name in ("run", "fact_k", "crossfit", "reference", "reference_run_id", "unwhitened"):
        for label, pick in (("F>=200, s>0", lambda r: r["facts"] >= 200 and r["signal"] > 0),
                            ("F=50, s>0", lambda r: r["facts"] == 50 and r["signal"] > 0),
                            ("s=0, all F", lambda r: r["signal"] == 0)):
            dev_i, dev_k = [], []
            for r in rows:
                full = next(x for x in rows if x["d"] == r["d"] and x["signal"] == r["signal"]
                            and x["facts"] == N_FACTS)
                ref = full.get(name) or full["run"]
                if name not in r or r["facts"] == N_FACTS or not pick(r):
                    continue
                if r[name]["iss"] is not None and ref["iss"] is not None:
                    dev_i.append(abs(r[name]["iss"] - (0.0 if r["signal"] == 0 and
                                                       label.startswith("s=0") else ref["iss"])))
                if r[name].get("kts") is not None and ref.get("kts") is not None:
                    dev_k.append(abs(r[name]["kts"] - ref["kts"]))
            if dev_i:
                print(f"  {name:10s} {label:12s} ISS {max(dev_i):.3f}"
                      + (f"  KTS {max(dev_k):.3f}" if dev_k else ""))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
