"""The report on real internal-metrics outputs (synthetic hidden states, planted structure).

The KTS point the bootstrap recomputes from the stored float16 centroids must agree with the
internal metrics' own ``kts_model_summary.json`` (computed in float64) up to the storage
precision, and the ISS figures must be the same numbers.
"""

from __future__ import annotations

import json

import pytest

from fks.configs import load_configs
from fks.metrics.internal import run_internal_metrics
from fks.metrics.internal.synthetic import (
    planted_states,
    published_counts,
    write_synthetic_benchmark,
    write_synthetic_jlens,
    write_synthetic_store,
)
from fks.report.build import build_report
from fks.report.inputs import load_run
from fks.report.statistics import Settings, run_statistics


@pytest.fixture(scope="module")
def internal_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("internal")
    sizes = (14, 16, 10)
    bench = write_synthetic_benchmark(root / "bench", sizes, published_counts(sum(sizes), seed=1))
    run = root / "run"
    write_synthetic_store(run, bench, planted_states(bench, d=12, n_layers=5, seed=0),
                          d=12, n_layers=5, model="model-x")
    write_synthetic_jlens(run, d=12, layers=range(5), n_layers=5, seed=0)
    run_internal_metrics(run, benchmark=bench, configs=load_configs())
    return run


def test_kts_and_iss_points_agree_with_the_internal_metrics(internal_run):
    cfg = load_configs()
    s = Settings.from_configs(cfg)
    settings = Settings(150, s.seed, s.confidence, s.coverage_modes, s.main_families,
                        s.kts_min_facts, s.eps)
    stats = run_statistics(load_run(internal_run), settings)
    kts = json.loads((internal_run / "metrics" / "kts_model_summary.json").read_text())
    iss = json.loads((internal_run / "metrics" / "iss_model_summary.json").read_text())
    reading = kts["headline"]["reading"]
    for mode in s.coverage_modes:
        got = stats.document["coverage_modes"][mode]["subsets"]["all"]["metrics"]
        want = kts["selections"][f"{reading}/{mode}/all"]
        for key in ("kts", "kts_geo", "kts_id", "kts_geo_raw_spearman"):
            assert got[key]["point"] == pytest.approx(want[key], abs=2e-3), (mode, key)
            assert got[key]["low"] <= got[key]["point"] <= got[key]["high"]
        for pair, v in want["family_pairs"].items():
            assert got[f"kts[{pair}]"]["point"] == pytest.approx(v["kts"], abs=2e-3)
        want_iss = iss["selections"][f"{reading}/{mode}/all"]["iss"]
        assert got["iss"]["point"] == pytest.approx(want_iss, abs=1e-9)


def test_report_shows_the_real_sanity_checks(internal_run, tmp_path):
    d = tmp_path / "cfg"
    d.mkdir()
    (d / "metrics.yaml").write_text("bootstrap: {n_resamples: 50}\n")
    out = build_report([internal_run], configs=load_configs([d / "metrics.yaml"]),
                       out=tmp_path / "r.html")
    html = out.read_text()
    sanity = json.loads((internal_run / "metrics" / "sanity_checks.json").read_text())
    for name, check in sanity["checks"].items():
        assert name in html
        assert f'class="{"na" if check["status"] == "not_applicable" else check["status"]}"' \
            in html
    assert "not run: no sanity_checks.json" not in html
    assert "not run: no behavioural metrics" in html  # behaviour did not run here
