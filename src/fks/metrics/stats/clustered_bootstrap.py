r"""Relation-clustered bootstrap of the headline figures (spec §14.1, §20), vectorised.

The resampling scheme of §14.1, for ``B`` replicates (``metrics.yaml: bootstrap``):

1. draw ``K`` relations with replacement from the ``K`` relations of the fact set (the *slots*
   of a replicate);
2. inside each slot, draw ``n_r`` facts with replacement from the ``n_r`` facts of the slot's
   relation;
3. recompute every statistic on the replicate -- fact means over the drawn facts, and
   relation macro-averages over the ``K`` slots (a relation drawn twice counts twice, each
   time with its own fact draws);
4. report the ``(1-alpha)`` percentile interval
   (:func:`fks.metrics.stats.bootstrap.percentile_interval`).

**Sufficient statistics.** The draws are made once (:func:`draw_clusters`) and kept as
integer *count* matrices: for relation ``r``, ``C_r`` is ``(S_r, n_r)`` -- one row per slot
that drew ``r`` (over all replicates), the number of times each of its facts was drawn. Every
fact-level statistic is then a weighted mean evaluated with matrix products:

* fact mean of ``x`` over facts where ``m`` holds: ``(W @ (m*x)) / (W @ m)`` with
  ``W (B, F)`` the per-replicate fact counts (the sum of a replicate's slot rows);
* relation macro: the slot means ``(C_r @ (m*x)) / (C_r @ m)`` placed in a ``(B, K)`` table
  and averaged over slots (a slot without any valid fact is left out).

The same draws give a *paired* comparison of two models (§14.2, :mod:`fks.metrics.stats.compare`).

**KTS.** KTS-Geo and KTS-ID are relation macro-averages of statistics of *sets* of facts, so
they are recomputed per slot from the stored geometry (:class:`KtsSpace`: the family centroids
of each window layer):

* KTS-Geo (§9): the Spearman correlation between the within-relation distance vectors of the
  two families over the drawn facts. A fact drawn ``c_f`` times contributes ``c_f c_g``
  copies of the pair ``(f, g)``; the pair of a fact with its own copy carries no geometric
  information and is left out. This is exactly the Spearman correlation (average ranks for
  ties) of the naive expanded resample without its same-fact pairs, computed without
  expanding: ranks are weighted cumulative sums along the distance order sorted once per
  relation (:func:`weighted_spearman`). A slot with fewer than 3 distinct facts has no
  defined correlation and is left out of that replicate's macro-average. A relation whose
  distances in one family of the pair are constant up to rounding (identical centroids,
  :func:`fks.metrics.internal.scores.is_constant`) has no defined correlation either: NaN in the
  point and every replicate, left out of the macro-average, and counted
  (``KtsResult.n_relations_geo_constant``).
* KTS-ID (§10): each fact's identification (top-1 retrieval of its own counterpart, both
  directions, :func:`identity_hits`) is decided once against *all* the relation's shared
  facts, the candidate set of §10.1; a replicate re-weights the facts:
  ``ID = (C @ hit) / (C @ 1)`` per slot (one matrix product), chance-corrected with
  ``b_r = 1 / n_r`` and clipped to ``[0, 1]``. Re-running the retrieval among the drawn facts
  only would shrink the candidates to about 63 % of the relation (draws with replacement
  repeat facts) and bias identification upward.
* Only relations with at least ``min_facts`` shared facts in the *original* sample enter a
  pair (§9.1); the composite is the harmonic mean of ``(rho + 1) / 2`` and the identity score
  per pair and layer, averaged over pairs and then layers (§11).

On the original sample (every count 1) all of this reduces to the spec's definitions.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fks.metrics.internal.scores import is_constant
from fks.metrics.stats.bootstrap import DEFAULT_SEED, percentile_interval

__all__ = [
    "ClusterDraws",
    "draw_clusters",
    "fact_weights",
    "fact_mean",
    "fact_mean_replicates",
    "relation_macro",
    "relation_macro_replicates",
    "weighted_spearman",
    "identity_hits",
    "KtsSpace",
    "KtsResult",
    "kts_bootstrap",
    "kts_point",
    "interval_record",
    "FACT_METRICS",
    "KTS_METRICS",
    "MACRO_SUFFIX",
    "Estimate",
    "draws_key",
    "fact_estimates",
    "kts_estimates",
]

log = logging.getLogger(__name__)


# ================================================================================ the draws
@dataclass(frozen=True)
class ClusterDraws:
    """The draws of a relation-clustered bootstrap, stored as index and count matrices.

    Shapes: ``B`` replicates, ``K`` relations (= slots per replicate), ``F`` facts, ``n_r``
    facts of relation ``r``, ``S_r`` slots (over all replicates) that drew relation ``r``.

    Attributes:
        relations: ``(K,)`` relation names, sorted.
        fact_relation: ``(F,)`` relation code of each fact (index into ``relations``).
        members: per relation, ``(n_r,)`` fact indices (ascending).
        relation_draws: ``(B, K)`` the relation code drawn into each slot.
        slot_index: per relation, ``(S_r, 2)`` the ``(b, k)`` of each slot that drew it
            (row-major order).
        fact_draws: per relation, ``(S_r, n_r)`` positions into ``members[r]`` drawn in each
            of its slots.
        seed: the seed the draws came from.
    """

    relations: tuple[str, ...]
    fact_relation: np.ndarray
    members: tuple[np.ndarray, ...]
    relation_draws: np.ndarray
    slot_index: tuple[np.ndarray, ...]
    fact_draws: tuple[np.ndarray, ...]
    seed: int | None
    _counts: dict[int, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_resamples(self) -> int:
        """B."""
        return int(self.relation_draws.shape[0])

    @property
    def n_facts(self) -> int:
        """F."""
        return int(len(self.fact_relation))

    @property
    def n_relations(self) -> int:
        """K."""
        return len(self.relations)

    def counts(self, r: int) -> np.ndarray:
        """``(S_r, n_r)`` float: how often each fact of relation ``r`` was drawn in each slot."""
        if r not in self._counts:
            draws = self.fact_draws[r]
            n_r = len(self.members[r])
            rows = np.repeat(np.arange(len(draws)), n_r)
            c = np.bincount(rows * n_r + draws.reshape(-1), minlength=len(draws) * n_r)
            self._counts[r] = c.reshape(len(draws), n_r).astype(np.float64)
        return self._counts[r]

    def replicate(self, b: int) -> list[tuple[int, np.ndarray]]:
        """Replicate ``b`` written out: per slot, ``(relation code, drawn fact indices)``.

        The expanded form the vectorised statistics avoid; used by reference loops and tests.
        """
        out = []
        for k, r in enumerate(self.relation_draws[b]):
            row = np.flatnonzero((self.slot_index[r][:, 0] == b) & (self.slot_index[r][:, 1] == k))
            out.append((int(r), self.members[r][self.fact_draws[r][row[0]]]))
        return out


def draw_clusters(fact_relation: Sequence[str] | np.ndarray, *, n_resamples: int = 1000,
                  seed: int | None = DEFAULT_SEED) -> ClusterDraws:
    """Draw the relation-clustered resamples of §14.1 for facts labelled by relation.

    ``rng = default_rng(seed)`` draws the ``(B, K)`` relation table first, then, relation by
    relation (sorted names), the ``(S_r, n_r)`` within-relation fact positions of all its
    slots. The draws depend only on the relations of the facts (in their given order), the
    seed and ``B`` -- so two models on the same fact set get the same draws (§14.2).

    Args:
        fact_relation: ``(F,)`` the relation of each fact (F >= 1).
        n_resamples: B >= 1.
        seed: seed of ``np.random.default_rng``.
    """
    if isinstance(n_resamples, bool) or int(n_resamples) != n_resamples or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer; found {n_resamples!r}")
    labels = np.asarray(fact_relation).astype(str)
    if labels.ndim != 1 or labels.size == 0:
        raise ValueError("fact_relation must be a non-empty vector of relation names")
    names, codes = np.unique(labels, return_inverse=True)
    members = tuple(np.flatnonzero(codes == r) for r in range(len(names)))
    rng = np.random.default_rng(seed)
    rel = rng.integers(0, len(names), size=(int(n_resamples), len(names)))
    slots, draws = [], []
    for r, mem in enumerate(members):
        idx = np.argwhere(rel == r)
        slots.append(idx)
        draws.append(rng.integers(0, len(mem), size=(len(idx), len(mem))))
    return ClusterDraws(tuple(str(n) for n in names), codes, members, rel, tuple(slots),
                        tuple(draws), seed)


# ======================================================================= fact-level metrics
def _as_columns(values: Any, mask: Any, n_facts: int) -> tuple[np.ndarray, np.ndarray]:
    """``(F, M)`` values (0 where masked out) and ``(F, M)`` float mask from 1-D or 2-D input."""
    x = np.asarray(values, dtype=np.float64)
    one = x.ndim == 1
    x = x[:, None] if one else x
    m = np.isfinite(x) if mask is None else np.asarray(mask, dtype=bool).reshape(x.shape)
    m = m & np.isfinite(x)
    if x.shape[0] != n_facts:
        raise ValueError(f"values have {x.shape[0]} rows; the draws have {n_facts} facts")
    return np.where(m, x, 0.0), m.astype(np.float64)


def fact_weights(draws: ClusterDraws) -> np.ndarray:
    """``(B, F)`` float: how often each fact is drawn in each replicate (all slots summed)."""
    W = np.zeros((draws.n_resamples, draws.n_facts))
    for r, mem in enumerate(draws.members):
        b = draws.slot_index[r][:, 0]
        np.add.at(W, (b[:, None], mem[None, :]), draws.counts(r))
    return W


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def fact_mean(values: Any, mask: Any = None) -> np.ndarray | float:
    """Point fact mean of ``values`` (``(F,)`` or ``(F, M)``) over facts where ``mask`` holds.

    Non-finite values count as masked out. Returns nan where no fact is valid.
    """
    x, m = _as_columns(values, mask, len(np.asarray(values)))
    out = _ratio(x.sum(axis=0), m.sum(axis=0))
    return float(out[0]) if np.asarray(values).ndim == 1 else out


def fact_mean_replicates(draws: ClusterDraws, values: Any, mask: Any = None, *,
                         weights: np.ndarray | None = None) -> np.ndarray:
    """Fact-mean replicates ``(W @ (m x)) / (W @ m)``: ``(B,)`` for 1-D values, else ``(B, M)``.

    Args:
        draws: the clustered draws over the ``F`` facts.
        values: ``(F,)`` or ``(F, M)`` per-fact values.
        mask: same shape, bool: the fact has the value (default: finite values).
        weights: ``(B, F)`` from :func:`fact_weights` (computed when omitted).
    """
    x, m = _as_columns(values, mask, draws.n_facts)
    W = fact_weights(draws) if weights is None else weights
    out = _ratio(W @ x, W @ m)
    return out[:, 0] if np.asarray(values).ndim == 1 else out


def relation_macro(values: Any, fact_relation: Sequence[str] | np.ndarray,
                   mask: Any = None) -> np.ndarray | float:
    """Point relation macro-average: the mean over relations of each relation's fact mean.

    Relations without any valid fact are left out. ``(F,)`` -> float, ``(F, M)`` -> ``(M,)``.
    """
    x, m = _as_columns(values, mask, len(np.asarray(values)))
    _, codes = np.unique(np.asarray(fact_relation).astype(str), return_inverse=True)
    K = int(codes.max()) + 1
    num = np.zeros((K, x.shape[1]))
    den = np.zeros((K, x.shape[1]))
    np.add.at(num, codes, x)
    np.add.at(den, codes, m)
    with np.errstate(invalid="ignore"), _quiet_nanmean():
        out = np.nanmean(_ratio(num, den), axis=0) if K else np.full(x.shape[1], np.nan)
    return float(out[0]) if np.asarray(values).ndim == 1 else out


def relation_macro_replicates(draws: ClusterDraws, values: Any, mask: Any = None
                              ) -> np.ndarray:
    """Relation-macro replicates: slot means ``(C_r @ m x) / (C_r @ m)`` averaged over slots.

    Returns ``(B,)`` for 1-D values, else ``(B, M)``; nan where no slot has a valid fact.
    """
    x, m = _as_columns(values, mask, draws.n_facts)
    table = np.full((draws.n_resamples, draws.n_relations, x.shape[1]), np.nan)
    for r, mem in enumerate(draws.members):
        C = draws.counts(r)
        b, k = draws.slot_index[r][:, 0], draws.slot_index[r][:, 1]
        table[b, k] = _ratio(C @ x[mem], C @ m[mem])
    with np.errstate(invalid="ignore"), _quiet_nanmean():
        out = np.nanmean(table, axis=1)
    return out[:, 0] if np.asarray(values).ndim == 1 else out


class _quiet_nanmean:
    """Silence numpy's 'Mean of empty slice' (an all-nan row is a legitimate nan here)."""

    def __enter__(self) -> None:
        import warnings

        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc: object) -> None:
        self._ctx.__exit__(*exc)


# ============================================================================ KTS kernels
@dataclass(frozen=True)
class _Order:
    """A fixed sort order of ``P`` pair distances, with its tie groups (§9.2 ranks)."""

    perm: np.ndarray  # (P,) item index at each sorted position
    group: np.ndarray | None  # (P,) tie-group id at each sorted position; None: no ties
    group_end: np.ndarray | None  # (G,) last sorted position of each group


def _order(values: np.ndarray) -> _Order:
    """Sort ``values (P,)`` once; record tie groups only when two values are equal."""
    perm = np.argsort(values, kind="stable")
    s = values[perm]
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] != s[:-1]
    if new.all():
        return _Order(perm, None, None)
    group = np.cumsum(new) - 1
    group_end = np.append(np.flatnonzero(new)[1:] - 1, len(s) - 1)
    return _Order(perm, group, group_end)


def centred_ranks(weights: np.ndarray, order: _Order) -> np.ndarray:
    """Twice the centred average rank, ``2 r - (N + 1)``, of every item under replication.

    Row ``s`` of ``weights (S, P)`` gives each item's number of copies (``N`` in total). In
    the expanded sample, a tie group (items of equal value, or the copies of one item) of
    weight ``G`` preceded by weight ``S0`` takes ranks ``S0+1 .. S0+G``, average
    ``S0 + (G + 1) / 2``: a weighted cumulative sum along the fixed sort order. Doubling keeps
    every value an integer, exact in the weights' dtype while ``2 N < 2**24`` (float32) or
    ``2**53`` (float64).

    Returns:
        ``(S, P)`` in the original item order, the weights' dtype.
    """
    ws = np.take(weights, order.perm, axis=1)
    cs = np.cumsum(ws, axis=1)
    total = cs[:, -1:].copy()
    if order.group is None:
        cs *= 2
        cs -= ws
    else:
        end = cs[:, order.group_end]
        before = np.concatenate([np.zeros((len(cs), 1), cs.dtype), end[:, :-1]], axis=1)
        cs = np.take(before + end, order.group, axis=1)  # 2 S0 + G
    cs -= total
    out = np.empty_like(cs)
    out[:, order.perm] = cs
    return out


def _rowdot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise dot products ``(S, P), (S, P) -> (S,)`` via BLAS.

    float32 rows accumulate in float32: a relative error of about 1e-7, far below the
    resolution of a percentile interval.
    """
    return (a[:, None, :] @ b[:, :, None])[:, 0, 0].astype(np.float64)


def weighted_spearman(weights: np.ndarray, order_a: _Order, order_b: _Order) -> np.ndarray:
    """Spearman correlation of two orderings of ``P`` items under integer replication weights.

    Row ``s`` of ``weights (S, P)`` gives each item's number of copies; the result is the
    Pearson correlation of the average ranks of the expanded sample (:func:`centred_ranks`),
    ``nan`` where a variance is zero.

    Args:
        weights: ``(S, P)`` non-negative integer-valued weights, original item order.
        order_a: the items' sort order under the first value vector (:func:`_order`).
        order_b: the same under the second.

    Returns:
        ``(S,)`` correlations.
    """
    x = centred_ranks(weights, order_a)
    y = centred_ranks(weights, order_b)
    wx = weights * x
    return _correlation(_rowdot(wx, y), _rowdot(wx, x), _rowdot(weights * y, y))


def _correlation(sxy: np.ndarray, sxx: np.ndarray, syy: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = sxy / np.sqrt(sxx * syy)
    return np.where((sxx > 0) & (syy > 0), rho, np.nan)


def identity_hits(present: np.ndarray, closer: Any) -> np.ndarray:
    """Which facts are retrieved as themselves among candidate sets (§10.1), many at once.

    Args:
        present: ``(S, m)`` bool, the fact is among the candidates of set ``s``.
        closer: ``(m, m)`` bool array or scipy sparse matrix, ``closer[f, g]``: fact
            ``g != f`` is strictly closer to ``f``'s vector in one family than ``f``'s own
            vector in the other.

    Returns:
        ``(S, m)`` bool, true where no present fact beats the fact's own counterpart:
        ``present @ closer^T == 0``.
    """
    blocked = closer @ present.T.astype(np.float64)
    return np.asarray(blocked).T == 0


@dataclass
class KtsSpace:
    """The family centroids behind KTS, one array per window layer (spec §8.2).

    Attributes:
        fact_ids: ``(F,)`` aligned with the bootstrap's facts.
        families: ``(T,)`` centroid families (canonical order).
        layers: the window layers.
        has: ``(F, T)`` bool, the fact has the family (``f in D_t``).
        load: ``load(layer) -> (F, T, k)`` centroids (rows need not be normalised; rows of
            absent cells are ignored).
        min_facts: relations with fewer shared facts are skipped (``kts_geo_min_facts``).
        eps: the composite's and the chance correction's guard.
        identity: ``identity(layer) -> (F, P, 2)`` each fact's top-1 rate and chance for
            each pair of :meth:`pairs`, ranked among the reference pool's facts of its
            relation (:class:`fks.metrics.internal.scores.PoolIdentity`, issue 27); None: the
            spec's identification among the space's own facts of the relation.
    """

    fact_ids: np.ndarray
    families: tuple[str, ...]
    layers: tuple[int, ...]
    has: np.ndarray
    load: Callable[[int], np.ndarray]
    min_facts: int = 5
    eps: float = 1e-12
    identity: Callable[[int], np.ndarray] | None = None

    def pairs(self) -> list[tuple[int, int]]:
        """Family index pairs ``(i, j)``, ``i < j`` (§11.1)."""
        T = len(self.families)
        return [(i, j) for i in range(T) for j in range(i + 1, T)]

    def pair_names(self) -> list[str]:
        """``"t__t'"`` names of :meth:`pairs` (spec §17.3 keys)."""
        return [f"{self.families[i]}__{self.families[j]}" for i, j in self.pairs()]

    def subset(self, keep: np.ndarray) -> KtsSpace:
        """Return the same space over the facts where ``keep (F,)`` holds."""
        idx = np.flatnonzero(keep)
        load, ident = self.load, self.identity
        return KtsSpace(self.fact_ids[idx], self.families, self.layers, self.has[idx],
                        lambda layer: load(layer)[idx], self.min_facts, self.eps,
                        None if ident is None else (lambda layer: ident(layer)[idx]))


@dataclass(frozen=True)
class _PairTables:
    """One eligible family pair of one relation: shared facts and identity tables (§10)."""

    index: int  # position in KtsSpace.pairs()
    fam_a: int
    fam_b: int
    shared: np.ndarray  # (n_r,) bool
    hits: np.ndarray  # (n_r,) identification rate of each shared fact (both directions), 0 outside
    chance: float  # b_r = 1 / (number of shared facts)


@dataclass(frozen=True)
class _Geometry:
    """One relation at one layer: pair-distance orders and eligible pair tables.

    ``orders`` holds the sort order of the relation's pair distances in each family used.
    """

    iu: np.ndarray  # (P,) first fact of each within-relation pair, f < g
    ju: np.ndarray
    orders: dict[int, _Order]  # family -> order of the P distances 1 - cos
    pairs: list[_PairTables]
    #: positions in ``pairs`` whose Spearman is undefined: a family's distances over the
    #: pair's shared facts are constant up to rounding
    #: (:func:`fks.metrics.internal.scores.is_constant`)
    constant: frozenset[int] = frozenset()


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def _geometry(V: np.ndarray, has: np.ndarray, pairs: Sequence[tuple[int, int]],
              min_facts: int, identity: np.ndarray | None = None) -> _Geometry:
    """Precompute one relation: ``V (n_r, T, k)`` centroids, ``has (n_r, T)``.

    A pair is eligible with at least ``min_facts`` shared facts (§9.1). Distances of absent
    cells are placeholders: those facts get zero weight in every pair that lacks them.
    ``identity (n_r, P, 2)``: the facts' top-1 rates and chance against the reference pool
    (:attr:`KtsSpace.identity`), used instead of ranking among the relation's facts.
    """
    V = _unit(V)
    iu, ju = np.triu_indices(len(V), k=1)
    tables, orders, dists, constant = [], {}, {}, set()
    for p, (a, b) in enumerate(pairs):
        shared = has[:, a] & has[:, b]
        if shared.sum() < min_facts:
            continue
        both = shared[iu] & shared[ju]  # the pair distances among the shared facts
        for fam in (a, b):
            if fam not in orders:
                dists[fam] = 1.0 - (V[:, fam] @ V[:, fam].T)[iu, ju]
                orders[fam] = _order(dists[fam])
            if is_constant(dists[fam][both]):
                constant.add(len(tables))
        if identity is not None:
            chance = identity[shared, p, 1]
            if np.any(chance <= 0):
                raise ValueError("a fact of the pair has no reference-pool chance: the "
                                 "identity file does not match the centroids")
            tables.append(_PairTables(p, a, b, shared, np.where(shared, identity[:, p, 0], 0.0),
                                      float(np.mean(chance))))
            continue
        sim = V[:, a] @ V[:, b].T  # sim[f, g] = cos(v_{f,a}, v_{g,b})
        own = np.diag(sim)
        inside = shared[:, None] & shared[None, :]
        np.fill_diagonal(inside, False)
        cand = shared[None, :]
        hits = 0.5 * (identity_hits(cand, (sim > own[:, None]) & inside)[0].astype(np.float64)
                      + identity_hits(cand, (sim.T > own[:, None]) & inside)[0])
        tables.append(_PairTables(p, a, b, shared, np.where(shared, hits, 0.0),
                                  1.0 / float(shared.sum())))
    return _Geometry(iu, ju, orders, tables, frozenset(constant))


def _geo_scores(geom: _Geometry, counts: np.ndarray, chunk_elements: int, *,
                fast: bool = True) -> np.ndarray:
    """``(S, n_pairs)`` Spearman rho of every eligible pair for ``counts (S, n_r)``.

    Pairs sharing the same fact set share the pair weights ``c_f c_g`` and each family's
    ranks; each (shared set, family) is ranked once. With ``fast``, ranks are float32 (exact:
    integers below 2**24, so relations up to 4,096 facts) and the sums accumulate in float32
    (relative error ~1e-7); otherwise everything is float64 (the point estimates).
    """
    S, n = counts.shape
    P = len(geom.iu)
    dtype = np.float32 if fast and n <= 4096 else np.float64
    rho = np.full((S, len(geom.pairs)), np.nan)
    groups: dict[bytes, list[int]] = {}
    for q, t in enumerate(geom.pairs):
        groups.setdefault(t.shared.tobytes(), []).append(q)
    step = max(1, chunk_elements // max(P, 1))
    for members in groups.values():
        shared = geom.pairs[members[0]].shared
        for s in range(0, S, step):
            c = (counts[s:s + step] * shared).astype(dtype)
            w = np.take(c, geom.iu, axis=1)
            w *= np.take(c, geom.ju, axis=1)
            ranks: dict[int, np.ndarray] = {}
            wx: dict[int, np.ndarray] = {}
            var: dict[int, np.ndarray] = {}
            for q in members:
                t = geom.pairs[q]
                for fam in (t.fam_a, t.fam_b):
                    if fam not in ranks:
                        ranks[fam] = centred_ranks(w, geom.orders[fam])
                        wx[fam] = w * ranks[fam]
                        var[fam] = _rowdot(wx[fam], ranks[fam])
                rho[s:s + step, q] = _correlation(_rowdot(wx[t.fam_a], ranks[t.fam_b]),
                                                  var[t.fam_a], var[t.fam_b])
    rho[:, sorted(geom.constant)] = np.nan  # constant distances: Spearman undefined
    return rho


def _id_scores(geom: _Geometry, counts: np.ndarray, eps: float) -> np.ndarray:
    """Chance-corrected identity of every eligible pair for ``counts (S, n_r)`` (§10.2-10.4).

    ``top1 = (C_shared @ hit) / (C_shared @ 1)``; returns ``(S, n_pairs)`` scores clipped to
    ``[0, 1]`` (nan for a slot that drew none of the pair's shared facts).
    """
    if not geom.pairs:
        return np.zeros((len(counts), 0))
    shared = np.stack([t.shared for t in geom.pairs], axis=1).astype(np.float64)  # (n_r, Q)
    hits = np.stack([t.hits for t in geom.pairs], axis=1)  # (n_r, Q)
    chance = np.array([t.chance for t in geom.pairs])
    n = counts @ shared
    with np.errstate(invalid="ignore", divide="ignore"):
        top1 = (counts @ hits) / n
        adj = np.clip((top1 - chance) / (1.0 - chance + eps), 0.0, 1.0)
    return np.where(n > 0, adj, np.nan)


@dataclass
class KtsResult:
    """KTS point estimates and replicates (``B`` replicates, ``L`` layers, ``P`` pairs).

    Attributes:
        layers, pairs: the axes' labels.
        geo_raw, identity: ``(L, P)`` point relation-macro Spearman rho and clipped
            chance-corrected identity.
        geo_raw_reps, identity_reps: ``(B, L, P)`` replicates (``None`` for a point-only
            computation).
        shared_facts: ``(P,)`` facts shared by each pair; n_relations: ``(P,)`` eligible
            relations.
        per_relation_geo, per_relation_id: ``{relation: (L, P)}`` point values (nan where
            the relation is not eligible).
        fact_identity: ``(F,)`` per-fact identification rate (mean over layers, eligible
            pairs and both directions; nan for a fact in no eligible pair).
        n_relations_geo_constant: ``(P,)`` eligible relations whose Spearman is undefined
            because a family's distances are constant (the most over the layers).
    """

    layers: tuple[int, ...]
    pairs: list[str]
    geo_raw: np.ndarray
    identity: np.ndarray
    shared_facts: np.ndarray
    n_relations: np.ndarray
    per_relation_geo: dict[str, np.ndarray]
    per_relation_id: dict[str, np.ndarray]
    fact_identity: np.ndarray
    geo_raw_reps: np.ndarray | None = None
    identity_reps: np.ndarray | None = None
    eps: float = 1e-12
    n_relations_geo_constant: np.ndarray | None = None

    def summary(self, replicates: bool = False) -> dict[str, np.ndarray]:
        """§9.3-11.2 on the point (``(L, P)``) or the replicates (``(B, L, P)``).

        Returns ``kts_geo_raw_spearman``, ``kts_geo`` (``(rho + 1) / 2``), ``kts_id`` and
        ``kts`` (harmonic composite per pair and layer), each averaged over pairs then layers
        (shape ``()`` or ``(B,)``), and the per-pair ``pair_*`` versions averaged over layers
        (``(P,)`` or ``(B, P)``).
        """
        if replicates:
            if self.geo_raw_reps is None or self.identity_reps is None:
                raise ValueError("a point-only KTS result has no replicates")
            geo_raw, ident = self.geo_raw_reps, self.identity_reps
        else:
            geo_raw, ident = self.geo_raw, self.identity
        g = (geo_raw + 1.0) / 2.0
        comp = 2.0 * g * ident / (g + ident + self.eps)
        out: dict[str, np.ndarray] = {}
        with _quiet_nanmean():
            for name, arr in (("geo_raw_spearman", geo_raw), ("geo", g), ("id", ident),
                              ("", comp)):
                per_pair = np.nanmean(arr, axis=-2)
                out["pair_kts" + (f"_{name}" if name else "")] = per_pair
                out["kts" + (f"_{name}" if name else "")] = np.nanmean(per_pair, axis=-1)
        return out


def _relation_groups(draws: ClusterDraws | None, fact_relation: np.ndarray
                     ) -> list[tuple[str, np.ndarray]]:
    """Per relation: its name and its fact indices (the draws' members when given)."""
    if draws is not None:
        return list(zip(draws.relations, draws.members, strict=True))
    names, codes = np.unique(np.asarray(fact_relation).astype(str), return_inverse=True)
    return [(str(n), np.flatnonzero(codes == r)) for r, n in enumerate(names)]


def _kts(space: KtsSpace, fact_relation: np.ndarray, draws: ClusterDraws | None,
         chunk_elements: int, progress: Callable[[Any], Any] | None) -> KtsResult:
    """Shared loop of :func:`kts_point` and :func:`kts_bootstrap` (layer by layer)."""
    pairs, L, F = space.pairs(), len(space.layers), len(space.fact_ids)
    groups = _relation_groups(draws, fact_relation)
    B, K, P = (draws.n_resamples if draws is not None else 0), len(groups), len(pairs)
    point_g, point_i = np.full((L, K, P), np.nan), np.full((L, K, P), np.nan)
    reps_g = np.full((B, L, P), np.nan) if draws is not None else None
    reps_i = np.full((B, L, P), np.nan) if draws is not None else None
    hit_sum, hit_n = np.zeros(F), np.zeros(F)
    n_constant = np.zeros((L, P), dtype=np.int64)
    layers: Any = list(enumerate(space.layers))
    for li, layer in (progress(layers) if progress is not None else layers):
        V = np.asarray(space.load(layer))
        ident = None if space.identity is None else np.asarray(space.identity(layer))
        table_g = np.full((B, K, P), np.nan)
        table_i = np.full((B, K, P), np.nan)
        for r, (_, mem) in enumerate(groups):
            geom = _geometry(V[mem], space.has[mem], pairs, space.min_facts,
                             None if ident is None else ident[mem])
            if not geom.pairs:
                continue
            cols = [t.index for t in geom.pairs]
            for q in geom.constant:
                n_constant[li, geom.pairs[q].index] += 1
            ones = np.ones((1, len(mem)))
            point_g[li, r, cols] = _geo_scores(geom, ones, chunk_elements, fast=False)[0]
            point_i[li, r, cols] = _id_scores(geom, ones, space.eps)[0]
            for t in geom.pairs:
                hit_sum[mem[t.shared]] += t.hits[t.shared]
                hit_n[mem[t.shared]] += 1
            if draws is not None:
                counts = draws.counts(r)
                b, k = draws.slot_index[r][:, 0], draws.slot_index[r][:, 1]
                table_g[b[:, None], k[:, None], cols] = _geo_scores(geom, counts, chunk_elements)
                table_i[b[:, None], k[:, None], cols] = _id_scores(geom, counts, space.eps)
        if draws is not None:
            with _quiet_nanmean():
                reps_g[:, li], reps_i[:, li] = np.nanmean(table_g, 1), np.nanmean(table_i, 1)
    with _quiet_nanmean():
        geo, ident = np.nanmean(point_g, axis=1), np.nanmean(point_i, axis=1)
    names = [n for n, _ in groups]
    return KtsResult(
        layers=space.layers, pairs=space.pair_names(), geo_raw=geo, identity=ident,
        shared_facts=np.array([int((space.has[:, i] & space.has[:, j]).sum()) for i, j in pairs]),
        n_relations=np.isfinite(point_g[0]).sum(axis=0) if L else np.zeros(P, int),
        per_relation_geo={n: point_g[:, r] for r, n in enumerate(names)},
        per_relation_id={n: point_i[:, r] for r, n in enumerate(names)},
        fact_identity=np.where(hit_n > 0, hit_sum / np.maximum(hit_n, 1), np.nan),
        geo_raw_reps=reps_g, identity_reps=reps_i, eps=space.eps,
        n_relations_geo_constant=n_constant.max(axis=0) if L else np.zeros(P, np.int64))


def _one_blas_thread() -> Any:
    """Limit BLAS to one thread inside the KTS loops.

    KTS runs many small matrix products, for which thread start-up costs more than it gives
    (markedly so on a shared machine).
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def kts_point(space: KtsSpace, fact_relation: Sequence[str] | np.ndarray) -> KtsResult:
    """KTS-Geo, KTS-ID and KTS on the original sample (no resampling), spec §9-11.

    A relation whose distance vector in a family is constant up to rounding has an undefined
    Spearman: NaN in ``per_relation_geo``, left out of the macro, counted in
    ``n_relations_geo_constant``.

    Args:
        space: centroids of the facts.
        fact_relation: ``(F,)`` relation of each fact.
    """
    with _one_blas_thread():
        return _kts(space, np.asarray(fact_relation), None, 4_000_000, None)


def kts_bootstrap(space: KtsSpace, draws: ClusterDraws, *, chunk_elements: int = 500_000,
                  progress: Callable[[Any], Any] | None = None) -> KtsResult:
    """KTS point estimates and replicates under ``draws`` (the facts of ``space``).

    Args:
        space: centroids; ``space.fact_ids`` must be the draws' facts, in order.
        draws: from :func:`draw_clusters` over the same facts.
        chunk_elements: bound on the size of one ``(slots, pairs)`` weight block (cache-sized
            blocks are fastest).
        progress: optional wrapper of the ``(index, layer)`` list (a progress bar).
    """
    if len(space.fact_ids) != draws.n_facts:
        raise ValueError(f"the space has {len(space.fact_ids)} facts, the draws "
                         f"{draws.n_facts}")
    rel = np.asarray(draws.relations)[draws.fact_relation]
    with _one_blas_thread():
        return _kts(space, rel, draws, chunk_elements, progress)


# ========================================================================= headline figures
#: fact-level headline figures of §20 (plus ISS peak/late), in table order
FACT_METRICS: tuple[str, ...] = ("anchor_accuracy", "bcs", "bes", "scr", "swr", "sar", "ur",
                                 "iss", "iss_peak", "iss_late", "iss_unwhitened")
#: KTS figures (§9-11, §17.3)
KTS_METRICS: tuple[str, ...] = ("kts_geo", "kts_geo_raw_spearman", "kts_id", "kts")
MACRO_SUFFIX = "_relation_macro"


@dataclass
class Estimate:
    """A figure's point estimate and its bootstrap replicates under one set of draws.

    Attributes:
        point: the figure on the original sample (None when undefined).
        replicates: ``(B,)`` the figure on each replicate (nan where undefined).
        aggregation: ``fact_mean``, ``relation_macro`` or ``relation_macro_pairs_layers``.
        n_facts: facts with a value; n_relations: relations with at least one.
        draws_key: identifies the draws (:func:`draws_key`); paired comparisons need equal keys.
    """

    point: float | None
    replicates: np.ndarray
    aggregation: str
    n_facts: int
    n_relations: int
    draws_key: str


def draws_key(fact_ids: Sequence[str], fact_relation: Sequence[str], *, n_resamples: int,
              seed: int | None) -> str:
    """sha256 naming a set of draws: the facts (ids and relations, in order), B and the seed.

    :func:`draw_clusters` is deterministic in exactly these, so equal keys mean equal draws.
    """
    h = hashlib.sha256(f"B={n_resamples};seed={seed}\n".encode())
    for f, r in zip(fact_ids, fact_relation, strict=True):
        h.update(f"{f}\t{r}\n".encode())
    return h.hexdigest()


def _counts_of(x: np.ndarray, codes: np.ndarray) -> tuple[int, int]:
    ok = np.isfinite(x)
    return int(ok.sum()), int(len(np.unique(codes[ok])))


def fact_estimates(draws: ClusterDraws, values: Mapping[str, np.ndarray], *, key: str
                   ) -> dict[str, Estimate]:
    """Fact-mean and relation-macro estimates of per-fact values (nan = no value).

    For each ``name`` in ``values`` (``(F,)`` arrays aligned with the draws' facts) gives
    ``name`` (fact mean, the spec's model-level figure, e.g. §4.5) and
    ``name + "_relation_macro"`` (every relation weighs the same, §20's per-relation macro).
    """
    if not values:
        return {}
    names = list(values)
    X = np.stack([np.asarray(values[n], dtype=np.float64) for n in names], axis=1)
    W = fact_weights(draws)
    rel = draws.fact_relation
    labels = np.asarray(draws.relations)[rel]
    fm_point = np.atleast_1d(fact_mean(X))
    fm_reps = fact_mean_replicates(draws, X, weights=W)
    rm_point = np.atleast_1d(relation_macro(X, labels))
    rm_reps = relation_macro_replicates(draws, X)
    out: dict[str, Estimate] = {}
    for j, n in enumerate(names):
        nf, nr = _counts_of(X[:, j], rel)
        out[n] = Estimate(_finite_or_none(fm_point[j]), fm_reps[:, j], "fact_mean", nf, nr, key)
        out[n + MACRO_SUFFIX] = Estimate(_finite_or_none(rm_point[j]), rm_reps[:, j],
                                         "relation_macro", nf, nr, key)
    return out


def kts_estimates(result: KtsResult, *, key: str, n_facts: int) -> dict[str, Estimate]:
    """Estimates of §9-11 from a bootstrapped :class:`KtsResult`.

    Names: the :data:`KTS_METRICS`, and ``"<metric>[<pair>]"`` for each family pair (window
    mean of that pair).
    """
    point, reps = result.summary(), result.summary(replicates=True)
    n_rel = int(result.n_relations.max()) if len(result.n_relations) else 0
    agg = "relation_macro_pairs_layers"
    out = {m: Estimate(_finite_or_none(point[m]), reps[m], agg, n_facts, n_rel, key)
           for m in KTS_METRICS}
    for p, pair in enumerate(result.pairs):
        for m in KTS_METRICS:
            out[f"{m}[{pair}]"] = Estimate(
                _finite_or_none(point["pair_" + m][p]), reps["pair_" + m][:, p],
                "relation_macro_layers", int(result.shared_facts[p]),
                int(result.n_relations[p]), key)
    return out


# ================================================================================ intervals
def interval_record(point: float | None, replicates: np.ndarray | None, *, confidence: float,
                    **extra: Any) -> dict[str, Any]:
    """One interval entry: ``{point, low, high, n_valid_resamples, ...extra}``.

    Non-finite replicates (a replicate where the statistic is undefined, e.g. no valid fact)
    are dropped and counted; with no finite replicate, or no replicates at all, the bounds
    are ``None``.
    """
    out: dict[str, Any] = {"point": _finite_or_none(point), "low": None, "high": None,
                           "n_valid_resamples": 0}
    if replicates is not None:
        reps = np.asarray(replicates, dtype=float)
        reps = reps[np.isfinite(reps)]
        out["n_valid_resamples"] = int(reps.size)
        if reps.size:
            out["low"], out["high"] = percentile_interval(reps, confidence=confidence)
    return {**out, **extra}


def _finite_or_none(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if np.isfinite(x) else None
