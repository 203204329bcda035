"""``fks judge agreement A B``: judge consistency (spec §18.6).

``A`` is a judged file (``RUN/judged.jsonl``); ``B`` is another judged file or a
human-labelled sample: JSONL rows with ``query_id`` and any of ``extracted_answer``,
``cluster_id``, ``correctness`` (a row is compared only on the fields it has). On the query ids
present in both (per ``B`` row; ``A``'s fact ids and analysis groups are used):

* **extraction accuracy** -- normalised ``extracted_answer`` equal (a null on both sides, "no
  answer extractable", agrees);
* **cluster-equivalence accuracy** -- over pairs of answers of the same fact and analysis
  group, the share of pairs on which both sides agree about "same cluster or not" (cluster ids
  need not be equal strings, only the partitions are compared);
* **correctness accuracy**, **Cohen's kappa** and **Krippendorff's alpha** (nominal) on
  ``correctness``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from itertools import combinations
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from fks.data.schema import Correctness, JudgedRecord
from fks.errors import FksInputError
from fks.io import iter_jsonl
from fks.judge._run import analysis_group
from fks.metrics.stats import cohen_kappa, krippendorff_alpha_nominal
from fks.text import normalize

__all__ = ["judge_agreement", "LabelRow", "compare_labels"]


class LabelRow(BaseModel):
    """A row of a human-labelled sample (or of a judged file): only ``query_id`` is required."""

    model_config = ConfigDict(extra="allow")

    query_id: str
    extracted_answer: str | None = None
    cluster_id: str | None = None
    correctness: Correctness | None = None


def _read_labels(path: Path) -> dict[str, LabelRow]:
    rows: dict[str, LabelRow] = {}
    first_line: dict[str, int] = {}
    for line, row in iter_jsonl(path, LabelRow):
        assert isinstance(row, LabelRow)
        if row.query_id in rows:
            raise FksInputError(f"duplicate query {row.query_id!r} (first on line "
                                f"{first_line[row.query_id]})", path=path, line=line,
                                field="query_id")
        rows[row.query_id] = row
        first_line[row.query_id] = line
    return rows


def _norm(text: str | None) -> str | None:
    return None if text is None else normalize(text)


def _pair_agreement(a: dict[str, str], b: dict[str, str], groups: dict[str, str]
                    ) -> tuple[int, int]:
    """(agreeing pairs, pairs): same-cluster agreement over pairs within each group."""
    by_group: dict[str, list[str]] = defaultdict(list)
    for qid in a.keys() & b.keys():
        by_group[groups[qid]].append(qid)
    agree = total = 0
    for qids in by_group.values():
        for x, y in combinations(sorted(qids), 2):
            total += 1
            agree += (a[x] == a[y]) == (b[x] == b[y])
    return agree, total


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def compare_labels(a: dict[str, LabelRow], b: dict[str, LabelRow], groups: dict[str, str]
                   ) -> dict[str, Any]:
    """Agreement of two labelings keyed by query id (see the module docstring).

    Args:
        a: rows of the first labeling by query id; a field counts only where a row set it.
        b: rows of the second labeling, likewise.
        groups: query id -> grouping key for cluster pairs (fact id + analysis group).
    """
    common = sorted(a.keys() & b.keys())
    has = "model_fields_set"
    ext = [q for q in common if "extracted_answer" in getattr(a[q], has)
           and "extracted_answer" in getattr(b[q], has)]
    ext_ok = sum(_norm(a[q].extracted_answer) == _norm(b[q].extracted_answer) for q in ext)
    clus_a = {q: a[q].cluster_id for q in common if a[q].cluster_id is not None}
    clus_b = {q: b[q].cluster_id for q in common if b[q].cluster_id is not None}
    pairs_ok, pairs = _pair_agreement(clus_a, clus_b, groups)  # type: ignore[arg-type]
    cor = [q for q in common if a[q].correctness is not None and b[q].correctness is not None]
    la = [a[q].correctness for q in cor]
    lb = [b[q].correctness for q in cor]
    return {
        "n_overlap": len(common),
        "extraction": {"n": len(ext), "accuracy": _ratio(ext_ok, len(ext))},
        "cluster_equivalence": {"n_answers": len(clus_a.keys() & clus_b.keys()),
                                "n_pairs": pairs, "accuracy": _ratio(pairs_ok, pairs)},
        "correctness": {
            "n": len(cor),
            "accuracy": _ratio(sum(x == y for x, y in zip(la, lb, strict=True)), len(cor)),
            "cohen_kappa": _finite(cohen_kappa(la, lb)) if cor else None,
            "krippendorff_alpha": _finite(krippendorff_alpha_nominal([la, lb])) if cor else None,
        },
    }


def _finite(x: float) -> float | None:
    """JSON has no NaN: an undefined statistic is reported as null."""
    return None if math.isnan(x) else x


def judge_agreement(judged: str | Path, other: str | Path) -> dict[str, Any]:
    """Compare a judged file with another judged file or a human-labelled sample.

    Raises:
        FksInputError: a bad row in either file (file, line, field), or no overlap at all.
    """
    judged, other = Path(judged), Path(other)
    a: dict[str, LabelRow] = {}
    groups: dict[str, str] = {}
    for _, rec in iter_jsonl(judged, JudgedRecord):
        assert isinstance(rec, JudgedRecord)
        a[rec.query_id] = LabelRow.model_validate(
            {"query_id": rec.query_id, "extracted_answer": rec.extracted_answer,
             "cluster_id": rec.cluster_id, "correctness": rec.correctness})
        groups[rec.query_id] = rec.fact_id + "|" + analysis_group(
            rec.use_for_main_forward, rec.use_for_reverse_analysis,
            rec.use_for_recognition_analysis, rec.condition_family)
    b = _read_labels(other)
    result = compare_labels(a, b, groups)
    if result["n_overlap"] == 0:
        raise FksInputError(f"no query_id in common with {judged}", path=other,
                            field="query_id")
    return {"a": str(judged), "b": str(other), **result}
