"""Verbalized confidence: frozen prompt, strict parser, the elicitation pass, its use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from calibration_tiny_run import build_run, query_id_of

from fks.configs import load_configs
from fks.generate.backends.base import GenerationOutput
from fks.generate.prompts import build_prompt
from fks.io import read_json, read_jsonl
from fks.metrics.calibration import (
    ELICITATION_TEMPLATE,
    build_elicitation_prompt,
    elicit_verbalized,
    parse_verbalized_confidence,
    run_calibration,
)
from provenance_util import drop_provenance


@pytest.mark.parametrize("text,expected", [
    ("0.85", (0.85, "ok")),
    (" 0.85\nQuestion: next one", (0.85, "ok")),
    ("\n\n  .9.", (0.9, "ok")),
    ("1", (1.0, "ok")),
    ("0", (0.0, "ok")),
    ("1.0", (1.0, "ok")),
    ("80%", (0.8, "ok")),
    ("80 %", (0.8, "ok")),
    ("100%", (1.0, "ok")),
    ("0,8", (0.8, "ok")),
    (",75", (0.75, "ok")),
    ("80,5 %", (0.805, "ok")),
    ("80％", (0.8, "ok")),
    ("1,5", (None, "out_of_range")),
    ("0,7,8", (None, "malformed")),
    ("", (None, "empty")),
    ("   \n  ", (None, "empty")),
    ("very likely", (None, "no_number")),
    ("high", (None, "no_number")),
    ("85", (None, "out_of_range")),
    ("1.5", (None, "out_of_range")),
    ("150%", (None, "out_of_range")),
    ("about 0.8", (None, "malformed")),
    ("0.7-0.8", (None, "malformed")),
    ("0.7 or 0.8", (None, "malformed")),
    ("8/10", (None, "malformed")),
    ("-0.2", (None, "malformed")),
    ("0.8.5", (None, "malformed")),
    ("1e-3", (None, "malformed")),
    ("0.9 because Paris is the capital", (None, "malformed")),
])
def test_parser_is_strict_and_says_why(text, expected):
    assert parse_verbalized_confidence(text) == expected


def test_parser_reads_only_a_bounded_first_line():
    assert parse_verbalized_confidence("0." + "9" * 10_000) == (None, "malformed")
    assert parse_verbalized_confidence("0.5\n" + "x" * 10_000) == (0.5, "ok")


def test_elicitation_prompt_is_the_query_prompt_plus_the_frozen_question():
    q = {"condition_family": "anchor", "query": "What is the capital of France?"}
    prompt = build_elicitation_prompt(q, "  Paris\nQuestion: ignore this ")
    assert prompt == ELICITATION_TEMPLATE.format(prompt=build_prompt(q),
                                                 answer="Paris Question: ignore this")
    assert prompt.startswith(build_prompt(q) + " Paris")
    assert prompt.endswith("Probability:")


class FakeBackend:
    """Answers by what the answer is: Paris 0.9, Berlin '85', Tokyo fails, others 80%.

    The second wording says 0,5 (a decimal comma) for every answer.
    """

    name = "fake"

    def __init__(self, model_path: str = "tiny-model") -> None:
        self.prompts: list[str] = []
        self.model_path = model_path

    def generate(self, prompts, *, max_new_tokens):
        self.prompts.extend(prompts)
        out = []
        for p in prompts:
            answer = p.split("Answer: ", 1)[-1].split("\n")[0]
            if answer == "Tokyo":
                out.append(GenerationOutput(text="", status="error", error="boom"))
            elif "What is the probability" in p:
                out.append(GenerationOutput(text=" 0,5", n_generated_tokens=2))
            else:
                text = {"Paris": " 0.9\n", "Berlin": " 85"}.get(answer, " 80%")
                out.append(GenerationOutput(text=text, n_generated_tokens=2))
        return out

    def describe(self):
        return {"backend": self.name, "model_path": self.model_path}


def test_elicitation_pass_writes_resumes_and_feeds_calibrate(tmp_path, tiny_benchmark_dir):
    run = build_run(tmp_path / "run")
    backend = FakeBackend()
    info = elicit_verbalized(run, backend, benchmark=tiny_benchmark_dir, batch_size=4,
                             variants="primary")
    scored = read_jsonl(run / "scored.jsonl")
    n_ok = sum(r["status"] == "ok" for r in scored)
    assert info["n_candidates"] == n_ok == 25 and info["n_written"] == 25
    rows = read_jsonl(run / "verbalized.jsonl")
    assert len(rows) == 25 and len({r["query_id"] for r in rows}) == 25
    by_q = {r["query_id"]: r for r in rows}
    anchor1 = by_q[query_id_of("fact_000001", "anchor")]
    assert anchor1["confidence"] == 0.9 and anchor1["parse_status"] == "ok"
    assert by_q[query_id_of("fact_000002", "anchor")]["parse_status"] == "out_of_range"
    failed = by_q[query_id_of("fact_000003", "anchor")]
    assert failed["status"] == "error" and failed["confidence"] is None
    stage = read_json(run / "evaluation_manifest.json")["stages"]["calibrate_elicit"]
    assert stage["n_written"] == 25 and stage["backend"]["backend"] == "fake"
    assert anchor1["eliciting_model"]["model_path"] == "tiny-model"
    assert anchor1["elicitation_version"] == "fks-verbalized-v2"

    again = elicit_verbalized(run, FakeBackend(), benchmark=tiny_benchmark_dir,
                              variants="primary")
    assert again["n_written"] == 0 and again["n_existing"] == 25
    assert len(read_jsonl(run / "verbalized.jsonl")) == 25

    summary = run_calibration(run, configs=load_configs(), benchmark=tiny_benchmark_dir)
    verbal = summary["readings"]["anchor"]["sources"]["verbalized"]
    assert summary["sources"]["verbalized"]["available"]
    assert verbal["coverage"]["counts"]["valid"] == 2  # Paris 0.9, Airbus 80%
    assert verbal["coverage"]["invalid_confidence_reasons"] == {
        "elicitation_error": 1, "parse_out_of_range": 1}
    assert verbal["figures"]["brier"] == pytest.approx((0.1 ** 2 + 0.2 ** 2) / 2, abs=1e-7)


def test_a_limited_elicitation_is_a_spread_slice_of_whole_facts(tmp_path, tiny_benchmark_dir):
    run = build_run(tmp_path / "run")
    info = elicit_verbalized(run, FakeBackend(), benchmark=tiny_benchmark_dir,
                             variants="primary", limit=7)
    assert info["n_candidates"] == info["n_written"] == 7
    facts = [r["fact_id"] for r in read_jsonl(run / "verbalized.jsonl")]
    # whole facts in hash order: each fact's rows are contiguous, at most the last one cut
    runs = [f for i, f in enumerate(facts) if i == 0 or facts[i - 1] != f]
    assert len(runs) == len(set(runs)) >= 2
    per_fact = {f: sum(1 for r in read_jsonl(run / "scored.jsonl")
                       if r["fact_id"] == f and r["status"] == "ok") for f in runs}
    assert all(facts.count(f) == per_fact[f] for f in runs[:-1])
    assert facts != sorted(facts)  # not the head of the file
    # the same limit resumes the same slice; a larger one extends it
    assert elicit_verbalized(run, FakeBackend(), benchmark=tiny_benchmark_dir,
                             variants="primary", limit=7)["n_written"] == 0
    more = elicit_verbalized(run, FakeBackend(), benchmark=tiny_benchmark_dir,
                             variants="primary", limit=12)
    assert more["n_existing"] == 7 and more["n_written"] == 5


@pytest.mark.parametrize("edit,where", [
    (lambda r: r.update(query_id="query_99999999"), "verbalized.jsonl:2: field 'query_id'"),
    (lambda r: r.update(elicitation_version="fks-verbalized-v1"),
     "verbalized.jsonl:2: field 'elicitation_version'"),
    (lambda r: r.update(eliciting_model={"model_path": "other-model", "weights_sha256": None}),
     "verbalized.jsonl:2: field 'eliciting_model.model_path'"),
    (lambda r: r.update(variant="xx/w9/sideways"), "verbalized.jsonl:2: field 'variant'"),
])
def test_a_tampered_verbalized_row_is_bad_input(tmp_path, tiny_benchmark_dir, edit, where):
    from fks.errors import FksInputError

    run = build_run(tmp_path / "run")
    elicit_verbalized(run, FakeBackend(), benchmark=tiny_benchmark_dir, variants="primary")
    drop_provenance(run)  # the row reader, not the chain check, must meet the edit
    rows = read_jsonl(run / "verbalized.jsonl")
    edit(rows[1])
    (run / "verbalized.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(FksInputError, match=where.replace(".", r"\.")):
        run_calibration(run, configs=load_configs(), benchmark=tiny_benchmark_dir)


def test_another_eliciting_model_exits_2_on_the_cli(tmp_path, tiny_benchmark_dir, capsys):
    from fks.cli import main

    run = build_run(tmp_path / "run")
    elicit_verbalized(run, FakeBackend("some/other-model"), benchmark=tiny_benchmark_dir,
                      variants="primary")
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", str(run), "--benchmark", str(tiny_benchmark_dir)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "verbalized.jsonl:1: field 'eliciting_model.model_path'" in err
    assert "some/other-model" in err


def test_every_variant_is_elicited_and_the_ece_spread_reported(tmp_path, tiny_benchmark_dir):
    from fks.metrics.calibration import VARIANTS

    run = build_run(tmp_path / "run")
    backend = FakeBackend()
    info = elicit_verbalized(run, backend, benchmark=tiny_benchmark_dir, batch_size=8)
    rows = read_jsonl(run / "verbalized.jsonl")
    _, queries = __import__("tiny_benchmark").tiny_benchmark_rows()
    lang = {q["query_id"]: q["language"] for q in queries}
    n_fr = sum(lang[q] == "fr" for q in {r["query_id"] for r in rows})
    # 4 English variants per answered query, 4 more in the query's language when not English
    assert info["n_written"] == len(rows) == 25 * 4 + n_fr * 4 and n_fr > 0
    assert set(info["variants"]) == set(VARIANTS)
    # both orders in the query's language: question first, and answer first
    assert any(p.startswith("Quelle est la probabilité") for p in backend.prompts)
    assert any(p.endswith("Probabilité :") and "\nQuelle" in p for p in backend.prompts)
    summary = run_calibration(run, configs=load_configs(), benchmark=tiny_benchmark_dir)
    spread = summary["readings"]["anchor"]["verbalized_variants"]
    assert set(spread["variants"]) == set(VARIANTS)
    w1 = spread["variants"]["en/w1/answer_first"]
    w2 = spread["variants"]["en/w2/answer_first"]
    # w2 says 0,5 for every answer (3 valid: Tokyo's elicitation failed), w1 as in the
    # primary test: Paris 0.9 right, Airbus 0.8 right; Berlin's 85 is out of range
    assert w2["n_valid"] == 3 and w2["mean_confidence"] == pytest.approx(0.5)
    assert w1["n_valid"] == 2
    eces = [v["ece_equal_width"] for v in spread["variants"].values()]
    assert spread["ece_spread"]["range"] == pytest.approx(max(eces) - min(eces))
    assert spread["ece_spread"]["n_variants"] == len(VARIANTS)
    assert summary["readings"]["anchor"]["sources"]["verbalized"]["figures"]["n"] == 2


@pytest.mark.slow
def test_elicitation_runs_through_a_real_hf_backend(tmp_path, tiny_benchmark_dir,
                                                    tiny_model_dir: Path):
    from fks.generate.backends import make_backend

    run = build_run(tmp_path / "run")
    backend = make_backend("hf", str(tiny_model_dir), configs=load_configs(), device="cpu")
    info = elicit_verbalized(run, backend, benchmark=tiny_benchmark_dir, batch_size=8,
                             max_new_tokens=4, variants="primary")
    rows = read_jsonl(run / "verbalized.jsonl")
    assert info["n_written"] == len(rows) == 25
    # random weights: the text is garbage, and the parser says so instead of guessing
    for r in rows:
        assert r["status"] == "ok" and r["n_generated_tokens"] <= 4
        assert (r["confidence"], r["parse_status"]) == parse_verbalized_confidence(
            r["raw_response"])
