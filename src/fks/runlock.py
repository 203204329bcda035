"""One writer per run directory: an OS-level advisory lock on ``RUN/.fks.lock``.

A run directory holds hours of GPU work. Two processes appending to one ``generations.jsonl``
interleave their records (every query twice, both exiting 0), so every stage that writes into a
run directory holds this lock for as long as it writes:

* The lock is ``fcntl.flock`` on ``RUN/.fks.lock``. The kernel drops it when the holding
  process dies, ``kill -9`` included, so a stale lock cannot exist: the file may stay behind,
  but an unlocked file is free.
* The holder writes its PID, host, command and start time into the lock file, so a second
  writer can say who holds it.
* By default a second writer fails at once with :class:`RunLockedError` (exit code 2), naming
  the holder and the lock file. With ``fks --wait ...`` (or ``FKS_LOCK_WAIT=SECONDS``; ``0``
  waits forever) it waits instead, then proceeds, and resumes from whatever the first writer
  left (the resumable stages never double a record that is already on disk).
* The lock is re-entrant within one process: ``fks run`` takes it once and every stage it calls
  takes it again for free. Different processes exclude each other, whatever their threads do.
* ``flock`` is advisory and local: it protects a run directory on a local disk. On NFS it
  depends on the server (Linux NFSv4 maps it onto byte-range locks); put run directories that
  several machines write on storage whose locks are known to work, or give each machine its own
  shard folder (``--shard``), which is what ``fks launch`` does.

Use :func:`run_dir_lock` as a context manager, or :func:`locks_run_dir` as a decorator on a
library function whose argument names the run directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import inspect
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from fks.errors import FksInputError
from fks.io import write_error

__all__ = [
    "LOCK_NAME",
    "RunLockedError",
    "run_dir_lock",
    "run_dirs_lock",
    "lock_path_of",
    "locks_run_dir",
    "set_lock_wait",
    "lock_wait",
]

LOCK_NAME = ".fks.lock"
_POLL_S = 0.2

F = TypeVar("F", bound=Callable[..., Any])

_held: dict[str, list[Any]] = {}  # realpath -> [file object, depth]
_guard = threading.RLock()
_wait: dict[str, float | None] = {"seconds": None}  # None: fail at once; 0: forever


class RunLockedError(FksInputError):
    """Another live process holds the run directory's lock (exit code 2)."""


def set_lock_wait(seconds: float | None) -> None:
    """Set how long a writer waits for a held lock: ``None`` fails at once, ``0`` forever."""
    _wait["seconds"] = seconds


def lock_wait() -> float | None:
    """Return the wait in force: :func:`set_lock_wait`, else ``FKS_LOCK_WAIT``, else ``None``."""
    if _wait["seconds"] is not None:
        return _wait["seconds"]
    env = os.environ.get("FKS_LOCK_WAIT")
    if env is None or env.strip() == "":
        return None
    try:
        value = float(env)
    except ValueError:
        raise FksInputError(f"FKS_LOCK_WAIT must be a number of seconds, found {env!r}",
                            field="FKS_LOCK_WAIT") from None
    if value < 0 or value != value:
        raise FksInputError(f"FKS_LOCK_WAIT must be >= 0, found {env!r}",
                            field="FKS_LOCK_WAIT")
    return value


def _holder(handle: Any) -> str:
    try:
        handle.seek(0)
        info = json.loads(handle.read() or "{}")
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict) or "pid" not in info:
        return "another process (holder unknown)"
    return (f"pid {info.get('pid')} on host {info.get('host')} "
            f"({info.get('command', '?')}, since {info.get('since', '?')})")


def _open(lock_path: Path, create: bool) -> Any:
    try:
        if create:
            lock_path.parent.mkdir(parents=True, exist_ok=True)
        # "a+" creates without truncating: the holder's note survives until we own the lock
        return open(lock_path, "a+", encoding="utf-8")  # noqa: SIM115 (held across calls)
    except OSError as err:
        raise FksInputError(f"cannot create the run-directory lock: {err.strerror or err}",
                            path=lock_path) from None


def _acquire(handle: Any, lock_path: Path, wait: float | None) -> None:
    deadline = None if not wait else time.monotonic() + wait
    while True:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if wait is None or (deadline is not None and time.monotonic() >= deadline):
                holder = _holder(handle)
                handle.close()
                hint = ("it is still running" if wait is None
                        else f"it was still held after waiting {wait:g} s")
                raise RunLockedError(
                    f"run directory is being written by {holder}; {hint}. Wait for it to end, "
                    "or rerun with `fks --wait ...` to queue behind it",
                    path=lock_path) from None
            time.sleep(_POLL_S)


def _note(handle: Any) -> None:
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({
        "pid": os.getpid(), "host": socket.gethostname(),
        "command": " ".join(Path(a).name if i == 0 else a
                            for i, a in enumerate(sys.argv[:6])) or "python",
        "since": datetime.now(UTC).isoformat(timespec="seconds"),
    }))
    handle.flush()


def lock_path_of(run_dir: str | Path, shard: tuple[int, int] | None = None) -> Path:
    """Return the lock file of a run (``RUN/.fks.lock``) or of one shard of it.

    A shard's lock sits in the run directory (``RUN/.fks.shard_i_of_n.lock``), not in its
    shard folder, so taking it never creates a ``RUN/shards/shard_i_of_n/`` folder that the
    shard bookkeeping would read as a started split.
    """
    name = LOCK_NAME if shard is None else f".fks.shard_{shard[0]}_of_{shard[1]}.lock"
    return Path(run_dir) / name


@contextlib.contextmanager
def run_dir_lock(run_dir: str | Path, *, shard: tuple[int, int] | None = None,
                 wait: float | None | bool = False, create: bool = False) -> Iterator[Path]:
    """Hold the exclusive writer lock of ``run_dir`` (re-entrant within this process).

    Args:
        run_dir: the run directory.
        shard: ``(i, n)``: the lock of that shard of the run (shards are written side by side,
            each by one writer).
        wait: ``False`` (default): use :func:`lock_wait` (``fks --wait`` / ``FKS_LOCK_WAIT``);
            ``None``: fail at once; a number: wait that many seconds (``0`` forever);
            ``True``: wait forever.
        create: create a missing ``run_dir`` (the stages that start a run); otherwise a
            missing run directory is not locked -- there is nothing in it to protect, and the
            stage reports the missing input itself.

    Yields:
        The lock file's path.

    Raises:
        RunLockedError: another live process holds the lock (and the wait ran out).
    """
    if wait is False:
        wait = lock_wait()
    elif wait is True:
        wait = 0.0
    lock_path = lock_path_of(run_dir, shard)
    if not create and not lock_path.parent.is_dir():
        yield lock_path
        return
    key = os.path.realpath(lock_path)
    with _guard:
        entry = _held.get(key)
        if entry is not None:
            entry[1] += 1
        else:
            handle = _open(lock_path, create)
            _acquire(handle, lock_path, wait)
            try:
                _note(handle)
            except OSError as err:  # a full disk: the stage could not write its outputs either
                with contextlib.suppress(OSError):
                    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
                with contextlib.suppress(OSError):
                    handle.close()
                raise write_error(err, lock_path) from None
            _held[key] = [handle, 1]
    try:
        yield lock_path
    finally:
        with _guard:
            entry = _held[key]
            entry[1] -= 1
            if entry[1] == 0:
                del _held[key]
                with contextlib.suppress(OSError):
                    fcntl.flock(entry[0].fileno(), fcntl.LOCK_UN)
                entry[0].close()


@contextlib.contextmanager
def run_dirs_lock(run_dirs: Sequence[str | Path]) -> Iterator[None]:
    """Hold the locks of several run directories, taken in a fixed order (no deadlock)."""
    with contextlib.ExitStack() as stack:
        for run in sorted({os.path.realpath(r) for r in run_dirs}):
            stack.enter_context(run_dir_lock(run))
        yield


def locks_run_dir(arg: str, *, create: bool = False) -> Callable[[F], F]:
    """Decorate a library function so it holds the lock of the run directory in ``arg``.

    ``arg`` names the parameter holding the run directory (a path, or a sequence of paths for
    functions that write into several runs). When the function has a ``shard`` argument that
    is set, the lock is that shard's: shards of one run are written side by side by
    different processes, each by one writer. ``create`` creates a missing run directory (for
    the functions that start a run).
    """

    def decorate(func: F) -> F:
        signature = inspect.signature(func)

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs).arguments
            value = bound[arg]
            value = getattr(value, "run_dir", value)  # a context object that names its run
            if isinstance(value, str | os.PathLike):
                with run_dir_lock(value, shard=bound.get("shard"), create=create):
                    return func(*args, **kwargs)
            with run_dirs_lock(list(value)):
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
