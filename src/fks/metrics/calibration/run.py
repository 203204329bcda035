r"""``fks calibrate RUN``: confidence sources x the correctness event, every row accounted for.

**Event.** *The answer to a query is correct*: the judge's ``correctness`` is ``CORRECT``
(1) or ``INCORRECT`` (0). Two readings, from each record's own ``use_for_main_forward``:
``anchor`` (the anchor query of each fact) and ``main_families`` (every main-forward query
of a family in ``metrics.yaml: main_families``).

**Sources** (:data:`SOURCES`), each with its own curve and summary, never pooled:
``sequence_probability`` = ``exp(sum answer_logprobs)``, ``first_token_probability`` =
``exp(answer_logprobs[0])``, ``verbalized`` (``RUN/verbalized.jsonl``, reported as missing
when absent), ``consistency`` = the family-balanced share ``p_f(a)`` of the fact's
scorable main-family answers that fall in the query's cluster (the distribution of
:func:`fks.metrics.behavior.fact_behavior`, whose argmax is the modal cluster), and the two
answer-span sources (:data:`~fks.metrics.calibration.span.SPAN_SOURCES`);
``judge_confidence`` (the judge's own confidence in its cluster assignment) is only tabulated
as a diagnostic (:data:`JUDGE_DIAGNOSTIC`), never calibrated. When
``RUN/samples.jsonl`` exists (``fks calibrate sample``), two more sources, each with its own
curve: ``semantic_cluster_probability`` and ``semantic_cluster_share``, the probability
``P(c*|x)`` of the greedy answer's semantic cluster under the two estimators
(:mod:`fks.metrics.calibration.semantic_entropy`; the entropy itself is described, never used
as a confidence), left out of the common-support table; otherwise the summary's
``semantic_entropy`` block is ``not_computed``.

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

**The end-to-end (all-queries) view holds accuracy, risk and AURC only** (issue 28). There a
query without a valid answer and confidence is scored ``y = 0`` at ``p = 0``, which a proper
score reads as a *correct* statement: its Brier term is 0, its NLL term ``-log(1 - eps)``,
and it sits in ECE's lowest bin at zero gap. So the Brier, NLL and ECE of that view equal
(end-to-end coverage) x (their answered-rows value) and reward abstention -- a model that
abstains on 19 queries of 20 beat honest ones. Decision: they are *dropped* from the view, not
replaced -- no abstention-neutral form of a proper score exists without inventing a
confidence for the queries never answered, and the answered-rows view already holds the
calibration. The view's ``figures`` (and each slice's ``end_to_end_figures``) keep ``n``,
``accuracy``, ``aurc``, ``risk_at_coverage`` (and ``risk_at_full_coverage`` in slices) and
their intervals, plus ``not_in_view`` naming each score left out and why; its reliability
table is left out for the same reason (:data:`END_TO_END_NOT_IN_VIEW`).

Outputs: ``RUN/metrics/calibration_summary.json`` (figures, reliability and risk-coverage
arrays ready to plot, slices with fact-clustered intervals, recalibration on the test split),
``calibration_per_query.jsonl``, optional PNG plots, and ``stages.calibrate`` in the manifest.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from fks.configs import ConfigSet
from fks.data.load import Benchmark, load_benchmark
from fks.data.schema import GenerationRecord, JudgedRecord, ScoredRecord
from fks.errors import FksInputError
from fks.generate.gguf import PACKAGE_SCHEME, find_gguf, resolve_model_source
from fks.generate.manifest import read_run_manifest, update_run_manifest
from fks.io import atomic_write_json, atomic_write_jsonl, iter_jsonl, sha256_file
from fks.metrics.behavior import ANCHOR_FAMILY
from fks.metrics.calibration.bootstrap import (
    BootstrapCache,
    fact_clustered_intervals,
    paired_from,
    replicates_with_point,
)
from fks.metrics.calibration.core import (
    COVERAGE_VIEWS,
    DEFAULT_NLL_EPS,
    EMPTY_BIN_POLICY,
    EQUAL_MASS_RULE,
    aurc,
    bucketize_equal_width,
    calibration_report,
    calibration_summary,
    nll_score,
)
from fks.metrics.calibration.recalibration import SPLIT_SALT, recalibration_report, split_of_fact
from fks.metrics.calibration.semantic_entropy import (
    SAMPLES_NAME,
    SE_PER_QUERY_NAME,
    SE_SOURCES,
    SemanticEntropyData,
    load_semantic_entropy,
    semantic_entropy_summary,
)
from fks.metrics.calibration.span import (
    SPAN_SOURCES,
    SpanTokenizer,
    load_span_tokenizer,
    span_probabilities,
)
from fks.metrics.calibration.verbalized import (
    ELICITATION_VERSION,
    PRIMARY_VARIANT,
    VARIANTS,
    VERBALIZED_NAME,
    VerbalizedRecord,
    parse_verbalized_confidence,
)
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

#: scores the end-to-end view leaves out (module docstring), with the reason written there
END_TO_END_NOT_IN_VIEW: dict[str, str] = dict.fromkeys(
    ("ece_equal_width", "ece_equal_mass", "brier", "nll", "mean_confidence", "reliability",
     "bin_counts_equal_width"),
    "not in the end-to-end view: a query without a valid answer is scored y = 0 at p = 0, "
    "which a proper score counts as a correct statement, so the value would be end-to-end "
    "coverage x the answered-rows value and would reward abstention; read the answered-rows "
    "view for calibration and accuracy, risk and AURC here")

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
    **SPAN_SOURCES,
    "verbalized": (
        f"verbalized probability from the frozen elicitation prompt {ELICITATION_VERSION}, "
        f"variant {PRIMARY_VARIANT} (RUN/verbalized.jsonl, written by `fks calibrate elicit`), "
        "parsed strictly; the other wording/order/language variants are in each reading's "
        "verbalized_variants with the spread of their ECE"),
    "consistency": (
        "cross-condition consistency: the family-balanced share p_f(a) of the fact's "
        "scorable main-family answers in the query's cluster (the distribution whose argmax is "
        "the modal cluster, fks.metrics.behavior; errors, empty, unparseable answers and judge "
        "failures do not enter it); the query's own answer is included"),
}
#: not a confidence source: reported as a diagnostic table only, never calibrated
JUDGE_DIAGNOSTIC = (
    "judge_confidence (JudgedRecord.confidence) is the judge's confidence in its own cluster "
    "assignment (e.g. 1.0 lexicon match, 0.7 ambiguous alias, 0.5 free string), made by the "
    "evaluator that makes the label: it is not a probability that the answer is right, so it "
    "gets no ECE/Brier/NLL, no recalibration and no comparison with the sources; only its "
    "values against the outcomes are tabulated")

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
                                     "answer_in_subject_surface", "answer_length",
                                     "difficulty", "data_source")
#: written into calibration_summary.json; the module names in these texts (and in the bootstrap
#: ``method`` and :data:`~fks.metrics.calibration.span.SPAN_SOURCES`) are frozen output text,
#: kept as they were before the issue-16 layout (``fks.metrics._calibration_span`` is now
#: :mod:`fks.metrics.calibration.span`, ``fks.metrics.bootstrap`` is
#: :mod:`fks.metrics.stats.bootstrap`) so that the outputs stay byte-identical
SLICE_RULES: dict[str, str] = {
    "answer_length": "tokens of the judge's answer span (1, 2, 3-4, 5+); unknown when the "
                     "token offsets are not known (fks.metrics._calibration_span)",
    "difficulty": "the relation's anchor accuracy in this run, leaving the fact itself out: "
                  "share of CORRECT among the answered anchor queries of the relation's other "
                  "facts; hard < 1/3 <= medium < 2/3 <= easy; unknown when no other fact of the "
                  "relation has an answered anchor (leaving the fact out keeps its own outcome "
                  "from deciding its slice)",
    "data_source": "the fact's Fact.sources joined with '+', sorted; unknown when empty or no "
                   "benchmark is known",
}


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
    #: a sample with fewer distinct facts gets no interval (the reason is shown)
    min_facts_for_interval: int = 10
    #: the model's tokenizer folder for the answer-span offsets (default: the manifest's)
    tokenizer: str | None = None

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
        if isinstance(self.min_facts_for_interval, bool) or self.min_facts_for_interval < 2:
            raise FksInputError(f"must be an integer >= 2; found {self.min_facts_for_interval!r}",
                                field="min_facts_for_interval")
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
                "equal_mass": EQUAL_MASS_RULE,
                "empty_bin_policy": EMPTY_BIN_POLICY,
            },
            "nll_clip_eps": self.nll_eps,
            "risk_coverage": "one point at the end of each group of tied (float32) confidences; "
                             "AURC = sum_g (C_g - C_g-1) R_g; risk at a preset coverage is taken "
                             "at the first group end reaching it",
            "coverages": list(self.coverages),
            "coverage_views": COVERAGE_VIEWS,
            "intervals": {
                "min_facts": self.min_facts_for_interval,
                "rule": f"a sample (source, slice, bin) with fewer than "
                        f"{self.min_facts_for_interval} distinct facts gets no interval, with "
                        "the reason; per-bin accuracy intervals are Wilson at the bin's effective "
                        "number of facts; figure intervals and paired differences resample "
                        "facts"},
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
    judge_confidence: float | None = None
    answer_tokens: int | None = None
    difficulty: str = "unknown"
    data_source: str = "unknown"
    #: verbalized confidence of every elicitation variant (when verbalized.jsonl exists)
    verbal_variants: dict[str, tuple[float | None, str | None]] = field(default_factory=dict)
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
    else:  # the checks in Python: a handful of numbers per row, numpy's call cost dominates
        values = [float(v) for v in lps]
        if not all(math.isfinite(v) for v in values):
            reason = "logprob_not_finite"
        elif any(v > LOGPROB_TOLERANCE for v in values):
            reason = "logprob_positive"
        else:
            arr = np.minimum(np.asarray(values, dtype=float), 0.0)
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
    provenance: dict[str, Any] = field(default_factory=dict)


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
            if (row.get("modal_cluster") or "") != (modal[fid] or ""):  # "": unscorable
                differ.append(fid)
    if differ:
        log.warning("%s: %d facts have another modal cluster than judged.jsonl gives now "
                    "(stale file, or another main_families config)", path, len(differ))
    return {"file": str(path.relative_to(run_dir)), "facts_checked": checked,
            "modal_cluster_differs": len(differ), "facts_differing": differ[:20]}


def _verbalized(run_dir: Path, gens: dict[str, GenerationRecord], model: str,
                manifest: dict[str, Any]) -> dict[str, dict[str, VerbalizedRecord]] | None:
    """Read ``verbalized.jsonl`` as ``{query_id: {variant: record}}``, checking the protocol.

    Exit 2 (file, line, field) for another ``elicitation_version``, an unknown ``variant``, a
    duplicate (query, variant), a row of a query without a generation (or another fact), and
    an eliciting model other than the run's: the weights hash when both sides have one, else
    the model path / name.
    """
    path = run_dir / VERBALIZED_NAME
    if not path.is_file():
        return None
    backend = manifest.get("backend") or {}
    run_hash = manifest.get("weights_sha256") or backend.get("weights_sha256")
    run_names = {str(v) for v in (model, (manifest.get("model") or {}).get("name"),
                                  (manifest.get("model") or {}).get("path"),
                                  backend.get("model_path")) if v}
    out: dict[str, dict[str, VerbalizedRecord]] = {}
    for line, rec in iter_jsonl(path, VerbalizedRecord):
        assert isinstance(rec, VerbalizedRecord)
        where = {"path": path, "line": line}
        if rec.model != model:
            raise FksInputError(f"a run directory holds one model; expected {model!r}, found "
                                f"{rec.model!r}", field="model", **where)
        if rec.elicitation_version != ELICITATION_VERSION:
            raise FksInputError(f"elicited under {rec.elicitation_version!r}, but this fks "
                                f"reads {ELICITATION_VERSION!r} (re-run `fks calibrate elicit` "
                                "into a fresh file)", field="elicitation_version", **where)
        if rec.variant not in VARIANTS:
            raise FksInputError(f"unknown variant {rec.variant!r}", field="variant", **where)
        ident = rec.eliciting_model or {}
        e_hash, e_name = ident.get("weights_sha256"), ident.get("model_path")
        if run_hash and e_hash:
            if e_hash != run_hash:
                raise FksInputError(f"elicited from weights {str(e_hash)[:12]}..., the run's "
                                    f"generations from {str(run_hash)[:12]}...",
                                    field="eliciting_model.weights_sha256", **where)
        elif e_name is None or str(e_name) not in run_names:
            raise FksInputError(f"elicited from {e_name!r}, not the run's model "
                                f"({', '.join(sorted(run_names))})",
                                field="eliciting_model.model_path", **where)
        gen = gens.get(rec.query_id)
        if gen is None:
            raise FksInputError(f"{rec.query_id} has no row in generations.jsonl",
                                field="query_id", **where)
        if gen.fact_id != rec.fact_id:
            raise FksInputError(f"expected fact {gen.fact_id!r} for {rec.query_id}, found "
                                f"{rec.fact_id!r}", field="fact_id", **where)
        per = out.setdefault(rec.query_id, {})
        if rec.variant in per:
            raise FksInputError(f"{rec.query_id} / {rec.variant} is recorded twice",
                                field="query_id", **where)
        per[rec.variant] = rec
    return out


def _variant_values(recs: dict[str, VerbalizedRecord] | None, language: str
                    ) -> dict[str, tuple[float | None, str | None]]:
    """Each variant's (value, reason) for one query; ``query/*`` = ``en/*`` for English."""
    out: dict[str, tuple[float | None, str | None]] = {}
    for v in VARIANTS:
        look = v.replace("query/", "en/", 1) if v.startswith("query/") and language == "en" \
            else v
        out[v] = _verbalized_value((recs or {}).get(look))
    return out


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
                   cluster_id=judged.cluster_id if judged is not None else None,
                   data_source=ctx["data_source"].get(src.fact_id, "unknown"))
    if outcome != "answered":
        return row
    assert gen is not None and judged is not None
    row.judge_confidence = float(judged.confidence)
    logprob = logprob_confidences(gen)
    row.confidence.update(logprob)
    span_conf, row.answer_tokens = _span_confidences(gen, judged, ctx.get("tokenizer"),
                                                     logprob["sequence_probability"])
    row.confidence.update(span_conf)
    if row.fact_id in ctx["covered"]:
        row.confidence["consistency"] = (ctx["share"].get((row.fact_id, judged.cluster_id), 0.0),
                                         None)
    else:
        row.confidence["consistency"] = (None, "no_main_family_answers")
    if ctx["verbalized"] is not None:
        row.verbal_variants = _variant_values(ctx["verbalized"].get(row.query_id), row.language)
        row.confidence["verbalized"] = row.verbal_variants[PRIMARY_VARIANT]
    if ctx.get("semantic") is not None:
        row.confidence.update(ctx["semantic"].confidences(row.query_id))
    return row


def _span_confidences(gen: GenerationRecord, judged: JudgedRecord,
                      tokenizer: SpanTokenizer | None,
                      checked: tuple[float | None, str | None] | None = None,
                      ) -> tuple[dict[str, tuple[float | None, str | None]], int | None]:
    """Answer-span sources of one answered row (:mod:`fks.metrics.calibration.span`).

    ``checked``: the row's ``logprob_confidences(gen)["sequence_probability"]`` when the
    caller has it (the log-prob checks are not repeated).
    """
    from fks.judge import answer_span

    if checked is None:
        checked = logprob_confidences(gen)["sequence_probability"]
    if checked[0] is None:
        return {src: (None, checked[1]) for src in SPAN_SOURCES}, None
    lps = gen.answer_logprobs or []
    offsets = _record_offsets(gen)
    why = None
    if offsets is None:
        if tokenizer is None:
            why = "no_token_offsets"
        else:
            offsets, why = tokenizer.offsets(gen.raw_response, len(lps))
    span = answer_span(judged.raw_response, judged.extracted_answer)
    return span_probabilities(gen.raw_response, span, lps, offsets, why)


def _record_offsets(gen: GenerationRecord) -> Any:
    """Return the record's own ``answer_token_offsets`` (None when it has none).

    An extra field of the backends that keep them (a declared field would be in ``__dict__``);
    read directly, since ``getattr`` on a missing pydantic attribute raises and catches an
    AttributeError per row.
    """
    found = gen.__dict__.get("answer_token_offsets")
    return found if found is not None else (gen.model_extra or {}).get("answer_token_offsets")


def _length_bucket(n: int | None) -> str:
    if n is None:
        return "unknown"
    return "1" if n == 1 else "2" if n == 2 else "3-4" if n <= 4 else "5+"


def _assign_difficulty(rows: Sequence[QueryRow]) -> None:
    """Set each row's ``difficulty`` (:data:`SLICE_RULES`), leaving its own fact out."""
    # per relation and per (relation, fact): [correct, answered]; the others = the difference
    per_rel: dict[str, list[int]] = {}
    per_fact: dict[tuple[str, str], list[int]] = {}
    for r in rows:
        if r.main and r.condition_family == ANCHOR_FAMILY and r.outcome == "answered":
            for cell in (per_rel.setdefault(r.relation, [0, 0]),
                         per_fact.setdefault((r.relation, r.fact_id), [0, 0])):
                cell[0] += int(r.correct or 0)
                cell[1] += 1
    for r in rows:
        rel = per_rel.get(r.relation, [0, 0])
        own = per_fact.get((r.relation, r.fact_id), [0, 0])
        n_others = rel[1] - own[1]
        if not n_others:
            r.difficulty = "unknown"
            continue
        acc = (rel[0] - own[0]) / n_others
        r.difficulty = "hard" if acc < 1 / 3 else "medium" if acc < 2 / 3 else "easy"


def _one_value(part: _Rows, name: str) -> Any:
    """Return the one value of ``name`` over a file's rows; two values are exit 2 (file:line)."""
    first: tuple[Any, str] | None = None
    for qid, rec in part.rows.items():
        value = getattr(rec, name, None)
        if first is None:
            first = (value, qid)
        elif value != first[0]:
            raise FksInputError(
                f"rows of one run must share one {name}; {qid} has {value!r}, {first[1]} "
                f"(line {part.lines[first[1]]}) has {first[0]!r} (regenerate, or split the run)",
                path=part.path, line=part.lines[qid], field=name)
    return None if first is None else first[0]


def _distinct_configs(part: _Rows) -> Any:
    """Return the rows' decoding config: the one dict, or each distinct one with its count.

    Not refused (unlike the prompt version): shards on different hardware can differ in a
    recorded detail such as ``dtype_used``; the summary shows every variant instead.
    """
    seen: dict[str, list[Any]] = {}
    for rec in part.rows.values():
        cfg = getattr(rec, "generation_config", None)
        key = json.dumps(cfg, sort_keys=True, default=str)
        seen.setdefault(key, [cfg, 0])[1] += 1
    if len(seen) <= 1:
        return next(iter(seen.values()))[0] if seen else None
    return {"mixed": True, "configs": [{"config": c, "n_rows": n} for c, n in seen.values()]}


def _provenance(manifest: dict[str, Any], gens: _Rows, judged: _Rows,
                tokenizer: SpanTokenizer | None) -> dict[str, Any]:
    """Checkpoint hash, prompt version, decoding config, judge identity (one each, checked)."""
    backend = manifest.get("backend") or {}
    judges = sorted({rec.judge for rec in judged.rows.values()})
    return {
        "model": manifest.get("model"),
        "checkpoint": {"weights_sha256": manifest.get("weights_sha256",
                                                      backend.get("weights_sha256")),
                       "tokenizer_sha256": manifest.get("tokenizer_sha256",
                                                        backend.get("tokenizer_sha256")),
                       "revision": backend.get("revision"),
                       "model_path": backend.get("model_path")},
        "prompt_version": _one_value(gens, "prompt_version"),
        "decoding_config": _distinct_configs(gens),
        "judge": {"judges": judges,
                  "stage": (manifest.get("stages") or {}).get("judge")
                  if isinstance(manifest.get("stages"), dict) else None},
        "span_tokenizer": None if tokenizer is None else tokenizer.origin,
    }


def _run_prompt_version(run_dir: Path, manifest: dict[str, Any],
                        provenance: dict[str, Any]) -> tuple[str | None, Path]:
    """Return the run's prompt version and the file it comes from (issue 28).

    A sampling stage that disagrees with it is exit 2 naming both files.
    ``prompt_version`` of ``RUN/evaluation_manifest.json``, else the generations' one value.
    ``stages.calibrate_sample.prompt_version`` (written by ``fks calibrate sample``) must
    equal it; the samples' rows are checked by
    :func:`~fks.metrics.calibration.semantic_entropy.load_semantic_entropy`.
    """
    from fks.generate.manifest import MANIFEST_NAME

    manifest_path = run_dir / MANIFEST_NAME
    version = manifest.get("prompt_version")
    source = manifest_path
    if not isinstance(version, str):
        version, source = provenance.get("prompt_version"), run_dir / "generations.jsonl"
    stages = manifest.get("stages")
    stage = stages.get("calibrate_sample") if isinstance(stages, dict) else None
    sampled = stage.get("prompt_version") if isinstance(stage, dict) else None
    if (version is not None and sampled is not None and sampled != version
            and (run_dir / SAMPLES_NAME).is_file()):
        raise FksInputError(
            f"{SAMPLES_NAME} was sampled with prompt version {sampled!r}, but the run's is "
            f"{version!r} ({source}); resample with `fks calibrate sample`",
            path=manifest_path, field="stages.calibrate_sample.prompt_version")
    return version, source


def default_span_tokenizer_path(manifest: dict[str, Any]) -> str | None:
    """Return the tokenizer folder the run's model was loaded from, for the answer-span offsets.

    In this order: the converted checkpoint of a GGUF model (``backend.gguf.checkpoint``,
    which holds the tokenizer the run used; ``package:`` and ``.gguf`` models), then
    ``backend.model_path``, then ``model.path``. For a ``package:`` or ``.gguf`` path whose
    manifest predates the ``checkpoint`` field, the path is resolved through the GGUF cache
    (:func:`fks.generate.gguf.resolve_model_source`; converted once if the cache is empty).
    None when nothing names a local folder; the span sources then report ``no_token_offsets``.
    """
    backend = manifest.get("backend") or {}
    checkpoint = (backend.get("gguf") or {}).get("checkpoint")
    if checkpoint and Path(checkpoint).is_dir():
        return str(checkpoint)
    path = backend.get("model_path") or (manifest.get("model") or {}).get("path")
    if not path:
        return None
    text = str(path)
    try:
        if text.startswith(PACKAGE_SCHEME) or find_gguf(text) is not None:
            return resolve_model_source(text).load_path
    except FksInputError as exc:  # package gone, ambiguous folder: no offsets, say why
        log.warning("no tokenizer for answer-span offsets from %s: %s", text, exc)
        return None
    return text


def load_run(run_dir: str | Path, *, main_families: Sequence[str],
             benchmark: str | Path | Benchmark | None = None,
             tokenizer: str | Path | None = None) -> RunInputs:
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
    span_tok = load_span_tokenizer(tokenizer if tokenizer is not None
                                   else default_span_tokenizer_path(manifest))
    provenance = _provenance(manifest, gen_part, judged_part, span_tok)
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
    verbalized = _verbalized(run_dir, gens, model, manifest)
    if verbalized is not None:
        files[VERBALIZED_NAME] = sha256_file(run_dir / VERBALIZED_NAME)
    aliases = [str(v) for v in ((manifest.get("model") or {}).get("path"),
                                (manifest.get("backend") or {}).get("model_path")) if v]
    run_prompt, prompt_source = _run_prompt_version(run_dir, manifest, provenance)
    sem = load_semantic_entropy(run_dir, bench, model,
                                greedy={q: g.raw_response for q, g in gens.items()
                                        if g.status == "ok"}, model_aliases=aliases,
                                prompt_version=run_prompt, prompt_source=prompt_source)
    if sem is not None:
        files[SAMPLES_NAME] = sha256_file(sem.path)
    data_source = {} if bench is None else {
        f.fact_id: "+".join(sorted(getattr(f, "sources", None) or [])) or "unknown"
        for f in bench.facts}
    ctx = {"share": share, "covered": covered, "verbalized": verbalized, "semantic": sem,
           "tokenizer": span_tok, "data_source": data_source}
    rows = [_query_row(it, gens.get(it.query_id), judged.get(it.query_id),
                       labels.get(it.query_id), ctx) for it in items]
    _assign_difficulty(rows)
    return RunInputs(model=model, rows=rows, files=files, benchmark=bench_info,
                     verbalized_available=verbalized is not None,
                     behavior_check=_check_behavior_file(run_dir, fb),
                     n_not_selected=n_not_selected, semantic_entropy=sem,
                     provenance=provenance)


# ============================================================================ figures
_OUTCOME_INDEX = {o: i for i, o in enumerate(OUTCOMES)}
_VALID, _INVALID_CONFIDENCE = _OUTCOME_INDEX["valid"], _OUTCOME_INDEX["invalid_confidence"]


@dataclass
class _Columns:
    """One reading's rows as aligned columns, built once and shared by every source.

    ``fact_codes`` are the ranks of the rows' fact ids among the reading's (:func:`_codes`);
    the rows of any part keep their order, and the part's own codes are the ranks of its codes
    (:meth:`part_codes`), which equal ``_codes`` of its fact ids. ``slices`` holds, per
    dimension, the row indices of each slice value (values sorted, rows in reading order).
    """

    fact_ids: np.ndarray
    fact_codes: np.ndarray
    answered_correct: np.ndarray
    slices: dict[str, dict[str, np.ndarray]]

    @classmethod
    def of(cls, rows: Sequence[QueryRow]) -> _Columns:
        """Build the columns of ``rows``."""
        facts = [r.fact_id for r in rows]
        slices: dict[str, dict[str, np.ndarray]] = {}
        for dim in SLICE_DIMENSIONS:
            groups: dict[str, list[int]] = {}
            for i, r in enumerate(rows):
                groups.setdefault(_slice_value(r, dim), []).append(i)
            slices[dim] = {v: np.asarray(groups[v], dtype=np.int64) for v in sorted(groups)}
        return cls(fact_ids=np.asarray(facts, dtype=object),
                   fact_codes=_codes(facts) if facts else np.zeros(0, dtype=np.int64),
                   answered_correct=np.asarray(
                       [r.outcome == "answered" and bool(r.correct) for r in rows], dtype=bool),
                   slices=slices)

    def part_codes(self, idx: np.ndarray) -> np.ndarray:
        """``_codes`` of the fact ids of rows ``idx`` (ints ``0..F-1``, fact-id order)."""
        return np.unique(self.fact_codes[idx], return_inverse=True)[1].reshape(-1)

    def part_fact_ids(self, idx: np.ndarray) -> list[str]:
        """Return the fact id of each row of ``idx``."""
        return self.fact_ids[idx].tolist()


@dataclass
class _Scored:
    """One reading's rows with their outcome for one source (each row's ``outcome_for``).

    ``p``/``y`` hold a valid row's confidence and outcome and 0.0 elsewhere (exactly the
    end-to-end view's values, :func:`_end_to_end_arrays`); ``reason`` indexes ``reasons`` for
    the ``invalid_confidence`` rows (``why or "unknown"``), -1 elsewhere.
    """

    outcome: np.ndarray
    valid: np.ndarray
    p: np.ndarray
    y: np.ndarray
    reason: np.ndarray
    reasons: list[str]

    @classmethod
    def of(cls, rows: Sequence[QueryRow], source: str) -> _Scored:
        """Score ``rows`` for ``source``."""
        outcome, p, y, reason = [], [], [], []
        names: dict[str, int] = {}
        for r in rows:
            o, why = r.outcome_for(source)
            outcome.append(_OUTCOME_INDEX[o])
            if o == "valid":
                p.append(r.confidence[source][0])
                y.append(r.correct)
            else:
                p.append(0.0)
                y.append(0.0)
            reason.append(names.setdefault(why or "unknown", len(names))
                          if o == "invalid_confidence" else -1)
        codes = np.asarray(outcome, dtype=np.int64)
        return cls(outcome=codes, valid=codes == _VALID, p=np.asarray(p, dtype=float),
                   y=np.asarray(y, dtype=float), reason=np.asarray(reason, dtype=np.int64),
                   reasons=list(names))


def _coverage(cols: _Columns, sc: _Scored, idx: np.ndarray) -> dict[str, Any]:
    """Outcome counts (every outcome listed, zeros included) and the two coverages."""
    counts = np.bincount(sc.outcome[idx], minlength=len(OUTCOMES)).tolist()
    valid, answered = counts[_VALID], counts[_VALID] + counts[_INVALID_CONFIDENCE]
    why = sc.reason[idx]
    why_counts = np.bincount(why[why >= 0], minlength=len(sc.reasons)).tolist()
    n = int(idx.size)
    return {
        "n_queries": n, "counts": dict(zip(OUTCOMES, counts, strict=True)),
        "n_answered": answered,
        "n_correct_answered": int(np.count_nonzero(cols.answered_correct[idx])),
        "invalid_confidence_reasons": dict(sorted(
            (name, c) for name, c in zip(sc.reasons, why_counts, strict=True) if c)),
        "confidence_coverage": valid / answered if answered else None,
        "end_to_end_coverage": valid / n if n else None,
        "answer_coverage": answered / n if n else None,
    }


def _valid_arrays(sc: _Scored, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(p, y, rows)`` of the valid rows of ``idx`` (the confidence-coverage view)."""
    keep = idx[sc.valid[idx]]
    return sc.p[keep], sc.y[keep], keep


def _end_to_end_arrays(sc: _Scored, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(p, y)`` over every query of ``idx`` (the end-to-end view, :data:`COVERAGE_VIEWS`).

    A valid row keeps its confidence and outcome; every other row (abstained, invalid answer
    or confidence, timed out, failed, unjudged, never generated) is a query that did not get a
    correct answer under this source: ``y = 0`` at confidence ``p = 0``. So the accuracy is
    correct answers over all queries, and risk at full coverage counts every such row.
    """
    return sc.p[idx], sc.y[idx]


def _codes(facts: Sequence[str]) -> np.ndarray:
    return np.unique(np.asarray(facts, dtype=object).astype(str), return_inverse=True)[1]


def _slice_value(row: QueryRow, dim: str) -> str:
    if dim == "answer_in_subject_surface":
        return "copy" if row.copy else "real"
    if dim == "answer_length":
        return _length_bucket(row.answer_tokens)
    return str(getattr(row, dim))


def _n_facts(codes: np.ndarray) -> int:
    return int(codes.max()) + 1 if codes.size else 0


def _intervals(p: np.ndarray, y: np.ndarray, codes: np.ndarray, s: CalibrationSettings, *,
               with_aurc: bool = False, cache: BootstrapCache | None = None) -> dict[str, Any]:
    """Fact-clustered intervals, or why none is given (fewer facts than the stated minimum)."""
    n_facts = _n_facts(codes)
    if n_facts < s.min_facts_for_interval:
        return {"status": "not_computed", "n_facts": n_facts,
                "reason": f"{n_facts} fact(s) < min_facts_for_interval = "
                          f"{s.min_facts_for_interval}: an interval from so few facts would "
                          "look surer than it is"}
    return {"status": "ok", **fact_clustered_intervals(
        p, y, codes, bins=s.bins, nll_eps=s.nll_eps, n_resamples=s.n_resamples,
        level=s.level, seed=s.seed, with_aurc=with_aurc, cache=cache)}


def _slice_figures(p: np.ndarray, y: np.ndarray, codes: np.ndarray, s: CalibrationSettings,
                   view: str = "confidence", cache: BootstrapCache | None = None
                   ) -> dict[str, Any]:
    core = calibration_summary(p, y, bins=s.bins)
    counts = np.bincount(bucketize_equal_width(p.astype(np.float32), s.bins), minlength=s.bins)
    return {
        "coverage_view": view,
        "n": int(p.size), "n_facts": _n_facts(codes), "accuracy": float(y.mean()),
        "mean_confidence": float(p.astype(np.float32).astype(float).mean()),
        "brier": core["brier"], "nll": nll_score(p, y, eps=s.nll_eps)["nll"],
        "ece_equal_width": core["ece"], "bin_counts_equal_width": counts.tolist(),
        "aurc": aurc(core["coverage"], core["risk"]),
        "risk_at_full_coverage": float(core["risk"][-1]),
        "intervals": _intervals(p, y, codes, s, cache=cache),
    }


def _end_to_end_only(figures: dict[str, Any]) -> dict[str, Any]:
    """Drop the abstention-rewarding scores (and their intervals) from end-to-end figures."""
    out = {k: v for k, v in figures.items() if k not in END_TO_END_NOT_IN_VIEW}
    intervals = out.get("intervals")
    if isinstance(intervals, dict):
        out["intervals"] = {k: v for k, v in intervals.items()
                            if k not in END_TO_END_NOT_IN_VIEW}
    out["not_in_view"] = {k: END_TO_END_NOT_IN_VIEW[k] for k in figures
                          if k in END_TO_END_NOT_IN_VIEW}
    return out


def _slices(cols: _Columns, sc: _Scored, s: CalibrationSettings,
            cache: BootstrapCache | None = None) -> dict[str, Any]:
    """Coverage and figures in both views (with fact-clustered intervals) per slice value."""
    out: dict[str, Any] = {}
    for dim, groups in cols.slices.items():
        out[dim] = {}
        for value, idx in groups.items():
            p, y, keep = _valid_arrays(sc, idx)
            pe, ye = _end_to_end_arrays(sc, idx)
            out[dim][value] = {
                "coverage": _coverage(cols, sc, idx),
                "figures": _slice_figures(p, y, cols.part_codes(keep), s, cache=cache)
                if p.size else None,
                "end_to_end_figures": _end_to_end_only(
                    _slice_figures(pe, ye, cols.part_codes(idx), s, "end_to_end", cache)),
            }
    return out


def _view(p: np.ndarray, y: np.ndarray, codes: np.ndarray, s: CalibrationSettings, view: str,
          cache: BootstrapCache | None = None) -> dict[str, Any]:
    """Figures, intervals, reliability and risk-coverage data of one coverage view."""
    report = calibration_report(
        p, y, bins=s.bins, nll_eps=s.nll_eps, coverages=s.coverages,
        max_curve_points=s.max_curve_points, view=view, fact_codes=codes, level=s.level,
        min_facts=s.min_facts_for_interval)
    figures = {k: v for k, v in report.items() if k not in ("reliability", "risk_coverage")}
    figures["n_facts"] = _n_facts(codes)
    return {"figures": figures,
            "intervals": _intervals(p, y, codes, s, with_aurc=True, cache=cache),
            "reliability": report["reliability"], "risk_coverage": report["risk_coverage"]}


def source_block(rows: Sequence[QueryRow], source: str, s: CalibrationSettings, *,
                 cache: BootstrapCache | None = None, columns: _Columns | None = None,
                 scored: _Scored | None = None) -> dict[str, Any]:
    """Coverage, both coverage views, intervals, slices, recalibration of one source.

    The top-level ``figures``/``intervals``/``reliability``/``risk_coverage`` are the
    confidence-coverage view (answered rows with a valid confidence); ``end_to_end`` holds
    accuracy, risk and AURC over every query of the reading (:func:`_end_to_end_arrays`;
    no ECE, Brier, NLL or reliability there: :data:`END_TO_END_NOT_IN_VIEW`). ``cache``, ``columns``
    and ``scored`` (the reading's :class:`_Columns` and the rows scored for ``source``) only
    save work when the caller has them; the result is the same.
    """
    cols = columns if columns is not None else _Columns.of(rows)
    sc = scored if scored is not None else _Scored.of(rows, source)
    every = np.arange(len(rows), dtype=np.int64)
    block: dict[str, Any] = {"available": True, "coverage": _coverage(cols, sc, every)}
    p, y, keep = _valid_arrays(sc, every)
    if p.size == 0:
        block.update(figures=None, end_to_end=None,
                     reason="no valid (confidence, outcome) pair: end-to-end, no query is "
                            "answered with a confidence from this source")
        return block
    pe, ye = _end_to_end_arrays(sc, every)
    e2e = _view(pe, ye, cols.part_codes(every), s, "end_to_end", cache)
    del e2e["reliability"]
    e2e["figures"] = _end_to_end_only(e2e["figures"])
    e2e["intervals"] = _end_to_end_only(e2e["intervals"])
    e2e["intervals"].pop("not_in_view")
    block["end_to_end"] = {"definition": COVERAGE_VIEWS["end_to_end"], **e2e}
    block.update(_view(p, y, cols.part_codes(keep), s, "confidence", cache))
    block["slices"] = _slices(cols, sc, s, cache)
    block["recalibration"] = recalibration_report(
        p, y, cols.part_fact_ids(keep), bins=s.bins, dev_fraction=s.dev_fraction,
        eps=s.nll_eps, n_resamples=s.n_resamples, level=s.level, seed=s.seed,
        min_facts=s.min_facts_for_interval, cache=cache)
    return block


def _common_support(rows: Sequence[QueryRow], sources: Sequence[str], s: CalibrationSettings,
                    cache: BootstrapCache | None = None, columns: _Columns | None = None,
                    scored: dict[str, _Scored] | None = None) -> dict[str, Any]:
    """Compare the sources on the rows where every one of them is valid.

    A source with no valid row in the reading (e.g. the answer-span sources without token
    offsets) is left out and listed in ``excluded_sources``, so it cannot empty the table.
    Beside each source's figures: paired, fact-clustered intervals of the difference of every
    pair of sources (same rows, same fact draws), when the rows hold enough facts.
    """
    cols = columns if columns is not None else _Columns.of(rows)
    scored = dict(scored or {})
    for src in sources:
        if src not in scored:
            scored[src] = _Scored.of(rows, src)
    excluded = {src: "no valid row in this reading" for src in sources
                if not scored[src].valid.any()}
    sources = [src for src in sources if src not in excluded]
    # no source left: no common support at all (not every row: all() of nothing is True)
    keep = np.flatnonzero(np.logical_and.reduce([scored[src].valid for src in sources])
                          ) if sources else np.zeros(0, dtype=np.int64)
    codes = cols.part_codes(keep)
    out: dict[str, Any] = {"sources": list(sources), "excluded_sources": excluded,
                           "n": int(keep.size), "n_facts": _n_facts(codes),
                           "by_source": {}, "paired_differences": {}}
    if not keep.size:
        return out
    y = scored[sources[0]].y[keep]  # a row valid for every source: its outcome, in each
    conf = {src: scored[src].p[keep] for src in sources}
    for src in sources:
        rep = calibration_report(conf[src], y, bins=s.bins, nll_eps=s.nll_eps,
                                 coverages=s.coverages, max_curve_points=2)
        out["by_source"][src] = {k: rep[k] for k in ("brier", "ece_equal_width",
                                                     "ece_equal_mass", "aurc", "mean_confidence")}
        out["by_source"][src]["nll"] = rep["nll"]["nll"]
    out["accuracy"] = float(y.mean())
    if out["n_facts"] < s.min_facts_for_interval:
        out["paired_differences"] = {
            "status": "not_computed",
            "reason": f"{out['n_facts']} fact(s) < min_facts_for_interval = "
                      f"{s.min_facts_for_interval}"}
        return out
    reps = {src: replicates_with_point(conf[src], y, codes, bins=s.bins, nll_eps=s.nll_eps,
                                       n_resamples=s.n_resamples, seed=s.seed, cache=cache)
            for src in sources}  # the same fact draws for every source: paired
    for i, a in enumerate(sources):
        for b in sources[i + 1:]:
            out["paired_differences"][f"{a} - {b}"] = paired_from(
                reps[a], reps[b], n=int(keep.size), n_facts=out["n_facts"],
                n_resamples=s.n_resamples, level=s.level, seed=s.seed)
    return out


def _variant_spread(rows: Sequence[QueryRow], s: CalibrationSettings) -> dict[str, Any]:
    """Each elicitation variant's figures on the answered rows, and the spread of ECE.

    Every variant is scored on its own valid rows; ``common`` repeats ECE on the rows where
    every variant is valid, so the spread is not a difference of samples.
    """
    answered = [r for r in rows if r.outcome == "answered"]
    per: dict[str, Any] = {}
    for v in VARIANTS:
        ok = [r for r in answered if r.verbal_variants.get(v, (None, None))[0] is not None]
        entry: dict[str, Any] = {"n_answered": len(answered), "n_valid": len(ok),
                                 "invalid_reasons": dict(sorted(Counter(
                                     r.verbal_variants.get(v, (None, "not_elicited"))[1]
                                     or "unknown" for r in answered
                                     if r.verbal_variants.get(v, (None, None))[0] is None
                                 ).items()))}
        if ok:
            p = np.array([r.verbal_variants[v][0] for r in ok], dtype=float)
            y = np.array([r.correct for r in ok], dtype=float)
            core = calibration_summary(p, y, bins=s.bins)
            entry.update(ece_equal_width=core["ece"], brier=core["brier"],
                         aurc=aurc(core["coverage"], core["risk"]),
                         mean_confidence=float(p.mean()), accuracy=float(y.mean()))
        per[v] = entry
    common = [r for r in answered
              if all(r.verbal_variants.get(v, (None, None))[0] is not None for v in VARIANTS)]
    common_ece: dict[str, float] = {}
    if common:
        y = np.array([r.correct for r in common], dtype=float)
        for v in VARIANTS:
            p = np.array([r.verbal_variants[v][0] for r in common], dtype=float)
            common_ece[v] = calibration_summary(p, y, bins=s.bins)["ece"]

    def spread(values: list[float]) -> dict[str, Any] | None:
        if not values:
            return None
        arr = np.asarray(values)
        return {"n_variants": int(arr.size), "min": float(arr.min()), "max": float(arr.max()),
                "range": float(arr.max() - arr.min()),
                "sd": float(arr.std(ddof=1)) if arr.size > 1 else None}

    return {"variants": per, "primary": PRIMARY_VARIANT,
            "ece_spread": spread([e["ece_equal_width"] for e in per.values()
                                  if "ece_equal_width" in e]),
            "common": {"n": len(common), "ece": common_ece,
                       "ece_spread": spread(list(common_ece.values()))}}


def _judge_diagnostic(rows: Sequence[QueryRow]) -> dict[str, Any]:
    """Tabulate the judge's confidence values against the outcomes (never a calibration)."""
    table: dict[str, dict[str, int]] = {}
    for r in rows:
        if r.outcome == "answered" and r.judge_confidence is not None:
            cell = table.setdefault(f"{r.judge_confidence:g}", {"n": 0, "n_correct": 0})
            cell["n"] += 1
            cell["n_correct"] += int(r.correct or 0)
    return {"label": "diagnostic, not a confidence source", "note": JUDGE_DIAGNOSTIC,
            "by_value": dict(sorted(table.items()))}


def readings_of(main_families: Sequence[str]) -> dict[str, Callable[[QueryRow], bool]]:
    """Return the two readings, ``anchor`` and ``main_families`` (each row's own boolean)."""
    fams = set(main_families)
    return {
        ANCHOR_FAMILY: lambda r: r.main and r.condition_family == ANCHOR_FAMILY,
        "main_families": lambda r: r.main and r.condition_family in fams,
    }


def _reading(rows: list[QueryRow], available: list[str], missing: dict[str, str],
             families: list[str], s: CalibrationSettings) -> dict[str, Any]:
    cache = BootstrapCache()  # the same facts drawn, and samples met twice, within a reading
    cols = _Columns.of(rows)
    scored = {src: _Scored.of(rows, src) for src in available}
    out: dict[str, Any] = {
        "families": families, "n_queries": len(rows), "n_facts": len({r.fact_id for r in rows}),
        "outcomes_before_confidence": dict(sorted(Counter(
            "answered" if r.outcome == "answered" else r.outcome for r in rows).items())),
        "sources": {}}
    for src in [*SOURCES, *(a for a in available if a not in SOURCES)]:
        if src in missing:
            out["sources"][src] = {"available": False, "reason": missing[src]}
        else:
            out["sources"][src] = source_block(rows, src, s, cache=cache, columns=cols,
                                               scored=scored[src])
    # semantic entropy may cover a --limit subset only: kept out of the common-support table
    out["common_support"] = _common_support(
        rows, [a for a in available if a not in SE_SOURCES], s, cache, cols, scored)
    out["judge_confidence_diagnostic"] = _judge_diagnostic(rows)
    if "verbalized" in available:
        out["verbalized_variants"] = _variant_spread(rows, s)
    return out


# ============================================================================ the stage
def _per_query_rows(model: str, rows: Sequence[QueryRow], readings: dict[str, Callable],
                    available: list[str], s: CalibrationSettings) -> Iterator[dict[str, Any]]:
    """Yield the per-query file's rows (streamed to the file; the split is hashed per fact)."""
    split: dict[str, str] = {}
    for r in rows:
        sources = {}
        for src in available:
            outcome, why = r.outcome_for(src)
            sources[src] = {"confidence": r.confidence.get(src, (None, None))[0],
                            "outcome": outcome, "reason": why}
        if r.fact_id not in split:
            split[r.fact_id] = split_of_fact(r.fact_id, dev_fraction=s.dev_fraction)
        yield {
            "model": model, "query_id": r.query_id, "fact_id": r.fact_id,
            "relation": r.relation, "condition_family": r.condition_family,
            "language": r.language, "answer_in_subject_surface": r.copy,
            "use_for_main_forward": r.main,
            "readings": [name for name, f in readings.items() if f(r)],
            "outcome": r.outcome, "outcome_reason": r.reason, "correct": r.correct,
            "scorer_label": r.scorer_label, "cluster_id": r.cluster_id,
            "judge_confidence": r.judge_confidence, "answer_span_tokens": r.answer_tokens,
            "difficulty": r.difficulty, "data_source": r.data_source,
            "split": split[r.fact_id],
            "sources": sources,
        }


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
            src: {"description": d, "available": True} for src, d in SE_SOURCES.items()}),
        "judge_confidence": JUDGE_DIAGNOSTIC,
        "provenance": inputs.provenance,
        "slice_rules": SLICE_RULES,
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
    from fks.provenance import check_inputs, record_files

    chain = check_inputs(run_dir, "calibrate", ["generations.jsonl", "judged.jsonl"],
                         optional=["scored.jsonl", VERBALIZED_NAME, SAMPLES_NAME])
    inputs = load_run(run_dir, main_families=main_families, benchmark=benchmark,
                      tokenizer=s.tokenizer)
    missing = {} if inputs.verbalized_available else {
        "verbalized": f"{VERBALIZED_NAME} not found in the run directory; run `fks calibrate "
                      "elicit RUN --model-path ...` first (no value is ever fabricated)"}
    available = [src for src in SOURCES if src not in missing]
    if inputs.semantic_entropy is not None:
        available += list(SE_SOURCES)
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
        from fks.metrics.calibration.plots import write_plots

        outputs += write_plots(summary, out_dir)
    update_run_manifest(run_dir, stage="calibrate", stage_info={
        "outputs": {n: sha256_file(out_dir / n) for n in outputs}, "inputs": inputs.files,
        "settings": s.describe(), "main_families": main_families,
        "sources_available": available, "sources_missing": sorted(missing),
        "n_queries": len(inputs.rows), "finished_at": summary["created_at"],
    })
    record_files(run_dir, "calibrate", chain, [out_dir / n for n in outputs])
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
