"""``fks compare RUN_A RUN_B``: paired differences with the same replicates (spec §14.2).

Both runs must have been scored on the same benchmark (equal checksums in their manifests)
and the same fact set (ids, relations, coverage and real/copy flags); otherwise the
comparison is refused (:class:`~fks.errors.FksInputError`, exit 2). Each run's bootstrap is
computed or reused (:func:`fks.report.statistics.run_statistics`); since the draws depend only
on the fact set, B and the seed, both runs' replicates come from the same draws, and
:func:`fks.metrics.stats.compare.paired_comparison` turns them into ``Delta = A - B`` intervals.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from fks.errors import FksInputError
from fks.generate.manifest import MANIFEST_NAME
from fks.metrics.stats.compare import paired_comparison
from fks.report.inputs import FILES, METRICS_DIR, RunData, benchmark_checksum, load_run
from fks.report.statistics import RunStatistics, Settings, run_statistics

__all__ = ["check_comparable", "compare_statistics", "compare_runs"]


def _fact_file(run: RunData) -> Path:
    for key in ("behavior_per_fact", "iss_per_fact"):
        p = run.run_dir / METRICS_DIR / FILES[key]
        if p.is_file():
            return p
    return run.run_dir / METRICS_DIR


def check_comparable(a: RunData, b: RunData) -> str:
    """Return the shared benchmark checksum, or raise why the runs cannot be paired.

    Raises:
        FksInputError: a run without per-fact metrics or without a recorded benchmark
            checksum, different checksums, or different fact sets.
    """
    sums = []
    for run in (a, b):
        if run.facts is None:
            raise FksInputError("no per-fact metrics to compare (run `fks metrics` first)",
                                path=run.run_dir / METRICS_DIR, field=FILES["behavior_per_fact"])
        cs = benchmark_checksum(run.run_dir, run.manifest)
        if cs is None:
            raise FksInputError("no benchmark checksum recorded; cannot check that both runs "
                                "used the same benchmark", path=run.run_dir / MANIFEST_NAME,
                                field="benchmark.checksum")
        sums.append(cs)
    if sums[0] != sums[1]:
        raise FksInputError(f"the runs used different benchmarks (checksum {sums[1][:12]} here, "
                            f"{sums[0][:12]} in {a.run_dir})", path=b.run_dir / MANIFEST_NAME,
                            field="benchmark.checksum")
    fa, fb = a.facts, b.facts
    assert fa is not None and fb is not None
    if not np.array_equal(fa.fact_ids, fb.fact_ids):
        only_a = sorted(set(fa.fact_ids.tolist()) - set(fb.fact_ids.tolist()))
        only_b = sorted(set(fb.fact_ids.tolist()) - set(fa.fact_ids.tolist()))
        raise FksInputError(f"the fact sets differ: {len(only_a)} facts only in {a.run_dir} "
                            f"(e.g. {only_a[:3]}), {len(only_b)} only here (e.g. {only_b[:3]}); "
                            "every model must be scored on the same facts",
                            path=_fact_file(b), field="fact_id")
    for name in ("relation", "complete", "copy"):
        diff = np.flatnonzero(getattr(fa, name) != getattr(fb, name))
        if len(diff):
            raise FksInputError(f"fact {fa.fact_ids[diff[0]]} has a different {name} flag in "
                                f"the two runs ({len(diff)} facts differ)", path=_fact_file(b),
                                field=name)
    return sums[0]


def compare_statistics(sa: RunStatistics, sb: RunStatistics, *, confidence: float
                       ) -> dict[str, dict[str, dict[str, Any]]]:
    """Paired deltas per coverage mode and subset: ``{mode: {subset: {figure: record}}}``."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for (mode, sub), ea in sa.estimates.items():
        eb = sb.estimates.get((mode, sub))
        if eb is None:
            continue
        out.setdefault(mode, {})[sub] = paired_comparison(ea, eb, confidence=confidence)
    return out


def compare_runs(run_a: str | Path, run_b: str | Path, settings: Settings, *,
                 reuse: bool = True) -> dict[str, Any]:
    """Compare two runs: ``Delta = A - B`` per figure with paired 95 % intervals.

    Returns:
        ``{"model_a", "model_b", "run_a", "run_b", "benchmark_checksum", "settings",
        "coverage_modes": {mode: {subset: {figure: {point, low, high, a, b, ...}}}}}``.
    """
    a, b = load_run(run_a), load_run(run_b)
    checksum = check_comparable(a, b)
    sa = run_statistics(a, settings, reuse=reuse)
    sb = run_statistics(b, settings, reuse=reuse)
    return {
        "model_a": a.model, "model_b": b.model, "run_a": str(a.run_dir), "run_b": str(b.run_dir),
        "benchmark_checksum": checksum, "delta": "A - B", "settings": settings.describe(),
        "method": "paired relation-clustered bootstrap (spec §14.2): the same relation and "
                  "fact draws for both models; percentile interval of the replicate differences",
        "coverage_modes": compare_statistics(sa, sb, confidence=settings.confidence),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
