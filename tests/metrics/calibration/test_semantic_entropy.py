"""Semantic entropy: estimators, seeded sampling, ``fks calibrate sample``, calibrate pick-up."""

from __future__ import annotations

import json
import math

import pytest
from calibration_tiny_run import build_run, query_id_of, write_jsonl
from hypothesis import given, settings
from hypothesis import strategies as st

from fks.cli import main
from fks.errors import FksInputError
from fks.io import read_json, read_jsonl
from fks.metrics.calibration.semantic_entropy import (
    cluster_assignment_entropy,
    cluster_samples,
    sample_answers,
    semantic_entropy,
)
from tiny_benchmark import tiny_benchmark_rows, write_benchmark

labels = st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=12)


def fks(*args) -> int:
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return int(exc.value.code or 0)


# ============================================================================ estimators
@given(st.text(min_size=1, max_size=5), st.integers(1, 20))
def test_identical_clusters_have_zero_entropy(label, k):
    assert semantic_entropy([label] * k) == 0.0
    est = cluster_assignment_entropy([label] * k)
    assert est["miller_madow"] == 0.0 and est["n_clusters"] == 1


@given(st.integers(1, 20))
def test_all_distinct_gives_log_k(k):
    ids = [f"c{i}" for i in range(k)]
    assert semantic_entropy(ids) == pytest.approx(math.log(k))
    est = cluster_assignment_entropy(ids)
    assert est["miller_madow"] == pytest.approx(math.log(k) + (k - 1) / (2 * k))


@settings(max_examples=50)
@given(labels, st.randoms(use_true_random=False))
def test_invariant_to_relabelling_and_order(ids, rnd):
    alphabet = sorted(set(ids))
    renamed = dict(zip(alphabet, rnd.sample(range(1000), len(alphabet)), strict=True))
    other = [f"X{renamed[c]}" for c in ids]
    rnd.shuffle(other)
    assert semantic_entropy(other) == pytest.approx(semantic_entropy(ids), abs=1e-12)
    assert 0.0 <= semantic_entropy(ids) <= math.log(len(ids)) + 1e-12


def test_hand_computed_values():
    ids = ["A", "A", "B", "C"]  # p = 1/2, 1/4, 1/4
    h = -(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25))
    est = cluster_assignment_entropy(ids)
    assert est["plug_in"] == pytest.approx(h)
    assert est["miller_madow"] == pytest.approx(h + 2 / 8)
    with pytest.raises(ValueError):
        semantic_entropy([])


def test_samples_cluster_by_the_alias_judge(tiny_benchmark_dir):
    from fks.data.load import load_benchmark
    from fks.judge import build_lexicons

    bench = load_benchmark(tiny_benchmark_dir)
    q = next(x for x in bench.queries if x.query_id == query_id_of("fact_000001", "anchor"))
    ids = cluster_samples(["Paris.", "巴黎", "It is Paris", "Berlin", "Lyon, a city"], q,
                          bench.facts_by_id[q.fact_id], build_lexicons(bench))
    assert ids[0] == ids[1] == ids[2] != ids[3]  # aliases in any language: one meaning
    assert ids[4] == "SEMANTIC_lyon"
    assert semantic_entropy(ids) == pytest.approx(-(0.6 * math.log(0.6) + 2 * 0.2 * math.log(
        0.2)))


# ============================================================================ sampling
PROMPTS = ["Question: What is the capital of France?\nAnswer:", "The capital of Japan is",
           "Answer the following question with a short factual answer.\nQuestion: Who makes "
           "the A320?\nAnswer:", "法国的首都是"]


def test_sampling_is_seeded_and_independent_of_batching(tiny_model_and_tokenizer):
    model, tok = tiny_model_and_tokenizer
    kw = {"k": 3, "temperature": 1.0, "max_new_tokens": 6, "seed": 7}
    one = sample_answers(model, tok, PROMPTS, batch_size=1, **kw)
    four = sample_answers(model, tok, PROMPTS, batch_size=4, **kw)
    assert one == four
    assert [len(s) for s in one] == [3] * len(PROMPTS)
    # resuming at position 2 gives the same samples as the full pass
    assert sample_answers(model, tok, PROMPTS[2:], offset=2, batch_size=2, **kw) == one[2:]
    other = sample_answers(model, tok, PROMPTS, batch_size=4, **{**kw, "seed": 8})
    assert other != one  # random weights, T=1: another seed draws other text
    assert len({s for row in one for s in row}) > 1  # the k samples are not all equal
    with pytest.raises(FksInputError):
        sample_answers(model, tok, PROMPTS, **{**kw, "temperature": 0.0})


# ============================================================================ the stage
@pytest.fixture(scope="module")
def sampled(tmp_path_factory, tiny_model_dir):
    root = tmp_path_factory.mktemp("se")
    bench = write_benchmark(root / "bench", *tiny_benchmark_rows())
    run = root / "run"
    assert fks("calibrate", "sample", run, "--model-path", tiny_model_dir, "--benchmark",
               bench, "--k", "3", "--limit", "4", "--batch-size", "3") == 0
    return root, bench, run


def test_sample_cli_writes_resumable_rows(sampled, tiny_model_dir):
    _, bench, run = sampled
    rows = read_jsonl(run / "samples.jsonl")
    _, queries = tiny_benchmark_rows()
    import hashlib

    main = [q for q in queries if q["use_for_main_forward"]]
    # whole facts in sha256("fks-sampling-v1:" + fact_id) order, not the head of the file
    order = sorted(range(len(main)), key=lambda i: (hashlib.sha256(
        f"fks-sampling-v1:{main[i]['fact_id']}".encode()).hexdigest(), i))
    main_ids = [main[i]["query_id"] for i in order][:4]
    assert [r["query_id"] for r in rows] == main_ids
    assert all(len(r["samples"]) == 3 and r["k"] == 3 and r["temperature"] == 1.0
               for r in rows)
    assert all(len(r["sample_logprobs"]) == 3 and all(v <= 0 for v in r["sample_logprobs"])
               for r in rows)
    before = (run / "samples.jsonl").read_text()
    assert fks("calibrate", "sample", run, "--model-path", tiny_model_dir, "--benchmark", bench,
               "--k", "3", "--limit", "5", "--batch-size", "1") == 0
    after = read_jsonl(run / "samples.jsonl")
    assert (run / "samples.jsonl").read_text().startswith(before) and len(after) == 5
    from fks.io import read_json, sha256_file

    stage = read_json(run / "evaluation_manifest.json")["stages"]["calibrate_sample"]
    assert (stage["k"], stage["temperature"], stage["n_queries"], stage["n_sampled"],
            stage["n_skipped"], stage["limit"]) == (3, 1.0, 5, 1, 4, 5)
    assert stage["sha256"] == sha256_file(run / "samples.jsonl")
    assert stage["backend"]["model_path"] == str(tiny_model_dir)
    # another temperature on the same file is refused (frozen protocol): exit 2
    assert fks("calibrate", "sample", run, "--model-path", tiny_model_dir, "--benchmark", bench,
               "--k", "3", "--temperature", "0.7", "--limit", "6") == 2


def _write_samples(run, plan, logprobs=None, model="tiny-model", prompt_version="test-v1"):
    """samples.jsonl rows; ``prompt_version`` is the tiny run's own (its generations')."""
    _, queries = tiny_benchmark_rows()
    by_key = {(q["fact_id"], q["variant_id"]): q for q in queries}
    write_jsonl(run / "samples.jsonl", [{
        "model": model, "query_id": by_key[key]["query_id"], "fact_id": key[0],
        "relation": by_key[key]["relation"], "condition_family": "anchor",
        "language": by_key[key]["language"], "samples": s, "temperature": 1.0, "k": 3,
        "seed": 1, "max_new_tokens": 8, "prompt_version": prompt_version,
        **({} if logprobs is None else {"sample_logprobs": logprobs[key]})}
        for key, s in plan.items()])


def test_calibrate_picks_up_semantic_entropy(tmp_path):
    bench = write_benchmark(tmp_path / "bench", *tiny_benchmark_rows())
    run = build_run(tmp_path / "run")
    # greedy answers (generations.jsonl) are the gold names: Paris, Berlin, Tokyo, Airbus
    plan = {("fact_000001", "anchor"): ["Paris", "Paris.", "巴黎"],  # H = 0
            ("fact_000002", "anchor"): ["Berlin", "Paris", "Tokyo"],  # H = log 3
            ("fact_000003", "anchor"): ["Tokyo", "Tokyo", "Berlin"],
            ("fact_000004", "anchor"): ["Airbus", "Boeing", "Airbus"]}
    ln = math.log
    lps = {("fact_000001", "anchor"): [ln(.5), ln(.2), ln(.1)],
           ("fact_000002", "anchor"): [ln(.6), ln(.1), ln(.1)],
           # the same string twice is one answer y: counted once in sum_{y in c} P(y|x)
           ("fact_000003", "anchor"): [ln(.3), ln(.3), ln(.6)],
           ("fact_000004", "anchor"): [ln(.4), ln(.4), ln(.4)]}
    _write_samples(run, plan, lps)
    bes = {"fact_000001": 1.0, "fact_000002": 0.2, "fact_000003": 0.6, "fact_000004": 0.6}
    (run / "metrics").mkdir()
    write_jsonl(run / "metrics" / "behavioral_per_fact.jsonl",
                [{"fact_id": f, "bes": b} for f, b in bes.items()])
    assert fks("calibrate", run, "--benchmark", bench) == 0
    s = read_json(run / "metrics" / "calibration_summary.json")
    se = s["semantic_entropy"]
    assert se["status"] == "computed" and se["protocol"]["k"] == 3
    h2 = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))
    assert se["by_family"]["anchor"]["mean_plug_in"] == pytest.approx((math.log(3) + 2 * h2) / 4)
    # log-prob estimator: P = (1), (.75, .125, .125), (1/3, 2/3), (.5, .5)
    h_lp = [0.0, -(.75 * ln(.75) + 2 * .125 * ln(.125)), h2, ln(2)]
    assert se["by_family"]["anchor"]["mean_logprob"] == pytest.approx(sum(h_lp) / 4)
    # SE ranks the facts exactly opposite to BES here: rho = -1
    assert se["bes_comparison"]["rho"] == pytest.approx(-1.0)
    assert se["bes_comparison"]["n_facts"] == 4
    assert "semantic_entropy" not in s["readings"]["anchor"]["sources"]  # 1 - H/log k is gone
    block = s["readings"]["anchor"]["sources"]["semantic_cluster_probability"]
    assert block["coverage"]["counts"]["valid"] == 4 and block["figures"]["n"] == 4
    # a sampled query with no row is invalid_confidence (not_sampled), never fabricated
    main_block = s["readings"]["main_families"]["sources"]["semantic_cluster_share"]["coverage"]
    assert main_block["invalid_confidence_reasons"] == {"not_sampled": 10}
    rows = {r["query_id"]: r for r in read_jsonl(run / "metrics" /
                                                 "calibration_per_query.jsonl")}

    def conf(fact, src):
        return rows[query_id_of(fact, "anchor")]["sources"][src]["confidence"]

    # P(c*|x), c* the greedy answer's cluster: count estimator and the text's estimator
    expect_share = {"fact_000001": 1.0, "fact_000002": 1 / 3, "fact_000003": 2 / 3,
                    "fact_000004": 2 / 3}
    expect_prob = {"fact_000001": 1.0, "fact_000002": .75, "fact_000003": 1 / 3,
                   "fact_000004": .5}
    for fact in expect_share:
        assert conf(fact, "semantic_cluster_share") == pytest.approx(expect_share[fact])
        assert conf(fact, "semantic_cluster_probability") == pytest.approx(expect_prob[fact])
    # the other sources' common-support table is unchanged by the extra sources
    assert not {"semantic_cluster_probability", "semantic_cluster_share"} & set(
        s["readings"]["anchor"]["common_support"]["sources"])
    assert (run / "metrics" / "semantic_entropy_per_query.jsonl").is_file()


def test_samples_without_logprobs_and_from_another_model(tmp_path, capsys):
    bench = write_benchmark(tmp_path / "bench", *tiny_benchmark_rows())
    run = build_run(tmp_path / "run")
    plan = {("fact_000001", "anchor"): ["Paris", "Paris.", "Lyon"]}
    _write_samples(run, plan)  # an older file: no sample_logprobs
    assert fks("calibrate", run, "--benchmark", bench) == 0
    s = read_json(run / "metrics" / "calibration_summary.json")
    cov = s["readings"]["anchor"]["sources"]["semantic_cluster_probability"]["coverage"]
    assert cov["invalid_confidence_reasons"] == {"no_sample_logprobs": 1, "not_sampled": 3}
    _write_samples(run, plan, model="another-model")
    assert fks("calibrate", run, "--benchmark", bench) == 2
    err = capsys.readouterr().err
    assert "samples.jsonl:1: field 'model'" in err and "another-model" in err


def test_bad_samples_file_is_an_input_error(tmp_path):
    bench = write_benchmark(tmp_path / "bench", *tiny_benchmark_rows())
    run = build_run(tmp_path / "run")
    qid = query_id_of("fact_000001", "anchor")
    row = {"model": "m", "query_id": qid, "fact_id": "fact_000001", "relation": "capital",
           "condition_family": "anchor", "language": "en", "samples": ["Paris"],
           "temperature": 1.0, "k": 3, "seed": 1, "max_new_tokens": 8,
           "prompt_version": "test-v1"}
    (run / "samples.jsonl").write_text(json.dumps(row) + "\n")
    assert fks("calibrate", run, "--benchmark", bench) == 2



def test_near_zero_temperature_reproduces_the_greedy_backend(tiny_model_dir):
    """The KV-cache / left-padding loop decodes like HF ``generate`` (greedy as T -> 0)."""
    from fks.configs import GenerationConfig
    from fks.generate.backends.hf import HFBackend

    backend = HFBackend(str(tiny_model_dir), generation=GenerationConfig(), device="cpu")
    greedy = [o.text for o in backend.generate(PROMPTS, max_new_tokens=6)]
    cold = sample_answers(backend.model, backend.tokenizer, PROMPTS, k=2, temperature=1e-6,
                          max_new_tokens=6, seed=3, batch_size=4, eos_ids=backend.eos_ids)
    assert [row[0] for row in cold] == greedy and [row[1] for row in cold] == greedy
    # each sample's recorded log-probability is the model's own (T = 1), as answer_logprobs
    from fks.metrics.calibration.semantic_entropy import _sample_batch

    _, lps = _sample_batch(backend.model, backend.tokenizer, PROMPTS, [3 + i for i in range(
        len(PROMPTS))], k=2, temperature=1e-6, max_new_tokens=6, max_prompt_len=192,
        eos_ids=backend.eos_ids)
    outs = backend.generate(PROMPTS, max_new_tokens=6)
    for row, out in zip(lps, outs, strict=True):
        assert row[0] == pytest.approx(sum(out.answer_logprobs), abs=1e-3)
