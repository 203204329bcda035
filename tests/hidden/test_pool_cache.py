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
    for name in ("forward_query_end", "forward_suffix_query_end"):  # whole / after a prefix
        real = getattr(extract_mod, name)

        def spy(*args, _real=real):
            rows.append(int(args[-2].shape[0]))  # input_ids
            return _real(*args)

        monkeypatch.setattr(extract_mod, name, spy)
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
            {"share_prefixes": 0},                                # ... and on shared prefixes
            {"model_info": {**INFO, "weights_sha256": "ef" * 32}},  # other weights
            {"model_info": {**INFO, "dtype": "bfloat16"}},
            {"model_info": {**INFO, "kernels": {"torch": "y"}}},
            {"layers": [0]},
            {"max_prompt_len": 8}]):                              # other token ids
        counted.clear()
        _pool(tmp_path / f"r{i}", tiny_model_and_tokenizer, bench, **change)
        assert sum(counted) > 0, change
    assert len(_entries(cache_root)) == 8
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


def _with_pool(run: Path, model_and_tok, bench, parent, **kw) -> dict:
    from fks.hidden.extract import extract_with_pool

    model, tok = model_and_tok
    n = len(model.model.layers)
    args = {"model_name": "tiny", "batch_size": 4, "model_info": INFO, "duplicate_sample": 2,
            "layers": list(range(n)), "pool_layers": [n - 1], **kw}
    return extract_with_pool(run, bench, parent, model, tok, **args)


def _slice(bench, n_facts: int):
    import copy

    part = copy.deepcopy(bench)
    keep = {f.fact_id for f in part.facts[:n_facts]}
    part.facts[:] = [f for f in part.facts if f.fact_id in keep]
    part.queries[:] = [q for q in part.queries if q.fact_id in keep]
    return part


def test_the_runs_own_states_are_copied_out_of_the_pool(
        tiny_model_and_tokenizer, tiny_benchmark_dir, tmp_path, cache_root, counted):
    parent = load_benchmark(tiny_benchmark_dir)
    bench = _slice(parent, 2)
    _with_pool(tmp_path / "a", tiny_model_and_tokenizer, bench, parent)
    pool, own = HiddenStore(tmp_path / "a" / "reference"), HiddenStore(tmp_path / "a")
    # the pool's forward passes, then the two §18.2 rows one by one: not one more for the run
    assert sum(counted) == pool.n_rows + 2 and own.n_rows < pool.n_rows
    assert pool.layers == own.layers  # every layer, so the run's store can come from it
    rows = pool.rows_of(own.query_ids.tolist())
    for layer in own.layers:
        np.testing.assert_array_equal(own.layer(layer), pool.layer(layer)[rows])
    states_from = own.meta["states_from"]
    assert states_from["store"] == "reference/hidden"  # relative: the run folder may move
    assert states_from["meta_sha256"] == sha256_file(pool.dir / "meta.json")
    stage = read_json(tmp_path / "a" / "evaluation_manifest.json")["stages"]["extract"]
    assert stage["rows_from_this_pass"] == 0 and stage["states_from"] == states_from
    own.validate(checksums=True)

    # a later run takes the pool from the cache: the same bytes, no forward pass but §18.2's
    counted.clear()
    _with_pool(tmp_path / "b", tiny_model_and_tokenizer, bench, parent)
    assert sum(counted) == 2
    for name in ("layer_000.npy", "layer_001.npy", "index.jsonl"):
        assert sha256_file(tmp_path / "a/hidden" / name) == sha256_file(
            tmp_path / "b/hidden" / name)


def test_a_pool_of_other_weights_or_prompts_is_not_copied(
        tiny_model_and_tokenizer, tiny_benchmark_dir, tmp_path, cache_root, counted, caplog):
    from fks.errors import FksInputError
    from fks.hidden.extract import extract_hidden

    parent = load_benchmark(tiny_benchmark_dir)
    bench = _slice(parent, 2)
    _with_pool(tmp_path / "a", tiny_model_and_tokenizer, bench, parent)
    model, tok = tiny_model_and_tokenizer
    counted.clear()
    with caplog.at_level(logging.INFO, logger="fks.hidden.extract"):
        extract_hidden(tmp_path / "b", bench, model, tok, model_name="tiny", batch_size=4,
                       model_info={**INFO, "weights_sha256": "ef" * 32}, duplicate_sample=0,
                       from_store=tmp_path / "a" / "reference")
    assert sum(counted) == HiddenStore(tmp_path / "b").n_rows  # every row forwarded
    assert "weights_sha256" in caplog.text and "states_from" not in HiddenStore(
        tmp_path / "b").meta
    other = _slice(parent, 2)
    main = next(q for q in other.queries if q.use_for_main_forward)
    main.query = main.query + " (changed)"
    with pytest.raises(FksInputError, match="asked differently") as exc:
        _with_pool(tmp_path / "c", tiny_model_and_tokenizer, other, parent)
    assert exc.value.field == "query_id" and main.query_id in str(exc.value)
    lines = Path(exc.value.path).read_text().splitlines()
    assert f'"{main.query_id}"' in lines[exc.value.line - 1]  # the parent's own line
