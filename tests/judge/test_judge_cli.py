"""``fks judge``, ``fks judge agreement`` and ``fks metrics`` on a tiny run directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fks.cli import main
from fks.data.schema import JudgedRecord
from fks.io import iter_jsonl, read_json, read_jsonl, sha256_file
from provenance_util import drop_provenance


def fks(*args: str) -> int:
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return int(exc.value.code or 0)


def test_judge_writes_judged_records_and_manifest(tiny_run, tiny_benchmark_dir):
    (tiny_run / "evaluation_manifest.json").write_text(
        json.dumps({"model": {"name": "tiny-model"}, "stages": {"generate": {"n": 28}}}))
    rows = read_jsonl(tiny_run / "scored.jsonl")
    rows[0]["status"], rows[0]["raw_response"], rows[0]["error"] = "error", "", "CUDA OOM"
    (tiny_run / "scored.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    assert fks("judge", tiny_run, "--benchmark", tiny_benchmark_dir) == 0

    judged = [r for _, r in iter_jsonl(tiny_run / "judged.jsonl", JudgedRecord)]
    assert [r.query_id for r in judged] == [r["query_id"] for r in rows]  # order, none dropped
    assert judged[0].generation_status == "error" and judged[0].status == "UNPARSEABLE"
    assert judged[0].correctness == "REVIEW_REQUIRED" and judged[0].error == "CUDA OOM"
    assert {r.generation_status for r in judged[1:]} == {"ok"}
    assert {r.judge for r in judged} == {"alias"}
    manifest = read_json(tiny_run / "evaluation_manifest.json")
    assert manifest["stages"]["generate"] == {"n": 28}  # other stages are kept
    stage = manifest["stages"]["judge"]
    assert stage["name"] == "alias" and "revision" in stage and "temperature" in stage
    assert stage["sha256"] == sha256_file(tiny_run / "judged.jsonl")
    c = stage["counts"]
    assert c["records"] == len(rows)
    assert c["review_required"] == sum(r.correctness == "REVIEW_REQUIRED" for r in judged)
    assert c["review_required_by_reason"]["generation_error"] == 1
    assert sum(c["by_correctness"].values()) == len(rows)


def test_judge_run_subcommand_and_manifest_created(tiny_run, tiny_benchmark_dir):
    assert not (tiny_run / "evaluation_manifest.json").exists()
    assert fks("judge", "run", tiny_run, "--benchmark", tiny_benchmark_dir, "--judge",
               "alias") == 0
    assert "judge" in read_json(tiny_run / "evaluation_manifest.json")["stages"]


@pytest.mark.parametrize("corrupt,where", [
    (lambda rows: rows.__setitem__(3, '{"model": "m", '), ":4: invalid JSON"),
    (lambda rows: rows.__setitem__(2, json.dumps({**json.loads(rows[2]), "label": "maybe"})),
     ":3: field 'label'"),
    (lambda rows: rows.__setitem__(1, json.dumps({**json.loads(rows[1]),
                                                  "query_id": "query_99999999"})),
     ":2: field 'query_id'"),
    (lambda rows: rows.__setitem__(5, rows[4]), ":6: field 'query_id'"),
])
def test_malformed_scored_line_exits_2(tiny_run, tiny_benchmark_dir, capsys, corrupt, where):
    path = tiny_run / "scored.jsonl"
    lines = path.read_text().splitlines()
    corrupt(lines)
    path.write_text("\n".join(lines) + "\n")
    assert fks("judge", tiny_run, "--benchmark", tiny_benchmark_dir) == 2
    err = capsys.readouterr().err
    assert "scored.jsonl" in err and where in err
    assert not (tiny_run / "judged.jsonl").exists()


def test_unknown_judge_exits_2(tiny_run, tiny_benchmark_dir, capsys):
    assert fks("judge", tiny_run, "--benchmark", tiny_benchmark_dir, "--judge", "oracle") == 2
    assert "unknown judge" in capsys.readouterr().err


def test_metrics_writes_behavioural_files(tiny_run, tiny_benchmark_dir):
    assert fks("judge", tiny_run, "--benchmark", tiny_benchmark_dir) == 0
    assert fks("metrics", tiny_run) == 0
    out = tiny_run / "metrics"
    facts = read_jsonl(out / "behavioral_per_fact.jsonl")
    assert [f["fact_id"] for f in facts] == [f"fact_00000{i}" for i in range(1, 5)]
    for key in ("model", "fact_id", "bcs", "bes", "modal_cluster", "modal_correctness",
                "behavior_group", "valid_families"):
        assert all(key in f for f in facts), key
    f1 = facts[0]
    # France: 4 of 5 families say Paris, context abstains -> BCS 0.8 = tau_b: Stable Correct
    assert f1["bcs"] == pytest.approx(0.8) and f1["behavior_group"] == "Stable Correct"
    assert f1["behavior_group_by_tau"] == {"0.7": "Stable Correct", "0.8": "Stable Correct",
                                           "0.9": "Unstable"}
    assert f1["other_readings"]["without_anchor"]["bcs"] == pytest.approx(0.75)
    assert facts[1]["behavior_group"] == "Stable Wrong"  # Germany: Tokyo everywhere
    assert facts[3]["valid_families"] == ["anchor", "format", "paraphrase"]
    assert facts[3]["complete_family"] is False
    queries = read_jsonl(out / "behavioral_per_query.jsonl")
    assert len(queries) == len(read_jsonl(tiny_run / "judged.jsonl"))
    rev = [q for q in queries if q["use_for_reverse_analysis"]]
    assert rev and all(q["cluster_probability"] is None for q in rev)
    summary = read_json(out / "behavioral_model_summary.json")
    assert summary["primary_reading"] == "with_anchor"
    assert summary["readings"]["with_anchor"]["complete_family"]["fixed"]["all"]["n_facts"] == 3
    assert summary["readings"]["with_anchor"]["full_set"]["fixed"]["all"]["n_facts"] == 4
    assert summary["reverse"]["all"]["n_queries"] == 1
    assert summary["recognition"]["all"]["n_queries"] == 4
    stage = read_json(tiny_run / "evaluation_manifest.json")["stages"]["metrics_behavior"]
    assert stage["outputs"]["behavioral_per_fact.jsonl"] == sha256_file(
        out / "behavioral_per_fact.jsonl")


def test_metrics_bad_inputs_exit_2(tiny_run, tiny_benchmark_dir, capsys):
    assert fks("judge", tiny_run, "--benchmark", tiny_benchmark_dir) == 0
    assert fks("metrics", tiny_run, "--part", "nonsense") == 2
    assert "unknown part" in capsys.readouterr().err
    drop_provenance(tiny_run)  # the row reader, not the chain check, must meet the edit
    path = tiny_run / "judged.jsonl"
    lines = path.read_text().splitlines()
    lines[2] = json.dumps({**json.loads(lines[2]), "correctness": "MAYBE"})
    path.write_text("\n".join(lines) + "\n")
    assert fks("metrics", tiny_run, "--part", "behavior") == 2
    assert "judged.jsonl:3: field 'correctness'" in capsys.readouterr().err


def test_metrics_rejects_inconsistent_cluster_correctness(tiny_run, tiny_benchmark_dir, capsys):
    assert fks("judge", tiny_run, "--benchmark", tiny_benchmark_dir) == 0
    drop_provenance(tiny_run)  # the row reader, not the chain check, must meet the edit
    path = tiny_run / "judged.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    rows[1]["correctness"] = "INCORRECT"  # fact 1 paraphrase, cluster ENTITY_Q90 is CORRECT
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    assert fks("metrics", tiny_run) == 2
    assert "judged.jsonl:2: field 'correctness'" in capsys.readouterr().err


def test_agreement_against_itself_and_a_human_sample(tiny_run, tiny_benchmark_dir, tmp_path,
                                                     capsys):
    assert fks("judge", tiny_run, "--benchmark", tiny_benchmark_dir) == 0
    judged = tiny_run / "judged.jsonl"
    assert fks("judge", "agreement", judged, judged) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["correctness"]["accuracy"] == 1.0
    assert report["correctness"]["cohen_kappa"] == pytest.approx(1.0)
    assert report["cluster_equivalence"]["accuracy"] == 1.0

    rows = read_jsonl(judged)
    human = []
    for r in rows[:10]:  # relabelled cluster ids, one disagreement on correctness
        human.append({"query_id": r["query_id"], "cluster_id": "H-" + r["cluster_id"][::-1],
                      "correctness": r["correctness"]})
    human[0]["correctness"] = "INCORRECT" if rows[0]["correctness"] == "CORRECT" else "CORRECT"
    human.append({"query_id": "query_77777777", "correctness": "CORRECT"})  # not in A
    sample = tmp_path / "human.jsonl"
    sample.write_text("".join(json.dumps(h) + "\n" for h in human))
    out = tmp_path / "agreement.json"
    assert fks("judge", "agreement", judged, sample, "--out", out) == 0
    report = read_json(out)
    assert report["n_overlap"] == 10
    assert report["extraction"]["n"] == 0  # the sample has no extracted answers
    assert report["cluster_equivalence"]["accuracy"] == 1.0  # same partition, other names
    assert report["correctness"]["accuracy"] == pytest.approx(0.9)
    assert report["correctness"]["cohen_kappa"] < 1.0


def test_agreement_bad_sample_exits_2(tiny_run, tiny_benchmark_dir, tmp_path: Path, capsys):
    assert fks("judge", tiny_run, "--benchmark", tiny_benchmark_dir) == 0
    sample = tmp_path / "human.jsonl"
    sample.write_text('{"query_id": "query_00000001", "correctness": "RIGHT"}\n')
    assert fks("judge", "agreement", tiny_run / "judged.jsonl", sample) == 2
    assert "human.jsonl:1: field 'correctness'" in capsys.readouterr().err
