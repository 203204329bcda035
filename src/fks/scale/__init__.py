"""Scale-out: shards that cannot lose or double a query, Ray, and sweeps over many models.

* :func:`merge_run` (``fks merge RUN``) -- verify every stage's shards, then join them.
* :func:`launch` (``fks launch``) -- one model's ``fks run`` with generation, extraction and
  judging split into shards, on a :class:`LocalExecutor` or a ``RayExecutor``
  (:mod:`fks.scale.ray_executor`, optional ``fks[ray]``).
* :func:`sweep` (``fks sweep``) -- many models, finished runs skipped, one leaderboard.

The shard rule itself is :func:`fks.generate.runner.assign_shards` (every stage uses it). Names
are imported on first use, so ``import fks.scale`` (done by the CLI) stays cheap. See
``README.md`` in this folder for the vLLM / Hugging Face split and the wall-time estimate.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "merge_run",
    "verify_run",
    "MergeResult",
    "launch",
    "LaunchSettings",
    "LaunchResult",
    "LocalExecutor",
    "sweep",
    "load_sweep",
    "SweepFile",
    "SweepEntry",
    "SweepResult",
]

_HOME = {
    "merge_run": "merge", "verify_run": "merge", "MergeResult": "merge",
    "launch": "launch", "LaunchSettings": "launch", "LaunchResult": "launch",
    "LocalExecutor": "launch",
    "sweep": "sweep", "load_sweep": "sweep", "SweepFile": "sweep", "SweepEntry": "sweep",
    "SweepResult": "sweep",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'fks.scale' has no attribute {name!r}")
    return getattr(importlib.import_module(f"fks.scale.{_HOME[name]}"), name)
