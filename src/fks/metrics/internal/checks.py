"""Builds the §18.1-18.5 controls on the representative layer and applies the checks.

The controls and pass rules are described in :mod:`fks.metrics.internal.sanity`. Everything here is
scored on the headline selection (the configured reading, the first coverage mode, all facts)
with the same vectorised ISS/KTS code as the main figures. Randomness: ``numpy`` generators
seeded with ``[configs.metrics.whitening.seed, k]`` (``k`` = 1 query shuffle, 2 label shuffle,
3 random negatives), so reruns give the same controls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from fks.metrics.internal.negatives import random_negatives
from fks.metrics.internal.sanity import (
    SanityTolerances,
    check_duplicate_query,
    check_label_shuffle,
    check_query_shuffle,
    check_raw_vs_transported,
    check_relation_negatives,
    difference_interval,
    summarize_checks,
)
from fks.metrics.internal.scores import (
    BlockGrams,
    Negatives,
    iss_from_pairs,
    kts_macro,
    kts_pair,
    pair_scores,
)
from fks.metrics.internal.space import Design, Residualizer, Whitening, embed, family_centroids

if TYPE_CHECKING:
    from fks.metrics.internal.context import Context

__all__ = ["permute_within", "headline_scores", "run_sanity_checks", "finish_sanity",
           "transport_ablation_layer", "transport_ablation_reason"]


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


def headline_scores(V: np.ndarray, design: Design, neg: Negatives, ctx: Context,
                    with_kts: bool = True) -> dict[str, Any]:
    """ISS and KTS of the headline selection for centroids ``V`` (one layer).

    ISS: the facts of the headline selection (first coverage mode, all facts). KTS: each pair
    on its own shared facts ``D_t & D_t'`` (spec §8.2, the headline pair figures).
    """
    m = ctx.configs.metrics
    sel = ctx.selections[0]
    select = ctx.reading_pairs[sel.reading]
    grams = BlockGrams(V, ctx.neg.blocks)  # relation blocks (KTS, same-relation negatives)
    iss = iss_from_pairs(pair_scores(V, design.has, neg, ctx.pairs, grams), select, m.eps)
    keep = sel.mask & iss["defined"]
    out: dict[str, Any] = {
        "iss": _mean(iss["iss"][keep]), "s_positive": _mean(iss["s_positive"][keep]),
        "s_background": _mean(iss["s_background"][keep]), "n_facts": int(keep.sum()),
        "per_fact_iss": np.where(sel.mask, iss["iss"], np.nan),
    }
    if not with_kts:
        return out
    macros = []
    for p in np.flatnonzero(select):
        i, j = ctx.pairs[p]
        shared = design.has[:, i] & design.has[:, j]
        macros.append(kts_macro(kts_pair(grams, i, j, shared, design.relations,
                                         min_facts=m.kts_geo_min_facts), m.eps))
    for key in ("kts_geo_raw_spearman", "kts_id", "top1", "chance", "kts"):
        vals = [mm[key] for mm in macros if mm[key] is not None]
        out[key] = float(np.mean(vals)) if vals else None
    return out


def _public(scores: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in scores.items() if k != "per_fact_iss"}


def _project(x: np.ndarray, relation: np.ndarray, family: np.ndarray, res: Residualizer,
             wh: Whitening, eps: float) -> np.ndarray:
    """Raw rows ``x (n, d)`` through the fitted residualisation and whitening, unit rows."""
    xi = res.apply_(np.asarray(x, dtype=np.float32).copy(), relation, family)
    z = (xi @ wh.matrix).astype(np.float64)
    return z / np.maximum(np.linalg.norm(z, axis=1), eps)[:, None]


def _cosines(a: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.einsum("ij,ij->i", a, b) / np.maximum(
        np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), eps)


def _second_pass(ctx: Context, layer: int, q: np.ndarray, V: np.ndarray, res: Residualizer,
                 wh: Whitening) -> tuple[dict[str, Any] | None, str | None]:
    """§18.2 (a): compare ``hidden/duplicate_pass.npz`` (fresh forward passes) with the store."""
    from fks.hidden.extract import DUPLICATE_PASS_NAME
    from fks.metrics.internal.context import load_layer

    design, eps = ctx.design, ctx.configs.metrics.eps
    path = ctx.store.dir / DUPLICATE_PASS_NAME
    if not path.is_file():
        return None, (f"no {DUPLICATE_PASS_NAME} in the hidden store (extracted without the "
                      "second forward pass, or metrics.yaml: sanity.duplicate_sample is 0); "
                      "rerun `fks extract --overwrite`")
    with np.load(path, allow_pickle=False) as z:
        key = f"layer_{layer:03d}"
        if key not in z.files:
            return None, f"{DUPLICATE_PASS_NAME} lacks layer {layer}"
        rows, fresh = np.asarray(z["rows"], np.int64), np.asarray(z[key], np.float32)
        dtype = str(z["compute_dtype"]) if "compute_dtype" in z.files else None
    pos_of = {int(r): k for k, r in enumerate(design.rows.tolist())}
    keep = [k for k, r in enumerate(rows.tolist()) if int(r) in pos_of]
    if not keep:
        return None, "no re-extracted query is a main-forward query of this design"
    pos = np.array([pos_of[int(rows[k])] for k in keep])
    fresh = fresh[keep]
    stored = load_layer(ctx.store, layer, design, rows=design.rows[pos])
    raw = _cosines(stored, fresh, eps)
    dup = _project(fresh, design.relation[pos], design.family[pos], res, wh, eps)
    processed = np.einsum("ij,ij->i", dup, q[pos].astype(np.float64))
    # the query's family centroid with its fresh state in place of the stored one
    in_c, code = design.centroid_codes()
    sp = []
    for k, p in enumerate(pos.tolist()):
        if not in_c[p]:
            continue
        f, t = design.fact[p], code[p]
        members = np.flatnonzero(in_c & (design.fact == f) & (code == t))
        c = q[members].astype(np.float64).sum(axis=0) - q[p] + dup[k]
        c /= max(float(np.linalg.norm(c)), eps)
        sp.append(float(c @ V[f, t].astype(np.float64)))
    return {"raw_cosines": raw, "processed_cosines": processed,
            "duplicate_s_positive": np.array(sp), "compute_dtype": dtype,
            "max_abs_difference": float(np.max(np.abs(stored - fresh)))}, None


def _duplicate_check(ctx: Context, layer: int, q: np.ndarray, V: np.ndarray,
                     res: Residualizer, wh: Whitening, tol: SanityTolerances) -> dict[str, Any]:
    """§18.2 (a) a second forward pass of sampled queries; (b) identical prompt strings."""
    from fks.generate.prompts import build_prompt

    design, eps = ctx.design, ctx.configs.metrics.eps
    fresh, reason = _second_pass(ctx, layer, q, V, res, wh)
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
        from fks.metrics.internal.context import load_layer

        xa = load_layer(ctx.store, layer, design, rows=design.rows[a]) - res.mu.astype(np.float32)
        xb = load_layer(ctx.store, layer, design, rows=design.rows[b]) - res.mu.astype(np.float32)
        natural = _cosines(xa @ wh.matrix, xb @ wh.matrix, eps)
    return check_duplicate_query(fresh, natural, len(multi), tol, reason=reason,
                                 depth=layer + 1)


def transport_ablation_reason(ctx: Context) -> str | None:
    """Why §18.5 cannot apply to this run (None: it can)."""
    m = ctx.configs.metrics
    d = ctx.store.d_model
    if m.whitening.method == "pca" and min(m.whitening.pca_max_dim, d) >= d:
        # PCA whitening to full rank maps z and J z to the same point up to a rotation for any
        # invertible J, so raw and transported ISS are equal by construction (not a failure)
        return (f"full-rank PCA whitening (k = d = {d} <= pca_max_dim = "
                f"{m.whitening.pca_max_dim}) is invariant to any invertible transport, so "
                "raw and J-transported ISS are equal by construction; the check needs "
                "d > pca_max_dim or whitening.method: shrinkage")
    if ctx.jlens is None and not (ctx.run_dir / "jlens").is_dir():
        return "run has no J-Lens fit (raw transport only)"
    return None


def transport_ablation_layer(ctx: Context, layer: int, main: dict[str, Any]
                             ) -> dict[str, Any]:
    """§18.5 on one window layer: the other transport's per-fact ISS and KTS beside ``main``.

    ``main``: :func:`headline_scores` of the layer under the run's transport.
    """
    from fks.metrics.internal.context import load_layer, load_transport

    m = ctx.configs.metrics
    J_other = None if ctx.jlens is not None else \
        load_transport(ctx.run_dir, "jlens", [layer], ctx.store.d_model)[layer]
    x = load_layer(ctx.store, layer, ctx.design)
    q, _, _ = embed(x, ctx.design, J_other, m.whitening, m.eps)
    del x
    other = headline_scores(family_centroids(q, ctx.design, m.eps), ctx.design, ctx.neg, ctx)
    raw, tr = (other, main) if ctx.jlens is not None else (main, other)
    return {"layer": layer, "raw": raw, "transported": tr}


def finish_transport_ablation(ctx: Context, layers: list[dict[str, Any]],
                              tol: SanityTolerances) -> dict[str, Any]:
    """§18.5 over the window: per-fact ISS of both transports on every window layer."""
    reason = transport_ablation_reason(ctx)
    if reason is not None or not layers:
        return check_raw_vs_transported(None, None, tol, reason=reason or "no window layer")
    raw = np.stack([x["raw"]["per_fact_iss"] for x in layers], axis=1)
    tr = np.stack([x["transported"]["per_fact_iss"] for x in layers], axis=1)

    def window(kind: str) -> dict[str, Any]:
        out = {}
        for key in ("iss", "kts", "kts_geo_raw_spearman", "kts_id"):
            vals = [x[kind].get(key) for x in layers if x[kind].get(key) is not None]
            out[key] = float(np.mean(vals)) if vals else None
        out["per_layer"] = {str(x["layer"]): {k: x[kind].get(k) for k in ("iss", "kts")}
                            for x in layers}
        return out

    return check_raw_vs_transported(raw, tr, tol, window={
        "layers": [x["layer"] for x in layers], "raw": window("raw"),
        "transported": window("transported")})


def _label_shuffle(ctx: Context, layer: int, q: np.ndarray, real: dict[str, Any],
                   tol: SanityTolerances, rng: np.random.Generator) -> dict[str, Any]:
    """Run §18.3 with family labels permuted within each fact.

    ``plain``: the centroids are rebuilt from the same unit vectors; ``refit``: the whole
    pipeline (residualisation, whitening) is refitted on the shuffled labels too. Both are
    held to the same rule.
    """
    from fks.metrics.internal.context import load_layer

    m = ctx.configs.metrics
    perm = permute_within(ctx.design.fact, rng)
    design = ctx.design.with_family(ctx.design.family[perm])
    shuffled = headline_scores(family_centroids(q, design, m.eps), design, ctx.neg, ctx)
    x = load_layer(ctx.store, layer, design)
    J = None if ctx.jlens is None else ctx.jlens[layer]
    q2, _, _ = embed(x, design, J, m.whitening, m.eps)
    del x
    refit = headline_scores(family_centroids(q2, design, m.eps), design, ctx.neg, ctx)
    rel = ctx.design.fact_relation
    return check_label_shuffle(
        _public(real), _public(shuffled), tol,
        difference_interval(real["per_fact_iss"] - shuffled["per_fact_iss"], rel, tol),
        refit=_public(refit),
        refit_ci=difference_interval(refit["per_fact_iss"] - shuffled["per_fact_iss"], rel, tol))


def _relation_negatives(ctx: Context, layer: int, V: np.ndarray, rand_neg: Negatives,
                        tol: SanityTolerances) -> dict[str, Any]:
    """§18.4 in the space without the relation-mean removal (see :mod:`.sanity`)."""
    from fks.metrics.internal.context import load_layer

    m, design = ctx.configs.metrics, ctx.design
    main = {"same_relation": _public(headline_scores(V, design, ctx.neg, ctx, with_kts=False)),
            "random_other_relations": _public(headline_scores(V, design, rand_neg, ctx,
                                                              with_kts=False))}
    flat = design.with_relation(np.zeros_like(design.relation))
    x = load_layer(ctx.store, layer, flat)
    J = None if ctx.jlens is None else ctx.jlens[layer]
    q, _, _ = embed(x, flat, J, m.whitening, m.eps)
    del x
    U = family_centroids(q, flat, m.eps)
    same = headline_scores(U, design, ctx.neg, ctx, with_kts=False)
    rand = headline_scores(U, design, rand_neg, ctx, with_kts=False)
    ci = difference_interval(same["per_fact_iss"] - rand["per_fact_iss"],
                             design.fact_relation, tol)
    return check_relation_negatives(_public(same), _public(rand), tol, ci, main_space=main)


def run_sanity_checks(ctx: Context, layer: int, q: np.ndarray, V: np.ndarray,
                      iss: dict[str, Any], res: Residualizer, wh: Whitening,
                      tol: SanityTolerances) -> dict[str, Any]:
    """Run the §18.1-18.4 checks on ``layer`` (its unit query rows ``q`` and centroids ``V``).

    §18.5 runs over the whole window (:func:`transport_ablation_layer`) and is added by
    :func:`finish_sanity`.
    """
    m, design = ctx.configs.metrics, ctx.design
    seed = m.whitening.seed
    real = headline_scores(V, design, ctx.neg, ctx)
    # 18.1 query shuffle within (relation, family) strata
    strata = design.relation * len(design.all_families) + design.family
    perm = permute_within(strata, np.random.default_rng([seed, 1]))
    shuffled = headline_scores(family_centroids(q[perm], design, m.eps), design, ctx.neg, ctx)
    drop = difference_interval(real["per_fact_iss"] - shuffled["per_fact_iss"],
                               design.fact_relation, tol)
    # 18.4 random negatives from other relations, as many per fact as the stored lists
    rand_neg = random_negatives(design.fact_relation, ctx.neg.counts,
                                int(np.random.default_rng([seed, 3]).integers(2**32)))
    checks = {
        "query_shuffle": check_query_shuffle(_public(real), _public(shuffled), tol, drop),
        "duplicate_query": _duplicate_check(ctx, layer, q, V, res, wh, tol),
        "condition_label_shuffle": _label_shuffle(ctx, layer, q, real, tol,
                                                  np.random.default_rng([seed, 2])),
        "relation_matched_negatives": _relation_negatives(ctx, layer, V, rand_neg, tol),
    }
    sel = ctx.selections[0]
    return {
        "layer": layer, "depth": layer / max(ctx.store.n_layers - 1, 1), "seed": seed,
        "selection": sel.name, "kts_fact_sets": "each pair on D_t & D_t' (spec §8.2)",
        "transport": ctx.transport,
        "layer_rule": "the window layer whose depth is closest to the middle of the window "
                      "(raw_vs_transported: every window layer)",
        "tolerances": tol.as_dict(), "checks": checks, "summary": summarize_checks(checks),
    }


def finish_sanity(ctx: Context, sanity: dict[str, Any], ablation: list[dict[str, Any]],
                  tol: SanityTolerances) -> dict[str, Any]:
    """Add §18.5 (whole window) to the representative layer's checks and re-summarise."""
    if not sanity:
        return sanity
    sanity["checks"]["raw_vs_transported"] = finish_transport_ablation(ctx, ablation, tol)
    sanity["summary"] = summarize_checks(sanity["checks"])
    return sanity
