"""``fks launch``: shard tasks (locally and on a 2-CPU Ray instance), retries, merges, resume."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fks.cli import main
from fks.configs import load_configs
from fks.errors import FksInputError
from fks.io import read_json
from fks.pipeline import PipelineContext, PipelineOptions, run_pipeline
from fks.scale.launch import (
    FAULT_DIR_ENV,
    FAULT_ENV,
    LaunchSettings,
    LocalExecutor,
    launch,
    run_shard_task,
    task_payload,
)
from fks.scale.sweep import sweep
from tiny_benchmark import tiny_benchmark_rows, write_benchmark

CFG = load_configs()
# batch 1: a prompt's numbers do not depend on the batch it is in, so shards match exactly
OPTIONS = PipelineOptions(device="cpu", batch_size=1, kts_bootstrap=False, jlens_prompts=8)
SWEEP_STAGES = ["generate", "score", "judge", "metrics_behavior", "calibrate", "bootstrap"]
SHARDED_FILES = ("generations.jsonl", "scored.jsonl", "judged.jsonl", "hidden/index.jsonl",
                 "hidden/layer_002.npy")


def _ctx(runs: Path, bench: Path, model: Path, name: str = "tiny") -> PipelineContext:
    return PipelineContext.create(runs_dir=runs, model=name, model_path=str(model),
                                  benchmark=bench, configs=CFG, options=OPTIONS)


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    return write_benchmark(tmp_path_factory.mktemp("launch") / "bench", *tiny_benchmark_rows())


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory, bench, scale_model_dir):
    """The same model run by ``fks run`` in one process (the reference)."""
    ctx = _ctx(tmp_path_factory.mktemp("one"), bench, scale_model_dir)
    run_pipeline(ctx)
    return ctx.run_dir


def _same(a: Path, b: Path, names=SHARDED_FILES) -> None:
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_local_launch_retries_a_failed_task_and_equals_the_unsharded_run(
        tmp_path, bench, scale_model_dir, unsharded, monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "generate:2")
    monkeypatch.setenv(FAULT_DIR_ENV, str(tmp_path / "faults"))
    ctx = _ctx(tmp_path / "runs", bench, scale_model_dir)
    result = launch(ctx, LaunchSettings(shards=2), LocalExecutor(max_retries=1))
    assert (tmp_path / "faults/fault_generate_2").is_file()  # the first attempt failed
    attempts = {(t["stage"], t["shard"]): t["attempts"] for t in result.tasks}
    assert attempts == {("generate", 1): 1, ("generate", 2): 2, ("extract", 1): 1,
                        ("extract", 2): 1, ("judge", 1): 1, ("judge", 2): 1}
    assert result.merged == {"generate": 28, "extract": 22, "judge": 28}
    # the sharded stages were adopted: the final pipeline pass skipped them and ran the rest
    assert {"generate", "score", "judge", "extract"} <= set(result.pipeline.skipped)
    assert set(result.pipeline.ran) == {"metrics_behavior", "jlens", "metrics_internal",
                                        "calibrate", "bootstrap", "report"}
    _same(ctx.run_dir, unsharded)
    _same(ctx.run_dir, unsharded, ("metrics/behavioral_per_fact.jsonl",
                                   "metrics/calibration_per_query.jsonl"))
    assert (ctx.run_dir / "report.html").is_file()
    # a second launch finds every stage up to date: no task, nothing run
    again = launch(_ctx(tmp_path / "runs", bench, scale_model_dir), LaunchSettings(shards=2),
                   LocalExecutor(max_retries=0))
    assert again.tasks == [] and again.pipeline.ran == []


def test_a_task_that_keeps_failing_stops_the_launch(tmp_path, bench, scale_model_dir,
                                                    monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "extract:1")
    monkeypatch.setenv(FAULT_DIR_ENV, str(tmp_path / "faults"))
    ctx = _ctx(tmp_path / "runs", bench, scale_model_dir)
    with pytest.raises(RuntimeError, match=r"extract 1/2 failed after 1 attempt.*injected"):
        launch(ctx, LaunchSettings(shards=2, stages=("generate", "extract")),
               LocalExecutor(max_retries=0))
    assert not (ctx.run_dir / "generations.jsonl").exists()  # no merge after a failed wave


def test_bad_input_is_returned_not_retried(tmp_path, bench, scale_model_dir):
    ctx = _ctx(tmp_path / "runs", bench, scale_model_dir)
    out = run_shard_task(task_payload(ctx), "judge", 1, 2)  # no scored.jsonl yet
    assert "scored.jsonl" in out["input_error"] and "not found" in out["input_error"]
    with pytest.raises(FksInputError, match="5 shards for 4 facts"):
        launch(ctx, LaunchSettings(shards=5), LocalExecutor())
    (ctx.run_dir / "shards/shard_1_of_3").mkdir(parents=True)
    with pytest.raises(FksInputError, match=r"split into \[3\] shard"):
        launch(ctx, LaunchSettings(shards=2), LocalExecutor())
    with pytest.raises(FksInputError, match="shards"):
        LaunchSettings(shards=0)


def test_launch_cli_without_ray_runs_locally(tmp_path, bench, scale_model_dir, unsharded):
    with pytest.raises(SystemExit) as exc:
        main(["launch", "--model", "tiny", "--model-path", str(scale_model_dir), "--benchmark",
              str(bench), "--out", str(tmp_path / "runs"), "--shards", "2", "--device", "cpu",
              "--batch-size", "1", "--stages", "generate,score,judge"])
    assert exc.value.code == 0
    _same(tmp_path / "runs/tiny", unsharded, ("generations.jsonl", "judged.jsonl"))
    with pytest.raises(SystemExit) as exc:
        main(["launch", "--model", "tiny", "--model-path", str(scale_model_dir), "--benchmark",
              str(bench), "--out", str(tmp_path / "runs"), "--shards", "2",
              "--address", "auto"])
    assert exc.value.code == 2  # --address needs --ray


def test_ray_launch_on_a_local_two_cpu_instance(tmp_path, bench, scale_model_dir, unsharded,
                                                scale_model_b_dir, monkeypatch):
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'fks[ray]')")
    monkeypatch.setenv(FAULT_ENV, "generate:1")
    monkeypatch.setenv(FAULT_DIR_ENV, str(tmp_path / "faults"))
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    from fks.scale.ray_executor import RayExecutor

    executor = RayExecutor(num_cpus=2, max_retries=1)
    try:
        ctx = _ctx(tmp_path / "runs", bench, scale_model_dir)
        result = launch(ctx, LaunchSettings(shards=2, stages=("generate", "score", "judge",
                                                                "extract")), executor)
        # the same instance runs a sweep with one task per model, both models at once
        models = tmp_path / "models.yaml"
        models.write_text(f"- {{name: tiny, model_path: '{scale_model_dir}'}}\n"
                          f"- {{name: mb, model_path: '{scale_model_b_dir}'}}\n")
        swept = sweep(models, bench, tmp_path / "sweep", configs=CFG, options=OPTIONS,
                      stages=SWEEP_STAGES, parallel=executor.run_models)
    finally:
        executor.close()
    assert not ray.is_initialized()  # the executor shut down the instance it started
    assert (tmp_path / "faults/fault_generate_1").is_file()  # failed once, then retried
    assert len(result.tasks) == 6 and result.executor == "ray"
    assert all(t["pid"] != os.getpid() for t in result.tasks)  # ran in Ray worker processes
    assert result.merged == {"generate": 28, "extract": 22, "judge": 28}
    _same(ctx.run_dir, unsharded)
    man = read_json(ctx.run_dir / "evaluation_manifest.json")
    assert man["pipeline"]["stages"]["generate"]["reason"] == "sharded 2 (ray)"
    assert swept.ran == ["tiny", "mb"] and swept.stages_ran["mb"] == SWEEP_STAGES
    assert swept.leaderboard is not None and swept.leaderboard.is_file()
    _same(tmp_path / "sweep/tiny", unsharded, ("generations.jsonl", "judged.jsonl"))


def test_ray_missing_says_how_to_install(tmp_path, bench, scale_model_dir, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if absent
    from fks.scale.ray_executor import RayExecutor

    with pytest.raises(FksInputError, match=r"pip install 'fks\[ray\]'"):
        RayExecutor(num_cpus=1)
    with pytest.raises(SystemExit) as exc:
        main(["launch", "--ray", "--model", "tiny", "--model-path", str(scale_model_dir),
              "--benchmark", str(bench), "--out", str(tmp_path / "runs"), "--shards", "2"])
    assert exc.value.code == 2
    assert not (tmp_path / "runs").exists()  # refused before any work
    models = tmp_path / "m.yaml"
    models.write_text(f"- {{name: a, model_path: '{scale_model_dir}'}}\n", encoding="utf-8")
    for flags in (["--parallel-models"], ["--ray", "--parallel-models", "--shards", "2"]):
        with pytest.raises(FksInputError, match="--parallel-models needs --ray"):
            from fks.scale.cli import sweep_cmd

            sweep_cmd(models, str(bench), out=tmp_path / "runs", parallel_models=True,
                      ray="--ray" in flags, shards=2 if "--shards" in flags else 1)
        with pytest.raises(SystemExit) as exc:
            main(["sweep", str(models), "--benchmark", str(bench), *flags])
        assert exc.value.code == 2
    assert not (tmp_path / "runs").exists()  # refused before any work


_SLOW_FIRST_ATTEMPT = """
import json, sys, time
from fks.runlock import run_dir_lock
from fks.scale.launch import run_shard_task
payload = json.load(open(sys.argv[1]))
with run_dir_lock(payload["run_dir"], shard=(1, 2)):
    print("started", flush=True)
    time.sleep(2.0)  # the injected slowness: the driver gives up on this attempt and retries
    print(json.dumps(run_shard_task(payload, "generate", 1, 2)), flush=True)
"""


def test_a_retry_while_the_first_attempt_still_runs_doubles_no_record(
        tmp_path, bench, scale_model_dir):
    """Issue 14: a retried shard task queues behind its living first attempt, then resumes."""
    import json
    import subprocess
    import sys

    ctx = _ctx(tmp_path / "runs", bench, scale_model_dir)
    payload = task_payload(ctx)
    (tmp_path / "payload.json").write_text(json.dumps(payload))
    first = subprocess.Popen([sys.executable, "-c", _SLOW_FIRST_ATTEMPT,
                              str(tmp_path / "payload.json")], stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "started"
        retry = run_shard_task(payload, "generate", 1, 2)  # while the first attempt lives
        assert first.wait(timeout=300) == 0
        first_out = json.loads(first.stdout.read().strip().splitlines()[-1])
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=10)
    assert first_out["written"] == first_out["records"] > 0
    assert retry["records"] == first_out["records"] and retry["written"] == 0
    gen = ctx.run_dir / "shards/shard_1_of_2/generations.jsonl"
    ids = [json.loads(x)["query_id"] for x in gen.read_text().split("\n") if x]
    assert len(ids) == len(set(ids)) == first_out["records"]
