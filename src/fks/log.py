"""Logging and progress bars shared by every stage (rich, never bare prints).

On a terminal, :func:`progress_bar` draws rich's live bar. When stderr is not a terminal (a log
file, CI, ``nohup``), the bar is not drawn; instead each task logs one line when it starts, at
least every :data:`LOG_EVERY_S` seconds while it runs (on its next update after that long) and
once when it ends: ``generate: 320/3,266 (9.8 %) 2.13/s, eta 23m 03s, 41 tok/s`` -- done/total,
the mean rate since the task started, the ETA at that rate and the task's extra fields.
``FKS_PROGRESS_EVERY`` (seconds) overrides the interval.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["console", "results_console", "setup_logging", "progress_bar", "track", "LOG_EVERY_S",
           "LoggedProgress"]

T = TypeVar("T")

#: The console logs, progress and messages go to (stderr, so stdout stays machine-readable).
console = Console(stderr=True)
#: The console of a command's results -- the headline and comparison tables of ``fks run``,
#: ``fks demo`` and ``fks compare`` (stdout). With ``--json`` those tables go to
#: :data:`console` instead, and stdout holds only the JSON document.
results_console = Console()


def setup_logging(verbose: bool = False) -> None:
    """Route the ``fks`` logger through rich; ``verbose`` lowers the level to DEBUG."""
    logger = logging.getLogger("fks")
    logger.handlers.clear()
    handler = RichHandler(console=console, show_path=False, rich_tracebacks=False)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose else logging.INFO)
    logger.propagate = False


#: seconds between two progress lines in a log (stderr not a terminal)
LOG_EVERY_S = 30.0
_progress_log = logging.getLogger("fks.progress")


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h {m:02d}m {s:02d}s" if h else f"{m}m {s:02d}s" if m else f"{s}s"


class LoggedProgress(Progress):
    """A rich :class:`~rich.progress.Progress` that also logs a line per task now and then.

    Used (with the live display disabled) when stderr is not a terminal; see the module
    docstring. ``every`` is the interval in seconds, ``clock`` the time source (tests).
    """

    def __init__(self, *columns: Any, every: float = LOG_EVERY_S,
                 clock: Any = time.monotonic, **kwargs: Any) -> None:
        super().__init__(*columns, **kwargs)
        self._every, self._clock = every, clock
        self._started: dict[TaskID, float] = {}
        self._last: dict[TaskID, float] = {}
        self._done: set[TaskID] = set()
        self._stop_ticks = threading.Event()
        self._ticker: threading.Thread | None = None

    def start(self) -> None:
        """Start (as rich does) and a daemon thread that logs due lines between updates.

        A batch can take longer than the interval; the thread keeps the promise of a line at
        least every ``every`` seconds even then.
        """
        super().start()
        if self._ticker is None and self._every > 0:
            self._ticker = threading.Thread(target=self._tick, name="fks-progress", daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while not self._stop_ticks.wait(min(self._every, 5.0)):
            for task_id in list(self._started):
                self._maybe_log(task_id)

    def add_task(self, description: str, *args: Any, **kwargs: Any) -> TaskID:
        """Add a task (as rich does) and log its start."""
        task_id = super().add_task(description, *args, **kwargs)
        now = self._clock()
        self._started[task_id] = self._last[task_id] = now
        self._log(task_id, now)
        return task_id

    def update(self, task_id: TaskID, *args: Any, **kwargs: Any) -> None:
        """Update a task (as rich does); log a line when the interval has passed or it ended."""
        super().update(task_id, *args, **kwargs)
        self._maybe_log(task_id)

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        """Advance a task (as rich does); log a line when the interval has passed or it ended."""
        super().advance(task_id, advance)
        self._maybe_log(task_id)

    def stop(self) -> None:
        """Log the final line of every task not yet reported complete, then stop."""
        self._stop_ticks.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None
        for task_id in list(self._started):
            if task_id not in self._done:
                self._log(task_id, self._clock())
        super().stop()

    def _maybe_log(self, task_id: TaskID) -> None:
        with self._lock:  # the ticker thread and the caller may both get here
            if task_id not in self._started or task_id in self._done:
                return
            now = self._clock()
            task = self._tasks[task_id]
            finished = task.total is not None and task.completed >= task.total
            if finished or now - self._last[task_id] >= self._every:
                self._log(task_id, now)
                if finished:
                    self._done.add(task_id)

    def _log(self, task_id: TaskID, now: float) -> None:
        self._last[task_id] = now
        task = self._tasks[task_id]
        done, total = task.completed, task.total
        elapsed = now - self._started[task_id]
        head = (f"{task.description}: {done:,.0f}/{total:,.0f}" if total is not None
                else f"{task.description}: {done:,.0f}")
        if total:
            head += f" ({100 * done / total:.1f} %)"
        rest = []
        if elapsed > 0 and done > 0:
            rate = done / elapsed
            rest.append(f"{rate:,.2f}/s")
            if total is not None and done < total:
                rest.append(f"eta {_duration((total - done) / rate)}")
            elif total is not None:
                rest.append(f"done in {_duration(elapsed)}")
        rest += [f"{v} {k.replace('_', '/')}" for k, v in task.fields.items()
                 if v not in (None, "", "-")]
        _progress_log.info(head + (" " + ", ".join(rest) if rest else ""))


def progress_bar(*extra_columns: TextColumn, transient: bool = False) -> Progress:
    """Build a progress bar with count, ETA and any extra columns (e.g. tokens/s).

    On a terminal: rich's live bar. Otherwise (a log, CI) no bar is drawn, and each task logs
    a line with done/total, rate and ETA at least every :data:`LOG_EVERY_S` seconds
    (:class:`LoggedProgress`).
    """
    if not console.is_terminal:
        every = float(os.environ.get("FKS_PROGRESS_EVERY") or LOG_EVERY_S)
        return LoggedProgress(*extra_columns, console=console, disable=True, every=every)
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        *extra_columns,
        console=console,
        transient=transient,
        disable=not console.is_terminal,
    )


def track(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """Iterate with a progress bar (a thin wrapper so stages share one look)."""
    with progress_bar() as progress:
        yield from progress.track(items, total=total, description=description)
