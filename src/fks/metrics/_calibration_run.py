r"""``fks calibrate RUN``: confidence sources x the correctness event, every row accounted for.

**Event.** *The answer to a query is correct*: the judge's ``correctness`` is ``CORRECT``
(1) or ``INCORRECT`` (0). Two readings, from each record's own ``use_for_main_forward``:
``anchor`` (the anchor query of each fact) and ``main_families`` (every main-forward query
of a family in ``metrics.yaml: main_families``).

**Sources** (:data:`SOURCES`), each with its own curve and summary, never pooled:
``sequence_probability`` = ``exp(sum answer_logprobs)``, ``first_token_probability`` =
``exp(answer_logprobs[0])``, ``verbalized`` (``RUN/verbalized.jsonl``, reported as missing
when absent), ``consistency`` = the family-balanced share ``p_f(a)`` of the fact's
main-family answers that fall in the query's cluster (the distribution of
:func:`fks.metrics.behavior.fact_behavior`, whose argmax is the modal cluster), and
``judge_confidence`` (the judge's own confidence in its cluster assignment). When
``RUN/samples.jsonl`` exists (``fks calibrate sample``), ``semantic_entropy`` = ``1 - H/log k``
is one more source with its own curve (:mod:`fks.metrics._semantic_entropy`), left out of the
common-support table; otherwise the summary's ``semantic_entropy`` block is ``not_computed``.

**Coverage accounting.** Every query of the run's selection gets exactly one outcome per
source, first match wins (:data:`OUTCOMES`): ``missing_generation`` (selected but no row in
``generations.jsonl``), ``timeout`` / ``infrastructure_error`` (generation status), then
``judge_missing`` (no judged row; the judge's own failure, cluster ``REVIEW_REQUIRED``; or a
``REVIEW_REQUIRED`` verdict on an answer), ``abstain`` (abstained before any prediction),
``invalid_answer`` (``MULTIPLE``, ``UNPARSEABLE``, ``AMBIGUOUS``), ``invalid_confidence``
(an answer with a known outcome but no valid confidence from this source, with the reason),
else ``valid``. Confidence coverage = valid / answered-with-known-outcome; end-to-end
coverage = valid / all queries of the reading. No row is dropped: every query and its
outcomes go to ``RUN/metrics/calibration_per_query.jsonl``.

Outputs: ``RUN/metrics/calibration_summary.json`` (figures, reliability and risk-coverage
arrays ready to plot, slices with fact-clustered intervals, recalibration on the test split),
``calibration_per_query.jsonl``, optional PNG plots, and ``stages.calibrate`` in the manifest.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from fks.configs import ConfigSet
from fks.data.load import Benchmark, load_benchmark
from fks.data.schema import GenerationRecord, JudgedRecord, ScoredRecord
from fks.errors import FksInputError
from fks.generate.manifest import read_run_manifest, update_run_manifest
from fks.io import atomic_write_json, atomic_write_jsonl, iter_jsonl, sha256_file
from fks.metrics._calibration_boot import fact_clustered_intervals
from fks.metrics._calibration_core import (
    DEFAULT_NLL_EPS,
    EMPTY_BIN_POLICY,
    aurc,
    bucketize_equal_width,
    calibration_report,
    calibration_summary,
    nll_score,
)
from fks.metrics._calibration_recal import SPLIT_SALT, recalibration_report, split_of_fact
from fks.metrics._calibration_verbalized import (
    ELICITATION_VERSION,
    VERBALIZED_NAME,
    VerbalizedRecord,
    parse_verbalized_confidence,
)
from fks.metrics._semantic_entropy import (
    SAMPLES_NAME,
    SE_PER_QUERY_NAME,
    SE_SOURCE,
    SE_SOURCE_DESCRIPTION,
    SemanticEntropyData,
    load_semantic_entropy,
    semantic_entropy_summary,
)
from fks.metrics.behavior import ANCHOR_FAMILY
from fks.runlock import locks_run_dir

__all__ = [
    "SOURCES",
    "OUTCOMES",
    "SLICE_DIMENSIONS",
    "CalibrationSettings",
    "QueryRow",
    "classify_outcome",
    "logprob_confidences",
    "source_block",
    "run_calibration",
]

log = logging.getLogger(__name__)

SUMMARY_NAME = "calibration_summary.json"
PER_QUERY_NAME = "calibration_per_query.jsonl"
SCHEMA_VERSION = "fks-calibration-v1"

#: log-probabilities above this are invalid (a log-probability is <= 0; tiny positive
#: values from float rounding are set to 0)
LOGPROB_TOLERANCE = 1e-4

SOURCES: dict[str, str] = {
    "sequence_probability": (
        "exp(sum of answer_logprobs): probability of the whole greedy continuation, from the "
        "generation backend's raw logits; it covers every generated token (the answer and any "
        "text after it), so it is the probability of the string, not of the meaning"),
    "first_token_probability": "exp(answer_logprobs[0]): probability of the first token only",
    "verbalized": (
        f"verbalized probability from the frozen elicitation prompt {ELICITATION_VERSION} "
        "(RUN/verbalized.jsonl, written by `fks calibrate elicit`), parsed strictly"),
    "consistency": (
        "cross-condition consistency: the family-balanced share p_f(a) of the fact's "
        "main-family answers in the query's cluster (the distribution whose argmax is the "
        "modal cluster, fks.metrics.behavior); the query's own answer is included"),
    "judge_confidence": (
        "the judge's confidence in its cluster assignment (JudgedRecord.confidence); a property "
        "of the judge, not a probability that the fact is right"),
}

OUTCOMES: tuple[str, ...] = (
    "valid", "invalid_confidence", "abstain", "invalid_answer", "judge_missing", "timeout",
    "infrastructure_error", "missing_generation",
)
OUTCOME_DEFINITIONS: dict[str, str] = {
    "valid": "an answer with a known outcome (CORRECT/INCORRECT) and a valid confidence",
    "invalid_confidence": "an answer with a known outcome, but this source gave no valid value",
    "abstain": "the model abstained before any prediction (judge status/correctness ABSTAIN)",
    "invalid_answer": "no single answer to assess: MULTIPLE, UNPARSEABLE or AMBIGUOUS",
    "judge_missing": "no judged row, the judge failed (cluster REVIEW_REQUIRED), or the "
                     "verdict is REVIEW_REQUIRED",
    "timeout": "the generation timed out",
    "infrastructure_error": "the generation failed (status error)",
    "missing_generation": "the query is in the run's selection but has no generation row",
}
#: the order in which a query's outcome is decided (first match wins)
OUTCOME_PRECEDENCE: tuple[str, ...] = (
    "missing_generation", "timeout", "infrastructure_error", "judge_missing", "abstain",
    "invalid_answer", "invalid_confidence", "valid",
)
SLICE_DIMENSIONS: tuple[str, ...] = ("language", "relation", "condition_family",
                                     "answer_in_subject_surface")


# ============================================================================ settings
@dataclass(frozen=True)
class CalibrationSettings:
    """Everything that fixes the figures (recorded in the summary)."""

    bins: int = 10
    nll_eps: float = DEFAULT_NLL_EPS
    coverages: tuple[float, ...] = (0.25, 0.5, 0.75, 0.9, 1.0)
    dev_fraction: float = 0.5
    max_curve_points: int = 512
    n_resamples: int = 1000
    level: float = 0.95
    seed: int = 20260101

    def check(self) -> CalibrationSettings:
        """Raise :class:`FksInputError` naming the bad option."""
        if isinstance(self.bins, bool) or not isinstance(self.bins, int) or self.bins < 1:
            raise FksInputError(f"must be a positive integer; found {self.bins!r}", field="bins")
        if not 0.0 < self.nll_eps < 0.5:
            raise FksInputError(f"must lie in (0, 0.5); found {self.nll_eps!r}", field="nll_eps")
        bad = [c for c in self.coverages if not 0.0 < c <= 1.0]
        if bad or not self.coverages:
            raise FksInputError(f"each coverage must lie in (0, 1]; found {bad or 'none'}",
                                field="coverage")
        if not 0.0 < self.dev_fraction < 1.0:
            raise FksInputError(f"must lie in (0, 1); found {self.dev_fraction!r}",
                                field="dev_fraction")
        if self.max_curve_points < 2:
            raise FksInputError(f"must be >= 2; found {self.max_curve_points}",
                                field="max_curve_points")
        return self

    def describe(self) -> dict[str, Any]:
        """Return the settings block of the summary."""
        return {
            "bins": self.bins,
            "binning": {
                "equal_width": "torch.bucketize(p_float32, torch.linspace(0, 1, K + 1)[1:-1]): "
                               "bin k is (b_k, b_k+1], the first bin also holds 0",
                "equal_mass": "edges = percentiles 0, 100/K, ..., 100 of the confidences "
                              "(linear interpolation); same right-closed rule, by value",
                "empty_bin_policy": EMPTY_BIN_POLICY,
            },
            "nll_clip_eps": self.nll_eps,
            "risk_coverage": "one point at the end of each group of tied (float32) confidences; "
                             "AURC = sum_g (C_g - C_g-1) R_g; risk at a preset coverage is taken "
                             "at the first group end reaching it",
            "coverages": list(self.coverages),
            "max_curve_points": self.max_curve_points,
            "bootstrap": {"unit": "fact", "n_resamples": self.n_resamples, "level": self.level,
                          "seed": self.seed, "method": "percentile (fks.metrics.bootstrap)"},
            "recalibration_split": {"unit": "fact", "dev_fraction": self.dev_fraction,
                                    "salt": SPLIT_SALT,
                                    "rule": "dev when int(sha256(salt + ':' + fact_id)[:16], 16)"
                                            " / 2**64 < dev_fraction"},
        }


# ============================================================================ per-query rows
@dataclass
class QueryRow:
    """One query of the run's selection with its outcome and every source's confidence."""

    query_id: str
    fact_id: str
    relation: str
    condition_family: str
    language: str
    copy: bool
    main: bool
    outcome: str  # "answered" or a non-valid outcome of OUTCOMES
    reason: str | None = None
    correct: int | None = None
    scorer_label: str | None = None
    cluster_id: str | None = None
    #: source -> (value, None) or (None, reason it is invalid)
    confidence: dict[str, tuple[float | None, str | None]] = field(default_factory=dict)

    def outcome_for(self, source: str) -> tuple[str, str | None]:
        """``(outcome, reason)`` of this row for one source."""
        if self.outcome != "answered":
            return self.outcome, self.reason
        value, why = self.confidence.get(source, (None, "not_computed"))
        return ("valid", None) if value is not None else ("invalid_confidence", why)


def classify_outcome(gen: GenerationRecord | None, judged: JudgedRecord | None
                     ) -> tuple[str, str | None, int | None]:
    """``(outcome, reason, correct)`` of one query before any confidence is looked at.

    ``outcome`` is ``answered`` (``correct`` 0/1) or one of the non-valid outcomes, checked in
    the order of the module docstring.
    """
    if gen is None:
        return "missing_generation", "no row in generations.jsonl", None
    if gen.status == "timeout":
        return "timeout", gen.error, None
    if gen.status == "error":
        return "infrastructure_error", gen.error, None
    if judged is None:
        return "judge_missing", "no row in judged.jsonl", None
    if judged.cluster_id == "REVIEW_REQUIRED":
        return "judge_missing", "judge_invalid_output", None
    if judged.status == "ABSTAIN" or judged.correctness == "ABSTAIN":
        return "abstain", None, None
    if judged.status in ("MULTIPLE", "UNPARSEABLE"):
        return "invalid_answer", judged.status, None
    if judged.correctness == "CORRECT":
        return "answered", None, 1
    if judged.correctness == "INCORRECT":
        return "answered", None, 0
    if judged.correctness == "REVIEW_REQUIRED":
        return "judge_missing", "verdict REVIEW_REQUIRED", None
    return "invalid_answer", f"correctness {judged.correctness}", None


def logprob_confidences(gen: GenerationRecord) -> dict[str, tuple[float | None, str | None]]:
    """Sequence and first-token probabilities of a generation (or why they are invalid)."""
    lps = gen.answer_logprobs
    reason: str | None = None
    if lps is None:
        reason = "no_logprobs"
    elif len(lps) == 0:
        reason = "no_tokens"
    elif gen.n_generated_tokens is not None and len(lps) != gen.n_generated_tokens:
        reason = "logprob_count_mismatch"
    else:
        arr = np.asarray(lps, dtype=float)
        if not np.all(np.isfinite(arr)):
            reason = "logprob_not_finite"
        elif np.any(arr > LOGPROB_TOLERANCE):
            reason = "logprob_positive"
        else:
            arr = np.minimum(arr, 0.0)
            return {"sequence_probability": (float(np.exp(arr.sum())), None),
                    "first_token_probability": (float(np.exp(arr[0])), None)}
    return {"sequence_probability": (None, reason), "first_token_probability": (None, reason)}


# ============================================================================ loading
@dataclass
class _Rows:
    """One run file keyed by query_id, with the line of each row."""

    path: Path
    rows: dict[str, Any]
    lines: dict[str, int]
    model: str | None


def _read_by_query(path: Path, model_cls: type, model: str | None) -> _Rows:
    """Read a run file keyed by query_id: one model, no duplicate query (file:line on error)."""
    out: dict[str, Any] = {}
    lines: dict[str, int] = {}
    for line, rec in iter_jsonl(path, model_cls):
        if model is None:
            model = rec.model
        elif rec.model != model:
            raise FksInputError(f"a run directory holds one model; expected {model!r}, found "
                                f"{rec.model!r}", path=path, line=line, field="model")
        if rec.query_id in out:
            raise FksInputError(f"{rec.query_id} is recorded twice (first on line "
                                f"{lines[rec.query_id]})", path=path, line=line, field="query_id")
        out[rec.query_id] = rec
        lines[rec.query_id] = line
    return _Rows(path, out, lines, model)


def _check_subset(part: _Rows, gens: dict[str, GenerationRecord]) -> None:
    """Every row of ``part`` must be a generated query with the same fact."""
    for qid, rec in part.rows.items():
        gen = gens.get(qid)
        if gen is None:
            raise FksInputError(f"{qid} has no row in generations.jsonl", path=part.path,
                                line=part.lines[qid], field="query_id")
        if gen.fact_id != rec.fact_id:
            raise FksInputError(f"expected fact {gen.fact_id!r} for {qid}, found {rec.fact_id!r}",
                                path=part.path, line=part.lines[qid], field="fact_id")


@dataclass
class RunInputs:
    """Everything read from the run directory and the benchmark."""

    model: str
    rows: list[QueryRow]
    files: dict[str, str]
    benchmark: dict[str, Any] | None
    verbalized_available: bool
    behavior_check: dict[str, Any] | None
    n_not_selected: int
    #: RUN/samples.jsonl clustered (None when absent): the ``semantic_entropy`` source
    semantic_entropy: SemanticEntropyData | None = None


def _resolve_benchmark(run_dir: Path, benchmark: str | Path | Benchmark | None,
                       manifest: dict[str, Any]) -> tuple[Benchmark | None, str | None]:
    if isinstance(benchmark, Benchmark):
        return benchmark, "argument"
    if benchmark is not None:
        return load_benchmark(benchmark), "option"
    path = (manifest.get("benchmark") or {}).get("path")
    if path and Path(path).is_dir():
        return load_benchmark(path), "manifest"
    return None, None


def _universe(bench: Benchmark | None, manifest: dict[str, Any], gens: _Rows
              ) -> tuple[list[Any], int]:
    """List the queries to account for: the run's selection plus every generated query.

    Returns ``(items, n_not_selected)``: items are benchmark queries (or generation records
    when no benchmark is known), in benchmark order.
    """
    if bench is None:
        return list(gens.rows.values()), 0
    from fks.generate.runner import select_queries

    known = {q.query_id: q for q in bench.queries}
    for qid, rec in gens.rows.items():
        q = known.get(qid)
        if q is None or q.fact_id != rec.fact_id:
            what = "is not in" if q is None else f"has fact {q.fact_id} in"
            raise FksInputError(f"{qid} {what} the benchmark {bench.root}", path=gens.path,
                                line=gens.lines[qid], field="query_id" if q is None else "fact_id")
    sel = manifest.get("selection") or {}
    selected = select_queries(bench.queries, families=sel.get("families"),
                              limit=sel.get("limit"))
    keep = {q.query_id for q in selected} | set(gens.rows)
    items = [q for q in bench.queries if q.query_id in keep]
    return items, len(bench.queries) - len(items)


def _consistency(judged: dict[str, JudgedRecord], main_families: Sequence[str]
                 ) -> tuple[dict[tuple[str, str], float], set[str], Any]:
    """``{(fact, cluster): p_f(a)}`` over the main families, the facts covered, and the facts."""
    from fks.metrics.behavior import JudgedColumns, fact_behavior

    records = list(judged.values())
    if not records:
        return {}, set(), None
    cols = JudgedColumns.from_records(records)
    try:
        fb = fact_behavior(cols, main_families)
    except ValueError:  # no main-family record at all
        return {}, set(), None
    share = {(str(fb.fact_ids[g]), str(c)): float(p)
             for g, c, p in zip(fb.g_fact, fb.g_cluster, fb.g_p, strict=True)}
    return share, set(fb.fact_ids.tolist()), fb


def _check_behavior_file(run_dir: Path, fb: Any) -> dict[str, Any] | None:
    """Compare the modal clusters with ``metrics/behavioral_per_fact.jsonl`` when it exists."""
    path = run_dir / "metrics" / "behavioral_per_fact.jsonl"
    if fb is None or not path.is_file():
        return None
    modal = dict(zip(fb.fact_ids.tolist(), fb.modal_cluster.tolist(), strict=True))
    checked, differ = 0, []
    for _, row in iter_jsonl(path):
        fid = row.get("fact_id")
        if fid in modal:
            checked += 1
            if row.get("modal_cluster") != modal[fid]:
                differ.append(fid)
    if differ:
        log.warning("%s: %d facts have another modal cluster than judged.jsonl gives now "
                    "(stale file, or another main_families config)", path, len(differ))
    return {"file": str(path.relative_to(run_dir)), "facts_checked": checked,
            "modal_cluster_differs": len(differ), "facts_differing": differ[:20]}


def _verbalized(run_dir: Path, gens: dict[str, GenerationRecord], model: str
                ) -> dict[str, VerbalizedRecord] | None:
    path = run_dir / VERBALIZED_NAME
    if not path.is_file():
        return None
    part = _read_by_query(path, VerbalizedRecord, model)
    _check_subset(part, gens)
    return part.rows


def _verbalized_value(rec: VerbalizedRecord | None) -> tuple[float | None, str | None]:
    if rec is None:
        return None, "not_elicited"
    if rec.status != "ok":
        return None, f"elicitation_{rec.status}"
    value, status = parse_verbalized_confidence(rec.raw_response)
    return (value, None) if value is not None else (None, f"parse_{status}")


def _query_row(item: Any, gen: GenerationRecord | None, judged: JudgedRecord | None,
               label: str | None, ctx: dict[str, Any]) -> QueryRow:
    src = gen if gen is not None else item
    outcome, reason, correct = classify_outcome(gen, judged)
    row = QueryRow(query_id=src.query_id, fact_id=src.fact_id, relation=src.relation,
                   condition_family=src.condition_family, language=src.language,
                   copy=bool(src.answer_in_subject_surface), main=bool(src.use_for_main_forward),
                   outcome=outcome, reason=reason, correct=correct, scorer_label=label,
                   cluster_id=judged.cluster_id if judged is not None else None)
    if outcome != "answered":
        return row
    assert gen is not None and judged is not None
    row.confidence.update(logprob_confidences(gen))
    row.confidence["judge_confidence"] = (float(judged.confidence), None)
    if row.fact_id in ctx["covered"]:
        row.confidence["consistency"] = (ctx["share"].get((row.fact_id, judged.cluster_id), 0.0),
                                         None)
    else:
        row.confidence["consistency"] = (None, "no_main_family_answers")
    if ctx["verbalized"] is not None:
        row.confidence["verbalized"] = _verbalized_value(ctx["verbalized"].get(row.query_id))
    if ctx.get("semantic") is not None:
        row.confidence[SE_SOURCE] = ctx["semantic"].confidence(row.query_id)
    return row


def load_run(run_dir: str | Path, *, main_families: Sequence[str],
             benchmark: str | Path | Benchmark | None = None) -> RunInputs:
    """Read and cross-check the run directory; build one :class:`QueryRow` per query.

    Raises:
        FksInputError: a missing or malformed file (file, line, field), rows of several
            models, a duplicate query, a judged/scored/verbalized row without a generation or
            with another fact, a query unknown to the benchmark, or a benchmark other than the
            one the run was generated on.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FksInputError("run directory not found", path=run_dir)
    manifest = read_run_manifest(run_dir)
    gen_path, judged_path = run_dir / "generations.jsonl", run_dir / "judged.jsonl"
    gen_part = _read_by_query(gen_path, GenerationRecord, None)
    gens, model = gen_part.rows, gen_part.model
    if model is None:
        raise FksInputError("no generation records", path=gen_path)
    judged_part = _read_by_query(judged_path, JudgedRecord, model)
    _check_subset(judged_part, gens)
    judged = judged_part.rows
    files = {p.name: sha256_file(p) for p in (gen_path, judged_path)}
    labels: dict[str, str] = {}
    scored_path = run_dir / "scored.jsonl"
    if scored_path.is_file():
        scored = _read_by_query(scored_path, ScoredRecord, model)
        _check_subset(scored, gens)
        labels = {q: r.label for q, r in scored.rows.items()}
        files[scored_path.name] = sha256_file(scored_path)
    bench, bench_source = _resolve_benchmark(run_dir, benchmark, manifest)
    bench_info = None
    if bench is not None:
        expected = (manifest.get("benchmark") or {}).get("checksum")
        if expected and expected != bench.checksum():
            raise FksInputError(f"this run was generated on benchmark {expected[:12]}..., not "
                                f"{bench.checksum()[:12]}...", path=bench.root,
                                field="benchmark.checksum")
        bench_info = {"path": str(bench.root), "checksum": bench.checksum(),
                      "source": bench_source}
    items, n_not_selected = _universe(bench, manifest, gen_part)
    share, covered, fb = _consistency(judged, main_families)
    verbalized = _verbalized(run_dir, gens, model)
    if verbalized is not None:
        files[VERBALIZED_NAME] = sha256_file(run_dir / VERBALIZED_NAME)
    sem = load_semantic_entropy(run_dir, bench, model)
    if sem is not None:
        files[SAMPLES_NAME] = sha256_file(sem.path)
    ctx = {"share": share, "covered": covered, "verbalized": verbalized, "semantic": sem}
    rows = [_query_row(it, gens.get(it.query_id), judged.get(it.query_id),
                       labels.get(it.query_id), ctx) for it in items]
    return RunInputs(model=model, rows=rows, files=files, benchmark=bench_info,
                     verbalized_available=verbalized is not None,
                     behavior_check=_check_behavior_file(run_dir, fb),
                     n_not_selected=n_not_selected, semantic_entropy=sem)


# ============================================================================ figures
#: one row of a reading with its outcome for one source: (row, outcome, reason)
Scored = tuple[QueryRow, str, str | None]


def _score_rows(rows: Sequence[QueryRow], source: str) -> list[Scored]:
    """Each row with its outcome for ``source`` (computed once, reused by every slice)."""
    return [(r, *r.outcome_for(source)) for r in rows]


def _coverage(items: Sequence[Scored]) -> dict[str, Any]:
    """Outcome counts (every outcome listed, zeros included) and the two coverages."""
    counts = Counter(o for _, o, _ in items)
    answered = counts["valid"] + counts["invalid_confidence"]
    n = len(items)
    return {
        "n_queries": n, "counts": {o: counts.get(o, 0) for o in OUTCOMES},
        "n_answered": answered,
        "n_correct_answered": sum(1 for r, _, _ in items if r.outcome == "answered" and r.correct),
        "invalid_confidence_reasons": dict(sorted(Counter(
            why or "unknown" for _, o, why in items if o == "invalid_confidence").items())),
        "confidence_coverage": counts["valid"] / answered if answered else None,
        "end_to_end_coverage": counts["valid"] / n if n else None,
        "answer_coverage": answered / n if n else None,
    }


def _valid_arrays(items: Sequence[Scored], source: str
                  ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(p, y, fact_ids)`` of the valid rows."""
    keep = [r for r, o, _ in items if o == "valid"]
    p = np.array([r.confidence[source][0] for r in keep], dtype=float)
    y = np.array([r.correct for r in keep], dtype=float)
    return p, y, [r.fact_id for r in keep]


def _codes(facts: Sequence[str]) -> np.ndarray:
    return np.unique(np.asarray(facts, dtype=object).astype(str), return_inverse=True)[1]


def _slice_value(row: QueryRow, dim: str) -> str:
    if dim == "answer_in_subject_surface":
        return "copy" if row.copy else "real"
    return str(getattr(row, dim))


def _slice_figures(p: np.ndarray, y: np.ndarray, facts: list[str], s: CalibrationSettings
                   ) -> dict[str, Any]:
    core = calibration_summary(p, y, bins=s.bins)
    counts = np.bincount(bucketize_equal_width(p.astype(np.float32), s.bins), minlength=s.bins)
    return {
        "n": int(p.size), "n_facts": len(set(facts)), "accuracy": float(y.mean()),
        "mean_confidence": float(p.astype(np.float32).astype(float).mean()),
        "brier": core["brier"], "nll": nll_score(p, y, eps=s.nll_eps)["nll"],
        "ece_equal_width": core["ece"], "bin_counts_equal_width": counts.tolist(),
        "aurc": aurc(core["coverage"], core["risk"]),
        "intervals": fact_clustered_intervals(
            p, y, _codes(facts), bins=s.bins, nll_eps=s.nll_eps, n_resamples=s.n_resamples,
            level=s.level, seed=s.seed),
    }


def _slices(items: Sequence[Scored], source: str, s: CalibrationSettings) -> dict[str, Any]:
    """Coverage and figures (with fact-clustered intervals) per value of each slice."""
    out: dict[str, Any] = {}
    for dim in SLICE_DIMENSIONS:
        groups: dict[str, list[Scored]] = {}
        for it in items:
            groups.setdefault(_slice_value(it[0], dim), []).append(it)
        out[dim] = {}
        for value in sorted(groups):
            part = groups[value]
            p, y, facts = _valid_arrays(part, source)
            out[dim][value] = {"coverage": _coverage(part),
                               "figures": _slice_figures(p, y, facts, s) if p.size else None}
    return out


def source_block(rows: Sequence[QueryRow], source: str, s: CalibrationSettings
                 ) -> dict[str, Any]:
    """Coverage, figures, intervals, reliability/risk-coverage data, slices, recalibration."""
    items = _score_rows(rows, source)
    block: dict[str, Any] = {"available": True, "coverage": _coverage(items)}
    p, y, facts = _valid_arrays(items, source)
    if p.size == 0:
        block.update(figures=None, reason="no valid (confidence, outcome) pair")
        return block
    report = calibration_report(p, y, bins=s.bins, nll_eps=s.nll_eps, coverages=s.coverages,
                                max_curve_points=s.max_curve_points)
    block["figures"] = {k: v for k, v in report.items()
                        if k not in ("reliability", "risk_coverage")}
    block["figures"]["n_facts"] = len(set(facts))
    block["intervals"] = fact_clustered_intervals(
        p, y, _codes(facts), bins=s.bins, nll_eps=s.nll_eps, n_resamples=s.n_resamples,
        level=s.level, seed=s.seed, with_aurc=True)
    block["reliability"] = report["reliability"]
    block["risk_coverage"] = report["risk_coverage"]
    block["slices"] = _slices(items, source, s)
    block["recalibration"] = recalibration_report(
        p, y, facts, bins=s.bins, dev_fraction=s.dev_fraction, eps=s.nll_eps)
    return block


def _common_support(rows: Sequence[QueryRow], sources: Sequence[str], s: CalibrationSettings
                    ) -> dict[str, Any]:
    """Compare the sources on the rows where every one of them is valid."""
    keep = [r for r in rows if all(r.outcome_for(src)[0] == "valid" for src in sources)]
    out: dict[str, Any] = {"sources": list(sources), "n": len(keep),
                           "n_facts": len({r.fact_id for r in keep}), "by_source": {}}
    if not keep:
        return out
    y = np.array([r.correct for r in keep], dtype=float)
    for src in sources:
        p = np.array([r.confidence[src][0] for r in keep], dtype=float)
        rep = calibration_report(p, y, bins=s.bins, nll_eps=s.nll_eps, coverages=s.coverages,
                                 max_curve_points=2)
        out["by_source"][src] = {k: rep[k] for k in ("brier", "ece_equal_width",
                                                     "ece_equal_mass", "aurc", "mean_confidence")}
        out["by_source"][src]["nll"] = rep["nll"]["nll"]
    out["accuracy"] = float(y.mean())
    return out


def readings_of(main_families: Sequence[str]) -> dict[str, Callable[[QueryRow], bool]]:
    """Return the two readings, ``anchor`` and ``main_families`` (each row's own boolean)."""
    fams = set(main_families)
    return {
        ANCHOR_FAMILY: lambda r: r.main and r.condition_family == ANCHOR_FAMILY,
        "main_families": lambda r: r.main and r.condition_family in fams,
    }


def _reading(rows: list[QueryRow], available: list[str], missing: dict[str, str],
             families: list[str], s: CalibrationSettings) -> dict[str, Any]:
    out: dict[str, Any] = {
        "families": families, "n_queries": len(rows), "n_facts": len({r.fact_id for r in rows}),
        "outcomes_before_confidence": dict(sorted(Counter(
            "answered" if r.outcome == "answered" else r.outcome for r in rows).items())),
        "sources": {}}
    for src in [*SOURCES, *(a for a in available if a not in SOURCES)]:
        if src in missing:
            out["sources"][src] = {"available": False, "reason": missing[src]}
        else:
            out["sources"][src] = source_block(rows, src, s)
    # semantic entropy may cover a --limit subset only: kept out of the common-support table
    out["common_support"] = _common_support(rows, [a for a in available if a != SE_SOURCE], s)
    return out


# ============================================================================ the stage
def _per_query_rows(model: str, rows: Sequence[QueryRow], readings: dict[str, Callable],
                    available: list[str], s: CalibrationSettings) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        sources = {}
        for src in available:
            outcome, why = r.outcome_for(src)
            sources[src] = {"confidence": r.confidence.get(src, (None, None))[0],
                            "outcome": outcome, "reason": why}
        out.append({
            "model": model, "query_id": r.query_id, "fact_id": r.fact_id,
            "relation": r.relation, "condition_family": r.condition_family,
            "language": r.language, "answer_in_subject_surface": r.copy,
            "use_for_main_forward": r.main,
            "readings": [name for name, f in readings.items() if f(r)],
            "outcome": r.outcome, "outcome_reason": r.reason, "correct": r.correct,
            "scorer_label": r.scorer_label, "cluster_id": r.cluster_id,
            "split": split_of_fact(r.fact_id, dev_fraction=s.dev_fraction),
            "sources": sources,
        })
    return out


def _family_list(main_families: Sequence[str]) -> dict[str, list[str]]:
    return {ANCHOR_FAMILY: [ANCHOR_FAMILY], "main_families": list(main_families)}


def _header(inputs: RunInputs, s: CalibrationSettings, missing: dict[str, str],
            families: dict[str, list[str]], main_families: list[str]) -> dict[str, Any]:
    """Build the summary's description part: event, sources, outcome rules, settings, inputs."""
    return {
        "schema_version": SCHEMA_VERSION, "model": inputs.model,
        "event": {"definition": "the answer to a query is correct: judged correctness CORRECT "
                                "-> 1, INCORRECT -> 0 (every other verdict is an outcome of its "
                                "own, see outcome_definitions)",
                  "readings": families,
                  "membership": "each record's use_for_main_forward, intersected with the "
                                "reading's families"},
        "sources": {src: {"description": d, "available": src not in missing,
                          **({"reason": missing[src]} if src in missing else {})}
                    for src, d in SOURCES.items()}
        | ({} if inputs.semantic_entropy is None else {
            SE_SOURCE: {"description": SE_SOURCE_DESCRIPTION, "available": True}}),
        "outcome_definitions": OUTCOME_DEFINITIONS,
        "outcome_precedence": list(OUTCOME_PRECEDENCE),
        "settings": s.describe(), "main_families": main_families,
        "benchmark": inputs.benchmark, "n_queries": len(inputs.rows),
        "n_benchmark_queries_not_selected": inputs.n_not_selected,
        "behavior_file_check": inputs.behavior_check,
        "semantic_entropy": {"status": "not_computed",
                             "reason": f"{SAMPLES_NAME} not found in the run directory; run "
                                       "`fks calibrate sample RUN --model-path ...` first"}
        if inputs.semantic_entropy is None else semantic_entropy_summary(
            inputs.semantic_entropy, inputs.semantic_entropy.path.parent),
        "readings": {},
    }


@locks_run_dir("run_dir")
def run_calibration(
    run_dir: str | Path, *, configs: ConfigSet, benchmark: str | Path | Benchmark | None = None,
    settings: CalibrationSettings | None = None, plots: bool = False,
) -> dict[str, Any]:
    """Run ``fks calibrate RUN``: read the run, compute every figure, write the outputs.

    Args:
        run_dir: the run directory.
        configs: configs in force (``metrics.main_families``, ``metrics.bootstrap``).
        benchmark: benchmark directory (``hf[:repo]``) or a loaded one; default: the path in
            the run manifest, when it exists; without one the generated queries are the set.
        settings: binning, NLL clipping, coverages, split (defaults: :class:`CalibrationSettings`
            with the bootstrap of ``metrics.yaml``).
        plots: also draw PNGs (only when matplotlib is importable).

    Returns:
        The summary written to ``RUN/metrics/calibration_summary.json``.
    """
    run_dir = Path(run_dir)
    boot = configs.metrics.bootstrap
    s = settings or CalibrationSettings(n_resamples=boot.n_resamples, level=boot.confidence,
                                        seed=boot.seed)
    s.check()
    main_families = list(configs.metrics.main_families)
    inputs = load_run(run_dir, main_families=main_families, benchmark=benchmark)
    missing = {} if inputs.verbalized_available else {
        "verbalized": f"{VERBALIZED_NAME} not found in the run directory; run `fks calibrate "
                      "elicit RUN --model-path ...` first (no value is ever fabricated)"}
    available = [src for src in SOURCES if src not in missing]
    if inputs.semantic_entropy is not None:
        available.append(SE_SOURCE)
    readings = readings_of(main_families)
    families = _family_list(main_families)
    summary = _header(inputs, s, missing, families, main_families)
    for name, keep in readings.items():
        rows = [r for r in inputs.rows if keep(r)]
        summary["readings"][name] = _reading(rows, available, missing, families[name], s)
    summary["created_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    summary["inputs"] = inputs.files
    _finite(summary)
    out_dir = run_dir / "metrics"
    atomic_write_jsonl(out_dir / PER_QUERY_NAME,
                       _per_query_rows(inputs.model, inputs.rows, readings, available, s))
    atomic_write_json(out_dir / SUMMARY_NAME, summary)
    outputs = [SUMMARY_NAME, PER_QUERY_NAME]
    if inputs.semantic_entropy is not None:
        atomic_write_jsonl(out_dir / SE_PER_QUERY_NAME, list(inputs.semantic_entropy.rows.values()))
        outputs.append(SE_PER_QUERY_NAME)
    if plots:
        from fks.metrics._calibration_plots import write_plots

        outputs += write_plots(summary, out_dir)
    update_run_manifest(run_dir, stage="calibrate", stage_info={
        "outputs": {n: sha256_file(out_dir / n) for n in outputs}, "inputs": inputs.files,
        "settings": s.describe(), "main_families": main_families,
        "sources_available": available, "sources_missing": sorted(missing),
        "n_queries": len(inputs.rows), "finished_at": summary["created_at"],
    })
    log.info("calibration of %d queries (%s) -> %s", len(inputs.rows), ", ".join(available),
             out_dir / SUMMARY_NAME)
    return summary


def _finite(obj: Any) -> Any:
    """Check that no NaN/inf reaches the JSON (it would not be valid JSON)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        raise ValueError(f"non-finite number in the calibration summary: {obj!r}")
    if isinstance(obj, dict):
        for v in obj.values():
            _finite(v)
    elif isinstance(obj, list | tuple):
        for v in obj:
            _finite(v)
    return obj
