"""Fixtures of the judge tests: hand-written scored records against ``tiny_benchmark_dir``.

The scorer is written elsewhere; these rows are what it would emit (ScoredRecord fields).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from fks.data.load import load_benchmark

#: answers per (fact, family): raw response, scorer label, extracted answer
ANSWERS = {
    "fact_000001": {  # France -> Paris, in three languages; one recognition; one reverse
        "anchor": ("Paris", "correct", "Paris"),
        "paraphrase": ("The answer is Paris.", "correct", "Paris"),
        "format": ("Paris, France", "correct", "Paris"),
        "context": ("I don't know.", "abstain", None),
        "multilingual": ("巴黎", "correct", "巴黎"),
        "recognition": ("Paris", "correct", "Paris"),
        "reverse": ("France", "correct", "France"),
    },
    "fact_000002": {  # Germany -> Berlin, but the model says Tokyo (a known capital)
        "anchor": ("Tokyo", "incorrect", "Tokyo"),
        "paraphrase": ("Tokyo", "incorrect", "Tokyo"),
        "format": ("Tokyo.", "incorrect", "Tokyo"),
        "context": ("Tokyo or Berlin", "ambiguous", None),
        "multilingual": ("Токио", "incorrect", "Токио"),
        "recognition": ("Berlin", "correct", "Berlin"),
    },
    "fact_000003": {  # Japan -> Tokyo, unstable, one unknown string answer
        "anchor": ("Tokyo", "correct", "Tokyo"),
        "paraphrase": ("Kyoto", "incorrect", "Kyoto"),
        "format": ("Osaka", "incorrect", "Osaka"),
        "context": ("", "unparseable", None),
        "multilingual": ("东京", "correct", "东京"),
        "recognition": ("Tokyo", "correct", "Tokyo"),
    },
    "fact_000004": {  # Airbus A320 -> Airbus
        "anchor": ("Airbus", "correct", "Airbus"),
        "paraphrase": ("Airbus SE", "correct", "Airbus"),
        "format": ("Boeing", "incorrect", "Boeing"),
        "recognition": ("Airbus", "correct", "Airbus"),
        "reverse_illposed": ("Airbus A320", "correct", "Airbus A320"),
    },
}


def scored_row(query: dict, raw: str, label: str, extracted: str | None, *,
               model: str = "tiny-model", status: str = "ok") -> dict:
    """A ScoredRecord row for ``query`` (a benchmark query dict)."""
    return {
        "model": model, "query_id": query["query_id"], "fact_id": query["fact_id"],
        "relation": query["relation"], "condition_family": query["condition_family"],
        "language": query["language"],
        "use_for_main_forward": query["use_for_main_forward"],
        "use_for_reverse_analysis": query["use_for_reverse_analysis"],
        "use_for_recognition_analysis": query["use_for_recognition_analysis"],
        "answer_in_subject_surface": query["answer_in_subject_surface"],
        "raw_response": raw if status == "ok" else "",
        "generation_config": {"do_sample": False, "temperature": 0.0, "max_new_tokens": 24},
        "prompt_version": "test-v1", "status": status,
        "error": None if status == "ok" else "boom",
        "label": label, "extracted_answer": extracted, "matched_alias": None,
    }


def tiny_scored_rows(bench_dir: Path) -> list[dict]:
    """One scored row per query of the tiny benchmark (see :data:`ANSWERS`)."""
    bench = load_benchmark(bench_dir)
    rows = []
    for q in bench.queries:
        raw, label, ext = ANSWERS[q.fact_id][q.condition_family]
        rows.append(scored_row(q.model_dump(mode="json"), raw, label, ext))
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    return path


@pytest.fixture
def tiny_run(tmp_path: Path, tiny_benchmark_dir: Path) -> Path:
    """A run directory with a hand-written ``scored.jsonl`` for the tiny benchmark."""
    run = tmp_path / "run"
    write_jsonl(run / "scored.jsonl", tiny_scored_rows(tiny_benchmark_dir))
    return run


@pytest.fixture
def scored_rows() -> Callable[[Path], list[dict]]:
    return tiny_scored_rows


@pytest.fixture
def make_scored_row() -> Callable[..., dict]:
    return scored_row
