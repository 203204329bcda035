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

**Shared prompt prefixes** (``share_prefixes``, default :data:`SHARE_PREFIXES`; ``fks extract
--share-prefixes 0`` turns it off). Prompts of one template start alike ("Answer the following
question ...", "The capital of"). A token's keys and values depend only on the tokens up to it
(causal attention), so a prefix that at least ``share_prefixes`` prompts start with is forwarded
once (:func:`prefix_keys_values`), and each of those prompts forwards only its remaining tokens,
attending to the prefix's cached keys and values at their own positions
(:func:`forward_suffix_query_end`). Over the full build's main queries, Gemma 3 270M forwards
72.5 % of the prompt tokens. The states are the whole prompt's up to summation order: in float32
within about 1e-6 relative (tested on tiny models; 1.1e-6 on 300 Gemma rows), in bfloat16 at the
rounding level (``bench_real_models.py prefixes``, the first 6,000 pool rows: the cosine to the
whole-prompt state is at least 0.9995 for Gemma 3 270M and 0.9986 for SmolLM2-135M, mean 1 - cos
1.4e-5 and 7.8e-5, where batch 1 against batch 64 gives 2.5e-6 and 1.3e-5; §18.2 allows
2.2e-3 and 3.7e-3 at their last layers). A model with a sliding window that a prefix could reach
forwards every prompt whole. The store's ``meta.json`` records the setting (``share_prefixes``:
0 when whole) and the reference pool's cache key includes it.

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
    cache_kwarg,
    decoder_blocks,
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
    "extract_with_pool",
    "DUPLICATE_PASS_NAME",
    "DUPLICATE_SEED",
    "EXTRACTION_VERSION",
    "duplicate_pass",
    "SHARE_PREFIXES",
    "PrefixPlan",
    "plan_prefixes",
    "ExtractionStep",
    "plan_steps",
    "prefix_keys_values",
    "shared_keys_values",
    "forward_suffix_query_end",
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


#: default of ``share_prefixes``: a prompt prefix is computed once for the prompts that share
#: it when at least this many do (0: every prompt is forwarded whole). 4 minimises the token
#: positions forwarded over the full build's main queries: 72.5 % of them for Gemma 3 270M's
#: reference pool (2: 73.6 %, 8: 75.2 %, 64: 78.8 %; :func:`plan_prefixes` over its token ids).
SHARE_PREFIXES = 4
#: how many times prefixes are shared in turn (:func:`plan_prefixes`' ``levels``)
PREFIX_LEVELS = 1


@dataclass(frozen=True)
class PrefixPlan:
    """Which rows take their first tokens' keys and values from a shared prefix pass.

    ``split[k]`` is the length of row ``k``'s shared prefix (0: none, the row is forwarded
    whole) and ``prefix_of[k]`` its index in ``prefixes`` (-1: none). A row always keeps at
    least its last token to forward, where its state is read. ``sub`` is the same plan over
    ``prefixes`` themselves (a prefix that starts like other prefixes forwards only its own
    end), or None.
    """

    split: np.ndarray
    prefix_of: np.ndarray
    prefixes: list[tuple[int, ...]]
    sub: PrefixPlan | None = None

    @property
    def saved_tokens(self) -> int:
        """Prompt tokens this plan does not forward (its prefixes' own cost counted)."""
        prefix_cost = sum(len(t) for t in self.prefixes) - (
            self.sub.saved_tokens if self.sub is not None else 0)
        return int(self.split.sum()) - prefix_cost


def plan_prefixes(seqs: Sequence[Sequence[int]], min_share: int, levels: int = 1,
                  counted: Sequence[Sequence[int]] | None = None) -> PrefixPlan:
    """Give each prompt the longest proper prefix that at least ``min_share`` prompts share.

    Causal attention makes a token's keys and values depend on the tokens up to it alone, so a
    prefix forwarded once serves every prompt that starts with it; only the rest of each prompt
    is forwarded, attending to the prefix's cached keys and values. With ``levels`` > 1 the
    prefixes are planned the same way among themselves (:attr:`PrefixPlan.sub`). The plan
    depends only on the token ids and its arguments, so a resumed run replays it.

    Args:
        seqs: the prompts' token ids.
        min_share: prompts that must share a prefix for it to be computed once (< 2: none).
        levels: how many times prefixes are shared in turn (1: prompts only).
        counted: the prompts whose prefixes are counted (default ``seqs``): a shard's rows
            take the prefixes the whole selection gives them.
    """
    from collections import Counter

    n = len(seqs)
    split = np.zeros(n, dtype=np.int64)
    prefix_of = np.full(n, -1, dtype=np.int64)
    if min_share < 2 or levels < 1:
        return PrefixPlan(split, prefix_of, [])
    tuples = [tuple(int(t) for t in s) for s in seqs]
    pool = tuples if counted is None else [tuple(int(t) for t in s) for s in counted]
    counts = Counter(t[:i] for t in pool for i in range(1, len(t)))
    index: dict[tuple[int, ...], int] = {}
    for k, t in enumerate(tuples):
        for i in range(len(t) - 1, 0, -1):
            if counts[t[:i]] >= min_share:
                split[k] = i
                prefix_of[k] = index.setdefault(t[:i], len(index))
                break
    prefixes = list(index)
    sub = plan_prefixes(prefixes, min_share, levels - 1) if levels > 1 and prefixes else None
    return PrefixPlan(split, prefix_of, prefixes,
                      sub if sub is not None and sub.split.any() else None)


def _cache_layers(cache: Any) -> list[tuple[Any, Any]]:
    """Return the ``(keys, values)`` of each layer of a ``DynamicCache`` (4.x and 5.x)."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        return [(getattr(layer, "keys", None), getattr(layer, "values", None))
                for layer in layers]
    return list(zip(cache.key_cache, cache.value_cache, strict=True))  # transformers < 4.56


def _new_cache(model: Any, kv: list[tuple[Any, Any]] | None = None) -> Any:
    """Make a ``DynamicCache`` for ``model``, holding ``kv`` (per layer) when given."""
    from transformers import DynamicCache

    try:
        cache = DynamicCache(config=model.config)
    except TypeError:  # transformers < 4.56
        cache = DynamicCache()
    for layer, (keys, values) in enumerate(kv or []):
        cache.update(keys, values, layer)
    return cache


def prefix_keys_values(model: Any, ids: Any, upto: int | None = None,
                       past: list[tuple[Any, Any]] | None = None) -> list[tuple[Any, Any]]:
    """Forward equal-length token rows ``(n, t)`` once; each layer's cached ``(keys, values)``.

    The decoder runs without the LM head and without padding (the rows have one length).
    ``past``: per layer, the ``(n, heads, q, head_dim)`` keys and values of tokens before
    ``ids`` (a shorter shared prefix); the result then covers all ``q + t`` positions. With
    ``upto``, the pass ends after block ``upto`` (the highest stored layer: the pass that uses
    these keys ends there too), and the layers above get zeros of the same shape, which only
    size the attention mask and are never read.
    """
    import torch

    decoder = model.get_decoder() if callable(getattr(model, "get_decoder", None)) else model
    device = next(model.parameters()).device
    ids = ids.to(device)
    q = int(past[0][0].shape[2]) if past else 0
    cache = _new_cache(model, past)
    blocks = decoder_blocks(model)
    top = len(blocks) - 1 if upto is None else int(upto)

    def stop(*_: Any) -> None:
        raise CaptureComplete

    handle = blocks[top].register_forward_hook(stop) if top < len(blocks) - 1 else None
    try:
        with torch.inference_mode():
            decoder(input_ids=ids,
                    attention_mask=torch.ones((ids.shape[0], q + ids.shape[1]), dtype=torch.long,
                                              device=device),
                    position_ids=q + torch.arange(ids.shape[1], device=device).expand_as(ids),
                    use_cache=True, **{cache_kwarg(decoder): cache})
    except CaptureComplete:
        pass
    finally:
        if handle is not None:
            handle.remove()
    kv = _cache_layers(cache)[:top + 1]
    keys, values = kv[-1]
    return kv + [(keys.new_zeros(()).expand_as(keys), values.new_zeros(()).expand_as(values))
                 ] * (len(blocks) - len(kv))


def shared_keys_values(model: Any, plan: PrefixPlan, index: np.ndarray,
                       upto: int | None = None) -> list[tuple[Any, Any]]:
    """Compute the keys and values of ``plan.prefixes[index]`` (one length), each once.

    A prefix with a shorter shared prefix of its own (``plan.sub``) forwards only its end after
    that one's keys and values (recursively); the others are forwarded whole.
    """
    import torch

    index = np.asarray(index, dtype=np.int64)
    seqs = plan.prefixes
    sub = plan.sub
    split = sub.split[index] if sub is not None else np.zeros(len(index), dtype=np.int64)
    parts: list[tuple[np.ndarray, list[tuple[Any, Any]]]] = []
    for q in sorted(set(split.tolist())):
        sel = np.flatnonzero(split == q)
        if q == 0:
            parts.append((sel, prefix_keys_values(
                model, torch.tensor([seqs[i] for i in index[sel]], dtype=torch.long), upto)))
            continue
        assert sub is not None
        owners = sub.prefix_of[index[sel]]
        below = np.unique(owners)
        past = shared_keys_values(model, sub, below, upto)
        at = torch.as_tensor(np.searchsorted(below, owners), device=past[0][0].device)
        parts.append((sel, prefix_keys_values(
            model, torch.tensor([seqs[i][q:] for i in index[sel]], dtype=torch.long), upto,
            past=[(k[at], v[at]) for k, v in past])))
    if len(parts) == 1:
        return parts[0][1]
    order = torch.as_tensor(np.argsort(np.concatenate([sel for sel, _ in parts]),
                                       kind="stable"), device=parts[0][1][0][0].device)
    return [(torch.cat([kv[layer][0] for _, kv in parts])[order],
             torch.cat([kv[layer][1] for _, kv in parts])[order])
            for layer in range(len(parts[0][1]))]


def forward_suffix_query_end(
    model: Any, capture: QueryEndCapture, kv: list[tuple[Any, Any]], input_ids: Any,
    attention_mask: Any
) -> dict[int, np.ndarray]:
    """One forward pass of prompt ends after a cached prefix; the captured query-end states.

    Args:
        model: the causal LM.
        capture: the query-end capture on ``model`` (armed here with the rows' positions).
        kv: per layer, the ``(batch, heads, p, head_dim)`` keys and values of each row's prefix
            (all of length ``p``).
        input_ids: ``(batch, s)`` the rows' remaining tokens, **right**-padded, so the prefix
            and the tokens after it sit at their own positions with no gap between them.
        attention_mask: ``(batch, s)`` for ``input_ids``.

    Returns:
        ``{layer: (batch, d) float32 array}`` at each row's last real token.
    """
    import torch

    device = next(model.parameters()).device
    input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
    p = int(kv[0][0].shape[2])
    cache = _new_cache(model, kv)
    mask = torch.cat([torch.ones((input_ids.shape[0], p), dtype=attention_mask.dtype,
                                 device=device), attention_mask], dim=1)
    positions = p + torch.arange(input_ids.shape[1], device=device).expand_as(input_ids)
    with torch.inference_mode():
        capture.arm(positions=attention_mask.sum(dim=1) - 1)
        try:
            model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                  use_cache=True, **{cache_kwarg(model): cache}, **last_logits_kwargs(model))
        except CaptureComplete:
            pass
        states = capture.take()
    return {layer: t.float().cpu().numpy() for layer, t in states.items()}


#: a chunk of shared prefixes forwarded together holds at most this many prefix tokens (it
#: bounds the cached keys and values held at once: 8,192 tokens x 18 layers are 150 MB for
#: Gemma 3 270M in bf16)
PREFIX_CHUNK_TOKENS = 8192


@dataclass(frozen=True)
class ExtractionStep:
    """One unit of the extraction's schedule (:func:`plan_steps`).

    ``prefix_len == 0``: each of ``batches`` is forwarded whole. Otherwise ``prefixes`` (indices
    into the :class:`PrefixPlan`'s, all of length ``prefix_len``) are forwarded once, then each
    batch's remaining tokens after its rows' prefixes.
    """

    prefix_len: int
    prefixes: np.ndarray
    batches: list[np.ndarray]


def plan_steps(lengths: Sequence[int], batch_size: int,
               prefixes: PrefixPlan | None = None) -> list[ExtractionStep]:
    """Schedule the extraction: rows without a shared prefix, then each prefix length's rows.

    Rows without a shared prefix go in :func:`plan_batches`'s batches. The rest are grouped by
    the length of their prefix; each group's prefixes in chunks of at most
    :data:`PREFIX_CHUNK_TOKENS` tokens, each chunk's rows longest remainder first (stable) in
    batches of ``batch_size``. Depends only on its arguments, so a resumed run replays it.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    split = prefixes.split if prefixes is not None else np.zeros(len(lengths), dtype=np.int64)
    whole = np.flatnonzero(split == 0)
    steps = []
    if len(whole):
        steps.append(ExtractionStep(0, np.zeros(0, dtype=np.int64), [
            whole[b] for b in plan_batches(lengths[whole], batch_size)]))
    for p in sorted(set(split[split > 0].tolist())):
        rows = np.flatnonzero(split == p)
        ids = np.unique(prefixes.prefix_of[rows])  # type: ignore[union-attr]
        per_chunk = max(1, PREFIX_CHUNK_TOKENS // p)
        for start in range(0, len(ids), per_chunk):
            chunk = ids[start:start + per_chunk]
            mine = rows[np.isin(prefixes.prefix_of[rows], chunk)]  # type: ignore[union-attr]
            steps.append(ExtractionStep(p, chunk, [
                mine[b] for b in plan_batches(lengths[mine] - p, batch_size)]))
    return steps


def _sliding_window(model: Any) -> int | None:
    config = getattr(model, "config", None)
    config = getattr(config, "text_config", None) or config
    window = getattr(config, "sliding_window", None)
    return int(window) if isinstance(window, int) and window > 0 else None


def _run_step(model: Any, capture: QueryEndCapture, writer: HiddenWriter, plan: ExtractionPlan,
              prefixes: PrefixPlan | None, step: ExtractionStep, pad_id: int,
              padding_side: str, advance: Any) -> None:
    """Forward one step's batches that are not written yet, and write their states."""
    import torch

    todo = [b for b in step.batches if not writer.done[b].all()]
    if not todo:
        return
    if step.prefix_len == 0:
        for batch in todo:
            ids, mask = pad_batch([plan.encoded[i][0] for i in batch], pad_id, padding_side)
            writer.write(batch, forward_query_end(model, capture, ids, mask))
            advance()
        return
    assert prefixes is not None
    p = step.prefix_len
    kv = shared_keys_values(model, prefixes, step.prefixes, upto=max(plan.layers))
    slot = {int(i): k for k, i in enumerate(step.prefixes)}
    for batch in todo:
        at = torch.tensor([slot[int(prefixes.prefix_of[i])] for i in batch], dtype=torch.long)
        at = at.to(kv[0][0].device)
        ids, mask = pad_batch([plan.encoded[i][0][p:] for i in batch], pad_id, "right")
        writer.write(batch, forward_suffix_query_end(
            model, capture, [(k[at], v[at]) for k, v in kv], ids, mask))
        advance()


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
    #: the token ids whose prefixes are counted for sharing (:func:`plan_prefixes`), when
    #: not the plan's own: a shard counts the whole selection's
    counted: list[list[int]] | None = None


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
    everyone = selected
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
    # a shard shares prefixes as the whole selection does, so merged shards hold the
    # unsharded store's bytes (each row keeps the prefix it has there)
    counted = None if everyone is selected else [
        encode_prompt(tokenizer, build_prompt(q), max_prompt_len)[0] for q in everyone]
    return ExtractionPlan(selected, encoded, rows, layers, d_model, identity, counted)


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
    share_prefixes: int = SHARE_PREFIXES,
    from_store: str | Path | None = None,
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
        share_prefixes: forward a prompt prefix once when at least this many prompts share it
            (the module docstring; 0 or 1: every prompt whole).
        from_store: a run folder whose complete hidden store (the reference pool) holds every
            row of this one, forwarded by the same weights in the same dtype with the same
            prompts and layers: its states are copied instead of forwarded again
            (:func:`_rows_in_store`; anything that does not match: every row is forwarded).

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
    key = _cache_key(plan, info, batch_size, padding_side, share_prefixes) if cache else None
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
    source = _rows_in_store(from_store, plan, info) if from_store is not None else None
    prefixes = _prefix_plan(model, plan, share_prefixes) if source is None else None
    lengths = [len(ids) for ids, _ in plan.encoded]
    with QueryEndCapture(model, plan.layers, stop_early=True) as capture, progress_bar() as bar:
        task = bar.add_task("extract", total=len(plan.rows), completed=n_before)
        if source is not None:
            store, rows = source
            for start in range(0, len(rows), 4096):
                mine = np.arange(start, min(start + 4096, len(rows)))
                writer.write(mine, {x: store.layer(x)[rows[mine]] for x in plan.layers})
                bar.update(task, completed=writer.n_done)
        else:
            for step in plan_steps(lengths, batch_size, prefixes):
                _run_step(model, capture, writer, plan, prefixes, step, pad_id, padding_side,
                          lambda: bar.update(task, completed=writer.n_done))
    if source is not None:
        extra_meta = {**(extra_meta or {}), "states_from": {
            "store": _relative(source[0].dir, Path(run_dir)),
            "meta_sha256": sha256_file(source[0].dir / "meta.json"),
            "share_prefixes": source[0].meta.get("share_prefixes", 0)}}
    recorded_share = (int(source[0].meta.get("share_prefixes", 0) or 0) if source is not None
                      else share_prefixes if prefixes is not None else 0)
    meta = writer.finalize({"padding_side": padding_side, "model_info": model_info or {},
                            # 0 when off, or turned off for this model (a sliding window)
                            "share_prefixes": recorded_share,
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
        plan, model_name, info, Path(run_dir),
        rows_from_this_pass=0 if source is not None else len(plan.rows) - n_before,
        started=started, **({"cache_key": key} if key else {}),
        **({"states_from": extra_meta["states_from"]} if source is not None else {})))
    record_files(run_dir, "extract", {})
    log.info("wrote %d query-end states x %d layers to %s", len(plan.rows), len(plan.layers),
             store_dir)
    return meta


def _relative(path: Path, run_dir: Path) -> str:
    """``path`` relative to the run folder when inside it (a moved run still reads the same)."""
    try:
        return path.resolve().relative_to(run_dir.resolve()).as_posix()
    except ValueError:
        return str(path)


def _rows_in_store(folder: str | Path, plan: ExtractionPlan, info: dict[str, Any]
                   ) -> tuple[HiddenStore, np.ndarray] | None:
    """Find the complete store in ``folder`` and each of ``plan``'s rows in it, or None.

    None (logged) unless that store was written by the same weights (sha256), dtype and
    device, with the same prompt version and cap, holds every layer of the plan, and holds
    each of the plan's queries with the same prompt length. The caller vouches that the
    queries' prompts are the same strings (the pipeline compares them with the parent
    benchmark's).
    """
    try:
        store = HiddenStore(folder)
    except (FksInputError, OSError) as exc:
        log.info("states forwarded: no complete store in %s (%s)", folder, exc)
        return None
    theirs = store.meta.get("model_info") or {}
    why = None
    for key in ("weights_sha256", "dtype", "device"):  # the first difference is reported
        if why is None and (not info.get(key) or theirs.get(key) != info.get(key)):
            why = f"its {key} is {theirs.get(key)!r}, not {info.get(key)!r}"
    for key in ("prompt_version", "max_prompt_len", "model"):
        if why is None and store.meta.get(key) != plan.identity[key]:
            why = f"its {key} is {store.meta.get(key)!r}, not {plan.identity[key]!r}"
    if why is None and not set(plan.layers) <= set(store.layers):
        why = f"it holds layers {store.layers}, not all of {plan.layers}"
    at = {r.query_id: r for r in store.index}
    rows = np.zeros(len(plan.rows), dtype=np.int64)
    for k, row in enumerate(plan.rows):
        rec = at.get(row["query_id"])
        if why is None and (rec is None or rec.n_prompt_tokens != row["n_prompt_tokens"]):
            why = f"{row['query_id']} is not there with the same prompt"
        if rec is not None:
            rows[k] = rec.row
    if why is not None:
        log.info("states forwarded, not taken from %s: %s", store.dir, why)
        return None
    log.info("%d query-end states taken from %s (the same forward passes)", len(rows), store.dir)
    return store, rows


def _prefix_plan(model: Any, plan: ExtractionPlan, share_prefixes: int) -> PrefixPlan | None:
    """Plan the rows' shared prefixes; None when prefixes are not shared (logged)."""
    if share_prefixes < 2:
        return None
    prefixes = plan_prefixes([ids for ids, _ in plan.encoded], share_prefixes, PREFIX_LEVELS,
                             counted=plan.counted)
    window = _sliding_window(model)
    if window is not None and prefixes.split.max(initial=0) >= window - 1:
        # a sliding layer's cache keeps only its last window - 1 tokens
        log.info("prompt prefixes are not shared: a prefix reaches the sliding window (%d)",
                 window)
        return None
    forwarded = sum(len(ids) for ids, _ in plan.encoded) - prefixes.saved_tokens
    log.info("%d prompt prefixes shared by %d of %d rows: %d of %d prompt tokens forwarded",
             len(prefixes.prefixes), int((prefixes.split > 0).sum()), len(plan.rows), forwarded,
             sum(len(ids) for ids, _ in plan.encoded))
    return prefixes


def extract_with_pool(
    run_dir: str | Path,
    benchmark: Benchmark,
    parent: Benchmark,
    model: Any,
    tokenizer: Any,
    *,
    model_name: str,
    layers: Sequence[int],
    pool_layers: Sequence[int],
    batch_size: int = 16,
    max_prompt_len: int = 192,
    overwrite: bool = False,
    model_info: dict[str, Any] | None = None,
    duplicate_sample: int = 32,
    share_prefixes: int = SHARE_PREFIXES,
    reverse: bool = False,
    recognition: bool = False,
    shard: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """Extract the reference pool (``RUN/reference/hidden/``), then copy the run's store out.

    The pool is the parent benchmark's main queries (:mod:`fks.metrics.internal.reference`),
    taken from the cache across runs when it is there (:mod:`fks.hidden.pool_cache`). It
    stores ``layers`` and ``pool_layers`` together, so the run's own main queries -- a subset of
    the parent's -- are copied out of it rather than forwarded a second time: one forward pass
    per query, and a run's states are the same bytes whether its pool was extracted or came
    from the cache. The run's §18.2 second pass is still a fresh forward pass. ``reverse``,
    ``recognition`` and ``shard`` select the run's own rows (:func:`extract_hidden`); rows the
    pool lacks (reverse and recognition queries) make the run's store forwarded as before.

    Raises:
        FksInputError: a main query of ``benchmark`` that the parent lacks or asks
            differently (names the query id), or :func:`extract_hidden`'s errors.
    """
    from fks.hidden.store import REFERENCE_DIR
    from fks.provenance import record_files

    theirs = {q.query_id: q for q in parent.queries if q.use_for_main_forward}
    for q in benchmark.queries:
        if not q.use_for_main_forward:
            continue
        other = theirs.get(q.query_id)
        if other is None or build_prompt(other) != build_prompt(q):
            from fks.data.load import iter_queries

            line = None if other is None else next(  # only on this error: read the file again
                (n for n, row in iter_queries(parent.files) if row.query_id == q.query_id), None)
            raise FksInputError(
                f"{q.query_id} (a main query of the run's benchmark) is "
                + ("not in the reference benchmark" if other is None else
                   "asked differently in the reference benchmark"),
                path=parent.files.queries, line=line, field="query_id")
    log.info("extracting the reference pool (%d facts of the full benchmark) for the ISS/KTS "
             "whitening", len(parent.facts))
    common = {"batch_size": batch_size, "max_prompt_len": max_prompt_len, "overwrite": overwrite,
              "model_info": model_info, "share_prefixes": share_prefixes}
    extract_hidden(Path(run_dir) / REFERENCE_DIR, parent, model, tokenizer,
                   model_name=model_name, layers=sorted({*layers, *pool_layers}),
                   duplicate_sample=0, cache=True, **common)
    meta = extract_hidden(run_dir, benchmark, model, tokenizer, model_name=model_name,
                          layers=layers, duplicate_sample=duplicate_sample,
                          reverse=reverse, recognition=recognition, shard=shard,
                          from_store=Path(run_dir) / REFERENCE_DIR, **common)
    record_files(run_dir, "extract", {})  # the run's extract includes the pool
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
               padding_side: str, share_prefixes: int) -> str | None:
    from fks.hidden.pool_cache import cache_enabled, pool_key

    if not cache_enabled():
        return None
    return pool_key(plan.identity, [ids for ids, _ in plan.encoded], info,
                    batch_size=batch_size, padding_side=padding_side,
                    share_prefixes=share_prefixes, extraction_version=EXTRACTION_VERSION)


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
