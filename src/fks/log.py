"""Logging and progress bars shared by every stage (rich, never bare prints)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import TypeVar

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["console", "setup_logging", "progress_bar", "track"]

T = TypeVar("T")

#: The one console everything in fks writes to (stderr, so stdout stays machine-readable).
console = Console(stderr=True)


def setup_logging(verbose: bool = False) -> None:
    """Route the ``fks`` logger through rich; ``verbose`` lowers the level to DEBUG."""
    logger = logging.getLogger("fks")
    logger.handlers.clear()
    handler = RichHandler(console=console, show_path=False, rich_tracebacks=False)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose else logging.INFO)
    logger.propagate = False


def progress_bar(*extra_columns: TextColumn, transient: bool = False) -> Progress:
    """Build a progress bar with count, ETA and any extra columns (e.g. tokens/s).

    Disabled automatically when stderr is not a terminal, so logs and CI stay clean.
    """
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
