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
  the stored float16 rows. Raw cosines must reach ``1 - duplicate_cosine_gap(dtype)``: the
  float16 store rounds each component by at most a relative ``u = 2**-11`` and the model's
  compute dtype adds its own ``u`` (2**-24 float32, 2**-8 bfloat16, 2**-11 float16), so the
  gap of a faithful re-extraction is about ``u**2 / 2``; the tolerance is ``8 u**2`` for the
  larger ``u``. Processed through the fitted map (transport, residualisation, whitening) the
  duplicate rows and the duplicate family centroid's ``S+`` must reach ``min_cosine``
  (whitening may amplify rounding in low-variance directions). (b) main queries whose prompt
  strings are identical must have (about) identical processed states. Not applicable when
  neither exists.
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
  ISS with as many random negatives from *other* relations; same-relation must be at least as
  strict (pass: the interval of ``ISS_same - ISS_random`` reaches down to
  ``negatives_margin``). **Which space.** §7.4 removes relation means, so in the main space the
  vectors of a relation sum to about zero: the mean same-relation background is fixed at about
  ``-1/(n_r - 1)`` and the mean cross-relation one at about 0 *whatever the model* (Gemma 3
  270M: backgrounds -0.078 vs +0.0015, ISS 0.282 vs 0.2255); compared there, same-relation
  negatives always look laxer, and the comparison measures the centring, not the negatives.
  The rule is therefore applied in the same pipeline *without the relation-mean removal*
  (family means still removed, whitening refitted), where a same-relation negative is harder
  exactly when the model places facts of a relation closer together than facts of different
  relations -- what the spec's check asks. The main-space figures are reported beside.
* **18.5 raw versus transported** -- per-fact ISS with and without ``J`` over *every window
  layer*; they must differ (mean absolute difference at least ``min_transport_diff``).
  Raw-ISS and Raw-KTS over the window are reported beside the transported ones. Not
  applicable without J-Lens, nor under full-rank PCA whitening (``d <= pca_max_dim``), which is
  invariant to every invertible transport: there the two are equal by construction.

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


@dataclass(frozen=True)
class SanityTolerances:
    """Thresholds of the §18 checks (all recorded in ``sanity_checks.json``).

    Attributes:
        null_abs: under the query shuffle, ``|ISS|``, ``|Spearman|`` and ``|top1 - chance|``
            must be at most this.
        min_cosine: processed duplicate cosines (and duplicate ``S+``) at least this.
        label_shuffle_margin: real ISS may exceed the label-shuffled one by the noise
            interval plus this.
        negatives_margin: same-relation ISS may exceed random-negative ISS by the noise
            interval plus this.
        min_transport_diff: mean ``|ISS_raw - ISS_J|`` over facts and window layers.
        n_resamples, confidence, seed: the relation-clustered bootstrap of the differences.
    """

    null_abs: float = 0.05
    min_cosine: float = 0.999
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


def check_duplicate_query(fresh: dict[str, Any] | None, natural_cosines: np.ndarray | None,
                          n_natural_groups: int, tol: SanityTolerances,
                          reason: str | None = None, depth: int = 1) -> dict[str, Any]:
    """§18.2: (a) a second forward pass of sampled queries; (b) identical prompts.

    ``fresh``: ``{raw_cosines, processed_cosines, duplicate_s_positive, compute_dtype, ...}``
    from the engine, or None when the run has no second pass (``reason`` says why).
    """
    criteria: dict[str, bool | None] = {"second_pass_raw_cosine": None,
                                        "second_pass_processed_cosine": None,
                                        "second_pass_s_positive": None,
                                        "identical_prompts_cosine": None}
    out: dict[str, Any] = {"second_pass": None, "second_pass_reason": reason}
    head: list[Any] = ["cos", None, "needed", None]
    if fresh is not None:
        gap = duplicate_cosine_gap(fresh.get("compute_dtype"), depth)
        raw, proc = np.asarray(fresh["raw_cosines"]), np.asarray(fresh["processed_cosines"])
        sp = np.asarray(fresh["duplicate_s_positive"])
        mins = {k: (float(v.min()) if len(v) else None)
                for k, v in (("raw", raw), ("processed", proc), ("s_positive", sp))}
        criteria["second_pass_raw_cosine"] = None if mins["raw"] is None else \
            mins["raw"] >= 1.0 - gap
        criteria["second_pass_processed_cosine"] = None if mins["processed"] is None else \
            mins["processed"] >= tol.min_cosine
        criteria["second_pass_s_positive"] = None if mins["s_positive"] is None else \
            mins["s_positive"] >= tol.min_cosine
        out["second_pass"] = {
            "n_queries": int(len(raw)), "compute_dtype": fresh.get("compute_dtype"),
            "store_dtype": "float16", "raw_min_cosine": mins["raw"],
            "raw_cosine_needed": 1.0 - gap, "tolerance_rule": "1 - cos <= 8 max(u_s^2, depth "
            "u_c^2): u_s the float16 store's unit roundoff, u_c the compute dtype's, depth the "
            "blocks up to the checked layer", "depth": int(depth),
            "processed_min_cosine": mins["processed"],
            "duplicate_s_positive_min": mins["s_positive"],
            "duplicate_s_positive_mean": float(sp.mean()) if len(sp) else None,
            "max_abs_difference": fresh.get("max_abs_difference"),
        }
        head = ["raw cos min", mins["raw"], "needed", 1.0 - gap]
    nat_min = None
    if natural_cosines is not None and len(natural_cosines):
        nat_min = float(np.min(natural_cosines))
        criteria["identical_prompts_cosine"] = nat_min >= tol.min_cosine
        if fresh is None:
            head = ["identical-prompt cos min", nat_min, "needed", tol.min_cosine]
    decided = [v for v in criteria.values() if v is not None]
    status = _status(decided) if decided else "not_applicable"
    if status == "fail":  # show the criterion that failed
        if criteria["second_pass_raw_cosine"] is False:
            head = ["raw cos min", out["second_pass"]["raw_min_cosine"], "needed",
                    out["second_pass"]["raw_cosine_needed"]]
        elif criteria["second_pass_processed_cosine"] is False:
            head = ["processed cos min", out["second_pass"]["processed_min_cosine"],
                    "needed", tol.min_cosine]
        elif criteria["second_pass_s_positive"] is False:
            head = ["duplicate S+ min", out["second_pass"]["duplicate_s_positive_min"],
                    "needed", tol.min_cosine]
        else:
            head = ["identical-prompt cos min", nat_min, "needed", tol.min_cosine]
    return {
        "status": status, **out,
        "identical_prompt_groups": n_natural_groups,
        "identical_prompt_pairs": 0 if natural_cosines is None else int(len(natural_cosines)),
        "identical_prompts_min_cosine": nat_min,
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

    ``ci``: the interval of ``ISS_same - ISS_random`` per fact; pass when its lower end is at
    most ``negatives_margin``. ``main_space``: the same comparison in the main (relation-
    centred) space, reported only.
    """
    if same["iss"] is None or random["iss"] is None:
        return {"status": "not_applicable", "same_relation": same, "random": random,
                "headline": ["ISS same-relation", None, "random", None]}
    ok = _not_above(ci, tol.negatives_margin)
    return {
        "status": "not_applicable" if ok is None else _status([ok]),
        "space": "relation means not removed (family means removed, whitening refitted)",
        "same_relation": same, "random_other_relations": random,
        "iss_excess": same["iss"] - random["iss"], "iss_excess_interval": ci,
        "main_space": main_space,
        "criteria": {"same_relation_not_laxer": ok},
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
