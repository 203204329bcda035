"""The demo model: its training split, tokenisation, deterministic training and the cache."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pytest

from fks.configs import load_configs
from fks.data.load import Benchmark, load_benchmark
from fks.demo.benchmark import build_demo_benchmark
from fks.demo.model import (
    ABSTAIN_ANSWER,
    INFO_NAME,
    ROLE_SHARES,
    ROLES,
    TAUGHT_LANGUAGES,
    DemoModelConfig,
    assign_roles,
    demo_model_key,
    encode_examples,
    ensure_demo_model,
    plan_training,
    train_demo_model,
)
from fks.generate.prompts import build_prompt, encode_prompt
from fks.io import read_json

#: a model small enough to train in a second or two (3 blocks: a J-Lens window below the top)
SMALL = DemoModelConfig(n_layers=3, hidden=32, n_heads=2, n_kv_heads=2, intermediate=64,
                        vocab_size=400, steps=6, batch_size=16, warmup_steps=2)


@pytest.fixture(scope="module")
def demo_bench(tmp_path_factory: pytest.TempPathFactory) -> Benchmark:
    out = build_demo_benchmark(tmp_path_factory.mktemp("demo") / "benchmark",
                               configs=load_configs())
    return load_benchmark(out)


@pytest.fixture(scope="module")
def plan(demo_bench: Benchmark):
    return plan_training(demo_bench)


# ------------------------------------------------------------------------------ the split
def test_roles_are_stratified_by_relation(demo_bench, plan):
    by_rel: dict[str, Counter] = defaultdict(Counter)
    for f in demo_bench.facts:
        by_rel[f.relation.relation_id][plan.roles[f.fact_id]] += 1
    assert set(plan.roles) == {f.fact_id for f in demo_bench.facts}
    for rel, counts in by_rel.items():
        n = sum(counts.values())
        for role in ("full", "unseen"):  # the big roles are in every relation, near their share
            assert abs(counts[role] - ROLE_SHARES[role] * n) <= 1, (rel, counts)
    totals = plan.role_counts()
    assert set(totals) == set(ROLES) and all(totals[r] > 0 for r in ROLES), totals


def test_assign_roles_is_order_free_and_deterministic():
    facts = {f"fact_{i:06d}": ("a" if i % 3 else "b") for i in range(40)}
    reordered = dict(reversed(list(facts.items())))
    assert assign_roles(facts) == assign_roles(reordered)


def test_examples_follow_the_split(demo_bench, plan):
    queries = {q.query_id: q for q in demo_bench.queries}
    taught_facts = defaultdict(set)
    for ex in plan.examples:
        q = queries[ex.query_id]
        role = plan.roles[q.fact_id]
        assert ex.prompt == build_prompt(q)  # exactly the prompt generation shows
        assert q.use_for_main_forward and q.target_slot == "object"
        assert role != "unseen"
        assert ex.answer == (ABSTAIN_ANSWER if role == "abstain" else q.gold_canonical)
        if role in ("core", "abstain"):
            assert q.condition_family in ("anchor", "paraphrase")
        if q.condition_family == "multilingual":
            assert q.language in TAUGHT_LANGUAGES
        taught_facts[q.fact_id].add(q.condition_family)
    for fid, role in plan.roles.items():
        fams = taught_facts.get(fid, set())
        assert ("anchor" in fams) == (role != "unseen"), (fid, role, fams)
    # every family of a full fact keeps a held-out query when it has two or more
    for fid in (f for f, r in plan.roles.items() if r == "full"):
        for fam in ("paraphrase", "format", "context"):
            qs = [q.query_id for q in demo_bench.queries
                  if q.fact_id == fid and q.condition_family == fam]
            taught = {ex.query_id for ex in plan.examples if ex.fact_id == fid}
            if len(qs) >= 2:
                assert 1 <= len(qs) - len(taught & set(qs)) <= 1, (fid, fam)


# ------------------------------------------------------------------------- tokenisation
def test_examples_encode_as_prompt_then_answer_then_eos(plan):
    from fks.demo.model import train_tokenizer

    tok = train_tokenizer(plan.corpus[:400], 400)
    examples = plan.examples[:20]
    rows = encode_examples(tok, examples, 192)
    for ex, (ids, n_prompt) in zip(examples, rows, strict=True):
        prompt_ids, _ = encode_prompt(tok, ex.prompt, 192)
        assert ids[:n_prompt] == prompt_ids and ids[0] == tok.bos_token_id
        assert ids[-1] == tok.eos_token_id
        assert tok.decode(ids[n_prompt:-1]) == " " + ex.answer


# ---------------------------------------------------------------------------- training
def _weights(folder: Path) -> dict:
    from safetensors.numpy import load_file

    return load_file(str(folder / "model.safetensors"))


def test_training_is_deterministic(plan, tmp_path):
    examples = plan.examples[:200]
    a = train_demo_model(examples, plan.corpus, tmp_path / "a", config=SMALL)
    b = train_demo_model(examples, plan.corpus, tmp_path / "b", config=SMALL)
    wa, wb = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert wa.keys() == wb.keys()
    assert all((wa[k] == wb[k]).all() for k in wa)
    assert a == b
    assert (tmp_path / "a" / "tokenizer.json").read_bytes() == \
        (tmp_path / "b" / "tokenizer.json").read_bytes()
    other = train_demo_model(examples, plan.corpus, tmp_path / "c",
                             config=DemoModelConfig(**{**SMALL.to_dict(), "seed": 7}))
    wc = _weights(tmp_path / "c")
    assert any((wa[k] != wc[k]).any() for k in wa)  # the seed matters
    assert other["loss_last"] < other["loss_first"]  # it learns something


def test_trained_model_loads_and_generates(plan, tmp_path):
    from transformers import AutoTokenizer

    from fks.demo.model import train_tokenizer
    from fks.generate.backends import make_backend

    train_demo_model(plan.examples[:64], plan.corpus, tmp_path / "m", config=SMALL)
    loaded = AutoTokenizer.from_pretrained(tmp_path / "m")
    fresh = train_tokenizer(plan.corpus, SMALL.vocab_size)
    for ex in plan.examples[:10]:  # generation sees the token ids training saw (BOS included)
        ids = encode_prompt(loaded, ex.prompt, 192)[0]
        assert ids == encode_prompt(fresh, ex.prompt, 192)[0]
        assert ids[0] == loaded.bos_token_id
    backend = make_backend("hf", str(tmp_path / "m"), configs=load_configs(), device="cpu")
    out = backend.generate([plan.examples[0].prompt], max_new_tokens=4)
    assert len(out) == 1 and out[0].status == "ok"
    assert backend.describe()["weights_sha256"]


# ------------------------------------------------------------------------------- cache
def test_ensure_demo_model_trains_once_then_reuses(demo_bench, tmp_path, monkeypatch):
    import fks.demo.model._cache as cache

    configs = load_configs()
    calls = []
    real = cache.train_demo_model

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(cache, "train_demo_model", counting)
    first = ensure_demo_model(configs=configs, cache_dir=tmp_path, benchmark=demo_bench,
                              config=SMALL)
    second = ensure_demo_model(configs=configs, cache_dir=tmp_path, benchmark=demo_bench.root,
                               config=SMALL)
    assert first == second and len(calls) == 1
    plan = plan_training(demo_bench)
    assert first == tmp_path / demo_model_key(plan, SMALL, 192)
    info = read_json(first / INFO_NAME)
    assert info["key"] == first.name and info["config"] == SMALL.to_dict()
    assert set(info["fact_roles"]) == {f.fact_id for f in demo_bench.facts}
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.name]  # no temp folder left
    other = ensure_demo_model(configs=configs, cache_dir=tmp_path, benchmark=demo_bench,
                              config=DemoModelConfig(**{**SMALL.to_dict(), "steps": 5}))
    assert other != first and len(calls) == 2  # another config, another key


def test_failed_training_leaves_nothing(demo_bench, tmp_path, monkeypatch):
    import fks.demo.model._cache as cache

    def boom(*args, **kwargs):
        (Path(args[2]) / "model.safetensors").write_bytes(b"partial")
        raise RuntimeError("killed")

    monkeypatch.setattr(cache, "train_demo_model", boom)
    with pytest.raises(RuntimeError, match="killed"):
        ensure_demo_model(configs=load_configs(), cache_dir=tmp_path, benchmark=demo_bench,
                          config=SMALL)
    assert list(tmp_path.iterdir()) == []


def test_cache_root_follows_fks_cache(monkeypatch, tmp_path):
    from fks.demo.model import cache_root

    monkeypatch.setenv("FKS_CACHE", str(tmp_path))
    assert cache_root() == tmp_path / "demo_model"
    assert cache_root(tmp_path / "x") == tmp_path / "x"
