"""The fact sets the spec defines (issue 13 point 3): KTS per pair on D_t ∩ D_t', one
complete-family definition for the behavioural and internal paths, both readings."""

from __future__ import annotations

import json

import numpy as np
from internal_synth import configs, main_queries, make_bench, make_run

from fks.metrics.behavior import JudgedColumns, behavior_summary
from fks.metrics.internal import run_internal_metrics
from fks.metrics.internal.coverage import complete_family_mask, families_absent
from fks.metrics.internal.synthetic import published_counts

FAMS = ["anchor", "paraphrase", "format", "context", "multilingual"]


def _families_of(bench):
    out: dict[str, set[str]] = {}
    for q in main_queries(bench):
        out.setdefault(q.fact_id, set()).add(q.condition_family)
    return out


def test_kts_headline_pairs_use_their_own_shared_facts(tmp_path):
    bench = make_bench(tmp_path)  # ragged: some facts lack context or multilingual
    run = make_run(tmp_path, bench, signal=1.0)
    run_internal_metrics(run, benchmark=bench, configs=configs(tmp_path))
    kts = json.loads((run / "metrics" / "kts_model_summary.json").read_text())
    fams = _families_of(bench)
    complete = sum(fams.get(f.fact_id, set()) >= set(FAMS) for f in bench.facts)
    larger = 0
    for name, pair in kts["family_pairs"].items():
        a, b = name.split("__")
        shared = sum({a, b} <= fams.get(f.fact_id, set()) for f in bench.facts)
        assert pair["shared_facts"] == shared, name  # D_t ∩ D_t', not D∩
        larger += shared > complete
    assert larger > 0
    assert kts["kts_headline"]["selection"] == "with_anchor/full_set/all"
    assert kts["kts"] == kts["selections"]["with_anchor/full_set/all"]["kts"]
    # D∩ stays available as the other, labelled coverage mode
    cf = kts["selections"]["with_anchor/complete_family/all"]["family_pairs"]
    assert {p["shared_facts"] for p in cf.values()} == {complete}
    assert "D∩" in kts["coverage_labels"]["complete_family"]
    rows = kts["tables"]["by_pair"]
    assert {r["coverage"] for r in rows} == {"complete_family", "full_set"}
    assert {r["reading"] for r in rows} == {"with_anchor", "without_anchor"}


def test_both_readings_in_the_tables(tmp_path):
    bench = make_bench(tmp_path)
    run = make_run(tmp_path, bench, signal=1.0)
    run_internal_metrics(run, benchmark=bench, configs=configs(tmp_path))
    kts = json.loads((run / "metrics" / "kts_model_summary.json").read_text())
    by_reading = {r["reading"]: r for r in kts["tables"]["by_reading"]}
    assert set(by_reading) == {"with_anchor", "without_anchor"}
    assert by_reading["with_anchor"]["default"] and not by_reading["without_anchor"]["default"]
    for r in by_reading.values():
        assert r["full_set"]["iss"] is not None and r["complete_family"]["kts"] is not None
    assert by_reading["without_anchor"]["families"] == FAMS[1:]


def _no_multilingual_bench(tmp_path):
    counts = published_counts(40, seed=2)
    counts.pop("multilingual")
    return make_bench(tmp_path, sizes=(20, 20), counts=counts)


def test_complete_family_is_one_set_for_both_paths(tmp_path):
    # no multilingual queries at all: the complete-family set is the facts having every
    # family the run has, in the behavioural and the internal path alike (it was 4 facts
    # behaviourally and 0 internally)
    bench = _no_multilingual_bench(tmp_path)
    run = make_run(tmp_path, bench, signal=1.0)
    res = run_internal_metrics(run, benchmark=bench, configs=configs(tmp_path))
    fams = _families_of(bench)
    present = ["anchor", "paraphrase", "format", "context"]
    expected = sorted(f.fact_id for f in bench.facts if fams.get(f.fact_id, set()) >= set(present))
    assert 0 < len(expected) < len(bench.facts)
    assert res["iss"]["families_absent"] == ["multilingual"]
    internal = res["iss"]["selections"]["with_anchor/complete_family/all"]["n_facts"]
    rows = [json.loads(x) for x in (run / "metrics" / "iss_per_fact.jsonl").read_text()
            .splitlines()]
    assert sorted(r["fact_id"] for r in rows if r["complete_family"]) == expected
    assert internal == len(expected)
    # the behavioural path on records of the same queries
    records = [{"model": "m", "query_id": q.query_id, "fact_id": q.fact_id,
                "relation": q.relation, "condition_family": q.condition_family,
                "language": q.language, "cluster_id": "c1", "status": "ANSWER",
                "correctness": "CORRECT", "use_for_main_forward": True,
                "use_for_reverse_analysis": False, "use_for_recognition_analysis": False,
                "answer_in_subject_surface": q.answer_in_subject_surface, "judge": "t"}
               for q in main_queries(bench)]
    summary, facts = behavior_summary(JudgedColumns.from_records(records), FAMS, tau_b=0.8)
    fb = facts["with_anchor"].fb
    beh = fb.fact_ids[fb.complete(list(fb.families))].tolist()
    assert sorted(beh) == expected
    shared = complete_family_mask(fb.has_family, fb.families, FAMS)
    assert sorted(fb.fact_ids[shared].tolist()) == expected
    assert families_absent(fb.families, FAMS) == ["multilingual"]


def test_complete_family_mask_rules():
    has = np.array([[1, 1, 0], [1, 1, 1], [0, 1, 1]], dtype=bool)
    assert complete_family_mask(has, ["a", "b", "c"], ["a", "b", "c"]).tolist() == \
        [False, True, False]
    assert complete_family_mask(has, ["a", "b", "c"], ["a", "b", "x"]).tolist() == \
        [True, True, False]
    assert not complete_family_mask(has, ["a", "b", "c"], ["x"]).any()
    assert families_absent(["a", "b"], ["b", "x", "a", "y"]) == ["x", "y"]
