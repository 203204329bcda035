"""Internal stability: ISS and KTS (spec §7-11, §16.2-16.4) -- the exact kernels.

The three kernels below are the reference definitions of spec §16.2-16.4 (same argument
order, same result keys, same arithmetic). They work on one fact or one relation at a time and
are what the production path is tested against:

* :func:`family_centroid` -- §7.6 / §16.2, one fact-family representation;
* :func:`compute_iss_for_fact` -- §7.7-7.9 / §16.3, single-layer ISS of one fact;
* :func:`cross_condition_top1` -- §10 / §16.4, cross-condition fact identification in one
  relation.

The production engine (:func:`run_internal_metrics`, ``fks metrics RUN --part internal``)
streams every layer of the hidden-state store through transport, residualisation, whitening
and centroids, and scores all facts at once with matrix products; it lives in
:mod:`fks.metrics.internal.engine` and agrees with these kernels to floating-point tolerance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fks.metrics.internal.engine import internal_part, run_internal_metrics

__all__ = [
    "l2_normalize",
    "family_centroid",
    "compute_iss_for_fact",
    "cross_condition_top1",
    "run_internal_metrics",
    "internal_part",
]


def l2_normalize(x: Any, eps: float = 1e-12) -> np.ndarray:
    """``x / max(||x||_2, eps)`` for one vector ``(d,)`` (spec §16.2 helper)."""
    x = np.asarray(x, dtype=np.float64)
    return x / max(float(np.linalg.norm(x)), eps)


def family_centroid(query_vectors: Sequence[Any]) -> np.ndarray:
    """Family centroid of one fact (spec §7.6, §16.2).

    ``v_{f,t} = Normalize( (1/|Q_{f,t}|) * sum_q Normalize(z_q) )``: every query vector is
    L2-normalised, averaged, and the mean normalised again, so each query of the family weighs
    the same and the family yields one unit vector.

    Args:
        query_vectors: ``|Q_{f,t}|`` vectors of shape ``(d,)`` (or a ``(|Q|, d)`` array).

    Returns:
        ``(d,)`` float64 unit vector.

    Example:
        >>> family_centroid([[2.0, 0.0], [0.0, 3.0]]).round(4)
        array([0.7071, 0.7071])
    """
    normalized = [l2_normalize(x) for x in query_vectors]
    return l2_normalize(np.mean(normalized, axis=0))


def compute_iss_for_fact(
    family_vectors: Mapping[str, Any],
    same_relation_fact_vectors: Sequence[Mapping[str, Any]],
    eps: float = 1e-12,
) -> dict[str, float]:
    """Single-layer ISS of one fact (spec §7.7-7.9, §16.3).

    With ``P_f`` the pairs ``(t, t')``, ``t < t'``, of the fact's families (sorted names):

    * ``S+ = mean_{(t,t') in P_f} <v_{f,t}, v_{f,t'}>``;
    * for each pair, the symmetric background over the negatives ``g`` that have both
      families, ``B(t,t') = mean_g 0.5 * (<v_{f,t}, v_{g,t'}> + <v_{f,t'}, v_{g,t}>)``; pairs
      no negative covers are left out of ``S-`` (not counted as zero);
    * ``S- = mean of B over the covered pairs``;
    * ``ISS = (S+ - S-) / (1 - S- + eps)`` -- kept raw (it can fall below -1); clip only for
      display.

    Vectors are used as given (the pseudo-code's dot products): pass unit vectors
    (:func:`family_centroid`) so that dot products are cosines.

    Args:
        family_vectors: ``{family: (d,) vector}`` of the fact (at least two families).
        same_relation_fact_vectors: the negatives, each a ``{family: (d,) vector}`` mapping.
        eps: the denominator's guard.

    Returns:
        ``{"s_positive", "s_background", "iss"}`` (floats).

    Raises:
        ValueError: fewer than two families, or no negative covers any pair -- cases where the
            pseudo-code's ``np.mean`` of an empty list would return NaN.
    """
    families = sorted(family_vectors)
    positive: list[float] = []
    negative: list[float] = []
    for i, family_a in enumerate(families):
        for family_b in families[i + 1:]:
            va = np.asarray(family_vectors[family_a], dtype=np.float64)
            vb = np.asarray(family_vectors[family_b], dtype=np.float64)
            positive.append(float(np.dot(va, vb)))
            pair_negatives = [
                0.5 * (float(np.dot(va, np.asarray(other[family_b], dtype=np.float64)))
                       + float(np.dot(vb, np.asarray(other[family_a], dtype=np.float64))))
                for other in same_relation_fact_vectors
                if family_a in other and family_b in other
            ]
            if pair_negatives:
                negative.append(float(np.mean(pair_negatives)))
    if not positive:
        raise ValueError(f"ISS needs at least two families; got {families}")
    if not negative:
        raise ValueError("no negative fact has both families of any pair (S- undefined)")
    s_pos = float(np.mean(positive))
    s_neg = float(np.mean(negative))
    iss = (s_pos - s_neg) / (1.0 - s_neg + eps)
    return {"s_positive": s_pos, "s_background": s_neg, "iss": iss}


def cross_condition_top1(
    vectors_a: Sequence[Any], vectors_b: Sequence[Any], fact_ids: Sequence[Any]
) -> dict[str, float]:
    """Symmetric cross-condition top-1 fact identification in one relation (spec §10, §16.4).

    Row ``i`` of ``vectors_a`` (family ``t``) and of ``vectors_b`` (family ``t'``) belong to
    ``fact_ids[i]``. Each fact's ``t`` vector retrieves its nearest ``t'`` vector by cosine
    and vice versa (ties go to the first index, ``np.argmax``):

    * ``top1_symmetric = 0.5 * (acc(t -> t') + acc(t' -> t))``;
    * ``chance = b_r = 1 / n_r``;
    * ``chance_corrected = clip((top1 - b_r) / max(1 - b_r, 1e-12), 0, 1)``.

    Args:
        vectors_a: ``n_r`` vectors ``(d,)`` of family ``t`` (normalised here).
        vectors_b: ``n_r`` vectors ``(d,)`` of family ``t'``, same fact order.
        fact_ids: the ``n_r`` fact ids (only their number is used).

    Returns:
        ``{"top1_symmetric", "chance", "chance_corrected"}`` (floats).
    """
    a = np.asarray([l2_normalize(x) for x in vectors_a])
    b = np.asarray([l2_normalize(x) for x in vectors_b])
    sim_ab = a @ b.T
    sim_ba = b @ a.T
    gold = np.arange(len(fact_ids))
    acc_ab = np.mean(np.argmax(sim_ab, axis=1) == gold)
    acc_ba = np.mean(np.argmax(sim_ba, axis=1) == gold)
    acc_sym = 0.5 * (acc_ab + acc_ba)
    chance = 1.0 / len(fact_ids)
    adjusted = (acc_sym - chance) / max(1.0 - chance, 1e-12)
    return {
        "top1_symmetric": float(acc_sym),
        "chance": chance,
        "chance_corrected": float(np.clip(adjusted, 0.0, 1.0)),
    }
