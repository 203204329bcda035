"""One shard rule for every stage, and sharded-then-merged runs equal to unsharded ones."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fks.cli import main
from fks.data.load import load_benchmark
from fks.errors import FksInputError
from fks.generate.runner import assign_shards, benchmark_shards
from fks.io import read_json
from tiny_benchmark import tiny_benchmark_rows, write_benchmark

# ------------------------------------------------------------------------- the shard rule
facts_strategy = st.lists(
    st.tuples(st.text("abcdefgh0123456789", min_size=1, max_size=6),
              st.sampled_from(["P17", "P36", "P176", "P19"])),
    min_size=1, max_size=60, unique_by=lambda t: t[0])


@settings(max_examples=60, deadline=None)
@given(facts=facts_strategy, n=st.integers(1, 7), seed=st.randoms())
def test_assignment_is_balanced_by_relation_and_order_free(facts, n, seed):
    owner = assign_shards(facts, n)
    assert set(owner) == {f for f, _ in facts} and set(owner.values()) <= set(range(1, n + 1))
    shuffled = list(facts)
    seed.shuffle(shuffled)
    assert assign_shards(shuffled + facts[:3], n) == owner  # order and repeats do not matter
    for rel in {r for _, r in facts}:  # every relation split as evenly as possible
        counts = Counter(owner[f] for f, r in facts if r == rel)
        sizes = [counts.get(i, 0) for i in range(1, n + 1)]
        assert max(sizes) - min(sizes) <= 1
    totals = Counter(owner.values())
    sizes = [totals.get(i, 0) for i in range(1, n + 1)]
    assert max(sizes) - min(sizes) <= 1


def test_assignment_rejects_bad_input_and_is_stable():
    with pytest.raises(FksInputError, match="shard"):
        assign_shards([("f", "r")], 0)
    with pytest.raises(FksInputError, match="two relations|relations"):
        assign_shards([("f", "r1"), ("f", "r2")], 2)
    facts = [(f"fact_{i:06d}", f"P{i % 3}") for i in range(30)]
    # pinned values: the rule must not drift between versions (the shards of one run, made by
    # two fks versions, would otherwise overlap and leave gaps)
    assert [assign_shards(facts, 4)[f] for f, _ in facts[:12]] == \
        [2, 4, 1, 2, 3, 2, 4, 2, 2, 1, 2, 3]
    again = assign_shards(list(reversed(facts)), 4)
    assert again == assign_shards(facts, 4)


def test_every_query_of_a_fact_lands_in_one_shard(tiny_benchmark_dir):
    bench = load_benchmark(tiny_benchmark_dir)
    owner = benchmark_shards(bench, 2)
    by_shard = Counter(owner[q.fact_id] for q in bench.queries)
    assert sum(by_shard.values()) == len(bench.queries) and set(by_shard) == {1, 2}
    # capital has 3 facts (2 + 1), manufacturer 1: dealt on, so the totals are 2 and 2
    assert sorted(Counter(owner.values()).values()) == [2, 2]


# ----------------------------------------------------------- sharded + merged == unsharded
def _cli(*args: str) -> int:
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return exc.value.code


@pytest.fixture(scope="module")
def runs(tmp_path_factory, scale_model_dir):
    """The tiny benchmark run unsharded and in 2 shards, through the commands (batch 1)."""
    root = tmp_path_factory.mktemp("shards")
    bench = write_benchmark(root / "bench", *tiny_benchmark_rows())
    model = scale_model_dir
    gen = ("generate", "--model", "tiny", "--model-path", model, "--benchmark", bench,
           "--device", "cpu", "--batch-size", "1")
    ext = ("--benchmark", bench, "--model-path", model, "--device", "cpu", "--batch-size", "1")
    one, two = root / "one", root / "two"
    assert _cli(*gen, "--out", one) == 0
    assert _cli("score", one, "--benchmark", bench) == 0
    assert _cli("judge", one, "--benchmark", bench) == 0
    assert _cli("extract", one, *ext) == 0
    for i in (1, 2):
        assert _cli(*gen, "--out", two, "--shard", f"{i}/2") == 0
        assert _cli("extract", two, *ext, "--shard", f"{i}/2") == 0
    assert _cli("merge", two) == 0  # generate + extract
    assert _cli("score", two, "--benchmark", bench) == 0
    for i in (1, 2):
        assert _cli("judge", two, "--benchmark", bench, "--shard", f"{i}/2") == 0
    assert _cli("merge", two, "--stages", "judge") == 0
    return bench, one, two


@pytest.mark.parametrize("name", ["generations.jsonl", "scored.jsonl", "judged.jsonl",
                                  "hidden/index.jsonl"])
def test_merged_files_equal_the_unsharded_ones_byte_for_byte(runs, name):
    _, one, two = runs
    assert (two / name).read_bytes() == (one / name).read_bytes()
    assert len((two / name).read_text().splitlines()) > 10


def test_merged_hidden_arrays_equal_the_unsharded_ones(runs):
    _, one, two = runs
    meta_one, meta_two = read_json(one / "hidden/meta.json"), read_json(two / "hidden/meta.json")
    assert meta_two["layers"] == meta_one["layers"] == [0, 1, 2, 3]
    assert meta_two["merged_from_shards"] == 2
    for layer in meta_one["layers"]:
        a = np.load(one / f"hidden/layer_{layer:03d}.npy", allow_pickle=False)
        b = np.load(two / f"hidden/layer_{layer:03d}.npy", allow_pickle=False)
        assert a.shape == b.shape and a.shape[0] > 10
        np.testing.assert_array_equal(a, b)  # batch 1: no padding, the same sums


def test_shards_are_balanced_and_manifests_record_the_merge(runs):
    _, _, two = runs
    n_shard = [len((two / f"shards/shard_{i}_of_2/generations.jsonl").read_text().splitlines())
               for i in (1, 2)]
    assert all(n > 0 for n in n_shard)
    man = read_json(two / "evaluation_manifest.json")
    assert man["selection"]["merged_from_shards"] == 2
    assert [s["n_records"] for s in man["stages"]["generate"]["shards"]] == n_shard
    assert man["stages"]["judge"]["merged_from_shards"] == 2
    assert man["stages"]["judge"]["counts"]["records"] == sum(n_shard)
    assert man["stages"]["extract"]["merged_from_shards"] == 2
    shard_man = read_json(two / "shards/shard_1_of_2/evaluation_manifest.json")
    assert shard_man["stages"]["judge"]["shard"] == [1, 2]
    assert shard_man["stages"]["extract"]["shard"] == [1, 2]
    # every judged shard row is of a fact dealt to that shard
    owner = benchmark_shards(load_benchmark(runs[0]), 2)
    for i in (1, 2):
        rows = [json.loads(x) for x in
                (two / f"shards/shard_{i}_of_2/judged.jsonl").read_text().splitlines()]
        assert rows and {owner[r["fact_id"]] for r in rows} == {i}


def test_a_remerge_is_idempotent(runs):
    _, _, two = runs
    before = {p: (two / p).read_bytes() for p in ("generations.jsonl", "judged.jsonl",
                                                  "hidden/layer_001.npy")}
    assert _cli("merge", two) == 0
    assert {p: (two / p).read_bytes() for p in before} == before


def test_extract_shard_with_no_query_is_an_input_error(runs, scale_model_dir, tmp_path):
    bench, _, _ = runs
    assert _cli("extract", tmp_path / "r", "--benchmark", bench, "--model-path",
                scale_model_dir, "--device", "cpu", "--shard", "5/5") == 2
    assert _cli("judge", tmp_path / "r", "--benchmark", bench, "--shard", "3/2") == 2
