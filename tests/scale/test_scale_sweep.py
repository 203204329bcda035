"""``fks sweep``: two tiny models, finished runs skipped on rerun, one leaderboard."""

from __future__ import annotations

import pytest

from fks.cli import main
from fks.configs import load_configs
from fks.errors import FksInputError
from fks.io import read_json
from fks.pipeline import STAGE_NAMES, PipelineOptions
from fks.scale.sweep import LEADERBOARD_NAME, load_sweep, sweep
from tiny_benchmark import tiny_benchmark_rows, write_benchmark

CFG = load_configs()
OPTIONS = PipelineOptions(device="cpu", batch_size=8, kts_bootstrap=False, jlens_prompts=8)
# every stage but the per-model HTML report (the sweep writes the leaderboard instead)
STAGES = [s for s in STAGE_NAMES if s != "report"]


def _yaml(path, entries):
    lines = ["models:"]
    for name, model_path in entries:
        lines += [f"  - name: {name}", f"    model_path: {model_path}", "    backend: hf"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _finished_at(run):
    return {k: v["finished_at"] for k, v in
            read_json(run / "evaluation_manifest.json")["pipeline"]["stages"].items()}


def test_sweep_runs_two_models_skips_finished_runs_and_writes_the_leaderboard(
        tmp_path, scale_model_dir, scale_model_b_dir, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    bench = write_benchmark(tmp_path / "bench", *tiny_benchmark_rows())
    runs = tmp_path / "runs"
    models = _yaml(tmp_path / "models.yaml", [("tiny-a", scale_model_dir),
                                              ("tiny-b", scale_model_b_dir)])
    first = sweep(models, bench, runs, configs=CFG, options=OPTIONS, stages=STAGES)
    assert first.ran == ["tiny-a", "tiny-b"] and first.skipped == [] and not first.failed
    board = first.leaderboard
    assert board == runs / LEADERBOARD_NAME and board.is_file()
    html = board.read_text(encoding="utf-8")
    assert "tiny-a" in html and "tiny-b" in html
    tables = sorted(p.name for p in (runs / "leaderboard_tables").iterdir())
    assert any("leaderboard" in t for t in tables) and len(tables) >= 2  # board + deltas
    stamps = {m: _finished_at(runs / m) for m in ("tiny-a", "tiny-b")}

    # rerun: tiny-a is finished (skipped, untouched); tiny-b lost an output (that stage reruns,
    # the rest is kept); a broken third model fails without stopping the sweep
    (runs / "tiny-b" / "metrics/behavioral_per_fact.jsonl").unlink()
    board.unlink()
    models = _yaml(tmp_path / "models2.yaml", [("tiny-a", scale_model_dir),
                                               ("tiny-b", scale_model_b_dir),
                                               ("broken", tmp_path / "no-such-model")])
    with pytest.raises(FksInputError, match=r"1 of 3 model\(s\) failed; broken: "):
        sweep(models, bench, runs, configs=CFG, options=OPTIONS, stages=STAGES)
    assert (runs / "tiny-b" / "metrics/behavioral_per_fact.jsonl").is_file()
    assert _finished_at(runs / "tiny-a") == stamps["tiny-a"]  # nothing of tiny-a reran
    after = _finished_at(runs / "tiny-b")
    assert after["metrics_behavior"] != stamps["tiny-b"]["metrics_behavior"]
    kept = {k for k in after if after[k] == stamps["tiny-b"][k]}
    assert {"generate", "score", "judge", "extract", "jlens", "calibrate"} <= kept  # upstream
    assert board.is_file()  # written over the two finished runs
    again = sweep(_yaml(tmp_path / "models3.yaml", [("tiny-a", scale_model_dir),
                                                    ("tiny-b", scale_model_b_dir)]),
                  bench, runs, configs=CFG, options=OPTIONS, stages=STAGES, reference="tiny-b")
    assert again.skipped == ["tiny-a", "tiny-b"] and again.ran == [], again.stages_ran


def test_sweep_file_is_validated(tmp_path):
    bad = tmp_path / "bad.yaml"
    for text, field in [
        ("models:\n  - name: a\n    model_path: m\n    backend: tgi\n", "models.0.backend"),
        ("models:\n  - name: a/b\n    model_path: m\n", "models.0.name"),
        ("models:\n  - name: a\n    model_path: m\n    colour: red\n", "models.0.colour"),
        ("models:\n  - {name: a, model_path: m}\n  - {name: a, model_path: n}\n", "models"),
        ("models: []\n", "models"),
    ]:
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(FksInputError) as exc:
            load_sweep(bad)
        assert exc.value.field == field and exc.value.path == str(bad)
    good = tmp_path / "good.yaml"
    good.write_text("- {name: a, model_path: m, backend: vllm, batch_size: 512,\n"
                    "   backend_options: {tensor_parallel_size: 2}}\n", encoding="utf-8")
    entry = load_sweep(good).models[0]
    opts = entry.options(PipelineOptions(judge="alias"))
    assert (opts.backend, opts.batch_size, opts.backend_options, opts.judge) == (
        "vllm", 512, {"tensor_parallel_size": 2}, "alias")


def test_sweep_cli_exits_2_on_a_bad_file_or_reference(tmp_path, tiny_benchmark_dir):
    bad = tmp_path / "bad.yaml"
    bad.write_text("models:\n  - name: a\n", encoding="utf-8")
    for args in (["sweep", str(bad), "--benchmark", str(tiny_benchmark_dir)],
                 ["sweep", str(_yaml(tmp_path / "m.yaml", [("a", "m")])), "--benchmark",
                  str(tiny_benchmark_dir), "--reference", "zzz", "--out", str(tmp_path / "r")]):
        with pytest.raises(SystemExit) as exc:
            main(args)
        assert exc.value.code == 2
