"""The reference pool's cache across runs: ``$FKS_CACHE/reference/<model>-<key>/`` (issue 29).

**Why.** The reference pool (:mod:`fks.metrics.internal.reference`) is the model's query-end
states over every main query of the *parent* benchmark, whatever ``--limit`` a run asks for. It
is most of a sliced run's extraction: on Gemma 3 270M it is 36,780 of the 40,044 rows a
200-fact run extracts, 8-9 minutes of its 17 on a 2-core CPU without AMX. It depends only on
what goes into those forward passes, so every later run of the same model over the same parent
benchmark -- another ``--limit``, another seed, a rerun after a crash elsewhere -- can take it
from the cache instead of recomputing it.

**The key** (:func:`pool_key`) is the sha256 of everything that can change a stored number:

* the store's identity (model name, layers, width, prompt version, prompt cap, selection and
  the parent benchmark's checksum) and the sha256 of every prompt's token ids (so the
  tokenizer and the prompt builder are in it, whatever their versions say);
* the weights and tokenizer files' sha256, the dtype, the device and the transformers version
  (the backend's ``describe()``, without local paths);
* the batch size, padding side and prefix sharing (in bfloat16 a row's states depend on its
  batch's shape, and on whether its prefix was forwarded with it or once for several rows);
* the kernels: torch version, threads, CPU capability, oneDNN, float32 matmul precision, and
  the CPU model and its bf16/AMX flags (or the GPU's name) -- another machine's kernels round
  differently;
* :data:`fks.hidden.extract.EXTRACTION_VERSION`, which is bumped whenever the extraction code
  could change a number.

A model whose weights have no sha256 (not a local snapshot) is never cached.

**Nothing stale can come back.** A cached pool is used only when its ``reference.json`` holds
the same key and its ``meta.json`` the same identity and weights; once linked into the run,
every file must have the shape, dtype and sha256 its ``meta.json`` recorded (the run's own
provenance record reuses those hashes), and the index the run's queries in order. A damaged
pool is dropped from the cache, logged and extracted as if there were no cache. The files are hard
linked into ``RUN/reference/hidden/`` (copied across file systems): fks never writes into a
complete store (a new extraction unlinks its files first), so a run cannot alter the cache,
and the run's own provenance hashes them like any extracted file.

**Writes are whole or absent.** A pool goes into the cache under ``.tmp-*`` and is renamed
when whole, ``reference.json`` last; a pool goes into a run under ``RUN/reference/.tmp-*`` and
is renamed to ``hidden/``. A failure to write the cache (a full disk) is a warning, never a
failed run.

``FKS_REFERENCE_CACHE=0`` turns the cache off (``fks cache list`` shows what it holds; delete a
folder to drop it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import re
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fks.errors import FksInputError
from fks.io import atomic_write_json, fks_cache_dir, read_json

__all__ = [
    "CACHE_KIND",
    "INFO_FILE",
    "cache_enabled",
    "machine_fingerprint",
    "pool_key",
    "cached_pool",
    "restore_pool",
    "drop_pool",
    "publish_pool",
]

log = logging.getLogger(__name__)

#: the cache's sub-folder (``fks cache list`` shows it as this kind)
CACHE_KIND = "reference"
#: written last into a whole cache folder: the key and what it was made of
INFO_FILE = "reference.json"
#: ``describe()`` fields that cannot change an extracted state: where a file lies (not what it
#: holds), and settings of generation alone (its time budget, log-prob kernel, decode loop and
#: worker threads)
_LOCAL = ("model_path", "checkpoint", "source_path", "max_time_s", "logprob_kernel",
          "decode_loop", "workers")


def cache_enabled() -> bool:
    """Return False when ``FKS_REFERENCE_CACHE`` is ``0``, ``false``, ``no`` or ``off``."""
    return os.environ.get("FKS_REFERENCE_CACHE", "1").strip().lower() not in (
        "0", "false", "no", "off")


def machine_fingerprint(device: str | None) -> dict[str, Any]:
    """Describe what decides how the kernels round here: the GPU's name, or the CPU's.

    For a CPU: its model name and whether it has the AVX512-BF16 and AMX instructions (read
    from ``/proc/cpuinfo`` where there is one).
    """
    if device and str(device).startswith("cuda"):
        try:
            import torch

            return {"gpu": torch.cuda.get_device_name(torch.device(device))}
        except Exception:  # noqa: BLE001 - no usable GPU: the CPU's print is still a key
            pass
    name, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    name = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        pass
    return {"cpu": name, "machine": platform.machine(),
            "flags": sorted(flags & {"avx512_bf16", "amx_bf16", "amx_tile", "avx512f"})}


def _strip_local(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip_local(v) for k, v in value.items() if k not in _LOCAL}
    return value


def pool_key(identity: Mapping[str, Any], token_ids: list[list[int]],
             model_info: Mapping[str, Any], *, batch_size: int, padding_side: str,
             extraction_version: int, share_prefixes: int = 0) -> str | None:
    """Return the cache key of a pool (the module docstring), or None when it has none.

    None when the weights have no sha256: then nothing can tell two models apart.
    """
    if not model_info.get("weights_sha256"):
        return None
    ids = hashlib.sha256(json.dumps(token_ids, separators=(",", ":")).encode()).hexdigest()
    material = {
        "extraction_version": int(extraction_version),
        "identity": dict(identity),
        "token_ids_sha256": ids,
        "model_info": _strip_local(model_info),
        "batch_size": int(batch_size),
        "padding_side": padding_side,
        "share_prefixes": int(share_prefixes),
        "machine": machine_fingerprint(model_info.get("device")),
    }
    text = json.dumps(material, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _folder(model_name: str, key: str, root: Path | None) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model_name).strip("._") or "model"
    return (root or fks_cache_dir()) / CACHE_KIND / f"{safe}-{key[:16]}"


def cached_pool(model_name: str, key: str, identity: Mapping[str, Any], weights_sha256: str,
                root: Path | None = None) -> Path | None:
    """Return the cached store for ``key`` when its records match, else None (logged).

    Checks the key, the store's identity and the weights: what a cached folder says of itself.
    Its files are checked where they are used, once linked into the run
    (:func:`fks.hidden.extract.extract_hidden`: shapes, dtypes and every sha256 against its
    ``meta.json``), so they are read once.
    """
    from fks.hidden.store import HIDDEN_DIR

    folder = _folder(model_name, key, root)
    info_path = folder / INFO_FILE
    if not info_path.is_file():
        return None
    store = folder / HIDDEN_DIR
    try:
        info = read_json(info_path)
        if not isinstance(info, dict) or info.get("key") != key:
            raise FksInputError("another key", path=info_path, field="key")
        meta = read_json(store / "meta.json")
        for name, want in identity.items():
            if meta.get(name) != want:
                raise FksInputError(f"{name} differs", path=store / "meta.json", field=name)
        got = (meta.get("model_info") or {}).get("weights_sha256")
        if got != weights_sha256:
            raise FksInputError("other weights", path=store / "meta.json",
                                field="model_info.weights_sha256")
    except (FksInputError, OSError, ValueError) as exc:
        log.warning("the cached reference pool in %s is not usable (%s); extracting it again",
                    folder, exc)
        return None
    return store


def drop_pool(cached: Path) -> None:
    """Remove the cache folder of the store ``cached`` (found damaged); never raises.

    Renamed out of sight first, so a run looking it up meanwhile finds nothing; the run that
    extracts the pool again then caches a whole one.
    """
    folder = cached.parent
    dead = folder.parent / f".tmp-dropped-{folder.name}-{uuid.uuid4().hex[:8]}"
    try:
        os.replace(folder, dead)
    except OSError:
        return
    shutil.rmtree(dead, ignore_errors=True)


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system, or links not allowed
        shutil.copyfile(src, dst)


def restore_pool(cached: Path, store_dir: Path) -> None:
    """Put the cached store ``cached`` in place of ``store_dir`` (whole, or not at all).

    ``store_dir`` (``RUN/reference/hidden``) may hold an unfinished or discarded store; it is
    replaced only once the new one is whole beside it.
    """
    tmp = store_dir.parent / f".tmp-{store_dir.name}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    try:
        for name in sorted(read_json(cached / "meta.json")["sha256"]):
            _link_or_copy(cached / name, tmp / name)
        _link_or_copy(cached / "meta.json", tmp / "meta.json")  # the completion mark, last
        if store_dir.exists():
            shutil.rmtree(store_dir)
        os.replace(tmp, store_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def publish_pool(store_dir: Path, model_name: str, key: str, info: Mapping[str, Any],
                 root: Path | None = None) -> Path | None:
    """Copy the complete store ``store_dir`` into the cache under ``key``; never raises.

    Returns the cache folder, or None when it could not be written (logged) or another
    process wrote the same key first (its copy is kept).
    """
    from fks.hidden.store import HIDDEN_DIR

    folder = _folder(model_name, key, root)
    if (folder / INFO_FILE).is_file():
        return folder
    tmp = folder.parent / f".tmp-{folder.name}-{uuid.uuid4().hex[:8]}"
    try:
        (tmp / HIDDEN_DIR).mkdir(parents=True)
        # the store's own files, meta.json last; nothing else that lies beside them
        names = [*sorted(read_json(store_dir / "meta.json").get("sha256") or {}), "meta.json"]
        for name in names:
            _link_or_copy(store_dir / name, tmp / HIDDEN_DIR / name)
        atomic_write_json(tmp / INFO_FILE, {"key": key, "model": model_name, **dict(info)})
        if (folder / INFO_FILE).is_file():  # another run published the same key meanwhile
            return folder
        if folder.exists():  # an unfinished folder from a crash: this one replaces it
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    except (OSError, FksInputError, AttributeError) as exc:
        log.warning("could not cache the reference pool in %s (%s); the run goes on", folder,
                    exc)
        return None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    log.info("cached the reference pool in %s", folder)
    return folder
