"""Same-relation negative facts for ISS (spec §7.8, §14.3), sampled once and stored.

Rule (``fks-negatives-v1``): for fact ``f`` of relation ``r``, the candidates are the other
facts of ``r`` in the benchmark, sorted by ``fact_id``. At most ``max_per_fact`` of them are
kept: all when there are that few, otherwise a uniform sample without replacement drawn with
``numpy.random.default_rng([seed, int(sha256(fact_id)[:16], 16)])`` (so one fact's list does
not depend on any other relation), stored sorted. The list is a function of the benchmark and
the seed only, hence the same for every model.

It is written once beside the benchmark (``<benchmark>/negatives_seed<seed>_max<K>.json``,
keyed by the benchmark checksum) and reused by every later run on that benchmark; each run also
keeps a copy in ``RUN/metrics/negatives.json``. A stored file whose checksum, seed or size
differs from the current ones is replaced (logged); one that matches is validated and reused.
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fks.errors import FksInputError
from fks.io import atomic_write_json, read_json
from fks.metrics.internal.scores import Negatives

__all__ = [
    "NEGATIVES_FORMAT",
    "sample_negatives",
    "negatives_document",
    "load_or_create_negatives",
    "negatives_from_lists",
    "random_negatives",
]

log = logging.getLogger(__name__)

NEGATIVES_FORMAT = "fks-negatives-v1"


def _fact_seed(fact_id: str) -> int:
    return int(hashlib.sha256(fact_id.encode("utf-8")).hexdigest()[:16], 16)


def sample_negatives(fact_ids: Sequence[str], relations: Sequence[str], *, max_per_fact: int,
                     seed: int) -> dict[str, list[str]]:
    """Sample ``{fact_id: sorted negative fact ids}`` by the module's rule.

    ``fact_ids`` and ``relations`` are parallel (each fact's relation id).
    """
    by_rel: dict[str, list[str]] = defaultdict(list)
    for fid, rel in zip(fact_ids, relations, strict=True):
        by_rel[rel].append(fid)
    out: dict[str, list[str]] = {}
    for members in by_rel.values():
        members = sorted(members)
        for fid in members:
            cand = [g for g in members if g != fid]
            if len(cand) > max_per_fact:
                rng = np.random.default_rng([seed, _fact_seed(fid)])
                pick = rng.choice(len(cand), size=max_per_fact, replace=False)
                cand = sorted(cand[i] for i in pick)
            out[fid] = cand
    return out


def negatives_document(fact_ids: Sequence[str], relations: Sequence[str], *, checksum: str,
                       max_per_fact: int, seed: int) -> dict[str, Any]:
    """Build the stored JSON object: rule, benchmark checksum, seed, size and the lists."""
    return {
        "format": NEGATIVES_FORMAT,
        "rule": "same relation, other facts sorted by fact_id; at most max_per_fact, drawn "
                "without replacement with numpy default_rng([seed, int(sha256(fact_id)[:16], "
                "16)]); stored sorted",
        "benchmark_checksum": checksum,
        "seed": seed,
        "max_per_fact": max_per_fact,
        "n_facts": len(fact_ids),
        "negatives": sample_negatives(fact_ids, relations, max_per_fact=max_per_fact, seed=seed),
    }


def _validate(doc: Any, path: Path, fact_ids: Sequence[str], relations: Sequence[str],
              max_per_fact: int) -> None:
    """Raise when a stored list does not fit the benchmark (unknown fact, other relation, ...)."""
    rel_of = dict(zip(fact_ids, relations, strict=True))
    lists = doc.get("negatives") if isinstance(doc, dict) else None
    if not isinstance(lists, dict):
        raise FksInputError("expected an object 'negatives' {fact_id: [fact_id, ...]}",
                            path=path, field="negatives")
    for fid in fact_ids:
        neg = lists.get(fid)
        if not isinstance(neg, list):
            raise FksInputError(f"no negative list for {fid}", path=path, field=f"negatives.{fid}")
        bad = next((g for g in neg if rel_of.get(g) != rel_of[fid] or g == fid), None)
        if bad is not None or len(set(neg)) != len(neg) or len(neg) > max_per_fact:
            raise FksInputError(
                f"negatives of {fid} must be at most {max_per_fact} distinct other facts of "
                f"relation {rel_of[fid]!r}; found {bad if bad is not None else neg[:3]!r}",
                path=path, field=f"negatives.{fid}")


def load_or_create_negatives(
    bench_root: Path, fact_ids: Sequence[str], relations: Sequence[str], *, checksum: str,
    max_per_fact: int, seed: int, run_copy: Path,
) -> tuple[dict[str, Any], Path | None]:
    """Reuse the stored list beside the benchmark when it matches, else derive and store it.

    Returns:
        ``(document, shared path or None when the benchmark folder is not writable)``; the
        document is also written to ``run_copy``.

    Raises:
        FksInputError: a matching stored file whose lists do not fit the benchmark.
    """
    shared: Path | None = Path(bench_root) / f"negatives_seed{seed}_max{max_per_fact}.json"
    doc = None
    if shared is not None and shared.is_file():
        old = read_json(shared)
        same = isinstance(old, dict) and all(
            old.get(k) == v for k, v in (("format", NEGATIVES_FORMAT), ("seed", seed),
                                         ("max_per_fact", max_per_fact),
                                         ("benchmark_checksum", checksum)))
        if same:
            _validate(old, shared, fact_ids, relations, max_per_fact)
            doc = old
            log.info("reusing negatives %s", shared)
        else:
            log.warning("negatives file %s is for another benchmark/seed; replacing it", shared)
    if doc is None:
        doc = negatives_document(fact_ids, relations, checksum=checksum,
                                 max_per_fact=max_per_fact, seed=seed)
        try:
            atomic_write_json(shared, doc)
        except OSError as exc:
            log.warning("cannot store negatives beside the benchmark (%s); keeping the run copy",
                        exc)
            shared = None
    atomic_write_json(run_copy, doc)
    return doc, shared


def negatives_from_lists(lists: Mapping[str, Sequence[str]], fact_ids: Sequence[str],
                         fact_relation: np.ndarray) -> Negatives:
    """Turn stored lists into index arrays; block ``r`` holds the facts of relation code ``r``.

    Padding entries point at the fact itself and are masked out.
    """
    pos = {fid: i for i, fid in enumerate(fact_ids)}
    F = len(fact_ids)
    K = max((len(lists[f]) for f in fact_ids), default=0)
    idx = np.tile(np.arange(F)[:, None], (1, max(K, 1)))
    mask = np.zeros_like(idx, dtype=bool)
    for i, fid in enumerate(fact_ids):
        neg = [pos[g] for g in lists[fid]]
        idx[i, :len(neg)] = neg
        mask[i, :len(neg)] = True
    n_rel = int(fact_relation.max(initial=-1)) + 1
    blocks = tuple(np.flatnonzero(fact_relation == r) for r in range(n_rel))
    return Negatives(idx=idx, mask=mask, blocks=blocks)


def random_negatives(fact_relation: np.ndarray, counts: np.ndarray, seed: int) -> Negatives:
    """Draw random negatives from *other* relations (the §18.4 comparison).

    Fact ``f`` gets ``counts[f]`` facts drawn without replacement from other relations.
    """
    rng = np.random.default_rng(seed)
    F = len(fact_relation)
    K = int(max(counts.max(initial=0), 1))
    idx = np.tile(np.arange(F)[:, None], (1, K))
    mask = np.zeros_like(idx, dtype=bool)
    for i in range(F):
        pool = np.flatnonzero(fact_relation != fact_relation[i])
        k = int(min(counts[i], len(pool)))
        idx[i, :k] = rng.choice(pool, size=k, replace=False)
        mask[i, :k] = True
    return Negatives(idx=idx, mask=mask, blocks=(np.arange(F),))
