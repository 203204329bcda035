"""The harness configuration: packaged ``fks/configs/harness.yaml``, validated by pydantic.

``fks.configs.load_configs`` validates exactly four files, so the harness has its own loader:
:func:`load_harness_config` reads the packaged default through :mod:`importlib.resources`
(``configs/*.yaml`` is already package data), deep-merges an optional override file onto it and
validates the result. A bad value raises :class:`~fks.errors.FksInputError` naming the file and
the field.

Weights are refused at load, never repaired at scoring time (issue 28): every number must be
finite; a dimension weight (``weights``, ``bucket_weight_overrides``) must be >= 0 and every
bucket must keep one > 0; a D6 weight (``dimensions.d6_tier_weights``,
``dimensions.d6_label_weights``) must be > 0. Otherwise a weighted mean ``sum w x / sum w``
can be 0/0 -- before issue 28 all-zero D6 label weights wrote NaN and scored 0.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from fks.configs import deep_merge
from fks.errors import FksInputError
from fks.io import input_error, read_yaml

__all__ = [
    "BUCKET_LABELS",
    "DIMENSION_IDS",
    "SPLIT_NAMES",
    "IAA_TASKS",
    "HarnessConfig",
    "BucketSpec",
    "load_harness_config",
]

#: §8.2 ``DimensionId`` in order.
DIMENSION_IDS: tuple[str, ...] = tuple(f"D{i}" for i in range(1, 12))
#: §8.2 ``BucketLabel`` in order (B5 is split into B5a and B5b, so 8 buckets).
BUCKET_LABELS: tuple[str, ...] = ("B1", "B2", "B3", "B4", "B5a", "B5b", "B6", "B7")
#: §8.2 ``SplitName``.
SPLIT_NAMES: tuple[str, ...] = ("dev", "test", "holdout")
#: §8.2 ``IAAReport.task_id``.
IAA_TASKS: tuple[str, ...] = ("A", "B", "C", "D", "D1_open", "D7_external")

DimensionKey = Literal["D1", "D2", "D3", "D4", "D5", "D6", "D7", "D8", "D9", "D10", "D11"]
BucketKey = Literal["B1", "B2", "B3", "B4", "B5a", "B5b", "B6", "B7"]
TaskKey = Literal["A", "B", "C", "D", "D1_open", "D7_external"]
AxisKey = Literal["L", "D", "F", "N", "C", "I"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _weight_table(
    values: list[float] | dict[str, float], what: str, *, positive: bool = False
) -> None:
    """Refuse a weight table with a negative entry or no positive one (``sum w = 0``).

    ``positive``: every entry must be > 0 (the D6 label weights: §1 gives 2.0 / 1.0 / 0.5, and
    a case whose labels all weighed 0 would have ``F1^w = 0 / 0``).
    """
    items = list(values.items()) if isinstance(values, dict) else list(enumerate(values))
    bad = [k for k, w in items if (w <= 0 if positive else w < 0)]
    if bad:
        raise ValueError(f"{what} must be {'> 0' if positive else '>= 0'}; found for {bad}")
    if items and not any(w > 0 for _, w in items):
        raise ValueError(f"{what} are all 0: the weighted mean sum(w x) / sum(w) is undefined")


class BucketSpec(_Strict):
    """One §3.1 bucket: its MCA axis positions, e.g. ``{"F": "F1-F2", "N": "N1"}``."""

    axes: dict[AxisKey, str]

    def levels(self, axis: str) -> set[str]:
        """Positions the bucket occupies on ``axis``; a range ``"F1-F3"`` expands to F1..F3.

        >>> sorted(BucketSpec(axes={"F": "F1-F3"}).levels("F"))
        ['F1', 'F2', 'F3']
        """
        text = self.axes.get(axis)  # type: ignore[call-overload]
        if text is None:
            return set()
        if "-" in text:
            lo, hi = text.split("-", 1)
            if lo[:1] == hi[:1] == axis and lo[1:].isdigit() and hi[1:].isdigit():
                return {f"{axis}{k}" for k in range(int(lo[1:]), int(hi[1:]) + 1)}
        return {text}


class BootstrapSettings(_Strict):
    """§4.2 percentile bootstrap."""

    n_resamples: int = Field(1000, ge=1)
    confidence: float = Field(0.95, gt=0.0, lt=1.0)
    seed: int = 20260101


class SplitSettings(_Strict):
    """§4.1 hash split."""

    salt: str = Field("finbayes-v1-2026", min_length=1)
    #: ``"auto"`` (default): place the self-annotated anchors 10/3/1 when exactly
    #: ``sum(anchor_counts)`` (14) of them are in the gold, else leave them to the hash (noted
    #: in the details); ``true``: require them (exit 2 otherwise); ``false``: never.
    force_anchor_placement: bool | Literal["auto"] = "auto"
    anchor_counts: dict[Literal["dev", "test", "holdout"], int] = {
        "dev": 10,
        "test": 3,
        "holdout": 1,
    }


class IAASettings(_Strict):
    """§5 Cohen's kappa thresholds and the mini-review trigger."""

    window: int = Field(10, ge=2)
    mini_review_min_disagreements: int = Field(3, ge=1)
    thresholds: dict[TaskKey, float]

    @model_validator(mode="after")
    def _all_tasks(self) -> IAASettings:
        missing = [t for t in IAA_TASKS if t not in self.thresholds]
        if missing:
            raise ValueError(f"thresholds missing for tasks {missing}")
        return self


class DegradationSettings(_Strict):
    """§6 degradation detection."""

    threshold: float = Field(0.15, gt=0.0)
    phase: Literal["v1", "v2"] = "v1"
    bucket_min_cases: int = Field(3, ge=1)
    mechanism_min_cases: int = Field(4, ge=1)
    mechanism_min_buckets: int = Field(2, ge=2)
    mechanism_min_pending_buckets: int = Field(1, ge=0)
    v2_mechanism_min_cases: int = Field(5, ge=1)
    v2_mechanism_min_buckets: int = Field(3, ge=2)


class DimensionSettings(_Strict):
    """Per-dimension constants of §1 (see the comments in ``harness.yaml``)."""

    d1_open_fields_min_experts: int = Field(2, ge=1)
    d1_open_fields_min_kappa: float = Field(0.70, ge=-1.0, le=1.0)
    d1_cross_market_edge_weight: float = Field(1.5, gt=0.0)
    d1_exhaustive_ratio: float = Field(2.0, ge=1.0)
    d2_n1_uncertainty_penalty: float = Field(0.10, ge=0.0, le=1.0)
    d3_mae_max_quarters: float = Field(8.0, gt=0.0)
    d3_required_clocks: list[str] = []
    d3_sample_percent: int = Field(30, ge=0, le=100)
    d4_subiso_exact_max_nodes: int = Field(200, ge=1)
    d5_derivatives_gate_penalty: float = Field(0.10, ge=0.0, le=1.0)
    d5_fp_rate_baseline: dict[BucketKey, float] = {}
    d5_fp_penalty: float = Field(0.10, ge=0.0, le=1.0)
    d6_ece_bins: int = Field(10, ge=1)
    d6_ece_scale: float = Field(0.5, gt=0.0)
    d6_ece_threshold: float = Field(0.15, ge=0.0, le=1.0)
    d6_ece_penalty: float = Field(0.10, ge=0.0, le=1.0)
    d6_weight_gap_threshold: float = Field(0.15, ge=0.0)
    d6_tier_weights: tuple[float, float, float] = (2.0, 1.0, 0.5)
    d6_label_weights: dict[str, float] = {}
    d6_bimodal_weight_tolerance: float = Field(0.05, ge=0.0)
    d6_interval_min_experts: int = Field(2, ge=1)
    d6_interval_min_overlap: float = Field(0.8, ge=0.0, le=1.0)
    d7_base_rate_factor: float = Field(1.5, gt=0.0)
    d10_signal_classes: list[str] = Field(min_length=1)
    d10_required_axes: dict[AxisKey, str] = {}
    d10_min_cases_per_signal: int = Field(10, ge=0)
    d10_min_post_fraud: int = Field(5, ge=0)
    d10_min_healthy_controls: int = Field(15, ge=0)

    @field_validator("d6_tier_weights")
    @classmethod
    def _tiers(cls, v: tuple[float, float, float]) -> tuple[float, float, float]:
        _weight_table(list(v), "D6 tier weights", positive=True)
        return v

    @field_validator("d6_label_weights")
    @classmethod
    def _labels(cls, v: dict[str, float]) -> dict[str, float]:
        _weight_table(v, "D6 label weights", positive=True)
        return v


class HarnessConfig(_Strict):
    """``harness.yaml``: weights, buckets, bootstrap, split, IAA, degradation, dimensions."""

    weights: dict[DimensionKey, float]
    bucket_weight_overrides: dict[BucketKey, dict[DimensionKey, float]] = {}
    renormalize_retired_weights: bool = False
    aggregate_denominator: Literal["fixed", "computed"] = "fixed"
    required_dimensions: dict[BucketKey, list[DimensionKey]] = {}
    buckets: dict[BucketKey, BucketSpec]
    cross_bucket_exclude: list[BucketKey] = []
    min_cases_per_bucket: int = Field(20, ge=1)
    percentile_min_cases: int = Field(30, ge=1)
    bucket_anchor_min: int = Field(5, ge=1)
    bucket_anchor_min_kappa: float = Field(0.70, ge=-1.0, le=1.0)
    bootstrap: BootstrapSettings = BootstrapSettings()
    split: SplitSettings = SplitSettings()
    iaa: IAASettings
    degradation: DegradationSettings = DegradationSettings()
    dimensions: DimensionSettings

    @field_validator("weights")
    @classmethod
    def _weights(cls, v: dict[str, float]) -> dict[str, float]:
        _weight_table(v, "weights")
        return v

    @field_validator("bucket_weight_overrides")
    @classmethod
    def _overrides(cls, v: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for bucket, table in v.items():
            negative = [d for d, w in table.items() if w < 0]
            if negative:
                raise ValueError(f"{bucket}: weights must be >= 0; negative for {negative}")
        return v

    @model_validator(mode="after")
    def _complete(self) -> HarnessConfig:
        missing = [d for d in DIMENSION_IDS if d not in self.weights]
        if missing:
            raise ValueError(f"weights missing for {missing}")
        for bucket in BUCKET_LABELS:
            if not any(w > 0 for w in self.weights_for(bucket).values()):
                raise ValueError(f"every dimension weight of bucket {bucket} is 0")
        absent = [b for b in BUCKET_LABELS if b not in self.buckets]
        if absent:
            raise ValueError(f"buckets missing {absent}")
        return self

    def weights_for(self, bucket: str) -> dict[str, float]:
        """§2 weights in force for ``bucket``: defaults with that bucket's overrides applied."""
        table = dict(self.weights)
        table.update(self.bucket_weight_overrides.get(bucket, {}))  # type: ignore[call-overload]
        return table

    def required_for(self, bucket: str) -> frozenset[str]:
        """§3.1 must-evaluate dimensions of ``bucket`` (``required_dimensions``)."""
        return frozenset(self.required_dimensions.get(bucket, []))  # type: ignore[call-overload]

    def bucket_levels(self, bucket: str, axis: str) -> set[str]:
        """MCA positions of ``bucket`` on ``axis`` (see :meth:`BucketSpec.levels`)."""
        return self.buckets[bucket].levels(axis)  # type: ignore[index]


def load_harness_config(override: str | Path | None = None) -> HarnessConfig:
    """Load the packaged ``harness.yaml``, deep-merge ``override`` onto it and validate.

    Raises:
        FksInputError: the override is missing, not YAML, not a mapping, or a value fails
            validation (the message names the file and the dotted field).
    """
    res = resources.files("fks.configs") / "harness.yaml"
    with resources.as_file(res) as default_path:
        data = read_yaml(default_path)
    source: str | Path = "fks:configs/harness.yaml"
    if override is not None:
        over = read_yaml(override)
        if over is not None:
            if not isinstance(over, dict):
                raise FksInputError("expected a YAML mapping at top level", path=override)
            data = deep_merge(data, over)
            source = override
    try:
        return HarnessConfig.model_validate(data)
    except ValidationError as exc:
        raise input_error(exc, path=source) from None
