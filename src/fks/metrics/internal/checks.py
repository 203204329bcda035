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

from fks.errors import FksInputError
from fks.io import load_npz
from fks.metrics.internal.negatives import random_negatives
from fks.metrics.internal.reference import embed_run
from fks.metrics.internal.sanity import (
    PROPAGATION_DRAWS,
    SanityTolerances,
    check_duplicate_query,
    check_label_shuffle,
    check_query_shuffle,
    check_raw_vs_transported,
    check_relation_negatives,
    difference_interval,
    duplicate_cosine_gap,
    path_gap_bound,
    propagated_gaps,
    summarize_checks,
)
from fks.metrics.internal.scores import (
    BlockGrams,
    Negatives,
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
    residual_rank,
)

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
                    with_kts: bool = True, pool: PoolIdentity | None = None) -> dict[str, Any]:
    """ISS and KTS of the headline selection for centroids ``V`` (one layer).

    ISS: the facts of the headline selection (first coverage mode, all facts). KTS: each pair
    on its own shared facts ``D_t & D_t'`` (spec §8.2, the headline pair figures); ``pool``:
    KTS-ID against the reference pool (:class:`PoolIdentity`, the headline and unwhitened
    figures only; the §18 comparisons keep the run's own identification on both sides).
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
                                         min_facts=m.kts_geo_min_facts, pool=pool), m.eps))
    for key in ("kts_geo_raw_spearman", "kts_id", "top1", "chance", "kts"):
        vals = [mm[key] for mm in macros if mm[key] is not None]
        out[key] = float(np.mean(vals)) if vals else None
    return out


def _public(scores: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in scores.items() if k != "per_fact_iss"}


def _offsets(relation: np.ndarray, family: np.ndarray, res: Residualizer) -> np.ndarray:
    """Return the residualisation offsets ``m = mu_r + mu_t - mu`` of rows, ``(n, d)`` float64."""
    return (np.asarray(res.mu_rel, np.float64)[relation]
            + np.asarray(res.mu_fam, np.float64)[family] - np.asarray(res.mu, np.float64))


def _project(x: np.ndarray, relation: np.ndarray, family: np.ndarray, res: Residualizer,
             wh: Whitening) -> np.ndarray:
    """Raw rows ``x (n, d)`` through the fitted residualisation and map: ``(n, k)``, float64.

    The same steps as the main rows (:func:`fks.metrics.internal.space.embed`), in float64 and
    not normalised (the exact values the float32 main path rounds).
    """
    xi = np.asarray(x, np.float64) - _offsets(relation, family, res)
    return xi @ np.asarray(wh.matrix, np.float64)


def _unit(z: np.ndarray, eps: float) -> np.ndarray:
    return z / np.maximum(np.linalg.norm(z, axis=1), eps)[:, None]


def _cosines(a: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.einsum("ij,ij->i", a, b) / np.maximum(
        np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), eps)


def _centroid_rest(design: Design, q: np.ndarray, V: np.ndarray, pos: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the family centroids of rows ``pos``, for the duplicate ``S+``.

    That is: the sum of the *other* unit rows of each row's family centroid, the stored
    centroid ``V[f, t]`` (both ``(len(pos), k)`` float64) and the centroid's largest cosine
    with another fact's centroid of the family ``(len(pos),)``; NaN where the query is in no
    centroid family.
    """
    in_c, code = design.centroid_codes()
    rest = np.full((len(pos), q.shape[1]), np.nan)
    target = np.full_like(rest, np.nan)
    nearest = np.full(len(pos), np.nan)
    for k, p in enumerate(pos.tolist()):
        if not in_c[p]:
            continue
        f, t = design.fact[p], code[p]
        members = np.flatnonzero(in_c & (design.fact == f) & (code == t))
        rest[k] = q[members].astype(np.float64).sum(axis=0) - q[p]
        target[k] = V[f, t]
        others = np.flatnonzero(design.has[:, t] & (np.arange(len(design.fact_ids)) != f))
        if len(others):
            nearest[k] = float(np.max(V[others, t].astype(np.float64) @ target[k]))
    return rest, target, nearest


def _nearest_other(rows: np.ndarray, pool: np.ndarray, same: np.ndarray) -> np.ndarray:
    """Largest cosine of unit ``rows (m, k)`` with unit ``pool (n, k)`` outside ``same (m, n)``.

    NaN where every pool row is excluded (the identification cap of §18.2 then does not apply).
    """
    C = np.asarray(np.asarray(rows, pool.dtype) @ pool.T, np.float64)  # pool's dtype: (m, n)
    C[same] = -np.inf
    best = C.max(axis=1) if C.shape[1] else np.full(len(C), -np.inf)
    return np.where(np.isfinite(best), best, np.nan)


def _second_pass(ctx: Context, layer: int, q: np.ndarray, V: np.ndarray, res: Residualizer,
                 wh: Whitening, prompt: np.ndarray
                 ) -> tuple[dict[str, Any] | None, str | None]:
    """§18.2 (a): compare ``hidden/duplicate_pass.npz`` (fresh forward passes) with the store.

    Besides the raw and processed cosines: the processing-path cosines (the stored raw rows
    through the duplicate rows' path against the stored processed rows) with their rounding
    bound, the processed and centroid gaps the raw tolerance allows
    (:func:`~fks.metrics.internal.sanity.propagated_gaps`) and the identification caps
    (nearest other query / centroid). ``prompt (n,)``: prompt-string codes of the main rows.
    """
    from fks.hidden.extract import DUPLICATE_PASS_NAME
    from fks.metrics.internal.context import load_layer

    design, eps = ctx.design, ctx.configs.metrics.eps
    path = ctx.store.dir / DUPLICATE_PASS_NAME
    if not path.is_file():
        return None, (f"no {DUPLICATE_PASS_NAME} in the hidden store (extracted without the "
                      "second forward pass, or metrics.yaml: sanity.duplicate_sample is 0); "
                      "rerun `fks extract --overwrite`")
    z = load_npz(path)  # small (the sampled rows); a truncated archive is exit 2
    key = f"layer_{layer:03d}"
    if key not in z:
        return None, f"{DUPLICATE_PASS_NAME} lacks layer {layer}"
    if "rows" not in z:
        raise FksInputError(f"{DUPLICATE_PASS_NAME} has no 'rows' array", path=path,
                            field="rows")
    rows, fresh = np.asarray(z["rows"], np.int64), np.asarray(z[key], np.float32)
    if fresh.ndim != 2 or len(fresh) != len(rows):
        raise FksInputError(f"expected {len(rows)} rows in {key}, found shape "
                            f"{tuple(fresh.shape)}", path=path, field=key)
    dtype = str(z["compute_dtype"]) if "compute_dtype" in z else None
    pos_of = {int(r): k for k, r in enumerate(design.rows.tolist())}
    keep = [k for k, r in enumerate(rows.tolist()) if int(r) in pos_of]
    if not keep:
        return None, "no re-extracted query is a main-forward query of this design"
    pos = np.array([pos_of[int(rows[k])] for k in keep])
    fresh = fresh[keep]
    stored = load_layer(ctx.store, layer, design, rows=design.rows[pos])
    rel, fam = design.relation[pos], design.family[pos]
    raw = _cosines(stored, fresh, eps)
    z_stored, z_fresh = _project(stored, rel, fam, res, wh), _project(fresh, rel, fam, res, wh)
    dup, qp = _unit(z_fresh, eps), q[pos].astype(np.float64)
    processed = np.einsum("ij,ij->i", dup, qp)
    nearest = _nearest_other(qp, q, prompt[pos][:, None] == prompt[None, :])
    # (i) the duplicate rows' path reproduces the main path on the stored rows
    path_cos = _cosines(z_stored, qp, eps)
    offset_abs = (np.abs(np.asarray(res.mu_rel, np.float64))[rel]
                  + np.abs(np.asarray(res.mu_fam, np.float64))[fam]
                  + np.abs(np.asarray(res.mu, np.float64)))
    path_allowed = path_gap_bound(stored, offset_abs, wh.matrix, z_stored,
                                  str(np.dtype(q.dtype)))
    # (ii) the query's family centroid with its fresh state in place of the stored one, and
    # the gaps the raw tolerance allows through the map
    rest, target, sp_nearest = _centroid_rest(design, q, V, pos)
    in_c = np.isfinite(rest).all(axis=1)
    sp = _cosines(rest[in_c] + dup[in_c], target[in_c], eps)
    allowed, sp_allowed = propagated_gaps(stored, z_stored, wh.matrix,
                                          duplicate_cosine_gap(dtype, layer + 1),
                                          rest=rest, target=target)
    return {"raw_cosines": raw, "processed_cosines": processed,
            "duplicate_s_positive": sp, "compute_dtype": dtype,
            "max_abs_difference": float(np.max(np.abs(stored - fresh))),
            "path_cosines": path_cos, "path_gap_allowed": path_allowed,
            "processed_gap_allowed": allowed, "nearest_other_cosines": nearest,
            "s_positive_gap_allowed": sp_allowed[in_c],
            "s_positive_nearest_other": sp_nearest[in_c],
            "propagation_draws": PROPAGATION_DRAWS}, None


#: main rows drawn (seeded) as the identification pool of the identical-prompt pairs (18.2 b)
IDENTIFICATION_POOL = 2048


def _identical_prompts(ctx: Context, layer: int, res: Residualizer, wh: Whitening,
                       prompt: np.ndarray) -> dict[str, Any] | None:
    """§18.2 (b): main queries with identical prompt strings, compared raw and processed.

    The pairs (the first query of each group with each other one) may lie in different
    families, so only the grand mean is removed before the map. Their processed gaps are held
    to the raw tolerance carried through it (the stored states come from two forward passes
    in the run's dtype, like a second pass) and to the identification cap against a seeded
    pool of at most :data:`IDENTIFICATION_POOL` main rows of other prompts in the same space.
    """
    from fks.metrics.internal.context import load_layer

    design, eps = ctx.design, ctx.configs.metrics.eps
    counts = np.bincount(prompt)
    multi = [np.flatnonzero(prompt == c) for c in np.flatnonzero(counts > 1)]
    if not multi:
        return None
    a = np.array([g[0] for g in multi for _ in g[1:]])
    b = np.array([x for g in multi for x in g[1:]])
    rng = np.random.default_rng([ctx.configs.metrics.whitening.seed, 18, 4])
    pool = np.sort(rng.choice(design.n, size=min(IDENTIFICATION_POOL, design.n),
                              replace=False))
    xa, xb, xp = (load_layer(ctx.store, layer, design, rows=design.rows[r]).astype(np.float64)
                  for r in (a, b, pool))
    M, mu = np.asarray(wh.matrix, np.float64), np.asarray(res.mu, np.float64)
    za, zb, zp = ((x - mu) @ M for x in (xa, xb, xp))
    dtype = _run_dtype(ctx)
    allowed, _ = propagated_gaps(xa, za, M, duplicate_cosine_gap(dtype, layer + 1))
    nearest = _nearest_other(_unit(za, eps), _unit(zp, eps),
                             prompt[a][:, None] == prompt[pool][None, :])
    return {"cosines": _cosines(za, zb, eps), "raw_cosines": _cosines(xa, xb, eps),
            "processed_gap_allowed": allowed, "nearest_other_cosines": nearest,
            "compute_dtype": dtype, "n_groups": len(multi)}


def _run_dtype(ctx: Context) -> str | None:
    """Return the main extraction's compute dtype (the store's ``model_info``), if recorded."""
    info = ctx.store.meta.get("model_info") or {}
    return info.get("dtype") if isinstance(info, dict) else None


def _duplicate_check(ctx: Context, layer: int, q: np.ndarray, V: np.ndarray,
                     res: Residualizer, wh: Whitening, tol: SanityTolerances) -> dict[str, Any]:
    """§18.2 (a) a second forward pass of sampled queries; (b) identical prompt strings."""
    from fks.generate.prompts import build_prompt

    by_id = {qq.query_id: qq for qq in ctx.bench.queries}
    codes: dict[str, int] = {}
    prompt = np.array([codes.setdefault(build_prompt(by_id[qid]), len(codes))
                       for qid in ctx.design.query_ids.tolist()], dtype=np.int64)
    fresh, reason = _second_pass(ctx, layer, q, V, res, wh, prompt)
    natural = _identical_prompts(ctx, layer, res, wh, prompt)
    return check_duplicate_query(fresh, None if natural is None else natural["cosines"],
                                 0 if natural is None else natural["n_groups"], tol,
                                 reason=reason, depth=layer + 1, natural=natural)


def transport_ablation_reason(ctx: Context) -> str | None:
    """Why §18.5 cannot apply to this run (None: it can)."""
    m, design = ctx.configs.metrics, ctx.design
    d = ctx.store.d_model
    if m.whitening.method == "pca" and min(m.whitening.pca_max_dim, d) >= d:
        # PCA whitening to full rank maps z and J z to the same point up to a rotation for any
        # invertible J, so raw and transported ISS are equal by construction (not a failure)
        return (f"full-rank PCA whitening (k = d = {d} <= pca_max_dim = "
                f"{m.whitening.pca_max_dim}) is invariant to any invertible transport, so "
                "raw and J-transported ISS are equal by construction; the check needs "
                "d > pca_max_dim or whitening.method: shrinkage")
    if ctx.reference is not None:  # the whitening is fitted on the pool's rows
        design = ctx.reference.design
    rank = residual_rank(design.relation, design.family, len(design.relations),
                         len(design.all_families))
    if m.whitening.method == "pca" and m.whitening.pca_max_dim >= rank:
        # the same invariance when the residualised states span fewer than pca_max_dim
        # dimensions: whitening every component of z_bar (rank <= rank bound) and of J z_bar
        # (the same rank) gives the same point up to a rotation
        return (f"PCA whitening keeps every component of the residualised states (their rank "
                f"is at most {rank} <= pca_max_dim = {m.whitening.pca_max_dim}: "
                f"{design.n} main queries less the relation and family means), which is "
                "invariant to any invertible transport, so raw and J-transported ISS are equal "
                "by construction; the check needs more main queries than pca_max_dim + the "
                "groups removed, or whitening.method: shrinkage")
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
    q, _, _ = embed_run(ctx.reference, layer, x, ctx.design, J_other, m.whitening, m.eps)
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
    q2, _, _ = embed_run(ctx.reference, layer, x, design, J, m.whitening, m.eps)
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
    q, _, _ = embed_run(ctx.reference, layer, x, flat, J, m.whitening, m.eps,
                        flat_relations=True)
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
