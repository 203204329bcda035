"""The reference pool's cache across runs (``fks.hidden.pool_cache``, issue 29)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from fks.data.load import load_benchmark
from fks.hidden import extract as extract_mod
from fks.hidden import pool_cache
from fks.hidden.extract import extract_hidden
from fks.hidden.store import HiddenStore
from fks.io import read_json, sha256_file

INFO = {"weights_sha256": "ab" * 32, "tokenizer_sha256": "cd" * 32, "dtype": "float32",
        "device": "cpu", "model_path": "/somewhere/tiny", "kernels": {"torch": "x"}}


@pytest.fixture
def cache_root(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("FKS_CACHE", str(root))
    monkeypatch.setenv("FKS_REFERENCE_CACHE", "1")
    return root


@pytest.fixture
def counted(monkeypatch) -> list[int]:
    """The rows of every extraction forward pass (none: the store came from the cache)."""
    rows: list[int] = []
    real = extract_mod.forward_query_end

    def spy(model, capture, ids, mask):
        rows.append(int(ids.shape[0]))
        return real(model, capture, ids, mask)

    monkeypatch.setattr(extract_mod, "forward_query_end", spy)
    return rows


def _pool(run: Path, model_and_tok, bench, **kw) -> dict:
    model, tok = model_and_tok
    args = {"model_name": "tiny", "batch_size": 4, "model_info": INFO, "duplicate_sample": 0,
            "cache": True, **kw}
    return extract_hidden(run / "reference", bench, model, tok, **args)


def _files(store: Path) -> dict[str, str]:
    return {p.name: sha256_file(p) for p in sorted(store.iterdir()) if p.is_file()}


def _entries(root: Path) -> list[Path]:
    kind = root / pool_cache.CACHE_KIND
    return sorted(p for p in kind.iterdir() if not p.name.startswith(".")) if kind.is_dir() \
        else []


def test_a_second_run_takes_the_pool_from_the_cache(
        tiny_model_and_tokenizer, tiny_benchmark_dir, tmp_path, cache_root, counted):
    bench = load_benchmark(tiny_benchmark_dir)
    _pool(tmp_path / "a", tiny_model_and_tokenizer, bench)
    assert sum(counted) == len(HiddenStore(tmp_path / "a" / "reference").index)
    (entry,) = _entries(cache_root)
    info = read_json(entry / pool_cache.INFO_FILE)
    assert info["model"] == "tiny" and len(info["key"]) == 64
    assert entry.name == f"tiny-{info['key'][:16]}"

    counted.clear()
    _pool(tmp_path / "b", tiny_model_and_tokenizer, bench)
    assert counted == []  # not one forward pass
    a, b = tmp_path / "a" / "reference" / "hidden", tmp_path / "b" / "reference" / "hidden"
    assert _files(a) == _files(b)
    stage = read_json(tmp_path / "b" / "reference" / "evaluation_manifest.json")[
        "stages"]["extract"]
    assert stage["from_cache"] == str(entry) and stage["cache_key"] == info["key"]
    assert stage["rows_from_this_pass"] == 0
    HiddenStore(tmp_path / "b" / "reference").validate(checksums=True)


def test_anything_that_can_change_a_number_is_another_key(
        tiny_model_and_tokenizer, tiny_benchmark_dir, tmp_path, cache_root, counted):
    bench = load_benchmark(tiny_benchmark_dir)
    _pool(tmp_path / "a", tiny_model_and_tokenizer, bench)
    for i, change in enumerate([
            {"batch_size": 3},                                    # bf16 rows depend on it
            {"model_info": {**INFO, "weights_sha256": "ef" * 32}},  # other weights
            {"model_info": {**INFO, "dtype": "bfloat16"}},
            {"model_info": {**INFO, "kernels": {"torch": "y"}}},
            {"layers": [0]},
            {"max_prompt_len": 8}]):                              # other token ids
        counted.clear()
        _pool(tmp_path / f"r{i}", tiny_model_and_tokenizer, bench, **change)
        assert sum(counted) > 0, change
    assert len(_entries(cache_root)) == 7
    # a path is where the file lies, not what it holds; generation's workers extract nothing:
    # the same key
    counted.clear()
    _pool(tmp_path / "moved", tiny_model_and_tokenizer, bench,
          model_info={**INFO, "model_path": "/elsewhere",
                      "kernels": {**INFO["kernels"], "workers": 2}})
    assert counted == []


def test_the_extraction_version_is_in_the_key(tiny_model_and_tokenizer, tiny_benchmark_dir,
                                              tmp_path, cache_root, counted, monkeypatch):
    bench = load_benchmark(tiny_benchmark_dir)
    _pool(tmp_path / "a", tiny_model_and_tokenizer, bench)
    monkeypatch.setattr(extract_mod, "EXTRACTION_VERSION", extract_mod.EXTRACTION_VERSION + 1)
    counted.clear()
    _pool(tmp_path / "b", tiny_model_and_tokenizer, bench)
    assert sum(counted) > 0


def test_a_damaged_cache_is_extracted_again(tiny_model_and_tokenizer, tiny_benchmark_dir,
                                            tmp_path, cache_root, counted, caplog):
    bench = load_benchmark(tiny_benchmark_dir)
    _pool(tmp_path / "a", tiny_model_and_tokenizer, bench)
    want = _files(tmp_path / "a" / "reference" / "hidden")
    (entry,) = _entries(cache_root)
    layer = entry / "hidden" / "layer_000.npy"
    arr = np.load(layer, allow_pickle=False)
    layer.unlink()  # a new file, not the run's linked one
    np.save(layer, arr + np.float16(1))
    counted.clear()
    with caplog.at_level(logging.WARNING):
        _pool(tmp_path / "b", tiny_model_and_tokenizer, bench)
    assert sum(counted) > 0 and "sha256 mismatch" in caplog.text
    assert _files(tmp_path / "b" / "reference" / "hidden") == want
    # the damaged folder was dropped and the fresh extraction cached whole again
    (again,) = _entries(cache_root)
    assert again == entry and _files(entry / "hidden") == want
    counted.clear()
    _pool(tmp_path / "c", tiny_model_and_tokenizer, bench)
    assert counted == []


def test_a_run_cannot_alter_the_cache(tiny_model_and_tokenizer, tiny_benchmark_dir, tmp_path,
                                      cache_root, counted):
    bench = load_benchmark(tiny_benchmark_dir)
    _pool(tmp_path / "a", tiny_model_and_tokenizer, bench)
    (entry,) = _entries(cache_root)
    before = _files(entry / "hidden")
    # the restored run is then re-extracted in place of the linked files
    _pool(tmp_path / "b", tiny_model_and_tokenizer, bench)
    _pool(tmp_path / "b", tiny_model_and_tokenizer, bench, cache=False, overwrite=True,
          batch_size=3)
    _pool(tmp_path / "a", tiny_model_and_tokenizer, bench, cache=False, overwrite=True,
          batch_size=3)
    assert _files(entry / "hidden") == before
    HiddenStore(entry).validate(checksums=True)  # the cached folder is still whole


def test_a_crash_while_restoring_leaves_no_half_store(tiny_model_and_tokenizer,
                                                      tiny_benchmark_dir, tmp_path, cache_root,
                                                      counted, monkeypatch):
    bench = load_benchmark(tiny_benchmark_dir)
    _pool(tmp_path / "a", tiny_model_and_tokenizer, bench)
    real = pool_cache._link_or_copy

    def crash_on_meta(src, dst):
        if dst.name == "meta.json":
            raise KeyboardInterrupt  # the process is killed while linking
        real(src, dst)

    monkeypatch.setattr(pool_cache, "_link_or_copy", crash_on_meta)
    with pytest.raises(KeyboardInterrupt):
        _pool(tmp_path / "b", tiny_model_and_tokenizer, bench)
    ref = tmp_path / "b" / "reference"
    assert not (ref / "hidden").exists() and not list(ref.glob(".tmp-*"))
    monkeypatch.setattr(pool_cache, "_link_or_copy", real)
    counted.clear()
    _pool(tmp_path / "b", tiny_model_and_tokenizer, bench)
    assert counted == []
    assert _files(ref / "hidden") == _files(tmp_path / "a" / "reference" / "hidden")


def test_no_weights_sha_or_the_switch_off_means_no_cache(tiny_model_and_tokenizer,
                                                         tiny_benchmark_dir, tmp_path,
                                                         cache_root, monkeypatch):
    bench = load_benchmark(tiny_benchmark_dir)
    _pool(tmp_path / "a", tiny_model_and_tokenizer, bench,
          model_info={k: v for k, v in INFO.items() if k != "weights_sha256"})
    monkeypatch.setenv("FKS_REFERENCE_CACHE", "0")
    _pool(tmp_path / "b", tiny_model_and_tokenizer, bench)
    _pool(tmp_path / "c", tiny_model_and_tokenizer, bench, cache=False)
    assert _entries(cache_root) == []


def test_fks_cache_list_shows_the_pool(tiny_model_and_tokenizer, tiny_benchmark_dir, tmp_path,
                                       cache_root):
    from fks.cache import list_cache

    _pool(tmp_path / "a", tiny_model_and_tokenizer, load_benchmark(tiny_benchmark_dir))
    (entry,) = list_cache(cache_root)
    n = len(HiddenStore(tmp_path / "a" / "reference").index)
    assert entry.kind == "reference" and entry.detail == f"tiny, {n}"
    assert entry.size_bytes > 0


def test_a_cache_that_cannot_be_linked_in_is_extracted_instead(
        tiny_model_and_tokenizer, tiny_benchmark_dir, tmp_path, cache_root, counted,
        monkeypatch, caplog):
    bench = load_benchmark(tiny_benchmark_dir)
    _pool(tmp_path / "a", tiny_model_and_tokenizer, bench)

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pool_cache, "_link_or_copy", full_disk)
    counted.clear()
    with caplog.at_level(logging.WARNING):
        _pool(tmp_path / "b", tiny_model_and_tokenizer, bench)
    assert sum(counted) > 0 and "No space left" in caplog.text
    assert _files(tmp_path / "b" / "reference" / "hidden") == \
        _files(tmp_path / "a" / "reference" / "hidden")
    assert not list((tmp_path / "b" / "reference").glob(".tmp-*"))
