"""Builds the §18.1-18.5 controls on the representative layer and applies the checks.

The controls and pass rules are described in :mod:`fks.metrics._sanity`. Everything here is
scored on the headline selection (the configured reading, the first coverage mode, all facts)
with the same vectorised ISS/KTS code as the main figures. Randomness: ``numpy`` generators
seeded with ``[configs.metrics.whitening.seed, k]`` (``k`` = 1 query shuffle, 2 label shuffle,
3 random negatives), so reruns give the same controls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from fks.metrics._negatives import random_negatives
from fks.metrics._sanity import (
    SanityTolerances,
    check_duplicate_query,
    check_label_shuffle,
    check_query_shuffle,
    check_raw_vs_transported,
    check_relation_negatives,
    summarize_checks,
)
from fks.metrics._scores import (
    BlockGrams,
    Negatives,
    iss_from_pairs,
    kts_macro,
    kts_pair,
    pair_scores,
)
from fks.metrics._space import Design, Residualizer, Whitening, embed, family_centroids

if TYPE_CHECKING:
    from fks.metrics._internal_engine import _Context

__all__ = ["permute_within", "headline_scores", "run_sanity_checks"]


def permute_within(codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Draw a random permutation ``perm`` with ``codes[perm] == codes``.

    Rows are shuffled only among rows of the same code (stratum).
    """
    n = len(codes)
    shuffled = np.lexsort((rng.random(n), codes))
    base = np.argsort(codes, kind="stable")
    perm = np.empty(n, dtype=np.int64)
    perm[base] = shuffled
    return perm


def _mean(x: np.ndarray) -> float | None:
    return float(np.mean(x)) if len(x) else None


def headline_scores(V: np.ndarray, design: Design, neg: Negatives, ctx: _Context,
                    with_kts: bool = True) -> dict[str, Any]:
    """ISS and KTS of the headline selection for centroids ``V`` (one layer)."""
    m = ctx.configs.metrics
    sel = ctx.selections[0]
    select = ctx.reading_pairs[sel.reading]
    grams = BlockGrams(V, ctx.neg.blocks)  # relation blocks (KTS, same-relation negatives)
    iss = iss_from_pairs(pair_scores(V, design.has, neg, ctx.pairs, grams), select, m.eps)
    keep = sel.mask & iss["defined"]
    out: dict[str, Any] = {
        "iss": _mean(iss["iss"][keep]), "s_positive": _mean(iss["s_positive"][keep]),
        "s_background": _mean(iss["s_background"][keep]), "n_facts": int(keep.sum()),
        "per_fact_iss": iss["iss"],
    }
    if not with_kts:
        return out
    macros = []
    for p in np.flatnonzero(select):
        i, j = ctx.pairs[p]
        shared = sel.mask & design.has[:, i] & design.has[:, j]
        macros.append(kts_macro(kts_pair(grams, i, j, shared, design.relations,
                                         min_facts=m.kts_geo_min_facts), m.eps))
    for key in ("kts_geo_raw_spearman", "kts_id", "top1", "chance", "kts"):
        vals = [mm[key] for mm in macros if mm[key] is not None]
        out[key] = float(np.mean(vals)) if vals else None
    return out


def _public(scores: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in scores.items() if k != "per_fact_iss"}


def _reembed(ctx: _Context, layer: int, rows: np.ndarray, relation: np.ndarray,
             family: np.ndarray, res: Residualizer, wh: Whitening) -> np.ndarray:
    """Embed store rows one at a time through the fitted residualisation and whitening."""
    from fks.metrics._internal_engine import load_layer

    eps = ctx.configs.metrics.eps
    x = load_layer(ctx.store, layer, ctx.design, rows=rows)
    out = np.empty((len(rows), wh.k))
    for k in range(len(rows)):
        xi = res.apply_(x[k:k + 1].copy(), relation[k:k + 1], family[k:k + 1])
        z = (xi @ wh.matrix)[0].astype(np.float64)
        out[k] = z / max(float(np.linalg.norm(z)), eps)
    return out


def _duplicate_check(ctx: _Context, layer: int, q: np.ndarray, V: np.ndarray,
                     res: Residualizer, wh: Whitening, tol: SanityTolerances) -> dict[str, Any]:
    """§18.2 (a) one family re-embedded row by row; (b) identical prompt strings."""
    from fks.generate.prompts import build_prompt

    design, eps = ctx.design, ctx.configs.metrics.eps
    in_c, code = design.centroid_codes()
    t = 0
    members = np.flatnonzero(in_c & (code == t))
    dup = _reembed(ctx, layer, design.rows[members], design.relation[members],
                   design.family[members], res, wh)
    cos_rows = np.einsum("ij,ij->i", dup, q[members].astype(np.float64))
    C = np.zeros((len(design.fact_ids), dup.shape[1]))
    np.add.at(C, design.fact[members], dup)
    C /= np.maximum(np.linalg.norm(C, axis=1), eps)[:, None]
    has_t = design.has[:, t]
    s_dup = np.einsum("ij,ij->i", C[has_t], V[has_t, t])
    # (b) identical prompts: the raw states, grand mean removed, whitened, compared
    by_id = {qq.query_id: qq for qq in ctx.bench.queries}
    groups: dict[str, list[int]] = {}
    for k, qid in enumerate(design.query_ids.tolist()):
        groups.setdefault(build_prompt(by_id[qid]), []).append(k)
    multi = [g for g in groups.values() if len(g) > 1]
    natural = None
    if multi:
        a = np.array([g[0] for g in multi for _ in g[1:]])
        b = np.array([x for g in multi for x in g[1:]])
        from fks.metrics._internal_engine import load_layer

        xa = load_layer(ctx.store, layer, design, rows=design.rows[a]) - res.mu.astype(np.float32)
        xb = load_layer(ctx.store, layer, design, rows=design.rows[b]) - res.mu.astype(np.float32)
        za, zb = (xa @ wh.matrix).astype(np.float64), (xb @ wh.matrix).astype(np.float64)
        natural = np.einsum("ij,ij->i", za, zb) / np.maximum(
            np.linalg.norm(za, axis=1) * np.linalg.norm(zb, axis=1), eps)
    out = check_duplicate_query(cos_rows, s_dup, natural, len(multi), tol)
    out["family"] = design.families[t]
    return out


def _raw_vs_transported(ctx: _Context, layer: int, main_iss: np.ndarray,
                        tol: SanityTolerances) -> dict[str, Any]:
    """§18.5: recompute per-fact ISS with the other transport on the same layer."""
    from fks.metrics._internal_engine import _load_transport, load_layer

    m = ctx.configs.metrics
    d = ctx.store.d_model
    if m.whitening.method == "pca" and min(m.whitening.pca_max_dim, d) >= d:
        # PCA whitening to full rank maps z and J z to the same point up to a rotation for any
        # invertible J, so raw and transported ISS are equal by construction (not a failure)
        return check_raw_vs_transported(
            None, None, tol,
            reason=f"full-rank PCA whitening (k = d = {d} <= pca_max_dim = "
                   f"{m.whitening.pca_max_dim}) is invariant to any invertible transport, so "
                   "raw and J-transported ISS are equal by construction; the check needs "
                   "d > pca_max_dim or whitening.method: shrinkage")
    if ctx.jlens is not None:
        J_other = None
    else:
        if not (ctx.run_dir / "jlens").is_dir():
            return check_raw_vs_transported(None, None, tol,
                                            reason="run has no J-Lens fit (raw transport only)")
        J_other = _load_transport(ctx.run_dir, "jlens", [layer], ctx.store.d_model)[layer]
    x = load_layer(ctx.store, layer, ctx.design)
    q, _, _ = embed(x, ctx.design, J_other, m.whitening, m.eps)
    del x
    other = headline_scores(family_centroids(q, ctx.design, m.eps), ctx.design, ctx.neg, ctx,
                            with_kts=False)["per_fact_iss"]
    raw, transported = (other, main_iss) if ctx.jlens is not None else (main_iss, other)
    mask = ctx.selections[0].mask
    return check_raw_vs_transported(raw[mask], transported[mask], tol)


def _label_shuffle(ctx: _Context, layer: int, q: np.ndarray, real: dict[str, Any],
                   tol: SanityTolerances, rng: np.random.Generator) -> dict[str, Any]:
    """Run §18.3 with family labels permuted within each fact.

    The centroids are rebuilt (the criterion), and the whole pipeline is refitted on the
    shuffled labels (reported only).
    """
    from fks.metrics._internal_engine import load_layer

    m = ctx.configs.metrics
    perm = permute_within(ctx.design.fact, rng)
    design = ctx.design.with_family(ctx.design.family[perm])
    shuffled = headline_scores(family_centroids(q, design, m.eps), design, ctx.neg, ctx)
    x = load_layer(ctx.store, layer, design)
    J = None if ctx.jlens is None else ctx.jlens[layer]
    q2, _, _ = embed(x, design, J, m.whitening, m.eps)
    del x
    refit = headline_scores(family_centroids(q2, design, m.eps), design, ctx.neg, ctx)
    return check_label_shuffle(_public(real), _public(shuffled), tol, refit=_public(refit))


def _centring_allowance(design: Design, mask: np.ndarray) -> float:
    """Mean over the facts of ``mask`` of ``1 / (n_r - 1)`` (their relation's size)."""
    sizes = np.bincount(design.fact_relation, minlength=len(design.relations))
    n = sizes[design.fact_relation[mask]]
    return float(np.mean(1.0 / np.maximum(n - 1, 1))) if len(n) else 0.0


def run_sanity_checks(ctx: _Context, layer: int, q: np.ndarray, V: np.ndarray,
                      iss: dict[str, Any], res: Residualizer, wh: Whitening,
                      tol: SanityTolerances) -> dict[str, Any]:
    """All five §18.1-18.5 checks on ``layer`` (its unit query rows ``q`` and centroids ``V``)."""
    m, design = ctx.configs.metrics, ctx.design
    seed = m.whitening.seed
    real = headline_scores(V, design, ctx.neg, ctx)
    # 18.1 query shuffle within (relation, family) strata
    strata = design.relation * len(design.all_families) + design.family
    perm = permute_within(strata, np.random.default_rng([seed, 1]))
    shuffled = headline_scores(family_centroids(q[perm], design, m.eps), design, ctx.neg, ctx)
    # 18.4 random negatives from other relations, as many per fact as the stored lists
    rand_neg = random_negatives(design.fact_relation, ctx.neg.counts,
                                int(np.random.default_rng([seed, 3]).integers(2**32)))
    random_scores = headline_scores(V, design, rand_neg, ctx, with_kts=False)
    checks = {
        "query_shuffle": check_query_shuffle(_public(real), _public(shuffled), tol),
        "duplicate_query": _duplicate_check(ctx, layer, q, V, res, wh, tol),
        "condition_label_shuffle": _label_shuffle(ctx, layer, q, real, tol,
                                                  np.random.default_rng([seed, 2])),
        "relation_matched_negatives": check_relation_negatives(
            _public(headline_scores(V, design, ctx.neg, ctx, with_kts=False)),
            _public(random_scores), tol,
            _centring_allowance(design, ctx.selections[0].mask)),
        "raw_vs_transported": _raw_vs_transported(ctx, layer, real["per_fact_iss"], tol),
    }
    sel = ctx.selections[0]
    return {
        "layer": layer, "depth": layer / max(ctx.store.n_layers - 1, 1), "seed": seed,
        "selection": sel.name, "transport": ctx.transport,
        "layer_rule": "the window layer whose depth is closest to the middle of the window",
        "tolerances": tol.as_dict(), "checks": checks, "summary": summarize_checks(checks),
    }
