"""fks export/import lm-eval|inspect without the tools: files written, checks, refusals, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer

from fks.cli import app, main
from fks.configs import load_configs
from fks.data.load import load_benchmark
from fks.generate.prompts import PROMPT_VERSION, build_prompt
from fks.interop.inspect_ai import IDENTITY_TEMPLATE, export_inspect
from fks.interop.lmeval import export_lmeval, import_lmeval
from fks.io import read_jsonl

CFG = load_configs()


def _cli(*args: str) -> int:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return exc.value.code


def test_contract_commands_are_registered():
    group = typer.main.get_command(app)
    for verb in ("export", "import"):
        assert {"lm-eval", "inspect"} <= set(group.commands[verb].commands)


def test_export_lmeval_writes_exact_prompts_and_greedy_settings(tiny_benchmark_dir, tmp_path):
    assert _cli("export", "lm-eval", str(tiny_benchmark_dir), str(tmp_path / "t")) == 0
    bench = load_benchmark(tiny_benchmark_dir)
    rows = read_jsonl(tmp_path / "t" / "fks_queries.jsonl")
    assert [r["query_id"] for r in rows] == [q.query_id for q in bench.queries]
    assert [r["prompt"] for r in rows] == [build_prompt(q) for q in bench.queries]
    assert {r["prompt_version"] for r in rows} == {PROMPT_VERSION}
    task = (tmp_path / "t" / "fks_stability.yaml").read_text()
    for line in ("task: fks_stability", "output_type: generate_until", "num_fewshot: 0",
                 "  until: []", "  max_gen_toks: 24", "  do_sample: false"):
        assert line in task.splitlines()
    utils = (tmp_path / "t" / "utils.py").read_text()
    compile(utils, "utils.py", "exec")  # the generated helper is valid Python
    assert 'return doc["prompt"]' in utils


def test_export_inspect_writes_task_samples_and_identity_template(tiny_benchmark_dir, tmp_path):
    import yaml

    assert _cli("export", "inspect", str(tiny_benchmark_dir), str(tmp_path / "t")) == 0
    bench = load_benchmark(tiny_benchmark_dir)
    rows = read_jsonl(tmp_path / "t" / "fks_samples.jsonl")
    assert [r["prompt"] for r in rows] == [build_prompt(q) for q in bench.queries]
    compile((tmp_path / "t" / "fks_stability.py").read_text(), "fks_stability.py", "exec")
    args = yaml.safe_load((tmp_path / "t" / "hf_model_config.yaml").read_text())
    assert args == {"chat_template": IDENTITY_TEMPLATE, "do_sample": False}
    # the identity template renders the prompt verbatim, with nothing around it
    from jinja2 import Template

    prompt = rows[0]["prompt"]
    assert Template(IDENTITY_TEMPLATE).render(
        messages=[{"role": "user", "content": prompt}]) == prompt


def _fake_samples(bench, path: Path, *, edit=None) -> Path:
    """An lm-eval --log_samples file as lm-eval writes it for the exported task."""
    lines = []
    for i, q in enumerate(bench.queries):
        doc = {"query_id": q.query_id, "fact_id": q.fact_id, "relation": q.relation,
               "condition_family": q.condition_family, "prompt": build_prompt(q),
               "prompt_version": PROMPT_VERSION}
        row = {"doc_id": i, "doc": doc, "target": "", "arguments": {"gen_args_0": {
            "arg_0": build_prompt(q), "arg_1": {"until": [], "max_gen_toks": 24,
                                                "do_sample": False, "temperature": 0.0}}},
            "resps": [[f" answer {i}\n  with spaces "]], "filtered_resps": [f"answer {i}"]}
        lines.append(row)
    if edit:
        lines = edit(lines)
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return path


def test_import_lmeval_keeps_raw_texts_and_fks_run_skips_generate(tiny_benchmark_dir,
                                                                   tmp_path):
    from fks.pipeline import PipelineContext, run_pipeline

    bench = load_benchmark(tiny_benchmark_dir)
    samples = _fake_samples(bench, tmp_path / "samples.jsonl")
    run = tmp_path / "runs" / "imported-model"
    assert _cli("import", "lm-eval", str(samples), "--benchmark", str(tiny_benchmark_dir),
                "--out", str(run)) == 0
    recs = read_jsonl(run / "generations.jsonl")
    assert [r["query_id"] for r in recs] == [q.query_id for q in bench.queries]
    assert [r["raw_response"] for r in recs] == [
        f" answer {i}\n  with spaces " for i in range(len(recs))]  # resps, not filtered_resps
    assert {r["prompt_version"] for r in recs} == {PROMPT_VERSION}
    assert {r["model"] for r in recs} == {"imported-model"}
    manifest = json.loads((run / "evaluation_manifest.json").read_text())
    assert manifest["stages"]["generate"]["status"] == "complete"
    assert manifest["stages"]["generate"]["imported"]["tool"] == "lm-eval"
    # fks run continues from score: generate is up to date although no model can be loaded
    ctx = PipelineContext.create(runs_dir=tmp_path / "runs", model="imported-model",
                                 model_path=str(tmp_path / "no-such-model"),
                                 benchmark=tiny_benchmark_dir, configs=CFG)
    result = run_pipeline(ctx, stages=["generate", "score"])
    assert result.skipped == ["generate"] and result.ran == ["score"]
    assert (run / "scored.jsonl").is_file()
    # a changed generations file is no longer the import: generate reruns (and needs the model)
    (run / "generations.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(Exception):  # noqa: B017 - the bogus model path cannot load
        run_pipeline(ctx, stages=["generate"])


def _drop(i):
    return lambda rows: rows[:i] + rows[i + 1:]


def _dup(i):
    return lambda rows: rows + [rows[i]]


def _set(i, key, value):
    def edit(rows):
        row = rows[i]
        target = row
        *path, last = key.split(".")
        for k in path:
            target = target[k]
        target[last] = value
        return rows
    return edit


@pytest.mark.parametrize("edit, line, field", [
    (_set(2, "doc.prompt_version", "other-prompt-v0"), 3, "doc.prompt_version"),
    (_set(1, "arguments.gen_args_0.arg_0", "user: What?\nAnswer:"), 2,
     "arguments.gen_args_0.arg_0"),
    (_set(0, "arguments.gen_args_0.arg_1.until", ["\n\n"]), 1,
     "arguments.gen_args_0.arg_1.until"),
    (_set(0, "arguments.gen_args_0.arg_1.max_gen_toks", 256), 1,
     "arguments.gen_args_0.arg_1.max_gen_toks"),
    (_set(0, "arguments.gen_args_0.arg_1.repetition_penalty", 1.3), 1,
     "arguments.gen_args_0.arg_1.repetition_penalty"),
    (_set(0, "arguments.gen_args_0.arg_1.do_sample", True), 1,
     "arguments.gen_args_0.arg_1.do_sample"),
    (_set(3, "doc.query_id", "query_99999999"), 4, "query_id"),
    (_dup(0), None, "query_id"),
    (_drop(0), None, "query_id"),
    (_set(0, "resps", [["a", "b"]]), 1, "resps"),
], ids=["prompt-version", "prompt-text", "stop-strings", "max-tokens", "extra-kwarg",
        "sampling", "unknown-id",
        "duplicate-id", "missing-id", "two-answers"])
def test_import_lmeval_refuses_with_exit_2(tiny_benchmark_dir, tmp_path, capsys, edit, line,
                                           field):
    bench = load_benchmark(tiny_benchmark_dir)
    samples = _fake_samples(bench, tmp_path / "samples.jsonl", edit=edit)
    code = _cli("import", "lm-eval", str(samples), "--benchmark", str(tiny_benchmark_dir),
                "--out", str(tmp_path / "run"))
    got = capsys.readouterr()
    out = " ".join((got.out + got.err).split())
    assert code == 2, out
    assert "samples.jsonl" in out and field in out
    if line is not None:
        assert f"samples.jsonl:{line}:" in out
    assert not (tmp_path / "run" / "generations.jsonl").exists()


def test_duplicate_names_both_lines(tiny_benchmark_dir, tmp_path):
    from fks.errors import FksInputError

    bench = load_benchmark(tiny_benchmark_dir)
    samples = _fake_samples(bench, tmp_path / "s.jsonl", edit=_dup(1))
    with pytest.raises(FksInputError) as exc:
        import_lmeval(samples, bench, tmp_path / "run", configs=CFG)
    assert exc.value.line == len(bench.queries) + 1 and "first at line 2" in str(exc.value)


def test_import_refuses_to_overwrite_fks_generations(tiny_benchmark_dir, tmp_path):
    bench = load_benchmark(tiny_benchmark_dir)
    run = tmp_path / "run"
    from fks.generate.manifest import update_run_manifest

    run.mkdir()
    (run / "generations.jsonl").write_text("{}\n", encoding="utf-8")
    update_run_manifest(run, stage="generate", stage_info={"status": "complete"})
    samples = _fake_samples(bench, tmp_path / "s.jsonl")
    assert _cli("import", "lm-eval", str(samples), "--benchmark", str(tiny_benchmark_dir),
                "--out", str(run)) == 2
    assert (run / "generations.jsonl").read_text() == "{}\n"


def test_export_writes_plain_files_without_the_tools(tiny_benchmark_dir, tmp_path, monkeypatch):
    import sys

    for mod in ("lm_eval", "inspect_ai"):
        monkeypatch.setitem(sys.modules, mod, None)  # importing them now fails
    bench = load_benchmark(tiny_benchmark_dir)
    export_lmeval(bench, tmp_path / "a", configs=CFG)
    export_inspect(bench, tmp_path / "b", configs=CFG)
    assert (tmp_path / "a" / "fks_stability.yaml").is_file()
    assert (tmp_path / "b" / "fks_stability.py").is_file()
