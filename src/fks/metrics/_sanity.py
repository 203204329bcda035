"""The mandatory sanity checks of spec §18.1-18.5: controls and their pass/fail rules.

Each check is a pure function of the figures it compares and returns
``{"status": "pass" | "fail" | "not_applicable", ...numbers, "criteria": {...}}``; the engine
(:mod:`fks.metrics._internal_engine`) computes the figures on one representative window layer
and writes them to ``RUN/metrics/sanity_checks.json``. How each control is built:

* **18.1 query shuffle** -- the unit query vectors are permuted at random *within each
  (relation, condition family)* stratum, which breaks the fact <-> representation link while
  keeping the relation and family structure (so the residualisation and whitening fitted on
  the real rows stay valid). Expected: ISS drops clearly and is about 0, KTS-ID is about
  chance (``top1 - 1/n_r`` about 0), KTS-Geo's Spearman is about 0.
* **18.2 duplicate query** -- (a) the rows of one family are re-embedded one by one through
  the fitted map and compared with the batch result, row cosines and the ``S+`` of each
  fact's centroid against its duplicate must be about 1; (b) main queries whose prompt strings
  are identical (:func:`fks.generate.prompts.build_prompt`) must have (about) identical
  states, cosine of their processed vectors about 1 (not applicable when there are none).
* **18.3 condition-label shuffle** -- the condition-family labels are permuted at random
  *within each fact* (per-fact family sizes kept) and the family centroids rebuilt from the
  same unit query vectors. The pseudo-families are then exchangeable random partitions of each
  fact's queries, which sets the stability that fact identity alone gives; the real families
  must not look *more* stable than that (``real <= shuffled + margin`` for ISS and KTS): any
  excess is stability produced by the condition labels themselves, i.e. spurious. The same
  control with the residualisation and whitening *refitted* on the shuffled labels is reported
  beside it (``refit_with_shuffled_labels``, no pass rule: with shuffled labels the family
  main effects can no longer be removed, which lowers stability for reasons unrelated to
  spuriousness).
* **18.4 relation-matched negatives** -- ISS with the stored same-relation negatives against
  ISS with as many random negatives from *other* relations: same-relation must be the stricter
  (``ISS_same <= ISS_random + margin + allowance``). After the §7.4 relation residualisation
  the facts of a relation are centred, so their mean background is about ``-1/(n_r - 1)``
  while random other-relation facts average about 0; ``allowance`` is that structural offset,
  the mean over facts of ``1/(n_r - 1)``. A same-relation background laxer than that fails.
* **18.5 raw versus transported** -- per-fact ISS with and without ``J``; they must differ
  (mean absolute difference at least ``min_transport_diff``). Not applicable without J-Lens,
  nor under full-rank PCA whitening (``d <= pca_max_dim``), which is invariant to every
  invertible transport: there the two are equal by construction.
  (With PCA whitening that keeps every dimension, ``k = d``, whitening is invariant to any
  invertible ``J`` and the two are equal by construction; this check then fails, rightly.)

Tolerances are explicit (:class:`SanityTolerances`) and written into the output.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = [
    "SanityTolerances",
    "check_query_shuffle",
    "check_duplicate_query",
    "check_label_shuffle",
    "check_relation_negatives",
    "check_raw_vs_transported",
    "summarize_checks",
]


@dataclass(frozen=True)
class SanityTolerances:
    """Thresholds of the §18 checks (all recorded in ``sanity_checks.json``).

    Attributes:
        null_abs: under a null control, ``|ISS|``, ``|Spearman|`` and ``|top1 - chance|``
            must be at most this.
        min_drop: the query shuffle must lower mean ISS by at least this.
        min_cosine: duplicate queries' cosines (and duplicate ``S+``) at least this.
        label_shuffle_margin: real ISS/KTS may exceed the label-shuffled ones by at most this.
        negatives_margin: same-relation ISS may exceed random-negative ISS by at most this.
        min_transport_diff: mean ``|ISS_raw - ISS_J|`` over facts at least this.
    """

    null_abs: float = 0.05
    min_drop: float = 0.05
    min_cosine: float = 0.999
    label_shuffle_margin: float = 0.05
    negatives_margin: float = 0.02
    min_transport_diff: float = 1e-4

    def as_dict(self) -> dict[str, float]:
        """Plain dict for the output file."""
        return asdict(self)


def _status(ok: list[bool]) -> str:
    return "pass" if all(ok) else "fail"


def _near(value: float | None, tol: float) -> bool | None:
    return None if value is None else abs(value) <= tol


def check_query_shuffle(real: dict[str, Any], shuffled: dict[str, Any],
                        tol: SanityTolerances) -> dict[str, Any]:
    """Apply §18.1 to two score dicts.

    Keys: ``iss``, ``kts_geo_raw_spearman``, ``top1``, ``chance``, ``kts_id`` (None where
    undefined).
    """
    drop = None if real["iss"] is None or shuffled["iss"] is None \
        else real["iss"] - shuffled["iss"]
    id_excess = None if shuffled["top1"] is None else shuffled["top1"] - shuffled["chance"]
    criteria = {
        "iss_drops": None if drop is None else drop >= tol.min_drop,
        "iss_near_zero": _near(shuffled["iss"], tol.null_abs),
        "kts_id_near_chance": _near(id_excess, tol.null_abs),
        "kts_geo_near_zero": _near(shuffled["kts_geo_raw_spearman"], tol.null_abs),
    }
    decided = [v for v in criteria.values() if v is not None]
    return {
        "status": _status(decided) if criteria["iss_drops"] is not None else "not_applicable",
        "real": real, "shuffled": shuffled, "iss_drop": drop,
        "top1_minus_chance_shuffled": id_excess, "criteria": criteria,
        "control": "query vectors permuted within (relation, condition family) strata",
    }


def check_duplicate_query(pipeline_cosines: np.ndarray, duplicate_s_positive: np.ndarray,
                          natural_cosines: np.ndarray | None, n_natural_groups: int,
                          tol: SanityTolerances) -> dict[str, Any]:
    """§18.2: (a) re-embedded rows and duplicate-family ``S+``; (b) identical prompts."""
    a_min = float(np.min(pipeline_cosines)) if len(pipeline_cosines) else None
    s_min = float(np.min(duplicate_s_positive)) if len(duplicate_s_positive) else None
    criteria: dict[str, bool | None] = {
        "reembedded_cosine": None if a_min is None else a_min >= tol.min_cosine,
        "duplicate_s_positive": None if s_min is None else s_min >= tol.min_cosine,
        "identical_prompts_cosine": None,
    }
    nat_min = None
    if natural_cosines is not None and len(natural_cosines):
        nat_min = float(np.min(natural_cosines))
        criteria["identical_prompts_cosine"] = nat_min >= tol.min_cosine
    decided = [v for v in criteria.values() if v is not None]
    return {
        "status": _status(decided) if decided else "not_applicable",
        "reembedded_rows": int(len(pipeline_cosines)), "reembedded_min_cosine": a_min,
        "duplicate_s_positive_mean": (float(np.mean(duplicate_s_positive))
                                      if len(duplicate_s_positive) else None),
        "duplicate_s_positive_min": s_min,
        "identical_prompt_groups": n_natural_groups,
        "identical_prompt_pairs": 0 if natural_cosines is None else int(len(natural_cosines)),
        "identical_prompts_min_cosine": nat_min,
        "criteria": criteria,
    }


def check_label_shuffle(real: dict[str, Any], shuffled: dict[str, Any],
                        tol: SanityTolerances,
                        refit: dict[str, Any] | None = None) -> dict[str, Any]:
    """§18.3 from score dicts (``iss``, ``kts``): real must not beat exchangeable labels."""
    def excess(key: str) -> float | None:
        if real[key] is None or shuffled[key] is None:
            return None
        return real[key] - shuffled[key]

    ex = {k: excess(k) for k in ("iss", "kts")}
    criteria = {f"{k}_not_above_shuffled": None if v is None else v <= tol.label_shuffle_margin
                for k, v in ex.items()}
    decided = [v for v in criteria.values() if v is not None]
    return {
        "status": _status(decided) if decided else "not_applicable",
        "real": real, "shuffled": shuffled,
        "iss_excess": ex["iss"], "kts_excess": ex["kts"], "criteria": criteria,
        "control": "condition-family labels permuted within each fact; centroids rebuilt",
        "refit_with_shuffled_labels": refit,
    }


def check_relation_negatives(same: dict[str, Any], random: dict[str, Any],
                             tol: SanityTolerances, allowance: float) -> dict[str, Any]:
    """§18.4 from score dicts (``iss``, ``s_background``); ``allowance`` = mean ``1/(n_r-1)``."""
    if same["iss"] is None or random["iss"] is None:
        return {"status": "not_applicable", "same_relation": same, "random": random}
    excess = same["iss"] - random["iss"]
    ok = excess <= tol.negatives_margin + allowance
    return {
        "status": _status([ok]), "same_relation": same, "random_other_relations": random,
        "iss_excess": excess, "centring_allowance": allowance,
        "criteria": {"same_relation_not_laxer": ok},
    }


def check_raw_vs_transported(iss_raw: np.ndarray | None, iss_transported: np.ndarray | None,
                             tol: SanityTolerances, reason: str | None = None
                             ) -> dict[str, Any]:
    """§18.5 from per-fact ISS arrays (NaN where undefined) of the same facts."""
    if iss_raw is None or iss_transported is None:
        return {"status": "not_applicable", "reason": reason}
    both = ~np.isnan(iss_raw) & ~np.isnan(iss_transported)
    if not both.any():
        return {"status": "not_applicable", "reason": "no fact has a defined ISS"}
    diff = np.abs(iss_raw[both] - iss_transported[both])
    ok = float(diff.mean()) >= tol.min_transport_diff
    return {
        "status": _status([ok]), "n_facts": int(both.sum()),
        "raw_iss": float(np.mean(iss_raw[both])),
        "transported_iss": float(np.mean(iss_transported[both])),
        "mean_abs_difference": float(diff.mean()), "max_abs_difference": float(diff.max()),
        "criteria": {"differ": ok},
    }


def summarize_checks(checks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Count pass / fail / not applicable and list the failing checks."""
    statuses = {k: v["status"] for k, v in checks.items()}
    return {
        "all_pass": all(s != "fail" for s in statuses.values()),
        "n_pass": sum(s == "pass" for s in statuses.values()),
        "n_fail": sum(s == "fail" for s in statuses.values()),
        "n_not_applicable": sum(s == "not_applicable" for s in statuses.values()),
        "failed": [k for k, s in statuses.items() if s == "fail"],
    }
