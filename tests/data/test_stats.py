"""Dataset statistics: counts from rows, roles and coverage from the rows' own booleans."""

from __future__ import annotations

import json
from collections import defaultdict

from fks.data.load import load_benchmark
from fks.data.stats import dataset_statistics, render_statistics
from fks.log import console
from tiny_benchmark import tiny_benchmark_rows, write_benchmark


def _expected_from_rows(facts, queries):
    fam_facts = defaultdict(set)
    for q in queries:
        fam_facts[q["condition_family"]].add(q["fact_id"])
    return fam_facts


def test_counts_match_rows(tiny_benchmark_dir):
    facts, queries = tiny_benchmark_rows()
    stats = dataset_statistics(load_benchmark(tiny_benchmark_dir))
    fam_facts = _expected_from_rows(facts, queries)
    assert stats["n_facts"] == len(facts) and stats["n_queries"] == len(queries)
    for fam, row in stats["families"].items():
        assert row["queries"] == sum(q["condition_family"] == fam for q in queries)
        assert row["facts"] == len(fam_facts[fam])
    assert stats["families"]["reverse"]["role"] == "reverse"
    assert stats["families"]["recognition"]["role"] == "recognition"
    assert stats["families"]["reverse_illposed"]["role"] == "diagnostic"
    main = stats["coverage"]["main_families"]
    assert main == ["anchor", "paraphrase", "format", "context", "multilingual"]
    complete = [f["fact_id"] for f in facts if all(f["fact_id"] in fam_facts[m] for m in main)]
    assert stats["coverage"]["complete_family_facts"] == len(complete) == 3
    assert stats["coverage"]["full_set_facts"] == 4
    assert stats["copy_answerable"] == {
        "facts": 1, "share": 0.25,
        "queries": sum(q["answer_in_subject_surface"] for q in queries),
        "unflagged_main_queries_with_gold": 0, "unflagged_main_queries_with_gold_share": 0.0}
    assert stats["relations"]["manufacturer"]["copy_share"] == 1.0
    assert stats["spec_6_2"] == {"facts": 1, "relations": ["manufacturer"]}
    flags = stats["flags"]
    assert flags["use_for_reverse_analysis"] == 1 and flags["none"] == 1
    assert sum(flags.values()) == len(queries)
    assert stats["relations"]["capital"]["facts"] == 3
    assert stats["languages"]["fr"] == {"queries": 3, "facts": 3}
    json.dumps(stats, sort_keys=True)  # JSON-able


def test_roles_follow_row_booleans(tmp_path):
    """Coverage follows each row's flags, not a hard-coded family list."""
    facts, queries = tiny_benchmark_rows()
    for q in queries:
        if q["condition_family"] == "context":
            q["use_for_main_forward"] = False
    stats = dataset_statistics(load_benchmark(write_benchmark(tmp_path / "b", facts, queries)))
    assert "context" not in stats["coverage"]["main_families"]
    assert stats["families"]["context"]["role"] == "diagnostic"
    # fact_000004 lacked context and multilingual; now only multilingual counts
    assert stats["coverage"]["complete_family_facts"] == 3


def test_render(tiny_benchmark_dir):
    stats = dataset_statistics(load_benchmark(tiny_benchmark_dir))
    stats["build"] = {"candidates": 10, "selected": 4, "dropped": {"duplicate_triples": 2},
                      "context_guard_dropped": {"context": 1}}
    with console.capture() as cap:
        render_statistics(stats)
    text = " ".join(cap.get().split())
    for needle in ("reverse_illposed", "manufacturer", "complete-family", "duplicate_triples 2",
                   "D1 guard dropped 1"):
        assert needle in text
