"""The numerical rank of the PCA whitening: the residualisation's rank bound and the
storage-rounding floor (:func:`fks.metrics.internal.space.fit_whitening`)."""

from __future__ import annotations

import numpy as np
import pytest

from fks.configs import WhiteningConfig
from fks.metrics.internal.negatives import negatives_from_lists
from fks.metrics.internal.scores import BlockGrams, iss_from_pairs, pair_scores
from fks.metrics.internal.space import (
    Design,
    embed,
    family_centroids,
    fit_residualizer,
    fit_whitening,
    pairs_of,
    residual_rank,
    rounding_variance,
)

EPS = 1e-8
FAMILIES = ("anchor", "paraphrase", "format", "context", "multilingual")
PCA = WhiteningConfig(method="pca", pca_max_dim=512)


def dense_residual_rank(relation, family):
    """``rank(I - P_r - P_t + P_1)`` from the dense ``n x n`` operator."""
    n = len(relation)

    def proj(codes):
        ind = (codes[:, None] == np.unique(codes)[None, :]).astype(float)
        return ind @ np.linalg.pinv(ind)

    L = np.eye(n) - proj(relation) - proj(family) + np.full((n, n), 1.0 / n)
    return int(np.linalg.matrix_rank(L))


@pytest.mark.parametrize("seed", range(4))
def test_residual_rank_is_the_rank_of_the_residualisation_operator(seed):
    rng = np.random.default_rng(seed)
    n, R, T = 60, 4, 5
    relation, family = rng.integers(R, size=n), rng.integers(T, size=n)
    got = residual_rank(relation, family, R + 2, T)  # two empty relation codes count for nothing
    assert got == dense_residual_rank(relation, family)
    # unbalanced: fewer dimensions are removed than there are independent group means
    assert got > n - (len(np.unique(relation)) + len(np.unique(family)) - 1)


def test_residual_rank_of_a_balanced_design_counts_the_groups():
    relation, family = np.repeat(np.arange(3), 10), np.tile(np.arange(5), 6)
    assert residual_rank(relation, family, 3, 5) == 30 - (3 + 5 - 1)
    assert dense_residual_rank(relation, family) == 30 - (3 + 5 - 1)


# ---------------------------------------------------------------- planted n < d states
def planted_design(rng, n_facts=20, n_rel=4):
    """Facts of ``n_rel`` relations; 0-3 queries per (fact, family), unbalanced."""
    counts = rng.integers(1, 4, size=(n_facts, len(FAMILIES)))
    counts[rng.random(counts.shape) < 0.1] = 0
    counts[:, 0] = 1  # every fact has an anchor
    fact_relation = np.arange(n_facts) % n_rel
    fact = np.repeat(np.arange(n_facts), counts.sum(axis=1))
    family = np.concatenate([np.repeat(np.arange(len(FAMILIES)), c) for c in counts])
    n = len(fact)
    return Design(
        rows=np.arange(n), query_ids=np.array([f"q{i}" for i in range(n)]), fact=fact,
        relation=fact_relation[fact], family=family,
        fact_ids=np.array([f"f{i}" for i in range(n_facts)]), fact_relation=fact_relation,
        copy=np.zeros(n_facts, bool), relations=tuple(f"r{i}" for i in range(n_rel)),
        all_families=tuple(FAMILIES), families=tuple(FAMILIES))


def planted_states(rng, design, d, *, signal, offset=20.0):
    """Exact float64 states: mean + relation + family + fact signal + full-rank noise."""
    F, R, T = len(design.fact_ids), len(design.relations), len(design.all_families)
    a = rng.standard_normal((F, d)) * signal
    return (offset * rng.standard_normal(d) + rng.standard_normal((R, d))[design.relation]
            + rng.standard_normal((T, d))[design.family] + a[design.fact]
            + rng.standard_normal((design.n, d)))


def stored(x):
    """What ``load_layer`` returns: float16 storage read back as float32."""
    return x.astype(np.float16).astype(np.float32)


def iss_per_fact(q, design):
    V = family_centroids(q, design, EPS)
    ids = design.fact_ids.tolist()
    lists = {f: [g for j, g in enumerate(ids) if j != i
                 and design.fact_relation[j] == design.fact_relation[i]]
             for i, f in enumerate(ids)}
    neg = negatives_from_lists(lists, ids, design.fact_relation)
    pairs = pairs_of(design.families)
    ps = pair_scores(V, design.has, neg, pairs, BlockGrams(V, neg.blocks))
    return iss_from_pairs(ps, np.ones(len(pairs), bool), EPS)["iss"]


def old_rule_embed(x, design, J):
    """The former whitening (EIG_RTOL alone): no rank bound, no rounding floor."""
    res = fit_residualizer(x, design.relation, design.family, len(design.relations),
                           len(design.all_families))
    res.apply_(x, design.relation, design.family)
    from fks.metrics.internal.space import project_normalize

    wh = fit_whitening(x, J, PCA)
    return project_normalize(x, wh, EPS), wh


@pytest.fixture(scope="module")
def small_run():
    rng = np.random.default_rng(7)
    design = planted_design(rng)
    d = 3 * design.n  # n < d, d < pca_max_dim: whitening may keep up to d components
    J = (np.eye(d) + 0.5 * rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)
    return design, d, J, planted_states(rng, design, d, signal=2.0)


def test_components_beyond_the_rank_bound_are_dropped(small_run):
    design, d, J, h = small_run
    rank = residual_rank(design.relation, design.family, len(design.relations),
                         len(design.all_families))
    # the float64 spectrum of the exact residualised states has exactly rank(L) components
    xbar = h.copy()
    fit_residualizer(h, design.relation, design.family, len(design.relations),
                     len(design.all_families)).apply_(xbar, design.relation, design.family)
    assert np.linalg.matrix_rank(xbar @ J.T.astype(np.float64)) == rank < design.n < d
    _, _, wh = embed(stored(h), design, J, PCA, EPS)
    assert (wh.k, wh.rank_bound, wh.n_dropped_rank) == (rank, rank, min(512, d) - rank)
    assert wh.n_dropped_precision == 0 and wh.design_determined
    # the former rule keeps float32 rounding of the null space as whitened components
    _, old = old_rule_embed(stored(h), design, J)
    assert old.k > rank + 10


def project(h, design, res, wh):
    """Rows ``h`` of the design's queries through a fitted residualisation and map, unit."""
    off = (res.mu_rel[design.relation] + res.mu_fam[design.family] - res.mu)
    z = (np.asarray(h, np.float64) - off) @ wh.matrix.astype(np.float64)
    return z / np.linalg.norm(z, axis=1, keepdims=True)


def test_iss_and_out_of_sample_rows_match_the_exact_pipeline(small_run):
    # oracle: the pipeline in float64 on the exact states, cut at the float64 numerical rank
    # (no rounding anywhere). The float32 path on the float16 store must reproduce its ISS,
    # and a re-extracted state (the stored one off by a relative 2**-9 per component, bf16
    # rounding) must map next to its stored row as in the oracle. Under the former rule the
    # fitted rows barely touch the null components (their projections there are float32
    # rounding), but a new row does, and whitening blows that part up to unit variance.
    design, d, J, h = small_run
    oracle_x = h.copy()
    oracle_q, oracle_res, oracle_wh = embed(oracle_x, design, J.astype(np.float64), PCA, EPS,
                                            storage_dtype=None)
    oracle = iss_per_fact(oracle_q, design)
    x = stored(h)
    new_q, new_res, new_wh = embed(x.copy(), design, J, PCA, EPS)
    assert np.nanmax(np.abs(iss_per_fact(new_q, design) - oracle)) < 2e-3
    old_x = x.copy()
    old_q, old_wh = old_rule_embed(old_x, design, J)
    old_res = fit_residualizer(x, design.relation, design.family, len(design.relations),
                               len(design.all_families))

    rng = np.random.default_rng(2)
    fresh = x * (1.0 + 2.0**-9 * rng.uniform(-1, 1, size=x.shape))

    def cos(q, res, wh):
        return np.einsum("ij,ij->i", project(fresh, design, res, wh), q.astype(np.float64))

    want = cos(oracle_q, oracle_res, oracle_wh)
    got = cos(new_q, new_res, new_wh)
    assert np.median(want) > 0.9 and np.abs(got - want).max() < 0.02
    assert np.median(cos(old_q, old_res, old_wh)) < 0.5


def test_whitening_every_residual_dimension_makes_iss_a_design_constant(small_run):
    # k = rank(L): the whitened Gram is n P_col(L), whatever the states -- planted stable and
    # planted unstable facts score the same, which design_determined flags
    design, d, J, _ = small_run
    rng = np.random.default_rng(11)
    scores = []
    for signal in (4.0, 0.0):
        q, _, wh = embed(stored(planted_states(rng, design, d, signal=signal)), design, J,
                         PCA, EPS)
        assert wh.design_determined
        scores.append(iss_per_fact(q, design))
    np.testing.assert_allclose(scores[0], scores[1], atol=2e-3)
    # with fewer components than the rank the planted signal shows (not design-determined)
    cfg = WhiteningConfig(method="pca", pca_max_dim=24)
    got = []
    for signal in (4.0, 0.0):
        q, _, wh = embed(stored(planted_states(rng, design, d, signal=signal)), design, J,
                         cfg, EPS)
        assert not wh.design_determined and wh.k == 24
        got.append(np.nanmean(iss_per_fact(q, design)))
    assert got[0] > got[1] + 0.3


# ------------------------------------------------------------------ n > d, full rank
def test_full_rank_well_conditioned_whitening_is_unchanged():
    # n > d, states of full rank: the rank bound and the floor drop nothing and the map is
    # bit-identical to the former rule's, raw and transported, float32 and float64
    rng = np.random.default_rng(3)
    design = planted_design(rng, n_facts=60)
    d = 24
    h = stored(planted_states(rng, design, d, signal=1.0))
    J = (np.eye(d) + 0.5 * rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)
    for dtype in (np.float32, np.float64):
        for transport in (None, J):
            for cfg in (PCA, WhiteningConfig(method="pca", pca_max_dim=10)):
                _, _, new = embed(h.astype(dtype), design, transport, cfg, EPS)
                _, old = old_rule_embed(h.astype(dtype), design, transport)
                old_k = min(cfg.pca_max_dim, d)
                assert new.k == old_k and new.n_dropped == 0 and not new.design_determined
                if cfg is PCA:
                    assert np.array_equal(new.matrix, old.matrix)
                    assert np.array_equal(new.eigenvalues, old.eigenvalues)


def test_rounding_floor_drops_directions_holding_only_float16_rounding():
    # rank-6 states around a large mean, stored in float16: the 26 other directions hold only
    # rounding (variance ~ u**2 h**2 / 3), which the former rule kept and whitened to unit
    # variance; the floor keeps exactly the 6 planted components
    rng = np.random.default_rng(5)
    n, d, m = 600, 32, 6
    h = 100.0 * rng.standard_normal(d) + rng.standard_normal((n, m)) @ rng.standard_normal((m, d))
    x = stored(h)
    rv = rounding_variance(x, np.float16)
    xbar = x - x.mean(axis=0, dtype=np.float64).astype(np.float32)
    wh = fit_whitening(xbar, None, PCA, rank_bound=n - 1, rounding_var=rv)
    assert (wh.k, wh.n_dropped_precision, wh.n_dropped_rank) == (m, d - m, 0)
    assert fit_whitening(xbar, None, PCA).k == d  # former rule: all of them
    # the same states unrounded (float64): the null directions are numerically zero
    h_bar = h - h.mean(axis=0)
    assert fit_whitening(h_bar, None, PCA, rank_bound=n - 1,
                         rounding_var=rounding_variance(h, np.float16)).k == m
    # the bound is an upper bound of the actual rounding variance
    err = (x.astype(np.float64) - h).var(axis=0)
    assert np.all(err <= rv) and np.all(err >= rv / 8)
