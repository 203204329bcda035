"""§18.2 duplicate query: the propagated processed tolerance passes a faithful second pass whose
rounding the whitening amplifies, and the check fails on each planted fault (a wrong processing
step, another query's state, noise beyond rounding, a perturbation aimed at the amplified
directions)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from internal_synth import L, configs, make_bench, make_run

from fks.metrics.internal import checks, run_internal_metrics
from fks.metrics.internal.sanity import (
    SanityTolerances,
    check_duplicate_query,
    duplicate_cosine_gap,
    path_gap_bound,
    propagated_gaps,
)
from fks.metrics.internal.synthetic import planted_states

D16 = 16
PCA = {"whitening": {"method": "pca", "pca_max_dim": 12}}
TOL = SanityTolerances()
LAYER = 3  # the representative layer of the L = 5 synthetic runs (depth 4)


def _bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 (round to nearest even), returned as float32."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A run whose states have a large common offset and a wide spectrum (1 to 1e-2): the
    residualisation and the whitening amplify a relative raw error, as on real models."""
    root = tmp_path_factory.mktemp("dup")
    bench = make_bench(root, sizes=(40, 40))
    base = planted_states(bench, d=D16, n_layers=L, signal=2.0, offset=0.0)
    scale = np.geomspace(1.0, 1e-2, D16).astype(np.float32)
    shift = 4.0 * np.random.default_rng(5).standard_normal(D16).astype(np.float32)

    def states(layer, idx):
        return base(layer, idx) * scale + shift

    run = make_run(root, bench, d=D16, states=states, duplicate=16)
    return root, bench, run


def _copy_with(root, run, name, change=None, dtype=None):
    """A copy of ``run`` whose second pass is ``change(stored layer rows, fresh rows, rng)``."""
    import shutil

    new = root / name
    shutil.copytree(run, new, ignore=shutil.ignore_patterns("metrics"))
    path = new / "hidden" / "duplicate_pass.npz"
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    rng = np.random.default_rng(7)
    for k in [k for k in arrays if k.startswith("layer_")]:
        if change is not None:
            arrays[k] = np.asarray(change(arrays[k], rng), np.float32)
    if dtype is not None:
        arrays["compute_dtype"] = np.array(dtype)
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)
    return new


def _check(root, bench, run, **metrics):
    cfg = configs(root / f"cfg_{run.name}", **{**PCA, **metrics})
    res = run_internal_metrics(run, benchmark=bench, configs=cfg)
    on_disk = json.loads((run / "metrics" / "sanity_checks.json").read_text())
    assert on_disk["checks"]["duplicate_query"]["criteria"] == \
        res["sanity"]["checks"]["duplicate_query"]["criteria"]
    assert res["sanity"]["layer"] == LAYER
    return res["sanity"]["checks"]["duplicate_query"]


@pytest.fixture(autouse=True)
def _cfg_dirs(world):
    root = world[0]
    for name in ("run", "bf16", "float32", "wrongfam", "wrongwh", "other", "noise", "noise16",
                 "aimed"):
        (root / f"cfg_{name}").mkdir(exist_ok=True)


def _relative_noise(sigma):
    def change(x, rng):  # a forward pass in bf16: relative errors per component, bf16 output
        return _bf16(x * (1.0 + sigma * rng.standard_normal(x.shape)))
    return change


BF16_SIGMA = np.sqrt((LAYER + 1) / 3.0) * 2.0 ** -8  # depth roundings, each uniform within u


def test_faithful_bf16_second_pass_passes_although_whitening_amplifies_it(world):
    root, bench, run = world
    check = _check(root, bench, _copy_with(root, run, "bf16", _relative_noise(BF16_SIGMA),
                                           "bfloat16"))
    sp = check["second_pass"]
    assert check["status"] == "pass", check
    assert sp["raw_min_cosine"] >= sp["raw_cosine_needed"]
    # the former fixed rule (0.999) failed this faithful pass: whitening amplifies rounding
    assert sp["processed_min_cosine"] < 0.999
    assert 0.0 < sp["processed_cosine_needed"] < 1.0 and sp["processed_gap_ratio_max"] <= 1.0
    assert sp["path_min_cosine"] >= sp["path_cosine_needed"] > 0.99
    assert "sqrt(2 g)" in sp["processed_tolerance_rule"]
    # the same rows declared float32: the raw rule (float16 store only) now refuses them
    strict = _check(root, bench, _copy_with(root, run, "float32", _relative_noise(BF16_SIGMA),
                                            "float32"))
    assert strict["criteria"]["second_pass_raw_cosine"] is False


def test_fails_when_duplicate_rows_take_a_wrong_processing_step(world, monkeypatch):
    root, bench, run = world
    proj = checks._project

    def other_family(x, rel, fam, res, wh):  # another family's mean removed
        return proj(x, rel, (fam + 1) % len(res.mu_fam), res, wh)

    monkeypatch.setattr(checks, "_project", other_family)
    check = _check(root, bench, _copy_with(root, run, "wrongfam"))
    assert check["status"] == "fail"
    assert check["criteria"]["second_pass_raw_cosine"] is True
    assert check["criteria"]["second_pass_processing_path"] is False
    assert check["criteria"]["second_pass_processed_cosine"] is False
    assert check["headline"][0] == "processing-path cos"

    def other_whitening(x, rel, fam, res, wh):  # components rescaled (a different whitening)
        s = np.linspace(0.5, 2.0, wh.k)
        return proj(x, rel, fam, res, dataclasses.replace(wh, matrix=wh.matrix * s))

    monkeypatch.setattr(checks, "_project", other_whitening)
    check = _check(root, bench, _copy_with(root, run, "wrongwh"))
    assert check["criteria"]["second_pass_processing_path"] is False
    assert check["criteria"]["second_pass_processed_cosine"] is False


def test_fails_on_another_querys_state_even_for_bf16(world):
    root, bench, run = world
    check = _check(root, bench, _copy_with(root, run, "other",
                                           lambda x, rng: np.roll(x, 1, axis=0), "bfloat16"))
    assert check["status"] == "fail"
    assert check["criteria"]["second_pass_raw_cosine"] is False
    # the processed rule on its own refuses them too (its threshold stays below 1 - cos = 1)
    assert check["criteria"]["second_pass_processed_cosine"] is False
    assert check["second_pass"]["processed_cosine_needed"] > 0.0


@pytest.mark.parametrize("dtype, factor", [("float32", 10.0), ("bfloat16", 10.0)])
def test_fails_on_noise_well_above_the_raw_tolerance(world, dtype, factor):
    # isotropic noise of ten times the relative size the raw rule allows (100x its gap)
    root, bench, run = world
    g = duplicate_cosine_gap(dtype, LAYER + 1)

    def change(x, rng):
        e = rng.standard_normal(x.shape)
        e *= (factor * np.sqrt(2 * g) * np.linalg.norm(x, axis=1)
              / np.linalg.norm(e, axis=1))[:, None]
        return x + e

    name = "noise" if dtype == "float32" else "noise16"
    check = _check(root, bench, _copy_with(root, run, name, change, dtype))
    assert check["criteria"]["second_pass_raw_cosine"] is False
    assert check["criteria"]["second_pass_processed_cosine"] is False


def test_propagation_through_the_identity_map_gives_back_the_raw_tolerance():
    rng = np.random.default_rng(0)
    h = rng.standard_normal((5, 64)) + 3.0
    for g in (1e-6, 1e-3):
        allowed, sp = propagated_gaps(h, h, np.eye(64), g)
        assert np.all(allowed <= 1.05 * g) and np.all(allowed >= 0.7 * g)
        assert np.isnan(sp).all()
    # removing a large common part (residualisation) amplifies relative errors: states
    # m + 0.1 N with |m_i| ~ 3 carry errors of ~3 sqrt(2g) on parts of ~0.1, ~900x the gap
    m = np.full(64, 3.0)
    x = m + 0.1 * rng.standard_normal((5, 64))
    big, _ = propagated_gaps(x, x - m, np.eye(64), 1e-6)
    assert np.all(big > 300 * 1e-6) and np.all(big < 3000 * 1e-6)


def test_processed_rule_alone_refuses_a_perturbation_aimed_at_amplified_directions():
    # a raw perturbation inside the raw tolerance but all along the direction the map
    # amplifies 100x: rounding spreads over every direction, this does not
    rng = np.random.default_rng(1)
    n, d = 8, 64
    h = rng.standard_normal((n, d)) + 3.0
    M = np.diag(np.r_[np.ones(d - 1), 100.0])
    g = duplicate_cosine_gap("bfloat16", 4)
    delta = np.zeros_like(h)
    delta[:, -1] = 0.5 * np.sqrt(2 * g) * np.linalg.norm(h, axis=1)
    fresh = h + delta
    z0, z1 = h @ M, fresh @ M

    def cos(a, b):
        return np.einsum("ij,ij->i", a, b) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)

    allowed, _ = propagated_gaps(h, z0, M, g)
    base = {"raw_cosines": cos(h, fresh), "processed_cosines": cos(z0, z1),
            "processed_gap_allowed": allowed, "nearest_other_cosines": np.full(n, np.nan),
            "path_cosines": np.ones(n), "path_gap_allowed": np.full(n, 1e-9),
            "duplicate_s_positive": np.ones(0), "s_positive_gap_allowed": np.ones(0),
            "s_positive_nearest_other": np.ones(0), "compute_dtype": "bfloat16"}
    check = check_duplicate_query(base, None, 0, TOL, depth=4)
    assert check["criteria"]["second_pass_raw_cosine"] is True
    assert check["criteria"]["second_pass_processed_cosine"] is False
    # the same size spread like rounding passes
    spread = rng.standard_normal((n, d)) * h
    spread *= (0.5 * np.sqrt(2 * g) * np.linalg.norm(h, axis=1)
               / np.linalg.norm(spread, axis=1))[:, None]
    ok = dict(base, raw_cosines=cos(h, h + spread), processed_cosines=cos(z0, (h + spread) @ M))
    assert check_duplicate_query(ok, None, 0, TOL, depth=4)["status"] == "pass"


def test_identification_cap_and_floor_keep_the_rule_falsifiable():
    # a map that amplifies rounding beyond any use: the propagated allowance exceeds 1 - cos
    # = 1; the duplicate must still be closer to its own row than to any other query
    n = 4
    fresh = {"raw_cosines": np.ones(n), "processed_cosines": np.array([0.9, 0.8, 0.7, 0.3]),
             "processed_gap_allowed": np.full(n, 1.5),
             "nearest_other_cosines": np.array([0.2, 0.1, 0.5, 0.4]),
             "path_cosines": np.ones(n), "path_gap_allowed": np.full(n, 2.0),
             "duplicate_s_positive": np.ones(n), "s_positive_gap_allowed": np.full(n, 1e-3),
             "s_positive_nearest_other": np.full(n, 0.5), "compute_dtype": "bfloat16"}
    no_floor = dataclasses.replace(TOL, min_cosine=0.0)
    check = check_duplicate_query(fresh, None, 0, no_floor, depth=20)
    assert check["criteria"]["second_pass_processed_cosine"] is False
    assert check["headline"] == ["processed cos", pytest.approx(0.3), "needed",
                                 pytest.approx(0.4)]
    assert check["second_pass"]["processed_n_identification_bound"] == n
    assert check_duplicate_query(dict(fresh, processed_cosines=np.full(n, 0.6)), None, 0,
                                 no_floor, depth=20)["status"] == "pass"
    # the default floor 1/sqrt(2): more difference than shared part fails whatever is allowed
    assert TOL.min_cosine == pytest.approx(2 ** -0.5)
    floor = check_duplicate_query(dict(fresh, processed_cosines=np.full(n, 0.6)), None, 0, TOL,
                                  depth=20)
    assert floor["criteria"]["second_pass_processed_cosine"] is False
    assert floor["second_pass"]["processed_cosine_needed"] == pytest.approx(2 ** -0.5)
    assert check_duplicate_query(dict(fresh, processed_cosines=np.full(n, 0.75)), None, 0, TOL,
                                 depth=20)["status"] == "pass"


def test_path_bound_admits_float32_rounding_and_refuses_a_wrong_mean():
    rng = np.random.default_rng(2)
    n, d, k = 6, 48, 40
    h = (rng.standard_normal((n, d)) + 5.0).astype(np.float32)
    mu = rng.standard_normal(d) + 5.0
    M = (rng.standard_normal((d, k)) * np.geomspace(1, 1e-2, k)).astype(np.float32)
    exact = (h.astype(np.float64) - mu) @ M.astype(np.float64)
    main = (h - mu.astype(np.float32)) @ M  # the float32 main path
    bound = path_gap_bound(h, np.abs(mu)[None, :].repeat(n, 0), M, exact)

    def gap(a, b):
        return 1 - np.einsum("ij,ij->i", a, b) / np.linalg.norm(a, axis=1) / np.linalg.norm(
            b, axis=1)

    assert np.all(gap(exact, main.astype(np.float64)) <= bound) and np.all(bound < 1e-3)
    wrong = (h.astype(np.float64) - mu - 0.05 * rng.standard_normal(d)) @ M.astype(np.float64)
    assert np.all(gap(exact, wrong) > bound)
