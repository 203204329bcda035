r"""File I/O shared by every stage: streaming JSONL, atomic writes, resumable appends.

Rules every stage relies on:

* **Reading** is streaming (one line at a time) and a bad row raises
  :class:`~fks.errors.FksInputError` naming ``file:line`` and the field at fault. Text that
  is valid JSON but not text -- a lone UTF-16 surrogate such as ``"\ud800"``, which no
  UTF-8 writer can encode -- is such a bad row, in every JSON, JSONL and YAML reader here.
* **Whole-file writes** are atomic: written to a temporary file in the same folder, flushed,
  fsynced, then renamed over the target. A crash leaves either the old file or the new one,
  never a half-written file that looks whole.
* **Appends** (resumable stages) flush and fsync after each batch; a torn last line left by a
  ``kill -9`` is detected on reopen and truncated away, so a rerun neither loses nor doubles a
  complete record.
* **A failed write** (a full disk: ``[Errno 28]``, which names no file; a quota; a read-only
  folder) is :class:`~fks.errors.FksInputError` naming the file being written
  (:func:`write_error`), never an internal error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from fks.errors import FksInputError

__all__ = [
    "iter_jsonl",
    "read_jsonl",
    "read_json",
    "read_yaml",
    "atomic_write_text",
    "atomic_write_json",
    "atomic_write_jsonl",
    "atomic_path",
    "JsonlAppender",
    "repair_jsonl_tail",
    "sha256_file",
    "fks_cache_dir",
    "dumps_record",
    "input_error",
    "load_npy",
    "load_npz",
    "unique_rows",
    "os_error",
    "write_error",
    "lone_surrogate_field",
]

M = TypeVar("M", bound=BaseModel)


def dumps_record(record: BaseModel | dict[str, Any]) -> str:
    """Serialise one record as a compact, key-order-stable JSON line (no newline)."""
    data = record.model_dump(mode="json") if isinstance(record, BaseModel) else record
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def input_error(
    err: ValidationError, *, path: str | Path | None, line: int | None = None
) -> FksInputError:
    """Turn a pydantic error into one :class:`FksInputError` (file, line, field, found value).

    The first error's field path and message are kept, with the value found and how many more
    errors there were; every stage that validates user input reports through this.
    """
    first = err.errors()[0]
    field = ".".join(str(p) for p in first.get("loc", ())) or None
    found = first.get("input")
    found_text = json.dumps(found, ensure_ascii=False, default=str)
    if len(found_text) > 80:
        found_text = found_text[:77] + "..."
    extra = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    msg = f"{first.get('msg', 'invalid value')}; found {found_text}{extra}"
    return FksInputError(msg, path=path, line=line, field=field)


#: a ``\\uD800``-``\\uDFFF`` escape in JSON text: a high surrogate with the low one that may
#: pair it, or a low surrogate alone (the only way JSON can spell text UTF-8 cannot encode)
_SURROGATE_ESCAPE = re.compile(
    r"\\u(d[89ab][0-9a-f]{2})(\\ud[c-f][0-9a-f]{2})?|\\ud[c-f][0-9a-f]{2}", re.IGNORECASE)


def lone_surrogate_field(obj: Any, prefix: str = "") -> str | None:
    r"""Return the dotted path of the first string (value or key) holding a lone surrogate.

    ``json.loads('"\ud800"')`` is valid JSON, but the string it returns is not text: no
    UTF-8 writer can encode it, so a record holding one would fail at the first write of the
    stage that read it. ``None`` when every string encodes. List items are named by index
    (``aliases.2``); a bad key is named as ``<key>``.

    >>> lone_surrogate_field({"a": ["ok", "x" + chr(0xD800)]})
    'a.1'
    >>> lone_surrogate_field({"a": chr(0x1F600)}) is None
    True
    """
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
        except UnicodeEncodeError:
            return prefix or "<value>"
        return None
    if isinstance(obj, dict):
        for key, value in obj.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(key, str) and lone_surrogate_field(key) is not None:
                return f"{prefix}.<key>" if prefix else "<key>"
            if (found := lone_surrogate_field(value, name)) is not None:
                return found
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            if (found := lone_surrogate_field(value, f"{prefix}.{i}" if prefix else str(i))):
                return found
    return None


def _surrogate_error(obj: Any, text: str, *, path: Path,
                     line: int | None) -> FksInputError | None:
    """Return the error for a lone surrogate in JSON ``obj`` (None when there is none).

    A cheap scan of ``text`` for a surrogate escape comes first, so clean files (nearly all)
    are never walked. ``line`` None: the line is taken from the first unpaired escape.
    """
    lone = [m for m in _SURROGATE_ESCAPE.finditer(text)
            if m.group(1) is None or m.group(2) is None]
    if not lone:
        return None
    field = lone_surrogate_field(obj)
    if field is None:  # an escaped backslash before "ud800", not a surrogate
        return None
    if line is None:
        line = text.count("\n", 0, lone[0].start()) + 1
    found = lone[0].group(0)
    return FksInputError(f"a lone UTF-16 surrogate ({found}) is not text and cannot be "
                         "written as UTF-8; found in a string of this record (fix or drop it)",
                         path=path, line=line, field=field)


def iter_jsonl(
    path: str | Path, model: type[M] | None = None, *, skip_blank: bool = True
) -> Iterator[tuple[int, M | dict[str, Any]]]:
    """Yield ``(line_number, record)`` from a JSONL file, one line at a time.

    Args:
        path: the JSONL file.
        model: a pydantic model to validate each row against; ``None`` yields plain dicts.
        skip_blank: skip empty lines (a blank line is otherwise an error).

    Raises:
        FksInputError: the file is missing, a line is not a JSON object, or a row fails
            validation; the message names ``file:line`` and the field.
    """
    path = Path(path)
    if not path.is_file():
        raise FksInputError("file not found", path=path)
    with path.open("rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise FksInputError(f"not UTF-8 ({exc.reason})", path=path, line=line_no) from None
            if not text.strip():
                if skip_blank:
                    continue
                raise FksInputError("blank line", path=path, line=line_no)
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise FksInputError(
                    f"invalid JSON: {exc.msg} at column {exc.colno}", path=path, line=line_no
                ) from None
            except (ValueError, RecursionError) as exc:  # huge integer literal, deep nesting
                raise FksInputError(
                    f"invalid JSON: {str(exc)[:120]}", path=path, line=line_no
                ) from None
            if not isinstance(obj, dict):
                raise FksInputError(
                    f"expected a JSON object, found {type(obj).__name__}", path=path, line=line_no
                )
            if "\\u" in text and (err := _surrogate_error(obj, text, path=path,
                                                         line=line_no)) is not None:
                raise err
            if model is None:
                yield line_no, obj
                continue
            try:
                yield line_no, model.model_validate(obj)
            except ValidationError as exc:
                raise input_error(exc, path=path, line=line_no) from None


def unique_rows(rows: Iterable[tuple[int, Any]], path: str | Path, *, what: str = "records",
                key: str = "query_id") -> Iterator[tuple[int, Any]]:
    """Pass ``(line, record)`` pairs through, refusing a repeated ``key`` and an empty file.

    The one reader contract of every record file (generations, scored, judged, ...): each
    query appears once -- a doubled record would be counted twice in BCS -- and a file with
    no record is bad input, not an empty result.

    Raises:
        FksInputError: a repeated key (naming both lines), or no record at all.
    """
    first: dict[Any, int] = {}
    for line, rec in rows:
        value = rec.get(key) if isinstance(rec, dict) else getattr(rec, key)
        seen = first.setdefault(value, line)
        if seen != line:
            raise FksInputError(f"duplicate {key} {value!r} (also on line {seen}); each query "
                                "must appear once", path=path, line=line, field=key)
        yield line, rec
    if not first:
        raise FksInputError(f"no {what}: the file is empty", path=path)


def read_jsonl(path: str | Path, model: type[M] | None = None) -> list[Any]:
    """Read a whole JSONL file into a list (validated when ``model`` is given)."""
    return [rec for _, rec in iter_jsonl(path, model)]


def read_json(path: str | Path) -> Any:
    """Read a JSON file, raising :class:`FksInputError` with the position of a syntax error."""
    path = Path(path)
    if not path.is_file():
        raise FksInputError("file not found", path=path)
    try:
        text = path.read_text(encoding="utf-8")
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FksInputError(f"invalid JSON: {exc.msg}", path=path, line=exc.lineno) from None
    except UnicodeDecodeError as exc:
        raise FksInputError(f"not UTF-8 ({exc.reason})", path=path) from None
    except (ValueError, RecursionError) as exc:  # huge integer literal, deep nesting
        raise FksInputError(f"invalid JSON: {str(exc)[:120]}", path=path) from None
    except OSError as exc:  # a directory, no permission, ...
        raise os_error(exc, path) from None
    if "\\u" in text and (err := _surrogate_error(obj, text, path=path, line=None)) is not None:
        raise err
    return obj


def os_error(err: OSError, path: str | Path | None = None) -> FksInputError:
    """Turn an OS error on a user-given path into bad input (exit 2) naming path and reason.

    A directory where a file belongs, a symlink loop, a name too long for the file system, an
    existing file where a folder belongs, a permission problem: all are the user's path, not
    an internal error.
    """
    where = path if path is not None else (err.filename or None)
    reason = err.strerror or type(err).__name__
    if err.filename2:
        reason = f"{reason} (and {err.filename2})"
    return FksInputError(reason, path=where)


def write_error(err: OSError, path: str | Path) -> FksInputError:
    """Turn an OS error while writing ``path`` into bad input (exit 2) naming that path.

    ``OSError: [Errno 28] No space left on device`` carries no file name (it is raised by
    ``write``/``fsync`` on a descriptor); every fks writer reports it, and a quota, a
    read-only file system or a permission problem, as ``PATH: cannot write: REASON``.
    """
    reason = err.strerror or str(err) or type(err).__name__
    code = f" [errno {err.errno}]" if err.errno else ""
    return FksInputError(f"cannot write: {reason}{code}; free space (or fix the folder) and "
                         "rerun", path=path)


def load_npy(path: str | Path, *, mmap: bool = True, field: str | None = None) -> Any:
    """Load one ``.npy`` array safely: no pickle, and every failure is bad input (exit 2).

    An empty, truncated or corrupt file, an object dtype (which would need pickle) and an
    unreadable path all raise :class:`FksInputError` naming the file; nothing reaches the
    user as a traceback or as click's bare "aborted" (numpy raises ``EOFError`` on an empty
    file, which click would otherwise turn into an abort).
    """
    import numpy as np

    path = Path(path)
    try:
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except OSError as err:
        raise os_error(err, path) from None
    except (ValueError, EOFError) as err:  # truncated header or data, object dtype, ...
        text = str(err) or type(err).__name__
        if "pickle" in text or "memory-mapped" in text:
            text = "holds Python objects (object dtype), which fks never loads"
        raise FksInputError(f"not a readable .npy array: {text[:160]}", path=path,
                            field=field) from None


def load_npz(path: str | Path, *, field: str | None = None) -> dict[str, Any]:
    """Load every array of a small ``.npz`` archive at once: no pickle, failures are bad input.

    A truncated or corrupt archive (not a zip, a member cut short, a bad CRC), an object
    array and an unreadable path raise :class:`FksInputError` naming the file; an archive
    that needs streaming is not what this is for (the §18.2 second pass, the bootstrap
    replicates).
    """
    import zipfile
    import zlib

    import numpy as np

    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            return {key: np.asarray(z[key]) for key in z.files}
    except OSError as err:
        if err.filename is None:  # numpy's "failed to interpret file", not the path itself
            raise FksInputError(f"not a readable .npz archive: {str(err)[:160]}", path=path,
                                field=field) from None
        raise os_error(err, path) from None
    except (zipfile.BadZipFile, zlib.error, ValueError, EOFError, KeyError) as err:
        text = str(err) or type(err).__name__
        if "pickle" in text:
            text = "holds Python objects (object dtype), which fks never loads"
        raise FksInputError(f"not a readable .npz archive: {text[:160]}", path=path,
                            field=field) from None


def read_yaml(path: str | Path) -> Any:
    """Read a YAML file with ``yaml.safe_load`` (never the unsafe loader)."""
    path = Path(path)
    if not path.is_file():
        raise FksInputError("file not found", path=path)
    try:
        obj = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise FksInputError(f"not UTF-8 ({exc.reason})", path=path) from None
    except (ValueError, RecursionError) as exc:  # a 5,000-digit integer, deep nesting
        raise FksInputError(f"invalid YAML: {str(exc)[:120]}", path=path) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise FksInputError(f"invalid YAML: {getattr(exc, 'problem', exc)}", path=path,
                            line=line) from None
    if (field := lone_surrogate_field(obj)) is not None:  # YAML's "\\ud800" escape
        raise FksInputError("a lone UTF-16 surrogate is not text and cannot be written as "
                            "UTF-8", path=path, field=field)
    return obj


@contextlib.contextmanager
def atomic_path(path: str | Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is renamed over ``path``.

    Use for writers that want a file name (``np.save``, safetensors). On an exception the
    temporary file is removed and ``path`` is untouched.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix or ".tmp",
                                   dir=path.parent)
    except OSError as err:
        raise write_error(err, path) from None
    os.close(fd)
    tmp_path = Path(tmp)
    # mkstemp creates 0600; give the final file the permissions a plain open() would
    os.chmod(tmp_path, 0o666 & ~_umask())
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp_path, path)
    except OSError as err:
        tmp_path.unlink(missing_ok=True)
        # a full disk, a quota, a read-only file system: the target's fault, named as such;
        # an error on another file (an input read inside the block) keeps its own name
        if err.filename is None or str(err.filename) == str(tmp_path):
            raise write_error(err, path) from None
        raise
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file, fsync, rename)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_json(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as indented, key-sorted JSON atomically."""
    atomic_write_text(path, json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=True) + "\n")


def atomic_write_jsonl(path: str | Path, records: Iterable[BaseModel | dict[str, Any]]) -> int:
    """Stream ``records`` to ``path`` atomically; returns the number of rows written."""
    n = 0
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(dumps_record(rec))
            fh.write("\n")
            n += 1
    return n


def repair_jsonl_tail(path: str | Path) -> int:
    """Truncate a torn last line (no trailing newline, or not valid JSON) from ``path``.

    Returns the number of bytes removed (0 when the file was whole or absent).
    """
    path = Path(path)
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with path.open("rb+") as fh:
        # find the start of the last line
        block = 1 << 16
        pos = size
        tail = b""
        while pos > 0:
            step = min(block, pos)
            pos -= step
            fh.seek(pos)
            tail = fh.read(step) + tail
            idx = tail.rstrip(b"\n").rfind(b"\n")
            if idx >= 0:
                start = pos + idx + 1
                break
        else:
            start = 0
        fh.seek(start)
        last = fh.read()
        whole = last.endswith(b"\n")
        if whole:
            try:
                json.loads(last)
            except (ValueError, RecursionError):  # incl. JSONDecodeError and bad UTF-8
                whole = False
        if whole:
            return 0
        fh.truncate(start)
        fh.flush()
        os.fsync(fh.fileno())
        return size - start


class JsonlAppender:
    r"""Append records to a JSONL file in durable batches (the resumable-stage writer).

    On open, a torn last line from an earlier crash is truncated away. :meth:`write_batch`
    writes whole lines, flushes and fsyncs, so after it returns the batch survives a
    ``kill -9``.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.jsonl"
        >>> with JsonlAppender(p) as out:
        ...     out.write_batch([{"a": 1}, {"a": 2}])
        2
        >>> p.read_text().count("\n")
        2
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.repaired_bytes = repair_jsonl_tail(self.path)
            self._fh = self.path.open("a", encoding="utf-8")
        except OSError as err:
            raise write_error(err, self.path) from None

    def write_batch(self, records: Iterable[BaseModel | dict[str, Any]]) -> int:
        """Write a batch durably; returns the number of records written.

        Raises:
            FksInputError: the write or fsync failed (a full disk: ``ENOSPC``), naming the
                file. The part of the batch that reached the file is a torn tail that the
                next open truncates away, so a rerun after freeing space resumes cleanly.
        """
        lines = [dumps_record(r) + "\n" for r in records]
        if lines:
            try:
                self._fh.write("".join(lines))
                self._fh.flush()
                os.fsync(self._fh.fileno())
            except OSError as err:
                raise write_error(err, self.path) from None
        return len(lines)

    def close(self) -> None:
        """Close the file (a failed flush of what is left is reported like a failed write)."""
        try:
            self._fh.close()
        except OSError as err:
            raise write_error(err, self.path) from None

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def fks_cache_dir() -> Path:
    """Return the fks cache: ``$FKS_CACHE``, else ``$XDG_CACHE_HOME/fks`` (``~/.cache/fks``)."""
    base = os.environ.get("FKS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "fks")
    return Path(base)


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks."""
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        while data := fh.read(chunk):
            h.update(data)
    return h.hexdigest()
