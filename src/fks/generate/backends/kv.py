"""A KV cache that grows in place during fks's greedy loop: no copy of the cache per step.

``transformers``' ``DynamicLayer`` appends each step's key and value with ``torch.cat``, so
every decoding step copies the whole cache of every layer: for Gemma 3 270M at batch 64 that
was 14 % of a profiled generation (``aten::cat``). :func:`preallocate` gives each layer of the
prefill's cache a buffer long enough for the whole continuation and binds two methods to the
layer itself (``update``, ``batch_select_indices``): a step writes its key and value into the
buffer and the layer's ``keys``/``values`` become views of the filled part. Attention reads the same
values in the same shape, so the answers and log-probs are the same bits
(``tests/generate/test_hf_backend.py``).

Only layers whose behaviour is "keep everything" are converted: a ``DynamicLayer``, and a
``DynamicSlidingWindowLayer`` whose window the continuation never reaches (then it too keeps
everything). Any other layer (static, quantized, recurrent, a window that would slide) is
left as it is. A step past the buffer (never, given the capacity) hands the layer back to its
own ``update``. ``FKS_KV=cat`` turns this off.
"""

from __future__ import annotations

import logging
import os
import types
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["preallocate", "kv_mode"]


def kv_mode() -> str:
    """``preallocated`` (the default) or ``cat`` (``FKS_KV=cat``: transformers' own layers)."""
    return "cat" if os.environ.get("FKS_KV", "").strip().lower() == "cat" else "preallocated"


def _views(layer: Any) -> None:
    layer.keys = layer._fks_kbuf[..., : layer._fks_n, :]
    layer.values = layer._fks_vbuf[..., : layer._fks_n, :]


def _grow(layer: Any, extra: int) -> None:
    keys, values = layer.keys, layer.values
    n = keys.shape[-2]
    layer._fks_kbuf = keys.new_empty((*keys.shape[:-2], n + extra, keys.shape[-1]))
    layer._fks_vbuf = values.new_empty((*values.shape[:-2], n + extra, values.shape[-1]))
    layer._fks_kbuf[..., :n, :] = keys
    layer._fks_vbuf[..., :n, :] = values
    layer._fks_n = n
    _views(layer)
    layer.update = types.MethodType(_update, layer)
    layer.batch_select_indices = types.MethodType(_batch_select_indices, layer)


def _release(layer: Any) -> None:
    """Hand ``layer`` back to its class's own methods, holding its states contiguous."""
    for name in ("update", "batch_select_indices", "_fks_kbuf", "_fks_vbuf", "_fks_n"):
        layer.__dict__.pop(name, None)
    layer.keys, layer.values = layer.keys.contiguous(), layer.values.contiguous()


def _update(layer: Any, key_states: Any, value_states: Any, *args: Any, **kwargs: Any
            ) -> tuple[Any, Any]:
    """Write a step's key and value into the buffer; the layer's states become views."""
    q = key_states.shape[-2]
    if layer._fks_n + q > layer._fks_kbuf.shape[-2]:  # past the buffer: the layer's own update
        _release(layer)
        return layer.update(key_states, value_states, *args, **kwargs)
    layer._fks_kbuf[..., layer._fks_n:layer._fks_n + q, :] = key_states
    layer._fks_vbuf[..., layer._fks_n:layer._fks_n + q, :] = value_states
    layer._fks_n += q
    if hasattr(layer, "cumulative_length"):  # a sliding layer whose window is never reached
        layer.cumulative_length += q
    _views(layer)
    return layer.keys, layer.values


def _batch_select_indices(layer: Any, indices: Any) -> None:
    layer._fks_kbuf = layer._fks_kbuf[indices, ...]
    layer._fks_vbuf = layer._fks_vbuf[indices, ...]
    _views(layer)


def preallocate(cache: Any, extra: int) -> int:
    """Give each plain dynamic layer of ``cache`` room for ``extra`` more positions.

    Returns:
        the number of layers converted (0: nothing to do, or ``FKS_KV=cat``).
    """
    if kv_mode() == "cat" or extra <= 0:
        return 0
    try:
        from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer
    except ImportError:  # pragma: no cover - transformers before the layered caches
        return 0
    converted = 0
    for layer in getattr(cache, "layers", None) or []:
        kind = type(layer)
        if not getattr(layer, "is_initialized", False) or getattr(layer, "keys", None) is None:
            continue
        if kind is DynamicSlidingWindowLayer:
            if getattr(layer, "record_past", False) or \
                    layer.cumulative_length + extra >= layer.sliding_window:
                continue
            if layer.keys.shape[-2] != layer.cumulative_length:
                continue
        elif kind is not DynamicLayer:
            continue
        _grow(layer, extra)
        converted += 1
    return converted
