"""Report records of the EvalHarness (spec §8.2) with the §8.3 cross-field rules as validators.

The models are the §8.2 models, field for field, with ``ConfigDict(extra="forbid")`` and the
listed bounds. Deviations, each forced by the spec's own text:

* ``DimensionScore.raw_score`` is *nullable* (still required): §8.3 says D9's raw score is
  ``None`` when fewer than 2 buckets are compared, and D11's is only computed for B1-B3, which a
  non-nullable float cannot express. ``None`` means "not computed" and must come with a flag that
  says why (no sentinel values).
* Added bounds that the §8.2 comments imply: counts ``>= 0``, medians in ``[0, 1]``, bandwidths
  ``>= 0``, and ``DegradationFlag.baseline_score > 0`` (Δ divides by it).

§8.3 rules enforced here:

* a D9 score is ``None`` exactly when its flags hold ``d9_single_bucket_skipped``; a computed D9
  records ``compared_buckets`` (>= 2 distinct) in its components;
* a D11 score is computed only when the case's bucket is B1, B2 or B3;
* ``CaseScore.ece`` is set only by D6: it requires a D6 entry whose ``components["ece"]`` equals it;
* B7's bucket report is never ``sample_quality_flag == "ok"``: ``"ok"`` means "takes part in
  cross-bucket percentile comparisons", and v1 keeps B7 out of them (§3.3);
* dictionary keys agree with the records' own ids; a degradation flag names a reported bucket and
  its ``delta_ratio`` equals ``(baseline - current) / baseline``; contested points imply a
  triggered mini-review.

The input records (cases, gold) live in :mod:`fks.evalharness.inputs` and are re-exported here.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fks.evalharness.inputs import *  # noqa: F403  (re-export the input records)
from fks.evalharness.inputs import BucketLabel
from fks.evalharness.inputs import __all__ as _input_names

__all__ = [
    "DimensionId",
    "BucketLabel",
    "SplitName",
    "DimensionScore",
    "CaseScore",
    "BucketReport",
    "DegradationFlag",
    "IAAReport",
    "BatchReport",
    "D9_SKIPPED_FLAG",
    "D11_BUCKETS",
    *_input_names,
]

DimensionId = Literal["D1", "D2", "D3", "D4", "D5", "D6", "D7", "D8", "D9", "D10", "D11"]
SplitName = Literal["dev", "test", "holdout"]

#: §8.3 flag of a D9 score that was not computed (fewer than 2 buckets compared).
D9_SKIPPED_FLAG = "d9_single_bucket_skipped"
#: §8.3 buckets where D11 is computed in v1.
D11_BUCKETS: frozenset[str] = frozenset({"B1", "B2", "B3"})


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DimensionScore(_Out):
    """One dimension of one case.

    Attributes:
        dimension_id: D1..D11.
        raw_score: the composite in [0, 1]; ``None`` = not computed (a flag says why).
        bucket_percentile: |{c in bucket : score_c <= score}| / |bucket| (§3.2).
        components: the formula's components (and diagnostics such as D5's confusion matrix).
        bandwidth: bootstrap half-width of the percentile, set when the bucket has < 30 scores.
        gaming_flags: §7 anti-gaming flags and "not computed" reasons.
    """

    dimension_id: DimensionId
    raw_score: float | None = Field(..., ge=0.0, le=1.0)
    bucket_percentile: float | None = Field(default=None, ge=0.0, le=1.0)
    components: dict[str, Any] = Field(default_factory=dict)
    bandwidth: float | None = Field(default=None, ge=0.0)
    gaming_flags: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _rules(self) -> DimensionScore:
        if self.raw_score is None:
            if not self.gaming_flags:
                raise ValueError("raw_score is None but no flag says why it was not computed")
            if self.bucket_percentile is not None or self.bandwidth is not None:
                raise ValueError("a dimension that was not computed has no percentile/bandwidth")
        if self.dimension_id == "D9":
            skipped = D9_SKIPPED_FLAG in self.gaming_flags
            if skipped != (self.raw_score is None):
                raise ValueError(
                    f"D9 raw_score must be None exactly when flagged {D9_SKIPPED_FLAG!r}"
                )
            if self.raw_score is not None:
                buckets = self.components.get("compared_buckets") or []
                if len(set(buckets)) < 2:
                    raise ValueError("a computed D9 needs components.compared_buckets >= 2 buckets")
        elif D9_SKIPPED_FLAG in self.gaming_flags:
            raise ValueError(f"{D9_SKIPPED_FLAG!r} belongs to D9 only")
        return self


class CaseScore(_Out):
    """All dimensions of one case, its §2 aggregate, and the case-level IAA kappa and ECE."""

    case_id: str
    bucket_label: BucketLabel
    split: SplitName
    dimensions: dict[DimensionId, DimensionScore]
    aggregate_score: float = Field(..., ge=0.0, le=1.0)
    iaa_kappa: float | None = Field(default=None, ge=-1.0, le=1.0)
    ece: float | None = Field(default=None, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _rules(self) -> CaseScore:
        for key, dim in self.dimensions.items():
            if key != dim.dimension_id:
                raise ValueError(f"dimensions[{key!r}] holds {dim.dimension_id}")
        d11 = self.dimensions.get("D11")
        if d11 is not None and d11.raw_score is not None and self.bucket_label not in D11_BUCKETS:
            raise ValueError(f"D11 is only computed for B1-B3, not {self.bucket_label}")
        if self.ece is not None:
            d6 = self.dimensions.get("D6")
            if d6 is None:
                raise ValueError("ece is computed by D6 only, and D6 is absent")
            value = d6.components.get("ece")
            if not isinstance(value, int | float) or not math.isclose(value, self.ece):
                raise ValueError("ece must equal dimensions['D6'].components['ece']")
        return self


class BucketReport(_Out):
    """One bucket: size, median aggregate, percentile bandwidth, dimension medians, quality.

    ``sample_quality_flag``: ``"ok"`` -- the bucket takes part in cross-bucket percentile
    comparisons; ``"insufficient"`` -- too few cases, or kept apart by design (B7 in v1);
    ``"annotation_low"`` -- its annotation kappa is below threshold, only absolute scores count.
    """

    bucket_label: BucketLabel
    case_count: int = Field(..., ge=0)
    median_score: float = Field(..., ge=0.0, le=1.0)
    percentile_bandwidth: float = Field(..., ge=0.0)
    dimension_medians: dict[DimensionId, float]
    sample_quality_flag: Literal["ok", "insufficient", "annotation_low"] = "ok"

    @model_validator(mode="after")
    def _rules(self) -> BucketReport:
        if self.bucket_label == "B7" and self.sample_quality_flag == "ok":
            raise ValueError("B7 stays out of cross-bucket percentiles in v1 (§3.3); not 'ok'")
        bad = [d for d, v in self.dimension_medians.items() if not 0.0 <= v <= 1.0]
        if bad:
            raise ValueError(f"dimension_medians[{bad[0]!r}] is outside [0, 1]")
        return self


class DegradationFlag(_Out):
    """A §6 degradation: ``delta_ratio = (baseline - current) / baseline`` >= threshold."""

    bucket_label: BucketLabel
    dimension_id: DimensionId
    baseline_score: float = Field(..., gt=0.0)
    current_score: float
    delta_ratio: float
    severity: Literal["bucket_level", "cross_bucket", "mechanism_level"]

    @model_validator(mode="after")
    def _delta(self) -> DegradationFlag:
        expected = (self.baseline_score - self.current_score) / self.baseline_score
        if not math.isclose(self.delta_ratio, expected, rel_tol=1e-9, abs_tol=1e-12):
            raise ValueError(f"delta_ratio {self.delta_ratio} != (baseline-current)/baseline")
        return self


class IAAReport(_Out):
    """§5 inter-annotator agreement of one task over its last ``window`` items."""

    task_id: Literal["A", "B", "C", "D", "D1_open", "D7_external"]
    kappa_rolling_10: float = Field(..., ge=-1.0, le=1.0)
    disagreement_rate: float = Field(..., ge=0.0, le=1.0)
    triggered_mini_review: bool
    contested_points: list[dict[str, Any]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _contested(self) -> IAAReport:
        if self.contested_points and not self.triggered_mini_review:
            raise ValueError("contested points come out of a mini-review, which was not triggered")
        return self


class BatchReport(_Out):
    """The report of one split: bucket reports, degradation flags and IAA reports."""

    split: SplitName
    bucket_reports: dict[BucketLabel, BucketReport]
    degradation_flags: list[DegradationFlag] = Field(default_factory=list)
    iaa_reports: list[IAAReport] = Field(default_factory=list)

    @model_validator(mode="after")
    def _rules(self) -> BatchReport:
        for key, rep in self.bucket_reports.items():
            if key != rep.bucket_label:
                raise ValueError(f"bucket_reports[{key!r}] holds {rep.bucket_label}")
        for flag in self.degradation_flags:
            if flag.bucket_label not in self.bucket_reports:
                raise ValueError(f"degradation flag for unreported bucket {flag.bucket_label}")
        return self
