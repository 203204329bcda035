"""oneDNN-packed linear weights for bfloat16 models on a CPU: the same bytes, faster (issue 29).

torch computes a bfloat16 ``nn.Linear`` on a CPU with oneDNN, and at every call lays the weight
out in the blocked order oneDNN's kernel reads. :func:`pack_linears` lays each weight out once
(``torch.ops.mkldnn._reorder_linear_weight``, the op inductor's CPU freezing pass uses) and
routes the module's forward through ``torch.ops.mkldnn._linear_pointwise`` on that copy.
Measured on 2 cores with AVX512-BF16 (``bench/bench_real_models.py generate``): Gemma 3
270M's 262,144 x 640 unembedding at 64 rows runs at 352 instead of 280 GFLOP/s, the blocks'
products 5-19 % faster.

**Exact, checked rather than assumed.** Both paths run the same oneDNN kernel on the same
blocked weight, so the output is the same bits. :func:`pack_linears` probes each distinct
weight shape at load, with random inputs of 1, 5, 64 and 160 rows, and packs only the shapes
whose outputs equal ``F.linear``'s bit for bit; any other shape keeps the stock forward (and
the log says so). ``tests/generate/test_packed.py`` checks a model's generations, log-probs
and hidden states against the stock path.

**When.** A model loaded by :class:`~fks.generate.backends.hf.HFBackend` in bfloat16 on a CPU
whose oneDNN has bf16 kernels, without a ``device_map``, and whose linear weights fit in a
quarter of the machine's memory (the packed copies sit beside the originals, which the
embedding, hooks and autograd still read). ``FKS_PACKED=0`` turns it off. The packed forward
is used only for a bfloat16 CPU input with autograd off and the weight untouched since
packing (its version counter, storage and dtype); anything else (J-Lens's gradients, a model
cast to float32, a weight edited in place) goes through ``F.linear`` on the live weight.
Recorded as ``kernels.linear`` in the backend's description ("onednn-packed" or "aten").
"""

from __future__ import annotations

import contextlib
import logging
import os
import types
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["pack_linears", "packing_supported", "stock_linears", "PROBE_ROWS"]

#: row counts each weight shape is probed at before it is packed (decode steps, a prefill)
PROBE_ROWS = (1, 5, 64, 160)


#: cleared by :func:`stock_linears`: every packed module then takes its stock forward
_ON = {"packed": True}


@contextlib.contextmanager
def stock_linears() -> Iterator[None]:
    """Run packed modules through their stock forward inside the block.

    Benches and tests compare both paths on one loaded model. Process-wide, not per thread.
    """
    saved = _ON["packed"]
    _ON["packed"] = False
    try:
        yield
    finally:
        _ON["packed"] = saved


def packing_supported() -> bool:
    """Whether this torch build and CPU have oneDNN bf16 kernels and the packing ops."""
    import torch

    ops = torch.ops.mkldnn
    try:
        return (bool(torch.backends.mkldnn.is_available())
                and bool(ops._is_mkldnn_bf16_supported())
                and hasattr(ops, "_reorder_linear_weight")
                and hasattr(ops, "_linear_pointwise"))
    except (AttributeError, RuntimeError):  # pragma: no cover - a build without the ops
        return False


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return None


def _linear_pointwise(x: Any, packed: Any, bias: Any) -> Any:
    import torch

    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


def _probe(weight: Any, bias: Any, packed: Any) -> bool:
    """Whether the packed product equals ``F.linear`` bit for bit at :data:`PROBE_ROWS`."""
    import torch

    gen = torch.Generator().manual_seed(20260101)
    with torch.inference_mode():
        for rows in PROBE_ROWS:
            x = torch.randn(rows, weight.shape[1], generator=gen).to(weight.dtype)
            if not torch.equal(_linear_pointwise(x, packed, bias),
                               torch.nn.functional.linear(x, weight, bias)):
                return False
    return True


def pack_linears(model: Any) -> dict[str, Any]:
    """Pack the bf16 ``nn.Linear`` weights of ``model`` (module docstring); return a summary.

    Returns:
        ``{"linear": "onednn-packed" | "aten", "packed": n, "of": m, "reason": ...}``; the
        reason says why nothing was packed (off, unsupported, too large).
    """
    import torch

    linears = [m for m in model.modules()
               if isinstance(m, torch.nn.Linear) and m.weight.dtype == torch.bfloat16
               and m.weight.device.type == "cpu"]
    summary: dict[str, Any] = {"linear": "aten", "packed": 0, "of": len(linears)}
    if os.environ.get("FKS_PACKED", "1").strip().lower() in ("0", "false", "no", "off"):
        return {**summary, "reason": "FKS_PACKED=0"}
    if not linears:
        return summary
    if not packing_supported():
        return {**summary, "reason": "no oneDNN bf16 kernels"}
    weight_bytes = sum(m.weight.numel() * m.weight.element_size() for m in linears)
    memory = _memory_bytes()
    if memory is not None and weight_bytes > memory // 4:
        return {**summary, "reason": f"{weight_bytes / 2**30:.1f} GiB of linear weights is more "
                                     "than a quarter of memory"}
    verdict: dict[tuple, bool] = {}
    packed_n = 0
    for module in linears:
        weight, bias = module.weight, module.bias
        with torch.no_grad():
            packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), PROBE_ROWS[2])
        shape = (tuple(weight.shape), bias is not None)
        if shape not in verdict:
            verdict[shape] = _probe(weight.detach(), None if bias is None else bias.detach(),
                                    packed)
            if not verdict[shape]:
                log.info("linear weights %s stay unpacked: oneDNN's packed product differs "
                         "from F.linear's there", shape[0])
        if verdict[shape]:
            _install(module, packed)
            packed_n += 1
    return {**summary, "linear": "onednn-packed" if packed_n else "aten", "packed": packed_n}


def _install(module: Any, packed: Any) -> None:
    """Route ``module``'s forward through ``packed`` while its weight is the one packed.

    A bound method on the instance: ``copy.deepcopy`` rebinds it to the copy, whose weight has
    another storage, so a copy always takes the stock path.
    """
    import torch

    weight = module.weight
    stamp = (weight.data_ptr(), weight._version, weight.dtype)
    stock = type(module).forward

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        w = self.weight
        if (len(args) != 1 or kwargs or not _ON["packed"] or torch.is_grad_enabled()
                or args[0].dtype != torch.bfloat16 or args[0].device.type != "cpu"
                or (w.data_ptr(), w._version, w.dtype) != stamp):
            return stock(self, *args, **kwargs)
        return _linear_pointwise(args[0], packed, self.bias)

    module.forward = types.MethodType(forward, module)
