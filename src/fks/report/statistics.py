"""The relation-clustered bootstrap of one run: ``RUN/metrics/bootstrap_intervals.json``.

For each coverage mode (``metrics.yaml: coverage_modes``) and fact subset (``all``, ``real``,
``copy``), one set of draws (:func:`fks.metrics.stats.clustered_bootstrap.draw_clusters`, the
configured seed) serves every figure of that fact set, so figures -- and models -- are
compared on the same replicates. Fact-level figures are bootstrapped for every subset; KTS
(which needs the stored centroids and is the expensive part) and the per-layer ISS band for
the ``all`` subset.

The intervals file holds, per metric: ``point``, ``low``, ``high``, ``n_resamples``,
``n_valid_resamples``, ``seed``, ``confidence``, ``n_relations``, ``n_facts``,
``coverage_mode``, ``subset`` and ``aggregation``. The replicates themselves go to
``bootstrap_replicates.npz`` (plain arrays, no pickle) so that ``fks compare`` reuses them;
both files carry a fingerprint of their inputs and settings and are reused while it matches.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from fks.configs import ConfigSet
from fks.io import atomic_path, atomic_write_json, read_json
from fks.log import track
from fks.metrics.stats.clustered_bootstrap import (
    Estimate,
    draw_clusters,
    draws_key,
    fact_estimates,
    fact_mean,
    fact_mean_replicates,
    interval_record,
    kts_bootstrap,
    kts_estimates,
    kts_point,
)
from fks.report.inputs import RunData

__all__ = [
    "SUBSETS",
    "INTERVALS_NAME",
    "REPLICATES_NAME",
    "ALGORITHM",
    "Settings",
    "RunStatistics",
    "compute_statistics",
    "run_statistics",
]

log = logging.getLogger(__name__)

SUBSETS = ("all", "real", "copy")
INTERVALS_NAME = "bootstrap_intervals.json"
REPLICATES_NAME = "bootstrap_replicates.npz"
#: bump when the computation changes (invalidates cached files)
ALGORITHM = "fks-relation-clustered-bootstrap-v1"


@dataclass(frozen=True)
class Settings:
    """The settings the statistics depend on (from ``metrics.yaml`` unless overridden)."""

    n_resamples: int
    seed: int
    confidence: float
    coverage_modes: tuple[str, ...]
    main_families: tuple[str, ...]
    kts_min_facts: int
    eps: float
    kts_bootstrap: bool = True

    @classmethod
    def from_configs(cls, configs: ConfigSet, *, kts_bootstrap: bool = True) -> Settings:
        """Read the settings from the configs in force."""
        m = configs.metrics
        return cls(m.bootstrap.n_resamples, m.bootstrap.seed, m.bootstrap.confidence,
                   tuple(m.coverage_modes), tuple(m.main_families), m.kts_geo_min_facts,
                   m.eps, kts_bootstrap)

    def describe(self) -> dict[str, Any]:
        """JSON form."""
        return {"n_resamples": self.n_resamples, "seed": self.seed,
                "confidence": self.confidence, "coverage_modes": list(self.coverage_modes),
                "main_families": list(self.main_families),
                "kts_geo_min_facts": self.kts_min_facts, "eps": self.eps,
                "kts_bootstrap": self.kts_bootstrap, "algorithm": ALGORITHM}


@dataclass
class RunStatistics:
    """The bootstrap of one run.

    Attributes:
        document: the content of ``bootstrap_intervals.json``.
        estimates: ``(coverage mode, subset)`` -> figure name -> :class:`Estimate`.
        fact_identity: ``(coverage mode, subset)`` -> ``(fact_ids, per-fact identification
            rate)`` (KTS-ID per fact, for the joint reading of §12).
    """

    document: dict[str, Any]
    estimates: dict[tuple[str, str], dict[str, Estimate]] = field(default_factory=dict)
    fact_identity: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = field(
        default_factory=dict)

    def metric(self, mode: str, subset: str, name: str) -> dict[str, Any] | None:
        """Return the interval record of a figure (None when not computed)."""
        block = self.document["coverage_modes"].get(mode, {}).get("subsets", {}).get(subset)
        return None if block is None else block.get("metrics", {}).get(name)


# ============================================================================ computation
def _record(est: Estimate, s: Settings, mode: str, subset: str) -> dict[str, Any]:
    return interval_record(est.point, est.replicates, confidence=s.confidence,
                           n_resamples=s.n_resamples, seed=s.seed, n_relations=est.n_relations,
                           n_facts=est.n_facts, coverage_mode=mode, subset=subset,
                           aggregation=est.aggregation)


def _kts_block(run: RunData, ids: np.ndarray, rel: np.ndarray, draws: Any, key: str,
               s: Settings) -> tuple[dict[str, Estimate], dict[str, Any], np.ndarray]:
    """KTS estimates (bootstrapped or point-only), per-relation points, per-fact identity."""
    assert run.centroids is not None
    space = run.centroids.space(ids, s.main_families, min_facts=s.kts_min_facts, eps=s.eps)
    if s.kts_bootstrap:
        res = kts_bootstrap(space, draws, progress=lambda it: track(
            it, f"KTS bootstrap {run.model}", total=len(space.layers)))
    else:
        res = kts_point(space, rel)
        nan = np.full((s.n_resamples, len(res.layers), len(res.pairs)), np.nan)
        res.geo_raw_reps, res.identity_reps = nan, nan.copy()
    n_facts = int(space.has.any(axis=1).sum())
    ests = kts_estimates(res, key=key, n_facts=n_facts)
    with np.errstate(invalid="ignore"):
        per_rel = {name: {"kts_geo_raw_spearman": _nanmean(res.per_relation_geo[name]),
                          "kts_id": _nanmean(res.per_relation_id[name])}
                   for name in res.per_relation_geo}
    return ests, {"layers": list(res.layers), "pairs": res.pairs,
                  "shared_facts": dict(zip(res.pairs, res.shared_facts.tolist(), strict=True)),
                  "n_relations_geo_constant": dict(zip(
                      res.pairs, np.asarray(res.n_relations_geo_constant).tolist(),
                      strict=True)),
                  "per_relation": per_rel}, res.fact_identity


def _nanmean(x: np.ndarray) -> float | None:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else None


def _iss_band(run: RunData, mask: np.ndarray, draws: Any, s: Settings, mode: str,
              subset: str) -> dict[str, Any]:
    """Per-layer ISS fact means with intervals (the report's ISS-by-layer band)."""
    assert run.iss_layers is not None
    layers, X = run.iss_layers
    X = X[mask]
    point = np.atleast_1d(fact_mean(X))
    reps = fact_mean_replicates(draws, X)
    return {str(layer): interval_record(point[j], reps[:, j], confidence=s.confidence,
                                        n_facts=int(np.isfinite(X[:, j]).sum()),
                                        coverage_mode=mode, subset=subset)
            for j, layer in enumerate(layers)}


def _one_selection(run: RunData, mode: str, subset: str, s: Settings, stats: RunStatistics
                   ) -> dict[str, Any]:
    """Bootstrap one (coverage mode, subset) fact set."""
    facts = run.facts
    assert facts is not None
    mask = facts.coverage_mask(mode) & facts.subset_mask(subset)
    ids, rel = facts.fact_ids[mask], facts.relation[mask]
    block: dict[str, Any] = {"n_facts": int(mask.sum()), "n_relations": len(set(rel.tolist())),
                             "metrics": {}}
    if not mask.any():
        block["note"] = "no fact in this selection"
        return block
    key = draws_key(ids.tolist(), rel.tolist(), n_resamples=s.n_resamples, seed=s.seed)
    block["draws_key"] = key
    draws = draw_clusters(rel, n_resamples=s.n_resamples, seed=s.seed)
    values = {m: v[mask] for m, v in facts.values.items() if np.isfinite(v[mask]).any()}
    ests = fact_estimates(draws, values, key=key)
    if subset == "all" and run.centroids is not None:
        kts, info, ident = _kts_block(run, ids, rel, draws, key, s)
        ests.update(kts)
        block["kts"] = info | {"bootstrapped": s.kts_bootstrap}
        stats.fact_identity[(mode, subset)] = (ids, ident)
    if subset == "all" and run.iss_layers is not None:
        block["iss_per_layer"] = _iss_band(run, mask, draws, s, mode, subset)
    stats.estimates[(mode, subset)] = ests
    block["metrics"] = {name: _record(e, s, mode, subset) for name, e in ests.items()}
    return block


def fingerprint(run: RunData, s: Settings) -> str:
    """sha256 of the inputs (file hashes) and settings the statistics depend on."""
    doc = {"inputs": run.inputs, "settings": s.describe()}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def compute_statistics(run: RunData, settings: Settings) -> RunStatistics:
    """Bootstrap every headline figure of a run in every coverage mode and subset.

    Args:
        run: the loaded run (its per-fact files give the fact set).
        settings: B, seed, confidence, coverage modes, KTS settings.

    Returns:
        The statistics (document, estimates with replicates, per-fact identity).
    """
    doc: dict[str, Any] = {
        "model": run.model, "method": "relation-clustered percentile bootstrap (spec §14.1): "
        "relations drawn with replacement, then facts with replacement within each drawn "
        "relation; fact means and relation macro-averages recomputed on every replicate",
        **settings.describe(), "fingerprint": fingerprint(run, settings),
        "inputs": run.inputs, "coverage_modes": {},
    }
    stats = RunStatistics(doc)
    if run.facts is None:
        doc["note"] = "no per-fact metric file (behaviour or ISS): nothing to bootstrap"
        return stats
    for mode in settings.coverage_modes:
        doc["coverage_modes"][mode] = {"subsets": {
            sub: _one_selection(run, mode, sub, settings, stats) for sub in SUBSETS}}
    if run.centroids is None:
        doc["kts_note"] = ("hidden_family_centroids/ absent: KTS intervals not computed"
                           if run.kts_summary is not None else "internal metrics not run")
    doc["created_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    return stats


# ================================================================================= cache
def _write_replicates(path: Path, stats: RunStatistics) -> None:
    arrays: dict[str, np.ndarray] = {}
    index: dict[str, Any] = {}
    for (mode, sub), ests in stats.estimates.items():
        names = list(ests)
        k = f"{mode}__{sub}"
        arrays[k] = np.stack([ests[n].replicates for n in names]) if names else np.zeros((0, 0))
        index[k] = names
    for (mode, sub), (ids, ident) in stats.fact_identity.items():
        arrays[f"identity__{mode}__{sub}"] = ident
        index[f"identity__{mode}__{sub}"] = ids.tolist()
    arrays["index"] = np.array(json.dumps(index))
    with atomic_path(path, suffix=".npz") as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays)


def _read_replicates(path: Path, doc: dict[str, Any]) -> RunStatistics | None:
    """Rebuild :class:`RunStatistics` from the cached files (None if inconsistent)."""
    with np.load(path, allow_pickle=False) as z:
        index = json.loads(str(z["index"]))
        stats = RunStatistics(doc)
        for mode, mblock in doc["coverage_modes"].items():
            for sub, block in mblock["subsets"].items():
                k = f"{mode}__{sub}"
                if k not in index:
                    continue
                reps = z[k]
                ests = {}
                for j, name in enumerate(index[k]):
                    rec = block["metrics"].get(name)
                    if rec is None:
                        return None
                    ests[name] = Estimate(rec["point"], reps[j], rec["aggregation"],
                                          rec["n_facts"], rec["n_relations"], block["draws_key"])
                stats.estimates[(mode, sub)] = ests
                ik = f"identity__{k}"
                if ik in index:
                    stats.fact_identity[(mode, sub)] = (np.array(index[ik], dtype=object), z[ik])
    return stats


def run_statistics(run: RunData, settings: Settings, *, reuse: bool = True) -> RunStatistics:
    """Compute (or reuse) and write ``bootstrap_intervals.json`` and the replicates.

    The cached files are reused when their fingerprint equals the current one (same input
    files, same settings).
    """
    from fks.provenance import record_files, verify_run

    out = run.metrics_dir
    run_dir = out.parent
    inputs = verify_run(run_dir, ["metrics_behavior", "metrics_internal", "calibrate"])
    ipath, rpath = out / INTERVALS_NAME, out / REPLICATES_NAME
    fp = fingerprint(run, settings)
    if reuse and ipath.is_file() and rpath.is_file():
        try:
            doc = read_json(ipath)
            if isinstance(doc, dict) and doc.get("fingerprint") == fp:
                cached = _read_replicates(rpath, doc)
                if cached is not None:
                    log.info("reusing %s (inputs unchanged)", ipath)
                    return cached
        except (OSError, ValueError, KeyError) as exc:  # a damaged cache is recomputed
            log.warning("cannot reuse %s (%s); recomputing", ipath, exc)
    stats = compute_statistics(run, settings)
    out.mkdir(parents=True, exist_ok=True)
    _write_replicates(rpath, stats)
    atomic_write_json(ipath, stats.document)
    if out.name == "metrics":
        record_files(run_dir, "bootstrap", inputs, [ipath, rpath])
    log.info("bootstrap intervals of %s -> %s", run.model, ipath)
    return stats

