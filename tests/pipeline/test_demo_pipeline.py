"""``fks demo`` end to end at reduced size: small demo model, a few facts, every stage."""

from __future__ import annotations

import functools

import pytest

from fks.configs import load_configs
from fks.demo.model import INFO_NAME, DemoModelConfig
from fks.demo.run import DEMO_MODEL_NAME, run_demo
from fks.io import read_json
from fks.pipeline import STAGE_NAMES

#: trains in a few seconds; 3 blocks, so the J-Lens window holds a layer below the top one
SMALL = DemoModelConfig(n_layers=3, hidden=48, n_heads=2, n_kv_heads=2, intermediate=96,
                        vocab_size=600, steps=40, batch_size=32, warmup_steps=4)
KNOBS = {"model_config": SMALL, "limit": 30, "jlens_prompts": 12}



def test_fks_demo_runs_every_stage_and_reuses_its_cache(tmp_path, monkeypatch, capsys):
    from fks.cli import main

    cache = tmp_path / "cache"
    small_demo = functools.partial(run_demo, cache_dir=cache, **KNOBS)
    monkeypatch.setattr("fks.demo.run.run_demo", small_demo)
    out = tmp_path / "demo"
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--out", str(out)])
    assert exc.value.code == 0
    run_dir = out / "runs" / DEMO_MODEL_NAME
    report = run_dir / "report.html"
    # the headline and the report path are results: stdout (logs stay on stderr)
    assert report.is_file() and f"report: {report}" in capsys.readouterr().out
    (model_dir,) = [p for p in cache.iterdir()]
    info = read_json(model_dir / INFO_NAME)
    assert info["config"] == SMALL.to_dict() and info["training"]["n_examples"] > 100
    manifest = read_json(run_dir / "evaluation_manifest.json")
    assert manifest["model"]["path"] == str(model_dir)
    stages = manifest["pipeline"]["stages"]
    assert {n for n, r in stages.items() if r["status"] == "complete"} == set(STAGE_NAMES)
    assert (out / "benchmark" / "validation_report.json").is_file()

    # second time: the cached model, and every stage up to date
    import fks.demo.model._cache as cache_mod

    def no_training(*args, **kwargs):
        raise AssertionError("the cached demo model was not reused")

    monkeypatch.setattr(cache_mod, "train_demo_model", no_training)
    again = run_demo(out, configs=load_configs(), cache_dir=cache, **KNOBS)
    assert again.model_dir == model_dir and again.report == report
    assert set(again.headline["figures"]) >= {"anchor_accuracy", "iss"}
    # BCS is there exactly when the (small, briefly trained) demo model has scorable answers
    beh = read_json(run_dir / "metrics" / "behavioral_model_summary.json")
    block = beh["readings"][beh["primary_reading"]]["complete_family"]["fixed"]["all"]
    assert ("bcs" in again.headline["figures"]) == (block["n_scorable"] > 0)
    for key, fig in again.headline["figures"].items():
        assert fig["low"] is None or fig["low"] <= fig["point"] <= fig["high"], key
    after = read_json(run_dir / "evaluation_manifest.json")["pipeline"]["stages"]
    assert {n: r["finished_at"] for n, r in after.items()} == \
        {n: r["finished_at"] for n, r in stages.items()}  # nothing ran again


    # another limit: the demo's own run folder is started anew (generate would refuse it)
    import fks.pipeline as pipeline

    marker = run_dir / "marker.txt"
    marker.write_text("old run")
    monkeypatch.setattr(pipeline, "run_pipeline",
                        lambda ctx, **kw: pipeline.PipelineResult(ctx.run_dir))
    run_demo(out, configs=load_configs(), cache_dir=cache, **{**KNOBS, "limit": 31})
    assert not marker.exists()
    assert read_json(out / "demo.json")["limit"] == 31
