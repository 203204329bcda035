"""Both round trips offline on the tiny model over a slice of the demo benchmark.

``fks export`` -> ``lm_eval`` / ``inspect eval`` (real tools, subprocesses, the tiny local
model) -> ``fks import``: the imported texts must equal ``fks generate``'s, query by query,
byte for byte. Skipped, with the reason, when ``fks[lmeval]`` / ``fks[inspect]`` is not
installed.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fks.configs import load_configs
from fks.data.load import load_benchmark
from fks.demo.benchmark import build_demo_benchmark
from fks.io import read_jsonl
from fks.pipeline._context import limit_facts

pytestmark = pytest.mark.slow
CFG = load_configs()


def _need(module: str, extra: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install 'fks[{extra}]')")


def _env() -> dict[str, str]:
    return dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
                TRANSFORMERS_OFFLINE="1", INSPECT_DISPLAY="plain", NO_COLOR="1",
                OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")


def _tool(args: list[str], cwd: Path) -> None:
    done = subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=420)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])


@pytest.fixture(scope="module")
def slice_and_reference(tmp_path_factory, tiny_model_dir):
    """Two demo facts (all their queries) and ``fks generate``'s texts on the tiny model."""
    from fks.generate.backends import make_backend
    from fks.generate.runner import generate_run

    root = tmp_path_factory.mktemp("roundtrip")
    demo = load_benchmark(build_demo_benchmark(root / "demo", configs=CFG))
    bench = load_benchmark(limit_facts(demo, 2, root / "slice"))
    backend = make_backend("hf", str(tiny_model_dir), configs=CFG, device="cpu")
    generate_run(bench, root / "fks", model="tiny", model_path=str(tiny_model_dir),
                 configs=CFG, backend=backend, batch_size=8)
    ref = [(r["query_id"], r["raw_response"]) for r in read_jsonl(root / "fks" /
                                                                  "generations.jsonl")]
    assert len(ref) == len(bench.queries) and len(ref) >= 20
    # non-trivial texts: equality below is not empty == empty
    assert sum(bool(t.strip()) for _, t in ref) > len(ref) // 2
    return root, bench, ref


def _imported(run: Path) -> list[tuple[str, str]]:
    return [(r["query_id"], r["raw_response"]) for r in read_jsonl(run / "generations.jsonl")]


def test_lmeval_round_trip_equals_fks_generate(slice_and_reference, tiny_model_dir):
    _need("lm_eval", "lmeval")
    _need("accelerate", "lmeval")
    from fks.interop.lmeval import export_lmeval, import_lmeval

    root, bench, ref = slice_and_reference
    task = export_lmeval(bench, root / "lm_task", configs=CFG)
    _tool([sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args",
           f"pretrained={tiny_model_dir},max_length=216,dtype=float32", "--device", "cpu",
           "--include_path", str(task), "--tasks", "fks_stability", "--batch_size", "1",
           "--output_path", str(root / "lm_out"), "--log_samples"], root)
    samples = sorted((root / "lm_out").glob("*/samples_fks_stability_*.jsonl"))
    assert len(samples) == 1
    import_lmeval(samples[0], bench, root / "runs" / "from-lmeval", configs=CFG)
    got = _imported(root / "runs" / "from-lmeval")
    assert [q for q, _ in got] == [q for q, _ in ref]
    diff = [(q, a, b) for (q, a), (_, b) in zip(ref, got, strict=True) if a != b]
    assert not diff, diff[:3]


def test_inspect_round_trip_equals_fks_generate(slice_and_reference, tiny_model_dir, tmp_path):
    _need("inspect_ai", "inspect")
    from inspect_ai.log import read_eval_log, write_eval_log
    from inspect_ai.model import ChatMessageSystem

    from fks.errors import FksInputError
    from fks.interop.inspect_ai import export_inspect, import_inspect

    root, bench, ref = slice_and_reference
    task = export_inspect(bench, root / "inspect_task", configs=CFG)
    # Inspect takes the task file relative to the working directory (it refuses absolute
    # glob patterns)
    _tool([sys.executable, "-m", "inspect_ai", "eval", "inspect_task/fks_stability.py",
           "--model", "hf/tiny", "-M", f"model_path={tiny_model_dir}", "-M", "device=cpu",
           "--model-config", str(task / "hf_model_config.yaml"),
           "--log-dir", "inspect_logs", "--display", "plain"], root)
    logs = sorted((root / "inspect_logs").glob("*.eval"))
    assert len(logs) == 1
    import_inspect(logs[0], bench, root / "runs" / "from-inspect", configs=CFG)
    got = _imported(root / "runs" / "from-inspect")
    assert [q for q, _ in got] == [q for q, _ in ref]
    diff = [(q, a, b) for (q, a), (_, b) in zip(ref, got, strict=True) if a != b]
    assert not diff, diff[:3]

    # refusals on edited copies of the real log
    def edited(name: str, change) -> Path:
        ev = read_eval_log(str(logs[0]))
        change(ev)
        path = tmp_path / f"{name}.eval"
        write_eval_log(ev, str(path))
        return path

    def no_template(ev):
        ev.eval.model_args.pop("chat_template")

    def other_prompt(ev):
        ev.samples[2].input = "user: " + ev.samples[2].input

    def missing(ev):
        ev.samples = ev.samples[1:]

    def hot(ev):  # `inspect eval --temperature 0.7`
        ev.eval.model_generate_config.temperature = 0.7

    def system(ev):
        ev.samples[0].messages.insert(0, ChatMessageSystem(content="Be brief."))

    for name, change, field in (("template", no_template, "eval.model_args.chat_template"),
                                ("prompt", other_prompt, "samples.input"),
                                ("missing", missing, "query_id"),
                                ("hot", hot, "eval.model_generate_config.temperature"),
                                ("system", system, "samples.messages")):
        with pytest.raises(FksInputError) as exc:
            import_inspect(edited(name, change), bench, tmp_path / name, configs=CFG)
        assert exc.value.field == field, str(exc.value)
        assert not (tmp_path / name / "generations.jsonl").exists()
