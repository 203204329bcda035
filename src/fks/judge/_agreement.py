"""``fks judge agreement A B``: judge consistency (spec §18.6).

``A`` is a judged file (``RUN/judged.jsonl``); ``B`` is another judged file or a
human-labelled sample: JSONL rows with ``query_id`` and any of ``kind``, ``extracted_answer``,
``cluster_id``, ``correctness``, ``condition_family``, ``split`` (a row is compared only on the
fields it has). Rows are matched on ``(model, query_id)``: two runs of one benchmark share
query ids, so a sample holding several models' answers names each row's ``model``; rows of
other models are left out; a row without ``model`` matches a judged file of one model. On the
answers present in both (per ``B`` row; ``A``'s fact ids and analysis groups are used):

* **extraction accuracy** -- normalised ``extracted_answer`` equal (a null on both sides, "no
  answer extractable", agrees);
* **cluster-equivalence accuracy** -- over pairs of answers of the same fact and analysis
  group, the share of pairs on which both sides agree about "same cluster or not" (cluster ids
  need not be equal strings, only the partitions are compared);
* **correctness accuracy**, **Cohen's kappa** and **Krippendorff's alpha** (nominal) on
  ``correctness``;
* **kind agreement** -- where both rows carry a kind (``B``'s ``kind``; ``A``'s judge
  ``status``): ANSWER / ABSTAIN / MULTIPLE / UNPARSEABLE equal, with the confusion counts.
  Extraction is then compared only where both say ANSWER (``A``'s extraction is the judge's
  own ``judge_answer`` where the judged file has it, else the scorer's ``extracted_answer``);
  normalised text equal after trimming punctuation (:func:`fks.judge.semantic_key`);
* **per-fact BCS gap** -- for each fact (and analysis group) with at least two compared
  answers, BCS (spec §16.1, :func:`fks.metrics.behavior.compute_bcs_bes`, over the families
  present) from ``A``'s clusters and from ``B``'s, over the facts that have a BCS under both
  (the product's scorable-fact rule, see :func:`_bcs_gap`); the mean absolute difference with
  a 95 % percentile-bootstrap interval over facts, both means, the facts with the largest
  gaps, and how many facts only one labeling can score.

**Both sides must be of one benchmark** (issue 28: two benchmarks' files used to match on
``query_id`` alone, 815 "common" rows). When both files sit in run directories whose
``evaluation_manifest.json`` records ``benchmark.checksum``, the checksums must be equal; and a
matched ``B`` row that names the query's ``fact_id``, ``relation``, ``condition_family`` or
``language`` must name the same as ``A``'s row. Otherwise exit 2 naming both files.

``split`` (``--split dev|test``) keeps only the ``B`` rows whose ``split`` field has that
value. :func:`judge_agreement` also measures the five-label scorer's labels found in the
judged file (``label``: ``correct``/``incorrect`` are ANSWER with correctness
CORRECT/INCORRECT, ``ambiguous`` is MULTIPLE/AMBIGUOUS, ``abstain`` ABSTAIN/ABSTAIN,
``unparseable`` UNPARSEABLE/REVIEW_REQUIRED; its extraction is ``extracted_answer``; its
clusters are none, so only kind, extraction and correctness) against the same ``B`` rows:
``scorer`` in the output.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from itertools import combinations
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from fks.data.schema import Correctness, JudgedRecord
from fks.errors import FksInputError
from fks.io import iter_jsonl
from fks.judge._lexicon import semantic_key
from fks.judge._run import analysis_group
from fks.metrics.stats import cohen_kappa, krippendorff_alpha_nominal

__all__ = ["judge_agreement", "LabelRow", "NoOverlap", "compare_labels", "validate_labels"]


class NoOverlap(FksInputError):
    """The two files share no answer (in the split asked for).

    A judged file and labels of other runs: ``fks report --labels`` skips that run (every
    other input error is exit 2).
    """


class LabelRow(BaseModel):
    """A row of a human-labelled sample (or of a judged file): only ``query_id`` is required."""

    model_config = ConfigDict(extra="allow")

    query_id: str
    model: str | None = None
    extracted_answer: str | None = None
    cluster_id: str | None = None
    correctness: Correctness | None = None
    kind: Literal["ANSWER", "ABSTAIN", "MULTIPLE", "UNPARSEABLE"] | None = None
    condition_family: str | None = None
    split: str | None = None


def _read_labels(path: Path, models: set[str],
                 first_line: dict[str, int] | None = None) -> dict[str, LabelRow]:
    """Read a labelled sample keyed like the judged file (see :func:`_key`).

    A row naming a ``model`` not in ``models`` (another run's answers) is left out.
    ``first_line`` (filled when given) maps each key to its line.
    """
    rows: dict[str, LabelRow] = {}
    first_line = {} if first_line is None else first_line
    one = next(iter(models)) if len(models) == 1 else None
    for line, row in iter_jsonl(path, LabelRow):
        assert isinstance(row, LabelRow)
        model = row.model if row.model is not None else one
        if row.model is not None and row.model not in models:
            continue
        key = _key(model, row.query_id)
        if key in rows:
            raise FksInputError(f"duplicate query {row.query_id!r} (first on line "
                                f"{first_line[key]})", path=path, line=line, field="query_id")
        rows[key] = row
        first_line[key] = line
    return rows


#: the fields that tie a row to its benchmark query (compared where both sides have them)
IDENTITY_FIELDS = ("fact_id", "relation", "condition_family", "language")


def _benchmark_checksum(path: Path) -> tuple[str | None, Path]:
    """``benchmark.checksum`` of the run manifest beside ``path`` (None without one)."""
    from fks.generate.manifest import MANIFEST_NAME, read_run_manifest

    manifest = path.parent / MANIFEST_NAME
    if not manifest.is_file():
        return None, manifest
    bench = read_run_manifest(path.parent).get("benchmark")
    checksum = bench.get("checksum") if isinstance(bench, dict) else None
    return (checksum if isinstance(checksum, str) else None), manifest


def _same_benchmark(judged: Path, other: Path, a_ids: dict[str, tuple[int, dict[str, Any]]],
                    b: dict[str, LabelRow], b_lines: dict[str, int]) -> None:
    """Refuse two files of different benchmarks (manifest checksums, then each matched row).

    Raises:
        FksInputError: the manifests' checksums differ, or a matched row of ``other`` names
            another fact, relation, family or language than ``judged``'s row (file:line).
    """
    (ca, ma), (cb, mb) = _benchmark_checksum(judged), _benchmark_checksum(other)
    if ca is not None and cb is not None and ca != cb:
        raise FksInputError(
            f"benchmark {cb[:12]}... is not the benchmark of {judged} ({ca[:12]}..., {ma}): "
            "the two files answer different queries", path=mb, field="benchmark.checksum")
    for key, row in b.items():
        if key not in a_ids:
            continue
        a_line, ident = a_ids[key]
        theirs = {**(row.model_extra or {}), "condition_family": row.condition_family}
        for name in IDENTITY_FIELDS:
            value = theirs.get(name)
            if value is not None and value != ident[name]:
                raise FksInputError(
                    f"query {row.query_id!r} is {name} {value!r} here but {ident[name]!r} in "
                    f"{judged}:{a_line}: the two files are of different benchmarks",
                    path=other, line=b_lines[key], field=name)


def validate_labels(path: str | Path) -> int:
    """Validate a labelled sample on its own (``fks report --labels F``); return its row count.

    Every row must be a :class:`LabelRow` and ``(model, query_id)`` unique.

    Raises:
        FksInputError: a missing or malformed file, a bad row or a duplicate (file, line,
            field), or a file without any row.
    """
    path = Path(path)
    first: dict[str, int] = {}
    for line, row in iter_jsonl(path, LabelRow):
        assert isinstance(row, LabelRow)
        key = _key(row.model, row.query_id)
        if key in first:
            raise FksInputError(f"duplicate query {row.query_id!r} (first on line "
                                f"{first[key]})", path=path, line=line, field="query_id")
        first[key] = line
    if not first:
        raise FksInputError("no labelled row", path=path)
    return len(first)


def _key(model: str | None, query_id: str) -> str:
    """Rows are matched by model and query id (two runs of one benchmark share query ids)."""
    return f"{model}\x1f{query_id}"


_ARTICLE = re.compile(r"^(?:the|a|an|le|la|les|l'|el|los|las|der|die|das)\s*(?=\w)")


def _norm(text: str | None) -> str | None:
    """Normalise an extraction: :func:`semantic_key`, a leading article dropped.

    So ``The United States of America`` = ``United States of America``.
    """
    return None if text is None else _ARTICLE.sub("", semantic_key(text))


KINDS = ("ANSWER", "ABSTAIN", "MULTIPLE", "UNPARSEABLE")
#: the five-label scorer's label -> (kind, correctness)
SCORER_LABELS: dict[str, tuple[str, str]] = {
    "correct": ("ANSWER", "CORRECT"),
    "incorrect": ("ANSWER", "INCORRECT"),
    "ambiguous": ("MULTIPLE", "AMBIGUOUS"),
    "abstain": ("ABSTAIN", "ABSTAIN"),
    "unparseable": ("UNPARSEABLE", "REVIEW_REQUIRED"),
}


#: how many facts the agreement report names under ``bcs_gap.largest_gaps``
GAP_FACTS_SHOWN = 10


def _bcs_gap(a: dict[str, str], b: dict[str, str], groups: dict[str, str],
             families: dict[str, str]) -> dict[str, Any]:
    """Per-fact BCS from both labelings, under the product's own fact rule; mean |gap|.

    A fact's BCS is the one fks publishes (:mod:`fks.metrics.behavior`): over its scorable
    answers (not empty, ``UNPARSEABLE`` or ``REVIEW_REQUIRED``), and defined only when at least
    ``MIN_ANSWERED_FAMILY_SHARE`` of the main families present (rounded up, at least one) have a
    scorable answer. The gap is taken over facts scorable under *both* labelings; a fact
    scorable under one only is a disagreement about scorability, counted in
    ``n_facts_scorable_one_side`` (never folded into the gap), and one scorable under neither in
    ``n_facts_undefined``. ``any_scorable_answer`` repeats the gap over every fact with at least
    one scorable answer on both sides (the looser rule, for comparison). Facts are summed in
    sorted order with ``math.fsum``, so the figures do not depend on the hash seed.
    """
    from fks.metrics.behavior import (
        MIN_ANSWERED_FAMILY_SHARE,
        compute_bcs_bes,
        unscorable_reason,
    )

    by_group: dict[str, list[str]] = defaultdict(list)
    for qid in sorted(a.keys() & b.keys()):
        by_group[groups[qid]].append(qid)
    strict: dict[str, list[float]] = {"gap": [], "a": [], "b": []}
    loose: dict[str, list[float]] = {"gap": [], "a": [], "b": []}
    facts: list[tuple[str, float, float]] = []  # (group, bcs_a, bcs_b) of the strict facts
    one_side = undefined = 0
    for group in sorted(by_group):
        qids = by_group[group]
        if len(qids) < 2:
            continue
        fams = sorted({families[q] for q in qids})
        need = max(1, math.ceil(MIN_ANSWERED_FAMILY_SHARE * len(fams) - 1e-9))
        bcs, ok = [], []
        for lab in (a, b):
            recs = [{"condition_family": families[q], "cluster_id": lab[q]} for q in qids]
            answered = {r["condition_family"] for r in recs if unscorable_reason(r) is None}
            ok.append(len(answered) >= need)
            bcs.append(compute_bcs_bes(recs, fams)["bcs"] if answered else None)
        if bcs[0] is not None and bcs[1] is not None:
            for key, val in (("gap", abs(bcs[0] - bcs[1])), ("a", bcs[0]), ("b", bcs[1])):
                loose[key].append(val)
        if ok[0] and ok[1]:
            for key, val in (("gap", abs(bcs[0] - bcs[1])), ("a", bcs[0]), ("b", bcs[1])):
                strict[key].append(val)
            facts.append((group, bcs[0], bcs[1]))
        elif ok[0] or ok[1]:
            one_side += 1
        else:
            undefined += 1

    def block(v: dict[str, list[float]]) -> dict[str, Any]:
        n = len(v["gap"])
        return {"n_facts": n,
                **{f"mean_{k}": (math.fsum(v[src]) / n if n else None)
                   for k, src in (("abs_gap", "gap"), ("bcs_a", "a"), ("bcs_b", "b"))}}

    # stop 36: the gap rests on a few dozen facts, so it carries a percentile-bootstrap
    # interval over facts (seeded, the EvalHarness default of 1,000 resamples) and names the
    # facts that make it (the largest per-fact gaps first), for reading, not tuning
    ci = None
    if strict["gap"]:
        from fks.metrics.stats.bootstrap import percentile_bootstrap

        _, low, high = percentile_bootstrap(strict["gap"])
        ci = [low, high]
    largest = sorted(facts, key=lambda f: (-abs(f[1] - f[2]), f[0]))[:GAP_FACTS_SHOWN]
    return {**block(strict), "mean_abs_gap_ci95": ci,
            "largest_gaps": [{"group": g, "bcs_a": x, "bcs_b": y} for g, x, y in largest
                             if x != y],
            "n_facts_scorable_one_side": one_side,
            "n_facts_undefined": undefined,
            "rule": f"facts scorable under both labelings (at least {MIN_ANSWERED_FAMILY_SHARE:g} "
                    "of their main families with a scorable answer), as fks publishes BCS",
            "any_scorable_answer": block(loose)}


def _kinds(a: dict[str, LabelRow], b: dict[str, LabelRow], common: list[str]
           ) -> dict[str, Any]:
    both = [q for q in common if a[q].kind is not None and b[q].kind is not None]
    confusion = {ka: {kb: 0 for kb in KINDS} for ka in KINDS}
    for q in both:
        confusion[a[q].kind][b[q].kind] += 1  # type: ignore[index]
    agree = sum(a[q].kind == b[q].kind for q in both)
    return {"n": len(both), "accuracy": _ratio(agree, len(both)),
            "confusion_a_by_b": confusion}


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

    def answers(q: str) -> bool:  # with kinds on both sides: only where both say ANSWER
        if a[q].kind is not None and b[q].kind is not None:
            return a[q].kind == b[q].kind == "ANSWER"
        return True

    ext = [q for q in common if "extracted_answer" in getattr(a[q], has)
           and "extracted_answer" in getattr(b[q], has) and answers(q)]
    ext_ok = sum(_norm(a[q].extracted_answer) == _norm(b[q].extracted_answer) for q in ext)
    clus_a = {q: a[q].cluster_id for q in common if a[q].cluster_id is not None}
    clus_b = {q: b[q].cluster_id for q in common if b[q].cluster_id is not None}
    pairs_ok, pairs = _pair_agreement(clus_a, clus_b, groups)  # type: ignore[arg-type]
    cor = [q for q in common if a[q].correctness is not None and b[q].correctness is not None]
    la = [a[q].correctness for q in cor]
    lb = [b[q].correctness for q in cor]
    families = {q: (b[q].condition_family or a[q].condition_family or "") for q in common}
    return {
        "n_overlap": len(common),
        "kind": _kinds(a, b, common),
        "bcs_gap": _bcs_gap(clus_a, clus_b, groups, families),  # type: ignore[arg-type]
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


def judge_agreement(judged: str | Path, other: str | Path, *, split: str | None = None
                    ) -> dict[str, Any]:
    """Compare a judged file with another judged file or a human-labelled sample.

    Args:
        judged: ``RUN/judged.jsonl``.
        other: another judged file, or a labelled sample (see the module docstring).
        split: keep only ``other``'s rows whose ``split`` is this (``dev``/``test``).

    Raises:
        FksInputError: a bad row in either file (file, line, field), files of two benchmarks
            (:func:`_same_benchmark`), or no overlap at all.
    """
    judged, other = Path(judged), Path(other)
    a: dict[str, LabelRow] = {}
    scorer: dict[str, LabelRow] = {}
    groups: dict[str, str] = {}
    a_ids: dict[str, tuple[int, dict[str, Any]]] = {}
    for a_line, rec in iter_jsonl(judged, JudgedRecord):
        assert isinstance(rec, JudgedRecord)
        a_ids[_key(rec.model, rec.query_id)] = (
            a_line, {name: getattr(rec, name) for name in IDENTITY_FIELDS})
        extra = rec.model_extra or {}
        own = extra.get("judge_answer", rec.extracted_answer) if "judge_answer" in extra \
            else rec.extracted_answer
        a[_key(rec.model, rec.query_id)] = LabelRow.model_validate(
            {"query_id": rec.query_id, "extracted_answer": own, "cluster_id": rec.cluster_id,
             "correctness": rec.correctness, "kind": rec.status,
             "condition_family": rec.condition_family})
        if rec.label in SCORER_LABELS:
            kind, cor = SCORER_LABELS[rec.label]
            scorer[_key(rec.model, rec.query_id)] = LabelRow.model_validate(
                {"query_id": rec.query_id, "extracted_answer": rec.extracted_answer,
                 "correctness": cor, "kind": kind, "condition_family": rec.condition_family})
        groups[_key(rec.model, rec.query_id)] = f"{rec.model}|{rec.fact_id}|" + analysis_group(
            rec.use_for_main_forward, rec.use_for_reverse_analysis,
            rec.use_for_recognition_analysis, rec.condition_family)
    b_lines: dict[str, int] = {}
    b = _read_labels(other, {k.split("\x1f", 1)[0] for k in a}, b_lines)
    _same_benchmark(judged, other, a_ids, b, b_lines)
    if split is not None:
        b = {q: r for q, r in b.items() if r.split == split}
    result = compare_labels(a, b, groups)
    if result["n_overlap"] == 0:
        raise NoOverlap(f"no query_id in common with {judged}"
                            + (f" in split {split!r}" if split else ""), path=other,
                            field="query_id")
    out: dict[str, Any] = {"a": str(judged), "b": str(other), "split": split, **result}
    if scorer:
        sc = compare_labels(scorer, b, groups)
        out["scorer"] = {k: sc[k] for k in ("n_overlap", "kind", "extraction", "correctness")}
    return out
