"""List the cached folders with their size (``fks cache list``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from fks.errors import FksInputError
from fks.io import fks_cache_dir, read_json

__all__ = ["CacheEntry", "list_cache", "format_size"]

#: the file each kind writes last into a whole folder, and the fields shown from it
_INFO = {"gguf": ("gguf_source.json", ("file", "quantization")),
         "demo_model": ("demo_model.json", ("fks_version",)),
         "reference": ("reference.json", ("model", "n_rows"))}


@dataclass(frozen=True)
class CacheEntry:
    """One cached folder.

    Attributes:
        kind: the cache sub-folder it is in (``gguf``, ``demo_model``, ``benchmarks``, ...).
        path: the folder.
        size_bytes: the size of every file under it (links not followed).
        detail: what its info file says (the GGUF file and quantization, ...), or
            ``"incomplete"`` when a kind's info file is missing or unreadable.
    """

    kind: str
    path: Path
    size_bytes: int
    detail: str = ""


def _size(folder: Path) -> int:
    total = 0
    for base, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(base, name)).st_size
            except OSError:  # removed while listing
                continue
    return total


def _detail(kind: str, folder: Path) -> str:
    if kind not in _INFO:
        return ""
    name, keys = _INFO[kind]
    try:
        info = read_json(folder / name)
    except FksInputError:
        return "incomplete"
    if not isinstance(info, dict):
        return "incomplete"
    return ", ".join(str(info[k]) for k in keys if info.get(k) is not None)


def list_cache(root: str | Path | None = None) -> list[CacheEntry]:
    """Return every cached folder under ``root`` (default :func:`fks.io.fks_cache_dir`).

    Sorted by kind, then name. A missing cache is an empty list; temporary (``.tmp-*``) and
    other dot-named entries are left out.
    """
    base = Path(root) if root is not None else fks_cache_dir()
    if not base.is_dir():
        return []
    out = []
    for kind_dir in sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for folder in sorted(kind_dir.iterdir()):
            if folder.name.startswith(".") or not folder.is_dir() or folder.is_symlink():
                continue
            out.append(CacheEntry(kind_dir.name, folder, _size(folder),
                                  _detail(kind_dir.name, folder)))
    return out


def format_size(n: int) -> str:
    """Human-readable bytes (binary units).

    >>> format_size(0), format_size(1536), format_size(5 * 2**30)
    ('0 B', '1.5 KiB', '5.0 GiB')
    """
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"  # pragma: no cover - the loop returns
