"""Helpers of the ISS/KTS tests: small synthetic runs with planted structure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from fks.configs import ConfigSet, load_configs
from fks.metrics.internal.synthetic import (
    StateFn,
    planted_states,
    published_counts,
    write_synthetic_benchmark,
    write_synthetic_jlens,
    write_synthetic_store,
)

D, L = 12, 5  # window l/(L-1) >= 0.4: layers 2, 3, 4; late (>= 0.8): layer 4
SIZES = (14, 16, 10)


def configs(root: Path, **metrics: object) -> ConfigSet:
    """The default configs with ``metrics.yaml`` keys overridden."""
    if not metrics:
        return load_configs([])
    path = root / "metrics.yaml"
    path.write_text(yaml.safe_dump(metrics))
    return load_configs([path])


def make_bench(root: Path, sizes=SIZES, counts=None, seed: int = 1, **kw):
    counts = published_counts(sum(sizes), seed=seed) if counts is None else counts
    return write_synthetic_benchmark(root / "bench", sizes, counts, **kw)


def make_run(root: Path, bench, *, name: str = "run", d: int = D, n_layers: int = L,
             states: StateFn | None = None, jlens: bool = True, layers=None, seed: int = 0,
             duplicate: int = 0, duplicate_noise: float = 0.0, **planted) -> Path:
    """Write ``root/name`` with a hidden store (planted states unless ``states``) and J-Lens."""
    run = root / name
    states = states or planted_states(bench, d=d, n_layers=n_layers, seed=seed, **planted)
    write_synthetic_store(run, bench, states, d=d, n_layers=n_layers, layers=layers,
                          model=f"model-{name}", duplicate=duplicate,
                          duplicate_noise=duplicate_noise)
    if jlens:
        write_synthetic_jlens(run, d=d, layers=range(n_layers), n_layers=n_layers, seed=seed)
    return run


def main_queries(bench):
    return [q for q in bench.queries if q.use_for_main_forward]


def fact_codes(bench) -> np.ndarray:
    pos = {f.fact_id: i for i, f in enumerate(bench.facts)}
    return np.array([pos[q.fact_id] for q in main_queries(bench)])
