"""The on-disk hidden-state store ``RUN/hidden/``: a resumable writer and a streaming reader.

Layout (ARCHITECTURE "Hidden-state store", spec §2.4)::

    RUN/hidden/
      index.jsonl        one row per stored query: row, query_id, fact_id, relation,
                         condition_family (+ language, the three family booleans,
                         n_prompt_tokens, prompt_truncated)
      layer_{l:03d}.npy  float16, shape (rows, d); row i belongs to index row i;
                         open with np.load(path, mmap_mode="r")
      meta.json          model, n_layers, d_model, layers, position "query_end",
                         prompt_version, layer_definition, sha256 of every file, ...
      progress.json      only while unfinished: which rows are written (removed at the end)

A store is *complete* when ``meta.json`` exists; it is written last, after the checksums.

Resumability (:class:`HiddenWriter`): the layer files are preallocated at their final size with
``np.lib.format.open_memmap``; each batch is written into its rows, the maps are flushed, and
only then is ``progress.json`` (a bitmap of finished rows, packed and base64-encoded) replaced
atomically. A crash therefore loses at most the batch in flight, and a rerun continues with
the rows not yet marked. Peak memory is one batch, whatever the number of queries.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from fks.errors import FksInputError
from fks.io import (
    atomic_write_json,
    atomic_write_jsonl,
    iter_jsonl,
    load_npy,
    read_json,
)

__all__ = [
    "HIDDEN_DIR",
    "REFERENCE_DIR",
    "STORE_DTYPE",
    "POSITION",
    "LAYER_DEFINITION",
    "IndexRow",
    "layer_filename",
    "check_index",
    "HiddenWriter",
    "HiddenStore",
]

log = logging.getLogger(__name__)

HIDDEN_DIR = "hidden"
#: ``RUN/reference/``: a run-like folder whose ``hidden/`` holds the reference pool's states
#: (the parent benchmark's main queries; fks.metrics.internal.reference)
REFERENCE_DIR = "reference"
STORE_DTYPE = np.float16
POSITION = "query_end"
#: What "layer l" means, written into meta.json (ARCHITECTURE "Pitfalls").
LAYER_DEFINITION = (
    "layer l is the output of decoder block l (0-based), i.e. hidden_states[l+1] in Hugging Face "
    "indexing, read with a forward hook on the block; for the last block this is its RAW output, "
    "before the final norm (Hugging Face's hidden_states[-1] has the final norm applied)"
)
_INDEX = "index.jsonl"
_META = "meta.json"
_PROGRESS = "progress.json"


def layer_filename(layer: int) -> str:
    """``layer_{l:03d}.npy``."""
    return f"layer_{layer:03d}.npy"


class IndexRow(BaseModel):
    """One row of ``index.jsonl``; ``row`` is the row of every layer array."""

    model_config = ConfigDict(extra="allow")

    row: int = Field(ge=0)
    query_id: str
    fact_id: str
    relation: str
    condition_family: str


class _Meta(BaseModel):
    """The fields of ``meta.json`` a reader relies on (others are kept as extras)."""

    model_config = ConfigDict(extra="allow")

    model: str
    n_layers: int = Field(ge=1)
    d_model: int = Field(ge=1)
    layers: list[int] = Field(min_length=1)
    position: str
    prompt_version: str
    n_rows: int = Field(ge=0)
    dtype: str
    sha256: dict[str, str]


def _pack(done: np.ndarray) -> str:
    return base64.b64encode(np.packbits(done.astype(np.uint8)).tobytes()).decode("ascii")


def _unpack(text: str, n: int) -> np.ndarray:
    bits = np.unpackbits(np.frombuffer(base64.b64decode(text), dtype=np.uint8))
    return bits[:n].astype(bool)


def check_index(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Raise when the existing ``index.jsonl`` does not list the same queries in the same rows.

    Raises:
        FksInputError: naming the line (row + 1) and the first query id that differs.
    """
    existing = [r for _, r in iter_jsonl(path, IndexRow)]
    for line, (old, new) in enumerate(zip(existing, rows, strict=False), start=1):
        if old.query_id != new["query_id"]:  # type: ignore[union-attr]
            raise FksInputError(
                f"the existing hidden store holds {old.query_id} at row {line - 1} but this "  # type: ignore[union-attr]
                f"benchmark selection puts {new['query_id']} there (a different benchmark or "
                "selection); pass --overwrite to start over",
                path=path, line=line, field="query_id",
            )
    if len(existing) != len(rows):
        raise FksInputError(
            f"the existing hidden store has {len(existing)} rows but this benchmark selection has "
            f"{len(rows)}; pass --overwrite to start over",
            path=path, line=min(len(existing), len(rows)) + 1, field="query_id",
        )


class HiddenWriter:
    """Resumable, memory-mapped writer of ``RUN/hidden/`` (see the module docstring).

    Args:
        run_dir: the run directory (the store is ``run_dir/hidden``).
        rows: the index rows, in row order (``row`` is filled in from the position).
        layers: block indices stored.
        d_model: residual width.
        identity: what must not change between a crash and its resume (model, layers,
            selection, prompt version, ...); stored in the progress file and in ``meta.json``.

    Raises:
        FksInputError: an unfinished store exists for a different identity or other queries.
    """

    def __init__(
        self,
        run_dir: str | Path,
        rows: Sequence[Mapping[str, Any]],
        layers: Sequence[int],
        d_model: int,
        identity: Mapping[str, Any],
    ) -> None:
        self.dir = Path(run_dir) / HIDDEN_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self.rows = [{**dict(r), "row": i} for i, r in enumerate(rows)]
        self.layers = [int(x) for x in layers]
        self.d_model = int(d_model)
        self.identity = dict(identity)
        n = len(self.rows)
        progress = read_json(self.dir / _PROGRESS) if (self.dir / _PROGRESS).is_file() else None
        if progress is not None:
            check_index(self.dir / _INDEX, self.rows)
            self._check_identity(progress.get("identity") or {})
        if progress is None:  # fresh: files first, the progress file last
            for stale in (*self.dir.glob("layer_*.npy"), self.dir / _META):
                stale.unlink(missing_ok=True)
            atomic_write_jsonl(self.dir / _INDEX, self.rows)
            self.maps = {x: self._open_layer(x, "w+") for x in self.layers}
            self.done = np.zeros(n, dtype=bool)
            self.n_nonfinite = dict.fromkeys(self.layers, 0)
            self._write_progress(self.done, self.n_nonfinite)
        else:
            self.maps = {x: self._open_layer(x, "r+") for x in self.layers}
            self.done = _unpack(progress["done"], n)
            self.n_nonfinite = {int(k): int(v) for k, v in progress["n_nonfinite"].items()}

    # ------------------------------------------------------------------ setup
    def _check_identity(self, old: Mapping[str, Any]) -> None:
        new = self.identity
        key = next((k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)), None)
        if key is not None:
            raise FksInputError(
                f"an unfinished extraction with a different {key} ({old.get(key)!r}, now "
                f"{new.get(key)!r}) is in this run; pass --overwrite to start over",
                path=self.dir / _PROGRESS, field=key,
            )

    def _open_layer(self, layer: int, mode: str) -> np.memmap:
        path = self.dir / layer_filename(layer)
        shape = (len(self.rows), self.d_model)
        if mode == "w+":
            return np.lib.format.open_memmap(path, mode="w+", dtype=STORE_DTYPE, shape=shape)
        if not path.is_file():
            raise FksInputError("layer file of an unfinished extraction is missing; pass "
                                "--overwrite to start over", path=path, field=f"layer {layer}")
        arr = np.lib.format.open_memmap(path, mode="r+")
        if arr.shape != shape or arr.dtype != STORE_DTYPE:
            raise FksInputError(f"expected {STORE_DTYPE.__name__} {shape}, found {arr.dtype} "
                                f"{arr.shape}; pass --overwrite to start over",
                                path=path, field=f"layer {layer}")
        return arr

    def _write_progress(self, done: np.ndarray, nonfinite: Mapping[int, int]) -> None:
        atomic_write_json(self.dir / _PROGRESS, {
            "identity": self.identity,
            "n_rows": len(self.rows),
            "n_done": int(done.sum()),
            "done": _pack(done),
            "n_nonfinite": {str(k): int(v) for k, v in nonfinite.items()},
        })

    # ---------------------------------------------------------------- writing
    @property
    def n_done(self) -> int:
        """Rows already written."""
        return int(self.done.sum())

    def write(self, rows: np.ndarray, states: Mapping[int, Any]) -> None:
        """Write one batch durably.

        Args:
            rows: ``(b,)`` row indices.
            states: ``{layer: (b, d)}`` arrays (any float dtype; stored as float16).
        """
        rows = np.asarray(rows, dtype=np.int64)
        for layer in self.layers:
            values = np.asarray(states[layer], dtype=STORE_DTYPE)
            if values.shape != (len(rows), self.d_model):
                raise ValueError(f"layer {layer}: expected {(len(rows), self.d_model)}, "
                                 f"got {values.shape}")
            bad = int(values.size - np.isfinite(values).sum())
            if bad:
                log.warning("layer %d: %d values overflow float16 in this batch", layer, bad)
                self.n_nonfinite[layer] += bad
            self.maps[layer][rows] = values
        for arr in self.maps.values():
            arr.flush()
        self.done[rows] = True
        self._write_progress(self.done, self.n_nonfinite)

    def finalize(self, extra_meta: Mapping[str, Any]) -> dict[str, Any]:
        """Checksum every file, write ``meta.json`` (marking the store complete), drop progress.

        Raises:
            RuntimeError: some rows were never written.
        """
        if not self.done.all():
            missing = int((~self.done).sum())
            raise RuntimeError(f"{missing} rows of the hidden store were never written")
        for arr in self.maps.values():
            arr.flush()
        self.maps.clear()
        from fks.provenance import file_sha256

        names = [_INDEX, *(layer_filename(x) for x in self.layers)]
        meta = {
            **self.identity,
            **dict(extra_meta),
            "layers": self.layers,
            "d_model": self.d_model,
            "position": POSITION,
            "layer_definition": LAYER_DEFINITION,
            "dtype": np.dtype(STORE_DTYPE).name,
            "n_rows": len(self.rows),
            "n_nonfinite": {str(k): v for k, v in self.n_nonfinite.items()},
            # through the provenance cache: the stage's record of these files reuses the hashes
            "sha256": {name: file_sha256(self.dir / name) for name in names},
        }
        atomic_write_json(self.dir / _META, meta)
        (self.dir / _PROGRESS).unlink(missing_ok=True)
        return meta


class HiddenStore:
    """Read a complete ``RUN/hidden/`` store, streaming each layer from a memory map.

    Attributes:
        index: the :class:`IndexRow` list (row ``i`` is row ``i`` of every layer).
        query_ids, fact_ids, relations, families: the index columns as numpy string arrays.
        layers: stored block indices; ``n_layers``, ``d_model``, ``meta`` from ``meta.json``.

    Raises:
        FksInputError: the store is missing or unfinished, or ``index.jsonl`` is malformed.
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.dir = Path(run_dir) / HIDDEN_DIR
        meta_path = self.dir / _META
        if not meta_path.is_file():
            unfinished = (self.dir / _PROGRESS).is_file()
            raise FksInputError(
                "the hidden-state store is " + ("unfinished" if unfinished else "missing")
                + "; run `fks extract` first" + (" (it resumes)" if unfinished else ""),
                path=meta_path,
            )
        raw = read_json(meta_path)
        try:
            self._meta = _Meta.model_validate(raw)
        except Exception as exc:
            raise FksInputError(f"malformed meta.json: {exc}".splitlines()[0], path=meta_path) \
                from None
        self.meta: dict[str, Any] = raw
        self.index: list[IndexRow] = [r for _, r in iter_jsonl(self.dir / _INDEX, IndexRow)]  # type: ignore[misc]
        for line, rec in enumerate(self.index, start=1):
            if rec.row != line - 1:
                raise FksInputError(f"expected row {line - 1}, found {rec.row}",
                                    path=self.dir / _INDEX, line=line, field="row")
        if len(self.index) != self._meta.n_rows:
            raise FksInputError(f"index has {len(self.index)} rows, meta.json says "
                                f"{self._meta.n_rows}", path=self.dir / _INDEX, field="row")
        self.query_ids = np.array([r.query_id for r in self.index], dtype=str)
        self.fact_ids = np.array([r.fact_id for r in self.index], dtype=str)
        self.relations = np.array([r.relation for r in self.index], dtype=str)
        self.families = np.array([r.condition_family for r in self.index], dtype=str)

    @property
    def layers(self) -> list[int]:
        """Stored block indices (``l`` = output of block ``l``)."""
        return list(self._meta.layers)

    @property
    def n_layers(self) -> int:
        """Decoder blocks of the model (``L``)."""
        return self._meta.n_layers

    @property
    def d_model(self) -> int:
        """Residual width ``d``."""
        return self._meta.d_model

    @property
    def n_rows(self) -> int:
        """Stored queries."""
        return len(self.index)

    @property
    def model(self) -> str:
        """The model name recorded at extraction."""
        return self._meta.model

    def rows_of(self, query_ids: Sequence[str]) -> np.ndarray:
        """Row indices of ``query_ids`` (``FksInputError`` naming the first unknown id)."""
        lookup = {q: i for i, q in enumerate(self.query_ids.tolist())}
        missing = next((q for q in query_ids if q not in lookup), None)
        if missing is not None:
            raise FksInputError(f"{missing} is not in the hidden store", path=self.dir / _INDEX,
                                field="query_id")
        return np.array([lookup[q] for q in query_ids], dtype=np.int64)

    def layer(self, layer: int) -> np.memmap:
        """Layer ``layer`` as a read-only ``(rows, d)`` float16 memory map (shape/dtype checked)."""
        if layer not in self._meta.layers:
            raise FksInputError(f"layer {layer} is not stored (stored: {self._meta.layers})",
                                path=self.dir / _META, field="layers")
        path = self.dir / layer_filename(layer)
        if not path.is_file():
            raise FksInputError("layer file missing", path=path, field=f"layer {layer}")
        arr = load_npy(path, field=f"layer {layer}")
        want = (self.n_rows, self.d_model)
        if arr.shape != want or arr.dtype != STORE_DTYPE:
            raise FksInputError(f"expected float16 {want}, found {arr.dtype} {arr.shape}",
                                path=path, field=f"layer {layer}")
        return arr

    def validate(self, *, checksums: bool = False) -> None:
        """Check every layer's shape and dtype, and (``checksums=True``) every sha256."""
        for layer in self.layers:
            self.layer(layer)
        if checksums:
            self.verify_checksums()

    def verify_checksums(self) -> None:
        """Recompute the sha256 of every file listed in ``meta.json``; raise on a mismatch.

        Through :func:`fks.provenance.file_sha256`, so the run's provenance record of the same
        unchanged files in this process does not read them again.
        """
        from fks.provenance import file_sha256

        for name, want in self._meta.sha256.items():
            path = self.dir / name
            if not path.is_file():
                raise FksInputError("file listed in meta.json is missing", path=path,
                                    field="sha256")
            got = file_sha256(path)
            if got != want:
                raise FksInputError(f"sha256 mismatch: meta.json says {want[:12]}..., the file "
                                    f"has {got[:12]}... (modified or corrupted)", path=path,
                                    field="sha256")
