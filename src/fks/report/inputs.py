"""Read what a run directory holds for the statistics, tables and report (spec §17).

Every stage is optional: a missing file leaves its field ``None`` and the report says the
stage was not run. Files that exist are validated row by row (bad rows raise
:class:`~fks.errors.FksInputError` naming file, line and field).

The fact set (*universe*) is the union of the facts of ``behavioral_per_fact.jsonl`` and
``iss_per_fact.jsonl``; per fact it carries the relation, the real/copy flag
(``answer_in_subject_surface``) and the complete-family flag (§1.3), and the per-fact values
of the headline figures (nan where a stage did not score the fact):

* ``anchor_accuracy``: 1/0 from ``anchor_correct`` (K_m), nan without an anchor record;
* ``bcs``, ``bes`` (nan for an ``Unscorable`` fact: too few scorable answers);
  ``scr``/``swr``/``sar``/``ur``: indicators of the fact's behaviour group at the pre-registered
  ``tau_b`` (0 for every group outside the four, unscorable facts included, so their means are
  the §6 shares over the fixed set);
* ``iss``, ``iss_peak``, ``iss_late`` (§7.10; raw, never clipped), ``iss_unwhitened`` (the
  same states not whitened, issue 27).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from fks.errors import FksInputError
from fks.generate.manifest import MANIFEST_NAME, read_run_manifest
from fks.io import iter_jsonl, load_npy, read_json, sha256_file
from fks.metrics.stats.clustered_bootstrap import FACT_METRICS, KtsSpace

__all__ = [
    "METRICS_DIR",
    "FILES",
    "GROUP_METRICS",
    "FactFrame",
    "CentroidStore",
    "RunData",
    "load_run",
    "benchmark_checksum",
]

log = logging.getLogger(__name__)

METRICS_DIR = "metrics"
#: the metric files a report reads (``RUN/metrics/<name>``)
FILES = {
    "behavior_per_fact": "behavioral_per_fact.jsonl",
    "behavior_summary": "behavioral_model_summary.json",
    "iss_per_fact": "iss_per_fact.jsonl",
    "iss_per_fact_layer": "iss_per_fact_layer.jsonl",
    "iss_summary": "iss_model_summary.json",
    "kts_summary": "kts_model_summary.json",
    "sanity": "sanity_checks.json",
    "calibration": "calibration_summary.json",
}
CENTROIDS_DIR = "hidden_family_centroids"
#: behaviour group -> the share key of §6
GROUP_METRICS = {"Stable Correct": "scr", "Stable Wrong": "swr", "Stable Abstention": "sar",
                 "Unstable": "ur"}


# ================================================================================ row models
class _Row(BaseModel):
    model_config = ConfigDict(extra="allow")


class BehaviorFactRow(_Row):
    """The fields of ``behavioral_per_fact.jsonl`` (§17.1) the report uses."""

    model: str = ""
    fact_id: str
    relation: str
    bcs: float | None = None
    bes: float | None = None
    behavior_group: str
    modal_cluster: str | None = None
    modal_correctness: str | None = None
    anchor_correct: bool | None = None
    complete_family: bool | None = None
    answer_in_subject_surface: bool = False


class IssFactRow(_Row):
    """The fields of ``iss_per_fact.jsonl`` (§17.2) the report uses."""

    model: str = ""
    fact_id: str
    relation: str
    iss: float | None = None
    iss_peak: float | None = None
    iss_late: float | None = None
    iss_unwhitened: float | None = None
    complete_family: bool | None = None
    answer_in_subject_surface: bool | None = None


class IssLayerRow(_Row):
    """The fields of ``iss_per_fact_layer.jsonl`` the report uses."""

    fact_id: str
    layer: int
    iss: float | None = None


class CentroidIndexRow(_Row):
    """A row of ``hidden_family_centroids/index.jsonl``."""

    row: int
    fact_id: str
    condition_family: str


# ================================================================================ the facts
@dataclass
class FactFrame:
    """Per-fact arrays over the universe (``F`` facts sorted by id).

    Attributes:
        fact_ids, relation: ``(F,)`` str.
        copy: ``(F,)`` bool ``answer_in_subject_surface``.
        complete: ``(F,)`` bool, the fact has every main family (complete-family, §1.3).
        values: :data:`~fks.metrics.stats.clustered_bootstrap.FACT_METRICS` -> ``(F,)`` float (nan:
            no value).
        behavior_group, modal_cluster: ``(F,)`` object ("" where absent).
    """

    fact_ids: np.ndarray
    relation: np.ndarray
    copy: np.ndarray
    complete: np.ndarray
    values: dict[str, np.ndarray]
    behavior_group: np.ndarray
    modal_cluster: np.ndarray

    def __len__(self) -> int:
        return len(self.fact_ids)

    def coverage_mask(self, mode: str) -> np.ndarray:
        """``(F,)`` bool: the facts of a coverage mode (``complete_family`` or ``full_set``)."""
        if mode == "complete_family":
            return self.complete.copy()
        if mode == "full_set":
            return np.ones(len(self), dtype=bool)
        raise ValueError(f"unknown coverage mode {mode!r}")

    def subset_mask(self, subset: str) -> np.ndarray:
        """``(F,)`` bool: ``all``, ``real`` (not copy-answerable) or ``copy`` facts."""
        return {"all": np.ones(len(self), dtype=bool), "real": ~self.copy,
                "copy": self.copy.copy()}[subset]


def _rows(path: Path, model: type[_Row]) -> list[tuple[int, Any]]:
    return list(iter_jsonl(path, model))


def _check_unique(rows: Iterable[tuple[int, Any]], path: Path) -> None:
    seen: dict[str, int] = {}
    for line, r in rows:
        if r.fact_id in seen:
            raise FksInputError(f"fact {r.fact_id} appears twice (first on line "
                                f"{seen[r.fact_id]})", path=path, line=line, field="fact_id")
        seen[r.fact_id] = line


def _frame(behavior: list[tuple[int, BehaviorFactRow]] | None,
           iss: list[tuple[int, IssFactRow]] | None) -> FactFrame:
    """Join the per-fact files over the union of their facts."""
    b = {r.fact_id: r for _, r in behavior or []}
    s = {r.fact_id: r for _, r in iss or []}
    ids = np.array(sorted(set(b) | set(s)), dtype=object)
    F = len(ids)
    nan = np.full(F, np.nan)
    values = {m: nan.copy() for m in FACT_METRICS}
    relation = np.empty(F, dtype=object)
    copy = np.zeros(F, dtype=bool)
    complete = np.zeros(F, dtype=bool)
    group = np.full(F, "", dtype=object)
    modal = np.full(F, "", dtype=object)
    for i, fid in enumerate(ids.tolist()):
        br, sr = b.get(fid), s.get(fid)
        relation[i] = br.relation if br is not None else sr.relation  # type: ignore[union-attr]
        copy[i] = bool(br.answer_in_subject_surface) if br is not None else \
            bool(sr.answer_in_subject_surface)  # type: ignore[union-attr]
        flag = br.complete_family if br is not None else None
        if flag is None and sr is not None:
            flag = sr.complete_family
        complete[i] = bool(flag)
        if br is not None:
            values["bcs"][i] = np.nan if br.bcs is None else br.bcs
            values["bes"][i] = np.nan if br.bes is None else br.bes
            if br.anchor_correct is not None:
                values["anchor_accuracy"][i] = float(br.anchor_correct)
            group[i] = br.behavior_group
            modal[i] = br.modal_cluster or ""
            for g, key in GROUP_METRICS.items():
                values[key][i] = float(br.behavior_group == g)
        if sr is not None:
            for key in ("iss", "iss_peak", "iss_late", "iss_unwhitened"):
                v = getattr(sr, key)
                values[key][i] = np.nan if v is None else float(v)
    return FactFrame(ids, relation.astype(str), copy, complete, values, group, modal)


# ============================================================================== centroids
@dataclass
class CentroidStore:
    """``RUN/metrics/hidden_family_centroids/`` written by the internal metrics.

    ``layer_{l:03d}.npy`` (float16 ``(cells, k)``), ``index.jsonl`` (``row``, ``fact_id``,
    ``condition_family``) and ``meta.json`` (``layers``, ``families``; ``identity`` when the
    run was scored against a reference pool: ``identity_{l:03d}.npy`` of shape
    ``(facts, pairs, 2)`` over ``identity.fact_ids`` and ``identity.pairs``, the facts'
    KTS-ID top-1 rates and chances among the pool's facts, issue 27).
    """

    folder: Path
    layers: tuple[int, ...]
    families: tuple[str, ...]
    row_fact: np.ndarray
    row_family: np.ndarray
    identity_facts: tuple[str, ...] | None = None
    identity_pairs: tuple[str, ...] | None = None

    @classmethod
    def open(cls, folder: Path) -> CentroidStore | None:
        """Open the store, or return None when it is absent or incomplete (logged)."""
        meta_p, index_p = folder / "meta.json", folder / "index.jsonl"
        if not meta_p.is_file() or not index_p.is_file():
            return None
        meta = read_json(meta_p)
        if not isinstance(meta, dict) or not isinstance(meta.get("layers"), list) \
                or not isinstance(meta.get("families"), list):
            raise FksInputError("expected an object with lists 'layers' and 'families'",
                                path=meta_p, field="layers")
        families = tuple(str(f) for f in meta["families"])
        rows = sorted(((r.row, r.fact_id, r.condition_family, line)
                       for line, r in iter_jsonl(index_p, CentroidIndexRow)),
                      key=lambda t: t[0])
        for k, (row, _, fam, line) in enumerate(rows):
            if row != k:
                raise FksInputError(f"rows must be 0..n-1 in order; found {row} at position "
                                    f"{k}", path=index_p, line=line, field="row")
            if fam not in families:
                raise FksInputError(f"family {fam!r} not in meta.json families",
                                    path=index_p, line=line, field="condition_family")
        layers = tuple(int(x) for x in meta["layers"])
        missing = [x for x in layers if not (folder / f"layer_{x:03d}.npy").is_file()]
        if missing:
            log.warning("%s lacks layer files %s; KTS intervals are skipped", folder, missing)
            return None
        ident = meta.get("identity")
        ifacts = ipairs = None
        if ident is not None:
            if not isinstance(ident, dict) or not isinstance(ident.get("fact_ids"), list) \
                    or not isinstance(ident.get("pairs"), list):
                raise FksInputError("expected an object with lists 'fact_ids' and 'pairs'",
                                    path=meta_p, field="identity")
            ifacts = tuple(str(f) for f in ident["fact_ids"])
            ipairs = tuple(str(p) for p in ident["pairs"])
            gone = [x for x in layers if not (folder / f"identity_{x:03d}.npy").is_file()]
            if gone:
                raise FksInputError(f"meta.json names reference-pool identity files but "
                                    f"identity_{gone[0]:03d}.npy is missing", path=meta_p,
                                    field="identity")
        return cls(folder, layers, families,
                   np.array([r[1] for r in rows], dtype=object),
                   np.array([families.index(r[2]) for r in rows], dtype=np.int64),
                   ifacts, ipairs)

    def space(self, fact_ids: np.ndarray, families: Iterable[str], *, min_facts: int,
              eps: float) -> KtsSpace:
        """Build the :class:`KtsSpace` of ``fact_ids`` over ``families`` (store order kept).

        Facts without centroids get no family (they enter no pair).
        """
        keep = [t for t, f in enumerate(self.families) if f in set(families)]
        pos = {f: i for i, f in enumerate(fact_ids.tolist())}
        fi = np.array([pos.get(f, -1) for f in self.row_fact.tolist()], dtype=np.int64)
        col = np.array([keep.index(t) if t in keep else -1 for t in self.row_family.tolist()],
                       dtype=np.int64)
        ok = (fi >= 0) & (col >= 0)
        has = np.zeros((len(fact_ids), len(keep)), dtype=bool)
        has[fi[ok], col[ok]] = True
        rows, folder = np.flatnonzero(ok), self.folder

        def load(layer: int) -> np.ndarray:
            arr = load_npy(folder / f"layer_{layer:03d}.npy", field=f"layer {layer}")
            out = np.zeros((len(fact_ids), len(keep), arr.shape[1]), dtype=np.float32)
            out[fi[ok], col[ok]] = arr[rows]
            return out

        space = KtsSpace(np.asarray(fact_ids), tuple(self.families[t] for t in keep),
                         self.layers, has, load, min_facts, eps)
        if self.identity_facts is None or self.identity_pairs is None:
            return space
        ipos = {f: i for i, f in enumerate(self.identity_facts)}
        frow = np.array([ipos.get(f, -1) for f in np.asarray(fact_ids).tolist()], np.int64)
        names = space.pair_names()
        missing = [n for n in names if n not in self.identity_pairs]
        if missing:
            raise FksInputError(f"the reference-pool identity has no pair {missing[0]}",
                                path=folder / "meta.json", field="identity.pairs")
        pcol = np.array([self.identity_pairs.index(n) for n in names], np.int64)

        def identity(layer: int) -> np.ndarray:
            arr = load_npy(folder / f"identity_{layer:03d}.npy", field=f"identity {layer}")
            if arr.ndim != 3 or arr.shape[0] != len(self.identity_facts) \
                    or arr.shape[1] != len(self.identity_pairs) or arr.shape[2] != 2:
                raise FksInputError(f"shape {arr.shape}, expected ({len(self.identity_facts)}, "
                                    f"{len(self.identity_pairs)}, 2)",
                                    path=folder / f"identity_{layer:03d}.npy", field="shape")
            out = np.zeros((len(frow), len(pcol), 2), dtype=np.float64)
            ok = frow >= 0
            out[ok] = arr[frow[ok]][:, pcol]
            return out

        return dataclasses.replace(space, identity=identity)


# ================================================================================ the run
@dataclass
class RunData:
    """Everything of one run directory the report uses (``None``: stage not run)."""

    run_dir: Path
    model: str
    manifest: dict[str, Any]
    facts: FactFrame | None
    behavior_summary: dict[str, Any] | None = None
    iss_summary: dict[str, Any] | None = None
    kts_summary: dict[str, Any] | None = None
    sanity: dict[str, Any] | None = None
    calibration: dict[str, Any] | None = None
    iss_layers: tuple[list[int], np.ndarray] | None = None
    centroids: CentroidStore | None = None
    inputs: dict[str, str] = field(default_factory=dict)
    #: the fact ids of each per-fact file read (``FILES`` key -> ids in file order)
    file_facts: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def metrics_dir(self) -> Path:
        """``RUN/metrics``."""
        return self.run_dir / METRICS_DIR

    def judged_path(self) -> Path | None:
        """``RUN/judged.jsonl`` when it exists."""
        p = self.run_dir / "judged.jsonl"
        return p if p.is_file() else None


def benchmark_checksum(run_dir: Path, manifest: dict[str, Any]) -> str | None:
    """Return the benchmark checksum a run recorded (generation, score or judge), or None.

    Raises:
        FksInputError: two stages recorded different checksums.
    """
    stages = manifest.get("stages") or {}
    sections = {"benchmark": manifest.get("benchmark"),
                "scoring.benchmark": (manifest.get("scoring") or {}).get("benchmark"),
                **{f"stages.{k}.benchmark": (stages.get(k) or {}).get("benchmark")
                   for k in ("score", "judge")}}
    found = {}
    for where, section in sections.items():
        if isinstance(section, dict) and isinstance(section.get("checksum"), str):
            found[where] = section["checksum"]
    values = set(found.values())
    if len(values) > 1:
        raise FksInputError(f"stages recorded different benchmark checksums: {found}",
                            path=run_dir / MANIFEST_NAME, field="benchmark.checksum")
    return values.pop() if values else None


def _json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    data = read_json(path)
    if not isinstance(data, dict):
        raise FksInputError("expected a JSON object", path=path)
    return data


def _iss_layers(path: Path, fact_ids: np.ndarray) -> tuple[list[int], np.ndarray] | None:
    """``(layers, (F, L) ISS)`` from ``iss_per_fact_layer.jsonl`` (nan: undefined)."""
    if not path.is_file():
        return None
    pos = {f: i for i, f in enumerate(fact_ids.tolist())}
    cells: dict[tuple[int, int], float] = {}
    for _, r in iter_jsonl(path, IssLayerRow):
        i = pos.get(r.fact_id)
        if i is not None:
            cells[(i, r.layer)] = np.nan if r.iss is None else float(r.iss)
    layers = sorted({layer for _, layer in cells})
    out = np.full((len(fact_ids), len(layers)), np.nan)
    col = {layer: j for j, layer in enumerate(layers)}
    for (i, layer), v in cells.items():
        out[i, col[layer]] = v
    return layers, out


def load_run(run_dir: str | Path) -> RunData:
    """Read a run directory.

    Args:
        run_dir: the run directory.

    Raises:
        FksInputError: the directory is missing, or a present file is malformed.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FksInputError("run directory not found", path=run_dir)
    mdir = run_dir / METRICS_DIR
    paths = {k: mdir / v for k, v in FILES.items()}
    behavior = (_rows(paths["behavior_per_fact"], BehaviorFactRow)
                if paths["behavior_per_fact"].is_file() else None)
    iss = _rows(paths["iss_per_fact"], IssFactRow) if paths["iss_per_fact"].is_file() else None
    for rows, key in ((behavior, "behavior_per_fact"), (iss, "iss_per_fact")):
        if rows is not None:
            _check_unique(rows, paths[key])
    facts = _frame(behavior, iss) if behavior or iss else None
    manifest = read_run_manifest(run_dir)
    models = {r.model for rows in (behavior or [], iss or []) for _, r in rows if r.model}
    model = (sorted(models)[0] if models else
             str((manifest.get("model") or {}).get("name") or run_dir.name))
    data = RunData(
        run_dir=run_dir, model=model, manifest=manifest, facts=facts,
        behavior_summary=_json(paths["behavior_summary"]), iss_summary=_json(paths["iss_summary"]),
        kts_summary=_json(paths["kts_summary"]), sanity=_json(paths["sanity"]),
        calibration=_json(paths["calibration"]),
        iss_layers=(_iss_layers(paths["iss_per_fact_layer"], facts.fact_ids)
                    if facts is not None else None),
        centroids=CentroidStore.open(mdir / CENTROIDS_DIR),
        inputs={v: sha256_file(paths[k]) for k, v in FILES.items() if paths[k].is_file()},
        file_facts={key: tuple(r.fact_id for _, r in rows)
                    for rows, key in ((behavior, "behavior_per_fact"), (iss, "iss_per_fact"))
                    if rows is not None},
    )
    if data.centroids is not None:
        idents = [f"identity_{x:03d}.npy" for x in data.centroids.layers] \
            if data.centroids.identity_facts is not None else []
        for name in ("meta.json", "index.jsonl", *(f"layer_{x:03d}.npy"
                                                    for x in data.centroids.layers), *idents):
            data.inputs[f"{CENTROIDS_DIR}/{name}"] = sha256_file(mdir / CENTROIDS_DIR / name)
    return data
