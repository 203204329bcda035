"""Typed records for every file that crosses a stage boundary.

Benchmark rows follow the README's data-schema tables; run records follow spec §2.3 (generation)
and §3.1-3.2 (judge), with fks's extra fields (status, token counts, log-probs, labels).

Every model here *allows* extra fields: a later stage's richer file can be read by an earlier
stage's model, and a published benchmark with additional columns loads without loss (round
trips keep them). Required fields and their types are still enforced, and a bad row is
reported as ``file:line: field 'x': ...`` by :func:`fks.io.iter_jsonl`.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "Family",
    "LANGUAGES",
    "Entity",
    "RelationRef",
    "Fact",
    "Query",
    "GenerationRecord",
    "ScoredRecord",
    "JudgedRecord",
    "Label",
    "LABELS",
    "JudgeStatus",
    "Correctness",
    "GenerationStatus",
]

Family = Literal[
    "anchor",
    "paraphrase",
    "format",
    "context",
    "multilingual",
    "reverse",
    "recognition",
    "reverse_illposed",
]

#: Benchmark languages (ISO 639-1; mParaRel's ``zh-hans`` is stored as ``zh``).
LANGUAGES: tuple[str, ...] = ("en", "zh", "fr", "es", "de", "ru")

Label = Literal["correct", "incorrect", "ambiguous", "abstain", "unparseable"]
LABELS: tuple[str, ...] = ("correct", "incorrect", "ambiguous", "abstain", "unparseable")
JudgeStatus = Literal["ANSWER", "ABSTAIN", "MULTIPLE", "UNPARSEABLE"]
Correctness = Literal["CORRECT", "INCORRECT", "ABSTAIN", "AMBIGUOUS", "REVIEW_REQUIRED"]
GenerationStatus = Literal["ok", "error", "timeout"]
#: how far above 0 a stored log-probability may sit (float rounding of log(1))
LOGPROB_SLACK = 1e-4


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", validate_assignment=False)


class Entity(_Record):
    """A subject or object: canonical label, Wikidata id, and every accepted alias."""

    canonical: str = Field(min_length=1)
    entity_id: str | None = Field(None, pattern=r"^Q\d+$")
    aliases: list[str] = []


class RelationRef(_Record):
    """The relation a fact belongs to."""

    relation_id: str = Field(min_length=1)
    source_relations: list[str] = []
    direction: Literal["forward", "inverse"] = "forward"
    inverse_of: str | None = None


class Fact(_Record):
    """One row of ``benchmark_facts_<N>.jsonl``."""

    fact_id: str = Field(pattern=r"^fact_\d{6}$")
    subject: Entity
    object: Entity
    relation: RelationRef
    qualification_question: str = Field(min_length=1)
    sources: list[str] = []
    source_records: list[dict[str, Any]] = []
    is_functional: bool
    answer_type: str
    answer_granularity: Literal["entity", "year", "date", "number"] = "entity"
    answer_in_subject_surface: bool
    spec_6_2_flag: bool = False

    def gold_aliases(self) -> list[str]:
        """Canonical object label first, then every alias (deduplicated, order kept)."""
        return list(dict.fromkeys([self.object.canonical, *self.object.aliases]))


class Query(_Record):
    """One row of ``evaluation_queries_<M>.jsonl``."""

    query_id: str = Field(pattern=r"^query_\d{8}$")
    fact_id: str = Field(pattern=r"^fact_\d{6}$")
    relation: str = Field(min_length=1)
    condition_family: Family
    variant_id: str
    language: str
    query: str = Field(min_length=1)
    target_slot: Literal["object", "subject"]
    gold_canonical: str = Field(min_length=1)
    gold_aliases: list[str]
    is_assisted: bool
    is_well_posed: bool
    use_for_main_forward: bool
    use_for_reverse_analysis: bool
    use_for_recognition_analysis: bool
    answer_in_subject_surface: bool
    #: recognition only: the multiple-choice options shown to the model (gold among them)
    options: list[str] | None = None

    @field_validator("language")
    @classmethod
    def _language(cls, v: str) -> str:
        if v not in LANGUAGES:
            raise ValueError(f"language must be one of {', '.join(LANGUAGES)}")
        return v


class GenerationRecord(_Record):
    """One row of ``RUN/generations.jsonl`` (spec §2.3 plus status, tokens, log-probs).

    ``status`` is ``ok`` for a real answer; ``error``/``timeout`` rows are kept (never dropped)
    with ``raw_response`` empty and ``error`` saying why, so coverage can be accounted for.
    """

    model: str
    query_id: str
    fact_id: str
    relation: str
    condition_family: Family
    language: str = "en"
    use_for_main_forward: bool = False
    use_for_reverse_analysis: bool = False
    use_for_recognition_analysis: bool = False
    answer_in_subject_surface: bool = False
    raw_response: str
    generation_config: dict[str, Any]
    prompt_version: str
    status: GenerationStatus = "ok"
    error: str | None = None
    n_prompt_tokens: int | None = None
    prompt_truncated: bool = False
    n_generated_tokens: int | None = None
    finish_reason: str | None = None
    #: per-token log-probabilities of the generated answer, when the backend gives them
    answer_logprobs: list[float] | None = None

    @field_validator("answer_logprobs")
    @classmethod
    def _logprobs_are_logprobs(cls, value: list[float] | None) -> list[float] | None:
        # a log-probability is finite and <= 0; LOGPROB_SLACK allows for float rounding of a
        # token the model is sure of. NaN, +-Infinity, 1e400 (parsed as inf) and positive
        # values (probabilities above 1) are bad input: they would flow into calibration.
        if value is None:
            return value
        for i, x in enumerate(value):
            if not math.isfinite(x) or x > LOGPROB_SLACK:
                raise ValueError(f"token {i}: a log-probability must be finite and <= 0; "
                                 f"found {x!r}")
        return value


class ScoredRecord(GenerationRecord):
    """One row of ``RUN/scored.jsonl``: a generation record plus the five-label score."""

    label: Label
    extracted_answer: str | None = None
    matched_alias: str | None = None


class JudgedRecord(ScoredRecord):
    """One row of ``RUN/judged.jsonl``: clusters (§3.1) and cluster correctness (§3.2)."""

    cluster_id: str
    canonical_meaning: str | None = None
    status: JudgeStatus  # type: ignore[assignment]  # §3.1 status replaces the generation status
    confidence: float = Field(ge=0.0, le=1.0)
    correctness: Correctness
    generation_status: GenerationStatus = "ok"
    judge: str
