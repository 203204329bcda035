"""The packaged harness.yaml, its loader and overrides."""

from __future__ import annotations

import pytest

from fks.errors import FksInputError
from fks.evalharness.config import BucketSpec, load_harness_config


def test_packaged_defaults_follow_the_spec():
    cfg = load_harness_config()
    assert [cfg.weights[f"D{i}"] for i in range(1, 12)] == [0.10] * 7 + [0.08] * 3 + [0.06]
    assert cfg.renormalize_retired_weights is False
    assert cfg.cross_bucket_exclude == ["B7"]
    assert cfg.split.salt == "finbayes-v1-2026"
    assert cfg.bootstrap.n_resamples == 1000 and cfg.bootstrap.confidence == 0.95
    assert cfg.degradation.threshold == 0.15
    assert cfg.bucket_levels("B2", "F") == {"F1", "F2"}
    assert cfg.bucket_levels("B7", "D") == {"D2", "D3"}
    assert cfg.bucket_levels("B3", "L") == {"non-traditional"}


def test_override_is_deep_merged(tmp_path):
    path = tmp_path / "h.yaml"
    path.write_text("weights: {D1: 0.2}\nrenormalize_retired_weights: true\n")
    cfg = load_harness_config(path)
    assert cfg.weights["D1"] == 0.2 and cfg.weights["D2"] == 0.10  # the rest kept
    assert cfg.renormalize_retired_weights is True


@pytest.mark.parametrize(
    "text, field",
    [
        ("weights: {D1: -0.1}\n", None),
        ("bootstrap: {confidence: 1.5}\n", "bootstrap.confidence"),
        ("iaa: {thresholds: {A: 0.6}}\nsurprise: 1\n", "surprise"),
        ("- a list\n", None),
    ],
)
def test_bad_override_names_file_and_field(tmp_path, text, field):
    path = tmp_path / "h.yaml"
    path.write_text(text)
    with pytest.raises(FksInputError) as err:
        load_harness_config(path)
    assert err.value.path == str(path)
    if field:
        assert err.value.field == field


def test_bucket_spec_levels():
    assert BucketSpec(axes={"N": "N2-N3"}).levels("N") == {"N2", "N3"}
    assert BucketSpec(axes={"N": "N1"}).levels("N") == {"N1"}
    assert BucketSpec(axes={}).levels("N") == set()
