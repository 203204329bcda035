"""``fks extract``: query-end hidden states of every main-forward query (spec §2.4, §7.2, §15).

The prompt is exactly the one generation saw: :func:`fks.generate.prompts.build_prompt` for the
string and :func:`fks.generate.prompts.encode_prompt` for the token ids (the same special tokens
and the same cut to ``max_prompt_len``). Position ids follow the attention mask as in
``generate``, so a prompt's states do not depend on the padding side or on its batch (up to
floating-point summation order).

Which queries: those whose own ``use_for_main_forward`` is true; with ``reverse=True`` /
``recognition=True`` also those whose ``use_for_reverse_analysis`` /
``use_for_recognition_analysis`` is true. Rows keep the benchmark file order; the forward
passes run in batches of similar length (longest first) to waste little on padding.

The work is resumable (:class:`fks.hidden.store.HiddenWriter`) and shows a progress bar.

Sharding (``shard=(i, n)``, ``fks extract --shard i/n``): only the queries of the facts that
:func:`fks.generate.runner.assign_shards` deals to shard ``i`` (the rule every stage uses), stored
in ``RUN/shards/shard_i_of_n/hidden/``; ``fks merge RUN`` joins the shards into ``RUN/hidden/``.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fks.data.load import Benchmark
from fks.data.schema import Query
from fks.errors import FksInputError
from fks.generate.manifest import update_run_manifest
from fks.generate.prompts import PROMPT_VERSION, build_prompt, encode_prompt
from fks.hidden.capture import (
    CaptureComplete,
    QueryEndCapture,
    last_logits_kwargs,
    mask_position_ids,
    model_dims,
)
from fks.hidden.store import HIDDEN_DIR, HiddenStore, HiddenWriter, check_index, layer_filename
from fks.io import atomic_path, read_json, sha256_file
from fks.log import progress_bar
from fks.runlock import locks_run_dir

__all__ = [
    "select_queries",
    "pad_batch",
    "plan_batches",
    "forward_query_end",
    "ExtractionPlan",
    "plan_extraction",
    "open_writer",
    "extract_hidden",
    "DUPLICATE_PASS_NAME",
    "DUPLICATE_SEED",
    "EXTRACTION_VERSION",
    "duplicate_pass",
]

#: bump whenever a change to the extraction code could change a stored number: it is part of
#: the reference pool's cache key (:mod:`fks.hidden.pool_cache`), so no pool from older code
#: is reused
EXTRACTION_VERSION = 1

#: the §18.2 second forward pass of a sample of main queries (``RUN/hidden/``)
DUPLICATE_PASS_NAME = "duplicate_pass.npz"
DUPLICATE_SEED = 20260101

log = logging.getLogger(__name__)


def select_queries(
    queries: Sequence[Query], *, reverse: bool = False, recognition: bool = False
) -> list[Query]:
    """Select the queries to store, in file order, by each query's own booleans.

    Main-forward always, reverse / recognition analysis when asked; never by family name.
    """
    return [
        q for q in queries
        if q.use_for_main_forward
        or (reverse and q.use_for_reverse_analysis)
        or (recognition and q.use_for_recognition_analysis)
    ]


def plan_batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    """Row batches, longest prompts first (stable), so each batch pads little.

    The plan depends only on the lengths and the batch size, so a resumed run replays the
    same batches.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    order = np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def pad_batch(seqs: Sequence[Sequence[int]], pad_id: int, side: str = "left") -> tuple[Any, Any]:
    """Pad token-id lists to ``(batch, max_len)`` ``input_ids`` and ``attention_mask``.

    Args:
        seqs: token ids per prompt.
        pad_id: the id put in padding slots (masked out, so its value is irrelevant).
        side: ``left`` (as generation does) or ``right``.
    """
    import torch

    if side not in ("left", "right"):
        raise ValueError(f"padding side must be left or right, not {side!r}")
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), int(pad_id), dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, seq in enumerate(seqs):
        span = slice(width - len(seq), width) if side == "left" else slice(0, len(seq))
        ids[row, span] = torch.tensor(list(seq), dtype=torch.long)
        mask[row, span] = 1
    return ids, mask


def forward_query_end(
    model: Any, capture: QueryEndCapture, input_ids: Any, attention_mask: Any
) -> dict[int, np.ndarray]:
    """One forward pass; the captured layers at each row's last real token.

    A capture made with ``stop_early`` ends the pass after its highest layer
    (:class:`~fks.hidden.capture.CaptureComplete`); the states are the same.

    Returns:
        ``{layer: (batch, d) float32 array}``.
    """
    import torch

    device = next(model.parameters()).device
    input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
    with torch.inference_mode():
        capture.arm()
        try:
            model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=mask_position_ids(attention_mask),
                use_cache=False,
                **last_logits_kwargs(model),
            )
        except CaptureComplete:
            pass
        states = capture.take()
    return {layer: t.float().cpu().numpy() for layer, t in states.items()}


def _index_row(q: Query, n_tokens: int, truncated: bool) -> dict[str, Any]:
    return {
        "query_id": q.query_id,
        "fact_id": q.fact_id,
        "relation": q.relation,
        "condition_family": q.condition_family,
        "language": q.language,
        "use_for_main_forward": q.use_for_main_forward,
        "use_for_reverse_analysis": q.use_for_reverse_analysis,
        "use_for_recognition_analysis": q.use_for_recognition_analysis,
        "answer_in_subject_surface": q.answer_in_subject_surface,
        "n_prompt_tokens": n_tokens,
        "prompt_truncated": truncated,
    }


def _check_complete(store_dir: Path, identity: dict[str, Any], rows: list[dict]) -> dict | None:
    """Return the existing complete store's meta when it matches; raise when it differs."""
    meta_path = store_dir / "meta.json"
    if not meta_path.is_file():
        return None
    meta = read_json(meta_path)
    check_index(store_dir / "index.jsonl", rows)  # names the first query id that differs
    for key, want in identity.items():
        if meta.get(key) != want:
            raise FksInputError(
                f"the existing hidden store was made with {key}={meta.get(key)!r}, this run asks "
                f"for {want!r}; pass --overwrite to replace it", path=meta_path, field=key)
    return meta


def _clear_store(store_dir: Path) -> None:
    for name in ("meta.json", "progress.json", "index.jsonl", DUPLICATE_PASS_NAME):
        (store_dir / name).unlink(missing_ok=True)
    for path in store_dir.glob("layer_*.npy"):
        path.unlink()


@dataclass
class ExtractionPlan:
    """What one extraction stores: the queries, their token ids, index rows and identity."""

    queries: list[Query]
    encoded: list[tuple[list[int], bool]]
    rows: list[dict[str, Any]]
    layers: list[int]
    d_model: int
    identity: dict[str, Any]


def plan_extraction(
    benchmark: Benchmark,
    model: Any,
    tokenizer: Any,
    *,
    model_name: str,
    layers: Sequence[int] | None = None,
    reverse: bool = False,
    recognition: bool = False,
    max_prompt_len: int = 192,
    shard: tuple[int, int] | None = None,
) -> ExtractionPlan:
    """Select and tokenise the queries to store and fix the store's identity.

    ``shard=(i, n)`` keeps the queries of the facts dealt to shard ``i`` (the identity then
    records the shard).

    Raises:
        FksInputError: no query to store, or a layer out of range.
    """
    n_layers, d_model = model_dims(model)
    layers = list(range(n_layers)) if layers is None else sorted({int(x) for x in layers})
    bad = [x for x in layers if not 0 <= x < n_layers]
    if bad:
        raise FksInputError(f"layer {bad[0]} is outside 0..{n_layers - 1}", field="layers")
    selected = select_queries(benchmark.queries, reverse=reverse, recognition=recognition)
    if shard is not None and selected:
        from fks.generate.runner import benchmark_shards

        owner = benchmark_shards(benchmark, shard[1])
        selected = [q for q in selected if owner[q.fact_id] == shard[0]]
        if not selected:
            raise FksInputError(f"shard {shard[0]}/{shard[1]} holds no query to store (more "
                                "shards than facts?)", field="shard")
    if not selected:
        raise FksInputError("no query has use_for_main_forward set", path=benchmark.files.queries,
                            field="use_for_main_forward")
    encoded = [encode_prompt(tokenizer, build_prompt(q), max_prompt_len) for q in selected]
    rows = [_index_row(q, len(ids), cut) for q, (ids, cut) in zip(selected, encoded, strict=True)]
    identity = {
        "model": model_name,
        "n_layers": n_layers,
        "d_model": d_model,
        "layers": layers,
        "prompt_version": PROMPT_VERSION,
        "max_prompt_len": max_prompt_len,
        "selection": {"main_forward": True, "reverse": reverse, "recognition": recognition},
        "benchmark_checksum": benchmark.checksum(),
    }
    if shard is not None:
        identity["shard"] = list(shard)
    return ExtractionPlan(selected, encoded, rows, layers, d_model, identity)


def open_writer(
    run_dir: str | Path, plan: ExtractionPlan, *, overwrite: bool = False
) -> HiddenWriter | dict[str, Any]:
    """Open a writer for ``plan`` (resuming an unfinished store).

    Returns:
        the writer, or the ``meta.json`` of a complete store that already matches ``plan``.

    Raises:
        FksInputError: an existing store (complete or not) for other queries or another identity.
    """
    store_dir = Path(run_dir) / HIDDEN_DIR
    if overwrite:
        _clear_store(store_dir)
    meta = _check_complete(store_dir, plan.identity, plan.rows)
    if meta is not None:
        return meta
    return HiddenWriter(run_dir, plan.rows, plan.layers, plan.d_model, plan.identity)


@locks_run_dir("run_dir")
def extract_hidden(
    run_dir: str | Path,
    benchmark: Benchmark,
    model: Any,
    tokenizer: Any,
    *,
    model_name: str,
    layers: Sequence[int] | None = None,
    reverse: bool = False,
    recognition: bool = False,
    batch_size: int = 16,
    max_prompt_len: int = 192,
    padding_side: str = "left",
    overwrite: bool = False,
    model_info: dict[str, Any] | None = None,
    extra_meta: dict[str, Any] | None = None,
    shard: tuple[int, int] | None = None,
    duplicate_sample: int = 32,
    cache: bool = False,
) -> dict[str, Any]:
    """Write ``RUN/hidden/`` for ``benchmark`` with ``model`` (resumes an unfinished store).

    Args:
        run_dir: the run directory.
        benchmark: the loaded benchmark.
        model: a Hugging Face causal LM (in eval mode, on its device).
        tokenizer: its tokenizer.
        model_name: recorded in ``meta.json`` and the manifest.
        layers: block indices to store (default: all ``L``).
        reverse: also store reverse-analysis queries.
        recognition: also store recognition-analysis queries.
        batch_size: prompts per forward pass.
        max_prompt_len: the protocol's prompt cap (``generation.max_prompt_len``).
        padding_side: ``left`` (as generation) or ``right``; the states are the same.
        overwrite: discard an existing store (complete or not) first.
        model_info: extra identity for the manifest (path, hashes, dtype, device).
        extra_meta: more fields for ``meta.json``.
        shard: ``(i, n)``: only shard ``i``'s queries, into ``RUN/shards/shard_i_of_n/hidden/``
            (the shard folder's manifest gets ``stages.extract``).
        duplicate_sample: main queries re-extracted by a second forward pass for the §18.2
            duplicate-query check (:func:`duplicate_pass`; 0: none).
        cache: take the store from the cache across runs when a whole one with the same key
            is there, and put a store extracted here into it (the reference pool,
            :mod:`fks.hidden.pool_cache`; ``FKS_REFERENCE_CACHE=0`` turns it off).

    Returns:
        the store's ``meta.json`` content.

    Raises:
        FksInputError: no query to store, a layer out of range, or an existing store for a
            different model/benchmark/selection (names the query id or field).
    """
    from fks.provenance import bind_weights, check_benchmark, record_files

    started = time.perf_counter()
    info = model_info or {}
    # one model and one benchmark per run (fks.provenance), whatever called this
    bind_weights(run_dir, info.get("weights_sha256"), stage="extract",
                 model_path=info.get("model_path"))
    check_benchmark(run_dir, benchmark.checksum(), benchmark.root)
    plan = plan_extraction(benchmark, model, tokenizer, model_name=model_name, layers=layers,
                           reverse=reverse, recognition=recognition,
                           max_prompt_len=max_prompt_len, shard=shard)
    if shard is not None:
        from fks.generate.runner import shard_dir

        run_dir = shard_dir(Path(run_dir), shard)
    _check_store_weights(Path(run_dir), info.get("weights_sha256"), overwrite=overwrite)
    key = _cache_key(plan, info, batch_size, padding_side) if cache else None
    cached = _restore_cached(Path(run_dir), plan, info, model_name, key, overwrite=overwrite)
    writer = open_writer(run_dir, plan, overwrite=overwrite and cached is None)
    if not isinstance(writer, HiddenWriter):
        if cached is not None:
            update_run_manifest(run_dir, stage="extract", stage_info=_stage_info(
                plan, model_name, info, Path(run_dir), rows_from_this_pass=0, started=started,
                from_cache=str(cached.parent), cache_key=key))
        else:
            log.info("hidden store in %s is already complete (%d rows)", run_dir,
                     len(plan.rows))
        if duplicate_sample and not (Path(run_dir) / HIDDEN_DIR / DUPLICATE_PASS_NAME).is_file():
            duplicate_pass(run_dir, plan, model, n=duplicate_sample)
        record_files(run_dir, "extract", {})
        return writer
    n_before = writer.n_done
    if n_before:
        log.info("resuming extraction: %d of %d rows already written", n_before, len(plan.rows))
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    with QueryEndCapture(model, plan.layers, stop_early=True) as capture, progress_bar() as bar:
        task = bar.add_task("extract", total=len(plan.rows), completed=n_before)
        for batch in plan_batches([len(ids) for ids, _ in plan.encoded], batch_size):
            if writer.done[batch].all():
                continue
            ids, mask = pad_batch([plan.encoded[i][0] for i in batch], pad_id, padding_side)
            writer.write(batch, forward_query_end(model, capture, ids, mask))
            bar.update(task, completed=writer.n_done)
    meta = writer.finalize({"padding_side": padding_side, "model_info": model_info or {},
                            **(extra_meta or {})})
    store_dir = Path(run_dir) / HIDDEN_DIR
    if duplicate_sample:
        duplicate_pass(run_dir, plan, model, n=duplicate_sample)
    if key is not None and n_before == 0:  # a resumed store may mix two processes' batches
        from fks.hidden.pool_cache import publish_pool

        publish_pool(store_dir, model_name, key, {"n_rows": len(plan.rows),
                                                  "layers": plan.layers,
                                                  "benchmark_checksum":
                                                      plan.identity["benchmark_checksum"]})
    update_run_manifest(run_dir, stage="extract", stage_info=_stage_info(
        plan, model_name, info, Path(run_dir), rows_from_this_pass=len(plan.rows) - n_before,
        started=started, **({"cache_key": key} if key else {})))
    record_files(run_dir, "extract", {})
    log.info("wrote %d query-end states x %d layers to %s", len(plan.rows), len(plan.layers),
             store_dir)
    return meta


def _stage_info(plan: ExtractionPlan, model_name: str, model_info: dict[str, Any],
                run_dir: Path, *, rows_from_this_pass: int, started: float,
                **extra: Any) -> dict[str, Any]:
    """Build the manifest's ``stages.extract`` record of a store written (or restored) here."""
    return {
        "model": model_name,
        "model_info": model_info,
        "n_rows": len(plan.rows),
        "layers": plan.layers,
        "prompt_version": PROMPT_VERSION,
        "meta_sha256": sha256_file(run_dir / HIDDEN_DIR / "meta.json"),
        "files": [layer_filename(x) for x in plan.layers],
        "rows_from_this_pass": rows_from_this_pass,
        "shard": plan.identity.get("shard"),
        "seconds": round(time.perf_counter() - started, 3),
        **extra,
    }


def _cache_key(plan: ExtractionPlan, info: dict[str, Any], batch_size: int,
               padding_side: str) -> str | None:
    from fks.hidden.pool_cache import cache_enabled, pool_key

    if not cache_enabled():
        return None
    return pool_key(plan.identity, [ids for ids, _ in plan.encoded], info,
                    batch_size=batch_size, padding_side=padding_side,
                    extraction_version=EXTRACTION_VERSION)


def _restore_cached(run_dir: Path, plan: ExtractionPlan, info: dict[str, Any],
                    model_name: str, key: str | None, *, overwrite: bool) -> Path | None:
    """Put the cached store for ``key`` in ``RUN/hidden/`` when the run needs one.

    Only when the run has no complete store, or is told to replace it (``overwrite``); a
    complete store the run already holds is kept as it is. Returns the cached store used.
    """
    from fks.hidden.pool_cache import cached_pool, drop_pool, restore_pool

    store_dir = run_dir / HIDDEN_DIR
    if key is None or ((store_dir / "meta.json").is_file() and not overwrite):
        return None
    cached = cached_pool(model_name, key, plan.identity, info["weights_sha256"])
    if cached is None:
        return None
    try:
        restore_pool(cached, store_dir)
    except OSError as exc:  # a full disk, or another process replacing the cached folder
        log.warning("could not take the reference pool from the cache %s (%s); extracting it",
                    cached.parent, exc)
        return None
    try:  # the files as linked in: shapes, dtypes, every sha256 (the index: open_writer)
        HiddenStore(run_dir).validate(checksums=True)
    except (FksInputError, OSError) as exc:
        log.warning("the cached reference pool in %s is damaged (%s); dropping it and "
                    "extracting the pool", cached.parent, exc)
        shutil.rmtree(store_dir, ignore_errors=True)
        drop_pool(cached)
        return None
    log.info("reference pool: %d rows taken from the cache %s (key %s...)", len(plan.rows),
             cached.parent, key[:16])
    return cached


def _check_store_weights(run_dir: Path, loaded: str | None, *, overwrite: bool) -> None:
    """Refuse to resume or keep a hidden store that other weights wrote.

    The store's weights are ``meta.json``'s ``model_info.weights_sha256``; ``overwrite``
    discards the store instead.
    """
    meta_path = run_dir / HIDDEN_DIR / "meta.json"
    if overwrite or not loaded or not meta_path.is_file():
        return
    meta = read_json(meta_path)
    stored = ((meta.get("model_info") or {}) if isinstance(meta, dict) else {}).get(
        "weights_sha256")
    if stored and stored != loaded:
        raise FksInputError(f"this hidden store was written with weights {stored[:12]}..., "
                            f"not the loaded {loaded[:12]}...; pass --overwrite to replace it "
                            "(or use the model that wrote it)", path=meta_path,
                            field="model_info.weights_sha256")


def duplicate_pass(run_dir: str | Path, plan: ExtractionPlan, model: Any, *, n: int,
                   seed: int = DUPLICATE_SEED) -> Path:
    """Re-extract ``n`` main queries with a fresh forward pass each (spec §18.2).

    The queries are drawn with ``numpy.random.default_rng([seed, 18])`` among the plan's
    main-forward rows; each gets its own forward pass (batch of one, no padding: another
    batch composition than the main extraction), on exactly the prompt the store holds. The
    states are kept in float32 in ``RUN/hidden/duplicate_pass.npz`` (plain arrays: ``rows``,
    ``query_ids``, ``compute_dtype`` and one ``layer_{l:03d}`` of shape ``(n, d)`` per stored
    layer), which the duplicate-query check compares with the float16 store.
    """
    main = np.array([k for k, r in enumerate(plan.rows) if r["use_for_main_forward"]],
                    dtype=np.int64)
    rng = np.random.default_rng([seed, 18])
    rows = np.sort(rng.choice(main, size=min(n, len(main)), replace=False)) if len(main) \
        else main
    out: dict[str, list[np.ndarray]] = {layer: [] for layer in plan.layers}
    with QueryEndCapture(model, plan.layers, stop_early=True) as capture:
        for k in rows.tolist():
            ids, mask = pad_batch([plan.encoded[k][0]], 0, "right")
            for layer, x in forward_query_end(model, capture, ids, mask).items():
                out[layer].append(x[0])
    try:
        dtype = str(next(model.parameters()).dtype).replace("torch.", "")
    except (StopIteration, AttributeError):  # pragma: no cover - a model without parameters
        dtype = "float32"
    d = plan.d_model
    arrays = {layer_filename(layer).removesuffix(".npy"):
              np.stack(v).astype(np.float32) if v else np.zeros((0, d), np.float32)
              for layer, v in out.items()}
    path = Path(run_dir) / HIDDEN_DIR / DUPLICATE_PASS_NAME
    with atomic_path(path, suffix=".npz") as tmp, open(tmp, "wb") as fh:
        np.savez(fh, rows=rows, compute_dtype=np.array(dtype),
                 query_ids=np.array([plan.rows[k]["query_id"] for k in rows.tolist()], dtype=str),
                 **arrays)
    log.info("second forward pass of %d main queries (duplicate-query check) -> %s",
             len(rows), path)
    return path
