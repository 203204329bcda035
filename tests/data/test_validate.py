"""One test per hard gate of ``fks data validate``: corrupt one thing, that gate (only) fails.

Each corruption is applied to a fresh copy of ``tiny_benchmark_rows()`` (which passes every
gate), checked through :func:`validate_benchmark` and through the command line (exit 2, a
one-line message naming file, line, field and gate, and the report file written).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from fks.cli import main
from fks.configs import load_configs
from fks.data.validate import GATES, MAX_STORED_ERRORS, run_validation, validate_benchmark
from fks.errors import FksInputError
from tiny_benchmark import tiny_benchmark_rows, write_benchmark

FACTS_FILE = "benchmark_facts_4.jsonl"
QUERIES_FILE = "evaluation_queries_28.jsonl"


@pytest.fixture(scope="module")
def configs():
    return load_configs()


def _find(queries: list[dict], fact_id: str, family: str, nth: int = 0) -> int:
    """Index of the ``nth`` query of ``fact_id`` in ``family``."""
    hits = [i for i, q in enumerate(queries)
            if q["fact_id"] == fact_id and q["condition_family"] == family]
    return hits[nth]


def _failed(report: dict) -> set[str]:
    return {g for g, e in report["gates"].items() if not e["passed"]}


# ------------------------------------------------------------------------- corruptions
# Each returns (gate, file name, 1-based line or None, field or None) after corrupting.
Corruption = Callable[[list[dict], list[dict]], tuple[str, str, int | None, str | None]]


def bad_language(facts, queries):
    i = _find(queries, "fact_000002", "paraphrase")
    queries[i]["language"] = "xx"
    return "schema", QUERIES_FILE, i + 1, "language"


def bad_fact_field(facts, queries):
    facts[2]["subject"]["canonical"] = ""
    return "schema", FACTS_FILE, 3, "subject.canonical"


def duplicate_query_id(facts, queries):
    queries[5]["query_id"] = queries[4]["query_id"]
    return "unique_ids", QUERIES_FILE, 6, "query_id"


def unknown_fact(facts, queries):
    i = _find(queries, "fact_000001", "paraphrase", nth=1)
    queries[i]["fact_id"] = "fact_000099"
    return "query_fact_exists", QUERIES_FILE, i + 1, "fact_id"


def wrong_relation(facts, queries):
    i = _find(queries, "fact_000002", "format")
    queries[i]["relation"] = "manufacturer"
    return "query_fact_exists", QUERIES_FILE, i + 1, "relation"


def flag_off_registry(facts, queries):
    i = _find(queries, "fact_000003", "recognition")
    queries[i]["use_for_main_forward"] = True
    return "flags_match_registry", QUERIES_FILE, i + 1, "use_for_main_forward"


def slot_off_registry(facts, queries):
    i = _find(queries, "fact_000001", "reverse")
    queries[i]["target_slot"] = "object"
    return "flags_match_registry", QUERIES_FILE, i + 1, "target_slot"


def missing_anchor(facts, queries):
    # anchor and paraphrase derive the same flags, so only the anchor count changes
    i = _find(queries, "fact_000002", "anchor")
    queries[i]["condition_family"] = "paraphrase"
    return "one_anchor_per_fact", FACTS_FILE, 2, "fact_id"


def second_anchor(facts, queries):
    i = _find(queries, "fact_000001", "paraphrase")
    queries[i]["condition_family"] = "anchor"
    return "one_anchor_per_fact", QUERIES_FILE, i + 1, "condition_family"


def context_leak(facts, queries):
    i = _find(queries, "fact_000001", "context")
    queries[i]["query"] = "Paris is a large city. What is the capital of France?"
    return "context_guard", QUERIES_FILE, i + 1, "query"


def distractor_leak(facts, queries):
    # D1's published case: the gold 'India'-style leak sits inside a longer distractor word
    i = _find(queries, "fact_000002", "context")
    queries[i]["context_distractor"] = "Do not confuse the Berliner Zeitung with a city."
    return "context_guard", QUERIES_FILE, i + 1, "context_distractor"


def functional_conflict(facts, queries):
    facts[1]["subject"] = copy.deepcopy(facts[0]["subject"])  # France -> Berlin as well
    return "functional_single_valued", FACTS_FILE, 2, "object"


def fact_flag_wrong(facts, queries):
    facts[3]["answer_in_subject_surface"] = False  # Airbus is in 'Airbus A320'
    return "answer_in_subject_surface", FACTS_FILE, 4, "answer_in_subject_surface"


def query_flag_wrong(facts, queries):
    i = _find(queries, "fact_000003", "format")
    queries[i]["answer_in_subject_surface"] = True
    return "answer_in_subject_surface", QUERIES_FILE, i + 1, "answer_in_subject_surface"


def options_without_gold(facts, queries):
    i = _find(queries, "fact_000002", "recognition")
    queries[i]["options"] = ["Paris", "Tokyo"]
    return "query_targets", QUERIES_FILE, i + 1, "options"


def reverse_targets_object(facts, queries):
    i = _find(queries, "fact_000001", "reverse")
    queries[i]["gold_canonical"] = "Paris"
    queries[i]["gold_aliases"] = ["Paris"]
    return "query_targets", QUERIES_FILE, i + 1, "gold_canonical"


def anchor_gold_not_the_object(facts, queries):
    """Issue 28: a gold that is not its fact's object was accepted (exit 0)."""
    i = _find(queries, "fact_000002", "anchor")
    queries[i]["gold_canonical"] = "Cairo"
    queries[i]["gold_aliases"] = ["Cairo"]
    return "query_targets", QUERIES_FILE, i + 1, "gold_canonical"


def gold_alias_not_the_object(facts, queries):
    i = _find(queries, "fact_000001", "paraphrase", 1)
    queries[i]["gold_aliases"] = [*queries[i]["gold_aliases"], "Lyon"]
    last = len(queries[i]["gold_aliases"]) - 1
    return "query_targets", QUERIES_FILE, i + 1, f"gold_aliases.{last}"


CORRUPTIONS: list[Corruption] = [
    bad_language, bad_fact_field, duplicate_query_id, unknown_fact, wrong_relation,
    flag_off_registry, slot_off_registry, missing_anchor, second_anchor, context_leak,
    distractor_leak, functional_conflict, fact_flag_wrong, query_flag_wrong,
    options_without_gold, reverse_targets_object, anchor_gold_not_the_object,
    gold_alias_not_the_object,
]


def test_tiny_benchmark_passes_every_gate(tiny_benchmark_dir, configs):
    report = validate_benchmark(tiny_benchmark_dir, configs=configs)
    assert report["passed"], report["hard_errors"]
    assert list(report["gates"]) == list(GATES)
    assert all(e == {"passed": True, "n_errors": 0} for e in report["gates"].values())
    assert report["n_facts"] == 4 and report["n_queries"] == 28
    assert report["counts"]["queries"]["anchor"] == 4
    # ragged on purpose: fact_000004 lacks context and multilingual (warnings only)
    assert report["counts"]["complete_family_facts"] == 3
    lacking = sorted(w["message"] for w in report["warnings"] if w["gate"] == "coverage")
    assert lacking == ["1 of 4 facts lack a context query (ragged coverage)",
                       "1 of 4 facts lack a multilingual query (ragged coverage)"]


def test_every_gate_has_a_corruption():
    covered = set()
    for corrupt in CORRUPTIONS:
        facts, queries = tiny_benchmark_rows()
        covered.add(corrupt(facts, queries)[0])
    assert covered | {"counts_reconcile"} == set(GATES)  # counts: tests further down


@pytest.mark.parametrize("corrupt", CORRUPTIONS, ids=lambda c: c.__name__)
def test_one_corruption_fails_its_gate_only(corrupt, tmp_path, configs, capsys):
    facts, queries = tiny_benchmark_rows()
    gate, file_name, line, field = corrupt(facts, queries)
    root = write_benchmark(tmp_path / "bench", facts, queries)

    report = validate_benchmark(root, configs=configs)
    assert not report["passed"]
    assert _failed(report) == {gate}
    first = report["hard_errors"][0]
    assert (first["gate"], Path(first["path"]).name, first["line"], first["field"]) == (
        gate, file_name, line, field)

    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["data", "validate", str(root)])
    assert exc.value.code == 2
    err_lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert len(err_lines) == 1
    msg = err_lines[0]
    assert f"{file_name}:{line}:" in msg and f"field '{field}'" in msg and f"{gate}:" in msg
    written = json.loads((root / "validation_report.json").read_text())
    assert not written["passed"] and _failed(written) == {gate}
    assert written["gates"][gate]["n_errors"] >= 1


def test_passing_benchmark_cli_exits_zero_and_writes_report(tiny_benchmark_dir, tmp_path):
    out = tmp_path / "elsewhere" / "report.json"
    with pytest.raises(SystemExit) as exc:
        main(["data", "validate", str(tiny_benchmark_dir), "--report", str(out)])
    assert exc.value.code == 0
    assert json.loads(out.read_text())["passed"] is True
    assert not (tiny_benchmark_dir / "validation_report.json").exists()


def test_run_validation_error_names_first_error_and_count(tmp_path, configs):
    facts, queries = tiny_benchmark_rows()
    for q in queries:
        q["use_for_recognition_analysis"] = not q["use_for_recognition_analysis"]
    root = write_benchmark(tmp_path / "b", facts, queries)
    with pytest.raises(FksInputError) as exc:
        run_validation(root, configs=configs)
    err = exc.value
    assert (Path(err.path).name, err.line, err.field) == (
        QUERIES_FILE, 1, "use_for_recognition_analysis")
    assert err.message.startswith("flags_match_registry: ")
    assert f"(28 hard errors; see {root / 'validation_report.json'})" in err.message


def test_stored_errors_are_capped_true_count_kept(tmp_path, configs):
    facts, queries = tiny_benchmark_rows()
    extra = [dict(queries[1]) for _ in range(MAX_STORED_ERRORS + 10)]  # query 2's id again
    root = write_benchmark(tmp_path / "b", facts, queries + extra)
    report = validate_benchmark(root, configs=configs)
    assert report["gates"]["unique_ids"]["n_errors"] == MAX_STORED_ERRORS + 10
    assert sum(e["gate"] == "unique_ids" for e in report["hard_errors"]) == MAX_STORED_ERRORS


def test_schema_gate_keeps_going_past_bad_rows(tmp_path, configs):
    facts, queries = tiny_benchmark_rows()
    queries[2]["language"] = "xx"
    queries[9]["is_assisted"] = "sometimes"
    del queries[20]["gold_canonical"]
    root = write_benchmark(tmp_path / "b", facts, queries)
    report = validate_benchmark(root, configs=configs)
    lines = [(e["line"], e["field"]) for e in report["hard_errors"]]
    assert lines == [(3, "language"), (10, "is_assisted"), (21, "gold_canonical")]
    assert _failed(report) == {"schema"}


def test_non_json_line_is_reported_and_whole_file_gates_skipped(tmp_path, configs):
    facts, queries = tiny_benchmark_rows()
    root = write_benchmark(tmp_path / "b", facts, queries)
    qfile = root / QUERIES_FILE
    text = qfile.read_text().splitlines(keepends=True)
    text[6] = text[6][:40] + "\n"  # torn JSON on line 7
    qfile.write_text("".join(text))
    report = validate_benchmark(root, configs=configs)
    first = report["hard_errors"][0]
    assert (first["gate"], first["line"]) == ("schema", 7)
    assert "invalid JSON" in first["message"]
    skipped = {g for g, e in report["gates"].items() if "skipped" in e}
    # F1 recomputes a fact's flag over all its queries' subject surfaces: it needs them all
    assert skipped == {"query_fact_exists", "one_anchor_per_fact", "counts_reconcile",
                       "answer_in_subject_surface"}
    assert not any(report["gates"][g]["passed"] for g in skipped)
    assert _failed(report) == {"schema"} | skipped
    assert report["n_queries"] == 6  # rows before the torn line


# --------------------------------------------------------------------- counts_reconcile
def _expect_counts_cli(root: Path, capsys, fragment: str) -> None:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["data", "validate", str(root)])
    assert exc.value.code == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert len(err) == 1 and "counts_reconcile:" in err[0] and fragment in err[0]
    assert (root / "validation_report.json").is_file()


def test_counts_file_name_mismatch(tmp_path, configs, capsys):
    facts, queries = tiny_benchmark_rows()
    root = write_benchmark(tmp_path / "b", facts, queries)
    (root / QUERIES_FILE).rename(root / "evaluation_queries_29.jsonl")
    report = validate_benchmark(root, configs=configs)
    assert _failed(report) == {"counts_reconcile"}
    assert report["hard_errors"][0]["message"] == "file name says 29 rows, file holds 28"
    _expect_counts_cli(root, capsys, "evaluation_queries_29.jsonl")


def _manifest(root: Path, queries: dict[str, int], deviations: list[dict]) -> None:
    (root / "benchmark_manifest.json").write_text(json.dumps({
        "expected_counts": {"n_facts": 4, "queries": queries},
        "accepted_deviations": deviations,
    }))


TINY_COUNTS = {"anchor": 4, "paraphrase": 8, "format": 4, "context": 3, "multilingual": 3,
               "reverse": 1, "recognition": 4, "reverse_illposed": 1}


def test_counts_from_manifest_with_accepted_deviation(tmp_path, configs):
    facts, queries = tiny_benchmark_rows()
    root = write_benchmark(tmp_path / "b", facts, queries)
    dev = {"id": "T1", "family": "context", "delta": -1, "reason": "one distractor removed"}
    _manifest(root, TINY_COUNTS | {"context": 4}, [dev])
    report = validate_benchmark(root, configs=configs)
    assert report["passed"], report["hard_errors"]
    assert report["counts"]["expected_source"] == "manifest"
    assert report["counts"]["accepted_deviations"] == [dev]
    assert report["counts"]["expected"]["queries_after_deviations"]["context"] == 3
    assert not any("no expected counts" in w["message"] for w in report["warnings"])


def test_counts_family_mismatch_against_manifest(tmp_path, configs, capsys):
    facts, queries = tiny_benchmark_rows()
    root = write_benchmark(tmp_path / "b", facts, queries)
    _manifest(root, TINY_COUNTS | {"format": 5}, [])
    report = validate_benchmark(root, configs=configs)
    assert _failed(report) == {"counts_reconcile"}
    (err,) = report["hard_errors"]
    assert err["message"].startswith("format: 4 queries, expected 5")
    assert err["field"] == "condition_family"
    _expect_counts_cli(root, capsys, "format: 4 queries, expected 5")


def test_counts_bad_manifest_is_a_gate_failure(tmp_path, configs):
    facts, queries = tiny_benchmark_rows()
    root = write_benchmark(tmp_path / "b", facts, queries)
    (root / "benchmark_manifest.json").write_text(
        json.dumps({"expected_counts": {"n_facts": "four", "queries": TINY_COUNTS}}))
    report = validate_benchmark(root, configs=configs)
    assert _failed(report) == {"counts_reconcile"}
    err = report["hard_errors"][0]
    assert Path(err["path"]).name == "benchmark_manifest.json" and err["field"] == "n_facts"


def _registry_override(tmp_path: Path, context: int, deviation_delta: int):
    cond = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "src/fks/configs/eval_conditions.yaml").read_text())
    cond["expected_counts"] = {"n_facts": 4, "queries": TINY_COUNTS | {"context": context}}
    cond["accepted_deviations"] = [
        {"id": "D1", "family": "context", "delta": deviation_delta, "reason": "guard"}]
    path = tmp_path / "cfg" / "eval_conditions.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(cond))
    return load_configs([path])


def test_counts_from_registry_when_fact_count_matches(tmp_path):
    facts, queries = tiny_benchmark_rows()
    root = write_benchmark(tmp_path / "b", facts, queries)
    good = _registry_override(tmp_path, context=5, deviation_delta=-2)
    report = validate_benchmark(root, configs=good)
    assert report["passed"], report["hard_errors"]
    assert report["counts"]["expected_source"] == "eval_conditions.yaml"
    assert [d["id"] for d in report["counts"]["accepted_deviations"]] == ["D1"]


def test_counts_registry_mismatch_fails(tmp_path):
    facts, queries = tiny_benchmark_rows()
    root = write_benchmark(tmp_path / "b", facts, queries)
    bad = _registry_override(tmp_path, context=5, deviation_delta=-1)
    report = validate_benchmark(root, configs=bad)
    assert _failed(report) == {"counts_reconcile"}
    assert "context: 3 queries, expected 5-1 accepted = 4" in report["hard_errors"][0]["message"]


def test_no_expected_counts_is_a_warning(tiny_benchmark_dir, configs):
    report = validate_benchmark(tiny_benchmark_dir, configs=configs)
    assert report["passed"]
    assert report["counts"]["expected_source"] is None
    assert any(w["gate"] == "counts_reconcile" and "no expected counts" in w["message"]
               for w in report["warnings"])


def test_missing_directory_raises(tmp_path, configs):
    with pytest.raises(FksInputError) as exc:
        validate_benchmark(tmp_path / "nope", configs=configs)
    assert exc.value.path == str(tmp_path / "nope")
