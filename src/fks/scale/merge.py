"""``fks merge RUN``: verify the shards of every stage, then join them into ``RUN``.

A sharded stage writes ``RUN/shards/shard_i_of_n/``: ``generations.jsonl`` (``fks generate
--shard``), ``judged.jsonl`` (``fks judge --shard``) and ``hidden/`` (``fks extract --shard``),
each with ``stages.<stage>`` in that folder's manifest. Facts are dealt to shards by
:func:`fks.generate.runner.assign_shards`, the one rule of every stage.

:func:`merge_run` checks **everything first** and writes nothing unless every check passes:

* every shard ``1..n`` exists (one ``n``);
* per stage, the shards ran the same configuration (generation: model, benchmark, decoding,
  prompt version, selection, backend identity; judge: the judge's identity and the
  ``scored.jsonl`` it read; extraction: model, layers, widths, prompt version, selection,
  benchmark);
* every shard file still has the sha256 its manifest recorded (hidden stores: every file of
  ``meta.json``'s list);
* every expected ``query_id`` is present exactly once, in the shard its fact is dealt to.

Otherwise it raises :class:`~fks.errors.FksInputError` (exit 2) listing every gap, stage by
stage. Then it writes ``RUN/generations.jsonl`` (:func:`fks.generate.runner.merge_shards`, the
same code as ``fks generate --merge``), ``RUN/judged.jsonl`` (in ``scored.jsonl`` order, as
``fks judge`` writes it) and ``RUN/hidden/`` (through :class:`fks.hidden.store.HiddenWriter`,
so an interrupted merge resumes), each with its manifest entry. A stage whose shards hold
nothing is left alone.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from fks.data.load import Benchmark, load_benchmark
from fks.errors import FksInputError
from fks.generate.manifest import MANIFEST_NAME, read_run_manifest, update_run_manifest
from fks.generate.runner import (
    GENERATIONS_NAME,
    benchmark_shards,
    check_shard_records,
    find_shards,
    identity_problems,
    merge_shards,
    shard_merge_problems,
)
from fks.io import atomic_write_jsonl, iter_jsonl, read_json, sha256_file
from fks.provenance import record_files
from fks.runlock import locks_run_dir

__all__ = ["MERGEABLE_STAGES", "MergeResult", "stages_present", "verify_run", "merge_run"]

log = logging.getLogger(__name__)

#: the stages whose shards ``fks merge`` joins, in merge order
MERGEABLE_STAGES: tuple[str, ...] = ("generate", "judge", "extract")
JUDGED_NAME = "judged.jsonl"
SCORED_NAME = "scored.jsonl"
#: judge manifest fields every shard must share
JUDGE_IDENTITY = ("stages.judge.judge", "stages.judge.input.sha256",
                  "stages.judge.benchmark.checksum")
#: hidden-store meta.json fields every shard must share
HIDDEN_IDENTITY = ("model", "n_layers", "d_model", "layers", "prompt_version", "max_prompt_len",
                   "selection", "benchmark_checksum", "position", "dtype", "padding_side")
_CHUNK_ROWS = 1024  # rows per copy into the merged store (memory: rows x d x layers x 2 bytes)


@dataclass
class MergeResult:
    """What :func:`merge_run` joined: ``{stage: records or rows}`` from ``n_shards`` shards."""

    run_dir: Path
    n_shards: int
    merged: dict[str, int] = field(default_factory=dict)


@dataclass
class _Plan:
    """One verified stage, ready to write."""

    stage: str
    rows: list[Any] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def stages_present(shards: Mapping[int, Path]) -> list[str]:
    """List the mergeable stages some shard has output or a manifest entry for (merge order)."""
    found = set()
    for folder in shards.values():
        recorded = read_run_manifest(folder)["stages"]
        for stage, marker in (("generate", GENERATIONS_NAME), ("judge", JUDGED_NAME),
                              ("extract", "hidden")):
            if stage in recorded or (folder / marker).exists():
                found.add(stage)
    return [s for s in MERGEABLE_STAGES if s in found]


def _benchmark(run_dir: Path, shards: Mapping[int, Path],
               benchmark: str | Path | Benchmark | None) -> Benchmark:
    """Load the benchmark given, else the one generation recorded (run or shard manifests)."""
    if isinstance(benchmark, Benchmark):
        return benchmark
    if benchmark is not None:
        return load_benchmark(benchmark)
    for folder in [run_dir, *shards.values()]:
        path = (read_run_manifest(folder).get("benchmark") or {}).get("path")
        if isinstance(path, str):
            return load_benchmark(path)
    raise FksInputError("no manifest records the benchmark; pass --benchmark",
                        path=run_dir / MANIFEST_NAME, field="benchmark.path")


# ---------------------------------------------------------------------------- judge
def _verify_judge(run_dir: Path, shards: Mapping[int, Path], bench: Benchmark
                  ) -> tuple[_Plan | None, list[str]]:
    """Check the judged shards against ``RUN/scored.jsonl`` (the file they judged)."""
    scored = run_dir / SCORED_NAME
    if not scored.is_file():
        return None, [f"{scored} is missing (the judge shards read it; run `fks score`)"]
    manifests = {i: read_run_manifest(p) for i, p in shards.items()}
    n = len(shards)
    problems = [f"shard {i}/{n} has not judged (no stages.judge in its manifest)"
                for i, m in sorted(manifests.items()) if "judge" not in m["stages"]]
    if problems:
        return None, problems
    problems = identity_problems(manifests, JUDGE_IDENTITY)
    current = sha256_file(scored)
    if manifests[1]["stages"]["judge"].get("input", {}).get("sha256") != current:
        problems.append(f"{scored} changed after the shards judged it (sha256 differs)")
    expected = [(r["query_id"], r["fact_id"]) for _, r in iter_jsonl(scored)]
    by_id, gaps = check_shard_records(
        dict(shards), JUDGED_NAME, None, expected, benchmark_shards(bench, n),
        checksums={i: m["stages"]["judge"].get("sha256") for i, m in manifests.items()})
    problems += gaps
    if problems:
        return None, problems
    rows = [by_id[qid] for qid, _ in expected]
    first = manifests[1]["stages"]["judge"]
    extra = {"first": first, "input_sha256": current, "shards": [
        {"shard": f"{i}/{n}", "sha256": m["stages"]["judge"].get("sha256"),
         "counts": m["stages"]["judge"].get("counts", {})} for i, m in sorted(manifests.items())]}
    return _Plan("judge", rows, extra), []


def _sum_counts(parts: list[Any]) -> Any:
    """Add count dicts leaf by leaf (numbers add up; other values are taken from the first).

    >>> _sum_counts([{"records": 2, "by": {"a": 1}}, {"records": 3, "by": {"a": 1, "b": 4}}])
    {'records': 5, 'by': {'a': 2, 'b': 4}}
    """
    if all(isinstance(p, dict) for p in parts):
        keys = list(dict.fromkeys(k for p in parts for k in p))
        return {k: _sum_counts([p[k] for p in parts if k in p]) for k in keys}
    if all(isinstance(p, int | float) and not isinstance(p, bool) for p in parts):
        return sum(parts)
    return parts[0]


def _write_judge(run_dir: Path, plan: _Plan, n: int) -> int:
    out = run_dir / JUDGED_NAME
    atomic_write_jsonl(out, plan.rows)
    first = plan.extra["first"]
    info = {k: v for k, v in first.items() if k not in ("shard", "counts", "sha256")}
    info.update(
        counts=_sum_counts([s["counts"] for s in plan.extra["shards"]]),
        output=out.name, sha256=sha256_file(out),
        input={"file": SCORED_NAME, "sha256": plan.extra["input_sha256"]},
        finished_at=_now(), merged_from_shards=n,
        shards=[{k: v for k, v in s.items() if k != "counts"} for s in plan.extra["shards"]])
    update_run_manifest(run_dir, stage="judge", stage_info=info)
    record_files(run_dir, "judge", {SCORED_NAME: plan.extra["input_sha256"]}, [out])
    return len(plan.rows)


# --------------------------------------------------------------------------- hidden
def _hidden_meta(folder: Path) -> dict[str, Any] | None:
    path = folder / "hidden" / "meta.json"
    return read_json(path) if path.is_file() else None


def _verify_hidden(shards: Mapping[int, Path], bench: Benchmark
                   ) -> tuple[_Plan | None, list[str]]:
    """Check every shard's hidden store: complete, checksums, same identity, every row once."""
    from fks.hidden.extract import select_queries
    from fks.hidden.store import HiddenStore

    n = len(shards)
    metas = {i: _hidden_meta(p) for i, p in shards.items()}
    problems = [f"shard {i}/{n}: hidden store missing or unfinished (run `fks extract --shard "
                f"{i}/{n}`; it resumes)" for i, m in sorted(metas.items()) if m is None]
    if problems:
        return None, problems
    full = {i: m for i, m in metas.items() if m is not None}
    problems = identity_problems(full, HIDDEN_IDENTITY)
    problems += [f"shard {i}/{n}: its hidden store is for shard {m.get('shard')}"
                 for i, m in sorted(full.items()) if m.get("shard") != [i, n]]
    for i, folder in sorted(shards.items()):
        try:
            HiddenStore(folder).verify_checksums()
        except FksInputError as exc:
            problems.append(f"shard {i}/{n}: {exc.one_line()}")
    first = full[1]
    if first.get("benchmark_checksum") != bench.checksum():
        problems.append("the hidden stores were extracted on another benchmark (checksum)")
    if problems:
        return None, problems
    sel = first.get("selection") or {}
    expected = select_queries(bench.queries, reverse=bool(sel.get("reverse")),
                              recognition=bool(sel.get("recognition")))
    by_id, gaps = check_shard_records(dict(shards), "hidden/index.jsonl", None,
                                      [(q.query_id, q.fact_id) for q in expected],
                                      benchmark_shards(bench, n))
    if gaps:
        return None, gaps
    rows = [by_id[q.query_id] for q in expected]
    return _Plan("extract", rows, {"metas": full}), []


def _copy_rows(writer: Any, shards: Mapping[int, Path], rows: list[dict[str, Any]],
               owner: Mapping[str, int]) -> None:
    """Copy every shard's rows into the merged store, ``_CHUNK_ROWS`` rows at a time."""
    from fks.hidden.store import HiddenStore

    for i, folder in sorted(shards.items()):
        store = HiddenStore(folder)
        src = np.array([r["row"] for r in rows if owner[r["fact_id"]] == i], dtype=np.int64)
        dst = np.array([k for k, r in enumerate(rows) if owner[r["fact_id"]] == i],
                       dtype=np.int64)
        maps = {layer: store.layer(layer) for layer in store.layers}
        for start in range(0, len(src), _CHUNK_ROWS):
            part = slice(start, start + _CHUNK_ROWS)
            if writer.done[dst[part]].all():
                continue  # a resumed merge: already copied
            writer.write(dst[part], {layer: np.asarray(m[src[part]]) for layer, m in maps.items()})


def _write_hidden(run_dir: Path, shards: Mapping[int, Path], plan: _Plan, bench: Benchmark
                  ) -> int:
    from fks.hidden.store import HIDDEN_DIR, HiddenWriter, layer_filename

    metas = plan.extra["metas"]
    first = metas[1]
    identity = {k: first[k] for k in ("model", "n_layers", "d_model", "layers",
                                      "prompt_version", "max_prompt_len", "selection",
                                      "benchmark_checksum") if k in first}
    rows = [{k: v for k, v in r.items() if k != "row"} for r in plan.rows]
    writer = HiddenWriter(run_dir, rows, first["layers"], first["d_model"], identity)
    n = len(shards)
    _copy_rows(writer, shards, plan.rows, benchmark_shards(bench, n))
    shard_meta = {f"{i}/{n}": sha256_file(p / HIDDEN_DIR / "meta.json")
                  for i, p in sorted(shards.items())}
    meta = writer.finalize({"padding_side": first.get("padding_side"),
                            "model_info": first.get("model_info", {}),
                            "merged_from_shards": n, "shard_meta_sha256": shard_meta})
    update_run_manifest(run_dir, stage="extract", stage_info={
        "model": meta["model"], "model_info": first.get("model_info", {}),
        "n_rows": len(rows), "layers": meta["layers"], "prompt_version": meta["prompt_version"],
        "meta_sha256": sha256_file(run_dir / HIDDEN_DIR / "meta.json"),
        "files": [layer_filename(x) for x in meta["layers"]], "merged_from_shards": n,
        "shards": [{"shard": k, "meta_sha256": v} for k, v in shard_meta.items()],
        "finished_at": _now(),
    })
    record_files(run_dir, "extract", {})
    return len(rows)


# ---------------------------------------------------------------------------- entry
def verify_run(run_dir: str | Path, *, benchmark: str | Path | Benchmark | None = None,
               stages: list[str] | None = None) -> tuple[dict[str, _Plan | None], list[str]]:
    """Check every stage's shards (see the module docstring); write nothing.

    Returns:
        ``({stage: plan}, problems)`` where each problem line starts with its stage.

    Raises:
        FksInputError: no shard folders, shards of different ``n``, missing shard folders,
            an unknown stage name, or no benchmark to check against.
    """
    run_dir = Path(run_dir)
    shards = find_shards(run_dir)
    unknown = [s for s in stages or [] if s not in MERGEABLE_STAGES]
    if unknown:
        raise FksInputError(f"cannot merge stage {unknown[0]!r}; mergeable: "
                            f"{', '.join(MERGEABLE_STAGES)}", field="stages")
    todo = [s for s in stages_present(shards) if stages is None or s in stages]
    if not todo:
        raise FksInputError("the shard folders hold no generate, judge or extract output",
                            path=run_dir / "shards")
    bench = _benchmark(run_dir, shards, benchmark)
    plans: dict[str, _Plan | None] = {}
    problems: list[str] = []
    for stage in todo:
        if stage == "generate":
            found = shard_merge_problems(run_dir, benchmark=bench.root)
            plans[stage] = None if found else _Plan(stage)
        elif stage == "judge":
            plans[stage], found = _verify_judge(run_dir, shards, bench)
        else:
            plans[stage], found = _verify_hidden(shards, bench)
        problems += [f"{stage}: {p}" for p in found]
    return plans, problems


@locks_run_dir("run_dir")
def merge_run(run_dir: str | Path, *, benchmark: str | Path | Benchmark | None = None,
              stages: list[str] | None = None) -> MergeResult:
    """Verify, then join, the shards of ``RUN`` (every stage present, or ``stages``).

    Args:
        run_dir: the run directory ``RUN`` (shards in ``RUN/shards/shard_i_of_n``).
        benchmark: the benchmark (default: the one generation recorded).
        stages: only these of :data:`MERGEABLE_STAGES` (default: every stage with shard output).

    Returns:
        what was merged, per stage.

    Raises:
        FksInputError: any gap (listed, every stage): a missing shard, a record missing,
            doubled or misplaced, a changed file, or shards that ran different configurations.
    """
    run_dir = Path(run_dir)
    plans, problems = verify_run(run_dir, benchmark=benchmark, stages=stages)
    if problems:
        counts = Counter(p.split(":", 1)[0] for p in problems)
        raise FksInputError(
            f"cannot merge {run_dir} ({', '.join(f'{s}: {k}' for s, k in counts.items())} "
            "problem(s)): " + " | ".join(problems), path=run_dir / "shards")
    shards = find_shards(run_dir)
    bench = _benchmark(run_dir, shards, benchmark)
    result = MergeResult(run_dir, len(shards))
    for stage, plan in plans.items():
        assert plan is not None
        if stage == "generate":
            result.merged[stage] = merge_shards(run_dir, benchmark=bench.root).n_written
        elif stage == "judge":
            result.merged[stage] = _write_judge(run_dir, plan, len(shards))
        else:
            result.merged[stage] = _write_hidden(run_dir, shards, plan, bench)
        log.info("merged %s: %d from %d shards", stage, result.merged[stage], len(shards))
    return result
