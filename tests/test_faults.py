"""Fault suite (issue 28): each bad input ends in exit 2 naming file, line and field -- never 1.

Beside the reader fuzz suite (``test_fuzz_readers.py``, random corruptions of every reader),
this suite holds one deliberate case per fault class the issue found ending in exit 1:

* **unicode**: a lone UTF-16 surrogate (``"\\ud800"``, valid JSON, not encodable text) in a text
  field of every input file kind: benchmark (``data validate``), generations (``score``),
  judged (``calibrate``), an lm-eval log (``import``), a JSON file and a YAML file;
* **server replies**: one malformed field in an OpenAI-compatible reply (NaN, 2.5 and string
  log-probs, a string token count, an object ``finish_reason``) becomes that query's error
  record, naming the field; the batch and the run go on;
* **stores and weights**: an all-zero hidden layer, a truncated ``duplicate_pass.npz`` and
  ``model.safetensors``, a device this machine does not have (``tpu:7``, ``cuda:99``);
* **foreign files**: an lm-eval results file that is a list or has a string ``config``, an
  Inspect sample without output choices, a ``phase_matrix`` cell of ``10**400``;
* **disk full**: ``ENOSPC`` (which names no file) names the file being written;
* **offline**: a hub id that is not cached fails in under 3 s, with the offline hint;
* **cache**: GGUF conversions are named ``<model>-<sha256>``; ``fks cache list`` exits 0.

An edited run file keeps the run's input chain whole: the manifest's recorded sha256 of the
file is replaced by the new one (:func:`_edit`), so what is tested is the row reader, not the
provenance check that would otherwise refuse the edited file first.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import socket
import time
from pathlib import Path

import numpy as np
import pytest

from fake_server import running_fake_server
from fks.cli import main
from fks.errors import FksInputError
from fks.runlock import LOCK_NAME

SURROGATE = "x\ud800y"


# ---------------------------------------------------------------------------------- helpers
def _cli(argv: list[str], capsys) -> tuple[int, str]:
    """Run ``fks ARGV`` in process: ``(exit code, stdout + stderr on one line)``."""
    capsys.readouterr()
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, " ".join((out.out + out.err).split())


def _refused(code: int, out: str, *parts: str) -> None:
    """Exit 2 with ``error:`` and every part (file, line, field) in the message."""
    assert code == 2, out
    assert "error:" in out and "internal error" not in out and "Traceback" not in out, out
    for part in parts:
        assert part in out, f"{part!r} not in: {out}"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _edit(run: Path, rel: str, change) -> Path:
    """Apply ``change(path)`` to ``RUN/rel`` and re-record its sha256 in the manifest."""
    path = run / rel
    old = _sha(path)
    change(path)
    manifest = run / "evaluation_manifest.json"
    manifest.write_text(manifest.read_text(encoding="utf-8").replace(old, _sha(path)),
                        encoding="utf-8")
    return path


def _set_field(line: int, field: str, value):
    """A change setting ``field`` of JSONL line ``line`` (1-based), written with escapes."""
    def change(path: Path) -> None:
        rows = path.read_text(encoding="utf-8").split("\n")
        obj = json.loads(rows[line - 1])
        obj[field] = value
        rows[line - 1] = json.dumps(obj)  # ensure_ascii: the surrogate is written as \ud800
        path.write_text("\n".join(rows), encoding="utf-8")
    return change


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, tiny_model_dir):
    """Every stage up to the metrics on the tiny model and benchmark (raw transport)."""
    from fks.pipeline import STAGE_NAMES
    from tiny_benchmark import tiny_benchmark_rows, write_benchmark

    root = tmp_path_factory.mktemp("faults")
    bench = write_benchmark(root / "bench", *tiny_benchmark_rows())
    stages = ",".join(n for n in STAGE_NAMES if n not in ("jlens", "report", "bootstrap"))
    try:
        main(["run", "--model", "tiny", "--model-path", str(tiny_model_dir), "--benchmark",
              str(bench), "--out", str(root / "runs"), "--device", "cpu", "--transport", "raw",
              "--no-kts-bootstrap", "--stages", stages])
    except SystemExit as exc:
        assert exc.code == 0
    return bench, root / "runs" / "tiny"


@pytest.fixture
def run_copy(finished_run, tmp_path):
    """A fresh copy of the finished run and its benchmark: ``(bench, run)``."""
    bench0, run0 = finished_run
    run = tmp_path / "tiny"
    shutil.copytree(run0, run, ignore=shutil.ignore_patterns(LOCK_NAME))
    bench = tmp_path / "bench"
    shutil.copytree(bench0, bench)
    return bench, run


# ---------------------------------------------------------------------------------- unicode
def test_lone_surrogate_in_a_benchmark_query(tiny_benchmark_dir, capsys):
    from fks.data.load import find_benchmark_files

    qfile = find_benchmark_files(tiny_benchmark_dir).queries
    _set_field(2, "query", "Q" + SURROGATE)(qfile)
    code, out = _cli(["data", "validate", str(tiny_benchmark_dir)], capsys)
    _refused(code, out, f"{qfile.name}:2", "field 'query'", "surrogate")


def test_lone_surrogate_in_generations_read_by_score(run_copy, capsys):
    bench, run = run_copy
    before = (run / "scored.jsonl").read_bytes()
    _edit(run, "generations.jsonl", _set_field(3, "raw_response", SURROGATE))
    code, out = _cli(["score", str(run), "--benchmark", str(bench)], capsys)
    _refused(code, out, "generations.jsonl:3", "field 'raw_response'", "\\ud800")
    assert (run / "scored.jsonl").read_bytes() == before  # the output is untouched


def test_lone_surrogate_in_judged_read_by_calibrate(run_copy, capsys):
    bench, run = run_copy
    _edit(run, "judged.jsonl", _set_field(5, "extracted_answer", SURROGATE))
    code, out = _cli(["calibrate", str(run), "--benchmark", str(bench)], capsys)
    _refused(code, out, "judged.jsonl:5", "field 'extracted_answer'")


def test_lone_surrogate_in_an_lmeval_log_read_by_import(tiny_benchmark_dir, tmp_path, capsys):
    samples = _lmeval_samples(tiny_benchmark_dir, tmp_path / "lm")
    rows = samples.read_text(encoding="utf-8").splitlines()
    obj = json.loads(rows[3])
    obj["resps"] = [[SURROGATE]]
    rows[3] = json.dumps(obj)
    samples.write_text("\n".join(rows) + "\n", encoding="utf-8")
    code, out = _cli(["import", "lm-eval", str(samples), "--benchmark", str(tiny_benchmark_dir),
                      "--out", str(tmp_path / "runs" / "m")], capsys)
    _refused(code, out, f"{samples.name}:4", "field 'resps.0.0'")
    assert not (tmp_path / "runs" / "m" / "generations.jsonl").exists()


def test_every_reader_refuses_a_lone_surrogate_and_keeps_pairs(tmp_path):
    from fks.io import iter_jsonl, read_json, read_yaml

    good = tmp_path / "good.jsonl"
    good.write_text('{"a": "\\ud83d\\ude00 \\u00e9"}\n', encoding="utf-8")  # a pair: an emoji
    assert [r for _, r in iter_jsonl(good)] == [{"a": "\U0001f600 \u00e9"}]
    cases = {
        "rows.jsonl": ('{"ok": 1}\n{"a": {"b": ["x", "\\udc00"]}}\n', 2, "a.b.1"),
        "doc.json": ('{\n  "ok": "\\ud800\\udc00",\n  "k": "\\uD83D"\n}\n', 3, "k"),
        "cfg.yaml": ('tau_b: 0.8\nname: "a\\ud800"\n', None, "name"),
    }
    for name, (text, line, field) in cases.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        read = {"jsonl": lambda p: list(iter_jsonl(p)), "json": read_json,
                "yaml": read_yaml}[path.suffix[1:]]
        with pytest.raises(FksInputError) as exc:
            read(path)
        assert (exc.value.path, exc.value.line, exc.value.field) == (str(path), line, field)


# ---------------------------------------------------------------------------- server replies
@pytest.fixture(scope="module")
def server():
    """The fake OpenAI-compatible server (``BADFIELD:<name>`` markers), stopped afterwards."""
    with running_fake_server() as url:
        yield url


BAD_FIELDS = {  # marker -> the field the error must name
    "lp_nan": "choices[0].logprobs.token_logprobs[1]",
    "lp_pos": "choices[0].logprobs.token_logprobs[0]",
    "lp_str": "choices[0].logprobs.token_logprobs[0]",
    "tokens_str": "usage.completion_tokens",
    "finish_obj": "choices[0].finish_reason",
}


def test_one_malformed_field_is_that_querys_error_record(server):
    from fks.configs import load_configs
    from fks.generate.backends import make_backend

    backend = make_backend("openai", "fake-model", configs=load_configs(), base_url=server,
                           timeout=2.0, max_retries=1, backoff_base=0.01, backoff_max=0.02,
                           concurrency=4)
    prompts = ["ok first", *(f"q BADFIELD:{m}" for m in BAD_FIELDS), "ok last"]
    outs = backend.generate(prompts, max_new_tokens=8)
    assert len(outs) == len(prompts)
    assert outs[0].status == outs[-1].status == "ok" and outs[-1].answer_logprobs == [-0.25, -0.5]
    for out, (marker, field) in zip(outs[1:-1], BAD_FIELDS.items(), strict=True):
        assert out.status == "error" and out.text == "", marker
        assert "malformed response" in out.error and field in out.error, (marker, out.error)
        assert "after 2 attempts" in out.error


def test_generate_keeps_the_batch_and_counts_the_malformed_replies(server, tiny_benchmark_dir,
                                                                   tmp_path, capsys):
    from fks.data.load import find_benchmark_files
    from fks.data.schema import GenerationRecord
    from fks.io import read_json, read_jsonl

    qfile = find_benchmark_files(tiny_benchmark_dir).queries
    rows = [json.loads(x) for x in qfile.read_text(encoding="utf-8").splitlines()]
    bad = {1: "lp_nan", 2: "lp_pos", 4: "lp_str", 5: "tokens_str", 6: "finish_obj"}
    for i, marker in bad.items():
        rows[i]["query"] += f" BADFIELD:{marker}"
    qfile.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "run"
    code, text = _cli(["generate", "--backend", "openai", "--base-url", server, "--model",
                       "fake", "--model-path", "fake-model", "--benchmark",
                       str(tiny_benchmark_dir), "--out", str(out), "--timeout", "2",
                       "--max-retries", "0", "--batch-size", "8"], capsys)
    assert code == 0, text
    recs = read_jsonl(out / "generations.jsonl", GenerationRecord)
    assert [r.query_id for r in recs] == [r["query_id"] for r in rows]  # none lost
    for i, rec in enumerate(recs):
        if i in bad:
            assert rec.status == "error" and BAD_FIELDS[bad[i]] in rec.error
        else:
            assert rec.status == "ok" and rec.answer_logprobs == [-0.25, -0.5]
    stage = read_json(out / "evaluation_manifest.json")["stages"]["generate"]
    assert stage["status"] == "complete"
    assert stage["counts_by_status"] == {"ok": len(rows) - len(bad), "error": len(bad),
                                         "timeout": 0}


# ---------------------------------------------------------------------- stores and weights
def test_an_all_zero_hidden_layer(run_copy, capsys):
    bench, run = run_copy

    def zero(path: Path) -> None:
        np.save(path, np.zeros_like(np.load(path)), allow_pickle=False)

    _edit(run, "hidden/layer_001.npy", zero)
    code, out = _cli(["metrics", str(run), "--part", "internal", "--transport", "raw",
                      "--benchmark", str(bench)], capsys)
    _refused(code, out, "hidden/layer_001.npy", "are zero")


@pytest.mark.parametrize("keep", [0, 100, 2000, -30])
def test_a_truncated_duplicate_pass(run_copy, capsys, keep):
    bench, run = run_copy

    def cut(path: Path) -> None:
        data = path.read_bytes()
        path.write_bytes(data[:keep] if keep >= 0 else data[:keep])

    _edit(run, "hidden/duplicate_pass.npz", cut)
    code, out = _cli(["metrics", str(run), "--part", "internal", "--transport", "raw",
                      "--benchmark", str(bench)], capsys)
    _refused(code, out, "hidden/duplicate_pass.npz", "not a readable .npz")


def test_a_truncated_safetensors_file(tiny_model_dir, tiny_benchmark_dir, tmp_path, capsys):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    code, out = _cli(["generate", "--model", "m", "--model-path", str(model), "--benchmark",
                      str(tiny_benchmark_dir), "--out", str(tmp_path / "run"), "--device", "cpu"],
                     capsys)
    _refused(code, out, str(weights), "field 'model_path'", "truncated")
    header = tmp_path / "header"
    shutil.copytree(tiny_model_dir, header)
    (header / "model.safetensors").write_bytes(b"\x10\x00")  # shorter than its own header
    code, out = _cli(["generate", "--model", "m", "--model-path", str(header), "--benchmark",
                      str(tiny_benchmark_dir), "--out", str(tmp_path / "run2"), "--device",
                      "cpu"], capsys)
    _refused(code, out, str(header / "model.safetensors"), "not a readable safetensors")


@pytest.mark.parametrize("device", ["tpu:7", "cuda:99", "gpu"])
def test_a_device_this_machine_lacks(run_copy, tiny_model_dir, capsys, device):
    import torch

    if device == "cuda:99" and torch.cuda.device_count() > 99:  # pragma: no cover
        pytest.skip("this machine has 100 GPUs")
    bench, run = run_copy
    for argv in (["generate", "--model", "m", "--model-path", str(tiny_model_dir),
                  "--benchmark", str(bench), "--out", str(run.parent / "g")],
                 ["extract", str(run), "--model-path", str(tiny_model_dir), "--benchmark",
                  str(bench), "--overwrite"],
                 ["run", "--model", "tiny", "--model-path", str(tiny_model_dir), "--benchmark",
                  str(bench), "--out", str(run.parent / "r"), "--stages", "generate"]):
        code, out = _cli([*argv, "--device", device], capsys)
        _refused(code, out, "field 'device'", repr(device))


# --------------------------------------------------------------------------- foreign files
def _lmeval_samples(bench_dir: Path, folder: Path, results: str | None = None) -> Path:
    """An lm-eval ``--log_samples`` file of the exported task (and its results file)."""
    from fks.data.load import load_benchmark
    from fks.generate.prompts import PROMPT_VERSION, build_prompt

    folder.mkdir(parents=True, exist_ok=True)
    stamp = "2026-01-01T00-00-00.000000"
    lines = []
    for i, q in enumerate(load_benchmark(bench_dir).queries):
        lines.append({"doc_id": i, "doc": {"query_id": q.query_id, "prompt": build_prompt(q),
                                           "prompt_version": PROMPT_VERSION},
                      "arguments": {"gen_args_0": {"arg_0": build_prompt(q), "arg_1": {
                          "until": [], "max_gen_toks": 24, "do_sample": False,
                          "temperature": 0.0}}},
                      "resps": [[f" answer {i}"]]})
    path = folder / f"samples_fks_stability_{stamp}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    if results is not None:
        (folder / f"results_{stamp}.json").write_text(results, encoding="utf-8")
    return path


@pytest.mark.parametrize(("results", "expect"), [
    ("[1, 2]", "expected an lm-eval results object, found list"),
    ('{"config": "hf"}', "field 'config'"),
    ('{"config": ', "invalid JSON"),
])
def test_an_lmeval_results_file_that_is_not_lmevals(tiny_benchmark_dir, tmp_path, capsys,
                                                    results, expect):
    samples = _lmeval_samples(tiny_benchmark_dir, tmp_path / "lm", results)
    run = tmp_path / "runs" / "m"
    code, out = _cli(["import", "lm-eval", str(samples), "--benchmark", str(tiny_benchmark_dir),
                      "--out", str(run)], capsys)
    _refused(code, out, "results_2026-01-01T00-00-00.000000.json", expect)
    assert not (run / "generations.jsonl").exists()


def test_an_lmeval_results_file_that_is_right_is_recorded(tiny_benchmark_dir, tmp_path, capsys):
    results = json.dumps({"lm_eval_version": "0.4.13", "config": {
        "model": "hf", "model_args": {"pretrained": "org/tiny", "dtype": "float32"}}})
    samples = _lmeval_samples(tiny_benchmark_dir, tmp_path / "lm", results)
    run = tmp_path / "runs" / "m"
    code, out = _cli(["import", "lm-eval", str(samples), "--benchmark", str(tiny_benchmark_dir),
                      "--out", str(run)], capsys)
    assert code == 0, out
    imported = json.loads((run / "evaluation_manifest.json").read_text())
    assert "org/tiny" in json.dumps(imported)


def test_an_inspect_sample_without_output_choices(tiny_benchmark_dir, tmp_path, capsys):
    pytest.importorskip("inspect_ai")
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalPlan,
        EvalSample,
        EvalSpec,
        write_eval_log,
    )
    from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, GenerateConfig, ModelOutput

    from fks.data.load import load_benchmark
    from fks.generate.prompts import PROMPT_VERSION, build_prompt
    from fks.interop.inspect_ai import IDENTITY_TEMPLATE

    bench = load_benchmark(tiny_benchmark_dir)
    samples = []
    for i, q in enumerate(bench.queries):
        prompt, answer = build_prompt(q), f" answer {i}"
        samples.append(EvalSample(
            id=q.query_id, epoch=1, input=prompt, target="",
            metadata={"prompt_version": PROMPT_VERSION},
            messages=[ChatMessageUser(content=prompt), ChatMessageAssistant(content=answer)],
            output=ModelOutput.from_content("hf/tiny", answer)))
    spec = EvalSpec(created="2026-01-01T00:00:00+00:00", task="fks_stability",
                    dataset=EvalDataset(), model="hf/tiny", config=EvalConfig(),
                    model_args={"chat_template": IDENTITY_TEMPLATE, "do_sample": False},
                    metadata={"fks_prompt_version": PROMPT_VERSION})
    ev = EvalLog(eval=spec, plan=EvalPlan(config=GenerateConfig(max_tokens=24, temperature=0.0)),
                 samples=samples)
    good = tmp_path / "good.eval"
    write_eval_log(ev, str(good))
    code, out = _cli(["import", "inspect", str(good), "--benchmark", str(tiny_benchmark_dir),
                      "--out", str(tmp_path / "runs" / "a")], capsys)
    assert code == 0, out  # the hand-built log is a valid one
    ev.samples[2].output = ModelOutput(model="hf/tiny", choices=[])
    bad = tmp_path / "nochoice.eval"
    write_eval_log(ev, str(bad))
    code, out = _cli(["import", "inspect", str(bad), "--benchmark", str(tiny_benchmark_dir),
                      "--out", str(tmp_path / "runs" / "b")], capsys)
    _refused(code, out, f"{bad}:3", "field 'samples.output.choices'")


@pytest.mark.parametrize("which", ["cases", "gold"])
def test_a_phase_matrix_cell_no_float_holds(tmp_path, capsys, monkeypatch, which):
    monkeypatch.syspath_prepend(str(Path(__file__).parent / "evalharness"))
    from harness_examples import full_case, full_gold, write_jsonl

    case, gold = full_case(), full_gold()
    target = case if which == "cases" else gold
    target["result"]["phase_evidence"]["phase_matrix"] = {"M3.t1": {"M3.t2": 10**400}}
    c_path = write_jsonl(tmp_path / "cases.jsonl", [case])
    g_path = write_jsonl(tmp_path / "gold.jsonl", [gold])
    code, out = _cli(["harness", "score", "--cases", str(c_path), "--gold", str(g_path),
                      "--out", str(tmp_path / "out")], capsys)
    _refused(code, out, f"{which}.jsonl:1",
             "field 'result.phase_evidence.phase_matrix.M3.t1.M3.t2'",
             "less than or equal to 9007199254740992")


# -------------------------------------------------------------------------------- disk full
def _full_disk_for(monkeypatch, name: str) -> None:
    """Make ``fsync`` of files named ``name`` fail as on a full disk (ENOSPC, no file name)."""
    import fks.io

    real = os.fsync

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").rsplit("/", 1)[-1].startswith(
                (name, f".{name}.")):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd)

    monkeypatch.setattr(fks.io.os, "fsync", fsync)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")
def test_a_full_disk_names_the_file_being_written(run_copy, monkeypatch, capsys):
    bench, run = run_copy
    before = (run / "scored.jsonl").read_bytes()
    (run / "scored.jsonl").unlink()
    _full_disk_for(monkeypatch, "scored.jsonl")
    code, out = _cli(["score", str(run), "--benchmark", str(bench)], capsys)
    _refused(code, out, str(run / "scored.jsonl"), "No space left on device", "errno 28")
    assert not (run / "scored.jsonl").exists() and before
    assert not list(run.glob(".scored.jsonl.*"))  # no temporary file left behind


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")
def test_a_full_disk_during_generation_names_generations_jsonl(tiny_model_dir,
                                                              tiny_benchmark_dir, tmp_path,
                                                              monkeypatch, capsys):
    _full_disk_for(monkeypatch, "generations.jsonl")
    out = tmp_path / "run"
    code, text = _cli(["generate", "--model", "m", "--model-path", str(tiny_model_dir),
                       "--benchmark", str(tiny_benchmark_dir), "--out", str(out), "--device",
                       "cpu", "--batch-size", "8"], capsys)
    _refused(code, text, str(out / "generations.jsonl"), "No space left on device")


def test_jsonl_appender_and_atomic_writes_name_their_file(tmp_path, monkeypatch):
    from fks.io import JsonlAppender, atomic_write_json

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    import fks.io

    monkeypatch.setattr(fks.io.os, "fsync", full)
    with pytest.raises(FksInputError) as exc, JsonlAppender(tmp_path / "a.jsonl") as out:
        out.write_batch([{"a": 1}])
    assert exc.value.path == str(tmp_path / "a.jsonl") and "No space" in exc.value.message
    with pytest.raises(FksInputError) as exc:
        atomic_write_json(tmp_path / "b.json", {"b": 1})
    assert exc.value.path == str(tmp_path / "b.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]  # no temporary file


# ---------------------------------------------------------------------------------- offline
def test_an_uncached_hub_id_offline_fails_in_under_3_s(tiny_benchmark_dir, tmp_path,
                                                      monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    started = time.monotonic()
    code, out = _cli(["generate", "--model", "m", "--model-path", "no-such-org/no-such-model",
                      "--benchmark", str(tiny_benchmark_dir), "--out", str(tmp_path / "run"),
                      "--device", "cpu"], capsys)
    elapsed = time.monotonic() - started
    _refused(code, out, "no-such-org/no-such-model", "field 'model_path'", "cannot be reached")
    assert elapsed < 3.0, f"{elapsed:.1f} s"


def test_a_hub_that_does_not_answer_is_given_up_on_within_the_probe_budget(monkeypatch,
                                                                          tmp_path):
    from fks.generate.backends import hf

    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
        monkeypatch.setattr(hf, "HUB_PROBE_TIMEOUT_S", 0.5)
        import huggingface_hub.constants as constants

        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
        started = time.monotonic()
        with pytest.raises(FksInputError, match="hub cannot be reached"):
            hf.hub_load_offline("org/name", None)
        assert time.monotonic() - started < 3.0
        # cached: loads from the cache with no request instead of failing
        snap = tmp_path / "hub" / "models--org--name" / "snapshots" / "abc"
        snap.mkdir(parents=True)
        (snap / "config.json").write_text("{}")
        (tmp_path / "hub" / "models--org--name" / "refs").mkdir()
        (tmp_path / "hub" / "models--org--name" / "refs" / "main").write_text("abc")
        assert hf.hub_load_offline("org/name", None) is True
    assert hf.hub_load_offline(str(tmp_path), None) is False  # a local folder: no probe
    with pytest.raises(FksInputError, match="no such file or folder"):
        hf.hub_load_offline(str(tmp_path / "missing" / "deep" / "model"), None)
