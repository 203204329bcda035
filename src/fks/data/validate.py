"""Benchmark validation: the hard gates of the construction log (``fks data validate``).

:func:`validate_benchmark` reads a benchmark directory (or ``hf[:REPO_OR_PATH]``) once, row by
row, and runs every gate over it. It never raises for a gate failure: each failure becomes an
entry ``{"gate", "message", "path", "line", "field"}`` of the report, so one run shows every
problem (stored entries are capped per gate; ``gates[g]["n_errors"]`` keeps the true count).
:func:`run_validation` writes the report atomically, prints a gate table and turns a failed
report into :class:`~fks.errors.FksInputError` (exit code 2) naming the first hard error.

Hard gates (construction log, "validate_facts.py -> validation_report.json"):

* ``schema`` -- every row validates against :class:`Fact` / :class:`Query`.
* ``unique_ids`` -- ``fact_id`` and ``query_id`` are unique.
* ``query_fact_exists`` -- every query's fact exists and has the query's relation.
* ``flags_match_registry`` -- the booleans, ``target_slot``, ``is_assisted``, ``is_well_posed``
  equal the derivation from ``eval_conditions.yaml``.
* ``one_anchor_per_fact`` -- exactly one anchor query per fact (README caveat 4).
* ``context_guard`` -- no context query leaks the gold once the subject is removed (D1).
* ``counts_reconcile`` -- file-name counts equal row counts; per-family counts equal the
  expected counts plus the accepted deviations.
* ``functional_single_valued`` -- a functional relation has one object per subject.
* ``answer_in_subject_surface`` -- the F1 flag equals the rule (:func:`fks.data.rules.
  copy_match` over the subject surfaces the fact's object-slot queries show), and queries
  inherit it.
* ``query_targets`` -- options (when given) include the gold; subject-slot families ask for
  the subject; object-slot families ask for the object: ``gold_canonical`` and every
  ``gold_aliases`` entry is the fact's object (its canonical label or an alias, after
  :func:`fks.text.normalize`) -- issue 28: a gold that is not its fact's object was accepted.

Warnings (never fail): ragged coverage -- facts that lack a main family, counted per family.

Rows that fail the schema are kept for the id-level gates (their raw ``fact_id``,
``query_id`` and ``condition_family``), so one bad field does not cascade into other gates. A
line that is not JSON at all ends the reading of its file; the gates that need whole files
are then reported as skipped.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from rich.table import Table

from fks.configs import FAMILIES, ConfigSet, Deviation, ExpectedCounts
from fks.data.load import BenchmarkFiles, find_benchmark_files, resolve_benchmark
from fks.data.rules import context_leaks_gold, copy_match, used_subject_surfaces
from fks.data.schema import Entity, Fact, Query
from fks.errors import FksInputError
from fks.io import atomic_write_json, input_error, iter_jsonl, read_json, sha256_file
from fks.log import console
from fks.text import normalize

__all__ = [
    "GATES",
    "MAX_STORED_ERRORS",
    "Issue",
    "validate_benchmark",
    "run_validation",
    "report_error",
]

log = logging.getLogger(__name__)

#: Hard gates in report order; the first failing gate's first error becomes the CLI message.
GATES: tuple[str, ...] = (
    "schema",
    "unique_ids",
    "query_fact_exists",
    "flags_match_registry",
    "one_anchor_per_fact",
    "context_guard",
    "counts_reconcile",
    "functional_single_valued",
    "answer_in_subject_surface",
    "query_targets",
)

#: Errors stored per gate in the report (the true count is ``gates[g]["n_errors"]``).
MAX_STORED_ERRORS = 50

#: The unperturbed baseline family: exactly one query per fact (README caveat 4).
ANCHOR_FAMILY = "anchor"
#: The family the D1 guard applies to (construction log, deviation D1; spec §9.4, §13.9).
CONTEXT_FAMILY = "context"
#: Gates that need both files read to the end (skipped when a line is not JSON).
_NEEDS_WHOLE_FILES = frozenset({"query_fact_exists", "one_anchor_per_fact", "counts_reconcile",
                                "answer_in_subject_surface"})


@dataclass(frozen=True)
class Issue:
    """One hard error or warning: which gate, what, and where (file, 1-based line, field)."""

    gate: str
    message: str
    path: Path | None = None
    line: int | None = None
    field: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the report entry ``{"gate", "message", "path", "line", "field"}``."""
        return {
            "gate": self.gate,
            "message": self.message,
            "path": str(self.path) if self.path is not None else None,
            "line": self.line,
            "field": self.field,
        }


@dataclass(frozen=True)
class Row:
    """One JSONL row: its line, the validated model, or the raw dict when the schema failed."""

    line: int
    model: Any  # Fact | Query | None
    raw: dict[str, Any] | None = None

    def get(self, key: str) -> str | None:
        """Return a top-level string field from the model, or the raw dict on schema failure."""
        value = getattr(self.model, key) if self.model is not None else (self.raw or {}).get(key)
        return value if isinstance(value, str) else None


@dataclass
class BenchmarkRows:
    """Everything read from one benchmark directory, plus what went wrong while reading."""

    files: BenchmarkFiles
    facts: list[Row]
    queries: list[Row]
    schema_issues: list[Issue]
    whole_files: bool
    facts_by_id: dict[str, Row] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.facts_by_id = {}
        for row in self.facts:
            fid = row.get("fact_id")
            if fid is not None:
                self.facts_by_id.setdefault(fid, row)

    def valid_queries(self) -> Iterator[tuple[Row, Query]]:
        """Yield the queries that passed the schema, with their rows."""
        return ((r, r.model) for r in self.queries if r.model is not None)

    def fact_of(self, query: Query) -> Fact | None:
        """Return the (schema-valid) fact a query points to, or None."""
        row = self.facts_by_id.get(query.fact_id)
        return row.model if row is not None else None


# --------------------------------------------------------------------------------- reading
def _read_rows(path: Path, model: type[BaseModel]) -> tuple[list[Row], list[Issue], bool]:
    """Stream ``path``, validating each raw row on its own so a bad row does not stop reading.

    Returns the rows, the schema issues and whether the file was read to its end (a line that
    is not a JSON object stops :func:`fks.io.iter_jsonl`).
    """
    rows: list[Row] = []
    issues: list[Issue] = []
    try:
        for line_no, raw in iter_jsonl(path):
            try:
                rows.append(Row(line_no, model.model_validate(raw)))
            except ValidationError as exc:
                err = input_error(exc, path=path, line=line_no)
                issues.append(Issue("schema", err.message, path, line_no, err.field))
                rows.append(Row(line_no, None, raw))  # type: ignore[arg-type]
    except FksInputError as exc:
        issues.append(Issue("schema", f"{exc.message}; rest of the file not read",
                            path, exc.line, exc.field))
        return rows, issues, False
    return rows, issues, True


def read_benchmark_rows(files: BenchmarkFiles) -> BenchmarkRows:
    """Read both files of a benchmark directory into :class:`BenchmarkRows`."""
    facts, f_issues, f_whole = _read_rows(files.facts, Fact)
    queries, q_issues, q_whole = _read_rows(files.queries, Query)
    return BenchmarkRows(files, facts, queries, f_issues + q_issues, f_whole and q_whole)


# ----------------------------------------------------------------------------------- gates
Gate = Callable[[BenchmarkRows, ConfigSet], Iterable[Issue]]


def gate_schema(data: BenchmarkRows, configs: ConfigSet) -> Iterable[Issue]:
    """Rows that failed :class:`Fact` / :class:`Query` validation (collected while reading)."""
    return data.schema_issues


def _duplicates(rows: list[Row], key: str, path: Path) -> Iterator[Issue]:
    first: dict[str, int] = {}
    for row in rows:
        value = row.get(key)
        if value is None:
            continue
        if value in first:
            yield Issue("unique_ids", f"duplicate {key} {value!r} (first at line {first[value]})",
                        path, row.line, key)
        else:
            first[value] = row.line


def gate_unique_ids(data: BenchmarkRows, configs: ConfigSet) -> Iterator[Issue]:
    """``fact_id`` and ``query_id`` unique; the second occurrence is reported."""
    yield from _duplicates(data.facts, "fact_id", data.files.facts)
    yield from _duplicates(data.queries, "query_id", data.files.queries)


def gate_query_fact_exists(data: BenchmarkRows, configs: ConfigSet) -> Iterator[Issue]:
    """Every query's ``fact_id`` is a fact of the benchmark with the query's relation."""
    path = data.files.queries
    for row in data.queries:
        fid = row.get("fact_id")
        if fid is None:
            continue  # the schema gate reports it
        if fid not in data.facts_by_id:
            yield Issue("query_fact_exists", f"fact_id {fid!r} is not in {data.files.facts.name}",
                        path, row.line, "fact_id")
            continue
        fact = data.facts_by_id[fid].model
        if row.model is not None and fact is not None:
            if row.model.relation != fact.relation.relation_id:
                yield Issue("query_fact_exists",
                            f"relation {row.model.relation!r} differs from fact {fid}'s "
                            f"relation {fact.relation.relation_id!r}", path, row.line, "relation")


def registry_fields(configs: ConfigSet, family: str) -> dict[str, Any]:
    """Return the fields a ``family`` query must carry, derived from ``eval_conditions.yaml``."""
    spec = configs.eval_conditions.families[family]
    return {
        **spec.flags(),
        "target_slot": spec.target_slot,
        "is_assisted": spec.is_assisted,
        "is_well_posed": spec.is_well_posed,
    }


def gate_flags_match_registry(data: BenchmarkRows, configs: ConfigSet) -> Iterator[Issue]:
    """Each query's flags equal the registry's derivation for its family (one issue per field)."""
    expected = {f: registry_fields(configs, f) for f in configs.eval_conditions.families}
    for row, q in data.valid_queries():
        for name, want in expected[q.condition_family].items():
            found = getattr(q, name)
            if found != want:
                yield Issue("flags_match_registry",
                            f"{q.condition_family}: expected {want!r} (eval_conditions.yaml), "
                            f"found {found!r}", data.files.queries, row.line, name)


def gate_one_anchor_per_fact(data: BenchmarkRows, configs: ConfigSet) -> Iterator[Issue]:
    """Check exactly one anchor query per fact.

    A missing anchor is reported at the fact's line, a second anchor at that query's line.
    """
    anchors: dict[str, int] = {}
    for row in data.queries:
        fid = row.get("fact_id")
        if row.get("condition_family") != ANCHOR_FAMILY or fid not in data.facts_by_id:
            continue
        if fid in anchors:
            yield Issue("one_anchor_per_fact",
                        f"second anchor query for {fid} (first at line {anchors[fid]})",
                        data.files.queries, row.line, "condition_family")
        else:
            anchors[fid] = row.line
    for fid, frow in data.facts_by_id.items():
        if fid not in anchors:
            yield Issue("one_anchor_per_fact", f"fact {fid} has no anchor query",
                        data.files.facts, frow.line, "fact_id")


def subject_mentions(fact: Fact) -> list[str]:
    """Return the subject's canonical label and aliases (what the D1 guard strips)."""
    return [fact.subject.canonical, *fact.subject.aliases]


def gate_context_guard(data: BenchmarkRows, configs: ConfigSet) -> Iterator[Issue]:
    """Check D1: no context query leaks the gold.

    The query (or its ``context_distractor`` when present) must not contain a gold alias once
    the subject's mentions are stripped (:func:`fks.data.rules.context_leaks_gold`).
    """
    for row, q in data.valid_queries():
        fact = data.fact_of(q)
        if q.condition_family != CONTEXT_FAMILY or fact is None:
            continue
        distractor = getattr(q, "context_distractor", None)
        text, where = (distractor, "context_distractor") if distractor else (q.query, "query")
        golds = list(dict.fromkeys([q.gold_canonical, *q.gold_aliases]))
        leaked = context_leaks_gold(str(text), golds, subject_mentions(fact))
        if leaked is not None:
            yield Issue("context_guard",
                        f"context leaks the gold {leaked!r} outside the subject's mentions (D1)",
                        data.files.queries, row.line, where)


# --------------------------------------------------------------------------- counts gate
@dataclass(frozen=True)
class Expected:
    """The counts a benchmark must reconcile with, and where they came from."""

    counts: ExpectedCounts
    deviations: list[Deviation]
    source: str  # "manifest" or "eval_conditions.yaml"

    def queries_after_deviations(self) -> dict[str, int]:
        """Return the expected per-family query counts with every accepted deviation applied."""
        out = dict(self.counts.queries)
        for dev in self.deviations:
            out[dev.family] = out.get(dev.family, 0) + dev.delta
        return out


def _expected_from_manifest(path: Path) -> tuple[Expected | None, list[Issue]]:
    """Read the builder's expected counts from ``benchmark_manifest.json``, if it has them."""
    try:
        manifest = read_json(path)
    except FksInputError as exc:
        return None, [Issue("counts_reconcile", exc.message, path, exc.line, exc.field)]
    if not isinstance(manifest, dict) or "expected_counts" not in manifest:
        return None, []
    try:
        counts = ExpectedCounts.model_validate(manifest["expected_counts"])
        devs = [Deviation.model_validate(d) for d in manifest.get("accepted_deviations") or []]
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        return None, [Issue("counts_reconcile", f"bad manifest: {first.get('msg')}", path, None,
                            loc or None)]
    return Expected(counts, devs, "manifest"), []


def resolve_expected(
    data: BenchmarkRows, configs: ConfigSet
) -> tuple[Expected | None, list[Issue], list[Issue]]:
    """Pick the expected counts.

    The directory's manifest, else the registry's published counts when the fact count
    matches them, else none (a warning, not a failure).

    Returns ``(expected, hard_issues, warnings)``.
    """
    if data.files.manifest is not None:
        expected, issues = _expected_from_manifest(data.files.manifest)
        if expected is not None or issues:
            return expected, issues, []
    cond = configs.eval_conditions
    if cond.expected_counts is not None and cond.expected_counts.n_facts == len(data.facts):
        return Expected(cond.expected_counts, list(cond.accepted_deviations),
                        "eval_conditions.yaml"), [], []
    warning = Issue("counts_reconcile",
                    f"no expected counts for this benchmark (no manifest, and "
                    f"{len(data.facts)} facts differ from the registry's published count); "
                    "only file-name counts were checked", data.files.root)
    return None, [], [warning]


def family_counts(data: BenchmarkRows) -> dict[str, int]:
    """Count queries per condition family (schema-failed rows by their raw family)."""
    counts = Counter(r.get("condition_family") for r in data.queries)
    return {f: counts[f] for f in FAMILIES if counts[f]} | {
        str(f): n for f, n in counts.items() if f not in FAMILIES
    }


def _file_name_counts(data: BenchmarkRows) -> Iterator[Issue]:
    files = data.files
    for path, in_name, rows in ((files.facts, files.n_facts_in_name, data.facts),
                                (files.queries, files.n_queries_in_name, data.queries)):
        if in_name != len(rows):
            yield Issue("counts_reconcile",
                        f"file name says {in_name} rows, file holds {len(rows)}", path)


def check_counts(data: BenchmarkRows, expected: Expected) -> Iterator[Issue]:
    """Compare fact and per-family query counts with ``expected`` (deviations applied)."""
    where = data.files.manifest if expected.source == "manifest" else None
    for dev in expected.deviations:
        if dev.family not in FAMILIES:
            yield Issue("counts_reconcile",
                        f"accepted deviation {dev.id} names unknown family {dev.family!r}",
                        where, None, "accepted_deviations")
    if len(data.facts) != expected.counts.n_facts:
        yield Issue("counts_reconcile",
                    f"{len(data.facts)} facts, expected {expected.counts.n_facts} "
                    f"({expected.source})", data.files.facts)
    found = family_counts(data)
    want = expected.queries_after_deviations()
    for fam in [f for f in FAMILIES if f in found or f in want]:
        if found.get(fam, 0) != want.get(fam, 0):
            delta = want.get(fam, 0) - expected.counts.queries.get(fam, 0)
            yield Issue("counts_reconcile",
                        f"{fam}: {found.get(fam, 0)} queries, expected "
                        f"{expected.counts.queries.get(fam, 0)}{delta:+d} accepted = "
                        f"{want.get(fam, 0)} ({expected.source})",
                        data.files.queries, None, "condition_family")


# ------------------------------------------------------------------------ fact-level gates
def _entity_key(entity: Entity) -> tuple[str, str]:
    """Entity identity: the Wikidata id, else the normalised canonical label."""
    return ("id", entity.entity_id) if entity.entity_id else ("name", normalize(entity.canonical))


def _same_object(a: Entity, b: Entity) -> bool:
    """Two objects agree: same id when both have one, else same normalised label."""
    if a.entity_id and b.entity_id:
        return a.entity_id == b.entity_id
    return normalize(a.canonical) == normalize(b.canonical)


def gate_functional_single_valued(data: BenchmarkRows, configs: ConfigSet) -> Iterator[Issue]:
    """Among functional facts, one subject has one object per relation (spec §5, §6)."""
    first: dict[tuple[str, tuple[str, str]], Row] = {}
    for row in data.facts:
        fact = row.model
        if fact is None or not fact.is_functional:
            continue
        key = (fact.relation.relation_id, _entity_key(fact.subject))
        prior = first.setdefault(key, row)
        if prior is not row and not _same_object(prior.model.object, fact.object):
            yield Issue("functional_single_valued",
                        f"functional relation {key[0]!r}: subject {fact.subject.canonical!r} has "
                        f"object {prior.model.object.canonical!r} in {prior.model.fact_id} "
                        f"(line {prior.line}) and {fact.object.canonical!r} here",
                        data.files.facts, row.line, "object")


def gate_answer_in_subject_surface(data: BenchmarkRows, configs: ConfigSet) -> Iterator[Issue]:
    """F1: each fact's flag equals the rule; each query's flag equals its fact's.

    The rule is :func:`fks.data.rules.copy_match` of the object's canonical label and aliases
    against the subject labels that the fact's object-slot queries actually show
    (:func:`fks.data.rules.used_subject_surfaces`), the same reading the builder uses. A
    benchmark flagged by the older word-bounded English-only rule fails here where it missed a
    copy (``LaFerrari`` -> Ferrari).
    """
    texts: dict[str, list[str]] = defaultdict(list)
    for _, q in data.valid_queries():
        if q.target_slot == "object":
            texts[q.fact_id].append(q.query)
    for row in data.facts:
        fact = row.model
        if fact is None:
            continue
        used = used_subject_surfaces([fact.subject.canonical, *fact.subject.aliases],
                                     texts.get(fact.fact_id, []))
        match = copy_match(used, [fact.object.canonical, *fact.object.aliases])
        rule = match is not None
        if fact.answer_in_subject_surface != rule:
            why = (f"gold {match[0]!r} copied from subject surface {match[1]!r}" if match else
                   f"no gold alias of {fact.object.canonical!r} in the subject surfaces "
                   f"{used!r}")
            yield Issue("answer_in_subject_surface",
                        f"flag is {fact.answer_in_subject_surface}, the rule gives {rule} "
                        f"({why})", data.files.facts, row.line, "answer_in_subject_surface")
    for row, q in data.valid_queries():
        fact = data.fact_of(q)
        if fact is not None and q.answer_in_subject_surface != fact.answer_in_subject_surface:
            yield Issue("answer_in_subject_surface",
                        f"flag is {q.answer_in_subject_surface}, its fact {fact.fact_id} has "
                        f"{fact.answer_in_subject_surface}", data.files.queries, row.line,
                        "answer_in_subject_surface")


def _surfaces(names: Iterable[str]) -> set[str]:
    return {n for n in (normalize(x) for x in names) if n}


def gate_query_targets(data: BenchmarkRows, configs: ConfigSet) -> Iterator[Issue]:
    """Options include the gold; each family's gold is its target slot's entity."""
    families = configs.eval_conditions.families
    for row, q in data.valid_queries():
        golds = _surfaces([q.gold_canonical, *q.gold_aliases])
        if q.options is not None and not golds & _surfaces(q.options):
            yield Issue("query_targets", f"options {q.options!r} do not include the gold "
                        f"{q.gold_canonical!r}", data.files.queries, row.line, "options")
        fact = data.fact_of(q)
        if families[q.condition_family].target_slot == "subject" and fact is not None:
            if normalize(q.gold_canonical) not in _surfaces(subject_mentions(fact)):
                yield Issue("query_targets",
                            f"{q.condition_family} targets the subject, but gold "
                            f"{q.gold_canonical!r} is not subject {fact.subject.canonical!r} "
                            "or one of its aliases", data.files.queries, row.line,
                            "gold_canonical")
        if families[q.condition_family].target_slot == "object" and fact is not None:
            yield from _gold_is_object(q, fact, data.files.queries, row.line)


def _gold_is_object(q: Query, fact: Fact, path: Path, line: int) -> Iterator[Issue]:
    """Check that an object-slot query's gold (canonical, then each alias) is the object."""
    obj = _surfaces([fact.object.canonical, *fact.object.aliases])
    if normalize(q.gold_canonical) not in obj:
        yield Issue("query_targets", f"{q.condition_family} targets the object, but gold "
                    f"{q.gold_canonical!r} is not object {fact.object.canonical!r} of "
                    f"{fact.fact_id} or one of its aliases", path, line, "gold_canonical")
        return
    for k, alias in enumerate(q.gold_aliases):
        if normalize(alias) and normalize(alias) not in obj:
            yield Issue("query_targets", f"gold alias {alias!r} is not an alias of object "
                        f"{fact.object.canonical!r} of {fact.fact_id}", path, line,
                        f"gold_aliases.{k}")
            return


GATE_FUNCTIONS: dict[str, Gate] = {
    "schema": gate_schema,
    "unique_ids": gate_unique_ids,
    "query_fact_exists": gate_query_fact_exists,
    "flags_match_registry": gate_flags_match_registry,
    "one_anchor_per_fact": gate_one_anchor_per_fact,
    "context_guard": gate_context_guard,
    "functional_single_valued": gate_functional_single_valued,
    "answer_in_subject_surface": gate_answer_in_subject_surface,
    "query_targets": gate_query_targets,
}  # counts_reconcile is run by :func:`_run_counts` (it also yields warnings and a summary)


# -------------------------------------------------------------------------------- warnings
def coverage(data: BenchmarkRows, configs: ConfigSet) -> tuple[dict[str, Any], list[Issue]]:
    """Summarise the ragged coverage of the main families.

    Returns the facts per main family, the complete-family fact count, and one warning per
    main family that some facts lack (README "Coverage is ragged on purpose").
    """
    main = configs.eval_conditions.main_forward()
    have: dict[str, set[str]] = defaultdict(set)
    for row in data.queries:
        fam, fid = row.get("condition_family"), row.get("fact_id")
        if fam in main and fid in data.facts_by_id:
            have[fam].add(fid)
    n = len(data.facts_by_id)
    per_family = {f: len(have[f]) for f in main}
    complete = sum(all(fid in have[f] for f in main) for fid in data.facts_by_id)
    warnings = [
        Issue("coverage", f"{n - k} of {n} facts lack a {f} query (ragged coverage)",
              data.files.queries, None, "condition_family")
        for f, k in per_family.items() if k < n
    ]
    return {"facts_per_main_family": per_family, "complete_family_facts": complete}, warnings


# ---------------------------------------------------------------------------------- report
def _gate_entry(issues: list[Issue], skipped: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"passed": not issues and skipped is None, "n_errors": len(issues)}
    if skipped is not None:
        entry["skipped"] = skipped
    return entry


def _run_counts(
    data: BenchmarkRows, configs: ConfigSet
) -> tuple[list[Issue], list[Issue], dict[str, Any]]:
    """Run the ``counts_reconcile`` gate: hard issues, warnings and the report's ``counts``."""
    expected, hard, warnings = resolve_expected(data, configs)
    hard = [*hard, *_file_name_counts(data)]
    if expected is not None:
        hard.extend(check_counts(data, expected))
    summary = {
        "facts": len(data.facts),
        "queries": family_counts(data),
        "expected_source": expected.source if expected else None,
        "expected": {
            "n_facts": expected.counts.n_facts,
            "queries": dict(expected.counts.queries),
            "queries_after_deviations": expected.queries_after_deviations(),
        } if expected else {},
        "accepted_deviations": [d.model_dump() for d in expected.deviations] if expected else [],
    }
    return hard, warnings, summary


def _validate_rows(data: BenchmarkRows, configs: ConfigSet) -> dict[str, Any]:
    """Run every gate over ``data`` and assemble the report (without the source name)."""
    skip = None if data.whole_files else "a line that is not JSON stopped the reading of a file"
    found: dict[str, list[Issue]] = {}
    warnings: list[Issue] = []
    counts_hard, counts_warn, counts = _run_counts(data, configs)
    for gate in GATES:
        if skip is not None and gate in _NEEDS_WHOLE_FILES:
            found[gate] = []
        elif gate == "counts_reconcile":
            found[gate] = counts_hard
            warnings.extend(counts_warn)
        else:
            found[gate] = list(GATE_FUNCTIONS[gate](data, configs))
    cover, cover_warn = coverage(data, configs) if skip is None else ({}, [])
    warnings.extend(cover_warn)
    gates = {
        g: _gate_entry(found[g], skip if skip and g in _NEEDS_WHOLE_FILES else None)
        for g in GATES
    }
    return {
        "passed": all(e["passed"] for e in gates.values()),
        "n_facts": len(data.facts),
        "n_queries": len(data.queries),
        "gates": gates,
        "hard_errors": [i.to_dict() for g in GATES for i in found[g][:MAX_STORED_ERRORS]],
        "warnings": [i.to_dict() for i in warnings[:MAX_STORED_ERRORS]],
        "counts": counts | cover,
        "max_stored_errors_per_gate": MAX_STORED_ERRORS,
    }


def _validate_dir(root: Path, source: str, configs: ConfigSet) -> dict[str, Any]:
    files = find_benchmark_files(root)
    data = read_benchmark_rows(files)
    report = _validate_rows(data, configs)
    return {
        "benchmark": source,
        "directory": str(files.root),
        "files": {
            "facts": files.facts.name,
            "queries": files.queries.name,
            "manifest": files.manifest.name if files.manifest else None,
            "sha256": {p.name: sha256_file(p) for p in (files.facts, files.queries)},
        },
        **report,
    }


def validate_benchmark(source: str | Path, *, configs: ConfigSet) -> dict[str, Any]:
    """Check every hard gate of a benchmark and return the report (never raises for a gate).

    Args:
        source: a benchmark directory, or ``hf`` / ``hf:REPO_OR_LOCAL_PATH``.
        configs: the configs in force (the registry the flags are derived from, and the
            published expected counts).

    Returns:
        ``{"benchmark", "passed", "n_facts", "n_queries", "gates": {gate: {"passed",
        "n_errors"}}, "hard_errors": [...], "warnings": [...], "counts": {...}, ...}``;
        each error is ``{"gate", "message", "path", "line", "field"}``.

    Raises:
        FksInputError: the directory is missing or lacks (or duplicates) a data file.
    """
    return _validate_dir(resolve_benchmark(source), str(source), configs)


def report_error(report: dict[str, Any], report_path: Path | None = None) -> FksInputError:
    """Build the :class:`FksInputError` for a failed report.

    It carries the first hard error's file, line and field; its message is prefixed with the
    gate and followed by the total count of hard errors and the report path.
    """
    n = sum(g["n_errors"] for g in report["gates"].values())
    see = f"; see {report_path}" if report_path is not None else ""
    if report["hard_errors"]:
        first = report["hard_errors"][0]
        return FksInputError(f"{first['gate']}: {first['message']} ({n} hard errors{see})",
                             path=first["path"], line=first["line"], field=first["field"])
    skipped = [g for g, e in report["gates"].items() if not e["passed"]]
    return FksInputError(f"gates not checked: {', '.join(skipped)} ({n} hard errors{see})",
                         path=report.get("directory"))


def _render(report: dict[str, Any]) -> None:
    """Print the gate table to :data:`fks.log.console`."""
    table = Table(title=f"validation of {report['benchmark']}")
    table.add_column("gate")
    table.add_column("result")
    table.add_column("errors", justify="right")
    for gate, entry in report["gates"].items():
        result = ("[green]pass" if entry["passed"] else
                  "[yellow]skipped" if "skipped" in entry else "[red]FAIL")
        table.add_row(gate, result, str(entry["n_errors"]))
    console.print(table)


def run_validation(
    source: str | Path, *, configs: ConfigSet, report_path: Path | None = None
) -> dict[str, Any]:
    """Validate, write the report atomically, print the gate table; raise when not passed.

    Args:
        source: a benchmark directory, or ``hf`` / ``hf:REPO_OR_LOCAL_PATH`` (materialised
            first; the report then goes into the materialised directory by default).
        configs: the configs in force.
        report_path: where to write the report (default ``<dir>/validation_report.json``).

    Raises:
        FksInputError: the benchmark fails a hard gate (first error's file/line/field), or the
            directory cannot be read.
    """
    root = resolve_benchmark(source)
    report = _validate_dir(root, str(source), configs)
    path = Path(report_path) if report_path is not None else root / "validation_report.json"
    atomic_write_json(path, report)
    _render(report)
    for w in report["warnings"]:
        log.warning("%s: %s", w["gate"], w["message"])
    log.info("%d facts, %d queries: %s; report written to %s", report["n_facts"],
             report["n_queries"], "all hard gates pass" if report["passed"] else "FAILED", path)
    if not report["passed"]:
        raise report_error(report, path)
    return report
