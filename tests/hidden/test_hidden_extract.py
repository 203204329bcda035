"""Extraction of query-end states: positions, layers, resumability, bad input, the reader."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from fks.data.load import load_benchmark
from fks.errors import FksInputError
from fks.generate.prompts import PROMPT_VERSION, build_prompt, encode_prompt
from fks.hidden import extract as extract_mod
from fks.hidden.capture import QueryEndCapture, last_real_positions
from fks.hidden.extract import extract_hidden, pad_batch, select_queries
from fks.hidden.store import HiddenStore, layer_filename
from fks.io import read_json


def _reference(model, ids: list[int]) -> dict[int, np.ndarray]:
    """Plain, unpadded forward pass: hidden_states[l+1] at the last token, and for the last
    block its raw output (hook), plus the normed hidden_states[-1] under key -1."""
    blocks = model.model.layers
    raw = {}
    handle = blocks[-1].register_forward_hook(lambda m, a, o: raw.__setitem__("y", o))
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_hidden_states=True)
    handle.remove()
    n = len(blocks)
    ref = {layer: out.hidden_states[layer + 1][0, -1].numpy() for layer in range(n - 1)}
    y = raw["y"][0] if isinstance(raw["y"], tuple) else raw["y"]
    ref[n - 1] = y[0, -1].numpy()
    ref[-1] = out.hidden_states[-1][0, -1].numpy()
    return ref


@pytest.mark.parametrize("side", ["left", "right"])
def test_states_equal_plain_forward_at_last_real_token(
    side, tiny_model_and_tokenizer, tiny_benchmark_dir, tmp_path
):
    model, tok = tiny_model_and_tokenizer
    bench = load_benchmark(tiny_benchmark_dir)
    extract_hidden(tmp_path / "run", bench, model, tok, model_name="tiny", batch_size=5,
                   padding_side=side)
    store = HiddenStore(tmp_path / "run")
    n_layers = len(model.model.layers)
    assert store.layers == list(range(n_layers)) and store.meta["position"] == "query_end"
    by_id = {q.query_id: q for q in bench.queries}
    lengths = {r.n_prompt_tokens for r in store.index}
    assert len(lengths) > 3  # batches really mix lengths, so padding is exercised
    last_vs_normed = []
    for rec in store.index:
        ids, _ = encode_prompt(tok, build_prompt(by_id[rec.query_id]), 192)
        assert rec.n_prompt_tokens == len(ids)
        ref = _reference(model, ids)
        for layer in range(n_layers):
            got = store.layer(layer)[rec.row].astype(np.float32)
            np.testing.assert_allclose(got, ref[layer], rtol=2e-3, atol=2e-3,
                                       err_msg=f"{rec.query_id} layer {layer}")
        last_vs_normed.append(np.abs(store.layer(n_layers - 1)[rec.row] - ref[-1]).max())
    # the stored last layer is the RAW block output, not hidden_states[-1] (final norm)
    assert min(last_vs_normed) > 0.05


def test_selection_follows_booleans_and_index_fields(
    tiny_model_and_tokenizer, tiny_benchmark_dir, tmp_path
):
    model, tok = tiny_model_and_tokenizer
    bench = load_benchmark(tiny_benchmark_dir)
    main = [q.query_id for q in bench.queries if q.use_for_main_forward]
    extract_hidden(tmp_path / "a", bench, model, tok, model_name="tiny", layers=[1])
    store = HiddenStore(tmp_path / "a")
    assert store.query_ids.tolist() == main
    assert store.layers == [1] and store.layer(1).shape == (len(main), 64)
    row = json.loads((tmp_path / "a/hidden/index.jsonl").read_text().splitlines()[0])
    assert {"row", "query_id", "fact_id", "relation", "condition_family"} <= set(row)
    more = select_queries(bench.queries, reverse=True, recognition=True)
    extract_hidden(tmp_path / "b", bench, model, tok, model_name="tiny", layers=[0],
                   reverse=True, recognition=True)
    store_b = HiddenStore(tmp_path / "b")
    assert store_b.query_ids.tolist() == [q.query_id for q in more]
    assert set(store_b.families) == {"anchor", "paraphrase", "format", "context", "multilingual",
                                     "reverse", "recognition"}
    assert store_b.meta["prompt_version"] == PROMPT_VERSION
    np.testing.assert_array_equal(store_b.rows_of(main[:2]), [0, 1])


def test_crash_mid_way_resumes_to_identical_arrays(
    tiny_model_and_tokenizer, tiny_benchmark_dir, tmp_path, monkeypatch
):
    model, tok = tiny_model_and_tokenizer
    bench = load_benchmark(tiny_benchmark_dir)
    # whole prompts only (share_prefixes=0): the batches below are plan_batches' (prefix
    # sharing resumes in test_shared_prefixes_resume_to_identical_arrays)
    extract_hidden(tmp_path / "clean", bench, model, tok, model_name="tiny", batch_size=3,
                   share_prefixes=0)

    real = extract_mod.forward_query_end
    calls = {"n": 0}

    def crashing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > 2:
            raise RuntimeError("injected crash")
        return real(*args, **kwargs)

    monkeypatch.setattr(extract_mod, "forward_query_end", crashing)
    with pytest.raises(RuntimeError, match="injected crash"):
        extract_hidden(tmp_path / "crash", bench, model, tok, model_name="tiny", batch_size=3,
                       share_prefixes=0)
    progress = read_json(tmp_path / "crash/hidden/progress.json")
    assert progress["n_done"] == 6
    with pytest.raises(FksInputError, match="unfinished"):
        HiddenStore(tmp_path / "crash")

    calls["n"] = -1000  # no more crashes; count the batches the resume runs
    extract_hidden(tmp_path / "crash", bench, model, tok, model_name="tiny", batch_size=3,
                   duplicate_sample=0,  # the §18.2 second pass would add its own calls
                   share_prefixes=0)
    n_rows = HiddenStore(tmp_path / "clean").n_rows
    assert calls["n"] + 1000 == -(-(n_rows - 6) // 3)  # only the unfinished batches ran
    clean, resumed = HiddenStore(tmp_path / "clean"), HiddenStore(tmp_path / "crash")
    assert not (tmp_path / "crash/hidden/progress.json").exists()
    for layer in clean.layers:
        np.testing.assert_array_equal(clean.layer(layer), resumed.layer(layer))
    assert clean.meta["sha256"] == resumed.meta["sha256"]
    resumed.validate(checksums=True)


def test_benchmark_mismatch_is_bad_input(tiny_model_and_tokenizer, tiny_benchmark_dir, tmp_path,
                                         monkeypatch):
    model, tok = tiny_model_and_tokenizer
    bench = load_benchmark(tiny_benchmark_dir)
    extract_hidden(tmp_path / "run", bench, model, tok, model_name="tiny", layers=[0])
    other = load_benchmark(tiny_benchmark_dir)
    main = [q for q in other.queries if q.use_for_main_forward]
    other.queries.remove(main[3])  # the store's row 3 now differs
    with pytest.raises(FksInputError) as exc:
        extract_hidden(tmp_path / "run", other, model, tok, model_name="tiny", layers=[0])
    assert (exc.value.field, exc.value.line) == ("query_id", 4)
    assert main[3].query_id in str(exc.value) and main[4].query_id in str(exc.value)
    # an unfinished store with another benchmark: the message names the query id and line
    calls = {"n": 0}
    real = extract_mod.forward_query_end

    def crash_after_one(*a, **k):
        calls["n"] += 1
        if calls["n"] > 1:
            raise RuntimeError("stop")
        return real(*a, **k)

    monkeypatch.setattr(extract_mod, "forward_query_end", crash_after_one)
    with pytest.raises(RuntimeError):
        extract_hidden(tmp_path / "run2", bench, model, tok, model_name="tiny", layers=[0],
                       batch_size=2)
    monkeypatch.setattr(extract_mod, "forward_query_end", real)
    changed = {k: v for k, v in read_json(tmp_path / "run2/hidden/progress.json")["identity"]
               .items()}
    assert changed["model"] == "tiny"
    from fks.hidden.store import HiddenWriter

    rows = [{"query_id": q.query_id, "fact_id": q.fact_id, "relation": q.relation,
             "condition_family": q.condition_family} for q in main[1:]]
    with pytest.raises(FksInputError) as exc:
        HiddenWriter(tmp_path / "run2", rows, [0], 64, changed)
    assert exc.value.field == "query_id" and exc.value.line == 1
    assert main[0].query_id in str(exc.value) and main[1].query_id in str(exc.value)
    with pytest.raises(FksInputError, match="different model") as exc:
        extract_hidden(tmp_path / "run2", bench, model, tok, model_name="other", layers=[0])
    assert exc.value.field == "model"
    with pytest.raises(FksInputError, match="different layers"):
        extract_hidden(tmp_path / "run2", bench, model, tok, model_name="tiny", layers=[1])
    with pytest.raises(FksInputError, match="outside"):
        extract_hidden(tmp_path / "run3", bench, model, tok, model_name="tiny", layers=[7])
    # --overwrite starts over
    meta = extract_hidden(tmp_path / "run", other, model, tok, model_name="tiny", layers=[0],
                          overwrite=True)
    assert meta["n_rows"] == len(main) - 1


def test_store_reader_validates(tiny_model_and_tokenizer, tiny_benchmark_dir, tmp_path):
    model, tok = tiny_model_and_tokenizer
    bench = load_benchmark(tiny_benchmark_dir)
    (tmp_path / "run").mkdir()
    (tmp_path / "run/evaluation_manifest.json").write_text(json.dumps({"keep": 1}))
    extract_hidden(tmp_path / "run", bench, model, tok, model_name="tiny")
    manifest = read_json(tmp_path / "run/evaluation_manifest.json")
    assert manifest["keep"] == 1 and manifest["stages"]["extract"]["model"] == "tiny"
    store = HiddenStore(tmp_path / "run")
    store.validate(checksums=True)
    arr = store.layer(0)
    assert isinstance(arr, np.memmap) and arr.dtype == np.float16 and not arr.flags.writeable
    with pytest.raises(FksInputError, match="not stored"):
        store.layer(5)
    path = tmp_path / "run/hidden" / layer_filename(1)
    data = np.load(path)
    data[0, 0] += 1
    np.save(path, data)
    store.validate()  # shapes still fine
    with pytest.raises(FksInputError, match="sha256") as exc:
        store.verify_checksums()
    assert exc.value.path.endswith(layer_filename(1))
    np.save(path, data[:, :10])
    with pytest.raises(FksInputError, match="layer 1"):
        store.layer(1)
    with pytest.raises(FksInputError, match="missing"):
        HiddenStore(tmp_path / "nowhere")


def test_capture_inside_generate_reads_the_prefill(tiny_model_and_tokenizer, tiny_benchmark_dir):
    """The fused path's building block: states captured during ``generate`` (left padding)
    equal those of a separate extraction pass."""
    model, tok = tiny_model_and_tokenizer
    bench = load_benchmark(tiny_benchmark_dir)
    encoded = [encode_prompt(tok, build_prompt(q), 192)[0] for q in bench.queries[:5]]
    ids, mask = pad_batch(encoded, tok.pad_token_id, "left")
    with QueryEndCapture(model) as cap:
        cap.arm()
        with torch.no_grad():
            model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=3, do_sample=False,
                           pad_token_id=tok.pad_token_id)
        fused = cap.take()
        separate = extract_mod.forward_query_end(model, cap, ids, mask)
    for layer, states in separate.items():
        np.testing.assert_allclose(fused[layer].numpy(), states, rtol=1e-5, atol=1e-5)


def test_last_real_positions_both_sides():
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0]])
    assert last_real_positions(mask).tolist() == [3, 2, 3, 0]
    with pytest.raises(ValueError):
        last_real_positions(torch.tensor([[0, 0]]))


def test_no_main_query_is_bad_input(tiny_model_and_tokenizer, tiny_benchmark_dir, tmp_path):
    model, tok = tiny_model_and_tokenizer
    bench = load_benchmark(tiny_benchmark_dir)
    bench.queries[:] = [q for q in bench.queries if not q.use_for_main_forward]
    with pytest.raises(FksInputError) as exc:
        extract_hidden(tmp_path / "r", bench, model, tok, model_name="tiny")
    assert exc.value.field == "use_for_main_forward"
    assert Path(exc.value.path).name.startswith("evaluation_queries_")


@pytest.fixture(scope="module")
def tiny_gpt2(tiny_model_and_tokenizer):
    """A random GPT-2 (absolute position embeddings, ``transformer.h`` blocks)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    _, tok = tiny_model_and_tokenizer
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=4, n_positions=256,
                        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                        pad_token_id=tok.pad_token_id)
    return GPT2LMHeadModel(config).eval(), tok


def test_absolute_positions_follow_the_mask_under_left_padding(tiny_gpt2, tiny_benchmark_dir,
                                                               tmp_path):
    model, tok = tiny_gpt2
    bench = load_benchmark(tiny_benchmark_dir)
    extract_hidden(tmp_path / "run", bench, model, tok, model_name="gpt2", batch_size=8)
    store = HiddenStore(tmp_path / "run")
    by_id = {q.query_id: q for q in bench.queries}
    for rec in store.index:
        ids, _ = encode_prompt(tok, build_prompt(by_id[rec.query_id]), 192)
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_hidden_states=True)
        np.testing.assert_allclose(store.layer(0)[rec.row].astype(np.float32),
                                   out.hidden_states[1][0, -1].numpy(), rtol=2e-3, atol=2e-3)


def test_fused_with_generation_equals_separate_pass(tiny_model_dir, tiny_benchmark_dir, tmp_path):
    from fks.configs import load_configs
    from fks.generate.backends.hf import HFBackend
    from fks.generate.runner import generate_run
    from fks.hidden.fused import FusedExtraction

    configs = load_configs()
    backend = HFBackend(str(tiny_model_dir), generation=configs.models.generation, device="cpu")
    bench = load_benchmark(tiny_benchmark_dir)
    fused = FusedExtraction(tmp_path / "run", bench, backend, model_name="tiny")
    summary = generate_run(bench, tmp_path / "run", model="tiny", model_path=str(tiny_model_dir),
                           configs=configs, backend=fused.backend, batch_size=5)
    assert summary.complete
    meta = fused.finish()
    manifest = read_json(tmp_path / "run/evaluation_manifest.json")
    assert manifest["stages"]["extract"]["rows_from_this_pass"] == 0  # all from the prefill
    assert meta["rows_from_generation_prefill"] == meta["n_rows"]
    extract_hidden(tmp_path / "sep", bench, backend.model, backend.tokenizer, model_name="tiny")
    a, b = HiddenStore(tmp_path / "run"), HiddenStore(tmp_path / "sep")
    assert a.query_ids.tolist() == b.query_ids.tolist()
    for layer in a.layers:
        np.testing.assert_allclose(a.layer(layer).astype(np.float32),
                                   b.layer(layer).astype(np.float32), rtol=2e-3, atol=2e-3)
    # a generation already on disk: the fused run generates nothing, finish() extracts it all
    plain = tmp_path / "plain"
    plain.mkdir()
    for name in ("generations.jsonl", "evaluation_manifest.json"):
        shutil.copy(tmp_path / "run" / name, plain / name)
    late = FusedExtraction(plain, bench, backend, model_name="tiny")
    generate_run(bench, plain, model="tiny", model_path=str(tiny_model_dir), configs=configs,
                 backend=late.backend, batch_size=5)
    late.finish()
    assert read_json(plain / "evaluation_manifest.json")["stages"]["extract"][
        "rows_from_this_pass"] == a.n_rows
    np.testing.assert_array_equal(HiddenStore(plain).layer(1), b.layer(1))


def test_second_forward_pass_reproduces_the_stored_states(tiny_model_and_tokenizer,
                                                          tiny_benchmark_dir, tmp_path):
    # §18.2: a seeded sample of main queries is re-extracted one by one (a fresh forward
    # pass in another batch composition) and kept in float32 beside the float16 store
    from fks.hidden.extract import DUPLICATE_PASS_NAME
    from fks.hidden.store import HiddenStore as Store
    from fks.metrics.internal.sanity import duplicate_cosine_gap

    model, tok = tiny_model_and_tokenizer
    bench = load_benchmark(tiny_benchmark_dir)
    extract_hidden(tmp_path / "run", bench, model, tok, model_name="tiny", batch_size=4,
                   duplicate_sample=5)
    store = Store(tmp_path / "run")
    with np.load(tmp_path / "run" / "hidden" / DUPLICATE_PASS_NAME, allow_pickle=False) as z:
        rows = z["rows"]
        assert len(rows) == 5 and str(z["compute_dtype"]) == "float32"
        for layer in store.layers:
            fresh = z[f"layer_{layer:03d}"]
            stored = np.asarray(store.layer(layer)[rows], dtype=np.float64)
            cos = np.einsum("ij,ij->i", stored, fresh) / (
                np.linalg.norm(stored, axis=1) * np.linalg.norm(fresh, axis=1))
            assert (1 - cos).max() < duplicate_cosine_gap("float32")
        assert [store.query_ids[r] for r in rows.tolist()] == z["query_ids"].tolist()


def test_extraction_stops_after_the_highest_stored_block(deep_model, tiny_benchmark_dir,
                                                         tmp_path):
    """A store of layers 0-1 of 4 runs blocks 0-1 only (no upper block, final norm or
    unembedding), shared prefixes or not, and holds the bytes a full forward pass gives."""
    model, tok = deep_model
    bench = load_benchmark(tiny_benchmark_dir)
    calls = {"block": 0, "head": 0}
    hooks = [model.model.layers[2].register_forward_hook(
                 lambda *a: calls.__setitem__("block", calls["block"] + 1)),
             model.lm_head.register_forward_hook(
                 lambda *a: calls.__setitem__("head", calls["head"] + 1))]
    try:
        extract_hidden(tmp_path / "shared", bench, model, tok, model_name="deep",
                       layers=[0, 1], batch_size=4, duplicate_sample=0)
        assert HiddenStore(tmp_path / "shared").meta["share_prefixes"] == 4
        extract_hidden(tmp_path / "run", bench, model, tok, model_name="deep", layers=[0, 1],
                       batch_size=4, duplicate_sample=3, share_prefixes=0)
    finally:
        for h in hooks:
            h.remove()
    assert calls == {"block": 0, "head": 0}
    store = HiddenStore(tmp_path / "run")  # whole prompts: the bytes of a full pass
    assert store.layers == [0, 1] and len(store.index) > 4
    plan = extract_mod.plan_extraction(bench, model, tok, model_name="deep", layers=[0, 1])
    with QueryEndCapture(model, [0, 1]) as full:  # no early stop: every block and the head
        for batch in extract_mod.plan_batches([len(i) for i, _ in plan.encoded], 4):
            ids, mask = pad_batch([plan.encoded[i][0] for i in batch], tok.pad_token_id or 0)
            states = extract_mod.forward_query_end(model, full, ids, mask)
            for layer in (0, 1):
                assert np.array_equal(store.layer(layer)[batch],
                                      states[layer].astype(store.layer(layer).dtype))
    assert [r.query_id for r in store.index] == [q.query_id for q in plan.queries]
    dup = np.load(tmp_path / "run" / "hidden" / "duplicate_pass.npz", allow_pickle=False)
    assert dup["layer_000"].shape[0] == 3
