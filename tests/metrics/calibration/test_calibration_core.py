"""The calibration kernels: the text's reference function, scores, binning, risk-coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss

from fks.metrics.calibration import (
    aurc,
    brier_score,
    calibration_report,
    calibration_summary,
    equal_width_boundaries,
    fact_clustered_intervals,
    nll_score,
    reliability_table,
    risk_at_coverage,
    risk_coverage_curve,
    wilson_interval,
)
from fks.metrics.calibration.bootstrap import (
    BootstrapCache,
    _aurc_ranking,
    _aurc_replicates,
    fact_clustered_replicates,
)
from fks.metrics.stats.bootstrap import resample_indices


def reference(confidence, correct, bins=10):
    """The text's reference function, verbatim (torch)."""
    confidence, correct = confidence.float(), correct.float()
    if (confidence.ndim != 1 or confidence.shape != correct.shape or confidence.numel() == 0
            or not isinstance(bins, int) or bins <= 0):
        raise ValueError("aligned non-empty observations and positive integer bins required")
    if (not torch.isfinite(confidence).all() or torch.any((confidence < 0) | (confidence > 1))
            or not torch.all((correct == 0) | (correct == 1))):
        raise ValueError("confidence must lie in [0, 1] and outcomes must be binary")
    bucket = torch.bucketize(
        confidence, torch.linspace(0, 1, bins + 1, device=confidence.device)[1:-1])
    ece = confidence.new_zeros(())
    for k in range(bins):
        mask = bucket == k
        if mask.any():
            gap = (correct[mask].mean() - confidence[mask].mean()).abs()
            ece += mask.float().mean() * gap
    order = confidence.argsort(descending=True)
    _, counts = torch.unique_consecutive(confidence[order], return_counts=True)
    end = counts.cumsum(0) - 1
    cumulative_error = (1 - correct[order]).cumsum(0)
    coverage = (end + 1) / len(order)
    risk = cumulative_error[end] / (end + 1)
    brier = ((confidence - correct) ** 2).mean()
    return {"brier": brier, "ece": ece, "coverage": coverage, "risk": risk}


# ------------------------------------------------------------------ the text's own checks
def test_perfect_predictions_score_zero():
    perfect = calibration_summary(torch.tensor([0., 1.]), torch.tensor([0, 1]), bins=2)
    assert perfect["brier"] == 0 and perfect["ece"] == 0
    np.testing.assert_array_equal(perfect["coverage"], [0.5, 1.0])
    np.testing.assert_array_equal(perfect["risk"], [0.0, 0.5])


def test_ties_give_the_same_risk_in_either_order():
    tie = calibration_summary(torch.tensor([.5, .5]), torch.tensor([1, 0]))
    flipped = calibration_summary(torch.tensor([.5, .5]), torch.tensor([0, 1]))
    np.testing.assert_array_equal(tie["risk"], flipped["risk"])
    np.testing.assert_array_equal(tie["risk"], [0.5])
    np.testing.assert_array_equal(tie["coverage"], [1.0])


def test_empty_input_is_rejected():
    with pytest.raises(ValueError, match="empty"):
        calibration_summary(torch.tensor([]), torch.tensor([]))
    with pytest.raises(ValueError, match="empty"):
        calibration_summary(np.array([]), np.array([]))


# ------------------------------------------------------------------ agreement with torch
def test_boundaries_equal_torch_linspace_bit_for_bit():
    for bins in (*range(1, 400), 997, 1000, 4096):
        expected = torch.linspace(0, 1, bins + 1).numpy()
        np.testing.assert_array_equal(equal_width_boundaries(bins), expected, err_msg=str(bins))


@pytest.mark.parametrize("bins", [1, 2, 3, 7, 10, 13, 15, 30])
def test_agrees_with_the_torch_reference(bins):
    rng = np.random.default_rng(bins)
    n = 300
    # continuous values, heavy ties, the exact float32 boundaries, and the ends 0 and 1
    conf = np.concatenate([
        rng.random(n), rng.choice([0.1, 0.3, 0.5, 0.7], size=n),
        torch.linspace(0, 1, bins + 1).numpy().astype(float), [0.0, 1.0]])
    correct = (rng.random(conf.size) < conf).astype(int)
    got = calibration_summary(conf, correct, bins=bins)
    ref = reference(torch.tensor(conf), torch.tensor(correct), bins=bins)
    assert got["brier"] == pytest.approx(float(ref["brier"]), abs=1e-6)
    assert got["ece"] == pytest.approx(float(ref["ece"]), abs=1e-5)
    # same tie groups (same number of points); the reference holds float32 values
    assert got["coverage"].shape == tuple(ref["coverage"].shape)
    np.testing.assert_allclose(got["coverage"], ref["coverage"].numpy(), rtol=1e-6)
    np.testing.assert_allclose(got["risk"], ref["risk"].numpy(), atol=1e-6)


def test_values_on_a_boundary_go_to_the_lower_bin_as_bucketize():
    edges = torch.linspace(0, 1, 11)
    table = reliability_table(edges.numpy().astype(float), np.ones(11), bins=10)
    # 0 and 0.1 in bin 0, then one value per bin
    assert table["counts"] == [2, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    buckets = torch.bucketize(edges, edges[1:-1]).tolist()
    assert np.bincount(buckets, minlength=10).tolist() == table["counts"]


def test_torch_inputs_equal_numpy_inputs():
    rng = np.random.default_rng(0)
    conf = rng.random(50).astype(np.float32)
    correct = rng.random(50) < 0.6
    from_numpy = calibration_summary(conf, correct, bins=5)
    for c in (torch.tensor(conf), torch.tensor(conf, dtype=torch.float64),
              torch.tensor(conf, requires_grad=True)):
        for y in (torch.tensor(correct), torch.tensor(correct).long(), correct.astype(float)):
            got = calibration_summary(c, y, bins=5)
            assert got["brier"] == from_numpy["brier"] and got["ece"] == from_numpy["ece"]
            np.testing.assert_array_equal(got["risk"], from_numpy["risk"])
            np.testing.assert_array_equal(got["coverage"], from_numpy["coverage"])
    assert nll_score(torch.tensor(conf), torch.tensor(correct)) == nll_score(conf, correct)


# ------------------------------------------------------------------ bad input
BAD = [
    (np.zeros((2, 2)), np.zeros((2, 2)), r"one-dimensional; found shape \(2, 2\)"),
    ([0.5, 0.5], [1], r"aligned; found shapes \(2,\) and \(1,\)"),
    ([0.5, float("nan")], [1, 0], r"confidence\[1\] is not finite: nan"),
    ([0.5, float("inf")], [1, 0], r"confidence\[1\] is not finite: inf"),
    ([-0.1, 0.5], [1, 0], r"confidence\[0\] = -0.1 lies outside \[0, 1\]"),
    ([0.5, 1.0000001], [1, 0], r"confidence\[1\] = 1.0000001 lies outside"),
    ([0.5, 0.5], [1, 2], r"correct\[1\] = 2.0 is not binary"),
    ([0.5, 0.5], [0.5, 1], r"correct\[0\] = 0.5 is not binary"),
    ([0.5, 0.5], [1, float("nan")], r"correct\[1\] = nan is not binary"),
    (["a", "b"], [1, 0], "must hold numbers"),
    ([0.5, None], [1, 0], "must hold numbers"),
    (torch.tensor([0.5 + 1j]), torch.tensor([1]), "complex"),
]


@pytest.mark.parametrize("conf,correct,message", BAD)
def test_every_bad_input_raises_value_error(conf, correct, message):
    for fn in (calibration_summary, brier_score, nll_score, reliability_table,
               risk_coverage_curve, calibration_report):
        with pytest.raises(ValueError, match=message):
            fn(conf, correct)


@pytest.mark.parametrize("bins", [0, -1, 2.5, True, "10", None])
def test_bad_bins_raise_value_error(bins):
    with pytest.raises(ValueError, match=f"bins must be a positive integer; found {bins!r}"):
        calibration_summary([0.5], [1], bins=bins)


def test_bad_nll_eps_raises():
    with pytest.raises(ValueError, match="clipping threshold"):
        nll_score([0.5], [1], eps=0.0)


# ------------------------------------------------------------------ scikit-learn agreement
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_agrees_with_sklearn(seed):
    rng = np.random.default_rng(seed)
    # float32-representable data, so the float32 rule of the reference changes nothing
    conf = rng.random(500).astype(np.float32).astype(float)
    correct = (rng.random(500) < conf ** 2).astype(int)
    assert brier_score(conf, correct) == pytest.approx(brier_score_loss(correct, conf), abs=1e-12)
    for binning, strategy in (("equal_width", "uniform"), ("equal_mass", "quantile")):
        table = reliability_table(conf, correct, bins=10, binning=binning)
        prob_true, prob_pred = calibration_curve(correct, conf, n_bins=10, strategy=strategy)
        acc = [a for a in table["accuracy"] if a is not None]
        mean_p = [c for c in table["mean_confidence"] if c is not None]
        np.testing.assert_allclose(acc, prob_true, atol=1e-12)
        np.testing.assert_allclose(mean_p, prob_pred, atol=1e-12)
        counts = np.array(table["counts"])
        ece = np.sum(counts[counts > 0] / 500 * np.abs(prob_true - prob_pred))
        assert table["ece"] == pytest.approx(ece, abs=1e-12)
    assert calibration_summary(conf, correct)["ece"] == pytest.approx(
        reliability_table(conf, correct)["ece"], abs=1e-15)


# ------------------------------------------------------------------ hand-computed baselines
def test_constant_probability_baseline():
    conf, correct = [0.7, 0.7, 0.7, 0.7], [1, 0, 1, 0]
    r = calibration_report(conf, correct, bins=10)
    # float32(0.7) = 0.699999988...; the gap to 0.5 is 0.2 up to float32 rounding
    assert r["brier"] == pytest.approx((2 * 0.3 ** 2 + 2 * 0.7 ** 2) / 4, abs=1e-7)
    assert r["ece_equal_width"] == pytest.approx(0.2, abs=1e-7)
    assert r["nll"]["nll"] == pytest.approx(-(math.log(0.7) + math.log(0.3)) / 2, abs=1e-12)
    assert r["nll"]["n_clipped"] == 0
    assert r["risk_coverage"]["coverage"] == [1.0] and r["risk_coverage"]["risk"] == [0.5]
    assert r["aurc"] == 0.5
    assert r["reliability"]["equal_width"]["counts"] == [0] * 6 + [4] + [0] * 3
    assert r["reliability"]["equal_width"]["n_empty_bins"] == 9
    assert r["reliability"]["equal_width"]["mean_confidence"][0] is None


def test_confidently_all_wrong_baseline():
    r = calibration_report([1.0, 1.0, 1.0], [0, 0, 0], bins=10, nll_eps=1e-12)
    assert r["brier"] == 1.0 and r["ece_equal_width"] == 1.0 and r["ece_equal_mass"] == 1.0
    assert r["nll"] == {"nll": pytest.approx(-math.log(1e-12)), "clip_eps": 1e-12,
                        "n_clipped": 3}
    assert r["aurc"] == 1.0 and r["risk_coverage"]["risk"] == [1.0]
    assert r["reliability"]["equal_width"]["counts"][-1] == 3
    assert r["reliability"]["equal_width"]["mce"] == 1.0


def test_perfectly_ranked_sample_has_the_hand_aurc():
    # 0.9 right, 0.8 right, 0.3 wrong, 0.2 wrong: risks 0, 0, 1/3, 1/2
    r = calibration_report([0.9, 0.8, 0.3, 0.2], [1, 1, 0, 0], coverages=(0.5, 0.6, 1.0))
    assert r["aurc"] == pytest.approx((0 + 0 + 1 / 3 + 1 / 2) / 4)
    got = [(x["coverage"], x["risk"]) for x in r["risk_at_coverage"]]
    assert got == [(0.5, 0.0), (0.75, pytest.approx(1 / 3)), (1.0, 0.5)]


def test_risk_coverage_and_aurc_do_not_depend_on_row_order():
    rng = np.random.default_rng(3)
    conf = rng.choice([0.2, 0.4, 0.6, 0.8], size=200)
    correct = (rng.random(200) < conf).astype(int)
    base = risk_coverage_curve(conf, correct)
    for _ in range(5):
        perm = rng.permutation(200)
        other = risk_coverage_curve(conf[perm], correct[perm])
        for k in ("threshold", "coverage", "risk"):
            np.testing.assert_array_equal(other[k], base[k])
    assert base["threshold"].tolist() == pytest.approx([0.8, 0.6, 0.4, 0.2])
    # without ties AURC is the mean of the per-rank risks
    conf2 = rng.random(100)
    c2 = (rng.random(100) < 0.5).astype(float)
    order = np.argsort(-conf2)
    per_rank = np.cumsum(1 - c2[order]) / np.arange(1, 101)
    curve = risk_coverage_curve(conf2, c2)
    assert aurc(curve["coverage"], curve["risk"]) == pytest.approx(per_rank.mean())


def test_risk_at_coverage_never_splits_a_tie_group():
    curve = risk_coverage_curve([0.9, 0.5, 0.5, 0.5], [1, 1, 0, 0])
    (at,) = risk_at_coverage(curve, [0.5])
    assert at == {"coverage_view": "confidence", "target_coverage": 0.5, "coverage": 1.0,
                  "threshold": 0.5, "risk": 0.5}


def test_wilson_interval_hand_values():
    lo, hi = wilson_interval(5, 10)
    assert (float(lo), float(hi)) == (pytest.approx(0.236593, abs=1e-6),
                                      pytest.approx(0.763407, abs=1e-6))
    lo, hi = wilson_interval(0, 4)
    assert float(lo) == 0.0 and float(hi) == pytest.approx(0.489891, abs=1e-6)


def test_curve_downsampling_keeps_the_ends():
    rng = np.random.default_rng(5)
    conf = rng.random(2000)
    correct = (rng.random(2000) < conf).astype(int)
    r = calibration_report(conf, correct, max_curve_points=50)
    rc = r["risk_coverage"]
    assert rc["n_points_full"] == 2000 and rc["downsampled"] and len(rc["coverage"]) <= 50
    assert rc["coverage"][-1] == 1.0 and rc["coverage"][0] == pytest.approx(1 / 2000)
    full = risk_coverage_curve(conf, correct)
    assert r["aurc"] == aurc(full["coverage"], full["risk"])  # AURC from the full curve


# ------------------------------------------------------------------ fact-clustered bootstrap
def test_fact_clustered_replicates_equal_a_direct_recomputation():
    rng = np.random.default_rng(7)
    codes = np.repeat(np.arange(12), rng.integers(1, 5, size=12))
    conf = rng.choice([0.15, 0.35, 0.55, 0.75, 0.95], size=codes.size)
    correct = (rng.random(codes.size) < conf).astype(int)
    reps = fact_clustered_replicates(conf, correct, codes, bins=5, n_resamples=20, seed=11,
                                     with_aurc=True, max_chunk_elements=30)  # many chunks
    draws = resample_indices(12, 20, rng=np.random.default_rng(11))
    for b in range(20):
        rows = np.concatenate([np.flatnonzero(codes == f) for f in draws[b]])
        r = calibration_report(conf[rows], correct[rows], bins=5)
        assert reps["accuracy"][b] == pytest.approx(r["accuracy"])
        assert reps["brier"][b] == pytest.approx(r["brier"])
        assert reps["nll"][b] == pytest.approx(r["nll"]["nll"])
        assert reps["ece_equal_width"][b] == pytest.approx(r["ece_equal_width"])
        assert reps["aurc"][b] == pytest.approx(r["aurc"])


@pytest.mark.parametrize("with_aurc", [True, False])
def test_bootstrap_cache_gives_the_same_replicates_bit_for_bit(with_aurc):
    """Reused draws and replicates are the fresh ones exactly (same draws, chunks, sums)."""
    rng = np.random.default_rng(12)
    codes = np.repeat(np.arange(40), rng.integers(1, 6, size=40))
    conf = np.where(rng.random(codes.size) < 0.2, 0.0, rng.choice(np.linspace(0, 1, 23),
                                                                    size=codes.size))
    correct = (rng.random(codes.size) < conf).astype(int)
    kw = {"bins": 7, "n_resamples": 50, "seed": 3, "with_aurc": with_aurc,
          "max_chunk_elements": 400}  # several chunks
    fresh = fact_clustered_replicates(conf, correct, codes, **kw)
    cache = BootstrapCache()
    first = fact_clustered_replicates(conf, correct, codes, cache=cache, **kw)
    again = fact_clustered_replicates(conf, correct, codes, cache=cache, **kw)
    other = fact_clustered_replicates(conf[::-1], correct[::-1], codes[::-1], cache=cache,
                                      **kw)  # same facts, other sample: the draws are reused
    assert set(fresh) == set(first) == set(again) == {"accuracy", "mean_confidence", "brier",
                                                      "nll", "ece_equal_width",
                                                      *(["aurc"] if with_aurc else [])}
    for f in fresh:
        assert fresh[f].tobytes() == first[f].tobytes() == again[f].tobytes()
    direct = fact_clustered_replicates(conf[::-1], correct[::-1], codes[::-1], **kw)
    for f in fresh:
        assert other[f].tobytes() == direct[f].tobytes()
    chunk = 400 // (codes.size if with_aurc else 40)
    assert cache.weights(40, 50, 3, chunk) is cache.weights(40, 50, 3, chunk)
    if with_aurc:  # a kept result cannot be changed by a caller
        with pytest.raises(ValueError, match="read-only"):
            again["aurc"][0] = 0.0


@pytest.mark.parametrize("outcome", ["mixed", "all_correct", "all_wrong"])
def test_aurc_replicates_against_the_weighted_step_curve(outcome):
    """Integer weights up to 2**40 (the int64 path), no error row, only errors, ties."""
    rng = np.random.default_rng(4)
    codes = np.array([0, 1, 1, 2, 3, 3, 3, 4])
    p32 = np.array([0.9, 0.9, 0.5, 0.5, 0.5, 0.2, 0.0, 0.0])
    y = {"mixed": np.array([1, 0, 1, 0, 0, 1, 0, 1.0]), "all_correct": np.ones(8),
         "all_wrong": np.zeros(8)}[outcome]
    for w in (rng.integers(0, 4, size=(6, 5)).astype(float),
              rng.integers(0, 2**40, size=(6, 5)).astype(float)):
        got = _aurc_replicates(w, _aurc_ranking(codes, p32, y))
        for b in range(w.shape[0]):
            rw = w[b, codes]  # each row's weight; groups of equal p, in decreasing p
            values = np.unique(p32)[::-1]
            cum_w = np.cumsum([rw[p32 == v].sum() for v in values])
            cum_e = np.cumsum([(rw * (1 - y))[p32 == v].sum() for v in values])
            risk = np.divide(cum_e, cum_w, out=np.zeros(values.size), where=cum_w > 0)
            expected = np.sum(np.diff(cum_w, prepend=0.0) * risk) / cum_w[-1]
            assert got[b] == pytest.approx(expected, rel=1e-12)
        if outcome != "mixed":
            assert np.all(got == (0.0 if outcome == "all_correct" else 1.0))


def test_fact_clustered_intervals_are_deterministic_and_cover_the_point():
    rng = np.random.default_rng(8)
    codes = np.repeat(np.arange(30), 3)
    conf = rng.random(90)
    correct = (rng.random(90) < conf).astype(int)
    a = fact_clustered_intervals(conf, correct, codes, n_resamples=200, seed=1)
    b = fact_clustered_intervals(conf, correct, codes, n_resamples=200, seed=1)
    assert a == b and a["n_facts"] == 30 and "aurc" not in a
    point = calibration_summary(conf, correct)
    assert a["brier"]["low"] <= point["brier"] <= a["brier"]["high"]
    assert a["brier"]["low"] < a["brier"]["high"]
    with pytest.raises(ValueError, match="every code"):
        fact_clustered_intervals(conf, correct, codes * 2)
