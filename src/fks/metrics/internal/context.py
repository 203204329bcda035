"""What the internal-metrics engine, its report and its checks share (spec §7-11, §18).

:class:`Context` holds everything fixed for one run; :class:`Selection` is a named set of facts
and :class:`LayerScores` what one layer contributes; :func:`load_layer` reads a layer of the
hidden-state store, :func:`load_transport` the J-Lens matrices of the window layers, and
:func:`mask_key` keys a fact mask. :mod:`.engine`, :mod:`.report` and :mod:`.checks` import
them from here, so none of them imports another's internals.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fks.configs import ConfigSet
from fks.data.load import Benchmark
from fks.errors import FksInputError
from fks.hidden.store import HiddenStore, layer_filename
from fks.metrics.internal.scores import Negatives
from fks.metrics.internal.space import Design

__all__ = [
    "TRANSPORTS",
    "Context",
    "Selection",
    "LayerScores",
    "load_layer",
    "load_transport",
    "mask_key",
]

TRANSPORTS = ("jlens", "raw")
_CHUNK = 4096


def load_layer(store: HiddenStore, layer: int, design: Design,
               rows: np.ndarray | None = None) -> np.ndarray:
    """Rows of one layer as float32 ``(n, d)``, read in chunks from the memory map.

    Raises:
        FksInputError: a row holds NaN or Inf (names the query_id and the layer), the
            layer file is missing or has the wrong shape/dtype (names the layer), or every
            row read is the same vector (an all-zero layer: a blanked file, never a model's
            states; the whitening would have no direction to keep).
    """
    mm = store.layer(layer)
    sel = design.rows if rows is None else rows
    x = np.empty((len(sel), mm.shape[1]), dtype=np.float32)
    varies = False
    for s in range(0, len(sel), _CHUNK):
        x[s:s + _CHUNK] = mm[sel[s:s + _CHUNK]]
        bad = np.flatnonzero(~np.isfinite(x[s:s + _CHUNK]).all(axis=1))
        if len(bad):
            row = int(sel[s + bad[0]])
            qid = store.query_ids[row]
            raise FksInputError(
                f"{qid}: NaN or Inf in layer {layer} ({layer_filename(layer)} row {row})",
                path=store.dir / "index.jsonl", line=row + 1, field="query_id")
        varies = varies or bool((x[s:s + _CHUNK] != x[0]).any())
    del mm
    if len(sel) > 1 and not varies:
        what = "zero" if not x[0].any() else "the same vector"
        raise FksInputError(f"all {len(sel)} rows read from layer {layer} are {what}: not "
                            "hidden states of a model (a blanked or overwritten file); rerun "
                            "`fks extract --overwrite`", path=store.dir / layer_filename(layer))
    return x


def load_transport(run_dir: Path, transport: str, window: Sequence[int],
                    d: int) -> dict[int, np.ndarray] | None:
    """Load and check the J-Lens matrices of the window layers (None for ``raw``)."""
    if transport not in TRANSPORTS:
        raise FksInputError(f"transport must be one of {TRANSPORTS}; got {transport!r}",
                            field="transport")
    if transport == "raw":
        return None
    from fks.hidden.jlens import JLENS_DIR, assert_nontrivial_transport, load_jlens

    folder = run_dir / JLENS_DIR
    if not folder.is_dir():
        raise FksInputError("this run has no J-Lens fit; run `fks jlens` first or pass "
                            "--transport raw (Raw-ISS ablation)", path=folder, field="transport")
    jl = load_jlens(run_dir)
    out = {}
    for layer in window:
        J = jl.get(layer)
        if J is None:
            raise FksInputError(f"no J-Lens matrix for window layer {layer} (fitted: "
                                f"{sorted(jl)})", path=folder / "manifest.json",
                                field=f"layer {layer}")
        if J.shape != (d, d):
            raise FksInputError(f"layer {layer}: J is {J.shape}, the hidden states have d={d}",
                                path=folder / layer_filename(layer), field=f"layer {layer}")
        if not np.isfinite(J).all():
            raise FksInputError(f"layer {layer}: J holds NaN or Inf",
                                path=folder / layer_filename(layer), field=f"layer {layer}")
        out[layer] = J
    assert_nontrivial_transport(out)
    return out


@dataclass(frozen=True)
class Selection:
    """A named set of facts for the summaries; KTS pairs come from its reading."""

    name: str
    reading: str
    coverage: str
    subset: str
    mask: np.ndarray


@dataclass
class LayerScores:
    """What one layer contributes: per-reading ISS arrays and KTS per (pair, mask key)."""

    layer: int
    iss: dict[str, dict[str, np.ndarray]]
    kts: dict[tuple[int, bytes], dict[str, dict[str, Any]]]
    whitening: dict[str, Any]
    seconds: dict[str, float]
    #: headline scores of the unwhitened space (:func:`fks.metrics.internal.checks.
    #: headline_scores`), None when not computed
    unwhitened: dict[str, Any] | None = None


def mask_key(mask: np.ndarray) -> bytes:
    """Return a stable key of a fact mask (sha256 of its packed bits)."""
    return hashlib.sha256(np.packbits(mask).tobytes()).digest()


@dataclass
class Context:
    """Everything fixed for one run (inputs, design, configs)."""

    run_dir: Path
    out_dir: Path
    bench: Benchmark
    store: HiddenStore
    design: Design
    readings: dict[str, list[str]]
    pairs: list[tuple[int, int]]
    reading_pairs: dict[str, np.ndarray]
    selections: list[Selection]
    neg: Negatives
    neg_info: dict[str, Any]
    jlens: dict[int, np.ndarray] | None
    transport: str
    window: list[int]
    late: list[int]
    rep_layer: int
    configs: ConfigSet
    groups: np.ndarray | None
    #: the reference pool (:class:`fks.metrics.internal.reference.Reference`) or None
    reference: Any = None
