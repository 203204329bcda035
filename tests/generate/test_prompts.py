"""build_prompt: the exact strings per family; encode_prompt: the truncation rule."""

from __future__ import annotations

import pytest

from fks.configs import FAMILIES
from fks.data.schema import Query
from fks.errors import FksInputError
from fks.generate.prompts import PROMPT_VERSION, build_prompt, encode_prompt
from tiny_benchmark import tiny_benchmark_rows

WRAP = "Answer the following question with a short factual answer.\nQuestion: {}\nAnswer:"


def _queries_by_family() -> dict[str, list[dict]]:
    _, queries = tiny_benchmark_rows()
    out: dict[str, list[dict]] = {}
    for q in queries:
        out.setdefault(q["condition_family"], []).append(q)
    return out


def test_every_family_is_covered_by_the_fixture():
    assert set(_queries_by_family()) == set(FAMILIES)


def test_anchor_gets_the_instruction_wrapper():
    q = _queries_by_family()["anchor"][0]
    assert build_prompt(q) == WRAP.format("What is the capital of France?")
    assert build_prompt(q) == (
        "Answer the following question with a short factual answer.\n"
        "Question: What is the capital of France?\nAnswer:"
    )


@pytest.mark.parametrize("family", ["paraphrase", "format", "context", "multilingual", "reverse",
                                    "reverse_illposed"])
def test_perturbed_queries_keep_their_surface_and_get_a_bare_cue(family):
    for q in _queries_by_family()[family]:
        assert build_prompt(q) == q["query"] + "\nAnswer:"


def test_exact_strings_for_some_perturbed_queries():
    fam = _queries_by_family()
    assert build_prompt(fam["paraphrase"][0]) == "The capital city of France is\nAnswer:"
    assert build_prompt(fam["multilingual"][0]) == "La capitale de France est\nAnswer:"
    assert build_prompt(fam["context"][0]) == (
        "Madrid is a large city. What is the capital of France?\nAnswer:")


def test_recognition_lists_lettered_options():
    q = _queries_by_family()["recognition"][0]
    assert q["options"] == ["Berlin", "Paris", "Tokyo"]
    assert build_prompt(q) == (
        "What is the capital of France?\nA. Berlin\nB. Paris\nC. Tokyo\nAnswer:")


def test_recognition_without_options_is_the_query_as_is():
    q = dict(_queries_by_family()["recognition"][0])
    del q["options"]
    assert build_prompt(q) == "What is the capital of France?\nAnswer:"


def test_pydantic_query_and_dict_give_the_same_prompt():
    for rows in _queries_by_family().values():
        for q in rows:
            assert build_prompt(Query.model_validate(q)) == build_prompt(q)


def test_no_chat_template_markers_and_version():
    assert PROMPT_VERSION == "fks-prompt-v1"
    for rows in _queries_by_family().values():
        for q in rows:
            p = build_prompt(q)
            assert p.endswith("\nAnswer:") and "<|" not in p and "[INST]" not in p


def test_missing_query_text_is_an_input_error():
    with pytest.raises(FksInputError, match="field 'query'"):
        build_prompt({"condition_family": "anchor", "query": ""})
    with pytest.raises(FksInputError, match="condition_family"):
        build_prompt({"query": "x"})
    with pytest.raises(FksInputError, match="options"):
        build_prompt({"condition_family": "recognition", "query": "x",
                      "options": [str(i) for i in range(27)]})


class _FakeTokenizer:
    """Whitespace tokenizer: ids are word positions + 10; BOS = 1 when ``bos``."""

    def __init__(self, bos: bool) -> None:
        self.bos_token_id = 1
        self.bos = bos

    def __call__(self, text, add_special_tokens=True):
        ids = [10 + i for i, _ in enumerate(text.split())]
        return {"input_ids": ([1] if self.bos and add_special_tokens else []) + ids}


def test_encode_prompt_keeps_the_end_and_the_bos():
    text = " ".join(f"w{i}" for i in range(300))
    ids, cut = encode_prompt(_FakeTokenizer(bos=True), text, 192)
    assert cut and len(ids) == 192
    assert ids[0] == 1 and ids[1:] == [10 + i for i in range(300 - 191, 300)]
    ids, cut = encode_prompt(_FakeTokenizer(bos=False), text, 192)
    assert cut and ids == [10 + i for i in range(300 - 192, 300)]
    ids, cut = encode_prompt(_FakeTokenizer(bos=True), "a b c", 192)
    assert not cut and ids == [1, 10, 11, 12]
