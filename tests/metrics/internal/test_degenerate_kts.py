"""Constant distance vectors give an undefined Spearman, never a ranked rounding noise
(issue 13 point 4), in the engine's ``kts_pair`` and in the bootstrap's ``kts_point``."""

from __future__ import annotations

import numpy as np

from fks.metrics.internal.scores import BlockGrams, is_constant, kts_macro, kts_pair
from fks.metrics.stats.clustered_bootstrap import KtsSpace, draw_clusters, kts_bootstrap, kts_point

N, T, K = 12, 2, 8


def _near_identical(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` unit vectors equal to one another up to one ulp per component.

    Mathematically the same centroid (their pairwise distances are 0), numerically the
    distances carry BLAS rounding of about 1e-16, which an unguarded rank would order.
    """
    v = rng.normal(size=K)
    v /= np.linalg.norm(v)
    out = np.repeat(v[None], n, axis=0)
    for i in range(n):
        j = rng.integers(0, K, size=3)
        out[i, j] = np.nextafter(out[i, j], np.sign(rng.normal(size=3)) * np.inf)
    return out


def _centroids(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two relations; in relation ``r0`` family 1's centroids are all the same vector."""
    rng = np.random.default_rng(seed)
    V = rng.normal(size=(2 * N, T, K))
    V /= np.linalg.norm(V, axis=-1, keepdims=True)
    V[:N, 1] = _near_identical(rng, N)
    rel = np.array(["r0"] * N + ["r1"] * N)
    return V, rel


def test_is_constant_sees_rounding_noise_but_not_real_spread():
    x = 1.0 - np.full(20, 0.3)
    assert is_constant(x + np.arange(20) * 1e-16)
    assert not is_constant(x + np.arange(20) * 1e-6)
    assert is_constant(np.float32(0.5) + np.arange(10, dtype=np.float32) * np.float32(1e-7))
    assert is_constant(np.array([0.2]))


def test_noise_is_really_there():
    # the guard is what makes the difference: the distances are not bit-identical
    V, _ = _centroids()
    G = V[:N, 1] @ V[:N, 1].T
    d = 1.0 - G[np.triu_indices(N, 1)]
    assert np.ptp(d) > 0 and np.ptp(d) < 1e-14


def test_kts_pair_gives_none_and_counts_the_relation():
    V, rel = _centroids()
    blocks = (np.arange(N), np.arange(N, 2 * N))
    grams = BlockGrams(V, blocks)
    per_rel = kts_pair(grams, 0, 1, np.ones(2 * N, bool), ("r0", "r1"), min_facts=5)
    assert per_rel["r0"]["rho"] is None
    assert per_rel["r0"]["rho_undefined"] == "constant_distances"
    assert per_rel["r1"]["rho"] is not None and per_rel["r1"]["rho_undefined"] is None
    assert per_rel["r0"]["id"] is not None  # identity is still scored
    macro = kts_macro(per_rel, 1e-12)
    assert macro["n_relations_geo_constant"] == 1 and macro["n_relations_geo"] == 1
    assert macro["kts_geo_raw_spearman"] == per_rel["r1"]["rho"]


def test_kts_point_and_bootstrap_give_nan_and_count_the_relation():
    V, rel = _centroids()
    space = KtsSpace(np.array([f"f{i}" for i in range(2 * N)]), ("a", "b"), (0,),
                     np.ones((2 * N, T), bool), lambda layer: V, min_facts=5)
    res = kts_point(space, rel)
    assert np.isnan(res.per_relation_geo["r0"]).all()
    assert np.isfinite(res.per_relation_geo["r1"]).all()
    assert res.n_relations_geo_constant.tolist() == [1]
    assert res.geo_raw[0, 0] == res.per_relation_geo["r1"][0, 0]
    boot = kts_bootstrap(space, draw_clusters(rel, n_resamples=30, seed=1))
    assert boot.n_relations_geo_constant.tolist() == [1]
    # a replicate holding only the constant relation has no KTS-Geo at all
    only_r0 = (draw_clusters(rel, n_resamples=30, seed=1).relation_draws == 0).all(axis=1)
    assert np.isnan(boot.geo_raw_reps[only_r0, 0, 0]).all()
    assert np.isfinite(boot.geo_raw_reps[~only_r0, 0, 0]).all()
