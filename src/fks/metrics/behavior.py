"""Behavioural stability: BCS, BES and behaviour classes (spec §4-6, §13.1, §16.1, §17.1).

Two layers:

* :func:`compute_bcs_bes` -- the exact kernel of spec §16.1 for one fact's records (same
  argument order, same result keys). It is the definition the rest is tested against.
* :func:`fact_behavior` -- the production path: every fact at once, vectorised with numpy
  (bincounts over ``fact x family`` and ``(fact, cluster) x family``), equal to the kernel to
  floating-point tolerance. :func:`behavior_summary` aggregates it into the model-level figures
  and :func:`run_behavior_metrics` writes the ``RUN/metrics/behavioral_*`` files.

Definitions (fact ``f``, family set ``T_f`` = the main families the fact has):

* ``p_{f,t}(a)`` = share of family ``t``'s queries answered in cluster ``a`` (§4.2);
* ``p_f(a) = mean_{t in T_f} p_{f,t}(a)`` -- every family weighs the same (§4.3);
* ``BCS_f = max_a p_f(a)``; modal cluster ``a* = argmax``; ties (within 1e-12) go to the
  lexicographically smallest cluster id. The pseudo-code's ``max(p, key=p.get)`` iterates a
  *set*, so its choice among exact ties depends on string hashing (``PYTHONHASHSEED``); fks
  fixes it. Ties need ``BCS <= 0.5``, so with ``tau_b > 0.5`` they never move a fact between
  behaviour groups;
* ``BES_f = 1`` when one cluster is observed, else ``1 - H(p_f) / log A_f`` (§5.2).

Scorable answers. A main-forward record is an *answer* only when its generation succeeded,
its ``raw_response`` is not empty (an instruct model without a chat template often returns
``""``), and the judge gave it a cluster that carries a claim -- not ``UNPARSEABLE`` (no claim
could be extracted) and not ``REVIEW_REQUIRED`` (the judge itself failed). Every other record
is *unscorable* (:func:`unscorable_reason`: ``generation_error``, ``empty``,
``judge_failure``, ``unparseable``) and enters no distribution: it is not model behaviour, so
it can never make a fact stable. A family with no scorable answer drops out of ``T_f`` like a
missing family. A fact is **Unscorable** -- no BCS, no BES, no modal cluster -- when fewer than
:data:`MIN_ANSWERED_FAMILY_SHARE` of the main families it has queries in (rounded up, at least
one) have a scorable answer. The kernel :func:`compute_bcs_bes` skips unscorable records too
(and raises its "No valid main-family queries." when none is left).

Behaviour groups at threshold ``tau`` (§6): ``BCS >= tau`` is stable (the spec's ``>=``; a
slack of 1e-9 keeps a BCS equal to ``tau`` in exact arithmetic from being lost to rounding),
``BCS < tau`` is ``Unstable``. A stable fact is ``Stable Correct`` when its modal cluster is
``CORRECT``, ``Stable Wrong`` when it is ``INCORRECT`` (a clear wrong answer, §6.2), and
``Stable Abstention`` only when it is ``ABSTAIN`` (§6.3). A stable fact whose modal cluster is
``MULTIPLE`` (correctness ``AMBIGUOUS``) is ``Stable Multiple``; one whose modal answer cluster
is ``REVIEW_REQUIRED`` (an ungrounded "correct" cluster) is ``Stable Review``. Those two and
``Unscorable`` are shown beside the four §6 groups (:data:`EXTRA_GROUPS`), so the seven groups
partition the facts. The four published shares are the §6 ones, counts over the fixed
``|D_eval|`` -- every fact of the selection, unscorable facts included -- so
``SCR + SWR + SAR + UR = 1 - (stable multiple + stable review + unscorable)``; BCS and BES means
are over the scorable facts (an undefined value is never invented), with their count given.

Family membership comes from each record's own ``use_for_main_forward`` intersected with
``main_families`` (``metrics.yaml``), never a hard-coded list; a missing family is left out of
``T_f``, never filled with zero.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from fks.data.schema import JudgedRecord
from fks.errors import FksInputError
from fks.generate.manifest import update_run_manifest
from fks.io import atomic_write_json, atomic_write_jsonl, iter_jsonl, sha256_file, unique_rows
from fks.runlock import locks_run_dir

__all__ = [
    "GROUPS",
    "EXTRA_GROUPS",
    "ALL_GROUPS",
    "UNSCORABLE",
    "MIN_ANSWERED_FAMILY_SHARE",
    "UNSCORABLE_REASONS",
    "ANCHOR_FAMILY",
    "unscorable_reason",
    "compute_bcs_bes",
    "behavior_group",
    "behavior_groups",
    "JudgedColumns",
    "load_judged",
    "FactBehavior",
    "fact_behavior",
    "readings_for",
    "behavior_summary",
    "per_fact_rows",
    "per_query_rows",
    "run_behavior_metrics",
]

log = logging.getLogger(__name__)

GROUPS: tuple[str, ...] = ("Stable Correct", "Stable Wrong", "Stable Abstention", "Unstable")
#: groups outside the four of §6: stable on a non-answer the spec does not name, and facts
#: without enough scorable answers (module docstring)
EXTRA_GROUPS: tuple[str, ...] = ("Stable Multiple", "Stable Review", "Unscorable")
ALL_GROUPS: tuple[str, ...] = GROUPS + EXTRA_GROUPS
UNSCORABLE = "Unscorable"
_SHARE_KEYS = {"Stable Correct": "scr", "Stable Wrong": "swr", "Stable Abstention": "sar",
               "Unstable": "ur", "Stable Multiple": "stable_multiple",
               "Stable Review": "stable_review", "Unscorable": "unscorable"}
#: a fact is scorable when at least this share of the main families it has queries in (rounded
#: up, at least one) has a scorable answer
MIN_ANSWERED_FAMILY_SHARE = 0.5
#: clusters that carry no claim: no extractable answer, or the judge failed
NON_ANSWER_CLUSTERS = frozenset({"UNPARSEABLE", "REVIEW_REQUIRED"})
#: why a main record is not a scorable answer, in the order they are tested
UNSCORABLE_REASONS: tuple[str, ...] = ("generation_error", "empty", "judge_failure",
                                       "unparseable")
#: the unperturbed baseline family of the spec: its correctness is K_m, and the readings with
#: and without it are both reported (README caveat 4)
ANCHOR_FAMILY = "anchor"
STABLE_SLACK = 1e-9
TIE_TOL = 1e-12


# ============================================================================ the §16.1 kernel
def _get(item: Any, key: str, default: Any = None) -> Any:
    if isinstance(item, Mapping):
        return item.get(key, default)
    return getattr(item, key, default)


def unscorable_reason(item: Any) -> str | None:
    """Why a judged record is not a scorable answer (module docstring), or None.

    Fields absent from a mapping count as fine (``generation_status`` ok, a response present).

    >>> unscorable_reason({"cluster_id": "ENTITY_Q90", "raw_response": "Paris"}) is None
    True
    >>> unscorable_reason({"cluster_id": "UNPARSEABLE", "raw_response": "  "})
    'empty'
    >>> unscorable_reason({"cluster_id": "UNPARSEABLE", "generation_status": "timeout"})
    'generation_error'
    """
    if _get(item, "generation_status", "ok") not in (None, "ok"):
        return "generation_error"
    raw = _get(item, "raw_response")
    if raw is not None and not str(raw).strip():
        return "empty"
    cluster = _get(item, "cluster_id")
    if cluster == "REVIEW_REQUIRED":
        return "judge_failure"
    if cluster == "UNPARSEABLE":
        return "unparseable"
    return None


def compute_bcs_bes(records: Sequence[Any], main_families: Sequence[str]) -> dict[str, Any]:
    """BCS and BES of one fact, as spec §16.1 over its scorable answers.

    Args:
        records: the fact's judged records (mappings or objects) with ``condition_family`` and
            ``cluster_id``. A record whose ``use_for_main_forward`` is false is skipped (when
            the field is absent it counts as true, as in the pseudo-code), and so is a record
            that is not a scorable answer (:func:`unscorable_reason`: a generation error, an
            empty response, ``UNPARSEABLE`` or ``REVIEW_REQUIRED``): it is not behaviour.
        main_families: families that enter the scores.

    Returns:
        ``{"bcs", "bes", "modal_cluster", "cluster_distribution", "valid_families"}``.

    Raises:
        ValueError: no record of a main family ("No valid main-family queries.").

    >>> r = compute_bcs_bes([{"condition_family": "anchor", "cluster_id": "A"},
    ...                      {"condition_family": "format", "cluster_id": "A"},
    ...                      {"condition_family": "format", "cluster_id": "B"}],
    ...                     ["anchor", "format"])
    >>> r["bcs"], r["modal_cluster"], r["valid_families"]
    (0.75, 'A', ['anchor', 'format'])
    """
    family_cluster_counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    family_totals: dict[str, int] = defaultdict(int)
    for item in records:
        family = _get(item, "condition_family")
        if family not in main_families or not _get(item, "use_for_main_forward", True) \
                or unscorable_reason(item) is not None:
            continue
        cluster = _get(item, "cluster_id")
        family_cluster_counts[family][cluster] += 1
        family_totals[family] += 1
    valid_families = sorted(family_totals)
    if not valid_families:
        raise ValueError("No valid main-family queries.")
    clusters = sorted({c for fam in valid_families for c in family_cluster_counts[fam]})
    p = {
        c: sum(family_cluster_counts[fam].get(c, 0) / family_totals[fam]
               for fam in valid_families) / len(valid_families)
        for c in clusters
    }
    top = max(p.values())
    modal_cluster = next(c for c in clusters if p[c] >= top - TIE_TOL)
    bcs = p[modal_cluster]
    positive = [v for v in p.values() if v > 0]
    if len(positive) == 1:
        bes = 1.0
    else:
        entropy = -sum(v * math.log(v) for v in positive)
        bes = 1.0 - entropy / math.log(len(positive))
    return {"bcs": bcs, "bes": bes, "modal_cluster": modal_cluster,
            "cluster_distribution": p, "valid_families": valid_families}


def behavior_group(bcs: float | None, modal_correctness: str, tau: float, *,
                   scorable: bool = True) -> str:
    """Return the behaviour group of one fact (module docstring).

    >>> behavior_group(0.8, "CORRECT", 0.8), behavior_group(0.79, "CORRECT", 0.8)
    ('Stable Correct', 'Unstable')
    >>> behavior_group(1.0, "ABSTAIN", 0.8), behavior_group(1.0, "AMBIGUOUS", 0.8)
    ('Stable Abstention', 'Stable Multiple')
    >>> behavior_group(None, "", 0.8), behavior_group(1.0, "CORRECT", 0.8, scorable=False)
    ('Unscorable', 'Unscorable')
    """
    if not scorable or bcs is None or not math.isfinite(bcs):
        return UNSCORABLE
    if bcs < tau - STABLE_SLACK:
        return "Unstable"
    return _STABLE_BY_MODAL.get(modal_correctness, "Stable Review")


_STABLE_BY_MODAL = {"CORRECT": "Stable Correct", "INCORRECT": "Stable Wrong",
                    "ABSTAIN": "Stable Abstention", "AMBIGUOUS": "Stable Multiple",
                    "REVIEW_REQUIRED": "Stable Review"}


def behavior_groups(bcs: np.ndarray, modal_correctness: np.ndarray, tau: float,
                    scorable: np.ndarray | None = None) -> np.ndarray:
    """Vectorised :func:`behavior_group`: ``(F,)`` floats and labels -> ``(F,)`` group names."""
    bcs = np.asarray(bcs, dtype=float)
    ok = np.isfinite(bcs) if scorable is None else np.asarray(scorable, bool) & np.isfinite(bcs)
    stable = np.where(ok, bcs, -np.inf) >= tau - STABLE_SLACK
    mc = np.asarray(modal_correctness, dtype=object)
    out = np.full(bcs.shape, "Stable Review", dtype=object)
    for corr, group in _STABLE_BY_MODAL.items():
        out[mc == corr] = group
    out[~stable] = "Unstable"
    out[~ok] = UNSCORABLE
    return out


# ======================================================================= columnar judged data
@dataclass
class JudgedColumns:
    """Judged records as parallel arrays (one entry per record), for the vectorised path."""

    model: str
    query_id: np.ndarray
    fact_id: np.ndarray
    relation: np.ndarray
    family: np.ndarray
    language: np.ndarray
    cluster_id: np.ndarray
    status: np.ndarray
    correctness: np.ndarray
    main: np.ndarray  # use_for_main_forward
    reverse: np.ndarray  # use_for_reverse_analysis
    recognition: np.ndarray  # use_for_recognition_analysis
    copy: np.ndarray  # answer_in_subject_surface
    judge: tuple[str, ...] = ()
    #: why each record is not a scorable answer (:func:`unscorable_reason`), "" when it is
    reason: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))

    def __post_init__(self) -> None:
        if len(self.reason) != len(self.query_id):
            self.reason = np.full(len(self.query_id), "", dtype=object)

    def __len__(self) -> int:
        return len(self.query_id)

    @property
    def scorable(self) -> np.ndarray:
        """``(N,)`` bool: the record is a scorable answer."""
        return self.reason == ""

    @classmethod
    def from_records(cls, records: Sequence[Any]) -> JudgedColumns:
        """Build from judged records (mappings or :class:`JudgedRecord`); one model only."""
        models = {_get(r, "model") for r in records}
        if len(models) > 1:
            raise ValueError(f"records of several models: {sorted(map(str, models))}")

        def col(key: str, dtype: Any = object, default: Any = None) -> np.ndarray:
            return np.array([_get(r, key, default) for r in records], dtype=dtype)

        return cls(
            model=str(next(iter(models))) if models else "",
            query_id=col("query_id"), fact_id=col("fact_id"), relation=col("relation"),
            family=col("condition_family"), language=col("language", default="en"),
            cluster_id=col("cluster_id"), status=col("status"),
            correctness=col("correctness"),
            main=col("use_for_main_forward", bool, False),
            reverse=col("use_for_reverse_analysis", bool, False),
            recognition=col("use_for_recognition_analysis", bool, False),
            copy=col("answer_in_subject_surface", bool, False),
            judge=tuple(sorted({str(_get(r, "judge", "")) for r in records})),
            reason=np.array([unscorable_reason(r) or "" for r in records], dtype=object),
        )


def load_judged(path: str | Path, *, benchmark: Any = None, protocol: Any = None
                ) -> JudgedColumns:
    """Read ``judged.jsonl`` (validated) into columns, checking its invariants.

    Args:
        path: the file.
        benchmark: the run's benchmark (:func:`fks.provenance.run_benchmark`); each row's
            query must be in it with the same fact, family and main-forward flag.
        protocol: a :class:`fks.provenance.ProtocolCheck` (default: rows agree with each
            other on prompt version and decoding protocol).

    Raises:
        FksInputError: a bad row; records of more than one model (a run directory holds one);
            a query unknown to the benchmark or disagreeing with it; mixed prompt versions or
            decoding protocols; or two main records of one fact in the same cluster with
            different correctness (correctness is a property of a cluster, spec §3.2) --
            naming file, line, field.
    """
    from fks.provenance import ProtocolCheck

    path = Path(path)
    protocol = protocol or ProtocolCheck(path)
    queries = None if benchmark is None else {q.query_id: q for q in benchmark.queries}
    records: list[JudgedRecord] = []
    seen_corr: dict[tuple[str, str], tuple[str, int]] = {}
    for line, rec in unique_rows(iter_jsonl(path, JudgedRecord), path, what="judged records"):
        assert isinstance(rec, JudgedRecord)
        protocol(line, rec)
        if "use_for_main_forward" not in rec.model_fields_set:  # it decides the main metrics
            raise FksInputError("missing: a judged row must say whether its query is a "
                                "main-forward one", path=path, line=line,
                                field="use_for_main_forward")
        if queries is not None:
            _check_against_benchmark(rec, queries, path, line, benchmark.root)
        if records and rec.model != records[0].model:
            raise FksInputError(f"a run directory holds one model; found {rec.model!r} after "
                                f"{records[0].model!r}", path=path, line=line, field="model")
        if rec.use_for_main_forward:
            prev = seen_corr.setdefault((rec.fact_id, rec.cluster_id), (rec.correctness, line))
            if prev[0] != rec.correctness:
                raise FksInputError(
                    f"cluster {rec.cluster_id!r} of {rec.fact_id} is {prev[0]} on line "
                    f"{prev[1]} but {rec.correctness} here", path=path, line=line,
                    field="correctness")
        records.append(rec)
    if not records:
        raise FksInputError("no judged records", path=path)
    return JudgedColumns.from_records(records)


def _check_against_benchmark(rec: JudgedRecord, queries: Mapping[str, Any], path: Path,
                             line: int, root: Any) -> None:
    """Refuse a row whose query is not the benchmark's (unknown id or other attributes)."""
    q = queries.get(rec.query_id)
    if q is None:
        raise FksInputError(f"query {rec.query_id!r} is not in the run's benchmark ({root})",
                            path=path, line=line, field="query_id")
    for name in ("fact_id", "condition_family", "use_for_main_forward"):
        if getattr(rec, name) != getattr(q, name):
            raise FksInputError(f"{rec.query_id} has {name} {getattr(q, name)!r} in the "
                                f"benchmark ({root}), {getattr(rec, name)!r} here",
                                path=path, line=line, field=name)


# ======================================================================= vectorised per fact
@dataclass
class FactBehavior:
    """Per-fact BCS/BES for one family set (one *reading*), all facts at once.

    Attributes (``F`` facts with at least one record of the reading, scorable or not, sorted
    by id; ``T`` families of the reading that occur, sorted; ``G`` distinct (fact, cluster)
    pairs of scorable answers):
        families: ``(T,)`` family names.
        fact_ids: ``(F,)``; relation, copy: ``(F,)`` per-fact attributes.
        has_family: ``(F, T)`` bool, the fact has records of that family (coverage, §1.3).
        answered: ``(F, T)`` bool, the fact has a scorable answer in that family (``T_f``).
        scorable: ``(F,)`` bool, enough families answered (module docstring).
        n_records, n_scorable: ``(F,)`` int, main records and scorable answers of the reading.
        bcs, bes: ``(F,)`` float, nan for an unscorable fact; n_clusters: ``(F,)`` int.
        modal_cluster, modal_correctness: ``(F,)`` object, "" for an unscorable fact.
        g_fact, g_cluster, g_p: ``(G,)`` the distributions ``p_f(a)`` over scorable answers,
            grouped by fact and sorted by cluster id within a fact.
    """

    families: tuple[str, ...]
    fact_ids: np.ndarray
    relation: np.ndarray
    copy: np.ndarray
    has_family: np.ndarray
    bcs: np.ndarray
    bes: np.ndarray
    n_clusters: np.ndarray
    modal_cluster: np.ndarray
    modal_correctness: np.ndarray
    g_fact: np.ndarray
    g_cluster: np.ndarray
    g_p: np.ndarray
    answered: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), bool))
    scorable: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    n_records: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    n_scorable: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    _starts: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0, int))
    _ends: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0, int))

    def valid_families(self, i: int) -> list[str]:
        """Families of fact ``i`` with a scorable answer (the kernel's ``valid_families``)."""
        return [f for f, h in zip(self.families, self.answered[i], strict=True) if h]

    def distribution(self, i: int) -> dict[str, float]:
        """``p_f(a)`` of fact ``i`` over its scorable answers: ``{cluster_id: probability}``."""
        s, e = self._starts[i], self._ends[i]
        return {str(c): float(p) for c, p in zip(self.g_cluster[s:e], self.g_p[s:e], strict=True)}

    def complete(self, required: Sequence[str]) -> np.ndarray:
        """``(F,)`` bool: the fact has every family in ``required`` (complete-family, §1.3)."""
        idx = [self.families.index(f) if f in self.families else -1 for f in required]
        if any(i < 0 for i in idx):
            return np.zeros(len(self.fact_ids), dtype=bool)
        return self.has_family[:, idx].all(axis=1) if idx else np.ones(len(self.fact_ids), bool)


def _bcs_bes_arrays(fact: np.ndarray, family: np.ndarray, cluster: np.ndarray,
                    n_facts: int, n_families: int, n_clusters: int) -> dict[str, np.ndarray]:
    """Compute §4-5 on integer codes (every fact has >= 1 record).

    Args:
        fact: ``(N,)`` fact code of each record, 0..n_facts-1.
        family: ``(N,)`` family code, 0..n_families-1.
        cluster: ``(N,)`` cluster code, 0..n_clusters-1, in the sorted order of cluster ids
            (ties go to the smallest code).
        n_facts: number of facts F.
        n_families: number of families T.
        n_clusters: number of distinct cluster ids.

    Returns:
        has ``(F, T)``; bcs, bes, n_clusters, modal_g ``(F,)``; g_fact, g_cluster, g_p
        ``(G,)``; starts ``(F,)`` (first g of each fact); g_inv ``(N,)`` (g of each record).
    """
    n_ft = np.bincount(fact * n_families + family, minlength=n_facts * n_families)
    n_ft = n_ft.reshape(n_facts, n_families)
    has = n_ft > 0
    n_t = has.sum(axis=1)
    pair, g_inv = np.unique(fact.astype(np.int64) * n_clusters + cluster, return_inverse=True)
    g_fact, g_cluster = pair // n_clusters, pair % n_clusters
    n_g = len(pair)
    cnt = np.bincount(g_inv * n_families + family, minlength=n_g * n_families)
    cnt = cnt.reshape(n_g, n_families).astype(float)
    denom = n_ft[g_fact].astype(float)
    p_gt = np.divide(cnt, denom, out=np.zeros_like(cnt), where=denom > 0)
    g_p = p_gt.sum(axis=1) / n_t[g_fact]
    starts = np.searchsorted(g_fact, np.arange(n_facts))
    bcs = np.maximum.reduceat(g_p, starts)
    cand = np.where(g_p >= bcs[g_fact] - TIE_TOL, np.arange(n_g), n_g)
    modal_g = np.minimum.reduceat(cand, starts)
    entropy = -np.add.reduceat(g_p * np.log(g_p), starts)
    n_cl = np.diff(np.append(starts, n_g))
    with np.errstate(divide="ignore", invalid="ignore"):
        bes = np.where(n_cl == 1, 1.0, 1.0 - entropy / np.log(np.maximum(n_cl, 2)))
    return {"has": has, "bcs": bcs, "bes": bes, "n_clusters": n_cl, "modal_g": modal_g,
            "g_fact": g_fact, "g_cluster": g_cluster, "g_p": g_p, "starts": starts,
            "g_inv": g_inv}


def _first_index(codes: np.ndarray, n: int) -> np.ndarray:
    """Return ``(n,)``: where each code 0..n-1 first occurs in ``codes`` (all must occur)."""
    values, first = np.unique(codes, return_index=True)
    if len(values) != n:
        raise ValueError(f"expected every code 0..{n - 1} to occur; found {len(values)}")
    return first


def fact_behavior(cols: JudgedColumns, families: Sequence[str], *,
                  min_answered_share: float = MIN_ANSWERED_FAMILY_SHARE) -> FactBehavior:
    """BCS, BES and modal cluster of every fact for one family set (the production path).

    Records enter when ``use_for_main_forward`` is true *and* their family is in
    ``families``; every such fact is in the result, but only scorable answers enter its
    distribution (module docstring). Equal to :func:`compute_bcs_bes` per scorable fact
    (tested).

    Raises:
        ValueError: no record enters.
    """
    mask = cols.main & np.isin(cols.family, list(families))
    if not mask.any():
        raise ValueError(f"no main-forward record of families {list(families)}")
    fam_names, fam_all = np.unique(cols.family[mask].astype(str), return_inverse=True)
    fact_names, fact_all = np.unique(cols.fact_id[mask].astype(str), return_inverse=True)
    n_f, n_t = len(fact_names), len(fam_names)
    has = np.bincount(fact_all * n_t + fam_all, minlength=n_f * n_t).reshape(n_f, n_t) > 0
    n_records = np.bincount(fact_all, minlength=n_f)
    first_of_fact = _first_index(fact_all, n_f)
    ok = cols.scorable[mask]
    answered = np.zeros((n_f, n_t), dtype=bool)
    answered[fact_all[ok], fam_all[ok]] = True
    n_scorable = np.bincount(fact_all[ok], minlength=n_f)
    need = np.maximum(1, np.ceil(min_answered_share * has.sum(axis=1) - 1e-9)).astype(int)
    scorable = answered.sum(axis=1) >= need

    bcs = np.full(n_f, np.nan)
    bes = np.full(n_f, np.nan)
    n_clusters = np.zeros(n_f, dtype=int)
    modal_cluster = np.full(n_f, "", dtype=object)
    modal_corr = np.full(n_f, "", dtype=object)
    starts = np.zeros(n_f, dtype=int)
    ends = np.zeros(n_f, dtype=int)
    g_fact = np.zeros(0, dtype=int)
    g_cluster = np.zeros(0, dtype=object)
    g_p = np.zeros(0)
    if ok.any():
        sub_fact_names, sub_fact = np.unique(fact_all[ok], return_inverse=True)
        cl_names, cl = np.unique(cols.cluster_id[mask][ok].astype(str), return_inverse=True)
        core = _bcs_bes_arrays(sub_fact, fam_all[ok], cl, len(sub_fact_names), n_t,
                               len(cl_names))
        first_of_g = _first_index(core["g_inv"], len(core["g_p"]))
        corr = cols.correctness[mask][ok][first_of_g]
        u = sub_fact_names  # universe index of each fact with a scorable answer
        keep = scorable[u]
        bcs[u[keep]] = core["bcs"][keep]
        bes[u[keep]] = core["bes"][keep]
        n_clusters[u] = core["n_clusters"]
        modal_cluster[u[keep]] = cl_names[core["g_cluster"][core["modal_g"]]][keep]
        modal_corr[u[keep]] = corr[core["modal_g"]][keep]
        starts[u] = core["starts"]
        ends[u] = np.append(core["starts"][1:], len(core["g_p"]))
        g_fact, g_cluster, g_p = u[core["g_fact"]], cl_names[core["g_cluster"]], core["g_p"]
    return FactBehavior(
        families=tuple(str(f) for f in fam_names), fact_ids=fact_names,
        relation=cols.relation[mask][first_of_fact], copy=cols.copy[mask][first_of_fact],
        has_family=has, bcs=bcs, bes=bes, n_clusters=n_clusters, modal_cluster=modal_cluster,
        modal_correctness=modal_corr, g_fact=g_fact, g_cluster=g_cluster, g_p=g_p,
        answered=answered, scorable=scorable, n_records=n_records, n_scorable=n_scorable,
        _starts=starts, _ends=ends,
    )


def anchor_labels(cols: JudgedColumns, fact_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """K_m per fact: ``(has_anchor, anchor_correct)``, both ``(F,)`` bool.

    A fact's anchor is correct when it has main-forward ``anchor`` records and all of them
    are ``CORRECT`` (the benchmark holds exactly one per fact).
    """
    mask = cols.main & (cols.family == ANCHOR_FAMILY)
    pos = {f: i for i, f in enumerate(fact_ids)}
    has = np.zeros(len(fact_ids), dtype=bool)
    ok = np.ones(len(fact_ids), dtype=bool)
    for f, c in zip(cols.fact_id[mask], cols.correctness[mask], strict=True):
        i = pos.get(f)
        if i is not None:
            has[i] = True
            ok[i] &= c == "CORRECT"
    return has, ok & has


def readings_for(main_families: Sequence[str]) -> dict[str, list[str]]:
    """Return the two readings of README caveat 4: the configured families and the other.

    With ``anchor`` configured, the alternative drops it (``without_anchor``); without it,
    the alternative adds it (``with_anchor``). The configured reading comes first.
    """
    fams = list(dict.fromkeys(main_families))
    if ANCHOR_FAMILY in fams:
        alt = [f for f in fams if f != ANCHOR_FAMILY]
        out = {"with_anchor": fams}
        if alt:
            out["without_anchor"] = alt
        return out
    return {"without_anchor": fams, "with_anchor": [ANCHOR_FAMILY, *fams]}


# ============================================================================ aggregation
def _tau_key(tau: float) -> str:
    return f"{tau:g}"


def _mean(x: np.ndarray) -> float | None:
    """Mean of the finite values, or None (not defined) when there is none."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float(np.mean(x)) if len(x) else None


def _group_shares(groups: np.ndarray, modal_correctness: np.ndarray) -> dict[str, Any]:
    """Count and share every group of a selection of facts at one threshold.

    ``scr``/``swr``/``sar``/``ur`` are the §6 shares over the fixed selection (unscorable
    facts included in the denominator); ``stable_multiple``, ``stable_review`` and
    ``unscorable`` complete the partition (``shares_total`` is 1 for a non-empty selection);
    ``stable_by_modal`` counts the stable facts by modal correctness.
    """
    n = len(groups)
    counts = {g: int(np.sum(groups == g)) for g in ALL_GROUPS}
    shares = {_SHARE_KEYS[g]: (counts[g] / n if n else None) for g in ALL_GROUPS}
    stable = ~np.isin(groups, ["Unstable", UNSCORABLE])
    by_modal = {c: int(np.sum(modal_correctness[stable] == c))
                for c in ("CORRECT", "INCORRECT", "ABSTAIN", "AMBIGUOUS", "REVIEW_REQUIRED")}
    return {**shares, "counts": counts, "n_unscorable": counts[UNSCORABLE],
            "n_scorable": n - counts[UNSCORABLE],
            "shares_total": (sum(counts.values()) / n if n else None),
            "stable_by_modal": by_modal}


@dataclass
class _Facts:
    """Per-fact inputs of the aggregation for one reading."""

    fb: FactBehavior
    groups: dict[float, np.ndarray]  # tau -> (F,) group names
    has_anchor: np.ndarray
    anchor_ok: np.ndarray


def _per_relation(f: _Facts, mask: np.ndarray, tau: float) -> dict[str, dict[str, Any]]:
    """Per-relation means (BCS, BES, the four shares at ``tau``, anchor accuracy)."""
    out: dict[str, dict[str, Any]] = {}
    for rel in sorted(set(f.fb.relation[mask].tolist())):
        m = mask & (f.fb.relation == rel)
        g = f.groups[tau][m]
        out[str(rel)] = {
            "n_facts": int(m.sum()),
            "n_unscorable": int((m & ~f.fb.scorable).sum()),
            "bcs": _mean(f.fb.bcs[m]),
            "bes": _mean(f.fb.bes[m]),
            **{_SHARE_KEYS[name]: float(np.mean(g == name)) for name in ALL_GROUPS},
            "n_anchor": int((m & f.has_anchor).sum()),
            "anchor_accuracy": _mean(f.anchor_ok[m & f.has_anchor]),
        }
    return out


def _macro(per_rel: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Relation-macro average: every relation weighs the same (None values left out)."""
    keys = ("bcs", "bes", "scr", "swr", "sar", "ur", "stable_multiple", "stable_review",
            "unscorable", "anchor_accuracy")
    out: dict[str, Any] = {"n_relations": len(per_rel)}
    for k in keys:
        vals = [r[k] for r in per_rel.values() if r[k] is not None]
        out[k] = float(np.mean(vals)) if vals else None
    return out


def _block(f: _Facts, mask: np.ndarray, taus: Sequence[float], tau: float) -> dict[str, Any]:
    """Every figure of one (reading, coverage, denominator, subset) selection of facts."""
    by_tau = {_tau_key(t): _group_shares(f.groups[t][mask], f.fb.modal_correctness[mask])
              for t in taus}
    per_rel = _per_relation(f, mask, tau)
    primary = by_tau[_tau_key(tau)]
    return {
        "n_facts": int(mask.sum()),
        "n_scorable": int((mask & f.fb.scorable).sum()),
        "n_unscorable": int((mask & ~f.fb.scorable).sum()),
        "bcs": _mean(f.fb.bcs[mask]),
        "bes": _mean(f.fb.bes[mask]),
        **{k: primary[k] for k in ("scr", "swr", "sar", "ur", "stable_multiple",
                                   "stable_review", "unscorable")},
        "n_anchor": int((mask & f.has_anchor).sum()),
        "anchor_accuracy": _mean(f.anchor_ok[mask & f.has_anchor]),
        "by_tau": by_tau,
        "family_coverage": {fam: int(f.fb.has_family[mask, j].sum())
                            for j, fam in enumerate(f.fb.families)},
        "relation_macro": _macro(per_rel),
        "per_relation": per_rel,
    }


def _reading_summary(f: _Facts, configured: Sequence[str], taus: Sequence[float], tau: float
                     ) -> dict[str, Any]:
    """Both coverage modes x both denominators x (all, real, copy) for one reading."""
    required = list(f.fb.families)
    n = len(f.fb.fact_ids)
    coverages = {"complete_family": f.fb.complete(required), "full_set": np.ones(n, bool)}
    subsets = {"all": np.ones(n, bool), "real": ~f.fb.copy, "copy": f.fb.copy}
    out: dict[str, Any] = {"families_configured": list(configured),
                           "families_observed": required, "n_facts_with_records": n}
    for cov, cmask in coverages.items():
        out[cov] = {
            denom: {name: _block(f, cmask & dmask & smask, taus, tau)
                    for name, smask in subsets.items()}
            for denom, dmask in (("fixed", np.ones(n, bool)), ("anchored", f.anchor_ok))
        }
    return out


def _accuracy_block(cols: JudgedColumns, mask: np.ndarray) -> dict[str, Any]:
    """Accuracy of a non-main analysis group: per query and fact-macro, real/copy split."""

    def one(m: np.ndarray) -> dict[str, Any]:
        ok = cols.correctness[m] == "CORRECT"
        facts = cols.fact_id[m]
        per_fact = defaultdict(list)
        for fid, o in zip(facts.tolist(), ok.tolist(), strict=True):
            per_fact[fid].append(o)
        counts = {str(k): int(v) for k, v in zip(*np.unique(cols.correctness[m].astype(str),
                                                            return_counts=True), strict=True)}
        return {"n_queries": int(m.sum()), "n_facts": len(per_fact),
                "accuracy": _mean(ok.astype(float)),
                "fact_macro_accuracy": (float(np.mean([np.mean(v) for v in per_fact.values()]))
                                        if per_fact else None),
                "correctness_counts": counts}

    return {"all": one(mask), "real": one(mask & ~cols.copy), "copy": one(mask & cols.copy)}


def _facts_for(cols: JudgedColumns, families: Sequence[str], taus: Sequence[float]) -> _Facts:
    fb = fact_behavior(cols, families)
    has, ok = anchor_labels(cols, fb.fact_ids)
    groups = {t: behavior_groups(fb.bcs, fb.modal_correctness, t, fb.scorable) for t in taus}
    return _Facts(fb, groups, has, ok)


def behavior_summary(cols: JudgedColumns, main_families: Sequence[str], *, tau_b: float,
                     tau_sensitivity: Sequence[float] = ()) -> tuple[dict[str, Any],
                                                                      dict[str, _Facts]]:
    """Compute the model-level behavioural summary (spec §4.5, §5.3, §6, §13.1, README).

    Every figure is given for both readings (with/without ``anchor``), both coverage modes
    (``complete_family``, ``full_set``), both denominators (``fixed``: every fact of the
    coverage set; ``anchored``: those whose anchor is correct, K_m) and the subsets
    ``all``/``real``/``copy`` (``answer_in_subject_surface``), each with its fact count,
    relation-macro average and per-relation table. Reverse and recognition accuracies are
    reported apart and never enter these averages.

    Returns:
        (summary dict, the per-fact inputs of each reading for the per-fact file).
    """
    taus = sorted({float(tau_b), *map(float, tau_sensitivity)})
    readings = readings_for(main_families)
    facts: dict[str, _Facts] = {}
    reading_out: dict[str, Any] = {}
    for name, fams in readings.items():
        try:
            facts[name] = _facts_for(cols, fams, taus)
        except ValueError:  # e.g. no anchor records at all for the with-anchor reading
            continue
        reading_out[name] = _reading_summary(facts[name], fams, taus, tau_b)
    primary = next(iter(readings))
    if primary not in facts:
        raise ValueError(f"no main-forward record of the configured families {main_families}")
    non_main = ~cols.main
    diag = non_main & ~cols.reverse & ~cols.recognition
    summary = {
        "model": cols.model,
        "judge": list(cols.judge),
        "main_families": list(main_families),
        "tau_b": float(tau_b),
        "tau_b_sensitivity": [float(t) for t in tau_sensitivity],
        "primary_reading": primary,
        "readings": reading_out,
        "reverse": _accuracy_block(cols, non_main & cols.reverse),
        "recognition": _accuracy_block(cols, non_main & cols.recognition),
        "diagnostic": {str(fam): _accuracy_block(cols, diag & (cols.family == fam))
                       for fam in sorted(set(cols.family[diag].tolist()))},
        "records": {
            "n": len(cols), "n_main_forward": int(cols.main.sum()),
            "by_correctness": {str(k): int(v) for k, v in zip(
                *np.unique(cols.correctness.astype(str), return_counts=True), strict=True)},
            "main_by_family": answer_coverage(cols),
        },
        "unscorable_rule": {"min_answered_family_share": MIN_ANSWERED_FAMILY_SHARE,
                            "reasons": list(UNSCORABLE_REASONS)},
    }
    return summary, facts


def answer_coverage(cols: JudgedColumns) -> dict[str, dict[str, Any]]:
    """Per main-forward family: records, scorable answers, and each unscorable reason.

    ``empty_share`` is the share of the family's main records whose response is empty (no
    answer; for a model without a chat template often large), ``scorable_share`` the share
    that entered the distributions.
    """
    out: dict[str, dict[str, Any]] = {}
    for fam in sorted(set(cols.family[cols.main].astype(str).tolist())):
        m = cols.main & (cols.family == fam)
        n = int(m.sum())
        reasons = {r: int(np.sum(cols.reason[m] == r)) for r in UNSCORABLE_REASONS}
        scorable = n - sum(reasons.values())
        out[fam] = {"n": n, "scorable": scorable, **reasons,
                    "empty_share": reasons["empty"] / n if n else None,
                    "scorable_share": scorable / n if n else None}
    return out


# ============================================================================ output rows
def _fact_fields(f: _Facts, i: int, taus: Sequence[float], tau: float,
                 complete: np.ndarray) -> dict[str, Any]:
    fb = f.fb
    ok = bool(fb.scorable[i])
    return {
        "bcs": float(fb.bcs[i]) if ok else None, "bes": float(fb.bes[i]) if ok else None,
        "modal_cluster": str(fb.modal_cluster[i]) if ok else None,
        "modal_correctness": str(fb.modal_correctness[i]) if ok else None,
        "behavior_group": str(f.groups[tau][i]),
        "behavior_group_by_tau": {_tau_key(t): str(f.groups[t][i]) for t in taus},
        "valid_families": fb.valid_families(i),
        "complete_family": bool(complete[i]),
        "n_clusters": int(fb.n_clusters[i]),
        "scorable": ok,
        "n_main_records": int(fb.n_records[i]),
        "n_scorable_answers": int(fb.n_scorable[i]),
    }


def per_fact_rows(model: str, facts: dict[str, _Facts], *, tau_b: float,
                  taus: Sequence[float]) -> list[dict[str, Any]]:
    """Rows of ``behavioral_per_fact.jsonl`` (§17.1 fields first, for the primary reading).

    Extra fields: relation, the real/copy flag, K_m, the cluster distribution, the groups at
    every threshold, and ``other_readings`` (the same fields under the other reading; absent
    when the fact has no record of that reading).
    """
    names = list(facts)
    main = facts[names[0]]
    complete = {n: facts[n].fb.complete(list(facts[n].fb.families)) for n in names}
    pos = {n: {fid: i for i, fid in enumerate(facts[n].fb.fact_ids.tolist())} for n in names[1:]}
    rows = []
    for i, fid in enumerate(main.fb.fact_ids.tolist()):
        row = {"model": model, "fact_id": fid, "relation": str(main.fb.relation[i]),
               "answer_in_subject_surface": bool(main.fb.copy[i]), "reading": names[0],
               **_fact_fields(main, i, taus, tau_b, complete[names[0]]),
               "cluster_distribution": main.fb.distribution(i),
               "anchor_correct": bool(main.anchor_ok[i]) if main.has_anchor[i] else None,
               "other_readings": {}}
        for n in names[1:]:
            j = pos[n].get(fid)
            if j is not None:
                row["other_readings"][n] = _fact_fields(facts[n], j, taus, tau_b, complete[n])
        rows.append(row)
    return rows


def per_query_rows(cols: JudgedColumns, f: _Facts, families: Sequence[str]
                   ) -> list[dict[str, Any]]:
    """Build the rows of ``behavioral_per_query.jsonl``.

    Every judged record, with its cluster's family-balanced probability in its fact (primary
    reading) and whether it is the fact's modal cluster (None outside the main families, for
    an unscorable answer, and for every answer of an unscorable fact), and why it is not
    scorable (``unscorable_reason``, None when it is).
    """
    fb = f.fb
    p = {(str(fb.fact_ids[g]), str(c)): float(v)
         for g, c, v in zip(fb.g_fact, fb.g_cluster, fb.g_p, strict=True)}
    modal = {fid: m for fid, m, ok in zip(fb.fact_ids.tolist(), fb.modal_cluster.tolist(),
                                           fb.scorable.tolist(), strict=True) if ok}
    fams = set(families)
    rows = []
    for k in range(len(cols)):
        fid, cid = str(cols.fact_id[k]), str(cols.cluster_id[k])
        reason = str(cols.reason[k]) or None
        enters = bool(cols.main[k]) and cols.family[k] in fams and reason is None \
            and fid in modal
        rows.append({
            "model": cols.model, "query_id": str(cols.query_id[k]), "fact_id": fid,
            "relation": str(cols.relation[k]), "condition_family": str(cols.family[k]),
            "language": str(cols.language[k]), "cluster_id": cid, "status": str(cols.status[k]),
            "correctness": str(cols.correctness[k]),
            "use_for_main_forward": bool(cols.main[k]),
            "use_for_reverse_analysis": bool(cols.reverse[k]),
            "use_for_recognition_analysis": bool(cols.recognition[k]),
            "answer_in_subject_surface": bool(cols.copy[k]),
            "in_main_families": bool(cols.main[k]) and cols.family[k] in fams,
            "unscorable_reason": reason,
            "cluster_probability": p.get((fid, cid)) if enters else None,
            "is_modal": (modal.get(fid) == cid) if enters else None,
        })
    return rows


# ============================================================================ the stage
@locks_run_dir("run_dir")
def run_behavior_metrics(run_dir: str | Path, *, main_families: Sequence[str], tau_b: float,
                         tau_sensitivity: Sequence[float] = (), benchmark: Any = None
                         ) -> dict[str, Any]:
    """Run ``fks metrics RUN --part behavior``.

    Reads ``RUN/judged.jsonl``; writes ``RUN/metrics/behavioral_per_query.jsonl``,
    ``behavioral_per_fact.jsonl`` and ``behavioral_model_summary.json``; records
    ``stages.metrics_behavior`` in the run manifest. ``judged.jsonl`` must be the one the
    run's judge wrote from its current ``scored.jsonl`` (:mod:`fks.provenance`), and its rows
    the queries of the run's benchmark (``benchmark``, default: the one the manifest records).

    Raises:
        FksInputError: a bad, changed or stale judged file (file, line, field), a query not in
            the benchmark, or no main-forward record of the configured families.
    """
    from fks.provenance import ProtocolCheck, check_inputs, record_files, run_benchmark

    run_dir = Path(run_dir)
    src = run_dir / "judged.jsonl"
    inputs = check_inputs(run_dir, "metrics_behavior", [src.name])
    cols = load_judged(src, benchmark=run_benchmark(run_dir, benchmark),
                       protocol=ProtocolCheck.for_run(run_dir, src))
    try:
        summary, facts = behavior_summary(cols, main_families, tau_b=tau_b,
                                          tau_sensitivity=tau_sensitivity)
    except ValueError as exc:
        raise FksInputError(str(exc), path=src, field="condition_family") from None
    taus = sorted({float(tau_b), *map(float, tau_sensitivity)})
    primary = summary["primary_reading"]
    out_dir = run_dir / "metrics"
    files = {
        "behavioral_per_query.jsonl": per_query_rows(cols, facts[primary],
                                                     summary["readings"][primary]
                                                     ["families_configured"]),
        "behavioral_per_fact.jsonl": per_fact_rows(cols.model, facts, tau_b=tau_b, taus=taus),
    }
    for name, rows in files.items():
        atomic_write_jsonl(out_dir / name, rows)
    summary["created_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    summary["input"] = {"file": src.name, "sha256": inputs[src.name]}
    atomic_write_json(out_dir / "behavioral_model_summary.json", summary)
    names = [*files, "behavioral_model_summary.json"]
    update_run_manifest(run_dir, stage="metrics_behavior", stage_info={
        "outputs": {n: sha256_file(out_dir / n) for n in names},
        "input": summary["input"], "main_families": list(main_families), "tau_b": tau_b,
        "tau_b_sensitivity": list(tau_sensitivity), "finished_at": summary["created_at"],
    })
    record_files(run_dir, "metrics_behavior", inputs, [out_dir / n for n in names])
    fb = facts[primary].fb
    log.info("behavioural metrics of %d facts (%d unscorable: too few scorable answers) -> %s",
             len(fb.fact_ids), int((~fb.scorable).sum()), out_dir)
    log.info("%s", answer_coverage_line(summary))
    return summary


def answer_coverage_line(summary: dict[str, Any]) -> str:
    """One console line: per main family, the share of empty answers and of unscorable ones."""
    cov = (summary.get("records") or {}).get("main_by_family") or {}
    if not cov:
        return "answers: no main-forward records"
    parts = [f"{fam} {row['empty_share']:.0%}" for fam, row in cov.items()
             if row.get("empty_share") is not None]
    bad = {r: sum(row.get(r, 0) for row in cov.values()) for r in UNSCORABLE_REASONS}
    n = sum(row["n"] for row in cov.values())
    return ("empty answers per family: " + ", ".join(parts) + f"; unscorable answers "
            f"{sum(bad.values())} of {n} (" + ", ".join(f"{k} {v}" for k, v in bad.items())
            + ")")
