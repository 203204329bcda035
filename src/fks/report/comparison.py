"""``fks compare RUN_A RUN_B``: paired differences with the same replicates (spec §14.2).

Both runs must have been scored on the same benchmark (equal checksums in their manifests)
and the same fact set (ids, relations, coverage and real/copy flags); otherwise the
comparison is refused (:class:`~fks.errors.FksInputError`, exit 2). Before that, each run's
files are verified against the digests its manifest recorded (:func:`verify_inputs`, i.e.
:func:`fks.provenance.verify_run`), and each per-fact metrics file must hold as many facts as
its model summary counts, and the same facts as the other run's (:func:`check_consistent`,
:func:`check_comparable`): a truncated or foreign metrics file is exit 2 naming it, never a
"significant" difference. :func:`check_same_benchmark` is shared with ``fks report``, which
refuses a leaderboard over several benchmarks. Each run's bootstrap is
computed or reused (:func:`fks.report.statistics.run_statistics`); since the draws depend only
on the fact set, B and the seed, both runs' replicates come from the same draws, and
:func:`fks.metrics.stats.compare.paired_comparison` turns them into ``Delta = A - B`` intervals.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from fks.errors import FksInputError
from fks.generate.manifest import MANIFEST_NAME
from fks.metrics.stats.compare import paired_comparison
from fks.report.inputs import FILES, METRICS_DIR, RunData, benchmark_checksum, load_run
from fks.report.statistics import RunStatistics, Settings, run_statistics

__all__ = ["UNVERIFIED_STAGES", "verify_inputs", "benchmark_groups", "check_same_benchmark",
           "check_consistent", "check_comparable", "compare_statistics", "compare_runs"]

log = logging.getLogger(__name__)

#: stages whose outputs a reader of whole runs does not verify: the report's own files
#: (``fks report`` rewrites them; nothing compares or reports from them)
UNVERIFIED_STAGES = ("report",)


def verify_inputs(run_dir: str | Path, *, skip: Sequence[str] = ()) -> None:
    """Verify a run's files against its manifest (:func:`fks.provenance.verify_run`).

    Every stage's recorded outputs and the chains they were made from are checked, except
    :data:`UNVERIFIED_STAGES` and ``skip``.

    Raises:
        FksInputError: a file changed since its stage wrote it, is missing or is stale.
    """
    from fks.provenance import STAGE_OUTPUTS, verify_run

    left_out = {*UNVERIFIED_STAGES, *skip}
    verify_run(Path(run_dir), [s for s in STAGE_OUTPUTS if s not in left_out])


# ============================================================================== benchmark
def benchmark_groups(runs: Sequence[RunData]) -> dict[str | None, list[int]]:
    """Return the runs' indices per benchmark checksum (None: not recorded), in first-seen order.

    Raises:
        FksInputError: a run whose stages recorded different checksums.
    """
    groups: dict[str | None, list[int]] = {}
    for i, run in enumerate(runs):
        groups.setdefault(benchmark_checksum(run.run_dir, run.manifest), []).append(i)
    return groups


def check_same_benchmark(runs: Sequence[RunData], labels: Sequence[str] | None = None
                         ) -> str | None:
    """Return the runs' one benchmark checksum (None: none recorded), or raise naming the runs.

    Raises:
        FksInputError: the runs used different benchmarks (a run without a recorded checksum
            among runs with one counts as different); names every run with its checksum and
            points at the manifest of the first run off the first run's benchmark.
    """
    groups = benchmark_groups(runs)
    if len(groups) <= 1:
        return next(iter(groups), None)
    names = list(labels) if labels is not None else [str(r.run_dir) for r in runs]
    parts = [f"{cs[:12] if cs else 'no checksum recorded'}: "
             + ", ".join(f"{names[i]} ({runs[i].run_dir})" for i in idx)
             for cs, idx in groups.items()]
    other = list(groups.values())[1][0]
    raise FksInputError(f"the runs used different benchmarks ({'; '.join(parts)})",
                        path=runs[other].run_dir / MANIFEST_NAME, field="benchmark.checksum")


# ============================================================================ consistency
def _fact_file(run: RunData, key: str | None = None) -> Path:
    for k in ((key,) if key else ("behavior_per_fact", "iss_per_fact")):
        p = run.run_dir / METRICS_DIR / FILES[k]
        if p.is_file() or key:
            return p
    return run.run_dir / METRICS_DIR


def _summary_count(run: RunData, key: str) -> tuple[int | None, str]:
    """Return the fact count the model summary gives for a per-fact file, and where it says so."""
    if key == "behavior_per_fact":
        doc, reading = run.behavior_summary or {}, (run.behavior_summary or {}).get(
            "primary_reading")
        n = ((doc.get("readings") or {}).get(reading) or {}).get("n_facts_with_records")
        return n, f"{FILES['behavior_summary']} readings.{reading}.n_facts_with_records"
    doc = run.iss_summary or {}
    sel = f"{(doc.get('headline') or {}).get('reading')}/full_set/all"
    n = ((doc.get("selections") or {}).get(sel) or {}).get("n_facts")
    return n, f"{FILES['iss_summary']} selections.{sel}.n_facts"


def check_consistent(run: RunData) -> None:
    """Check that each per-fact file holds as many facts as its model summary counts.

    A summary without the count (an older or hand-made run) is not checked (logged).

    Raises:
        FksInputError: a per-fact file with more or fewer facts than its summary (truncated,
            or from another metrics run), naming the file.
    """
    for key, ids in run.file_facts.items():
        n, where = _summary_count(run, key)
        if not isinstance(n, int):
            log.debug("%s: no fact count in the summary (%s); not cross-checked",
                      _fact_file(run, key), where)
            continue
        if len(ids) != n:
            raise FksInputError(
                f"{len(ids)} facts in this file, {n} in {where}: the file was truncated or "
                "comes from another metrics run (rerun `fks metrics`)",
                path=_fact_file(run, key), field="fact_id")


def check_comparable(a: RunData, b: RunData) -> str:
    """Return the shared benchmark checksum, or raise why the runs cannot be paired.

    Raises:
        FksInputError: a run without per-fact metrics or without a recorded benchmark
            checksum, different checksums, different fact sets, or a per-fact file whose
            facts differ from the other run's.
    """
    for run in (a, b):
        if run.facts is None:
            raise FksInputError("no per-fact metrics to compare (run `fks metrics` first)",
                                path=run.run_dir / METRICS_DIR, field=FILES["behavior_per_fact"])
        if benchmark_checksum(run.run_dir, run.manifest) is None:
            raise FksInputError("no benchmark checksum recorded; cannot check that both runs "
                                "used the same benchmark", path=run.run_dir / MANIFEST_NAME,
                                field="benchmark.checksum")
    checksum = check_same_benchmark([a, b], [a.model, b.model])
    assert checksum is not None
    fa, fb = a.facts, b.facts
    assert fa is not None and fb is not None
    if not np.array_equal(fa.fact_ids, fb.fact_ids):
        only_a = sorted(set(fa.fact_ids.tolist()) - set(fb.fact_ids.tolist()))
        only_b = sorted(set(fb.fact_ids.tolist()) - set(fa.fact_ids.tolist()))
        raise FksInputError(f"the fact sets differ: {len(only_a)} facts only in {a.run_dir} "
                            f"(e.g. {only_a[:3]}), {len(only_b)} only here (e.g. {only_b[:3]}); "
                            "every model must be scored on the same facts",
                            path=_fact_file(b), field="fact_id")
    for key in set(a.file_facts) & set(b.file_facts):
        ids_a, ids_b = set(a.file_facts[key]), set(b.file_facts[key])
        if ids_a != ids_b:
            raise FksInputError(
                f"{len(ids_a - ids_b)} facts only in {_fact_file(a, key)}, {len(ids_b - ids_a)} "
                f"only here (e.g. {sorted(ids_a ^ ids_b)[:3]}): the two runs' {FILES[key]} "
                "must cover the same facts", path=_fact_file(b, key), field="fact_id")
    for name in ("relation", "complete", "copy"):
        diff = np.flatnonzero(getattr(fa, name) != getattr(fb, name))
        if len(diff):
            raise FksInputError(f"fact {fa.fact_ids[diff[0]]} has a different {name} flag in "
                                f"the two runs ({len(diff)} facts differ)", path=_fact_file(b),
                                field=name)
    return checksum


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

    Each run is verified first (:func:`verify_inputs`, :func:`check_consistent`).

    Returns:
        A :class:`fks.report.results.Comparison` as a dict: ``{"schema_version", "model_a",
        "model_b", "run_a", "run_b", "runs": [{role, model, run_dir, details}],
        "benchmark_checksum", "settings", "coverage_modes": {mode: {subset: {figure:
        {point, low, high, a, b, ...}}}}, ...}``.
    """
    from fks.report.results import Comparison, run_details

    for d in (run_a, run_b):
        verify_inputs(d)
    a, b = load_run(run_a), load_run(run_b)
    for run in (a, b):
        check_consistent(run)
    checksum = check_comparable(a, b)
    sa = run_statistics(a, settings, reuse=reuse)
    sb = run_statistics(b, settings, reuse=reuse)
    doc = {
        "model_a": a.model, "model_b": b.model, "run_a": str(a.run_dir), "run_b": str(b.run_dir),
        "runs": [{"role": role, "model": r.model, "run_dir": str(r.run_dir),
                  "details": run_details(r.run_dir, r.manifest, model=r.model)}
                 for role, r in (("a", a), ("b", b))],
        "benchmark_checksum": checksum, "delta": "A - B", "settings": settings.describe(),
        "method": "paired relation-clustered bootstrap (spec §14.2): the same relation and "
                  "fact draws for both models; percentile interval of the replicate differences",
        "coverage_modes": compare_statistics(sa, sb, confidence=settings.confidence),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    return Comparison.model_validate(doc).model_dump(mode="json")
