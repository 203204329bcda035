"""The §16.2-16.4 kernels of fks.metrics.internal against literal transcriptions of the spec."""

from __future__ import annotations

import numpy as np
import pytest

from fks.metrics.internal import compute_iss_for_fact, cross_condition_top1, family_centroid


# ---------------------------------------------------------------- spec §16, verbatim
def spec_l2_normalize(x, eps=1e-12):
    return x / max(np.linalg.norm(x), eps)


def spec_family_centroid(query_vectors):
    normalized = [spec_l2_normalize(x) for x in query_vectors]
    return spec_l2_normalize(np.mean(normalized, axis=0))


def spec_compute_iss_for_fact(family_vectors, same_relation_fact_vectors, eps=1e-12):
    families = sorted(family_vectors)
    positive = []
    negative = []

    for i, family_a in enumerate(families):
        for family_b in families[i + 1:]:
            va = family_vectors[family_a]
            vb = family_vectors[family_b]
            positive.append(float(np.dot(va, vb)))

            pair_negatives = []
            for other in same_relation_fact_vectors:
                if family_a not in other or family_b not in other:
                    continue
                pair_negatives.append(
                    0.5 * (
                        float(np.dot(va, other[family_b]))
                        + float(np.dot(vb, other[family_a]))
                    )
                )
            if pair_negatives:
                negative.append(float(np.mean(pair_negatives)))

    s_pos = float(np.mean(positive))
    s_neg = float(np.mean(negative))
    iss = (s_pos - s_neg) / (1.0 - s_neg + eps)

    return {
        "s_positive": s_pos,
        "s_background": s_neg,
        "iss": iss,
    }


def spec_cross_condition_top1(vectors_a, vectors_b, fact_ids):
    vectors_a = np.asarray([spec_l2_normalize(x) for x in vectors_a])
    vectors_b = np.asarray([spec_l2_normalize(x) for x in vectors_b])

    sim_ab = vectors_a @ vectors_b.T
    sim_ba = vectors_b @ vectors_a.T

    pred_ab = np.argmax(sim_ab, axis=1)
    pred_ba = np.argmax(sim_ba, axis=1)
    gold = np.arange(len(fact_ids))

    acc_ab = np.mean(pred_ab == gold)
    acc_ba = np.mean(pred_ba == gold)
    acc_sym = 0.5 * (acc_ab + acc_ba)

    chance = 1.0 / len(fact_ids)
    adjusted = (acc_sym - chance) / max(1.0 - chance, 1e-12)

    return {
        "top1_symmetric": acc_sym,
        "chance": chance,
        "chance_corrected": float(np.clip(adjusted, 0.0, 1.0)),
    }


FAMS = ["anchor", "paraphrase", "format", "context", "multilingual"]


def _random_fact(rng, d, families):
    return {f: spec_family_centroid(rng.standard_normal((rng.integers(1, 5), d)))
            for f in families}


@pytest.mark.parametrize("seed", range(5))
def test_family_centroid_matches_spec(seed):
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((int(rng.integers(1, 7)), 9)) * rng.uniform(0.1, 10, (1, 1))
    got = family_centroid(vecs)
    np.testing.assert_allclose(got, spec_family_centroid(vecs), rtol=0, atol=1e-14)
    assert abs(np.linalg.norm(got) - 1.0) < 1e-12


def test_family_centroid_weights_queries_equally_whatever_their_norm():
    # a long and a short vector: the centroid is the bisector, not pulled to the long one
    got = family_centroid([[100.0, 0.0], [0.0, 0.01]])
    np.testing.assert_allclose(got, [2 ** -0.5, 2 ** -0.5], atol=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_compute_iss_matches_spec_with_ragged_families(seed):
    rng = np.random.default_rng(seed)
    d = 7
    fact = _random_fact(rng, d, [f for f in FAMS if rng.random() < 0.8] or FAMS[:2])
    if len(fact) < 2:
        fact = _random_fact(rng, d, FAMS[:3])
    others = [_random_fact(rng, d, [f for f in FAMS if rng.random() < 0.7])
              for _ in range(int(rng.integers(3, 9)))]
    others.append(_random_fact(rng, d, FAMS))  # at least one negative covers every pair
    got = compute_iss_for_fact(fact, others)
    want = spec_compute_iss_for_fact(fact, others)
    assert set(got) == {"s_positive", "s_background", "iss"}
    for k in want:
        assert got[k] == pytest.approx(want[k], abs=1e-14)


def test_compute_iss_keeps_values_below_minus_one():
    # anti-aligned families and aligned negatives: raw ISS < -1 (kept, never clipped)
    e0, e1 = np.eye(2)
    fact = {"anchor": e0, "format": -e0}
    g = 0.9 * e0 + np.sqrt(1 - 0.81) * e1
    neg = [{"anchor": -g, "format": g}]  # background 0.9, positive -1 -> ISS = -19
    got = compute_iss_for_fact(fact, neg)
    assert got["iss"] == pytest.approx(spec_compute_iss_for_fact(fact, neg)["iss"])
    assert got["iss"] == pytest.approx(-19.0)


def test_compute_iss_pairs_without_negatives_are_left_out_of_s_minus():
    rng = np.random.default_rng(3)
    fact = _random_fact(rng, 5, ["anchor", "format", "context"])
    only_ac = [_random_fact(rng, 5, ["anchor", "context"])]
    got = compute_iss_for_fact(fact, only_ac)
    a, c = fact["anchor"], fact["context"]
    g = only_ac[0]
    want_bg = 0.5 * (a @ g["context"] + c @ g["anchor"])
    assert got["s_background"] == pytest.approx(want_bg, abs=1e-14)


def test_compute_iss_raises_when_undefined():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="two families"):
        compute_iss_for_fact(_random_fact(rng, 4, ["anchor"]), [_random_fact(rng, 4, FAMS)])
    with pytest.raises(ValueError, match="negative"):
        compute_iss_for_fact(_random_fact(rng, 4, ["anchor", "format"]),
                             [_random_fact(rng, 4, ["anchor"])])


@pytest.mark.parametrize("seed", range(8))
def test_cross_condition_top1_matches_spec(seed):
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(2, 30)), 6
    a = rng.standard_normal((n, d))
    b = a + rng.uniform(0.1, 3.0) * rng.standard_normal((n, d))
    ids = [f"fact_{i:06d}" for i in range(n)]
    got = cross_condition_top1(a, b, ids)
    want = spec_cross_condition_top1(a, b, ids)
    assert set(got) == set(want)
    for k in want:
        assert got[k] == pytest.approx(want[k], abs=1e-14)


def test_cross_condition_top1_perfect_and_chance_floor():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((10, 4))
    perfect = cross_condition_top1(a, 3 * a, list(range(10)))
    assert perfect == {"top1_symmetric": 1.0, "chance": 0.1, "chance_corrected": 1.0}
    wrong = cross_condition_top1(a, -a, list(range(10)))  # every nearest neighbour is wrong
    assert wrong["top1_symmetric"] == 0.0 and wrong["chance_corrected"] == 0.0
