"""Round trips of every record and config model: dump -> validate -> equal, extras kept."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, ValidationError

from fks.configs import CONFIG_NAMES, load_configs
from fks.data.schema import Fact, GenerationRecord, JudgedRecord, Query, ScoredRecord
from fks.io import dumps_record
from tiny_benchmark import tiny_benchmark_rows

GENERATION = {
    "model": "tiny-llama",
    "query_id": "query_00000001",
    "fact_id": "fact_000001",
    "relation": "capital",
    "condition_family": "anchor",
    "language": "en",
    "use_for_main_forward": True,
    "raw_response": " Paris.",
    "generation_config": {"do_sample": False, "max_new_tokens": 24},
    "prompt_version": "v1",
    "n_prompt_tokens": 12,
    "n_generated_tokens": 3,
    "answer_logprobs": [-0.1, -0.5, -2.0],
}
SCORED = GENERATION | {"label": "correct", "extracted_answer": "Paris", "matched_alias": "Paris"}
JUDGED = SCORED | {"cluster_id": "c0", "canonical_meaning": "Paris", "status": "ANSWER",
                   "confidence": 0.9, "correctness": "CORRECT", "judge": "alias"}


def _records() -> list[tuple[type[BaseModel], dict]]:
    facts, queries = tiny_benchmark_rows()
    recognition = next(q for q in queries if q.get("options"))
    return [(Fact, facts[3]), (Query, queries[0]), (Query, recognition),
            (GenerationRecord, GENERATION), (ScoredRecord, SCORED), (JudgedRecord, JUDGED)]


@pytest.mark.parametrize("model,row", _records(), ids=lambda x: getattr(x, "__name__", ""))
def test_record_round_trip_keeps_extra_fields(model, row):
    row = row | {"extra_top": {"nested": [1, "两"]}, "note": None}
    first = model.model_validate(row)
    dumped = first.model_dump(mode="json")
    assert dumped["extra_top"] == {"nested": [1, "两"]} and "note" in dumped
    again = model.model_validate(dumped)
    assert again == first
    assert again.model_dump(mode="json") == dumped
    # and through the JSONL line the io layer writes
    assert model.model_validate(json.loads(dumps_record(first))) == first
    assert _contains(dumped, row)  # nothing given is lost or changed (defaults may be added)


def _contains(big, small) -> bool:
    """``small`` is ``big`` with some defaulted keys left out (recursively)."""
    if isinstance(small, dict):
        return isinstance(big, dict) and all(k in big and _contains(big[k], v)
                                             for k, v in small.items())
    if isinstance(small, list):
        return (isinstance(big, list) and len(big) == len(small)
                and all(_contains(b, s) for b, s in zip(big, small, strict=True)))
    return big == small and type(big) is type(small)


def test_nested_entity_extra_fields_are_kept():
    facts, _ = tiny_benchmark_rows()
    row = facts[0]
    row["subject"]["description"] = "country in Europe"
    fact = Fact.model_validate(row)
    assert fact.model_dump()["subject"]["description"] == "country in Europe"


@pytest.mark.parametrize("model,field,value", [
    (Fact, "fact_id", "fact_1"),
    (Fact, "is_functional", "maybe"),
    (Query, "language", "xx"),
    (Query, "condition_family", "jokes"),
    (Query, "target_slot", "verb"),
    (ScoredRecord, "label", "mostly-correct"),
    (JudgedRecord, "confidence", 1.5),
], ids=lambda x: x if isinstance(x, str) else "")
def test_bad_values_are_rejected_with_their_field(model, field, value):
    facts, queries = tiny_benchmark_rows()
    base = {Fact: facts[0], Query: queries[0], ScoredRecord: SCORED, JudgedRecord: JUDGED}[model]
    with pytest.raises(ValidationError) as exc:
        model.model_validate(base | {field: value})
    assert exc.value.errors()[0]["loc"][0] == field


def test_judged_status_replaces_generation_status():
    rec = JudgedRecord.model_validate(JUDGED | {"generation_status": "timeout"})
    assert rec.status == "ANSWER" and rec.generation_status == "timeout"
    with pytest.raises(ValidationError):
        JudgedRecord.model_validate(JUDGED | {"status": "ok"})


def test_gold_aliases_canonical_first_deduplicated():
    facts, _ = tiny_benchmark_rows()
    fact = Fact.model_validate(facts[0])
    assert fact.gold_aliases() == ["Paris", "巴黎", "Париж"]


@pytest.mark.parametrize("name", list(CONFIG_NAMES))
def test_config_round_trip(name):
    cfg = getattr(load_configs(), name)
    dumped = cfg.model_dump(mode="json")
    again = type(cfg).model_validate(dumped)
    assert again == cfg
    assert again.model_dump(mode="json") == dumped
    assert json.loads(json.dumps(dumped)) == dumped  # JSON-able, as run manifests need


@pytest.mark.parametrize("name", list(CONFIG_NAMES))
def test_config_models_forbid_unknown_keys(name):
    # configs are strict on purpose: a misspelt key must not be silently ignored
    cfg = getattr(load_configs(), name)
    with pytest.raises(ValidationError) as exc:
        type(cfg).model_validate(cfg.model_dump(mode="json") | {"misspelt_key": 1})
    assert exc.value.errors()[0]["type"] == "extra_forbidden"


def test_snapshot_is_json_and_revalidates():
    configs = load_configs()
    snap = json.loads(json.dumps(configs.snapshot()))
    for name, model in CONFIG_NAMES.items():
        assert model.model_validate(snap[name]) == getattr(configs, name)
    assert snap["sources"]["metrics"] == ["fks:configs/metrics.yaml"]
