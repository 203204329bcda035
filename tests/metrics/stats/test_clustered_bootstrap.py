"""Relation-clustered bootstrap: vectorised statistics versus naive per-replicate loops on the
same draws, interval properties, and agreement of the KTS point with the spec kernels."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from fks.metrics.internal import cross_condition_top1
from fks.metrics.stats.clustered_bootstrap import (
    KtsSpace,
    _order,
    draw_clusters,
    draws_key,
    fact_estimates,
    fact_mean_replicates,
    identity_hits,
    interval_record,
    kts_bootstrap,
    kts_estimates,
    kts_point,
    relation_macro_replicates,
    weighted_spearman,
)


def relations_of(sizes):
    return np.array([f"r{r}" for r, n in enumerate(sizes) for _ in range(n)])


# ------------------------------------------------------------------------------- the draws
def test_draws_are_deterministic_and_cluster_shaped():
    rel = relations_of([4, 7, 2])
    a = draw_clusters(rel, n_resamples=50, seed=3)
    b = draw_clusters(rel, n_resamples=50, seed=3)
    c = draw_clusters(rel, n_resamples=50, seed=4)
    assert np.array_equal(a.relation_draws, b.relation_draws)
    assert all(np.array_equal(x, y) for x, y in zip(a.fact_draws, b.fact_draws, strict=True))
    assert not np.array_equal(a.relation_draws, c.relation_draws)
    assert a.relation_draws.shape == (50, 3)
    for r, mem in enumerate(a.members):
        counts = a.counts(r)
        assert np.all(counts.sum(axis=1) == len(mem))  # n_r facts drawn in every slot
        assert len(counts) == int((a.relation_draws == r).sum())
    for bi in (0, 17, 49):
        slots = a.replicate(bi)
        assert [r for r, _ in slots] == a.relation_draws[bi].tolist()
        for r, facts in slots:  # facts of a slot belong to its relation
            assert set(rel[facts]) == {f"r{r}"}


def test_draws_key_names_facts_seed_and_size():
    ids, rel = ["f1", "f2"], ["a", "b"]
    k = draws_key(ids, rel, n_resamples=10, seed=1)
    assert k == draws_key(ids, rel, n_resamples=10, seed=1)
    assert k != draws_key(ids, rel, n_resamples=10, seed=2)
    assert k != draws_key(ids, ["a", "a"], n_resamples=10, seed=1)
    assert k != draws_key(ids, rel, n_resamples=11, seed=1)


# ------------------------------------------------------------------- fact-level statistics
def test_fact_statistics_equal_a_naive_loop_on_the_same_draws():
    rng = np.random.default_rng(0)
    rel = relations_of([5, 9, 3, 6])
    x = rng.normal(size=len(rel))
    x[[2, 10]] = np.nan  # facts without a value are left out, not zero-filled
    draws = draw_clusters(rel, n_resamples=40, seed=11)
    fm = fact_mean_replicates(draws, x)
    rm = relation_macro_replicates(draws, x)
    for b in range(draws.n_resamples):
        slots = draws.replicate(b)
        expanded = np.concatenate([facts for _, facts in slots])
        vals = x[expanded]
        assert fm[b] == pytest.approx(np.nanmean(vals))
        slot_means = [np.nanmean(x[f]) for _, f in slots if np.isfinite(x[f]).any()]
        assert rm[b] == pytest.approx(np.mean(slot_means))


def test_intervals_contain_the_point_and_shrink_when_facts_are_duplicated():
    rng = np.random.default_rng(1)
    rel = relations_of([8, 12, 6, 10, 9])
    x = rng.uniform(size=len(rel))
    key = "k"
    est = fact_estimates(draw_clusters(rel, n_resamples=1000, seed=5), {"bcs": x}, key=key)
    k = 4  # duplicate every fact k times, inside its relation
    rel_k, x_k = np.repeat(rel, k), np.repeat(x, k)
    est_k = fact_estimates(draw_clusters(rel_k, n_resamples=1000, seed=5), {"bcs": x_k}, key=key)
    for name in ("bcs", "bcs_relation_macro"):
        rec = interval_record(est[name].point, est[name].replicates, confidence=0.95)
        rec_k = interval_record(est_k[name].point, est_k[name].replicates, confidence=0.95)
        assert rec["low"] <= rec["point"] <= rec["high"]
        assert rec_k["point"] == pytest.approx(rec["point"])
        # only the within-relation part of the variance shrinks (by k); the relation-level
        # part stays, so the width falls by about sqrt((1 + 1/k) / 2) ~ 0.79 here
        assert rec_k["high"] - rec_k["low"] < 0.9 * (rec["high"] - rec["low"])


# --------------------------------------------------------------------- Spearman kernel
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_weighted_spearman_equals_scipy_on_the_expanded_sample(seed):
    rng = np.random.default_rng(seed)
    P = 40
    a = rng.normal(size=P)
    b = a + rng.normal(size=P)
    a[3] = a[5]  # ties between items
    b[7] = b[8] = b[9]
    w = rng.integers(0, 4, size=(6, P)).astype(float)
    rho = weighted_spearman(w, _order(a), _order(b))
    for s in range(len(w)):
        idx = np.repeat(np.arange(P), w[s].astype(int))
        assert rho[s] == pytest.approx(scipy.stats.spearmanr(a[idx], b[idx]).statistic,
                                       abs=1e-10)


def test_identity_hits_match_argmax_retrieval():
    rng = np.random.default_rng(3)
    sim = rng.normal(size=(7, 7)) + 2.0 * np.eye(7) * rng.uniform(size=7)
    closer = sim > np.diag(sim)[:, None]
    np.fill_diagonal(closer, False)
    present = np.ones((1, 7), dtype=bool)
    assert np.array_equal(identity_hits(present, closer)[0],
                          np.argmax(sim, axis=1) == np.arange(7))


# ---------------------------------------------------------------------------------- KTS
def planted_space(sizes=(6, 8, 5), T=3, k=6, layers=(0, 1), noise=0.7, seed=0):
    rng = np.random.default_rng(seed)
    rel = relations_of(sizes)
    F = len(rel)
    base = rng.normal(size=(F, k))
    V = {layer: base[:, None, :] + noise * rng.normal(size=(F, T, k)) for layer in layers}
    has = np.ones((F, T), dtype=bool)
    has[[1, 9], T - 1] = False  # ragged: two facts lack the last family
    space = KtsSpace(np.array([f"f{i}" for i in range(F)]), tuple(f"t{t}" for t in range(T)),
                     tuple(layers), has, lambda layer: V[layer], min_facts=5)
    return space, rel, V


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def naive_slot(V, has, rel, facts, a, b, min_facts):
    """Spearman and chance-corrected identity of one slot, written out (expanded sample)."""
    shared_all = np.flatnonzero((rel == rel[facts[0]]) & has[:, a] & has[:, b])
    drawn = [f for f in facts if f in set(shared_all)]
    if len(set(shared_all)) < min_facts:
        return None
    va, vb = unit(V[:, a]), unit(V[:, b])
    da, db = [], []
    for i in range(len(drawn)):
        for j in range(i + 1, len(drawn)):
            f, g = drawn[i], drawn[j]
            if f != g:
                da.append(1 - va[f] @ va[g])
                db.append(1 - vb[f] @ vb[g])
    rho = scipy.stats.spearmanr(da, db).statistic if len(set(drawn)) >= 3 else np.nan
    # identification of each drawn copy against all shared facts of the relation
    sim = va[shared_all] @ vb[shared_all].T
    pos = {f: i for i, f in enumerate(shared_all)}
    hits = [0.5 * (int(np.argmax(sim[pos[f]]) == pos[f])
                   + int(np.argmax(sim[:, pos[f]]) == pos[f])) for f in drawn]
    chance = 1.0 / len(shared_all)
    adj = np.clip((np.mean(hits) - chance) / (1 - chance + 1e-12), 0, 1) if drawn else np.nan
    return rho, adj


def test_kts_bootstrap_equals_a_naive_loop_on_the_same_draws():
    space, rel, V = planted_space()
    draws = draw_clusters(rel, n_resamples=25, seed=7)
    res = kts_bootstrap(space, draws, chunk_elements=50)  # small chunks exercise the chunking
    pairs = space.pairs()
    for li, layer in enumerate(space.layers):
        for p, (a, b) in enumerate(pairs):
            for bi in range(draws.n_resamples):
                vals = [naive_slot(V[layer], space.has, rel, facts, a, b, 5)
                        for _, facts in draws.replicate(bi)]
                vals = [v for v in vals if v is not None]
                rhos = [v[0] for v in vals if np.isfinite(v[0])]
                ids = [v[1] for v in vals if np.isfinite(v[1])]
                assert res.geo_raw_reps[bi, li, p] == pytest.approx(np.mean(rhos), abs=1e-5)
                assert res.identity_reps[bi, li, p] == pytest.approx(np.mean(ids), abs=1e-12)


def test_kts_point_matches_the_spec_kernels():
    space, rel, V = planted_space(seed=4)
    res = kts_point(space, rel)
    for li, layer in enumerate(space.layers):
        for p, (a, b) in enumerate(space.pairs()):
            rhos, ids = [], []
            for r in np.unique(rel):
                idx = np.flatnonzero((rel == r) & space.has[:, a] & space.has[:, b])
                if len(idx) < 5:
                    continue
                va, vb = unit(V[layer][idx, a]), unit(V[layer][idx, b])
                iu = np.triu_indices(len(idx), k=1)
                rhos.append(scipy.stats.spearmanr(1 - (va @ va.T)[iu],
                                                  1 - (vb @ vb.T)[iu]).statistic)
                ids.append(cross_condition_top1(va, vb, idx)["chance_corrected"])
            assert res.geo_raw[li, p] == pytest.approx(np.mean(rhos), abs=1e-12)
            assert res.identity[li, p] == pytest.approx(np.mean(ids), abs=1e-12)
    s = res.summary()
    g = (res.geo_raw + 1) / 2
    comp = 2 * g * res.identity / (g + res.identity + 1e-12)
    assert s["kts"] == pytest.approx(comp.mean(axis=1).mean())
    assert s["kts_geo"] == pytest.approx(g.mean())


def test_kts_intervals_contain_the_point():
    space, rel, _ = planted_space(sizes=(12, 15, 10), seed=2, noise=0.5)
    draws = draw_clusters(rel, n_resamples=200, seed=1)
    est = kts_estimates(kts_bootstrap(space, draws), key="k", n_facts=len(rel))
    for name in ("kts_geo", "kts_geo_raw_spearman", "kts_id", "kts"):
        rec = interval_record(est[name].point, est[name].replicates, confidence=0.95)
        assert rec["low"] <= rec["point"] <= rec["high"], name
        assert rec["high"] > rec["low"]
