"""The production ISS/KTS engine: every fact, every window layer, streamed from the store.

:func:`run_internal_metrics` (``fks metrics RUN --part internal``) reads ``RUN/hidden/``
(one memory-mapped float16 layer at a time, converted to float32) and, for each layer ``l`` of
the window ``l / (L - 1) >= layer_window_min_frac`` (spec §7.10):

1. transports, residualises, whitens, normalises and builds family centroids
   (:mod:`fks.metrics.internal.space`, spec §7.3-7.6), fitted once per layer over all main queries;
2. scores ISS for every fact and KTS for every family pair and fact selection
   (:mod:`fks.metrics.internal.scores`, spec §7.7-7.9, §9-11);
3. on one representative layer (the window layer whose depth is closest to the middle of the
   window), runs the §18.1-18.4 sanity checks (:mod:`fks.metrics.internal.sanity`); §18.5
   (raw versus transported) runs on every window layer.

Family membership is each query's own ``use_for_main_forward`` intersected with the reading's
families. Readings: the configured ``main_families`` and the alternative with/without
``anchor`` (:func:`fks.metrics.behavior.readings_for`). Fact selections: each coverage mode
(``complete_family`` -- D∩, the facts having every family of the reading that the run
has, :mod:`fks.metrics.internal.coverage`; ``full_set`` -- every fact over the families it has; each
KTS pair is scored on its own shared facts ``D_t & D_t'``) times ``all``/``real``/``copy``
(``answer_in_subject_surface``), plus the behaviour groups of
``RUN/metrics/behavioral_per_fact.jsonl`` when it exists (§13.2). Fact sets derive from the
benchmark, so every model is scored on the same facts per pair (§8.2); their sha256 are
written for comparison. Headline figures: the configured reading and all facts; ISS on the
first coverage mode (complete-family D∩ by default, §1.3), KTS pairs on ``D_t & D_t'``
(``full_set``, §8.2, §10.1, §17.3), with the complete-family KTS kept as the other labelled
coverage mode.

Outputs (``RUN/metrics/``, each written atomically): ``iss_per_fact_layer.jsonl``,
``iss_per_fact.jsonl`` (§17.2), ``iss_model_summary.json``, ``kts_per_pair_layer.jsonl``,
``kts_model_summary.json`` (§17.3, with the §13.2/§13.3 tables), ``sanity_checks.json``,
``negatives.json`` and ``hidden_family_centroids/`` (float16 ``layer_{l:03d}.npy`` of shape
``(cells, k)``, ``index.jsonl`` naming each row's fact and family, ``meta.json``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fks.configs import FAMILIES, ConfigSet
from fks.data.load import Benchmark, load_benchmark
from fks.errors import FksInputError
from fks.hidden.store import HiddenStore, layer_filename
from fks.io import atomic_path, iter_jsonl, read_json, sha256_file
from fks.log import progress_bar
from fks.metrics.internal.context import (
    TRANSPORTS,
    Context,
    LayerScores,
    Selection,
    load_layer,
    load_transport,
    mask_key,
)
from fks.metrics.internal.coverage import complete_family_mask, families_absent
from fks.metrics.internal.negatives import (
    load_or_create_negatives,
    negatives_from_lists,
)
from fks.metrics.internal.reference import embed_run, load_reference
from fks.metrics.internal.sanity import SanityTolerances
from fks.metrics.internal.scores import (
    BlockGrams,
    Negatives,
    PoolIdentity,
    iss_from_pairs,
    kts_pair,
    pair_scores,
)
from fks.metrics.internal.space import (
    Design,
    Whitening,
    centroid_matrix,
    family_centroids,
    pairs_of,
)
from fks.runlock import locks_run_dir

__all__ = [
    "TRANSPORTS",
    "METRICS_DIR",
    "CENTROIDS_DIR",
    "LATE_MIN_FRAC",
    "window_layers",
    "representative_layer",
    "build_design",
    "load_layer",
    "run_internal_metrics",
    "internal_part",
]

log = logging.getLogger(__name__)

METRICS_DIR = "metrics"
CENTROIDS_DIR = "hidden_family_centroids"
#: late layers of §7.10: depth >= 0.8
LATE_MIN_FRAC = 0.8
SUBSETS = ("all", "real", "copy")


# ============================================================================ layers
def _depth(layer: int, n_layers: int) -> float:
    return layer / max(n_layers - 1, 1)


def window_layers(n_layers: int, min_frac: float) -> list[int]:
    """``W = {l : l / (L - 1) >= min_frac}`` (spec §7.10)."""
    return [x for x in range(n_layers) if _depth(x, n_layers) >= min_frac - 1e-12]


def representative_layer(window: Sequence[int], n_layers: int, min_frac: float) -> int:
    """Pick the window layer whose depth is closest to the middle ``(min_frac + 1) / 2``.

    Ties go to the deeper layer. The sanity checks run there.
    """
    mid = (min_frac + 1.0) / 2.0
    return min(window, key=lambda x: (abs(_depth(x, n_layers) - mid), -x))


# ============================================================================ inputs
def _resolve_benchmark(benchmark: Benchmark | str | Path) -> Benchmark:
    return benchmark if isinstance(benchmark, Benchmark) else load_benchmark(benchmark)


def _check_index_row(rec: Any, q: Any, path: Path) -> None:
    """Raise when an index row disagrees with its benchmark query."""
    line = rec.row + 1
    for name in ("fact_id", "relation", "condition_family"):
        if getattr(rec, name) != getattr(q, name):
            raise FksInputError(
                f"{rec.query_id}: the index has {name} {getattr(rec, name)!r}, the benchmark "
                f"{getattr(q, name)!r} (a store of another benchmark?)",
                path=path, line=line, field=name)
    extra = rec.model_extra or {}
    if "use_for_main_forward" in extra and bool(extra["use_for_main_forward"]) != \
            q.use_for_main_forward:
        raise FksInputError(f"{rec.query_id}: use_for_main_forward differs from the benchmark",
                            path=path, line=line, field="use_for_main_forward")


def build_design(bench: Benchmark, store: HiddenStore, families: Sequence[str]) -> Design:
    """Match the store index with the benchmark's main-forward queries and code them.

    Raises:
        FksInputError: an index row names a query the benchmark lacks or disagrees with it
            (fact, relation, family, booleans), a query appears twice, or a main-forward query
            of the benchmark is missing from the store (each names the query_id).
    """
    path = store.dir / "index.jsonl"
    by_id = {q.query_id: q for q in bench.queries}
    rows, main_q, seen = [], [], set()
    for rec in store.index:
        q = by_id.get(rec.query_id)
        if q is None:
            raise FksInputError(f"{rec.query_id} is not a query of the benchmark",
                                path=path, line=rec.row + 1, field="query_id")
        if rec.query_id in seen:
            raise FksInputError(f"{rec.query_id} appears twice in the index", path=path,
                                line=rec.row + 1, field="query_id")
        seen.add(rec.query_id)
        _check_index_row(rec, q, path)
        if q.use_for_main_forward:
            rows.append(rec.row)
            main_q.append(q)
    missing = next((q.query_id for q in bench.queries
                    if q.use_for_main_forward and q.query_id not in seen), None)
    if missing is not None:
        raise FksInputError(f"{missing} (a main-forward query of the benchmark) is not in the "
                            "hidden store; rerun `fks extract`", path=path, field="query_id")
    fact_ids = [f.fact_id for f in bench.facts]
    fpos = {fid: i for i, fid in enumerate(fact_ids)}
    unknown = next((q for q in main_q if q.fact_id not in fpos), None)
    if unknown is not None:
        raise FksInputError(f"{unknown.query_id}: fact {unknown.fact_id} is not in the "
                            "benchmark facts", path=bench.files.queries, field="fact_id")
    relations = tuple(sorted({f.relation.relation_id for f in bench.facts}
                             | {q.relation for q in main_q}))
    all_fams = tuple(f for f in FAMILIES if any(q.condition_family == f for q in main_q))
    rpos = {r: i for i, r in enumerate(relations)}
    return Design(
        rows=np.asarray(rows, dtype=np.int64),
        query_ids=np.array([q.query_id for q in main_q], dtype=str),
        fact=np.array([fpos[q.fact_id] for q in main_q], dtype=np.int64),
        relation=np.array([rpos[q.relation] for q in main_q], dtype=np.int64),
        family=np.array([all_fams.index(q.condition_family) for q in main_q], dtype=np.int64),
        fact_ids=np.array(fact_ids, dtype=str),
        fact_relation=np.array([rpos[f.relation.relation_id] for f in bench.facts],
                               dtype=np.int64),
        copy=np.array([f.answer_in_subject_surface for f in bench.facts], dtype=bool),
        relations=relations,
        all_families=all_fams,
        families=tuple(f for f in FAMILIES if f in families and f in all_fams),
    )


def _behavior_groups(path: Path, fact_ids: np.ndarray) -> np.ndarray | None:
    """``(F,)`` behaviour group per fact from ``behavioral_per_fact.jsonl`` ("" if absent)."""
    if not path.is_file():
        log.info("no %s: the ISS/KTS table by behaviour group (spec §13.2) is skipped", path)
        return None
    groups = {rec["fact_id"]: rec["behavior_group"] for _, rec in iter_jsonl(path)
              if isinstance(rec, dict) and "fact_id" in rec and "behavior_group" in rec}
    return np.array([groups.get(f, "") for f in fact_ids.tolist()], dtype=object)


# ============================================================================ selections
def _selections(design: Design, readings: Mapping[str, list[str]], coverages: Sequence[str],
                groups: np.ndarray | None) -> list[Selection]:
    """List readings x coverage modes x (all, real, copy) and the behaviour groups."""
    F = len(design.fact_ids)
    subsets = {"all": np.ones(F, bool), "real": ~design.copy, "copy": design.copy}
    out = []
    for reading, fams in readings.items():
        # D∩ over the reading's families the run has (fks.metrics.internal.coverage, shared with the
        # behavioural path); absent ones are reported, never an empty set
        complete = complete_family_mask(design.has, design.families, fams)
        cov_masks = {"complete_family": complete, "full_set": np.ones(F, bool)}
        for cov in coverages:
            for sub, smask in subsets.items():
                out.append(Selection(f"{reading}/{cov}/{sub}", reading, cov, sub,
                                     cov_masks[cov] & smask))
    if groups is not None:
        primary = next(iter(readings))
        from fks.metrics.behavior import GROUPS

        base = {s.coverage: s.mask for s in out if s.reading == primary and s.subset == "all"}
        for cov in coverages:
            for g in GROUPS:
                out.append(Selection(f"{primary}/{cov}/group:{g}", primary, cov, g,
                                     base[cov] & (groups == g)))
    return out


def _reading_pairs(design: Design, fams: Sequence[str],
                   pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """``(P,) bool``: the pairs whose two families belong to the reading."""
    inside = {design.families.index(f) for f in fams if f in design.families}
    return np.array([i in inside and j in inside for i, j in pairs], dtype=bool)


# ============================================================================ per layer
def score_layer(V: np.ndarray, design: Design, neg: Negatives, pairs: Sequence[tuple[int, int]],
                reading_pairs: Mapping[str, np.ndarray], selections: Sequence[Selection],
                *, min_facts: int, eps: float, pool: PoolIdentity | None = None
                ) -> tuple[dict[str, Any], dict[Any, Any]]:
    """ISS per reading and KTS per distinct (pair, selection mask) of one layer.

    ``pool``: KTS-ID ranks against the reference pool (:class:`PoolIdentity`), or None (the
    spec's identification among the selection's own facts).
    """
    has = design.has
    grams = BlockGrams(V, neg.blocks)  # one block per relation code, shared by ISS and KTS
    ps = pair_scores(V, has, neg, pairs, grams)
    iss = {r: iss_from_pairs(ps, sel, eps) for r, sel in reading_pairs.items()}
    kts: dict[tuple[int, bytes], dict[str, dict[str, Any]]] = {}
    for sel in selections:
        key = mask_key(sel.mask)
        for p in np.flatnonzero(reading_pairs[sel.reading]):
            if (p, key) in kts:
                continue
            i, j = pairs[p]
            shared = sel.mask & has[:, i] & has[:, j]
            kts[(p, key)] = kts_pair(grams, i, j, shared, design.relations, min_facts=min_facts,
                                     pool=pool)
    return iss, kts


def _whitening_info(wh: Whitening) -> dict[str, Any]:
    ev = wh.eigenvalues
    out = {"k": wh.k, "n_dropped": wh.n_dropped,
           "top_eigenvalue": float(ev[0]) if len(ev) else None,
           "last_eigenvalue": float(ev[-1]) if len(ev) else None,
           "k_requested": wh.k_requested, "rank_bound": wh.rank_bound,
           "n_dropped_rank_bound": wh.n_dropped_rank,
           "n_dropped_precision_floor": wh.n_dropped_precision,
           "rounding_factor": wh.rounding_factor,
           "design_determined": wh.design_determined}
    return out


def _write_centroids(folder: Path, layer: int, V: np.ndarray, has: np.ndarray) -> None:
    with atomic_path(folder / layer_filename(layer), suffix=".npy") as tmp:
        np.save(tmp, V[has].astype(np.float16), allow_pickle=False)


#: ``hidden_family_centroids/identity_{l:03d}.npy``: the pool identification of each fact
IDENTITY_FILE = "identity_{layer:03d}.npy"


def _write_identity(folder: Path, layer: int, ident: PoolIdentity,
                    pairs: Sequence[tuple[int, int]], n_facts: int) -> None:
    """``(F, P, 2)`` float32: each fact's symmetric top-1 rate against the pool and its chance.

    Row order: the run's facts (``meta.json: identity.fact_ids``); pairs: ``pairs`` order
    (``identity.pairs``). Chance is ``1 / candidates`` and 0 where the fact lacks a family of
    the pair. The KTS bootstrap reads these instead of ranking among the run's facts.
    """
    arr = np.zeros((n_facts, len(pairs), 2), np.float32)
    for p, (t, u) in enumerate(pairs):
        n = ident.n_candidates[(t, u)]
        arr[:, p, 0] = ident.hits(t, u)
        arr[:, p, 1] = np.where(n > 0, 1.0 / np.maximum(n, 1), 0.0)
    with atomic_path(folder / IDENTITY_FILE.format(layer=layer), suffix=".npy") as tmp:
        np.save(tmp, arr, allow_pickle=False)


# ============================================================================ the run
def _check_chain(run_dir: Path, transport: str) -> dict[str, str]:
    """Verify the files this stage reads and the weights they record; return their digests.

    The hidden states, the J-Lens fit and the behavioural per-fact file must be those the
    run's stages wrote (:mod:`fks.provenance`), made with the run's weights.
    """
    from fks.provenance import check_inputs, check_weights, expand_outputs

    files = list(expand_outputs(run_dir, "extract"))
    if transport == "jlens":
        files += expand_outputs(run_dir, "jlens")
    inputs = check_inputs(run_dir, "metrics_internal", files,
                          optional=[f"{METRICS_DIR}/behavioral_per_fact.jsonl"])
    for rel in ("hidden/meta.json", "reference/hidden/meta.json", "jlens/manifest.json"):
        if rel in inputs:
            doc = read_json(run_dir / rel)
            info = (doc.get("model_info") or {}) if isinstance(doc, dict) else {}
            check_weights(run_dir, info.get("weights_sha256") if isinstance(info, dict)
                          else None, stage="metrics_internal", made_by=run_dir / rel)
    return inputs


def _prepare(run_dir: Path, bench: Benchmark, configs: ConfigSet, transport: str,
             out_dir: Path) -> Context:
    from fks.metrics.behavior import readings_for

    m = configs.metrics
    store = HiddenStore(run_dir)
    want = store.meta.get("benchmark_checksum")
    if want is not None and want != bench.checksum():
        raise FksInputError("the hidden store was extracted from another benchmark (checksums "
                            "differ)", path=store.dir / "meta.json", field="benchmark_checksum")
    readings = readings_for(m.main_families)
    union = {f for fams in readings.values() for f in fams}
    design = build_design(bench, store, sorted(union))
    absent = families_absent(design.families, m.main_families)
    if absent:
        log.warning("configured main families absent from this run (no main-forward query): "
                    "%s; complete-family sets use the families present", ", ".join(absent))
    L = store.n_layers
    window = window_layers(L, m.layer_window_min_frac)
    missing = [x for x in window if x not in store.layers]
    if missing:
        raise FksInputError(f"window layer {missing[0]} (l/(L-1) >= {m.layer_window_min_frac}, "
                            f"L={L}) is not in the store (stored: {store.layers}); rerun "
                            "`fks extract --layers window`", path=store.dir / "meta.json",
                            field="layers")
    jl = load_transport(run_dir, transport, window, store.d_model)
    reference = load_reference(run_dir, store, design, window) if m.whitening.reference \
        else None
    doc, shared = load_or_create_negatives(
        bench.root, design.fact_ids.tolist(),
        [design.relations[r] for r in design.fact_relation], checksum=bench.checksum(),
        max_per_fact=m.negatives.max_per_fact, seed=m.negatives.seed,
        run_copy=out_dir / "negatives.json")
    neg = negatives_from_lists(doc["negatives"], design.fact_ids.tolist(), design.fact_relation)
    groups = _behavior_groups(run_dir / METRICS_DIR / "behavioral_per_fact.jsonl",
                              design.fact_ids)
    pairs = pairs_of(design.families)
    return Context(
        run_dir=run_dir, out_dir=out_dir, bench=bench, store=store, design=design,
        readings=readings, pairs=pairs,
        reading_pairs={r: _reading_pairs(design, f, pairs) for r, f in readings.items()},
        selections=_selections(design, readings, m.coverage_modes, groups), neg=neg,
        neg_info={"file": str(shared) if shared else None, "run_copy": "negatives.json",
                  "sha256": sha256_file(out_dir / "negatives.json"), "seed": m.negatives.seed,
                  "max_per_fact": m.negatives.max_per_fact,
                  "mean_per_fact": float(neg.counts.mean()) if len(neg.counts) else 0.0},
        jlens=jl, transport=transport, window=window,
        late=[x for x in window if _depth(x, L) >= LATE_MIN_FRAC - 1e-12],
        rep_layer=representative_layer(window, L, m.layer_window_min_frac),
        configs=configs, groups=groups, reference=reference,
    )


def _process_layer(ctx: Context, layer: int, averaging: Any, tol: SanityTolerances
                   ) -> tuple[LayerScores, dict[str, Any] | None, dict[str, Any] | None]:
    """Embed, centroid, score one layer (and run the sanity checks on the representative).

    Returns the layer's scores, the §18.1-18.4 checks (representative layer only) and the
    layer's §18.5 raw-versus-transported figures (None where the ablation cannot apply).
    """
    m = ctx.configs.metrics
    clock = _Clock()
    J = None if ctx.jlens is None else ctx.jlens[layer]
    x = load_layer(ctx.store, layer, ctx.design)
    clock.lap("load")
    ident = ident_raw = None
    if ctx.reference is None:
        q, res, wh = embed_run(None, layer, x, ctx.design, J, m.whitening, m.eps)
    else:  # fitted on the pool; KTS-ID ranks among the pool's facts (module reference)
        q, res, wh, (q_pool, xbar_pool) = ctx.reference.embed_with_pool(
            layer, x, ctx.design, J, m.whitening, m.eps)
        ident = ctx.reference.identity(q_pool, ctx.design, ctx.pairs, m.eps)
        del q_pool
        ident_raw = ctx.reference.identity(_transport_unit(xbar_pool, J, m.eps), ctx.design,
                                           ctx.pairs, m.eps)
        del xbar_pool
        _write_identity(ctx.out_dir / CENTROIDS_DIR, layer, ident, ctx.pairs,
                        len(ctx.design.fact_ids))
    clock.lap("transport_residualise_whiten")
    # the same residualised states, transported and normalised but not whitened (issue 27:
    # the figure beside the whitened one that no covariance fit can move)
    unwhitened = _unwhitened_scores(ctx, x, J, ident_raw)
    del x
    clock.lap("unwhitened")
    if layer == ctx.rep_layer and wh.design_determined:
        log.warning("layer %d: the residualised states span at most %d dimensions <= "
                    "pca_max_dim = %d, so PCA whitening keeps all of them and the processed "
                    "cosines are a function of the design alone (ISS/KTS carry no model "
                    "information); more main queries or a smaller pca_max_dim are needed",
                    layer, wh.rank_bound, m.whitening.pca_max_dim)
    V = family_centroids(q, ctx.design, m.eps, averaging)
    _write_centroids(ctx.out_dir / CENTROIDS_DIR, layer, V, ctx.design.has)
    clock.lap("centroids")
    iss, kts = score_layer(V, ctx.design, ctx.neg, ctx.pairs, ctx.reading_pairs,
                           ctx.selections, min_facts=m.kts_geo_min_facts, eps=m.eps,
                           pool=ident)
    clock.lap("iss_kts")
    from fks.metrics.internal.checks import (
        headline_scores,
        run_sanity_checks,
        transport_ablation_layer,
        transport_ablation_reason,
    )

    sanity = None
    if layer == ctx.rep_layer:
        sanity = run_sanity_checks(ctx, layer, q, V, iss, res, wh, tol)
        clock.lap("sanity_checks")
    ablation = None
    if transport_ablation_reason(ctx) is None:
        ablation = transport_ablation_layer(ctx, layer, headline_scores(V, ctx.design,
                                                                        ctx.neg, ctx))
        clock.lap("raw_vs_transported")
    scores = LayerScores(layer, iss, kts, _whitening_info(wh), clock.laps)
    scores.unwhitened = unwhitened
    return scores, sanity, ablation


def _transport_unit(xbar: np.ndarray, J: np.ndarray | None, eps: float) -> np.ndarray:
    """Residualised rows ``xbar`` transported (``z = J h``) and L2-normalised, not whitened."""
    z = xbar if J is None else xbar @ np.asarray(J, dtype=xbar.dtype).T
    return z / np.maximum(np.sqrt(np.einsum("ij,ij->i", z, z, dtype=np.float64)),
                          eps).astype(z.dtype)[:, None]


def _unwhitened_scores(ctx: Context, xbar: np.ndarray, J: np.ndarray | None,
                       pool: PoolIdentity | None = None) -> dict[str, Any]:
    """Headline ISS (per fact) and KTS of residualised states ``xbar``, transported, unwhitened.

    ``pool``: the unwhitened pool identification (KTS-ID among the pool's facts), if any.
    """
    from fks.metrics.internal.checks import headline_scores

    m = ctx.configs.metrics
    z = _transport_unit(xbar, J, m.eps)
    return headline_scores(family_centroids(z, ctx.design, m.eps), ctx.design, ctx.neg, ctx,
                           pool=pool)


class _Clock:
    """Wall-clock laps (seconds) for the timing record of the summaries."""

    def __init__(self) -> None:
        self.t = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round(now - self.t, 3)
        self.t = now


@locks_run_dir("run_dir")
def run_internal_metrics(
    run_dir: str | Path,
    *,
    benchmark: Benchmark | str | Path,
    configs: ConfigSet,
    transport: str = "jlens",
    out_dir: str | Path | None = None,
    tolerances: SanityTolerances | None = None,
) -> dict[str, Any]:
    """ISS, KTS and the §18 sanity checks of one run (see the module docstring).

    Args:
        run_dir: the run directory (reads ``hidden/``, ``jlens/``, ``metrics/behavioral_per_
            fact.jsonl`` when present).
        benchmark: the benchmark the run used (loaded, or a directory / ``hf[:repo]``).
        configs: the configs in force (``configs.metrics``: families, window, whitening,
            negatives, ``kts_geo_min_facts``, ``eps``, coverage modes).
        transport: ``jlens`` (``z = J h``, the main metric) or ``raw`` (Raw-ISS ablation).
        out_dir: where to write (default ``RUN/metrics``).
        tolerances: sanity-check thresholds (default: ``metrics.yaml: sanity`` and
            ``bootstrap``, :meth:`SanityTolerances.from_config`).

    Returns:
        ``{"iss": iss summary, "kts": kts summary, "sanity": sanity checks}``.

    Raises:
        FksInputError: ``jlens`` without a J-Lens fit (or an identity one), NaN/Inf states,
            dimension mismatches, missing window layers, or an index that disagrees with the
            benchmark -- each naming the query_id and/or the layer.
    """
    from fks.metrics.internal.report import assemble_outputs
    from fks.provenance import check_benchmark, record_files

    started = time.perf_counter()
    run_dir = Path(run_dir)
    inputs = _check_chain(run_dir, transport)
    bench = _resolve_benchmark(benchmark)
    check_benchmark(run_dir, bench.checksum(), bench.root)
    out = Path(out_dir) if out_dir is not None else run_dir / METRICS_DIR
    (out / CENTROIDS_DIR).mkdir(parents=True, exist_ok=True)
    ctx = _prepare(run_dir, bench, configs, transport, out)
    tol = tolerances or SanityTolerances.from_config(configs.metrics)
    averaging = centroid_matrix(ctx.design)
    layers: list[LayerScores] = []
    sanity: dict[str, Any] | None = None
    ablation: list[dict[str, Any]] = []
    with progress_bar() as bar:
        task = bar.add_task("iss/kts layers", total=len(ctx.window))
        for layer in ctx.window:
            scores, s, ab = _process_layer(ctx, layer, averaging, tol)
            layers.append(scores)
            sanity = s if s is not None else sanity
            if ab is not None:
                ablation.append(ab)
            bar.advance(task)
    from fks.metrics.internal.checks import finish_sanity
    from fks.metrics.internal.sanity import sanity_line

    sanity = finish_sanity(ctx, sanity or {}, ablation, tol)
    log.info("%s", sanity_line(sanity))
    result = assemble_outputs(ctx, layers, sanity or {}, seconds=time.perf_counter() - started)
    if out_dir is None:  # an ablation written elsewhere is not the run's stage output
        record_files(run_dir, "metrics_internal", inputs)
    log.info("ISS/KTS of %d facts over %d window layers -> %s (%.1f s)",
             len(ctx.design.fact_ids), len(ctx.window), out, time.perf_counter() - started)
    return result


def internal_part(run_dir: str | Path, configs: ConfigSet, *, transport: str = "jlens",
                  benchmark: str | Path | None = None) -> dict[str, Any]:
    """Run ``fks metrics RUN --part internal``.

    The benchmark comes from ``benchmark`` or the run manifest's ``benchmark.path``.
    """
    from fks.generate.manifest import MANIFEST_NAME, read_run_manifest

    if benchmark is None:
        benchmark = (read_run_manifest(run_dir).get("benchmark") or {}).get("path")
        if benchmark is None:
            raise FksInputError("the run manifest names no benchmark; pass --benchmark",
                                path=Path(run_dir) / MANIFEST_NAME, field="benchmark.path")
    return run_internal_metrics(run_dir, benchmark=benchmark, configs=configs,
                                transport=transport)
