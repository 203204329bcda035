"""§8.2 report models and §8.3 rules; the input records' validation."""

from __future__ import annotations

import pytest
from harness_examples import full_case, full_gold
from pydantic import ValidationError

from fks.evalharness.inputs import CaseRecord, GoldRecord
from fks.evalharness.schema import (
    BatchReport,
    BucketReport,
    CaseScore,
    DegradationFlag,
    DimensionScore,
    IAAReport,
)


def dim(d="D1", score=0.5, **kw):
    return DimensionScore(dimension_id=d, raw_score=score, **kw)


def bucket(label="B1", flag="ok", **kw):
    base = dict(
        bucket_label=label,
        case_count=25,
        median_score=0.5,
        percentile_bandwidth=0.1,
        dimension_medians={"D1": 0.5},
        sample_quality_flag=flag,
    )
    return BucketReport(**(base | kw))


@pytest.mark.parametrize(
    "model, data",
    [
        (DimensionScore, {"dimension_id": "D1", "raw_score": 0.5, "extra": 1}),
        (IAAReport, {"task_id": "A", "kappa_rolling_10": 0.5, "disagreement_rate": 0.1,
                     "triggered_mini_review": False, "note": "x"}),
        (BatchReport, {"split": "dev", "bucket_reports": {}, "surprise": []}),
    ],
)
def test_extra_fields_rejected(model, data):
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        model.model_validate(data)


@pytest.mark.parametrize(
    "build",
    [
        lambda: dim(score=1.2),
        lambda: dim(score=-0.1),
        lambda: dim(bucket_percentile=1.5),
        lambda: dim(bandwidth=-0.01),
        lambda: DimensionScore(dimension_id="D12", raw_score=0.5),
        lambda: CaseScore(case_id="c", bucket_label="B1", split="dev", dimensions={},
                          aggregate_score=1.1),
        lambda: CaseScore(case_id="c", bucket_label="B8", split="dev", dimensions={},
                          aggregate_score=0.5),
        lambda: CaseScore(case_id="c", bucket_label="B1", split="train", dimensions={},
                          aggregate_score=0.5),
        lambda: CaseScore(case_id="c", bucket_label="B1", split="dev", dimensions={},
                          aggregate_score=0.5, iaa_kappa=-1.5),
        lambda: IAAReport(task_id="A", kappa_rolling_10=1.2, disagreement_rate=0.0,
                          triggered_mini_review=False),
        lambda: IAAReport(task_id="E", kappa_rolling_10=0.2, disagreement_rate=0.0,
                          triggered_mini_review=False),
        lambda: IAAReport(task_id="A", kappa_rolling_10=0.2, disagreement_rate=1.5,
                          triggered_mini_review=False),
        lambda: bucket(case_count=-1),
        lambda: bucket(median_score=2.0),
        lambda: bucket(dimension_medians={"D1": 1.5}),
    ],
)
def test_out_of_range_values_rejected(build):
    with pytest.raises(ValidationError):
        build()


def test_none_score_needs_a_reason_and_no_percentile():
    with pytest.raises(ValidationError, match="no flag says why"):
        dim(score=None)
    with pytest.raises(ValidationError, match="no percentile"):
        dim(score=None, gaming_flags=["d1_not_annotated"], bucket_percentile=0.5)
    assert dim(score=None, gaming_flags=["d1_not_annotated"]).raw_score is None


def test_d9_rules():
    ok = dim("D9", None, gaming_flags=["d9_single_bucket_skipped"])
    assert ok.raw_score is None
    with pytest.raises(ValidationError, match="exactly when"):
        dim("D9", None, gaming_flags=["other"])
    with pytest.raises(ValidationError, match="exactly when"):
        dim("D9", 0.5, gaming_flags=["d9_single_bucket_skipped"])
    with pytest.raises(ValidationError, match="compared_buckets"):
        dim("D9", 0.5, components={"compared_buckets": ["B1"]})
    assert dim("D9", 0.5, components={"compared_buckets": ["B1", "B6"]}).raw_score == 0.5
    with pytest.raises(ValidationError, match="D9 only"):
        dim("D1", None, gaming_flags=["d9_single_bucket_skipped"])


def test_d11_only_in_b1_to_b3():
    d11 = {"D11": dim("D11", 0.4)}
    assert CaseScore(case_id="c", bucket_label="B2", split="dev", dimensions=d11,
                     aggregate_score=0.4)
    with pytest.raises(ValidationError, match="B1-B3"):
        CaseScore(case_id="c", bucket_label="B4", split="dev", dimensions=d11, aggregate_score=0.4)
    skipped = {"D11": dim("D11", None, gaming_flags=["d11_bucket_not_evaluated"])}
    assert CaseScore(case_id="c", bucket_label="B4", split="dev", dimensions=skipped,
                     aggregate_score=0.4)


def test_ece_only_from_d6():
    with pytest.raises(ValidationError, match="D6 is absent"):
        CaseScore(case_id="c", bucket_label="B1", split="dev", dimensions={}, aggregate_score=0.5,
                  ece=0.1)
    d6 = {"D6": dim("D6", 0.5, components={"ece": 0.2})}
    with pytest.raises(ValidationError, match="must equal"):
        CaseScore(case_id="c", bucket_label="B1", split="dev", dimensions=d6, aggregate_score=0.5,
                  ece=0.1)
    assert CaseScore(case_id="c", bucket_label="B1", split="dev", dimensions=d6,
                     aggregate_score=0.5, ece=0.2).ece == 0.2


def test_dimension_keys_must_match():
    with pytest.raises(ValidationError, match="holds D2"):
        CaseScore(case_id="c", bucket_label="B1", split="dev", dimensions={"D1": dim("D2")},
                  aggregate_score=0.5)
    with pytest.raises(ValidationError, match="holds B2"):
        BatchReport(split="dev", bucket_reports={"B1": bucket("B2")})


def test_b7_never_ok():
    with pytest.raises(ValidationError, match="B7"):
        bucket("B7", "ok")
    assert bucket("B7", "insufficient").bucket_label == "B7"


def test_degradation_flag_consistency():
    f = DegradationFlag(bucket_label="B1", dimension_id="D3", baseline_score=0.8,
                        current_score=0.6, delta_ratio=0.25, severity="bucket_level")
    assert f.delta_ratio == 0.25
    with pytest.raises(ValidationError, match="delta_ratio"):
        DegradationFlag(bucket_label="B1", dimension_id="D3", baseline_score=0.8,
                        current_score=0.6, delta_ratio=0.3, severity="bucket_level")
    with pytest.raises(ValidationError):
        DegradationFlag(bucket_label="B1", dimension_id="D3", baseline_score=0.0,
                        current_score=0.0, delta_ratio=0.0, severity="bucket_level")
    with pytest.raises(ValidationError, match="unreported bucket"):
        BatchReport(split="dev", bucket_reports={"B2": bucket("B2")}, degradation_flags=[f])


def test_contested_points_need_a_review():
    with pytest.raises(ValidationError, match="not triggered"):
        IAAReport(task_id="B", kappa_rolling_10=0.3, disagreement_rate=0.4,
                  triggered_mini_review=False, contested_points=[{"case_id": "x"}])


# ---------------------------------------------------------------------------- input records
def test_full_example_validates():
    assert CaseRecord.model_validate(full_case()).case_id == "C1"
    assert GoldRecord.model_validate(full_gold()).bucket_label == "B1"


def test_case_may_not_report_its_bucket():
    row = full_case() | {"bucket_label": "B1"}
    with pytest.raises(ValidationError, match="bucket_label"):
        CaseRecord.model_validate(row)


@pytest.mark.parametrize(
    "mutate, loc",
    [
        (lambda r: r["result"]["causal_graph"]["edges"][0].update(target="zz"),
         "result.causal_graph"),
        (lambda r: r["result"]["posterior"]["mode_a"].update(weight=1.5),
         "result.posterior.mode_a.weight"),
        (lambda r: r["result"]["s1"].update(s1_mode=["e-unknown"]), "result.s1.s1_mode.0"),
        (lambda r: r["result"]["applicability_flags"]["valuation"].update(level="maybe"),
         "result.applicability_flags.valuation.level"),
        (lambda r: r["harness"]["risk_budget"]["budget"].update(equity=-1.0),
         "harness.risk_budget"),
        (lambda r: r["result"]["s1"].update(coupling_strength=float("nan")),
         "result.s1.coupling_strength"),
        (lambda r: r["result"]["causal_graph"]["nodes"].append({"id": "n1", "label": "x"}),
         "result.causal_graph"),
    ],
)
def test_case_validation_errors_name_the_field(mutate, loc):
    row = full_case()
    mutate(row)
    with pytest.raises(ValidationError) as err:
        CaseRecord.model_validate(row)
    assert ".".join(str(x) for x in err.value.errors()[0]["loc"]).startswith(loc)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda r: r["result"]["s1"].update(external_sources=[]), "at least 1"),
        (lambda r: r["result"]["posterior"].update(expert_intervals=[[0.5, 0.1]]), "low"),
        (lambda r: r["result"]["applicability_flags"]["valuation"]["values"].update(fair_pe=0),
         "is 0"),
        (lambda r: r["harness"]["risk_signals"].update(healthy_control=True), "healthy"),
        (lambda r: r.update(bucket_label="B5"), "bucket_label"),
    ],
)
def test_gold_validation(mutate, match):
    row = full_gold()
    mutate(row)
    with pytest.raises(ValidationError, match=match):
        GoldRecord.model_validate(row)
