"""Worker threads that share one model on a CPU (issue 29).

A 2-core CPU runs a small model's matrix products faster as two streams of work on one torch
thread each than as one stream on two threads: a decode step's or a J-Lens backward pass's
products are small, and splitting each of them over two threads spends much of the time
synchronising. So generation (:func:`fks.generate.runner.batch_outputs`) and the J-Lens fit
(:func:`fks.hidden.jlens.fit_jlens`) run two batches, or two halves of the prompts, at once,
in threads that share the model's weights (read only; each has its own KV cache or autograd
graph) and one torch thread each (:func:`shared_threads`).

Measured by ``bench/bench_real_models.py`` (``generate --workers``, ``jlens --workers``); the
README's performance section has the figures. ``FKS_WORKERS=N`` sets the count (1: one stream
on every thread, as before).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from fks.errors import FksInputError

__all__ = ["resolve_workers", "shared_threads"]


def resolve_workers(device: Any, device_map: Any = None, workers: int | None = None) -> int:
    """How many streams of work share the model.

    ``workers`` when given, else ``$FKS_WORKERS``, else 2 on a CPU with at least 2 torch
    threads and 1 elsewhere (a GPU, a device map across devices).

    Raises:
        FksInputError: a count below 1, or ``FKS_WORKERS`` that is not a whole number.
    """
    import torch

    if workers is None:
        raw = os.environ.get("FKS_WORKERS", "").strip()
        if raw:
            try:
                workers = int(raw)
            except ValueError:
                raise FksInputError(f"must be a whole number; found {raw!r}",
                                    field="FKS_WORKERS") from None
    if workers is not None:
        if workers < 1:
            raise FksInputError(f"must be >= 1; found {workers}", field="workers")
        return int(workers)
    cpu = str(device).startswith("cpu") and not device_map
    return 2 if cpu and torch.get_num_threads() >= 2 else 1


@contextlib.contextmanager
def shared_threads(workers: int) -> Iterator[None]:
    """While open, each of ``workers`` streams gets its share of the process's torch threads.

    2 threads and 2 workers: one each. The count is given back on exit.
    """
    import torch

    if workers <= 1:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, before // workers))
    try:
        yield
    finally:
        torch.set_num_threads(before)
