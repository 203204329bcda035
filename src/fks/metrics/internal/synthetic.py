"""Synthetic benchmarks, hidden-state stores and J-Lens fits with planted structure.

Used by the internal-metrics tests and by ``bench/bench_internal.py`` (no model needed). The
files follow the real contracts: a benchmark directory that :func:`fks.data.load.
load_benchmark` reads, a ``RUN/hidden/`` store written with :class:`fks.hidden.store.
HiddenWriter`, and ``RUN/jlens/`` written with :func:`fks.hidden.jlens.save_jlens`.

Planted states (:func:`planted_states`): for query ``q`` of fact ``f`` (relation ``r``) in
family ``t`` at layer ``l`` (depth ``u = l / (L - 1)``)::

    h = signal * (0.25 + u) * a_f + family_shift * b_t + relation_shift * c_r + offset * m
        + noise * e_q

with ``a, b, c, m, e`` standard normal (``e`` fresh per query and layer). ``signal`` = 0 leaves
no fact identity; larger ``signal`` / ``noise`` ratios give higher ISS and KTS.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fks.configs import load_configs
from fks.data.load import Benchmark, load_benchmark
from fks.hidden.store import HiddenWriter

__all__ = [
    "StateFn",
    "published_counts",
    "write_synthetic_benchmark",
    "planted_states",
    "write_synthetic_store",
    "write_synthetic_jlens",
]

#: ``(layer, query indices) -> (len(indices), d)`` states of the stored queries
StateFn = Callable[[int, np.ndarray], np.ndarray]


def published_counts(n_facts: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Draw queries per fact and main family shaped like the published benchmark.

    At ``n_facts = 2592``: anchor 2,592; paraphrase 10,053; format 7,776; context 6,829 (one
    fact without); multilingual 12,010 (2,402 facts) -- 39,260 main queries.
    """
    rng = np.random.default_rng(seed)
    scale = n_facts / 2592

    def spread(base: int, extra: int, covered: np.ndarray) -> np.ndarray:
        out = np.where(covered, base, 0)
        idx = rng.permutation(np.flatnonzero(covered))[:extra]
        out[idx] += 1
        return out

    everyone = np.ones(n_facts, bool)
    context_cov = everyone.copy()
    context_cov[rng.integers(n_facts)] = False
    multi_cov = np.zeros(n_facts, bool)
    multi_cov[rng.permutation(n_facts)[:round(2402 * scale)]] = True
    return {
        "anchor": np.ones(n_facts, dtype=np.int64),
        "paraphrase": spread(3, round(2277 * scale), everyone),
        "format": np.full(n_facts, 3, dtype=np.int64),
        "context": spread(2, round(1647 * scale), context_cov),
        "multilingual": np.where(multi_cov, 5, 0),
    }


def _fact_row(i: int, relation: str) -> dict[str, Any]:
    return {
        "fact_id": f"fact_{i + 1:06d}",
        "subject": {"canonical": f"Subject {i}", "aliases": [f"Subject {i}"]},
        "object": {"canonical": f"Object {i}", "aliases": [f"Object {i}"]},
        "relation": {"relation_id": relation, "direction": "forward"},
        "qualification_question": f"What is the {relation} of Subject {i}?",
        "is_functional": True,
        "answer_type": "entity",
        "answer_in_subject_surface": i % 7 == 0,
    }


def write_synthetic_benchmark(
    root: str | Path, relation_sizes: Sequence[int], counts: Mapping[str, np.ndarray],
    *, duplicate_prompts: int = 0,
) -> Benchmark:
    """Write and load a synthetic benchmark.

    Relation ``rel_{r:02d}`` gets ``relation_sizes[r]`` facts and fact ``f`` gets
    ``counts[family][f]`` queries of each family (families from the configs).
    """
    import json

    conditions = load_configs().eval_conditions
    rels = [f"rel_{r:02d}" for r, n in enumerate(relation_sizes) for _ in range(n)]
    facts = [_fact_row(i, rel) for i, rel in enumerate(rels)]
    queries: list[dict[str, Any]] = []
    dup_left = duplicate_prompts
    for i, fact in enumerate(facts):
        for family in (f for f in conditions.main_forward() if f in counts):
            spec = conditions.families[family]
            texts = [f"Q{i} {family} {k}" for k in range(int(counts[family][i]))]
            if family == "paraphrase" and dup_left > 0 and texts:
                texts.append(texts[0])
                dup_left -= 1
            for k, text in enumerate(texts):
                queries.append({
                    "query_id": f"query_{len(queries) + 1:08d}", "fact_id": fact["fact_id"],
                    "relation": rels[i], "condition_family": family, "variant_id": f"v{k}",
                    "language": "fr" if family == "multilingual" else "en", "query": text,
                    "target_slot": spec.target_slot,
                    "gold_canonical": fact["object"]["canonical"],
                    "gold_aliases": fact["object"]["aliases"], "is_assisted": spec.is_assisted,
                    "is_well_posed": spec.is_well_posed, **spec.flags(),
                    "answer_in_subject_surface": fact["answer_in_subject_surface"],
                })
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for name, rows in ((f"benchmark_facts_{len(facts)}.jsonl", facts),
                       (f"evaluation_queries_{len(queries)}.jsonl", queries)):
        with (root / name).open("w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)
    return load_benchmark(root)


def planted_states(bench: Benchmark, *, d: int, n_layers: int, signal: float = 1.0,
                   noise: float = 1.0, family_shift: float = 1.0, relation_shift: float = 1.0,
                   offset: float = 3.0, seed: int = 0) -> StateFn:
    """Build a :data:`StateFn` over the benchmark's main-forward queries (module docstring)."""
    rng = np.random.default_rng(seed)
    queries = [q for q in bench.queries if q.use_for_main_forward]
    fpos = {f.fact_id: i for i, f in enumerate(bench.facts)}
    fams = sorted({q.condition_family for q in queries})
    rels = sorted({q.relation for q in queries})
    fact = np.array([fpos[q.fact_id] for q in queries])
    fam = np.array([fams.index(q.condition_family) for q in queries])
    rel = np.array([rels.index(q.relation) for q in queries])
    a = rng.standard_normal((len(bench.facts), d), dtype=np.float32)
    b = rng.standard_normal((len(fams), d), dtype=np.float32)
    c = rng.standard_normal((len(rels), d), dtype=np.float32)
    m = rng.standard_normal(d, dtype=np.float32)

    def states(layer: int, idx: np.ndarray) -> np.ndarray:
        u = layer / max(n_layers - 1, 1)
        e = np.random.default_rng([seed, layer, int(idx[0])]).standard_normal(
            (len(idx), d), dtype=np.float32)
        e *= noise
        e += signal * (0.25 + u) * a[fact[idx]]
        e += family_shift * b[fam[idx]]
        e += relation_shift * c[rel[idx]]
        e += offset * m
        return e

    return states


def write_synthetic_store(run_dir: str | Path, bench: Benchmark, states: StateFn, *, d: int,
                          n_layers: int, layers: Sequence[int] | None = None,
                          model: str = "synthetic", batch: int = 1024, duplicate: int = 0,
                          duplicate_noise: float = 0.0) -> dict[str, Any]:
    """Write ``RUN/hidden/`` for the benchmark's main-forward queries (benchmark order).

    ``duplicate``: also write the §18.2 second pass (``duplicate_pass.npz``) of that many
    queries, re-evaluating ``states`` in float32 (plus ``duplicate_noise`` times a standard
    normal per component, relative to each row's norm, to plant a non-reproducible extraction).
    """
    from fks.generate.prompts import PROMPT_VERSION

    queries = [q for q in bench.queries if q.use_for_main_forward]
    rows = [{"query_id": q.query_id, "fact_id": q.fact_id, "relation": q.relation,
             "condition_family": q.condition_family, "language": q.language,
             "use_for_main_forward": q.use_for_main_forward,
             "use_for_reverse_analysis": q.use_for_reverse_analysis,
             "use_for_recognition_analysis": q.use_for_recognition_analysis,
             "answer_in_subject_surface": q.answer_in_subject_surface} for q in queries]
    layers = list(range(n_layers)) if layers is None else list(layers)
    identity = {"model": model, "n_layers": n_layers, "prompt_version": PROMPT_VERSION,
                "benchmark_checksum": bench.checksum()}
    writer = HiddenWriter(run_dir, rows, layers, d, identity)
    for s in range(0, len(rows), batch):
        idx = np.arange(s, min(s + batch, len(rows)))
        writer.write(idx, {layer: states(layer, idx) for layer in layers})
    meta = writer.finalize({})
    if duplicate:
        from fks.hidden.extract import DUPLICATE_PASS_NAME, DUPLICATE_SEED
        from fks.hidden.store import HIDDEN_DIR
        from fks.io import atomic_path

        rng = np.random.default_rng([DUPLICATE_SEED, 18])
        picked = np.sort(rng.choice(len(rows), size=min(duplicate, len(rows)), replace=False))
        arrays = {}
        for layer in layers:
            # re-evaluated batch by batch as written (a StateFn may depend on its batch)
            x = np.concatenate([np.asarray(states(layer, np.arange(s, min(s + batch,
                                                                           len(rows)))),
                                           dtype=np.float32)
                                for s in range(0, len(rows), batch)])[picked]
            if duplicate_noise:
                scale = np.linalg.norm(x, axis=1, keepdims=True) / np.sqrt(d)
                x = x + duplicate_noise * scale * rng.standard_normal(x.shape).astype(np.float32)
            arrays[f"layer_{layer:03d}"] = x
        path = Path(run_dir) / HIDDEN_DIR / DUPLICATE_PASS_NAME
        with atomic_path(path, suffix=".npz") as tmp, open(tmp, "wb") as fh:
            np.savez(fh, rows=picked.astype(np.int64), compute_dtype=np.array("float32"),
                     **arrays)
    return meta


def write_synthetic_jlens(run_dir: str | Path, *, d: int, layers: Sequence[int], n_layers: int,
                          strength: float = 0.5, seed: int = 0) -> Path:
    """Write ``RUN/jlens/`` with ``J = I + strength * R / sqrt(d)`` (``R`` standard normal).

    The last block gets the identity, as a real fit gives.
    """
    from fks.hidden.jlens import save_jlens

    rng = np.random.default_rng(seed)
    jl = {}
    for layer in layers:
        J = np.eye(d, dtype=np.float32)
        if layer != n_layers - 1:
            J += (strength / np.sqrt(d)) * rng.standard_normal((d, d), dtype=np.float32)
        jl[layer] = J
    return save_jlens(run_dir, jl, {"model": "synthetic", "n": 0})
