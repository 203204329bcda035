"""Statistics and tables of one run: the intervals file, CSV/Markdown columns, §12 cells."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from report_runs import synthetic_facts, synthetic_run

from fks.configs import load_configs
from fks.metrics.stats.clustered_bootstrap import fact_mean, relation_macro
from fks.report.inputs import load_run
from fks.report.statistics import INTERVALS_NAME, Settings, run_statistics
from fks.report.tables import run_tables, write_table


@pytest.fixture
def settings() -> Settings:
    s = Settings.from_configs(load_configs())
    return Settings(200, s.seed, s.confidence, s.coverage_modes, s.main_families,
                    s.kts_min_facts, s.eps)


@pytest.fixture
def run_and_stats(tmp_path, settings):
    run = load_run(synthetic_run(tmp_path, seed=3))
    return run, run_statistics(run, settings)


def test_intervals_file_has_every_headline_figure_in_both_coverage_modes(run_and_stats,
                                                                         settings):
    run, stats = run_and_stats
    doc = json.loads((run.metrics_dir / INTERVALS_NAME).read_text())
    assert set(doc["coverage_modes"]) == {"complete_family", "full_set"}
    n_complete = int(run.facts.complete.sum())
    for mode, n in (("complete_family", n_complete), ("full_set", len(run.facts))):
        block = doc["coverage_modes"][mode]["subsets"]["all"]
        assert block["n_facts"] == n
        for name in ("anchor_accuracy", "bcs", "bes", "scr", "swr", "sar", "ur", "iss",
                     "kts_geo", "kts_geo_raw_spearman", "kts_id", "kts", "bcs_relation_macro"):
            rec = block["metrics"][name]
            assert {"point", "low", "high", "n_resamples", "seed", "n_relations", "n_facts",
                    "coverage_mode"} <= set(rec), name
            assert rec["n_resamples"] == 200 and rec["seed"] == settings.seed
            assert rec["coverage_mode"] == mode
            assert rec["low"] <= rec["high"]
        assert set(block["iss_per_layer"]) == {"2", "3"}
        # the point estimates are the plain fact mean / relation macro of the per-fact file
        mask = run.facts.coverage_mask(mode)
        assert block["metrics"]["bcs"]["point"] == pytest.approx(
            fact_mean(run.facts.values["bcs"][mask]))
        assert block["metrics"]["bcs_relation_macro"]["point"] == pytest.approx(
            relation_macro(run.facts.values["bcs"][mask], run.facts.relation[mask]))
    # real and copy subsets partition the facts
    subs = doc["coverage_modes"]["full_set"]["subsets"]
    assert subs["real"]["n_facts"] + subs["copy"]["n_facts"] == len(run.facts)


def test_cached_statistics_are_reused_and_invalidated_by_a_changed_input(run_and_stats,
                                                                        settings):
    run, stats = run_and_stats
    path = run.metrics_dir / INTERVALS_NAME
    before = path.stat().st_mtime_ns
    again = run_statistics(load_run(run.run_dir), settings)
    assert path.stat().st_mtime_ns == before  # read back, not rewritten
    assert again.document["fingerprint"] == stats.document["fingerprint"]
    key = ("full_set", "all")
    assert np.array_equal(again.estimates[key]["kts"].replicates,
                          stats.estimates[key]["kts"].replicates, equal_nan=True)
    assert set(again.estimates) == set(stats.estimates)
    ids, ident = again.fact_identity[key]
    assert np.array_equal(ids, stats.fact_identity[key][0])
    assert np.array_equal(ident, stats.fact_identity[key][1], equal_nan=True)
    path = run.metrics_dir / "behavioral_per_fact.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    rows[0]["bcs"] = 0.123
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    changed = run_statistics(load_run(run.run_dir), settings)
    assert changed.document["fingerprint"] != stats.document["fingerprint"]
    assert path.stat().st_mtime_ns != before
    assert changed.document["coverage_modes"]["full_set"]["subsets"]["all"]["metrics"]["bcs"][
        "point"] != stats.metric("full_set", "all", "bcs")["point"]


def test_tables_are_written_with_the_expected_columns(run_and_stats, settings, tmp_path):
    run, stats = run_and_stats
    tables = {t.name: t for t in run_tables(run, stats, settings, tau_b=0.8)}
    assert list(tables) == ["main", "readings", "real_copy", "per_relation", "behavior_groups",
                            "behavior_breakdown", "answer_coverage", "kts_pairs",
                            "joint_quadrants", "joint_correlations"]
    # (the readings table needs the model summaries, which this synthetic run lacks; see
    # tests/metrics/internal/test_sanity_heard.py)
    out = tmp_path / "tables"
    for t in tables.values():
        write_table(t, out)
    with (out / "main.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert rows[0].keys() >= {"model", "coverage_mode", "aggregation", "n_facts", "bcs",
                              "bcs_low", "bcs_high", "kts", "kts_low", "kts_high", "iss"}
    assert {(r["coverage_mode"], r["aggregation"]) for r in rows} == {
        (m, a) for m in ("complete_family", "full_set") for a in ("fact_mean",
                                                                   "relation_macro")}
    md = (out / "main.md").read_text()
    assert "| model | coverage_mode | aggregation |" in md and "BCS" in md and " [" in md
    with (out / "kts_pairs.csv").open() as fh:
        pairs = list(csv.DictReader(fh))
    assert len(pairs) == 2 * 10  # 10 family pairs in each coverage mode
    assert {"pair", "shared_facts", "kts_geo", "kts_id", "kts", "kts_low"} <= pairs[0].keys()
    with (out / "behavior_groups.csv").open() as fh:
        groups = list(csv.DictReader(fh))
    assert [g["behavior_group"] for g in groups[:4]] == ["Stable Correct", "Stable Wrong",
                                                         "Stable Abstention", "Unstable"]
    assert sum(int(g["facts"]) for g in groups if g["coverage_mode"] == "full_set") == len(
        run.facts)
    with (out / "per_relation.csv").open() as fh:
        per_rel = [r for r in csv.DictReader(fh) if r["coverage_mode"] == "full_set"]
    assert [r["relation"] for r in per_rel] == ["rel0", "rel1", "rel2"]
    assert all(r["kts_id"] != "" for r in per_rel)


def test_quadrant_counts_sum_to_the_fact_count(run_and_stats, settings):
    run, stats = run_and_stats
    t = {t.name: t for t in run_tables(run, stats, settings, tau_b=0.8)}
    quad = t["joint_quadrants"].rows
    for mode in ("complete_family", "full_set"):
        cells = [r for r in quad if r["coverage_mode"] == mode]
        n = int(run.facts.coverage_mask(mode).sum())
        assert sum(r["facts"] for r in cells) == n
        assert sum(r["share"] for r in cells) == pytest.approx(1.0)
        # the BCS split agrees with the threshold
        high = sum(r["facts"] for r in cells if r["bcs"] == "high")
        assert high == int((run.facts.values["bcs"][run.facts.coverage_mask(mode)] >= 0.8).sum())
    corr = t["joint_correlations"].rows
    bcs_iss = next(r for r in corr if r["coverage_mode"] == "full_set" and r["x"] == "bcs"
                   and r["y"] == "iss")
    assert bcs_iss["n_facts"] == len(run.facts) and -1 <= bcs_iss["spearman"] <= 1


def test_quadrants_count_facts_without_internal_metrics_as_na(tmp_path, settings):
    run = load_run(synthetic_run(tmp_path, internal=False, extras=False))
    stats = run_statistics(run, settings)
    t = {t.name: t for t in run_tables(run, stats, settings, tau_b=0.8)}
    cells = [r for r in t["joint_quadrants"].rows if r["coverage_mode"] == "full_set"]
    assert {r["iss"] for r in cells} == {"n/a"} and {r["kts"] for r in cells} == {"n/a"}
    assert sum(r["facts"] for r in cells) == len(synthetic_facts())
    assert t["kts_pairs"].rows == [] and "not available" in t["kts_pairs"].note


def test_without_centroids_kts_points_come_from_the_internal_summary(tmp_path, settings):
    run_dir = synthetic_run(tmp_path)
    summary = {"headline": {"reading": "with_anchor"}, "selections": {
        f"with_anchor/{m}/all": {"kts": 0.61, "kts_geo": 0.7, "kts_id": 0.55,
                                 "kts_geo_raw_spearman": 0.4,
                                 "family_pairs": {"anchor__format": {"shared_facts": 30,
                                                                     "kts": 0.66}}}
        for m in ("complete_family", "full_set")}}
    (run_dir / "metrics" / "kts_model_summary.json").write_text(json.dumps(summary))
    for p in (run_dir / "metrics" / "hidden_family_centroids").iterdir():
        p.unlink()
    run = load_run(run_dir)
    assert run.centroids is None
    t = {t.name: t for t in run_tables(run, run_statistics(run, settings), settings,
                                       tau_b=0.8)}
    main = t["main"].rows[0]
    assert main["kts"] == 0.61 and main["kts_low"] is None and main["bcs_low"] is not None
    pair = t["kts_pairs"].rows[0]
    assert pair["pair"] == "anchor__format" and pair["kts"] == 0.66 and pair["kts_low"] is None
