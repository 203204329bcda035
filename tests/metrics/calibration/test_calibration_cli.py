"""``fks calibrate`` on a hand-written run directory: outputs, coverage accounting, bad input."""

from __future__ import annotations

import json
import math

import pytest
from calibration_tiny_run import ANCHOR_SEQ, MAIN_COUNTS, build_run, query_id_of, write_jsonl

from fks.cli import main
from fks.io import read_json, read_jsonl, sha256_file


def fks(*args) -> int:
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return int(exc.value.code or 0)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """One calibrated run (the command runs once for the read-only checks)."""
    from tiny_benchmark import tiny_benchmark_rows, write_benchmark

    root = tmp_path_factory.mktemp("calib")
    bench = write_benchmark(root / "bench", *tiny_benchmark_rows())
    run = build_run(root / "run")
    (run / "evaluation_manifest.json").write_text(json.dumps({"stages": {"judge": {"n": 1}}}))
    assert fks("calibrate", run, "--benchmark", bench, "--coverage", "0.5",
               "--coverage", "1.0", "--min-facts-for-interval", "2") == 0
    return run, read_json(run / "metrics" / "calibration_summary.json")


def test_coverage_accounting_counts_every_outcome(calibrated):
    _, s = calibrated
    main_ = s["readings"]["main_families"]
    assert main_["n_queries"] == 22 and main_["families"] == [
        "anchor", "paraphrase", "format", "context", "multilingual"]
    seq = main_["sources"]["sequence_probability"]["coverage"]
    assert seq["counts"] == MAIN_COUNTS
    assert sum(seq["counts"].values()) == 22  # no row dropped
    assert seq["invalid_confidence_reasons"] == {"no_logprobs": 1}
    assert seq["confidence_coverage"] == pytest.approx(13 / 14)
    assert seq["end_to_end_coverage"] == pytest.approx(13 / 22)
    # the row without log-probs is valid for the sources that do not need them
    cons = main_["sources"]["consistency"]["coverage"]["counts"]
    assert cons["valid"] == 14 and cons["invalid_confidence"] == 0
    # the judge's score is a diagnostic table, never a calibrated source
    assert "judge_confidence" not in main_["sources"]
    diag = main_["judge_confidence_diagnostic"]
    assert sum(v["n"] for v in diag["by_value"].values()) == 14
    assert "not a probability" in diag["note"]
    assert s["readings"]["anchor"]["sources"]["sequence_probability"]["coverage"]["counts"][
        "valid"] == 4


def test_anchor_figures_match_the_hand_computation(calibrated):
    _, s = calibrated
    block = s["readings"]["anchor"]["sources"]["sequence_probability"]
    f = block["figures"]
    brier = sum((p - y) ** 2 for p, y in ANCHOR_SEQ.values()) / 4  # 0.145
    nll = -sum(math.log(p if y else 1 - p) for p, y in ANCHOR_SEQ.values()) / 4
    assert f["n"] == 4 and f["accuracy"] == 0.75
    assert f["brier"] == pytest.approx(brier, abs=1e-7)
    assert f["nll"]["nll"] == pytest.approx(nll, abs=1e-6) and f["nll"]["clip_eps"] == 1e-12
    # ranks: 0.9 right, 0.6 right, 0.5 right, 0.4 wrong -> risks 0, 0, 0, 1/4
    assert f["aurc"] == pytest.approx(0.25 / 4)
    assert block["risk_coverage"]["coverage"] == [0.25, 0.5, 0.75, 1.0]
    assert [r["target_coverage"] for r in f["risk_at_coverage"]] == [0.5, 1.0]
    rel = block["reliability"]["equal_width"]
    assert rel["bins"] == 10 and sum(rel["counts"]) == 4 and len(rel["edges"]) == 11
    assert rel["counts"][8] == 1 and rel["counts"][3] == 1  # 0.9 -> (0.8, 0.9], 0.4 -> bin 3
    assert "empty bin" in rel["empty_bin_policy"]
    first = s["readings"]["anchor"]["sources"]["first_token_probability"]["figures"]
    assert first["mean_confidence"] == pytest.approx((0.9 + 0.8 + 0.6 + 0.5) / 4, abs=1e-7)


def test_consistency_is_the_family_balanced_share_of_the_query_cluster(calibrated):
    run, s = calibrated
    rows = {r["query_id"]: r for r in read_jsonl(run / "metrics" /
                                                 "calibration_per_query.jsonl")}
    # Only scorable answers enter p_f (fks.metrics.behavior): a timeout, a generation error,
    # UNPARSEABLE and a judge failure are not behaviour, and a family left without an answer
    # drops out like a missing one.
    # fact 1: anchor A, paraphrase {A, ABSTAIN}, format {timeout}, context A, multilingual A
    # -> (1 + 1/2 + 1 + 1) / 4 ; fact 2: anchor B, paraphrase {B, MULTIPLE}, format B,
    # context {error} -> (1 + 1/2 + 1) / 3 ; fact 3: paraphrase {X, UNPARSEABLE} -> X only:
    # (1 + 0 + 1 + 1) / 4 ; fact 4: paraphrase {D, judge failure} -> D only: (1 + 1 + 0) / 3
    expected = {"fact_000001": 0.875, "fact_000002": 2.5 / 3, "fact_000003": 0.75,
                "fact_000004": 2 / 3}
    for fact, value in expected.items():
        row = rows[query_id_of(fact, "anchor")]
        assert row["sources"]["consistency"]["confidence"] == pytest.approx(value)
    cons = s["readings"]["anchor"]["sources"]["consistency"]["figures"]
    assert cons["mean_confidence"] == pytest.approx(sum(expected.values()) / 4, abs=1e-7)


def test_per_query_file_keeps_every_query_with_its_outcome(calibrated):
    run, _ = calibrated
    rows = read_jsonl(run / "metrics" / "calibration_per_query.jsonl")
    assert len(rows) == 28  # every benchmark query, the one never generated included
    by_q = {r["query_id"]: r for r in rows}
    expect = {("fact_000003", "ctx_01"): "missing_generation",
              ("fact_000001", "fmt_short"): "timeout",
              ("fact_000002", "ctx_01"): "infrastructure_error",
              ("fact_000002", "ml_fr"): "judge_missing",
              ("fact_000004", "para_02"): "judge_missing",
              ("fact_000001", "para_02"): "abstain",
              ("fact_000002", "para_02"): "invalid_answer",
              ("fact_000003", "para_02"): "invalid_answer"}
    for (fact, variant), outcome in expect.items():
        assert by_q[query_id_of(fact, variant)]["outcome"] == outcome
    ctx = by_q[query_id_of("fact_000001", "ctx_01")]
    assert ctx["sources"]["sequence_probability"] == {
        "confidence": None, "outcome": "invalid_confidence", "reason": "no_logprobs"}
    rec = [r for r in rows if r["condition_family"] == "recognition"]
    assert rec and all(r["readings"] == [] for r in rec)
    assert {r["split"] for r in rows} <= {"dev", "test"}


def test_missing_verbalized_source_is_reported_not_fabricated(calibrated):
    run, s = calibrated
    assert s["sources"]["verbalized"]["available"] is False
    for reading in s["readings"].values():
        block = reading["sources"]["verbalized"]
        assert block["available"] is False and "figures" not in block
    row = read_jsonl(run / "metrics" / "calibration_per_query.jsonl")[0]
    assert "verbalized" not in row["sources"]
    assert s["semantic_entropy"]["status"] == "not_computed"


def test_slices_intervals_recalibration_and_manifest(calibrated):
    run, s = calibrated
    block = s["readings"]["main_families"]["sources"]["sequence_probability"]
    slices = block["slices"]
    assert set(slices) == {"language", "relation", "condition_family",
                           "answer_in_subject_surface", "answer_length", "difficulty",
                           "data_source"}
    assert set(slices["language"]) == {"en", "fr"}
    copy = slices["answer_in_subject_surface"]["copy"]  # Airbus A320 -> Airbus
    assert copy["coverage"]["n_queries"] == 4 and copy["figures"]["n"] == 3
    assert copy["figures"]["n_facts"] == 1
    # one fact: no interval, and the reason says why (min_facts_for_interval = 2 here)
    assert copy["figures"]["intervals"]["status"] == "not_computed"
    assert "1 fact(s) < min_facts_for_interval = 2" in copy["figures"]["intervals"]["reason"]
    assert slices["answer_in_subject_surface"]["real"]["coverage"]["n_queries"] == 18
    fr = slices["language"]["fr"]
    assert fr["coverage"]["n_queries"] == 3 and fr["figures"]["n"] == 2  # fact 2's unjudged
    iv = fr["figures"]["intervals"]
    assert iv["n_facts"] == 2 and iv["brier"]["low"] <= fr["figures"]["brier"] <= iv[
        "brier"]["high"]
    assert sum(v["coverage"]["n_queries"] for v in slices["relation"].values()) == 22
    assert block["intervals"]["n_resamples"] == 1000 and "aurc" in block["intervals"]
    rec = block["recalibration"]
    assert rec["split"]["n_dev"] + rec["split"]["n_test"] == 13
    manifest = read_json(run / "evaluation_manifest.json")
    assert manifest["stages"]["judge"] == {"n": 1}  # other stages kept
    stage = manifest["stages"]["calibrate"]
    assert stage["outputs"]["calibration_summary.json"] == sha256_file(
        run / "metrics" / "calibration_summary.json")
    assert stage["sources_missing"] == ["verbalized"]
    assert s["inputs"]["judged.jsonl"] == sha256_file(run / "judged.jsonl")


def test_without_a_benchmark_the_generated_queries_are_the_set(tmp_path):
    run = build_run(tmp_path / "run")
    assert fks("calibrate", "run", run, "--bins", "5") == 0
    s = read_json(run / "metrics" / "calibration_summary.json")
    counts = s["readings"]["main_families"]["sources"]["sequence_probability"]["coverage"][
        "counts"]
    assert counts == {**MAIN_COUNTS, "missing_generation": 0}  # cannot know what is missing
    assert s["benchmark"] is None and s["settings"]["bins"] == 5


@pytest.mark.parametrize("file,line,edit,where", [
    ("judged.jsonl", 3, lambda r: r.update(correctness="MAYBE"), ":3: field 'correctness'"),
    ("judged.jsonl", 2, lambda r: r.update(query_id="query_99999999"), ":2: field 'query_id'"),
    ("judged.jsonl", 4, lambda r: r.update(model="other"), ":4: field 'model'"),
    ("generations.jsonl", 5, lambda r: r.update(answer_logprobs="low"),
     ":5: field 'answer_logprobs'"),
    ("generations.jsonl", 1, lambda r: r.pop("fact_id"), ":1: field 'fact_id'"),
    ("scored.jsonl", 2, lambda r: r.update(label="sure"), ":2: field 'label'"),
])
def test_malformed_row_exits_2(tmp_path, tiny_benchmark_dir, capsys, file, line, edit, where):
    run = build_run(tmp_path / "run")
    rows = read_jsonl(run / file)
    edit(rows[line - 1])
    write_jsonl(run / file, rows)
    assert fks("calibrate", run, "--benchmark", tiny_benchmark_dir) == 2
    err = capsys.readouterr().err
    assert file in err and where in err
    assert not (run / "metrics" / "calibration_summary.json").exists()


def test_broken_json_duplicates_and_bad_options_exit_2(tmp_path, tiny_benchmark_dir, capsys):
    run = build_run(tmp_path / "run")
    path = run / "generations.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, lines[0]]) + "\n")
    assert fks("calibrate", run) == 2
    assert f"generations.jsonl:{len(lines) + 1}: field 'query_id'" in capsys.readouterr().err
    path.write_text("\n".join([*lines[:2], '{"model": ', *lines[2:]]) + "\n")
    assert fks("calibrate", run) == 2
    assert "generations.jsonl:3: invalid JSON" in capsys.readouterr().err
    path.write_text("\n".join(lines) + "\n")
    assert fks("calibrate", run, "--bins", "0") == 2
    assert "bins" in capsys.readouterr().err
    assert fks("calibrate", run, "--coverage", "1.5") == 2
    assert fks("calibrate", tmp_path / "nowhere") == 2


def test_agrees_with_the_behaviour_file_and_draws_plots(tmp_path, tiny_benchmark_dir):
    run = build_run(tmp_path / "run")
    assert fks("metrics", run, "--part", "behavior") == 0
    assert fks("calibrate", run, "--benchmark", tiny_benchmark_dir, "--plots") == 0
    s = read_json(run / "metrics" / "calibration_summary.json")
    check = s["behavior_file_check"]
    assert check["facts_checked"] == 4 and check["modal_cluster_differs"] == 0
    stage = read_json(run / "evaluation_manifest.json")["stages"]["calibrate"]
    pngs = [n for n in stage["outputs"] if n.endswith(".png")]
    # 2 readings x 3 sources with data (verbalized is missing, the answer-span sources have no
    # token offsets in this run)
    assert len(pngs) == 6
    assert (run / "metrics" / pngs[0]).read_bytes()[:4] == b"\x89PNG"


def test_elicit_command_checks_its_inputs_before_loading_a_model(tmp_path, capsys,
                                                                 tiny_benchmark_dir):
    run = build_run(tmp_path / "run")
    assert fks("calibrate", "elicit", run, "--model-path", "m") == 2
    assert "--benchmark is required" in capsys.readouterr().err
    assert fks("calibrate", "elicit", run, "--model-path", "m", "--benchmark", tmp_path,
               "--backend", "openai") == 2
    assert "--base-url is required" in capsys.readouterr().err
    assert fks("calibrate", "elicit", run, "--model-path", "m", "--benchmark", tmp_path) == 2
    assert "expected exactly one benchmark_facts" in capsys.readouterr().err
    assert fks("calibrate", "elicit", run, "--model-path", "m", "--benchmark",
               tiny_benchmark_dir, "--backend", "magic") == 2
    assert "unknown backend" in capsys.readouterr().err
    assert fks("calibrate", "elicit", run, "--model-path", "m", "--benchmark",
               tiny_benchmark_dir, "--limit", "-1") == 2
    assert "field 'limit'" in capsys.readouterr().err
    assert not (run / "verbalized.jsonl").exists()
