"""Run shard tasks on a Ray cluster (optional: ``pip install 'fks[ray]'``).

``RayExecutor(address=None)`` starts a local Ray instance on this machine (``ray.init()``;
``num_cpus``/``num_gpus`` cap what it offers), ``address="auto"`` or ``"ray://host:10001"``
joins a running cluster. Each :class:`~fks.scale.launch.ShardTask` becomes one Ray task of
:func:`fks.scale.launch.run_shard_task` declaring its ``num_gpus`` and ``num_cpus``, retried up
to ``max_retries`` times on any exception or worker death (``retry_exceptions=True``). GPU
tasks use ``max_calls=1``: the worker process exits after its task and so frees the GPU.

On a cluster every node must see the run directory at the same path (a shared file system)
and have fks installed (the same version as the driver).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from typing import Any

from fks.errors import FksInputError
from fks.scale.launch import ShardTask, run_model_task, run_shard_task, task_payload

__all__ = ["INSTALL_HINT", "import_ray", "RayExecutor"]

log = logging.getLogger(__name__)

INSTALL_HINT = ("the Ray launcher needs the optional Ray package: pip install 'fks[ray]' "
                "(or run `fks launch` without --ray to run the shards one after another here)")


def import_ray() -> Any:
    """Import :mod:`ray`, or raise :class:`FksInputError` saying how to install it."""
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise FksInputError(f"{INSTALL_HINT} ({type(exc).__name__}: {exc})",
                            field="ray") from None


def _last_line(exc: BaseException) -> str:
    """Return the last line of a Ray error (the remote exception), not its traceback."""
    lines = [x for x in str(exc).strip().splitlines() if x.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:300]


class RayExecutor:
    """Submit shard tasks to Ray (see the module docstring).

    Args:
        address: a cluster address (``auto``, ``ray://host:port``); None starts a local instance.
        num_cpus: CPUs a local instance offers (None: all).
        num_gpus: GPUs a local instance offers (None: all it detects).
        max_retries: retries per task.
    """

    name = "ray"

    def __init__(self, *, address: str | None = None, num_cpus: int | None = None,
                 num_gpus: int | None = None, max_retries: int = 2) -> None:
        self.ray = import_ray()
        self.max_retries = max_retries
        self._started = not self.ray.is_initialized()
        if self._started:
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address:
                kwargs["address"] = address
            else:
                kwargs.update(num_cpus=num_cpus, num_gpus=num_gpus)
            self.ray.init(**kwargs)
        self._remote = self.ray.remote(run_shard_task)
        log.info("Ray resources: %s", self.ray.cluster_resources())

    def run(self, tasks: Sequence[ShardTask], payload: dict[str, Any]) -> list[dict[str, Any]]:
        """Submit every task at once; wait for all; results in task order.

        Raises:
            RuntimeError: a task that still failed after ``max_retries`` retries.
        """
        refs = []
        for t in tasks:
            opts: dict[str, Any] = {"num_cpus": t.num_cpus, "num_gpus": t.num_gpus,
                                    "max_retries": self.max_retries, "retry_exceptions": True}
            if t.num_gpus:
                opts["max_calls"] = 1
            refs.append(self._remote.options(**opts).remote(payload, t.stage, t.shard, t.n))
        results = []
        for t, ref in zip(tasks, refs, strict=True):
            try:
                results.append(self.ray.get(ref))
            except self.ray.exceptions.RayError as exc:
                for other in refs:
                    self.ray.cancel(other)
                raise RuntimeError(f"task {t.label} failed after {self.max_retries + 1} "
                                   f"attempt(s): {_last_line(exc)}") from None
        return results

    def run_models(self, contexts: Sequence[Any], stages: Sequence[str] | None, *,
                   num_gpus: float = 0.0, num_cpus: float = 1.0) -> dict[str, dict[str, Any]]:
        """Run each model's whole pipeline as one Ray task, all at once (``fks sweep``).

        A model whose task still fails after the retries is reported, not raised, so the
        other models finish: ``{model: {"ran": [...]} or {"error", "internal"}}``.
        """
        opts: dict[str, Any] = {"num_cpus": num_cpus, "num_gpus": num_gpus,
                                "max_retries": self.max_retries, "retry_exceptions": True}
        if num_gpus:
            opts["max_calls"] = 1
        remote = self.ray.remote(run_model_task)
        refs = {ctx.model: remote.options(**opts).remote(task_payload(ctx), stages)
                for ctx in contexts}
        out: dict[str, dict[str, Any]] = {}
        for name, ref in refs.items():
            try:
                out[name] = self.ray.get(ref)
            except self.ray.exceptions.RayError as exc:
                out[name] = {"error": f"failed after {self.max_retries + 1} attempt(s): "
                             f"{_last_line(exc)}", "internal": True}
        return out

    def close(self) -> None:
        """Shut down the local Ray instance if this executor started it."""
        if self._started and self.ray.is_initialized():
            self.ray.shutdown()
