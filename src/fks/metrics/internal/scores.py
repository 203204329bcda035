"""Vectorised ISS and KTS on family centroids of one layer (spec §7.7-7.9, §9-11).

Inputs are the unit centroids ``V (F, T, k)`` and the presence mask ``has (F, T)`` of
:mod:`fks.metrics.internal.space`. Everything is computed with matrix products per block of facts
(a relation), never with a Python loop over facts; the results equal the kernels of
:mod:`fks.metrics.internal` (tested to 1e-6).

ISS (§7.7-7.9): for every family pair ``p = (t, t')`` and block ``b`` (the facts whose
negatives lie in ``b``), ``S = V_t[b] V_t'[b]^T`` gives the positives ``diag(S)`` and the
symmetric background ``A = (S + S^T) / 2`` (``A[f, g] = (<v_ft, v_gt'> + <v_ft', v_gt>)/2``);
each fact's background for the pair is the mean of ``A[f, g]`` over its negatives ``g`` that
have both families. :func:`iss_from_pairs` then averages over the pairs of a reading.

KTS (§9-11) for one pair and a selection of facts: per relation with at least ``min_facts``
shared facts, Spearman of the condensed cosine-distance vectors (Geo), symmetric top-1 by
``argmax`` with chance ``1/n_r`` (ID), plus top-5 and MRR (rank = 1 + number of candidates
strictly more similar than the gold one); relation-macro averages; ``g = (rho + 1)/2`` and the
harmonic composite ``2 g i / (g + i + eps)``.

KTS-ID against a reference pool (issue 27, :class:`PoolIdentity`): on a ``--limit`` slice the
spec's candidates are the slice's own facts of the relation, so the chance ``1/n_r`` and the
per-relation clip at 0 depend on how many facts the slice holds (planted noise reads KTS 0.072
at 200 facts against 0.009 on the full benchmark). With a pool, each fact is identified among
every pool fact of its relation that has both families -- the candidates it has on the full
benchmark -- so a slice's KTS-ID averages the full benchmark's own per-fact indicators over the
slice's facts. On the full benchmark (no pool) it is the spec's computation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.stats

__all__ = [
    "Negatives",
    "PairScores",
    "pair_scores",
    "iss_from_pairs",
    "BlockGrams",
    "RelationGrams",
    "kts_pair",
    "PoolIdentity",
    "kts_macro",
    "harmonic",
    "DEGENERATE_ULPS",
    "is_constant",
]

#: a distance vector whose spread (max - min) is at most this many units in the last place of
#: its scale is treated as constant (Spearman undefined, issue 13 point 4)
DEGENERATE_ULPS = 64


def is_constant(x: np.ndarray) -> bool:
    """Return whether ``x`` is constant up to rounding: ``ptp(x) <= DEGENERATE_ULPS * ulp``.

    ``ulp`` is the machine epsilon of ``x``'s dtype times its scale ``max(1, max |x|)``: the
    condensed distances ``1 - cos`` come from dot products of unit vectors, whose rounding
    error is of order ``eps * 1`` whatever the distance. Identical centroids (prompts
    truncated to the same tokens, for example) give mathematically constant distances that
    BLAS returns with noise of about 1e-16 (float64) or 1e-7 (float32); ranking that noise
    would invent a correlation, so such a vector has no defined Spearman. An empty or
    one-element vector is constant.
    """
    x = np.asarray(x)
    if x.size < 2:
        return True
    eps = np.finfo(x.dtype if np.issubdtype(x.dtype, np.floating) else np.float64).eps
    scale = max(1.0, float(np.max(np.abs(x))))
    return float(np.ptp(x)) <= DEGENERATE_ULPS * eps * scale


# ================================================================================== ISS
@dataclass(frozen=True)
class Negatives:
    """Negative facts of every fact (spec §7.8), as index arrays.

    Attributes:
        idx: ``(F, K)`` fact indices (entries where ``mask`` is false are padding).
        mask: ``(F, K)`` bool.
        blocks: fact index arrays covering all facts; each fact's negatives lie in its block
            (the relations for same-relation negatives; one block for random ones).
    """

    idx: np.ndarray
    mask: np.ndarray
    blocks: tuple[np.ndarray, ...]

    @property
    def counts(self) -> np.ndarray:
        """``(F,)`` number of negatives per fact."""
        return self.mask.sum(axis=1)


@dataclass(frozen=True)
class PairScores:
    """Per fact and family pair: ``pos``/``bg`` ``(F, P)`` float64 and their validity masks."""

    pos: np.ndarray
    pos_ok: np.ndarray
    bg: np.ndarray
    bg_ok: np.ndarray


def pair_scores(V: np.ndarray, has: np.ndarray, neg: Negatives,
                pairs: Sequence[tuple[int, int]],
                grams: BlockGrams | None = None) -> PairScores:
    """Positive similarity and symmetric background of every fact for every pair (§7.7-7.8).

    ``grams`` (built on ``neg.blocks``) shares the per-block cosines with KTS.
    """
    if grams is None or grams.blocks is not neg.blocks:
        grams = BlockGrams(V, neg.blocks)
    F, P = V.shape[0], len(pairs)
    pos = np.zeros((F, P))
    bg = np.zeros((F, P))
    bg_n = np.zeros((F, P), dtype=np.int64)
    local = np.zeros(F, dtype=np.int64)
    for k, b in enumerate(neg.blocks):
        if not len(b):
            continue
        local[b] = np.arange(len(b))
        M0 = np.zeros((len(b), len(b)), dtype=V.dtype)  # M0[f, g] = 1: g is a negative of f
        rows = np.broadcast_to(np.arange(len(b))[:, None], neg.idx[b].shape)
        M0[rows[neg.mask[b]], local[neg.idx[b][neg.mask[b]]]] = 1.0
        for p, (i, j) in enumerate(pairs):
            S = grams.cross(k, i, j)
            pos[b, p] = np.diagonal(S)
            M = M0 * (has[b, i] & has[b, j]).astype(V.dtype)[None, :]  # negatives with both
            # sum_g M[f, g] (S[f, g] + S[g, f]) / 2, without temporaries
            bg[b, p] = 0.5 * (np.einsum("ij,ij->i", S, M) + np.einsum("ji,ij->i", S, M))
            bg_n[b, p] = np.rint(M.sum(axis=1))
    pos_ok = np.stack([has[:, i] & has[:, j] for i, j in pairs], axis=1) if P else \
        np.zeros((F, 0), bool)
    bg_ok = pos_ok & (bg_n > 0)
    bg = np.divide(bg, bg_n, out=np.zeros_like(bg), where=bg_ok)
    return PairScores(pos=np.where(pos_ok, pos, 0.0), pos_ok=pos_ok, bg=bg, bg_ok=bg_ok)


def iss_from_pairs(ps: PairScores, select: np.ndarray, eps: float) -> dict[str, np.ndarray]:
    """ISS of every fact over the pairs ``select (P,) bool`` of a reading (§7.9).

    Returns ``(F,)`` arrays: ``s_positive``, ``s_background``, ``iss`` (NaN where undefined),
    ``n_pairs``, ``n_background_pairs`` and ``status`` (``ok``, ``fewer_than_two_families``,
    ``no_background``).
    """
    pos_ok = ps.pos_ok & select[None, :]
    bg_ok = ps.bg_ok & select[None, :]
    n_pos, n_bg = pos_ok.sum(axis=1), bg_ok.sum(axis=1)
    ok = (n_pos > 0) & (n_bg > 0)
    s_pos = np.full(len(n_pos), np.nan)
    s_bg = np.full(len(n_pos), np.nan)
    np.divide(np.where(pos_ok, ps.pos, 0.0).sum(axis=1), n_pos, out=s_pos, where=n_pos > 0)
    np.divide(np.where(bg_ok, ps.bg, 0.0).sum(axis=1), n_bg, out=s_bg, where=n_bg > 0)
    iss = np.where(ok, (s_pos - s_bg) / (1.0 - s_bg + eps), np.nan)
    status = np.where(n_pos == 0, "fewer_than_two_families",
                      np.where(n_bg == 0, "no_background", "ok"))
    return {"s_positive": s_pos, "s_background": s_bg, "iss": iss, "n_pairs": n_pos,
            "n_background_pairs": n_bg, "status": status, "defined": ok}


# ================================================================================== KTS
class BlockGrams:
    """Cosines within blocks of facts (relations) for one layer, shared by ISS and KTS.

    For a block ``b`` of ``n_b`` facts, ``X_b = V[b].reshape(n_b * T, k)`` and one product
    ``G_b = X_b X_b^T`` holds every within-family Gram and cross-family matrix as strided views:
    ``cross(b, t, u)[f, g] = <v_{b[f], t}, v_{b[g], u}>`` (rows of absent families are zero
    and are masked by the callers). Blocks larger than ``FULL_GRAM_MAX_ROWS`` rows compute
    each ``(t, u)`` product on demand instead. Spearman's ranks of the condensed distance
    vectors are cached per (block, family, fact subset), so each family's ranks are computed
    once for all the pairs it enters.
    """

    FULL_GRAM_MAX_ROWS = 6000

    def __init__(self, V: np.ndarray, blocks: Sequence[np.ndarray]) -> None:
        self.V = V
        self.blocks = blocks
        self._full: dict[int, np.ndarray] = {}
        self._ranks: dict[tuple[int, int, bytes], np.ndarray | None] = {}

    def cross(self, b: int, t: int, u: int) -> np.ndarray:
        """``(n_b, n_b)`` cosines ``<v_{f,t}, v_{g,u}>`` of block ``b`` (rows: family ``t``)."""
        idx = self.blocks[b]
        T = self.V.shape[1]
        if len(idx) * T > self.FULL_GRAM_MAX_ROWS:
            return self.V[idx, t] @ self.V[idx, u].T
        if b not in self._full:
            X = self.V[idx].reshape(len(idx) * T, -1)
            self._full[b] = X @ X.T
        return self._full[b][t::T, u::T]

    def ranks(self, b: int, t: int, sub: np.ndarray) -> np.ndarray | None:
        """Return centred unit-norm ranks of the condensed ``1 - cos`` within family ``t``.

        Over the facts ``sub`` (positions in block ``b``); None when the distances are constant
        up to rounding (:func:`is_constant`): their Spearman correlation is undefined.
        """
        key = (b, t, sub.tobytes())
        if key not in self._ranks:
            G = self.cross(b, t, t)[np.ix_(sub, sub)]
            iu = np.triu_indices(len(sub), k=1)
            dist = 1.0 - G[iu]
            if is_constant(dist):
                self._ranks[key] = None
                return None
            r = _ranks(dist)
            r -= r.mean()
            norm = float(np.linalg.norm(r))
            self._ranks[key] = r / norm if norm > 0 else None
        return self._ranks[key]


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks ``1..m`` (float64) of ``x``, ties averaged (as ``scipy.stats.rankdata``)."""
    order = np.argsort(x, kind="stable")
    xs = x[order]
    if len(xs) > 1 and np.any(xs[1:] == xs[:-1]):
        return scipy.stats.rankdata(x)
    r = np.empty(len(x))
    r[order] = np.arange(1, len(x) + 1)
    return r


#: the former name (one block per relation)
RelationGrams = BlockGrams


def _identity(S: np.ndarray) -> dict[str, float]:
    """Top-1 (``argmax``, both directions), top-5 and MRR of the cross-similarity ``S``."""
    n = len(S)
    gold = np.arange(n)
    diag = np.diagonal(S)
    top1_ab = float(np.mean(np.argmax(S, axis=1) == gold))
    top1_ba = float(np.mean(np.argmax(S, axis=0) == gold))
    rank_ab = 1 + (S > diag[:, None]).sum(axis=1)
    rank_ba = 1 + (S > diag[None, :]).sum(axis=0)
    return _identity_terms(top1_ab, top1_ba, rank_ab, rank_ba, 1.0 / n)


def _identity_terms(top1_ab: float, top1_ba: float, rank_ab: np.ndarray, rank_ba: np.ndarray,
                    chance: float) -> dict[str, float]:
    """Return the §10 identity terms from both directions' top-1 rates and gold ranks."""
    top1 = 0.5 * (top1_ab + top1_ba)
    adj = (top1 - chance) / max(1.0 - chance, 1e-12)
    return {
        "top1_ab": top1_ab, "top1_ba": top1_ba, "top1": top1,
        "top5": float(0.5 * (np.mean(rank_ab <= 5) + np.mean(rank_ba <= 5))),
        "mrr": float(0.5 * (np.mean(1.0 / rank_ab) + np.mean(1.0 / rank_ba))),
        "chance": chance, "id_adjusted": float(adj), "id": float(np.clip(adj, 0.0, 1.0)),
    }


@dataclass(frozen=True)
class PoolIdentity:
    """KTS-ID ranks of the run's facts among the reference pool's facts of their relation.

    For the pair ``(t, u)`` and a pool fact ``f`` with both families, ``rank_ab`` is ``1 +`` the
    number of pool facts ``g`` of ``f``'s relation (both families) with ``<v_ft, v_gu>`` strictly
    above ``<v_ft, v_fu>``; ``rank_ba`` the same with the roles of ``t`` and ``u`` swapped
    (the columns of the spec's ``S``). ``n_candidates`` is the number of such pool facts. All
    three are ``(F,)`` over the *run's* facts (0 where the fact lacks a family of the pair).
    Computed on the pool's centroids alone, so a fact's ranks do not depend on which other
    facts the run holds.
    """

    rank_ab: dict[tuple[int, int], np.ndarray]
    rank_ba: dict[tuple[int, int], np.ndarray]
    n_candidates: dict[tuple[int, int], np.ndarray]

    @classmethod
    def from_pool(cls, V: np.ndarray, has: np.ndarray, relation: np.ndarray,
                  fact_pos: np.ndarray, pairs: Sequence[tuple[int, int]]) -> PoolIdentity:
        """Rank every run fact among its relation's pool facts, for each family pair.

        Args:
            V: ``(F_pool, T, k)`` unit family centroids of the pool (the run's family axis).
            has: ``(F_pool, T)`` the pool fact has the family.
            relation: ``(F_pool,)`` relation code of each pool fact.
            fact_pos: ``(F,)`` pool position of each run fact (-1: not in the pool).
            pairs: the family pairs ``(t, u)``.
        """
        F = len(fact_pos)
        run_of = np.full(len(V), -1, dtype=np.int64)
        inside = fact_pos >= 0
        run_of[fact_pos[inside]] = np.flatnonzero(inside)
        ab, ba, nc = {}, {}, {}
        for t, u in pairs:
            ab[(t, u)], ba[(t, u)] = np.zeros(F, np.int64), np.zeros(F, np.int64)
            nc[(t, u)] = np.zeros(F, np.int64)
            both = has[:, t] & has[:, u]
            for r in np.unique(relation[both & (run_of >= 0)]):
                members = np.flatnonzero(both & (relation == r))
                S = V[members, t] @ V[members, u].T  # S[f, g] = <v_ft, v_gu>
                own = np.diagonal(S)
                mine = run_of[members]
                keep = mine >= 0
                ab[(t, u)][mine[keep]] = 1 + (S > own[:, None]).sum(axis=1)[keep]
                ba[(t, u)][mine[keep]] = 1 + (S > own[None, :]).sum(axis=0)[keep]
                nc[(t, u)][mine[keep]] = len(members)
        return cls(ab, ba, nc)

    def hits(self, t: int, u: int) -> np.ndarray:
        """``(F,)`` symmetric top-1 rate of each run fact for the pair (0 where undefined)."""
        return 0.5 * ((self.rank_ab[(t, u)] == 1).astype(np.float64)
                      + (self.rank_ba[(t, u)] == 1))

    def terms(self, t: int, u: int, facts: np.ndarray) -> dict[str, float]:
        """Return the identity terms of :func:`_identity` for run facts ``facts`` of a relation.

        ``chance`` is ``1 / n_candidates`` (the same for every fact of a relation).
        """
        ra, rb = self.rank_ab[(t, u)][facts], self.rank_ba[(t, u)][facts]
        n = self.n_candidates[(t, u)][facts]
        if not len(facts) or np.any(n == 0):
            raise ValueError("a run fact of the pair has no pool candidates (pool mismatch)")
        return {**_identity_terms(float(np.mean(ra == 1)), float(np.mean(rb == 1)), ra, rb,
                                  float(np.mean(1.0 / n))),
                "n_candidates": int(n.max())}


def kts_pair(grams: BlockGrams, t: int, u: int, shared: np.ndarray,
             relations: Sequence[str], *, min_facts: int,
             pool: PoolIdentity | None = None) -> dict[str, dict[str, Any]]:
    """Per-relation KTS terms of the pair ``(t, u)`` over the facts ``shared (F,) bool``.

    ``grams`` has one block per relation (block ``r`` = relation ``relations[r]``). Relations
    with fewer than ``min_facts`` shared facts are left out (§9.1). Spearman's rho is the
    Pearson correlation of the two rank vectors (average ranks for ties); None when a rank
    vector is constant (or has fewer than two entries). With ``pool``, the identity terms
    rank each fact among the pool's facts of its relation (:class:`PoolIdentity`); Geo stays
    on the run's shared facts.

    Returns:
        ``{relation: {n, rho, top1_ab, top1_ba, top1, top5, mrr, chance, id_adjusted, id}}``.
    """
    out: dict[str, dict[str, Any]] = {}
    for r, idx in enumerate(grams.blocks):
        sub = np.flatnonzero(shared[idx])
        if len(sub) < min_facts:
            continue
        ra, rb = (grams.ranks(r, t, sub), grams.ranks(r, u, sub)) if len(sub) > 2 else \
            (None, None)
        rho = None if ra is None or rb is None else float(np.clip(ra @ rb, -1.0, 1.0))
        why = None if rho is not None else \
            ("constant_distances" if len(sub) > 2 else "fewer_than_three_facts")
        ident = pool.terms(t, u, idx[sub]) if pool is not None else \
            _identity(grams.cross(r, t, u)[np.ix_(sub, sub)])
        out[relations[r]] = {"n": int(len(sub)), "rho": rho, "rho_undefined": why, **ident}
    return out


def harmonic(g: float | None, i: float | None, eps: float) -> float | None:
    """Return the §11 composite ``2 g i / (g + i + eps)`` (None when a part is undefined)."""
    if g is None or i is None:
        return None
    return 2.0 * g * i / (g + i + eps)


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def kts_macro(per_relation: dict[str, dict[str, Any]], eps: float) -> dict[str, Any]:
    """Relation-macro KTS of one pair (§9.3, §10.4, §11): every relation weighs the same.

    ``kts_geo_raw_spearman`` is the macro Spearman, ``kts_geo = (rho + 1)/2``, ``kts_id`` the
    macro of the clipped chance-corrected top-1, ``kts`` their harmonic mean; top-1, top-5,
    MRR, chance and the unclipped corrected top-1 are macro averages too.
    """
    rhos = [v["rho"] for v in per_relation.values() if v["rho"] is not None]
    vals = list(per_relation.values())
    geo_raw = _mean(rhos)
    geo = None if geo_raw is None else (geo_raw + 1.0) / 2.0
    kid = _mean([v["id"] for v in vals])
    return {
        "n_facts_scored": int(sum(v["n"] for v in vals)),
        "n_relations": len(vals),
        "n_relations_geo": len(rhos),
        "n_relations_geo_constant": sum(v.get("rho_undefined") == "constant_distances"
                                        for v in vals),
        "kts_geo_raw_spearman": geo_raw,
        "kts_geo": geo,
        "kts_id": kid,
        "kts_id_unclipped": _mean([v["id_adjusted"] for v in vals]),
        "top1": _mean([v["top1"] for v in vals]),
        "top5": _mean([v["top5"] for v in vals]),
        "mrr": _mean([v["mrr"] for v in vals]),
        "chance": _mean([v["chance"] for v in vals]),
        "kts": harmonic(geo, kid, eps),
    }
