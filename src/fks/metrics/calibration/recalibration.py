r"""Recalibration fitted on a dev split of facts and reported on the test split only.

* :func:`split_of_fact` -- a deterministic, hash-based dev/test split of *facts* (all queries
  of a fact land in the same half): ``u = int(sha256(salt + ":" + fact_id)[:16], 16) / 2^64``,
  dev when ``u < dev_fraction``. The salt keeps it independent of the generation shards
  (which hash the bare fact id).
* :func:`fit_temperature` -- temperature scaling of ``z = logit(p)``: ``p' = sigmoid(z / T)``
  with ``T`` minimising the dev NLL (scipy, bounded search over ``log T``).
* :func:`fit_isotonic` -- scikit-learn ``IsotonicRegression`` (increasing, clipped to [0, 1]).
* :func:`recalibration_report` -- splits, fits on dev, and evaluates the uncalibrated and the
  two recalibrated confidences on the test split; the fitters receive only dev rows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fks.metrics.calibration.core import (
    DEFAULT_NLL_EPS,
    as_observations,
    aurc,
    calibration_summary,
    nll_score,
)

if TYPE_CHECKING:
    from fks.metrics.calibration.bootstrap import BootstrapCache

__all__ = [
    "SPLIT_SALT",
    "split_of_fact",
    "split_mask",
    "fit_temperature",
    "apply_temperature",
    "fit_isotonic",
    "apply_isotonic",
    "recalibration_report",
]

#: salt of the calibration dev/test split (part of the split rule, recorded in the summary)
SPLIT_SALT = "fks-calibration-split-v1"
_LOG_T_BOUNDS = (-5.0, 5.0)


def split_of_fact(fact_id: str, *, dev_fraction: float = 0.5, salt: str = SPLIT_SALT) -> str:
    """``"dev"`` or ``"test"`` for one fact (see the module docstring).

    >>> split_of_fact("fact_000001") in ("dev", "test")
    True
    """
    if not 0.0 < dev_fraction < 1.0:
        raise ValueError(f"dev_fraction must lie strictly between 0 and 1; found {dev_fraction!r}")
    digest = hashlib.sha256(f"{salt}:{fact_id}".encode()).hexdigest()
    return "dev" if int(digest[:16], 16) / 2.0**64 < dev_fraction else "test"


def split_mask(fact_ids: Sequence[str], *, dev_fraction: float = 0.5,
               salt: str = SPLIT_SALT) -> np.ndarray:
    """``(n,)`` bool, True for rows whose fact is in the dev split."""
    memo: dict[str, bool] = {}
    out = np.empty(len(fact_ids), dtype=bool)
    for i, f in enumerate(fact_ids):
        if f not in memo:
            memo[f] = split_of_fact(f, dev_fraction=dev_fraction, salt=salt) == "dev"
        out[i] = memo[f]
    return out


def _logit(p: np.ndarray, eps: float) -> np.ndarray:
    q = np.clip(p, eps, 1.0 - eps)
    return np.log(q) - np.log1p(-q)


def _temperature_nll(log_t: float, z: np.ndarray, y: np.ndarray) -> float:
    """Mean NLL of ``sigmoid(z / T)``: ``mean(log(1 + exp(-(2y - 1) z / T)))``."""
    return float(np.mean(np.logaddexp(0.0, -(2.0 * y - 1.0) * z / np.exp(log_t))))


def fit_temperature(confidence: Any, correct: Any, *, eps: float = DEFAULT_NLL_EPS
                    ) -> dict[str, Any]:
    """Fit ``T`` of temperature scaling on one (dev) sample.

    Minimises the NLL of ``sigmoid(logit(clip(p, eps, 1 - eps)) / T)`` over
    ``log T in [-5, 5]`` with ``scipy.optimize.minimize_scalar`` (bounded). ``T > 1`` softens
    over-confident scores, ``T < 1`` sharpens.

    Returns:
        ``{"temperature", "log_temperature", "at_bound", "dev_nll_before", "dev_nll_after",
        "clip_eps"}``.

    Raises:
        ValueError: bad input (:func:`as_observations`).
    """
    from scipy.optimize import minimize_scalar

    conf, corr = as_observations(confidence, correct)
    z = _logit(conf, eps)
    res = minimize_scalar(_temperature_nll, bounds=_LOG_T_BOUNDS, args=(z, corr),
                          method="bounded", options={"xatol": 1e-8})
    log_t = float(res.x)
    return {"temperature": float(np.exp(log_t)), "log_temperature": log_t,
            "at_bound": bool(min(abs(log_t - b) for b in _LOG_T_BOUNDS) < 1e-3),
            "dev_nll_before": _temperature_nll(0.0, z, corr),
            "dev_nll_after": float(res.fun), "clip_eps": eps}


def apply_temperature(confidence: Any, temperature: float, *, eps: float = DEFAULT_NLL_EPS
                      ) -> np.ndarray:
    """``sigmoid(logit(clip(p)) / T)``, shape ``(n,)``."""
    z = _logit(np.asarray(confidence, dtype=float), eps)
    return 1.0 / (1.0 + np.exp(-z / float(temperature)))


def fit_isotonic(confidence: Any, correct: Any) -> dict[str, Any]:
    """Fit an increasing isotonic map ``p -> P(correct)`` on one (dev) sample.

    Returns ``{"x_thresholds", "y_thresholds"}`` (the fitted step function's knots; between
    knots it interpolates linearly, outside it is clipped) and the fitted ``model``.
    """
    from sklearn.isotonic import IsotonicRegression

    conf, corr = as_observations(confidence, correct)
    model = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
    model.fit(conf, corr)
    return {"x_thresholds": model.X_thresholds_.tolist(),
            "y_thresholds": model.y_thresholds_.tolist(), "model": model}


def apply_isotonic(confidence: Any, fitted: dict[str, Any]) -> np.ndarray:
    """Apply :func:`fit_isotonic`'s map; shape ``(n,)``, values in [0, 1]."""
    out = fitted["model"].predict(np.asarray(confidence, dtype=float))
    return np.clip(out, 0.0, 1.0)


def _test_metrics(p: np.ndarray, y: np.ndarray, bins: int, eps: float) -> dict[str, Any]:
    core = calibration_summary(p, y, bins=bins)
    return {"n": int(p.size), "brier": core["brier"], "ece_equal_width": core["ece"],
            "nll": nll_score(p, y, eps=eps)["nll"], "aurc": aurc(core["coverage"], core["risk"]),
            "mean_confidence": float(np.mean(p)), "accuracy": float(np.mean(y))}


def recalibration_report(
    confidence: Any, correct: Any, fact_ids: Sequence[str], *, bins: int = 10,
    dev_fraction: float = 0.5, salt: str = SPLIT_SALT, eps: float = DEFAULT_NLL_EPS,
    n_resamples: int = 1000, level: float = 0.95, seed: int | None = 0, min_facts: int = 10,
    cache: BootstrapCache | None = None,
) -> dict[str, Any]:
    """Fit temperature scaling and isotonic regression on dev facts; report on test facts.

    Args:
        confidence: ``(n,)`` confidences of the valid sample of one (reading, source).
        correct: ``(n,)`` outcomes 0/1.
        fact_ids: ``(n,)`` fact of each row (the split unit).
        bins: ``K`` of the test ECE.
        dev_fraction: share of facts in the dev split (:func:`split_of_fact`).
        salt: the split's salt.
        eps: logit/NLL clipping threshold.
        n_resamples: replicates of the paired fact bootstrap of recalibrated minus raw on
            the test split (``paired_vs_uncalibrated``).
        level: its interval coverage.
        seed: its seed.
        min_facts: fewer test facts than this: no paired interval (the reason is given).
        cache: a :class:`fks.metrics.calibration.bootstrap.BootstrapCache` to reuse draws and
            replicates within a run (the same result without it).

    Returns:
        ``{"status": "ok", "split": {...counts}, "temperature": {...}, "isotonic": {...},
        "test": {"uncalibrated", "temperature", "isotonic"}}``, or ``{"status":
        "not_fitted", "reason": ..., "split": ...}`` when the dev split lacks one of the two
        outcomes or the test split is empty. Nothing fitted ever sees a test row.
    """
    conf, corr = as_observations(confidence, correct)
    if len(fact_ids) != conf.size:
        raise ValueError(f"fact_ids must be aligned with confidence; found {len(fact_ids)} "
                         f"and {conf.size}")
    dev = split_mask(fact_ids, dev_fraction=dev_fraction, salt=salt)
    facts = np.asarray(fact_ids, dtype=object)
    split = {"rule": f"dev when int(sha256('{salt}:' + fact_id)[:16], 16) / 2**64 < "
                     f"{dev_fraction:g}",
             "n_dev": int(dev.sum()), "n_test": int((~dev).sum()),
             "n_dev_facts": len(set(facts[dev].tolist())),
             "n_test_facts": len(set(facts[~dev].tolist()))}
    if (~dev).sum() == 0:
        return {"status": "not_fitted", "reason": "the test split is empty", "split": split}
    if len(np.unique(corr[dev])) < 2:
        return {"status": "not_fitted", "split": split,
                "reason": "the dev split needs both correct and incorrect answers"}
    temp = fit_temperature(conf[dev], corr[dev], eps=eps)
    iso = fit_isotonic(conf[dev], corr[dev])
    test_p, test_y = conf[~dev], corr[~dev]
    recal = {"temperature": apply_temperature(test_p, temp["temperature"], eps=eps),
             "isotonic": apply_isotonic(test_p, iso)}
    out = {
        "status": "ok", "split": split, "temperature": temp,
        "isotonic": {k: v for k, v in iso.items() if k != "model"},
        "test": {"uncalibrated": _test_metrics(test_p, test_y, bins, eps),
                 **{m: _test_metrics(v, test_y, bins, eps) for m, v in recal.items()}},
    }
    n_test_facts = split["n_test_facts"]
    if n_test_facts < min_facts:
        out["paired_vs_uncalibrated"] = {
            "status": "not_computed",
            "reason": f"{n_test_facts} test fact(s) < min_facts_for_interval = {min_facts}"}
        return out
    from fks.metrics.calibration.bootstrap import paired_from, replicates_with_point

    codes = np.unique(facts[~dev].astype(str), return_inverse=True)[1]
    kw = {"bins": bins, "nll_eps": eps, "n_resamples": n_resamples, "seed": seed,
          "cache": cache}
    raw = replicates_with_point(test_p, test_y, codes, **kw)  # drawn once, paired with each
    out["paired_vs_uncalibrated"] = {"status": "ok", "split": "test", **{
        m: paired_from(replicates_with_point(v, test_y, codes, **kw), raw, n=codes.size,
                       n_facts=n_test_facts, n_resamples=n_resamples, level=level, seed=seed)
        for m, v in recal.items()}}
    return out
