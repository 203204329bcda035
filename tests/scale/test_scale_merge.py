"""``fks merge`` refuses gaps: a missing shard, doubled or lost records, another config."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fks.cli import main
from fks.configs import load_configs
from fks.errors import FksInputError
from fks.generate.backends import make_backend
from fks.generate.runner import generate_run
from fks.hidden.extract import extract_hidden
from fks.io import read_json
from fks.judge import judge_run, make_judge
from fks.scale.merge import merge_run, verify_run
from fks.score import score_run
from tiny_benchmark import tiny_benchmark_rows, write_benchmark

CFG = load_configs()


def _short(cfg, max_new):
    gen = cfg.models.generation.model_copy(update={"max_new_tokens": max_new})
    return cfg.model_copy(update={"models": cfg.models.model_copy(update={"generation": gen})})


@pytest.fixture(scope="module")
def backend(scale_model_dir):
    return make_backend("hf", str(scale_model_dir), configs=CFG, device="cpu")


def _generate(bench, run, backend, shard, cfg=CFG):
    return generate_run(bench, run, model="tiny", model_path="tiny-path", configs=cfg,
                        backend=backend, shard=shard, batch_size=4)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, backend):
    """RUN with 2 shards of generations, hidden states and judgements (all consistent)."""
    root = tmp_path_factory.mktemp("merge")
    bench = write_benchmark(root / "bench", *tiny_benchmark_rows())
    run = root / "run"
    for i in (1, 2):
        _generate(bench, run, backend, (i, 2))
        extract_hidden(run, _bench(bench), backend.model, backend.tokenizer, model_name="tiny",
                       shard=(i, 2), batch_size=4)
    merge_run(run, stages=["generate"])
    score_run(run, bench, configs=CFG)
    for i in (1, 2):
        judge_run(run, bench, make_judge("alias", configs=CFG), shard=(i, 2))
    (run / "generations.jsonl").unlink()  # the tests merge again from the shards
    return bench, run


def _bench(path):
    from fks.data.load import load_benchmark

    return load_benchmark(path)


@pytest.fixture
def run(pristine, tmp_path):
    bench, src = pristine
    dst = tmp_path / "run"
    shutil.copytree(src, dst)
    return bench, dst


def _merge_exit(run_dir: Path) -> int:
    with pytest.raises(SystemExit) as exc:
        main(["merge", str(run_dir)])
    return exc.value.code


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")


def test_a_consistent_run_merges_every_stage(run):
    _, run_dir = run
    assert _merge_exit(run_dir) == 0
    assert (run_dir / "generations.jsonl").is_file() and (run_dir / "judged.jsonl").is_file()
    assert read_json(run_dir / "hidden/meta.json")["merged_from_shards"] == 2


def test_missing_shard_exits_2_and_names_it(run):
    _, run_dir = run
    shutil.rmtree(run_dir / "shards/shard_2_of_2")
    assert _merge_exit(run_dir) == 2
    with pytest.raises(FksInputError, match=r"missing shard\(s\) 2/2"):
        merge_run(run_dir)


def test_doubled_records_are_listed_per_stage_and_nothing_is_written(run):
    _, run_dir = run
    s1, s2 = (run_dir / f"shards/shard_{i}_of_2" for i in (1, 2))
    gen_row = _lines(s1 / "generations.jsonl")[0]
    judged_row = _lines(s1 / "judged.jsonl")[-1]
    _write(s2 / "generations.jsonl", [*_lines(s2 / "generations.jsonl"), gen_row])
    _write(s2 / "judged.jsonl", [*_lines(s2 / "judged.jsonl"), judged_row])
    assert _merge_exit(run_dir) == 2
    with pytest.raises(FksInputError) as exc:
        merge_run(run_dir)
    msg = str(exc.value)
    assert f"generate: 1 recorded twice: {json.loads(gen_row)['query_id']}" in msg
    assert f"judge: 1 recorded twice: {json.loads(judged_row)['query_id']}" in msg
    assert "no longer has the sha256" in msg  # the shard files changed after they finished
    assert not (run_dir / "generations.jsonl").exists()  # verified first, nothing written
    assert not (run_dir / "judged.jsonl").exists()
    assert not (run_dir / "hidden").exists()


def test_lost_records_are_gaps(run):
    _, run_dir = run
    s2 = run_dir / "shards/shard_2_of_2"
    gen, judged = _lines(s2 / "generations.jsonl"), _lines(s2 / "judged.jsonl")
    _write(s2 / "generations.jsonl", gen[:-2])
    _write(s2 / "judged.jsonl", judged[1:])
    _, problems = verify_run(run_dir)
    lost_gen = sorted(json.loads(x)["query_id"] for x in gen[-2:])
    assert any(p.startswith("generate: 2 missing: ") and all(q in p for q in lost_gen)
               for p in problems)
    assert f"judge: 1 missing: {json.loads(judged[0])['query_id']}" in problems
    assert _merge_exit(run_dir) == 2


def test_a_record_in_the_wrong_shard_is_a_gap(run):
    _, run_dir = run
    s1, s2 = (run_dir / f"shards/shard_{i}_of_2" for i in (1, 2))
    rows = _lines(s1 / "judged.jsonl")
    _write(s1 / "judged.jsonl", rows[1:])
    _write(s2 / "judged.jsonl", [*_lines(s2 / "judged.jsonl"), rows[0]])
    _, problems = verify_run(run_dir, stages=["judge"])
    assert f"judge: 1 in the wrong shard: {json.loads(rows[0])['query_id']}" in problems


def test_mismatched_generation_config_is_refused(run, backend):
    bench, run_dir = run
    shutil.rmtree(run_dir / "shards/shard_2_of_2/")
    _generate(bench, run_dir, backend, (2, 2), cfg=_short(CFG, 5))
    with pytest.raises(FksInputError, match="disagrees with shard 1/2 on generation_config"):
        merge_run(run_dir, stages=["generate"])


def test_mismatched_judge_and_hidden_identity_are_refused(run):
    _, run_dir = run
    man = run_dir / "shards/shard_2_of_2/evaluation_manifest.json"
    data = read_json(man)
    data["stages"]["judge"]["judge"]["name"] = "another-judge"
    man.write_text(json.dumps(data), encoding="utf-8")
    meta = run_dir / "shards/shard_2_of_2/hidden/meta.json"
    data = read_json(meta)
    data["layers"] = data["layers"][:2]
    meta.write_text(json.dumps(data), encoding="utf-8")
    _, problems = verify_run(run_dir)
    assert any(p.startswith("judge: shard 2/2 disagrees") and "stages.judge.judge" in p
               for p in problems)
    assert any(p.startswith("extract: shard 2/2 disagrees") and "on layers" in p
               for p in problems)
    assert _merge_exit(run_dir) == 2


def test_a_changed_hidden_array_fails_its_checksum(run):
    import numpy as np

    _, run_dir = run
    path = run_dir / "shards/shard_1_of_2/hidden/layer_002.npy"
    arr = np.load(path, allow_pickle=False)
    arr[0, 0] += 1
    np.save(path, arr)
    _, problems = verify_run(run_dir, stages=["extract"])
    assert len(problems) == 1 and "extract: shard 1/2" in problems[0]
    assert "sha256 mismatch" in problems[0]


def test_a_changed_scored_file_invalidates_the_judge_shards(run):
    _, run_dir = run
    scored = run_dir / "scored.jsonl"
    _write(scored, _lines(scored)[:-1])
    _, problems = verify_run(run_dir, stages=["judge"])
    assert any("changed after the shards judged it" in p for p in problems)
    assert any(p.startswith("judge: 1 not selected") for p in problems)
