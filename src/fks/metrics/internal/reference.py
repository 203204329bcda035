"""The reference pool: one §7.4-7.5 geometry for a model, whatever the run's size (issue 27).

**Why.** The spec fits the residualisation (§7.4) and the whitening (§7.5, PCA to ``k =
min(512, d)``) on all main queries of the run. On the full benchmark (2,592 facts, 39,260 main
queries) that is a good estimate of the model's own geometry. On a ``--limit`` slice it is not:
a fact's own states are a large share of a small fit, and PCA whitening then scales down exactly
the directions that carry the run's fact identities (and scales up the noise-only ones) -- on
planted states with a full-benchmark ISS of 0.71, a 200-fact run reads 0.44 and a 50-fact run
0.08. ``bench/bench_iss_size.py`` compares four estimators over 20-2,592 facts, d = 576 and
2,304, signal 0-3 (fit on the run, a dimension tied to the number of facts, five-fold
cross-fitting by fact, and this pool): only the pool keeps ISS and KTS within a few thousandths
of the full-benchmark value at every size, and it *is* the spec's computation on the full
benchmark.

**What.** ``RUN/reference/hidden/`` is a hidden-state store (the usual format,
:mod:`fks.hidden.store`) of the same model over every main-forward query of the *parent*
benchmark, the one ``--limit`` sliced (``fks run --limit`` writes it during ``extract``;
``fks extract RUN --reference-benchmark FULL`` for a standalone extraction). When it exists,
every fit of :mod:`fks.metrics.internal` -- residualisation means, whitening, its rank bound and
rounding floor -- is made on the pool's rows and applied to the run's own stored states; the
run's facts are scored exactly as before (centroids, same-relation negatives of the run,
ISS, KTS). A run over the whole parent benchmark needs no pool: the pool would be the run.
Since stop 43 the pool holds every layer the run stores, and the run's own states are copied
out of it (:func:`fks.hidden.extract.extract_with_pool`): a query's state is the same bytes in
the run and in the pool.

Checks (:func:`load_reference`): the pool was extracted by the same model (name, layers,
width), holds every main query of the run with the same fact, relation and family, and holds
only main-forward rows. Label-altering sanity fits (§18.3 shuffled families, §18.4 without
relation means) alter the pool's labels the same way: the run's rows get the altered codes,
the rest of the pool keeps its own (:meth:`Reference.embed`).

**KTS-ID against the pool** (stop 33): the headline KTS identification and its unwhitened
twin rank each run fact among the pool's facts of its relation
(:class:`fks.metrics.internal.scores.PoolIdentity`, :meth:`Reference.identity`), so neither
the chance ``1/n_r`` nor the per-relation clip depends on the run's size. Geo, ISS and the
§18 checks (each compares a space with an altered copy of itself) stay on the run's facts.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fks.configs import FAMILIES, WhiteningConfig
from fks.errors import FksInputError
from fks.hidden.store import HIDDEN_DIR, REFERENCE_DIR, STORE_DTYPE, HiddenStore
from fks.metrics.internal.context import load_layer
from fks.metrics.internal.scores import PoolIdentity
from fks.metrics.internal.space import (
    Design,
    Residualizer,
    Whitening,
    embed,
    family_centroids,
    fit_residualizer,
    fit_whitening,
    project_normalize,
    residual_rank,
    rounding_variance,
)

__all__ = ["REFERENCE_DIR", "Reference", "load_reference", "embed_run"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Reference:
    """A loaded pool and how the run's rows map into it.

    Attributes:
        store: the pool's hidden store (``RUN/reference/hidden/``).
        design: the pool's design (every row of the store; its own relation/family codes).
        rel_map: ``(R_run,)`` the pool code of each run relation code.
        fam_map: ``(T_run,)`` the pool code of each run family code (``all_families``).
        row_map: ``(n_run,)`` the pool position of each run main query.
        fact_map: ``(F_run,)`` the pool position of each run fact (-1: no main query).
        info: what the summaries record (path, rows, facts, benchmark checksum).
    """

    store: HiddenStore
    design: Design
    rel_map: np.ndarray
    fam_map: np.ndarray
    row_map: np.ndarray
    fact_map: np.ndarray
    info: dict[str, Any]

    def embed(self, layer: int, x: np.ndarray, design: Design, J: np.ndarray | None,
              cfg: WhiteningConfig, eps: float, *, flat_relations: bool = False
              ) -> tuple[np.ndarray, Residualizer, Whitening]:
        """Fit §7.4-7.5 on the pool's layer and apply it to the run's rows ``x`` (in place).

        ``design``: the run's design as the caller uses it (its family codes may be shuffled,
        §18.3; they replace the pool's codes on the run's rows). ``flat_relations``: one
        relation code for every row of the pool and the run (§18.4's relation-uncentred
        space). Returns what :func:`fks.metrics.internal.space.embed` returns, the
        residualiser indexed by the *run's* codes.
        """
        q, res, wh, _ = self.embed_with_pool(layer, x, design, J, cfg, eps,
                                             flat_relations=flat_relations, keep_pool=False)
        return q, res, wh

    def embed_with_pool(self, layer: int, x: np.ndarray, design: Design, J: np.ndarray | None,
                        cfg: WhiteningConfig, eps: float, *, flat_relations: bool = False,
                        keep_pool: bool = True
                        ) -> tuple[np.ndarray, Residualizer, Whitening,
                                   tuple[np.ndarray, np.ndarray] | None]:
        """:meth:`embed`, also returning the pool's own rows ``(q_pool, xbar_pool)``.

        ``q_pool (n_pool, k)``: the pool's unit whitened rows; ``xbar_pool (n_pool, d)``: its
        residualised rows (before transport). None unless ``keep_pool``.
        """
        pd = self.design
        R, T = len(pd.relations), len(pd.all_families)
        rel = np.zeros_like(pd.relation) if flat_relations else pd.relation.copy()
        if not flat_relations:
            rel[self.row_map] = self.rel_map[design.relation]
        fam = pd.family.copy()
        fam[self.row_map] = self.fam_map[design.family]
        xr = load_layer(self.store, layer, pd)
        rvar = rounding_variance(xr, STORE_DTYPE)
        res = fit_residualizer(xr, rel, fam, R, T)
        res.apply_(xr, rel, fam)
        wh = fit_whitening(xr, J, cfg, rank_bound=residual_rank(rel, fam, R, T),
                           rounding_var=rvar)
        pool = (project_normalize(xr, wh, eps), xr) if keep_pool else None
        del xr
        run_rel = np.zeros(len(design.relations), np.int64) if flat_relations else self.rel_map
        run_res = Residualizer(mu=res.mu, mu_rel=res.mu_rel[run_rel],
                               mu_fam=res.mu_fam[self.fam_map])
        run_res.apply_(x, design.relation, design.family)
        return project_normalize(x, wh, eps), run_res, wh, pool

    def identity(self, q_pool: np.ndarray, design: Design, pairs: list[tuple[int, int]],
                 eps: float) -> PoolIdentity:
        """KTS-ID ranks of the run's facts among the pool's, from the pool's unit rows ``q_pool``.

        ``design``: the run's design (its centroid families and pairs index the result).
        """
        pd = dataclasses.replace(self.design, families=design.families)
        V = family_centroids(q_pool, pd, eps)
        return PoolIdentity.from_pool(V, pd.has, pd.fact_relation, self.fact_map, pairs)


def _pool_design(store: HiddenStore) -> Design:
    """Build the design of every row of the pool store from its index alone."""
    index = store.index
    facts = sorted({r.fact_id for r in index})
    fpos = {f: i for i, f in enumerate(facts)}
    relations = tuple(sorted({r.relation for r in index}))
    rpos = {r: i for i, r in enumerate(relations)}
    fams = tuple(f for f in FAMILIES if any(r.condition_family == f for r in index))
    fact_rel = {}
    for r in index:
        fact_rel.setdefault(r.fact_id, r.relation)
    return Design(
        rows=np.array([r.row for r in index], dtype=np.int64),
        query_ids=np.array([r.query_id for r in index], dtype=str),
        fact=np.array([fpos[r.fact_id] for r in index], dtype=np.int64),
        relation=np.array([rpos[r.relation] for r in index], dtype=np.int64),
        family=np.array([fams.index(r.condition_family) for r in index], dtype=np.int64),
        fact_ids=np.array(facts, dtype=str),
        fact_relation=np.array([rpos[fact_rel[f]] for f in facts], dtype=np.int64),
        copy=np.zeros(len(facts), bool), relations=relations, all_families=fams,
        families=fams)


def load_reference(run_dir: Path, store: HiddenStore, design: Design,
                   layers: list[int] | None = None) -> Reference | None:
    """Load ``RUN/reference/`` when it exists and check it against the run (module docstring).

    ``layers``: the layers the metrics read (the window; default every layer of the run).

    Raises:
        FksInputError: a pool of another model or width, one missing a main query of the
            run, disagreeing with it on a fact, relation or family, or holding non-main rows
            (each names the file, line and field).
    """
    folder = Path(run_dir) / REFERENCE_DIR
    if not (folder / HIDDEN_DIR / "meta.json").is_file():
        return None
    ref = HiddenStore(folder)
    meta_path = ref.dir / "meta.json"
    for key in ("model", "n_layers"):
        mine, theirs = store.meta.get(key), ref.meta.get(key)
        if mine is not None and theirs is not None and mine != theirs:
            raise FksInputError(f"the reference pool was extracted with {key} {theirs!r}, the "
                                f"run's hidden store with {mine!r} (one model per run)",
                                path=meta_path, field=key)
    if ref.d_model != store.d_model:
        raise FksInputError(f"the reference pool has d = {ref.d_model}, the run {store.d_model}",
                            path=meta_path, field="d_model")
    missing = [x for x in (store.layers if layers is None else layers) if x not in ref.layers]
    if missing:
        raise FksInputError(f"layer {missing[0]} of the run is not in the reference pool "
                            f"(pool layers: {ref.layers})", path=meta_path, field="layers")
    for rec in ref.index:
        extra = rec.model_extra or {}
        if extra.get("use_for_main_forward") is False:
            raise FksInputError(f"{rec.query_id}: the reference pool holds only main-forward "
                                "queries", path=ref.dir / "index.jsonl", line=rec.row + 1,
                                field="use_for_main_forward")
    pool = _pool_design(ref)
    pos = {q: i for i, q in enumerate(pool.query_ids.tolist())}
    row_map = np.empty(design.n, dtype=np.int64)
    for i, qid in enumerate(design.query_ids.tolist()):
        j = pos.get(qid)
        if j is None:
            raise FksInputError(f"{qid} (a main query of the run) is not in the reference pool; "
                                "re-extract it for this benchmark", path=ref.dir / "index.jsonl",
                                field="query_id")
        row_map[i] = j
        rec = ref.index[int(pool.rows[j])]
        for name, mine in (("fact_id", design.fact_ids[design.fact[i]]),
                           ("relation", design.relations[design.relation[i]]),
                           ("condition_family", design.all_families[design.family[i]])):
            if getattr(rec, name) != mine:
                raise FksInputError(f"{qid}: the reference pool has {name} "
                                    f"{getattr(rec, name)!r}, the run {mine!r}",
                                    path=ref.dir / "index.jsonl", line=rec.row + 1, field=name)
    rel_map = np.array([pool.relations.index(r) for r in design.relations], dtype=np.int64) \
        if all(r in pool.relations for r in design.relations) else None
    if rel_map is None:  # a relation of the benchmark without any main query in the run
        rel_map = np.array([pool.relations.index(r) if r in pool.relations else 0
                            for r in design.relations], dtype=np.int64)
    fam_map = np.array([pool.all_families.index(f) for f in design.all_families],
                       dtype=np.int64)
    info = {"path": str(folder / HIDDEN_DIR), "n_rows": pool.n,
            "n_facts": len(pool.fact_ids), "n_relations": len(pool.relations),
            "benchmark_checksum": ref.meta.get("benchmark_checksum"),
            "rule": "residualisation and whitening fitted on the reference pool's main "
                    "queries (the parent benchmark), applied to the run's states"}
    log.info("reference pool %s: %d main queries of %d facts (the whitening is fitted there)",
             info["path"], pool.n, len(pool.fact_ids))
    ppos = {f: i for i, f in enumerate(pool.fact_ids.tolist())}
    fact_map = np.array([ppos.get(f, -1) for f in design.fact_ids.tolist()], dtype=np.int64)
    return Reference(ref, pool, rel_map, fam_map, row_map, fact_map, info)


def embed_run(reference: Reference | None, layer: int, x: np.ndarray, design: Design,
              J: np.ndarray | None, cfg: WhiteningConfig, eps: float, *,
              flat_relations: bool = False) -> tuple[np.ndarray, Residualizer, Whitening]:
    """Run steps 1-4 of :mod:`.space` on the run's rows ``x``, fitted on the pool if any.

    Without a pool this is :func:`fks.metrics.internal.space.embed` on the run itself
    (``design`` must then already carry the flat relation codes for ``flat_relations``).
    """
    if reference is None:
        return embed(x, design, J, cfg, eps)
    return reference.embed(layer, x, design, J, cfg, eps, flat_relations=flat_relations)
