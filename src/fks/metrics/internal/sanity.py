"""The mandatory sanity checks of spec §18.1-18.5: controls and their pass/fail rules.

Each check is a pure function of the figures it compares and returns
``{"status": "pass" | "fail" | "not_applicable", ...numbers, "criteria": {...},
"headline": [label_a, a, label_b, b]}`` (``headline``: the two numbers the one-line console
summary shows). The engine (:mod:`fks.metrics.internal.engine`) computes the figures on one
representative window layer (18.5: on every window layer) and writes them to
``RUN/metrics/sanity_checks.json``.

**Tolerances from sampling noise.** A rule that compares two figures of the same facts uses
the relation-clustered bootstrap interval (spec §14.1; ``metrics.yaml: bootstrap``) of the
mean per-fact difference (:func:`difference_interval`), never a fixed drop: a model whose
ISS is itself small (SmolLM2-135M: 0.048 at the check layer) is judged on how well its facts
are measured, not on a distance fixed in absolute units. Margins (``metrics.yaml: sanity``)
come on top.

* **18.1 query shuffle** -- the unit query vectors are permuted at random *within each
  (relation, condition family)* stratum, which breaks the fact <-> representation link while
  keeping the relation and family structure. Pass: the per-fact drop ``ISS_real -
  ISS_shuffled`` has a bootstrap interval entirely above 0 (ISS drops beyond sampling noise),
  and under the shuffle ``|ISS|``, ``|top1 - chance|`` and ``|KTS-Geo Spearman|`` are at most
  ``null_abs`` (a null is about 0 whatever the model).
* **18.2 duplicate query** -- (a) a *second forward pass*: ``fks extract`` re-extracts a
  seeded sample of main queries one at a time (the same prompt, a fresh forward pass, another
  batch composition) into ``RUN/hidden/duplicate_pass.npz``; their states are compared with
  the stored float16 rows, and a faithful pass differs from them by rounding only. Four
  criteria, each per query:

  - *raw*: cosines must reach ``1 - g``, ``g = duplicate_cosine_gap(dtype, depth)``: the
    float16 store rounds each component by at most a relative ``u = 2**-11`` and the model's
    compute dtype adds its own ``u`` (2**-24 float32, 2**-8 bfloat16, 2**-11 float16) in each
    block, so the gap of a faithful re-extraction is about ``u**2 / 2``; the tolerance is
    ``g = 8 max(u_s**2, depth u_c**2)``.
  - *processing path* (deterministic): the stored raw row, pushed through the path the fresh
    row takes (:func:`path_gap_bound`'s float64 reference), must reproduce the stored processed
    row that the float32 main path made, within the float32 rounding bound of that path
    (``1 - cos <= rho**2``, ``rho`` of order ``d u_32`` times the cancellation of the
    residualisation and the product; capped like the processed rule below). A wrong or stale
    step for the duplicate rows (another family's mean, another whitening) fails here by
    orders of magnitude.
  - *processed*: the fitted map ``z = (h - m) M`` (``m`` the query's relation + family - grand
    mean offset, ``M`` the transport and whitening) is affine, so a raw perturbation ``delta``
    moves ``z`` by ``delta M``; whitening scales the low-variance directions up, and the
    residualisation removes the large common part of ``h``, so a relative raw error grows
    (measured on SmolLM2-135M bf16, layer 20, 861 queries: a processed gap about 275 times
    the raw one). The worst case over directions (``sigma_max`` of ``M``) is useless, so the
    allowance is carried by the raw rule's own perturbation model instead
    (:func:`propagated_gaps`): per query, 128 seeded componentwise-relative perturbations
    (``delta_i = h_i e_i``: each component off by a relative error, as rounding does) of the
    relative size the raw rule allows (``||delta|| = sqrt(2 g) ||h||``, i.e. at its edge, with
    its factor 8 already inside ``g``) are pushed through ``M``; the allowance ``t`` is the
    largest processed gap among them. Real bfloat16 errors are amplified about 5 times *less*
    than this model (SmolLM2, linear regime), so the rule is conservative; an isotropic model
    (the same error in every direction, also in components the states hardly use) was tried
    and dropped: it overstated Gemma 3 270M's float32 allowance 30-fold (gaps 0.08-0.19
    against 0.0016-0.0065), where the store's float16 rounding is componentwise by
    construction. **Identification cap**: where the map amplifies rounding so much that ``t``
    approaches 1 (few queries: the whitening's smallest kept variances are tiny),
    the allowance is also at most ``1 - c_nn``, ``c_nn`` the largest processed cosine of the
    stored row with a main query of *another* prompt -- the same query compared with itself
    must stay closer than to anything else, so the threshold never reaches ``1 - cos = 1``
    and another query's state always fails. **Floor**: at most
    ``1 - min_cosine`` (default ``1/sqrt(2)``, 45 degrees: the part of the duplicate that
    differs from its stored row as large as the part they share). Below it the processed
    state is more rounding than signal, whatever rounding allows, and the check fails: bf16
    SmolLM2 on 20 facts (290 queries < d = 576) gave processed cosines of 0.01-0.03, which
    the identification cap alone passed or failed by chance, while the whitening kept
    numerically-null components (float32 rounding of the covariance's null space, whitened
    to unit variance); with the rank bound of :func:`~fks.metrics.internal.space.fit_whitening`
    the same run gives 0.89 at worst (Gemma 3 270M bf16: 0.03 -> 0.93).
  - *duplicate S+*: the query's family centroid with its fresh state in place of the stored
    one against the stored centroid; the same perturbations carried through the centroid give
    the allowance, capped by ``1 - `` the centroid's largest cosine with another fact's
    centroid of the family.

  A perturbation inside the raw tolerance but aimed at the amplified directions (rounding is
  spread over all of them) fails the processed rule alone. (b) main queries whose prompt
  strings are identical: the pairs' raw cosines must reach ``1 - g`` (two forward passes in
  the run's dtype) and their processed cosines (grand mean removed, then ``M``: the two may
  lie in different families) the propagated allowance, capped by identification against a
  seeded pool of other rows. Not applicable when neither exists.
* **18.3 condition-label shuffle** -- the condition-family labels are permuted at random
  *within each fact* (per-fact family sizes kept): the pseudo-families are exchangeable random
  groupings of each fact's queries, and the centroids rebuilt on them (``plain``) give the
  agreement that fact identity alone provides. The rule the spec means ("shuffled labels must
  not let family residualisation and family centroids produce spurious stability") has one
  criterion per variant, both against that exchangeable reference:

  - ``plain``: grouping a fact's queries by their real condition cannot make its centroids
    agree *more* than arbitrary groupings of the same queries -- real conditions only add
    between-family variation. Real ISS above plain-shuffled ISS beyond noise +
    ``label_shuffle_margin`` is agreement the labels produced (fail).
  - ``refit`` (the control as the spec describes it: residualisation and whitening refitted on
    the shuffled labels too): residualising on meaningless labels cannot make facts more
    stable than residualising on the real ones (it can only fail to remove the real family
    main effects, which lowers stability). Refit ISS above plain-shuffled ISS beyond noise +
    margin is stability the residualisation step produced from the labels (fail).

  KTS is reported beside, without a rule: a real family aligns the prompt form across facts
  (every paraphrase query looks alike), which legitimately makes within-family geometry
  cleaner than in shuffled pseudo-families (demo: KTS 0.80 real, 0.75 shuffled), while an
  unstable model's shuffled geometry can be more alike; neither direction shows a spurious
  figure.
* **18.4 relation-matched negatives** -- ISS with the stored same-relation negatives against
  ISS with as many random negatives from *other* relations. The spec: same-relation negatives
  must be *stricter*. Pass: the relation-clustered interval of ``ISS_same - ISS_random`` lies
  wholly below ``-negatives_margin`` (default 0), i.e. same-relation ISS is lower than
  random-negative ISS beyond noise. This fails (issue 27) cherry-picked negatives (laxer:
  the interval lies above 0), *and* a model without relation structure (same-relation and
  random negatives equally hard: the interval straddles 0), which the former rule ("the
  interval reaches down to the margin", i.e. not laxer) passed. **Which space.** §7.4
  removes relation means, so in the main space the vectors of a relation sum to about zero
  and the same-relation background is pushed below the cross-relation one by about
  ``S+ / (n_r - 1)`` (measured on Gemma 3 270M and SmolLM2: -0.019 and -0.004 against
  ``-1/(n_r - 1)`` = -0.026, so it tracks the positives, not a constant); compared there,
  same-relation negatives look laxer by construction, and the comparison measures the
  centring, not the negatives. The rule is therefore applied in the same pipeline *without
  the relation-mean removal* (family means still removed, whitening refitted -- on the
  reference pool when the run has one, so the comparison does not move with the run's
  size), where a same-relation negative is harder exactly when the model places facts of a
  relation closer together than facts of different relations -- what the spec's check
  asks. The main-space figures are reported beside.
* **18.5 raw versus transported** -- per-fact ISS with and without ``J`` over *every window
  layer*; they must differ (mean absolute difference at least ``min_transport_diff``).
  Raw-ISS and Raw-KTS over the window are reported beside the transported ones. Not
  applicable without J-Lens, nor under full-rank PCA whitening (``d <= pca_max_dim``, or
  fewer residualised dimensions than ``pca_max_dim``: the rank bound of
  :func:`~fks.metrics.internal.space.residual_rank`), which is invariant to every invertible
  transport: there the two are equal by construction.

Tolerances are explicit (:class:`SanityTolerances`, from ``metrics.yaml: sanity``) and
written into the output.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = [
    "SanityTolerances",
    "difference_interval",
    "duplicate_cosine_gap",
    "propagated_gaps",
    "path_gap_bound",
    "check_query_shuffle",
    "check_duplicate_query",
    "check_label_shuffle",
    "check_relation_negatives",
    "check_raw_vs_transported",
    "summarize_checks",
    "sanity_line",
]

#: unit roundoff of the float16 store and of the usual compute dtypes (18.2)
UNIT_ROUNDOFF = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float32": 2.0 ** -24,
                 "float64": 2.0 ** -53}
#: seeded perturbations per query that carry the raw tolerance through the map (18.2)
PROPAGATION_DRAWS = 128
PROPAGATION_SEED = 20260101


@dataclass(frozen=True)
class SanityTolerances:
    """Thresholds of the §18 checks (all recorded in ``sanity_checks.json``).

    Attributes:
        null_abs: under the query shuffle, ``|ISS|``, ``|Spearman|`` and ``|top1 - chance|``
            must be at most this.
        min_cosine: the floor of the processed duplicate cosines and ``S+`` (18.2) on top of
            the propagated tolerance: ``1/sqrt(2)``, where the part of a duplicate that
            differs from its stored row is as large as the part they share.
        label_shuffle_margin: real ISS may exceed the label-shuffled one by the noise
            interval plus this.
        negatives_margin: same-relation ISS must lie below random-negative ISS by the noise
            interval plus this (18.4: the interval's upper end below ``-negatives_margin``).
        min_transport_diff: mean ``|ISS_raw - ISS_J|`` over facts and window layers.
        n_resamples, confidence, seed: the relation-clustered bootstrap of the differences.
    """

    null_abs: float = 0.05
    min_cosine: float = 0.5 ** 0.5
    label_shuffle_margin: float = 0.01
    negatives_margin: float = 0.0
    min_transport_diff: float = 1e-4
    n_resamples: int = 1000
    confidence: float = 0.95
    seed: int = 20260101

    @classmethod
    def from_config(cls, metrics: Any) -> SanityTolerances:
        """Read ``metrics.yaml: sanity`` and ``bootstrap``."""
        sc, bc = metrics.sanity, metrics.bootstrap
        return cls(sc.null_abs, sc.min_cosine, sc.label_shuffle_margin, sc.negatives_margin,
                   sc.min_transport_diff, bc.n_resamples, bc.confidence, bc.seed)

    def as_dict(self) -> dict[str, float]:
        """Plain dict for the output file."""
        return asdict(self)


def difference_interval(diff: np.ndarray, fact_relation: np.ndarray,
                        tol: SanityTolerances) -> dict[str, Any]:
    """Relation-clustered bootstrap interval of the mean per-fact difference ``diff (F,)``.

    Facts where ``diff`` is NaN are left out. Relations, then facts within each, are drawn
    with replacement (spec §14.1) and the fact mean recomputed; the percentile interval at
    ``tol.confidence``. Returns ``{mean, low, high, n_facts, n_relations}`` (None's when no
    fact has a difference).
    """
    from fks.metrics.stats.bootstrap import percentile_interval
    from fks.metrics.stats.clustered_bootstrap import draw_clusters, fact_mean_replicates

    keep = np.isfinite(diff)
    out: dict[str, Any] = {"mean": None, "low": None, "high": None,
                           "n_facts": int(keep.sum()), "confidence": tol.confidence}
    if not keep.any():
        return {**out, "n_relations": 0}
    x, rel = np.asarray(diff, float)[keep], np.asarray(fact_relation)[keep]
    draws = draw_clusters(rel.astype(str), n_resamples=tol.n_resamples, seed=tol.seed)
    reps = np.asarray(fact_mean_replicates(draws, x), dtype=float)
    low, high = percentile_interval(reps[np.isfinite(reps)], confidence=tol.confidence)
    return {**out, "mean": float(x.mean()), "low": float(low), "high": float(high),
            "n_relations": int(len(set(rel.tolist())))}


def duplicate_cosine_gap(compute_dtype: str | None, depth: int = 1) -> float:
    """Largest ``1 - cos`` between a stored float16 state and a fresh extraction (18.2).

    A relative per-component error ``u`` moves a vector's direction by ``1 - cos ~ u**2 / 2``.
    The store rounds once to float16 (``u_s = 2**-11``); the forward pass rounds in its own
    dtype in each of the ``depth`` blocks up to the checked layer, and a fresh pass (one prompt,
    no padding) sums in another order than the batch did, so those errors are independent and
    their squares add: ``~ depth * u_c**2``. The tolerance is ``8 max(u_s**2, depth * u_c**2)``
    (16 times the typical gap): 1.9e-6 for a float32 or float16 model at any usual depth, where
    the store dominates; for bfloat16 ``8 * depth * 2**-16``, e.g. 3.7e-3 at block 30 --
    measured on SmolLM2-135M in bf16 (batched vs one at a time): 3.8e-4 at layer 29, which the
    one-rounding bound 1.2e-4 wrongly failed.
    """
    u_s = UNIT_ROUNDOFF["float16"]
    u_c = UNIT_ROUNDOFF.get(str(compute_dtype or "float32").replace("torch.", ""), 0.0)
    return 8.0 * max(u_s * u_s, max(int(depth), 1) * u_c * u_c)


def _status(ok: list[bool]) -> str:
    return "pass" if all(ok) else "fail"


def _near(value: float | None, tol: float) -> bool | None:
    return None if value is None else abs(value) <= tol


def check_query_shuffle(real: dict[str, Any], shuffled: dict[str, Any],
                        tol: SanityTolerances, drop: dict[str, Any]) -> dict[str, Any]:
    """Apply §18.1 to two score dicts and the interval of the per-fact drop.

    Keys: ``iss``, ``kts_geo_raw_spearman``, ``top1``, ``chance``, ``kts_id`` (None where
    undefined); ``drop``: :func:`difference_interval` of ``ISS_real - ISS_shuffled``.
    """
    id_excess = None if shuffled["top1"] is None else shuffled["top1"] - shuffled["chance"]
    criteria = {
        "iss_drops_beyond_noise": None if drop["low"] is None else drop["low"] > 0.0,
        "iss_near_zero": _near(shuffled["iss"], tol.null_abs),
        "kts_id_near_chance": _near(id_excess, tol.null_abs),
        "kts_geo_near_zero": _near(shuffled["kts_geo_raw_spearman"], tol.null_abs),
    }
    decided = [v for v in criteria.values() if v is not None]
    return {
        "status": _status(decided) if criteria["iss_drops_beyond_noise"] is not None
        else "not_applicable",
        "real": real, "shuffled": shuffled, "iss_drop": drop["mean"],
        "iss_drop_interval": drop, "top1_minus_chance_shuffled": id_excess,
        "criteria": criteria,
        "headline": ["ISS real", real["iss"], "shuffled", shuffled["iss"]],
        "control": "query vectors permuted within (relation, condition family) strata",
    }


def propagated_gaps(raw: np.ndarray, z0: np.ndarray, matrix: np.ndarray, gap: float, *,
                    rest: np.ndarray | None = None, target: np.ndarray | None = None,
                    n_draws: int = PROPAGATION_DRAWS, seed: int = PROPAGATION_SEED
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Carry the raw tolerance ``gap`` through the linear part of the fitted map (18.2).

    Shapes: ``raw (n, d)`` stored raw states ``h``; ``z0 (n, k)`` their processed states before
    normalisation, ``z0 = (h - m) M`` (``m`` the query's residualisation offset); ``matrix (d,
    k)`` the map's linear part ``M`` (transport and whitening); ``rest, target (n, k)``: the
    sum of the *other* unit rows of the query's family centroid and the stored centroid
    (rows of NaN: the query is in no centroid). Per row, ``n_draws`` seeded perturbations of
    the raw rule's rounding model are drawn -- componentwise relative errors, ``delta_i = h_i
    e_i``, ``e ~ N(0, 1)`` -- and scaled to the relative size the raw rule allows, ``||delta||
    = sqrt(2 gap) ||h||`` (a relative error ``e`` moves the raw direction by ``1 - cos ~ e**2 /
    2 = gap``). A perturbation moves ``z0`` by ``delta M`` (the offset ``m`` cancels). Returns
    per row the largest processed gap ``1 - cos(z0, z0 + delta M)`` over the draws, and the
    largest centroid gap ``1 - cos(target, rest + unit(z0 + delta M))`` (NaN without a
    centroid), float64.
    """
    h, z0 = np.asarray(raw, np.float64), np.asarray(z0, np.float64)
    M = np.asarray(matrix, np.float64)
    rng = np.random.default_rng([seed, 18, 2])
    n, d = h.shape
    proc, sp = np.zeros(n), np.full(n, np.nan)
    for i in range(n):
        delta = rng.standard_normal((n_draws, d)) * h[i]
        delta *= (np.sqrt(2.0 * gap) * np.linalg.norm(h[i])
                  / np.maximum(np.linalg.norm(delta, axis=1), np.finfo(float).tiny))[:, None]
        z = z0[i] + delta @ M
        zn = z / np.maximum(np.linalg.norm(z, axis=1), np.finfo(float).tiny)[:, None]
        u0 = z0[i] / max(float(np.linalg.norm(z0[i])), np.finfo(float).tiny)
        proc[i] = float(np.max(1.0 - zn @ u0))
        if rest is not None and target is not None and np.isfinite(rest[i]).all():
            c = np.asarray(rest[i], np.float64) + zn
            t = np.asarray(target[i], np.float64)
            cos = (c @ t) / np.maximum(np.linalg.norm(c, axis=1) * np.linalg.norm(t),
                                       np.finfo(float).tiny)
            sp[i] = float(np.max(1.0 - cos))
    return proc, sp


def path_gap_bound(raw: np.ndarray, offset_abs: np.ndarray, matrix: np.ndarray,
                   z0: np.ndarray, dtype: str = "float32") -> np.ndarray:
    """Largest ``1 - cos`` between a processed row and its exact value from rounding (18.2).

    The main rows are processed in ``dtype`` (unit roundoff ``u``): the residualisation
    ``h - (mu_r + mu_t - mu)`` (means rounded to ``dtype``, three operations), the product
    with ``M`` (a sum of ``d`` terms) and the normalisation (two roundings). The classical
    bound on rounded sums (Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1)
    gives per output component ``|error_j| <= gamma_{d+5} sum_i a_i |M_ij|`` with ``a = |h| +
    offset_abs`` (``offset_abs = |mu_r| + |mu_t| + |mu|``) and ``gamma_n = n u / (1 - n u)``,
    so the relative error of the row is ``rho <= gamma_{d+5} ||a |M| || / ||z0|| + 2 u`` and
    ``1 - cos <= rho**2``. Shapes: ``raw, offset_abs (n, d)``, ``matrix (d, k)``, ``z0 (n,
    k)`` (the exact processed rows); returns ``(n,)`` (2: no bound, ``rho >= 1``).
    """
    u = UNIT_ROUNDOFF[dtype]
    d = np.shape(raw)[1]
    gamma = (d + 5) * u / (1.0 - (d + 5) * u)
    a = np.abs(np.asarray(raw, np.float64)) + np.asarray(offset_abs, np.float64)
    spread = np.linalg.norm(a @ np.abs(np.asarray(matrix, np.float64)), axis=1)
    rho = gamma * spread / np.maximum(np.linalg.norm(np.asarray(z0, np.float64), axis=1),
                                      np.finfo(float).tiny) + 2.0 * u
    return np.where(rho < 1.0, rho * rho, 2.0)


def _within(gaps: np.ndarray, allowed: np.ndarray, nearest: np.ndarray | None,
            floor: float) -> dict[str, Any]:
    """Per-row rule ``1 - cos <= min(allowed, 1 - nearest, 1 - floor)`` (NaN ``nearest``: none).

    Returns ``ok`` (None without rows), the worst row by ``gap / allowance`` (its cosine
    ``worst``, ``needed`` and ``ratio``), the range of the needed cosines and how many rows
    the identification cap ``1 - nearest`` bounds (``n_identification``).
    """
    gaps = np.asarray(gaps, np.float64)
    if not len(gaps):
        return {"ok": None, "worst": None, "needed": None, "ratio": None,
                "needed_range": None, "n_identification": 0}
    prop = np.minimum(np.asarray(allowed, np.float64), 1.0 - floor)
    ident = np.full(len(gaps), np.inf) if nearest is None else \
        np.where(np.isfinite(nearest), 1.0 - np.asarray(nearest, np.float64), np.inf)
    allow = np.minimum(prop, ident)
    ratio = gaps / np.maximum(allow, np.finfo(float).tiny)
    w = int(np.argmax(ratio))
    return {"ok": bool(np.all(gaps <= allow)), "worst": float(1.0 - gaps[w]),
            "needed": float(1.0 - allow[w]), "ratio": float(ratio[w]),
            "needed_range": [float(1.0 - allow.max()), float(1.0 - allow.min())],
            "n_identification": int(np.sum(ident < prop))}


PROPAGATED_RULE = (
    "per row 1 - cos <= min(t, 1 - c_nn, 1 - min_cosine): t the largest processed gap that "
    "{n} seeded componentwise-relative raw perturbations (delta_i = h_i e_i) of the relative "
    "size the raw rule allows (||delta|| = sqrt(2 g) ||h||) produce through the fitted map "
    "(transport, residualisation, whitening{extra}); c_nn the largest cosine of the stored "
    "{what} with {other} (the duplicate must stay closer to itself than to anything else)")
PATH_RULE = (
    "per row 1 - cos <= min(rho^2, 1 - c_nn): the stored raw row pushed through the duplicate "
    "rows' path (float64) against the stored processed row (float32 main path); rho = "
    "gamma_(d+5) ||(|h| + |mu_r| + |mu_t| + |mu|) |M||| / ||z|| + 2 u, the float32 rounding "
    "bound of the main path (Higham section 3.1)")


def check_duplicate_query(fresh: dict[str, Any] | None, natural_cosines: np.ndarray | None,
                          n_natural_groups: int, tol: SanityTolerances,
                          reason: str | None = None, depth: int = 1,
                          natural: dict[str, Any] | None = None) -> dict[str, Any]:
    """§18.2: (a) a second forward pass of sampled queries; (b) identical prompts.

    ``fresh`` (None when the run has no second pass; ``reason`` says why), per re-extracted
    query: ``raw_cosines``, ``processed_cosines``, ``processed_gap_allowed``
    (:func:`propagated_gaps`), ``nearest_other_cosines`` (the stored processed row's largest
    cosine with a main query of another prompt), ``path_cosines`` and ``path_gap_allowed``
    (:func:`path_gap_bound`); per query in a centroid family: ``duplicate_s_positive``,
    ``s_positive_gap_allowed``, ``s_positive_nearest_other`` (the stored centroid's largest
    cosine with another fact's centroid of the family); and ``compute_dtype``. ``natural``
    (b), per pair: ``raw_cosines``, ``processed_gap_allowed``, ``nearest_other_cosines`` and
    ``compute_dtype`` (the run's); ``natural_cosines`` their processed cosines. The rules are
    those of the module docstring.
    """
    criteria: dict[str, bool | None] = {"second_pass_raw_cosine": None,
                                        "second_pass_processed_cosine": None,
                                        "second_pass_s_positive": None,
                                        "identical_prompts_cosine": None}
    out: dict[str, Any] = {"second_pass": None, "second_pass_reason": reason}
    head: list[Any] = ["cos", None, "needed", None]
    fails: list[list[Any]] = []
    floor = tol.min_cosine
    if fresh is not None:
        gap = duplicate_cosine_gap(fresh.get("compute_dtype"), depth)
        raw, proc = np.asarray(fresh["raw_cosines"]), np.asarray(fresh["processed_cosines"])
        sp = np.asarray(fresh["duplicate_s_positive"])
        mins = {k: (float(v.min()) if len(v) else None)
                for k, v in (("raw", raw), ("processed", proc), ("s_positive", sp))}
        p_rule = _within(1.0 - proc, fresh["processed_gap_allowed"],
                         fresh["nearest_other_cosines"], floor)
        s_rule = _within(1.0 - sp, fresh["s_positive_gap_allowed"],
                         fresh["s_positive_nearest_other"], floor)
        path = _within(1.0 - np.asarray(fresh["path_cosines"]), fresh["path_gap_allowed"],
                       fresh["nearest_other_cosines"], 0.0)
        criteria["second_pass_raw_cosine"] = None if mins["raw"] is None else \
            mins["raw"] >= 1.0 - gap
        criteria["second_pass_processing_path"] = path["ok"]
        criteria["second_pass_processed_cosine"] = p_rule["ok"]
        criteria["second_pass_s_positive"] = s_rule["ok"]
        n = fresh.get("propagation_draws", PROPAGATION_DRAWS)
        out["second_pass"] = {
            "n_queries": int(len(raw)), "compute_dtype": fresh.get("compute_dtype"),
            "store_dtype": "float16", "raw_min_cosine": mins["raw"],
            "raw_cosine_needed": 1.0 - gap, "tolerance_rule": "1 - cos <= 8 max(u_s^2, depth "
            "u_c^2): u_s the float16 store's unit roundoff, u_c the compute dtype's, depth the "
            "blocks up to the checked layer", "depth": int(depth),
            "processed_min_cosine": mins["processed"],
            "processed_worst_cosine": p_rule["worst"],
            "processed_cosine_needed": p_rule["needed"],
            "processed_gap_ratio_max": p_rule["ratio"],
            "processed_cosine_needed_range": p_rule["needed_range"],
            "processed_n_identification_bound": p_rule["n_identification"],
            "processed_tolerance_rule": PROPAGATED_RULE.format(
                n=n, extra="", what="processed row",
                other="a main query of another prompt"),
            "duplicate_s_positive_min": mins["s_positive"],
            "duplicate_s_positive_mean": float(sp.mean()) if len(sp) else None,
            "duplicate_s_positive_worst": s_rule["worst"],
            "duplicate_s_positive_needed": s_rule["needed"],
            "duplicate_s_positive_gap_ratio_max": s_rule["ratio"],
            "duplicate_s_positive_needed_range": s_rule["needed_range"],
            "s_positive_tolerance_rule": PROPAGATED_RULE.format(
                n=n, extra=", then the family centroid with the duplicate in place of the "
                "stored row", what="centroid", other="another fact's centroid of the family"),
            "path_min_cosine": float(np.min(fresh["path_cosines"])) if len(raw) else None,
            "path_worst_cosine": path["worst"], "path_cosine_needed": path["needed"],
            "path_gap_ratio_max": path["ratio"], "path_tolerance_rule": PATH_RULE,
            "min_cosine_floor": floor,
            "max_abs_difference": fresh.get("max_abs_difference"),
        }
        head = ["raw cos min", mins["raw"], "needed", 1.0 - gap]
        for ok, label, rule in ((path["ok"], "processing-path cos", path),
                                (p_rule["ok"], "processed cos", p_rule),
                                (s_rule["ok"], "duplicate S+", s_rule)):
            if ok is False:
                fails.append([label, rule["worst"], "needed", rule["needed"]])
        if criteria["second_pass_raw_cosine"] is False:
            fails.insert(0, ["raw cos min", mins["raw"], "needed", 1.0 - gap])
    nat_min, nat = None, None
    if natural_cosines is not None and len(natural_cosines):
        nat_min = float(np.min(natural_cosines))
        nat = _within(1.0 - np.asarray(natural_cosines), natural["processed_gap_allowed"],
                      natural["nearest_other_cosines"], floor)
        nat_gap = duplicate_cosine_gap(natural.get("compute_dtype"), depth)
        nat["raw_min"] = float(np.min(natural["raw_cosines"]))
        nat["raw_needed"] = 1.0 - nat_gap
        criteria["identical_prompts_raw_cosine"] = nat["raw_min"] >= nat["raw_needed"]
        criteria["identical_prompts_cosine"] = nat["ok"]
        if fresh is None:
            head = ["identical-prompt cos", nat["worst"], "needed", nat["needed"]]
        if not criteria["identical_prompts_raw_cosine"]:
            fails.append(["identical-prompt raw cos min", nat["raw_min"], "needed",
                          nat["raw_needed"]])
        if nat["ok"] is False:
            fails.append(["identical-prompt cos", nat["worst"], "needed", nat["needed"]])
    decided = [v for v in criteria.values() if v is not None]
    status = _status(decided) if decided else "not_applicable"
    if status == "fail":  # show the first criterion that failed
        head = fails[0]
    return {
        "status": status, **out,
        "identical_prompt_groups": n_natural_groups,
        "identical_prompt_pairs": 0 if natural_cosines is None else int(len(natural_cosines)),
        "identical_prompts_min_cosine": nat_min,
        "identical_prompts_worst_cosine": None if nat is None else nat["worst"],
        "identical_prompts_cosine_needed": None if nat is None else nat["needed"],
        "identical_prompts_raw_min_cosine": None if nat is None else nat["raw_min"],
        "identical_prompts_raw_cosine_needed": None if nat is None else nat["raw_needed"],
        "identical_prompts_tolerance_rule": None if nat is None else PROPAGATED_RULE.format(
            n=natural.get("propagation_draws", PROPAGATION_DRAWS), extra=", grand mean only",
            what="first row of the pair", other="a main query of another prompt"),
        "criteria": criteria, "headline": head,
    }


def _not_above(ci: dict[str, Any], margin: float) -> bool | None:
    """Return whether the difference is within noise of ``margin`` (interval reaches it)."""
    return None if ci["low"] is None else ci["low"] <= margin


def check_label_shuffle(real: dict[str, Any], shuffled: dict[str, Any],
                        tol: SanityTolerances, plain_ci: dict[str, Any],
                        refit: dict[str, Any] | None = None,
                        refit_ci: dict[str, Any] | None = None) -> dict[str, Any]:
    """§18.3 from score dicts (``iss``, ``kts``) and two per-fact difference intervals.

    ``plain_ci``: of ``ISS_real - ISS_shuffled``; ``refit_ci``: of ``ISS_refit -
    ISS_shuffled``. Pass: each interval's lower end is at most ``label_shuffle_margin``.
    """
    criteria = {"real_iss_not_above_shuffled": _not_above(plain_ci, tol.label_shuffle_margin),
                "refit_iss_not_above_shuffled": None if refit_ci is None else
                _not_above(refit_ci, tol.label_shuffle_margin)}
    decided = [v for v in criteria.values() if v is not None]
    if criteria["real_iss_not_above_shuffled"] is False or refit is None:
        head = ["ISS real", real["iss"], "shuffled", shuffled["iss"]]
    else:
        head = ["ISS refit", refit["iss"], "shuffled", shuffled["iss"]] \
            if criteria["refit_iss_not_above_shuffled"] is False \
            else ["ISS real", real["iss"], "shuffled", shuffled["iss"]]

    def excess(a: dict[str, Any], b: dict[str, Any] | None, key: str) -> float | None:
        if b is None or a[key] is None or b[key] is None:
            return None
        return a[key] - b[key]

    return {
        "status": _status(decided) if decided else "not_applicable",
        "real": real, "shuffled": shuffled, "refit_with_shuffled_labels": refit,
        "iss_excess": excess(real, shuffled, "iss"), "iss_excess_interval": plain_ci,
        "refit_iss_excess": excess(refit, shuffled, "iss") if refit is not None else None,
        "refit_iss_excess_interval": refit_ci,
        "kts_excess": excess(real, shuffled, "kts"),
        "kts_rule": None, "criteria": criteria,
        "headline": head,
        "control": "condition-family labels permuted within each fact; centroids rebuilt "
                   "(plain) and residualisation + whitening refitted too (refit)",
    }


def check_relation_negatives(same: dict[str, Any], random: dict[str, Any],
                             tol: SanityTolerances, ci: dict[str, Any],
                             main_space: dict[str, Any] | None = None) -> dict[str, Any]:
    """§18.4 from score dicts (``iss``, ``s_background``) in the relation-uncentred space.

    ``ci``: the interval of ``ISS_same - ISS_random`` per fact; pass when its upper end lies
    below ``-negatives_margin`` (same-relation negatives stricter beyond noise; module
    docstring). ``main_space``: the same comparison in the main (relation-centred) space,
    reported only.
    """
    if same["iss"] is None or random["iss"] is None or ci.get("high") is None:
        return {"status": "not_applicable", "same_relation": same, "random": random,
                "headline": ["ISS same-relation", same["iss"], "random", random["iss"]]}
    stricter = bool(ci["high"] < -tol.negatives_margin)
    not_laxer = _not_above(ci, tol.negatives_margin)
    return {
        "status": _status([stricter]),
        "space": "relation means not removed (family means removed, whitening refitted)",
        "same_relation": same, "random_other_relations": random,
        "iss_excess": same["iss"] - random["iss"], "iss_excess_interval": ci,
        "main_space": main_space,
        "rule": "pass when the interval of ISS_same - ISS_random lies below -negatives_margin",
        "criteria": {"same_relation_stricter": stricter,
                     "same_relation_not_laxer": not_laxer},
        "headline": ["ISS same-relation", same["iss"], "random", random["iss"]],
    }


def check_raw_vs_transported(iss_raw: np.ndarray | None, iss_transported: np.ndarray | None,
                             tol: SanityTolerances, reason: str | None = None,
                             window: dict[str, Any] | None = None) -> dict[str, Any]:
    """§18.5 from per-fact ISS arrays ``(F, L_w)`` or ``(F,)`` (NaN where undefined).

    ``window``: the Raw and transported window figures (ISS, KTS) reported beside.
    """
    if iss_raw is None or iss_transported is None:
        return {"status": "not_applicable", "reason": reason,
                "headline": ["raw ISS", None, "transported", None]}
    both = ~np.isnan(iss_raw) & ~np.isnan(iss_transported)
    if not both.any():
        return {"status": "not_applicable", "reason": "no fact has a defined ISS",
                "headline": ["raw ISS", None, "transported", None]}
    diff = np.abs(iss_raw[both] - iss_transported[both])
    ok = float(diff.mean()) >= tol.min_transport_diff
    raw, tr = float(np.mean(iss_raw[both])), float(np.mean(iss_transported[both]))
    return {
        "status": _status([ok]), "n_cells": int(both.sum()),
        "raw_iss": raw, "transported_iss": tr,
        "mean_abs_difference": float(diff.mean()), "max_abs_difference": float(diff.max()),
        "window": window, "criteria": {"differ": ok},
        "headline": ["raw ISS", raw, "transported", tr],
    }


def summarize_checks(checks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Count pass / fail / not applicable; list the failing checks with their two numbers."""
    statuses = {k: v["status"] for k, v in checks.items()}
    return {
        "all_pass": all(s != "fail" for s in statuses.values()),
        "n_pass": sum(s == "pass" for s in statuses.values()),
        "n_fail": sum(s == "fail" for s in statuses.values()),
        "n_not_applicable": sum(s == "not_applicable" for s in statuses.values()),
        "failed": [k for k, s in statuses.items() if s == "fail"],
        "failed_headlines": {k: checks[k].get("headline") for k, s in statuses.items()
                             if s == "fail"},
    }


def _num(x: Any) -> str:
    return "-" if x is None else f"{x:.4g}"


def sanity_line(sanity: dict[str, Any] | None) -> str:
    """One line for the console: counts, and each failed check with its two numbers.

    ``sanity``: the content of ``sanity_checks.json`` (None or empty: not run).
    """
    if not sanity or "checks" not in sanity:
        return "sanity checks (spec §18): not run"
    checks = sanity["checks"]
    summ = summarize_checks(checks)
    where = f"layer {sanity.get('layer')}"
    counts = (f"{summ['n_pass']} pass, {summ['n_fail']} FAIL, "
              f"{summ['n_not_applicable']} not applicable")
    if not summ["failed"]:
        return f"sanity checks (spec §18, {where}): {counts}"
    parts = []
    for name in summ["failed"]:
        head = checks[name].get("headline") or []
        if len(head) == 4:
            parts.append(f"{name} ({head[0]} {_num(head[1])} vs {head[2]} {_num(head[3])})")
        else:
            parts.append(name)
    return f"sanity checks (spec §18, {where}): {counts}: " + "; ".join(parts)
