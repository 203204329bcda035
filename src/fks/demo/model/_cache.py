"""Find or train the cached demo model: ``<cache>/demo_model/<key>/``, installed atomically.

The key is the sha256 of the training data (every example's prompt and answer, the tokenizer
corpus), the :class:`~fks.demo.model.DemoModelConfig`, the prompt cap and the fks version, so
any change to one of them trains a new model beside the old one. Training happens in a
temporary sibling folder that is renamed into place only once the weights, the tokenizer and
``demo_model.json`` (written last) are on disk: a crash never leaves a half-written model under
the key, and two processes racing keep whichever finished first.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fks import __version__
from fks.configs import ConfigSet
from fks.data.load import Benchmark, load_benchmark
from fks.demo.model._plan import TrainingPlan, plan_training
from fks.demo.model._train import DemoModelConfig, train_demo_model
from fks.errors import FksInputError
from fks.io import atomic_write_json, fks_cache_dir, read_json

__all__ = ["INFO_NAME", "cache_root", "demo_model_key", "ensure_demo_model"]

log = logging.getLogger(__name__)

#: written last into the model folder: key, config, training statistics, fact roles
INFO_NAME = "demo_model.json"


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """Return the folder holding the demo models.

    ``cache_dir`` when given, else ``$FKS_CACHE/demo_model``, else
    ``$XDG_CACHE_HOME/fks/demo_model`` (``~/.cache/fks/demo_model``).
    """
    if cache_dir is not None:
        return Path(cache_dir)
    return fks_cache_dir() / "demo_model"


def demo_model_key(plan: TrainingPlan, config: DemoModelConfig, max_prompt_len: int) -> str:
    """sha256 (hex) of the training data, the config, the prompt cap and the fks version."""
    h = hashlib.sha256()
    header = {"fks_version": __version__, "config": config.to_dict(),
              "max_prompt_len": max_prompt_len}
    h.update(json.dumps(header, sort_keys=True).encode())
    for ex in plan.examples:
        h.update(json.dumps([ex.prompt, ex.answer], ensure_ascii=False).encode())
    h.update(b"\0corpus\0")
    for text in plan.corpus:
        h.update(text.encode())
        h.update(b"\0")
    return h.hexdigest()


def _is_complete(folder: Path, key: str) -> bool:
    info = folder / INFO_NAME
    if not info.is_file():
        return False
    try:
        return read_json(info).get("key") == key
    except FksInputError:
        return False


def _info(key: str, plan: TrainingPlan, config: DemoModelConfig, stats: dict[str, Any],
          seconds: float, bench: Benchmark) -> dict[str, Any]:
    return {
        "key": key,
        "fks_version": __version__,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "config": config.to_dict(),
        "training": {**stats, "seconds": round(seconds, 1)},
        "benchmark_checksum": bench.checksum(),
        "role_counts": plan.role_counts(),
        "fact_roles": dict(sorted(plan.roles.items())),
        "taught_query_ids": [ex.query_id for ex in plan.examples],
    }


def _train_into(root: Path, key: str, plan: TrainingPlan, config: DemoModelConfig,
                max_prompt_len: int, bench: Benchmark) -> Path:
    """Train in a temporary folder under ``root`` and rename it to ``root/key``."""
    root.mkdir(parents=True, exist_ok=True)
    final = root / key
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:12]}-", dir=root))
    try:
        started = time.perf_counter()
        stats = train_demo_model(plan.examples, plan.corpus, tmp, config=config,
                                 max_prompt_len=max_prompt_len)
        atomic_write_json(tmp / INFO_NAME, _info(key, plan, config, stats,
                                                 time.perf_counter() - started, bench))
        try:
            os.rename(tmp, final)
        except OSError:
            if not _is_complete(final, key):  # not a lost race: a real failure
                raise
            log.info("another process installed the demo model first; using it")
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def ensure_demo_model(
    *,
    configs: ConfigSet,
    cache_dir: str | Path | None = None,
    benchmark: str | Path | Benchmark | None = None,
    config: DemoModelConfig | None = None,
) -> Path:
    """Return the folder of the trained demo model, training and caching it on first use.

    Args:
        configs: the configs in force (the demo benchmark is built with them; the prompt cap
            ``models.generation.max_prompt_len`` is read from them).
        cache_dir: the folder holding cached models (default: :func:`cache_root`).
        benchmark: the demo benchmark when already built (default: build it in a temporary
            folder with :func:`fks.demo.benchmark.build_demo_benchmark`).
        config: architecture and training settings (default :class:`DemoModelConfig`).

    Returns:
        ``<cache>/<key>``: a ``from_pretrained`` folder (safetensors weights, tokenizer) plus
        ``demo_model.json`` (key, config, training statistics, each fact's role).
    """
    config = config or DemoModelConfig()
    max_prompt_len = configs.models.generation.max_prompt_len
    with tempfile.TemporaryDirectory(prefix="fks-demo-bench-") as scratch:
        if benchmark is None:
            from fks.demo.benchmark import build_demo_benchmark

            benchmark = build_demo_benchmark(Path(scratch) / "benchmark", configs=configs)
        bench = benchmark if isinstance(benchmark, Benchmark) else load_benchmark(benchmark)
        plan = plan_training(bench)
        key = demo_model_key(plan, config, max_prompt_len)
        root = cache_root(cache_dir)
        final = root / key
        if _is_complete(final, key):
            log.info("demo model: using the cached %s", final)
            return final
        log.info("demo model: training %d examples into %s (first run only)",
                 len(plan.examples), final)
        return _train_into(root, key, plan, config, max_prompt_len, bench)
