"""``score_run`` and ``fks score`` on the tiny benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fks.cli import main
from fks.data.schema import Fact, ScoredRecord
from fks.errors import FksInputError
from fks.io import read_json, read_jsonl, sha256_file
from fks.score import competitor_index, score_run
from tiny_benchmark import tiny_benchmark_rows

MODEL = "tiny-model"


def _query_id(fact_id: str, family: str, variant: str | None = None) -> str:
    _, queries = tiny_benchmark_rows()
    hits = [
        q["query_id"] for q in queries
        if q["fact_id"] == fact_id and q["condition_family"] == family
        and (variant is None or q["variant_id"] == variant)
    ]
    assert len(hits) == 1, (fact_id, family, variant, hits)
    return hits[0]


def _record(fact_id, family, raw, *, variant=None, status="ok", query_id=None):
    return {
        "model": MODEL,
        "query_id": query_id or _query_id(fact_id, family, variant),
        "fact_id": fact_id,
        "relation": "manufacturer" if fact_id == "fact_000004" else "capital",
        "condition_family": family,
        "raw_response": raw,
        "generation_config": {"do_sample": False, "max_new_tokens": 24},
        "prompt_version": "test",
        "status": status,
        **({"error": "CUDA out of memory"} if status != "ok" else {}),
    }


# (record, expected label): the hand-written generations of the run
RECORDS = [
    (_record("fact_000001", "anchor", " Paris"), "correct"),
    (_record("fact_000001", "paraphrase", " Paris, the capital of France.\nQ: What is the "
             "capital of Spain?\nA: Madrid", variant="para_01"), "correct"),
    (_record("fact_000001", "context", "Madrid"), "incorrect"),
    (_record("fact_000001", "multilingual", "Paris ou Berlin"), "ambiguous"),  # competitor
    (_record("fact_000001", "recognition", "Tokyo"), "incorrect"),
    (_record("fact_000001", "reverse", "France"), "correct"),  # subject slot
    (_record("fact_000002", "anchor", "", status="error"), "unparseable"),  # failed: kept
    (_record("fact_000002", "paraphrase", "Not Paris but Berlin", variant="para_01"), "correct"),
    (_record("fact_000003", "anchor", "東京です。"), "correct"),
    (_record("fact_000003", "paraphrase", "Tokyo or Berlin", variant="para_02"), "ambiguous"),
    (_record("fact_000004", "anchor", "I don't know."), "abstain"),
    (_record("fact_000004", "format", "..."), "unparseable"),
    # build_prompt letters the options "A. Berlin / B. Paris / C. Tokyo": a letter is an answer
    (_record("fact_000002", "recognition", "A"), "correct"),
]


def _write_generations(run: Path, rows: list[dict]) -> Path:
    run.mkdir(parents=True, exist_ok=True)
    path = run / "generations.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    return path


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "runs" / MODEL
    _write_generations(run, [r for r, _ in RECORDS])
    return run


def test_score_run_labels_every_record_in_order(run_dir, tiny_benchmark_dir):
    summary = score_run(run_dir, tiny_benchmark_dir)
    scored = read_jsonl(run_dir / "scored.jsonl", ScoredRecord)
    assert summary.n_records == len(scored) == len(RECORDS)
    assert [s.query_id for s in scored] == [r["query_id"] for r, _ in RECORDS]
    assert [s.label for s in scored] == [label for _, label in RECORDS]
    failed = scored[6]
    assert failed.status == "error" and failed.extracted_answer is None
    assert failed.error == "CUDA out of memory"  # generation fields carried over
    # R13 (query given by score_run): the extracted answer is the candidate named
    assert scored[1].extracted_answer == "Paris"
    assert scored[1].matched_alias == "Paris"
    assert scored[8].matched_alias == "東京"
    assert scored[12].matched_alias == "Berlin"  # the option the letter names
    assert summary.label_counts == {
        "correct": 6, "incorrect": 2, "ambiguous": 2, "abstain": 1, "unparseable": 2,
    }
    assert summary.by_family["anchor"]["unparseable"] == 1
    assert sum(sum(c.values()) for c in summary.by_family.values()) == len(RECORDS)


def test_known_labels_cover_every_fact_from_the_anchors(run_dir, tiny_benchmark_dir):
    summary = score_run(run_dir, tiny_benchmark_dir)
    known = read_json(run_dir / "known_labels.json")
    assert known == {
        "fact_000001": {MODEL: "correct"},
        "fact_000002": {},  # anchor failed: a label is missing, the fact is not dropped
        "fact_000003": {MODEL: "correct"},
        "fact_000004": {MODEL: "abstain"},
    }
    assert summary.n_facts == 4
    assert summary.anchors_missing == {MODEL: 1}


def test_manifest_gets_a_score_stage(run_dir, tiny_benchmark_dir):
    manifest = run_dir / "evaluation_manifest.json"
    manifest.write_text(json.dumps({"model": {"name": MODEL}, "generation": {"seed": 1}}))
    score_run(run_dir, tiny_benchmark_dir)
    data = read_json(manifest)
    assert data["model"] == {"name": MODEL} and data["generation"] == {"seed": 1}
    scoring = data["stages"]["score"]
    assert scoring["scored_sha256"] == sha256_file(run_dir / "scored.jsonl")
    assert scoring["known_labels_sha256"] == sha256_file(run_dir / "known_labels.json")
    assert scoring["n_records"] == len(RECORDS)
    assert scoring["label_counts"]["correct"] == 6
    assert scoring["scorer_version"].startswith("fks-score-")


def test_manifest_is_created_when_absent(run_dir, tiny_benchmark_dir):
    score_run(run_dir, tiny_benchmark_dir)
    data = read_json(run_dir / "evaluation_manifest.json")
    assert list(data) == ["stages"] and list(data["stages"]) == ["score"]


def test_benchmark_defaults_to_the_one_the_run_recorded(run_dir, tiny_benchmark_dir):
    from fks.data.load import load_benchmark

    checksum = load_benchmark(tiny_benchmark_dir).checksum()
    (run_dir / "evaluation_manifest.json").write_text(json.dumps(
        {"benchmark": {"path": str(tiny_benchmark_dir), "checksum": checksum}}))
    summary = score_run(run_dir, None)
    assert summary.n_records == len(RECORDS)
    assert read_json(run_dir / "evaluation_manifest.json")["stages"]["score"]["benchmark"] == {
        "source": str(tiny_benchmark_dir), "checksum": checksum,
    }


def test_a_different_benchmark_than_the_run_used_is_refused(run_dir, tiny_benchmark_dir):
    (run_dir / "evaluation_manifest.json").write_text(json.dumps(
        {"benchmark": {"path": "/elsewhere", "checksum": "0" * 64}}))
    with pytest.raises(FksInputError) as err:
        score_run(run_dir, tiny_benchmark_dir)
    assert err.value.field == "benchmark.checksum"
    assert not (run_dir / "scored.jsonl").exists()


def test_no_benchmark_anywhere_is_an_input_error(run_dir):
    with pytest.raises(FksInputError) as err:
        score_run(run_dir, None)
    assert err.value.field == "benchmark.path"


def test_rescoring_gives_identical_files(run_dir, tiny_benchmark_dir):
    score_run(run_dir, tiny_benchmark_dir)
    first = (run_dir / "scored.jsonl").read_bytes(), (run_dir / "known_labels.json").read_bytes()
    score_run(run_dir, tiny_benchmark_dir)
    again = (run_dir / "scored.jsonl").read_bytes(), (run_dir / "known_labels.json").read_bytes()
    assert first == again


def test_competitors_are_other_entities_of_the_relation(tiny_benchmark_dir):
    facts_rows, _ = tiny_benchmark_rows()
    facts = [Fact.model_validate(r) for r in facts_rows]
    # a fifth fact sharing fact 1's object entity must not make Paris its own competitor
    twin = Fact.model_validate({**facts_rows[0], "fact_id": "fact_000009",
                                "subject": {"canonical": "Île-de-France", "entity_id": "Q13917"},
                                "object": {**facts_rows[0]["object"], "aliases": ["Paname"]}})
    competitors = competitor_index([*facts, twin])
    paris = set(competitors(facts[0], "object"))
    assert {"Berlin", "柏林", "Tokyo", "東京"} <= paris
    assert not {"Paris", "巴黎", "Paname", "Airbus"} & paris
    assert set(competitors(facts[0], "subject")) >= {"Germany", "Japan"}
    assert "France" not in set(competitors(facts[0], "subject"))
    assert set(competitors(facts[3], "object")) == set()  # the only manufacturer fact


def test_unknown_query_id_is_an_input_error(tmp_path, tiny_benchmark_dir):
    run = tmp_path / "run"
    rows = [r for r, _ in RECORDS[:2]]
    rows.append(_record("fact_000001", "anchor", "Paris", query_id="query_99999999"))
    _write_generations(run, rows)
    with pytest.raises(FksInputError) as err:
        score_run(run, tiny_benchmark_dir)
    assert (err.value.line, err.value.field) == (3, "query_id")
    assert err.value.path.endswith("generations.jsonl")
    assert not (run / "scored.jsonl").exists()  # nothing half-written


def test_cli_unknown_query_id_exits_2(tmp_path, tiny_benchmark_dir, capsys):
    run = tmp_path / "run"
    rows = [_record("fact_000001", "anchor", "Paris", query_id="query_99999999")]
    _write_generations(run, rows)
    with pytest.raises(SystemExit) as exc:
        main(["score", str(run), "--benchmark", str(tiny_benchmark_dir)])
    assert exc.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "generations.jsonl:1" in err and "query_id" in err and "query_99999999" in err


def test_cli_fact_mismatch_exits_2(tmp_path, tiny_benchmark_dir, capsys):
    run = tmp_path / "run"
    row = _record("fact_000001", "anchor", "Paris")
    row["fact_id"] = "fact_000002"
    _write_generations(run, [row])
    with pytest.raises(SystemExit) as exc:
        main(["score", str(run), "--benchmark", str(tiny_benchmark_dir)])
    assert exc.value.code == 2
    assert "fact_id" in capsys.readouterr().err


def test_cli_scores_a_run(run_dir, tiny_benchmark_dir):
    with pytest.raises(SystemExit) as exc:
        main(["score", str(run_dir), "--benchmark", str(tiny_benchmark_dir)])
    assert exc.value.code == 0
    assert len(read_jsonl(run_dir / "scored.jsonl")) == len(RECORDS)
    assert set(read_json(run_dir / "known_labels.json")) == {
        "fact_000001", "fact_000002", "fact_000003", "fact_000004",
    }


def test_missing_generations_is_an_input_error(tmp_path, tiny_benchmark_dir):
    with pytest.raises(FksInputError, match="not found"):
        score_run(tmp_path / "empty", tiny_benchmark_dir)
