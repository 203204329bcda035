"""The resumable generation runner behind ``fks generate`` (README stages V-VI, spec §2.3).

``generate_run`` writes, in the run directory (or ``RUN/shards/shard_i_of_n/`` for a shard):

* ``generations.jsonl`` -- one :class:`~fks.data.schema.GenerationRecord` per selected query,
  in benchmark order. Records are appended in durable batches (:class:`fks.io.JsonlAppender`:
  flush + fsync per batch, a torn last line is cut on reopen), so a ``kill -9`` at any moment
  loses no finished batch and a rerun skips every ``query_id`` already recorded. Failed prompts
  are kept with ``status`` ``error``/``timeout``, never dropped.
* ``evaluation_manifest.json`` -- model, backend identity (weights/tokenizer sha256, dtype),
  decoding config, prompt version, benchmark checksum, seeds, selection, and
  ``stages.generate`` (times, counts by status, sha256 of ``generations.jsonl``).

Determinism: the query order is the benchmark's, filtered, and batches are fixed slices of that
order (a partly recorded batch is regenerated whole, writing only its missing rows), so a resumed
run with the same batch size decodes every prompt in the same batch as an uninterrupted run and
writes a byte-identical file. With another batch size (or in a shard) a prompt's greedy tokens
are the same (left padding + masks make the output batch-independent) but its log-probs may
differ in the last float32 digits (padding changes the order of floating-point sums). A backend
whose batching cannot change the numerics (a server) sets ``regenerate_whole_batches = False``
and only the missing prompts are sent.

Early stop: when more than half of the last :data:`FAILURE_WINDOW` (32) requests of this run
failed (``error``/``timeout``), checked after every batch once :data:`FAILURE_MIN_REQUESTS` (16)
were sent, the run stops: the batches done stay recorded, the manifest says ``incomplete`` with
``stopped_early`` (the reason), and :class:`FksInputError` (exit code 2) names the server and the
last error. A window rather than a share of the whole run, so a server that dies after hours of
good answers is noticed within a few batches. Rerun with ``--retry-errors`` once it is fixed.

``retry_errors`` (``--retry-errors``) drops the recorded ``error``/``timeout`` rows first, so a
rerun generates them again; the file is then put back in benchmark order.

Selection: ``families`` keeps those condition families, then ``limit`` keeps the first N, then
``shard`` keeps the queries of the facts :func:`assign_shards` deals to it: balanced by relation,
deterministic, all queries of a fact together. ``extract`` and ``judge`` use the same function,
so a fact lands in the same shard in every stage.

``merge_shards`` joins ``RUN/shards/*/generations.jsonl`` into ``RUN/generations.jsonl`` after
checking that every selected query is present exactly once, in the shard its fact is dealt to,
that every shard file still has the sha256 its manifest recorded, and that all shards ran the
same model, benchmark, decoding config and prompt version (:func:`check_shard_records` is the
exactly-once check, shared with ``fks merge`` for the other stages' files).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import random
import re
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fks import __version__
from fks.configs import FAMILIES, ConfigSet
from fks.data.load import Benchmark, load_benchmark
from fks.data.schema import GenerationRecord, Query
from fks.errors import FksInputError
from fks.generate.backends.base import GenerationBackend, GenerationOutput
from fks.generate.manifest import MANIFEST_NAME, read_run_manifest, update_run_manifest
from fks.generate.prompts import PROMPT_VERSION, build_prompt
from fks.io import (
    JsonlAppender,
    atomic_write_jsonl,
    iter_jsonl,
    repair_jsonl_tail,
    sha256_file,
)
from fks.log import progress_bar
from fks.runlock import locks_run_dir

__all__ = [
    "GENERATIONS_NAME",
    "GenerateSummary",
    "select_queries",
    "parse_shard",
    "shard_of",
    "SHARD_RULE",
    "assign_shards",
    "benchmark_shards",
    "shard_dir",
    "find_shards",
    "check_shard_records",
    "identity_problems",
    "shard_merge_problems",
    "make_record",
    "generate_run",
    "merge_shards",
]

log = logging.getLogger(__name__)

GENERATIONS_NAME = "generations.jsonl"
#: manifest fields that must agree between a resumed run and the run it continues, and between
#: the shards of one merge (dotted paths into the manifest)
IDENTITY_FIELDS = (
    "model.name",
    "benchmark.checksum",
    "generation_config",
    "prompt_version",
    "selection.families",
    "selection.limit",
    "backend.backend",
    "backend.weights_sha256",
    "backend.tokenizer_sha256",
)
_SHARD_RE = re.compile(r"^shard_(\d+)_of_(\d+)$")
#: early stop: the run stops when more than half of its last ``FAILURE_WINDOW`` requests failed
#: (``error``/``timeout``), checked after every batch once it has sent ``FAILURE_MIN_REQUESTS``
FAILURE_WINDOW = 32
FAILURE_MIN_REQUESTS = 16


@dataclass
class GenerateSummary:
    """What one ``generate_run`` or ``merge_shards`` call did."""

    out_dir: Path
    n_selected: int
    n_existing: int
    n_written: int
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Every selected query has a record."""
        return self.n_existing + self.n_written == self.n_selected


# ------------------------------------------------------------------------------- selection
def select_queries(
    queries: Sequence[Query], *, families: Sequence[str] | None = None, limit: int | None = None
) -> list[Query]:
    """Benchmark-order queries of ``families`` (all when None), then the first ``limit``.

    Raises:
        FksInputError: an unknown family name or a negative limit.
    """
    if families:
        unknown = [f for f in families if f not in FAMILIES]
        if unknown:
            raise FksInputError(
                f"unknown family {unknown[0]!r}; expected some of {', '.join(FAMILIES)}",
                field="families",
            )
        wanted = set(families)
        queries = [q for q in queries if q.condition_family in wanted]
    if limit is not None:
        if limit < 0:
            raise FksInputError(f"must be >= 0; found {limit}", field="limit")
        queries = queries[:limit]
    return list(queries)


def parse_shard(text: str) -> tuple[int, int]:
    """Parse ``"i/n"`` (1-based: ``1/4`` ... ``4/4``) into ``(i, n)``.

    >>> parse_shard("2/4")
    (2, 4)
    """
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise FksInputError(f"expected i/n with 1 <= i <= n (e.g. 1/4); found {text!r}",
                            field="shard")
    return int(m.group(1)), int(m.group(2))


def _fact_rank(fact_id: str) -> int:
    """``int(sha256(fact_id)[:16], 16)``: a stable, machine-independent pseudo-random rank."""
    return int(hashlib.sha256(fact_id.encode("utf-8")).hexdigest()[:16], 16)


def shard_of(fact_id: str, n: int) -> int:
    """Hash-only shard of a fact: ``int(sha256(fact_id)[:16], 16) % n + 1``.

    Stable across machines and Python runs, but balanced only on average. The stages select
    their shard with :func:`assign_shards` (balanced by relation), not with this function.

    >>> shard_of("fact_000001", 1)
    1
    """
    return _fact_rank(fact_id) % n + 1


#: how :func:`assign_shards` deals facts (recorded in shard manifests)
SHARD_RULE = ("relations sorted by id; within each, facts in (sha256(fact_id), fact_id) order; "
              "dealt round-robin with one running counter: the k-th fact -> shard k % n + 1")


def assign_shards(facts: Iterable[tuple[str, str]], n: int) -> dict[str, int]:
    """Deal facts to ``n`` shards, balanced within every relation: ``{fact_id: 1..n}``.

    ``facts`` are ``(fact_id, relation)`` pairs (order and repeats do not matter). Relations
    are taken in sorted order, the facts of each in a stable pseudo-random order
    (:func:`_fact_rank`, ties by id), and the k-th fact of that sequence goes to shard
    ``k % n + 1``. So each shard holds ``floor(m_r / n)`` or ``ceil(m_r / n)`` of the ``m_r``
    facts of every relation, shard totals differ by at most one fact, and every query of a
    fact lands in one shard. The result depends only on the set of facts and ``n``.

    >>> assign_shards([("f1", "a"), ("f2", "a"), ("f3", "b")], 1)
    {'f1': 1, 'f2': 1, 'f3': 1}
    >>> sorted(assign_shards([("f1", "a"), ("f2", "a"), ("f3", "b"), ("f4", "b")], 2).values())
    [1, 1, 2, 2]

    Raises:
        FksInputError: ``n < 1``, or one fact given with two relations.
    """
    if n < 1:
        raise FksInputError(f"must be >= 1; found {n}", field="shard")
    relation_of: dict[str, str] = {}
    for fact_id, relation in facts:
        if relation_of.setdefault(fact_id, relation) != relation:
            raise FksInputError(f"fact {fact_id} has relations {relation_of[fact_id]!r} and "
                                f"{relation!r}", field="relation")
    by_relation: dict[str, list[str]] = {}
    for fact_id, relation in relation_of.items():
        by_relation.setdefault(relation, []).append(fact_id)
    owner: dict[str, int] = {}
    k = 0
    for relation in sorted(by_relation):
        for fact_id in sorted(by_relation[relation], key=lambda f: (_fact_rank(f), f)):
            owner[fact_id] = k % n + 1
            k += 1
    return owner


def benchmark_shards(bench: Benchmark, n: int) -> dict[str, int]:
    """:func:`assign_shards` over every fact of ``bench`` (the one rule of every stage)."""
    return assign_shards(((f.fact_id, f.relation.relation_id) for f in bench.facts), n)


def shard_dir(run_dir: Path, shard: tuple[int, int]) -> Path:
    """``RUN/shards/shard_i_of_n``."""
    return Path(run_dir) / "shards" / f"shard_{shard[0]}_of_{shard[1]}"


# --------------------------------------------------------------------------------- records
def make_record(
    query: Query,
    output: GenerationOutput,
    *,
    model: str,
    generation_config: dict[str, Any],
    prompt_version: str = PROMPT_VERSION,
) -> GenerationRecord:
    """One ``generations.jsonl`` row: spec §2.3 fields, the query's flags, the backend's output."""
    return GenerationRecord(
        model=model,
        query_id=query.query_id,
        fact_id=query.fact_id,
        relation=query.relation,
        condition_family=query.condition_family,
        language=query.language,
        use_for_main_forward=query.use_for_main_forward,
        use_for_reverse_analysis=query.use_for_reverse_analysis,
        use_for_recognition_analysis=query.use_for_recognition_analysis,
        answer_in_subject_surface=query.answer_in_subject_surface,
        raw_response=output.text if output.status == "ok" else "",
        generation_config=generation_config,
        prompt_version=prompt_version,
        status=output.status,
        error=output.error,
        n_prompt_tokens=output.n_prompt_tokens,
        prompt_truncated=output.prompt_truncated,
        n_generated_tokens=output.n_generated_tokens,
        finish_reason=output.finish_reason,
        answer_logprobs=output.answer_logprobs,
        variant_id=query.variant_id,
        target_slot=query.target_slot,
        is_assisted=query.is_assisted,
        is_well_posed=query.is_well_posed,
    )


# -------------------------------------------------------------------------------- manifest
def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _dig(data: dict[str, Any], dotted: str) -> Any:
    for key in dotted.split("."):
        data = data.get(key) if isinstance(data, dict) else None  # type: ignore[assignment]
    return data


def _check_same_identity(
    old: dict[str, Any], new: dict[str, Any], path: Path, what: str, fields: Sequence[str]
) -> None:
    """Raise when manifests ``old`` and ``new`` disagree on one of ``fields`` (dotted paths)."""
    for name in fields:
        a, b = _dig(old, name), _dig(new, name)
        if a != b:
            raise FksInputError(f"{what}: {a!r} there, {b!r} here", path=path, field=name)


def _seed_everything(seed: int) -> None:
    """Seed Python, numpy and torch (decoding is greedy; this pins anything else random)."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
        import torch

        torch.manual_seed(seed)
    except ImportError:  # pragma: no cover - numpy/torch are core dependencies
        pass


def _run_sections(
    *,
    model: str,
    model_path: str,
    bench: Benchmark,
    configs: ConfigSet,
    backend: GenerationBackend,
    families: Sequence[str] | None,
    limit: int | None,
    shard: tuple[int, int] | None,
    n_selected: int,
) -> dict[str, Any]:
    """Build the manifest's top-level sections for one run."""
    desc = backend.describe()
    gen = configs.models.generation
    return {
        "fks_version": __version__,
        "model": {"name": model, "path": model_path},
        "weights_sha256": desc.get("weights_sha256"),
        "tokenizer_sha256": desc.get("tokenizer_sha256"),
        "backend": desc,
        "generation_config": generation_config_of(configs, backend),
        "prompt_version": PROMPT_VERSION,
        "benchmark": {
            "path": str(Path(bench.root).resolve()),
            "checksum": bench.checksum(),
            "n_facts": len(bench.facts),
            "n_queries": len(bench.queries),
        },
        "seeds": {"generation": gen.seed},
        "selection": {
            "families": sorted(families) if families else None,
            "limit": limit,
            "shard": list(shard) if shard else None,
            "shard_rule": SHARD_RULE,
            "n_selected": n_selected,
        },
    }


def generation_config_of(configs: ConfigSet, backend: GenerationBackend) -> dict[str, Any]:
    """Return the decoding block in force plus ``dtype_used`` (what the backend ran)."""
    return configs.models.generation.model_dump(mode="json") | {
        "dtype_used": backend.describe().get("dtype")
    }


# ----------------------------------------------------------------------------------- run
def _existing_ids(path: Path, selected: dict[str, int], model: str) -> tuple[set[str], Counter]:
    """Collect the query_ids already in ``path`` (checked: selected, once, same model)."""
    done: set[str] = set()
    counts: Counter = Counter()
    if not path.is_file():
        return done, counts
    for line, rec in iter_jsonl(path, GenerationRecord):
        qid = rec.query_id  # type: ignore[union-attr]
        if qid not in selected:
            raise FksInputError(f"{qid} is not in this run's selection (different --families, "
                                "--limit or --shard than the run being resumed?)",
                                path=path, line=line, field="query_id")
        if qid in done:
            raise FksInputError(f"{qid} is recorded twice", path=path, line=line, field="query_id")
        if rec.model != model:  # type: ignore[union-attr]
            raise FksInputError(f"expected model {model!r}, found {rec.model!r}",  # type: ignore[union-attr]
                                path=path, line=line, field="model")
        done.add(qid)
        counts[rec.status] += 1  # type: ignore[union-attr]
    return done, counts


def _pending_batches(
    selected: list[Query], done: set[str], size: int, *, whole: bool = True
) -> Iterable[tuple[list[Query], list[bool]]]:
    """Yield the fixed batches ``selected[k*size:(k+1)*size]`` that still lack a record.

    Yields ``(batch, wanted)``. With ``whole`` (in-process backends) a partly recorded batch is
    generated whole (``wanted`` marks the rows to write), so every prompt is always decoded in the
    same batch as in an uninterrupted run with the same batch size: same padding, same
    floating-point sums, same bytes. Without it (a server backend, where batching does not touch
    the numerics) only the missing prompts are sent.
    """
    for start in range(0, len(selected), size):
        batch = selected[start:start + size]
        wanted = [q.query_id not in done for q in batch]
        if not any(wanted):
            continue
        if whole:
            yield batch, wanted
        else:
            yield [q for q, w in zip(batch, wanted, strict=True) if w], [True] * sum(wanted)


def _drop_failed(path: Path) -> int:
    """Rewrite ``path`` atomically without its ``error``/``timeout`` rows; returns how many."""
    if not path.is_file():
        return 0
    repair_jsonl_tail(path)
    rows = [rec for _, rec in iter_jsonl(path, GenerationRecord)]
    kept = [r for r in rows if r.status == "ok"]  # type: ignore[union-attr]
    if len(kept) != len(rows):
        atomic_write_jsonl(path, kept)  # type: ignore[arg-type]
    return len(rows) - len(kept)


def length_sorted(selected: list[Query]) -> list[Query]:
    """Return the queries by prompt length (characters; ties in selection order).

    An in-process backend pads a batch to its longest prompt, and the context and
    multilingual prompts are several times longer than the anchor ones: batches of similar
    lengths spend far fewer padded positions (issue 29). The order depends only on the
    selection, never on the batch size, so a resumed run forms the same batches; the file is
    put back in selection order at the end (:func:`_restore_order`). Left padding with the
    mask's position ids makes a float32 answer independent of its batch, so the order changes
    no answer (``tests/generate``).
    """
    return sorted(selected, key=lambda q: len(build_prompt(q)))


def _restore_order(path: Path, selected: list[Query]) -> None:
    """Rewrite ``path`` atomically in selection order if its rows are out of it.

    Rows are out of order when retried rows were appended late, or when the batches were formed
    by :func:`length_sorted`.
    """
    if not path.is_file():
        return
    rank = {q.query_id: i for i, q in enumerate(selected)}
    rows = [rec for _, rec in iter_jsonl(path, GenerationRecord)]
    keys = [rank[r.query_id] for r in rows]  # type: ignore[union-attr]
    if keys != sorted(keys):
        atomic_write_jsonl(path, sorted(rows, key=lambda r: rank[r.query_id]))  # type: ignore


def _generate_batches(
    batches: list[tuple[list[Query], list[bool]]],
    *,
    backend: GenerationBackend,
    out: JsonlAppender,
    make: Callable[[Query, GenerationOutput], GenerationRecord],
    max_new_tokens: int,
    on_batch: Callable[[int, list[GenerationRecord]], None] | None,
) -> Counter:
    """Generate each batch, append its wanted rows durably; returns status counts."""
    from rich.progress import TextColumn

    counts: Counter = Counter()
    recent: deque[GenerationRecord] = deque(maxlen=FAILURE_WINDOW)
    n_tokens, t0 = 0, time.perf_counter()
    total = sum(sum(w) for _, w in batches)
    with progress_bar(TextColumn("{task.fields[tok_s]} tok/s")) as progress, \
            batch_outputs(backend, [[build_prompt(q) for q in b] for b, _ in batches],
                          max_new_tokens) as results:
        task = progress.add_task("generate", total=total, tok_s="-")
        for index, ((batch, wanted), outputs) in enumerate(zip(batches, results,
                                                                strict=True)):
            if len(outputs) != len(batch):
                raise RuntimeError(f"backend {backend.name} returned {len(outputs)} outputs "
                                   f"for {len(batch)} prompts")
            records = [make(q, o) for q, o, w in zip(batch, outputs, wanted, strict=True) if w]
            out.write_batch(records)
            counts.update(r.status for r in records)
            n_tokens += sum(o.n_generated_tokens or 0 for o in outputs)
            rate = n_tokens / max(time.perf_counter() - t0, 1e-9)
            progress.update(task, advance=len(records), tok_s=f"{rate:,.0f}")
            if on_batch is not None:
                on_batch(index, records)
            recent.extend(records)
            failed = [r for r in recent if r.status != "ok"]
            if len(recent) >= FAILURE_MIN_REQUESTS and 2 * len(failed) > len(recent):
                raise _TooManyFailures(counts, f"{len(failed)} of the last {len(recent)} "
                                       f"requests failed (last: {failed[-1].error})")
    return counts


@contextlib.contextmanager
def batch_outputs(backend: GenerationBackend, batches: list[list[str]],
                  max_new_tokens: int) -> Iterator[Iterator[list[GenerationOutput]]]:
    """Each batch of prompts' outputs, in batch order, from ``backend.workers`` threads at once.

    One worker (every backend but an in-process one on a CPU,
    :func:`fks.workers.resolve_workers`): each batch when asked for, as before. More: up to
    ``workers`` batches are in flight inside the backend's :meth:`parallel` context, and their
    outputs still come back in order, so only this thread writes the file and every row is
    written once its batch is done. On an error or an interrupt the batches not started are
    dropped and those running are waited for (at most ``workers`` batches); nothing of theirs
    is written.
    """
    workers = int(getattr(backend, "workers", 1) or 1)

    def run(batch: list[str]) -> list[GenerationOutput]:
        return backend.generate(batch, max_new_tokens=max_new_tokens)

    if workers <= 1 or len(batches) <= 1:
        yield (run(b) for b in batches)
        return
    with getattr(backend, "parallel", contextlib.nullcontext)(), ThreadPoolExecutor(
            workers, thread_name_prefix="fks-generate") as pool:
        pending: deque = deque()
        todo = iter(batches)

        def ordered() -> Iterator[list[GenerationOutput]]:
            for batch in itertools.islice(todo, workers):
                pending.append(pool.submit(run, batch))
            while pending:
                outputs = pending.popleft().result()
                nxt = next(todo, None)
                if nxt is not None:
                    pending.append(pool.submit(run, nxt))
                yield outputs

        try:
            yield ordered()
        finally:
            for future in pending:
                future.cancel()


class _TooManyFailures(Exception):
    """Most recent requests failed: :func:`generate_run` stops instead of going on."""

    def __init__(self, counts: Counter, reason: str) -> None:
        super().__init__(reason)
        self.counts = counts
        self.reason = reason


@locks_run_dir("out_dir", create=True)
def generate_run(
    benchmark: str | Path | Benchmark,
    out_dir: str | Path,
    *,
    model: str,
    model_path: str,
    configs: ConfigSet,
    backend: GenerationBackend,
    families: Sequence[str] | None = None,
    limit: int | None = None,
    shard: tuple[int, int] | None = None,
    batch_size: int = 16,
    retry_errors: bool = False,
    on_batch: Callable[[int, list[GenerationRecord]], None] | None = None,
) -> GenerateSummary:
    """Generate (or resume generating) every selected query of ``benchmark`` into ``out_dir``.

    Args:
        benchmark: a benchmark directory, ``hf[:repo]``, or a loaded :class:`Benchmark`.
        out_dir: the run directory ``RUN`` (a shard writes under ``RUN/shards/shard_i_of_n``).
        model: the model name recorded in every row.
        model_path: where the model came from (recorded in the manifest).
        configs: configs in force (``models.generation`` is the decoding protocol).
        backend: a built backend (:func:`fks.generate.backends.make_backend`).
        families: keep only these condition families (None: all).
        limit: then keep only the first ``limit`` queries.
        shard: ``(i, n)``: then keep only queries of facts in shard ``i`` of ``n``.
        batch_size: prompts per backend call (and per durable append).
        retry_errors: first drop the ``error``/``timeout`` rows already recorded, so they are
            generated again (the file is put back in benchmark order at the end).
        on_batch: called as ``on_batch(batch_index, records)`` after each batch is on disk.

    Raises:
        FksInputError: bad selection, or ``out_dir`` holds a run of a different model, benchmark,
            decoding config, prompt version or selection.
    """
    if batch_size < 1:
        raise FksInputError(f"must be >= 1; found {batch_size}", field="batch_size")
    bench = benchmark if isinstance(benchmark, Benchmark) else load_benchmark(benchmark)
    gen = configs.models.generation
    _seed_everything(gen.seed)
    selected = select_queries(bench.queries, families=families, limit=limit)
    if shard is not None:
        owner = benchmark_shards(bench, shard[1])
        selected = [q for q in selected if owner[q.fact_id] == shard[0]]
    target = shard_dir(Path(out_dir), shard) if shard else Path(out_dir)
    target.mkdir(parents=True, exist_ok=True)
    sections = _run_sections(model=model, model_path=model_path, bench=bench, configs=configs,
                             backend=backend, families=families, limit=limit, shard=shard,
                             n_selected=len(selected))
    old = read_run_manifest(target)
    if "generate" in old["stages"]:  # resuming: it must be the same run
        _check_same_identity(old, sections, target / MANIFEST_NAME,
                             "this run directory holds a different run (use a new --out)",
                             (*IDENTITY_FIELDS, "selection.shard"))
    gen_path = target / GENERATIONS_NAME
    started = _now()
    update_run_manifest(target, sections, stage="generate", stage_info={
        "status": "running", "last_started_at": started, "batch_size": batch_size,
        "started_at": _dig(old, "stages.generate.started_at") or started,
    })
    gen_cfg = sections["generation_config"]

    def make(q: Query, o: GenerationOutput) -> GenerationRecord:
        return make_record(q, o, model=model, generation_config=gen_cfg)

    if retry_errors:
        log.info("dropped %d error/timeout rows to retry them", _drop_failed(gen_path))
    whole = getattr(backend, "regenerate_whole_batches", True)
    try:
        summary, stopped = _generate_into(gen_path, selected, model, batch_size, whole,
                                          backend=backend, make=make,
                                          max_new_tokens=gen.max_new_tokens,
                                          on_batch=on_batch, retry_errors=retry_errors,
                                          target=target)
    except BaseException as exc:  # a full disk, a crash of the backend, Ctrl-C: not "running"
        update_run_manifest(target, stage="generate", stage_info={
            "status": "stopped", "stopped_early": f"{type(exc).__name__}: {exc}"[:500],
            "finished_at": _now()})
        raise
    _finish_manifest(target, summary, stopped=stopped)
    if stopped is not None:
        url = backend.describe().get("url")
        raise FksInputError(
            f"stopped early{f' (server {url})' if url else ''}: {stopped}; "
            f"{summary.n_existing + summary.n_written} of {summary.n_selected} queries are "
            f"recorded in {gen_path}; fix the cause and rerun with --retry-errors",
            field="backend")
    return summary


def _generate_into(gen_path: Path, selected: list[Query], model: str, batch_size: int,
                   whole: bool, *, backend: GenerationBackend,
                   make: Callable[[Query, GenerationOutput], GenerationRecord],
                   max_new_tokens: int, on_batch: Any, retry_errors: bool, target: Path
                   ) -> tuple[GenerateSummary, str | None]:
    """Run the generation pass of :func:`generate_run`: append what is missing."""
    with JsonlAppender(gen_path) as out:
        if out.repaired_bytes:
            log.warning("cut a torn last line (%d bytes) from %s", out.repaired_bytes, gen_path)
        done, counts = _existing_ids(gen_path, {q.query_id: i for i, q in enumerate(selected)},
                                     model)
        n_todo = len(selected) - len(done)
        log.info("%s: %d selected, %d already recorded, %d to generate",
                 target, len(selected), len(done), n_todo)
        stopped = None
        try:
            new_counts = _generate_batches(
                list(_pending_batches(length_sorted(selected) if whole else selected, done,
                                      batch_size, whole=whole)),
                backend=backend, out=out, make=make, max_new_tokens=max_new_tokens,
                on_batch=on_batch)
        except _TooManyFailures as exc:
            new_counts, stopped = exc.counts, exc.reason
    _restore_order(gen_path, selected)  # batches ran by length; the file is in query order
    counts.update(new_counts)
    return GenerateSummary(target, len(selected), len(done), sum(new_counts.values()),
                           dict(counts)), stopped


def _finish_manifest(target: Path, summary: GenerateSummary, stopped: str | None = None
                     ) -> None:
    gen_path = target / GENERATIONS_NAME
    update_run_manifest(target, stage="generate", stage_info={
        "status": "complete" if summary.complete else "incomplete",
        "stopped_early": stopped,  # None clears the reason a resumed run left
        "finished_at": _now(),
        "file": GENERATIONS_NAME,
        "sha256": sha256_file(gen_path) if gen_path.is_file() else None,
        "n_records": summary.n_existing + summary.n_written,
        "n_selected": summary.n_selected,
        "counts_by_status": {s: summary.counts.get(s, 0) for s in ("ok", "error", "timeout")},
    })
    if gen_path.is_file():
        from fks.provenance import record_files

        record_files(target, "generate", {}, [gen_path])


# --------------------------------------------------------------------------------- merge
def find_shards(run_dir: str | Path) -> dict[int, Path]:
    """``{i: folder}`` of ``RUN/shards/shard_i_of_n``; checks one n and no missing shard.

    Raises:
        FksInputError: no shard folder, folders of different ``n``, or missing shards (listed).
    """
    root = Path(run_dir) / "shards"
    found = [(m, p) for p in sorted(root.glob("shard_*_of_*")) if (m := _SHARD_RE.match(p.name))]
    if not found:
        raise FksInputError("no shard folders (shards/shard_i_of_n) to merge", path=root)
    totals = {int(m.group(2)) for m, _ in found}
    if len(totals) != 1:
        raise FksInputError(f"shards of different splits: n = {sorted(totals)}", path=root)
    n = totals.pop()
    shards = {int(m.group(1)): p for m, p in found}
    missing = [i for i in range(1, n + 1) if i not in shards]
    if missing:
        raise FksInputError(
            "missing shard(s) " + ", ".join(f"{i}/{n}" for i in missing), path=root, field="shard")
    return shards


def _listing(ids: list[str], limit: int = 10) -> str:
    more = f" (+{len(ids) - limit} more)" if len(ids) > limit else ""
    return ", ".join(ids[:limit]) + more


def check_shard_records(
    shards: dict[int, Path],
    filename: str,
    model: type[Any] | None,
    expected: Sequence[tuple[str, str]],
    owner: dict[str, int],
    *,
    checksums: dict[int, str | None] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Read ``filename`` of every shard and check each expected query is there exactly once.

    Args:
        shards: ``{i: shard folder}`` (:func:`find_shards`).
        filename: the per-shard file (``generations.jsonl``, ``judged.jsonl``, ...).
        model: the pydantic record type (needs ``query_id``), or None for plain dicts (kept
            exactly as read, so a merged file can be byte-identical to an unsharded one).
        expected: ``(query_id, fact_id)`` of every query the merged file must hold.
        owner: ``{fact_id: shard}`` (:func:`assign_shards`): where each record must be.
        checksums: ``{i: sha256}`` the shard manifests recorded for their file; a file whose
            sha256 differs (changed after its shard finished) is a problem.

    Returns:
        ``({query_id: first record}, problems)``; problems are lines such as
        ``"2 missing: q1, q2"``, ``"1 recorded twice: q3"``, ``"1 in the wrong shard: q4"``.
    """
    want = dict(expected)
    by_id: dict[str, Any] = {}
    doubled: list[str] = []
    unexpected: list[str] = []
    misplaced: list[str] = []
    changed: list[str] = []
    n = len(shards)
    for i, folder in sorted(shards.items()):
        path = folder / filename
        if not path.is_file():
            continue  # all its queries will be reported missing
        recorded = (checksums or {}).get(i)
        if recorded and sha256_file(path) != recorded:
            changed.append(f"{i}/{n}")
        for line, rec in iter_jsonl(path, model):
            qid = rec.get("query_id") if isinstance(rec, dict) else rec.query_id
            if not isinstance(qid, str):
                raise FksInputError("expected a query_id string", path=path, line=line,
                                    field="query_id")
            if qid in by_id:
                doubled.append(qid)
            elif qid not in want:
                unexpected.append(qid)
            elif owner.get(want[qid]) != i:
                misplaced.append(qid)
            by_id.setdefault(qid, rec)
    missing = [qid for qid, _ in expected if qid not in by_id]
    problems = [f"{len(ids)} {what}: {_listing(ids)}" for what, ids in (
        ("missing", missing), ("recorded twice", doubled), ("not selected", unexpected),
        ("in the wrong shard", misplaced)) if ids]
    if changed:
        problems.append(f"{filename} of shard(s) {', '.join(changed)} no longer has the sha256 "
                        "its manifest recorded (changed after the shard finished)")
    return by_id, problems


def identity_problems(
    manifests: dict[int, dict[str, Any]], fields: Sequence[str]
) -> list[str]:
    """One line per dotted field on which a shard's manifest disagrees with shard 1's."""
    first = manifests[min(manifests)]
    n = len(manifests)
    return [f"shard {i}/{n} disagrees with shard 1/{n} on {name}: {_dig(first, name)!r} there, "
            f"{_dig(man, name)!r} here"
            for i, man in sorted(manifests.items()) for name in fields
            if _dig(first, name) != _dig(man, name)]


@dataclass
class _MergePlan:
    """A verified generation merge: the records in order and what the manifest needs."""

    shards: dict[int, Path]
    manifests: dict[int, dict[str, Any]]
    expected: list[Query]
    owner: dict[str, int]
    by_id: dict[str, Any]


def _plan_merge(run_dir: Path, benchmark: str | Path | None) -> tuple[_MergePlan | None, list[str]]:
    """Check the generation shards of ``run_dir``; returns ``(plan, [])`` or ``(None, problems)``.

    Raises:
        FksInputError: no shard folders, mixed splits or missing shard folders (listed), a
            shard without a generation manifest, or a benchmark that is not the shards' one.
    """
    shards = find_shards(run_dir)
    n = len(shards)
    manifests = {i: read_run_manifest(p) for i, p in shards.items()}
    for i, man in manifests.items():
        if "generate" not in man["stages"]:
            raise FksInputError("shard has no run manifest", path=shards[i] / MANIFEST_NAME)
    problems = identity_problems(manifests, IDENTITY_FIELDS)
    if problems:
        return None, problems
    first = manifests[1]
    bench = load_benchmark(benchmark or first["benchmark"]["path"])
    if bench.checksum() != first["benchmark"]["checksum"]:
        raise FksInputError("benchmark checksum differs from the one the shards ran on",
                            path=bench.root, field="benchmark.checksum")
    sel = first["selection"]
    expected = select_queries(bench.queries, families=sel["families"], limit=sel["limit"])
    owner = benchmark_shards(bench, n)
    sums = {i: m["stages"]["generate"].get("sha256") for i, m in manifests.items()
            if m["stages"]["generate"].get("status") == "complete"}
    by_id, problems = check_shard_records(
        shards, GENERATIONS_NAME, GenerationRecord,
        [(q.query_id, q.fact_id) for q in expected], owner, checksums=sums)
    if problems:
        return None, problems
    return _MergePlan(shards, manifests, expected, owner, by_id), []


def shard_merge_problems(run_dir: str | Path, *, benchmark: str | Path | None = None
                         ) -> list[str]:
    """Everything :func:`merge_shards` would refuse, one line each (empty: it would merge)."""
    try:
        return _plan_merge(Path(run_dir), benchmark)[1]
    except FksInputError as exc:
        return [exc.one_line()]


def merge_shards(run_dir: str | Path, *, benchmark: str | Path | None = None) -> GenerateSummary:
    """Join ``RUN/shards/shard_i_of_n/generations.jsonl`` into ``RUN/generations.jsonl``.

    Checks: every shard 1..n present; their manifests agree on :data:`IDENTITY_FIELDS`; the
    benchmark (``benchmark`` or the path in the shard manifests) has the recorded checksum;
    every selected query is recorded exactly once, in the shard its fact is dealt to
    (:func:`assign_shards`); every shard file has the sha256 its manifest recorded. The output
    is in benchmark order, written atomically, with a merged manifest.

    Raises:
        FksInputError: a missing shard, disagreeing manifests, or missing / doubled / unexpected
            / misplaced records or changed files (all listed).
    """
    run_dir = Path(run_dir)
    plan, problems = _plan_merge(run_dir, benchmark)
    if plan is None:
        raise FksInputError("cannot merge shards: " + "; ".join(problems),
                            path=run_dir / "shards", field="query_id")
    n, first = len(plan.shards), plan.manifests[1]
    records = [plan.by_id[q.query_id] for q in plan.expected]
    atomic_write_jsonl(run_dir / GENERATIONS_NAME, records)
    counts = Counter(r.status for r in records)
    sections = {k: v for k, v in first.items() if k != "stages"}
    sections["selection"] = {**first["selection"], "shard": None,
                             "n_selected": len(plan.expected), "merged_from_shards": n}
    update_run_manifest(run_dir, sections, stage="generate", stage_info={
        "merged_at": _now(),
        "shards": [{"shard": f"{i}/{n}", "sha256": plan.manifests[i]["stages"]["generate"]
                    .get("sha256"), "n_records": sum(
                        1 for q in plan.expected if plan.owner[q.fact_id] == i)}
                   for i in sorted(plan.shards)],
    })
    summary = GenerateSummary(run_dir, len(plan.expected), 0, len(records), dict(counts))
    _finish_manifest(run_dir, summary)
    return summary
