"""Build a benchmark from ParaRel / mParaRel source data (``fks data build``).

The published benchmark's build scripts are not distributed (construction log, stages I-IV);
this builder reconstructs a benchmark of the same shape from public data:

1. :func:`read_source` streams the mParaRel tuples and patterns of the six languages and, when
   present, ParaRel's original-cased English patterns and its T-REx rows (provenance). Every bad
   line is an :class:`~fks.errors.FksInputError` naming file, line and field.
2. :func:`relation_pools` turns the tuples of each registry relation into candidate facts:
   exact duplicate triples dropped (F2), subjects with more than one object dropped (the
   functional check, spec §5-§6), subjects whose English label is shared by entities with
   different answers dropped (an unanswerable question), all counted.
3. :func:`allocate_quotas` + :func:`select_facts`: a seeded, relation-balanced sample of at most
   ``max_facts`` facts.
4. :func:`fact_queries`: the eight condition families per fact (spec §8-§12); the three
   booleans, target slot, ``is_assisted`` and ``is_well_posed`` come from
   ``eval_conditions.yaml``, the gold from the family's target slot. Context candidates that
   leak the gold are dropped by the D1 guard and recorded as an accepted deviation.
5. Atomic writes of the benchmark files, ``dataset_statistics.json``,
   ``benchmark_manifest.json`` and the validator's ``validation_report.json``.

Determinism: every random choice draws from :func:`seeded_rng` keyed by the seed and the
choice's purpose (relation, fact), over sorted inputs; ids follow the sorted order; JSON rows are
written by :func:`fks.io.dumps_record`. The same source and seed give byte-identical files.
"""

from __future__ import annotations

import hashlib
import logging
import random
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from fks import __version__
from fks.configs import FAMILIES, ConfigSet, RelationSpec
from fks.data.load import Benchmark, find_benchmark_files
from fks.data.rules import (
    answer_in_subject_surface,
    context_leaks_gold,
    copy_match,
    degenerate_object,
    used_subject_surfaces,
)
from fks.data.schema import LANGUAGES, Fact, Query
from fks.errors import FksInputError
from fks.io import atomic_write_json, atomic_write_jsonl, iter_jsonl, sha256_file
from fks.log import progress_bar
from fks.text import find_alias, normalize

__all__ = [
    "DEFAULT_MAX_FACTS",
    "BuildResult",
    "build_benchmark",
    "read_source",
    "relation_pools",
    "allocate_quotas",
    "select_facts",
    "fact_queries",
    "y_last_prefix",
    "invert_copula",
    "is_declarative",
    "fill_statement",
    "seeded_rng",
]

log = logging.getLogger(__name__)

#: Default cap on the number of facts (the published scale is 2,592).
DEFAULT_MAX_FACTS = 2600
#: Paraphrases per fact: a seeded draw in this inclusive range, capped by the relation's pool.
PARAPHRASES_PER_FACT = (3, 5)
#: Context candidates per fact (before the D1 guard).
CONTEXTS_PER_FACT = 3
#: Distractor options per recognition query (fewer when the relation lacks distinct objects).
RECOGNITION_DISTRACTORS = 3

MPARAREL_DIR = Path("mpararel/data/mpararel_reviewed")
PARAREL_PATTERNS_DIR = Path("pararel/data/pattern_data/graphs_json")
PARAREL_TREX_DIR = Path("pararel/data/trex_lms_vocab")
#: Benchmark language -> mParaRel folder name (``zh`` is stored as ``zh-hans`` there).
SOURCE_LANGUAGE_DIRS: dict[str, str] = {lang: "zh-hans" if lang == "zh" else lang
                                        for lang in LANGUAGES}
_PID = re.compile(r"^P\d+$")
D1_REASON = ("context candidates whose text contains a gold alias once the subject's mentions "
             "are removed were dropped by the rule-based D1 guard (fks.data.rules."
             "context_leaks_gold)")


# ----------------------------------------------------------------------------- source rows
_Label = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
_EntityId = Annotated[str, StringConstraints(strip_whitespace=True, pattern=r"^Q\d+$")]


class _TupleRow(BaseModel):
    """One mParaRel tuple line."""

    model_config = ConfigDict(extra="ignore")

    sub_uri: _EntityId
    obj_uri: _EntityId
    sub_label: _Label
    obj_label: _Label


class _PatternRow(BaseModel):
    """One ParaRel / mParaRel pattern line."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    pattern: str
    checked_by_human: bool | None = Field(None, alias="checked-by-human")

    @field_validator("pattern")
    @classmethod
    def _slots(cls, v: str) -> str:
        if v.count("[X]") != 1 or v.count("[Y]") != 1:
            raise ValueError("a pattern needs exactly one [X] and one [Y]")
        return v


class _TrexRow(BaseModel):
    """One ParaRel T-REx line (English labels, provenance only)."""

    model_config = ConfigDict(extra="ignore")

    sub_label: _Label
    obj_label: _Label
    uuid: str | None = None


@dataclass(frozen=True)
class SourceTuple:
    """A source fact line: ids and labels in one language, and where it was read."""

    sub_uri: str
    obj_uri: str
    sub_label: str
    obj_label: str
    file: str
    line: int


@dataclass(frozen=True)
class SourcePattern:
    """A source pattern (``[X]`` subject slot, ``[Y]`` object slot)."""

    text: str
    checked: bool
    file: str
    line: int


@dataclass
class RelationSource:
    """Everything the source holds about one Wikidata property."""

    pid: str
    tuples: dict[str, list[SourceTuple]] = field(default_factory=dict)
    patterns: dict[str, list[SourcePattern]] = field(default_factory=dict)
    trex: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)


@dataclass
class Source:
    """The parsed source folder."""

    root: Path
    relations: dict[str, RelationSource]
    files: list[Path]
    skipped_pids: list[str]

    def checksum(self) -> str:
        """sha256 over ``relative path + sha256`` of every file read, in sorted path order."""
        h = hashlib.sha256()
        for path in sorted(self.files, key=lambda p: p.relative_to(self.root).as_posix()):
            h.update(f"{path.relative_to(self.root).as_posix()}\0{sha256_file(path)}\n".encode())
        return h.hexdigest()


def _require_dir(path: Path, what: str) -> Path:
    if not path.is_dir():
        raise FksInputError(f"required folder missing ({what})", path=path)
    return path


def _read_patterns(path: Path, root: Path) -> list[SourcePattern]:
    rel = path.relative_to(root).as_posix()
    return [SourcePattern(row.pattern, bool(row.checked_by_human), rel, line)
            for line, row in iter_jsonl(path, _PatternRow)]


def _read_tuples(path: Path, root: Path) -> list[SourceTuple]:
    rel = path.relative_to(root).as_posix()
    return [SourceTuple(r.sub_uri, r.obj_uri, r.sub_label, r.obj_label, rel, line)
            for line, r in iter_jsonl(path, _TupleRow)]


def _read_trex(path: Path, root: Path) -> dict[tuple[str, str], dict[str, Any]]:
    rel = path.relative_to(root).as_posix()
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for line, r in iter_jsonl(path, _TrexRow):
        out.setdefault((r.sub_label, r.obj_label),
                       {"file": rel, "line": line, "source": "ParaRel/T-REx", "uuid": r.uuid})
    return out


def read_source(root: str | Path, wanted: Iterable[str]) -> Source:
    """Read the source folder for the Wikidata properties in ``wanted``.

    Layout (relative to ``root``): required ``mpararel/data/mpararel_reviewed/tuples/<lang>/
    P*.jsonl`` and ``.../patterns/<lang>/P*.jsonl`` for the six languages (``zh`` is
    ``zh-hans``); optional ``pararel/data/pattern_data/graphs_json/P*.jsonl`` (original-cased
    English patterns, preferred for English) and ``pararel/data/trex_lms_vocab/P*.jsonl``.
    A property is read when it has an English tuple file; properties not in ``wanted`` are
    skipped (logged).

    Raises:
        FksInputError: a required folder is missing, or a line is not JSON or lacks a field.
    """
    root = Path(root)
    if not root.is_dir():
        raise FksInputError("source folder not found", path=root)
    base = root / MPARAREL_DIR
    tuple_dirs = {lang: _require_dir(base / "tuples" / d, "mParaRel tuples")
                  for lang, d in SOURCE_LANGUAGE_DIRS.items()}
    pattern_dirs = {lang: _require_dir(base / "patterns" / d, "mParaRel patterns")
                    for lang, d in SOURCE_LANGUAGE_DIRS.items()}
    pararel_patterns = root / PARAREL_PATTERNS_DIR
    trex_dir = root / PARAREL_TREX_DIR
    wanted = set(wanted)
    pids = sorted((p.stem for p in tuple_dirs["en"].glob("P*.jsonl") if _PID.match(p.stem)),
                  key=lambda s: int(s[1:]))
    skipped = [p for p in pids if p not in wanted]
    if skipped:
        log.info("skipping %d source relations not in the registry (or switched off): %s",
                 len(skipped), ", ".join(skipped))
    relations: dict[str, RelationSource] = {}
    files: list[Path] = []
    todo = [p for p in pids if p in wanted]
    with progress_bar() as progress:
        task = progress.add_task("reading source relations", total=len(todo))
        for pid in todo:
            rs = RelationSource(pid)
            for lang in LANGUAGES:
                tpath = tuple_dirs[lang] / f"{pid}.jsonl"
                if tpath.is_file():
                    rs.tuples[lang] = _read_tuples(tpath, root)
                    files.append(tpath)
                ppath = pattern_dirs[lang] / f"{pid}.jsonl"
                if lang == "en" and (pararel_patterns / f"{pid}.jsonl").is_file():
                    ppath = pararel_patterns / f"{pid}.jsonl"
                if ppath.is_file():
                    rs.patterns[lang] = _read_patterns(ppath, root)
                    files.append(ppath)
            trex_path = trex_dir / f"{pid}.jsonl"
            if trex_path.is_file():
                rs.trex = _read_trex(trex_path, root)
                files.append(trex_path)
            relations[pid] = rs
            progress.advance(task)
    return Source(root=root, relations=relations, files=files, skipped_pids=skipped)


# -------------------------------------------------------------------------- pattern helpers
def _is_tail(text: str) -> bool:
    """Return True when ``text`` holds only whitespace and punctuation."""
    return all(ch.isspace() or unicodedata.category(ch).startswith("P") for ch in text)


def y_last_prefix(pattern: str) -> str | None:
    """Return the cloze prompt of a pattern whose ``[Y]`` ends it (punctuation aside), or None.

    >>> y_last_prefix("The capital of [X] is [Y] .")
    'The capital of [X] is'
    >>> y_last_prefix("[X]的首都是[Y]。")
    '[X]的首都是'
    >>> y_last_prefix("[X]'s capital, [Y].")
    "[X]'s capital"
    >>> y_last_prefix("[Y] is the capital of [X].") is None
    True
    """
    i = pattern.find("[Y]")
    if i < 0 or not _is_tail(pattern[i + 3:]):
        return None
    prefix = pattern[:i].rstrip().rstrip(",:;，：；、").rstrip()
    if "[X]" not in prefix or not prefix.replace("[X]", "").strip():
        return None
    return prefix


_COPULA = re.compile(r"^\[Y\] (is|was) ((?:the .+ of \[X\])|(?:\[X\]'s .+?))\s*\.?\s*$",
                     re.IGNORECASE)


def invert_copula(pattern: str) -> str | None:
    """Rewrite ``[Y] is the R of [X]`` / ``[Y] is [X]'s R`` as a cloze prompt, else None.

    >>> invert_copula("[Y] is the capital city of [X].")
    'The capital city of [X] is'
    >>> invert_copula("[Y] is [X]'s mother tongue.")
    "[X]'s mother tongue is"
    >>> invert_copula("[Y] is home to [X].") is None
    True
    """
    m = _COPULA.match(pattern.strip())
    if not m:
        return None
    return _capitalise(f"{m.group(2)} {m.group(1).lower()}")


_WORD = re.compile(r"(?<![\w\]-])([A-Za-z]+)(?![\w-])")
_FRAGMENT = re.compile(r"[,;:]|\b(?:that|which|who|such as|including)\b", re.IGNORECASE)
_FINITE = {"is", "was", "are", "were", "can", "has", "had"}


def is_declarative(pattern: str) -> bool:
    """Heuristic: an English pattern that reads as a full declarative sentence once filled.

    No comma/colon or relative clause, and a finite verb: a copula, a standalone ``-ed`` word,
    or a third-person ``-s`` word right after a leading slot.

    >>> is_declarative("[X] is owned by [Y] .")
    True
    >>> is_declarative("[X] plays as [Y]")
    True
    >>> is_declarative("The [Y]-owned [X]")
    False
    >>> is_declarative("[Y], the capital of [X].")
    False
    """
    text = pattern.strip().rstrip(".").strip()
    if _FRAGMENT.search(text):
        return False
    words = [w.lower() for w in _WORD.findall(text)]
    if any(w in _FINITE or (w.endswith("ed") and len(w) > 3) for w in words):
        return True
    lead = re.match(r"^\[[XY]\] ([A-Za-z]+)\b", text)
    return bool(lead and lead.group(1).endswith("s") and len(lead.group(1)) > 2)


def _capitalise(template: str) -> str:
    """Upper-case the first character when it is literal template text (not a slot)."""
    if template and template[0].isalpha() and template[0].islower():
        return template[0].upper() + template[1:]
    return template


def _fill_prefix(template: str, subject: str) -> str:
    return _capitalise(template).replace("[X]", subject)


def fill_statement(pattern: str, subject: str, obj: str) -> str:
    """Fill both slots of a pattern as one sentence ending with a period.

    >>> fill_statement("the capital of [X] is [Y] .", "Georgia", "Tbilisi")
    'The capital of Georgia is Tbilisi.'
    """
    body = pattern.strip().rstrip(" .")
    return _capitalise(body).replace("[X]", subject).replace("[Y]", obj) + "."


def seeded_rng(seed: int, *purpose: str) -> random.Random:
    """Return a generator for one purpose, seeded with ``seed`` and the purpose text (sha512).

    Independent of ``PYTHONHASHSEED`` and of the order other choices are made in.
    """
    return random.Random(f"{seed}|" + "|".join(purpose))


def _sample_where(rng: random.Random, items: Sequence[Any], k: int,
                  keep: Callable[[Any], bool]) -> list[Any]:
    """Up to ``k`` items satisfying ``keep``, uniformly drawn (lazy Fisher-Yates)."""
    pool = list(items)
    out: list[Any] = []
    for i in range(len(pool)):
        if len(out) == k:
            break
        j = rng.randrange(i, len(pool))
        pool[i], pool[j] = pool[j], pool[i]
        if keep(pool[i]):
            out.append(pool[i])
    return out


# ------------------------------------------------------------------------------- candidates
@dataclass
class Candidate:
    """A candidate fact: ids, labels per language, provenance."""

    relation_id: str
    sub_uri: str
    obj_uri: str
    labels: dict[str, tuple[str, str]]  # language -> (subject label, object label); en always
    source_relations: list[str]
    records: list[dict[str, Any]]

    @property
    def subject(self) -> str:
        """English subject label (the canonical)."""
        return self.labels["en"][0]

    @property
    def object(self) -> str:
        """English object label (the canonical)."""
        return self.labels["en"][1]

    @cached_property
    def norm_subject(self) -> str:
        """:func:`fks.text.normalize` of the English subject label."""
        return normalize(self.subject)

    @cached_property
    def norm_object(self) -> str:
        """:func:`fks.text.normalize` of the English object label."""
        return normalize(self.object)

    def aliases(self, slot: int) -> list[str]:
        """Labels of the subject (0) or object (1) in language order, deduplicated."""
        return list(dict.fromkeys(self.labels[lang][slot] for lang in LANGUAGES
                                  if lang in self.labels))

    def sort_key(self) -> tuple[str, int, int]:
        """Subject label, then the numeric Wikidata ids."""
        return (self.subject, int(self.sub_uri[1:]), int(self.obj_uri[1:]))


def _source_record(t: SourceTuple, lang: str) -> dict[str, Any]:
    return {"file": t.file, "line": t.line, "language": lang, "source": "mParaRel"}


def _copies(sub_label: str, obj_label: str) -> bool:
    return copy_match(sub_label, obj_label) is not None


def _prefer_label(prior: tuple[str, str] | None, new: tuple[str, str],
                  drops: Counter[str]) -> bool:
    """Return True when ``new`` (subject, object) labels should replace ``prior``.

    The first label read wins, except that a subject label from which its object can be
    copied (:func:`fks.data.rules.copy_match`) gives way to one that does not (counted).
    """
    if prior is None:
        return True
    if _copies(*prior) and not _copies(*new):
        drops["subject_label_chosen_to_avoid_copy"] += 1
        return True
    return False


def _candidates_of(rs: RelationSource, relation_id: str, swap: bool,
                   drops: Counter[str]) -> list[Candidate]:
    """Candidates from one property's English tuples (duplicates dropped and counted).

    Where a language has several tuples for the same (subject, object) ids, the builder keeps
    the first, unless its subject label contains the answer and another's does not.
    """
    by_lang: dict[str, dict[tuple[str, str], SourceTuple]] = {lang: {} for lang in LANGUAGES[1:]}
    for lang in LANGUAGES[1:]:
        for t in rs.tuples.get(lang, []):
            prior = by_lang[lang].get((t.sub_uri, t.obj_uri))
            if _prefer_label(None if prior is None else (prior.sub_label, prior.obj_label),
                             (t.sub_label, t.obj_label), drops):
                by_lang[lang][(t.sub_uri, t.obj_uri)] = t
    seen: set[tuple[str, str]] = set()
    out: list[Candidate] = []
    for t in rs.tuples.get("en", []):
        key = (t.sub_uri, t.obj_uri)
        if key in seen:
            drops["duplicate_triples"] += 1
            continue
        seen.add(key)
        labels = {"en": (t.sub_label, t.obj_label)}
        records = [_source_record(t, "en")]
        for lang in LANGUAGES[1:]:
            other = by_lang[lang].get(key)
            if other is not None:
                labels[lang] = (other.sub_label, other.obj_label)
                records.append(_source_record(other, lang))
        trex = rs.trex.get((t.sub_label, t.obj_label))
        if trex is not None:
            records.append(dict(trex))
        if swap:
            labels = {lang: (o, s) for lang, (s, o) in labels.items()}
            key = (t.obj_uri, t.sub_uri)
        out.append(Candidate(relation_id, key[0], key[1], labels, [rs.pid], records))
    return out


def _merge_duplicates(cands: list[Candidate], drops: Counter[str]) -> list[Candidate]:
    """One candidate per (subject, object): a fact reached from two properties is merged."""
    merged: dict[tuple[str, str], Candidate] = {}
    for c in cands:
        prior = merged.get((c.sub_uri, c.obj_uri))
        if prior is None:
            merged[(c.sub_uri, c.obj_uri)] = c
            continue
        drops["merged_across_properties"] += 1
        prior.source_relations = sorted(set(prior.source_relations) | set(c.source_relations))
        prior.records.extend(c.records)
        for lang, pair in c.labels.items():
            if lang != "en" and _prefer_label(prior.labels.get(lang), pair, drops):
                prior.labels[lang] = pair
    return list(merged.values())


def _object_keys(c: Candidate) -> tuple[str, str]:
    return (f"id:{c.obj_uri}", f"label:{c.norm_object}")


def _functional(cands: list[Candidate], drops: Counter[str]) -> list[Candidate]:
    """Drop multi-valued subjects, ambiguous subject labels and repeated subject labels.

    * a subject id with more than one object id: every tuple of it is dropped;
    * an English subject label (normalised) shared by entities with different answers: the
      question cannot be answered, all are dropped;
    * the same label, same answer, several subject ids: one is kept (lowest id).
    """
    objects: dict[str, set[str]] = defaultdict(set)
    for c in cands:
        objects[c.sub_uri].add(c.obj_uri)
    multi = {s for s, objs in objects.items() if len(objs) > 1}
    drops["non_functional_subjects"] += len(multi)
    drops["non_functional_tuples"] += sum(c.sub_uri in multi for c in cands)
    kept = [c for c in cands if c.sub_uri not in multi]
    groups: dict[str, list[Candidate]] = defaultdict(list)
    for c in kept:
        groups[c.norm_subject].append(c)
    out: list[Candidate] = []
    for group in groups.values():
        if len({c.norm_object for c in group}) > 1:
            drops["ambiguous_subject_label"] += len(group)
            continue
        group.sort(key=lambda c: int(c.sub_uri[1:]))
        drops["repeated_subject_label"] += len(group) - 1
        out.append(group[0])
    return sorted(out, key=Candidate.sort_key)


def _degenerate_gate(cands: list[Candidate]) -> tuple[list[Candidate], Counter[str]]:
    """Drop candidates whose object is not a knowable answer; count them per reason.

    Applied after the functional check, so a subject with one degenerate and one good object
    is still dropped as multi-valued. Reasons: :func:`fks.data.rules.degenerate_object`.
    """
    kept: list[Candidate] = []
    dropped: Counter[str] = Counter()
    for c in cands:
        why = degenerate_object(c.subject, c.object)
        if why is None:
            kept.append(c)
        else:
            dropped[why] += 1
    return kept, dropped


# ---------------------------------------------------------------------------- relation pools
@dataclass
class RelationPool:
    """One relation's candidate facts and everything its queries are built from."""

    relation_id: str
    spec: RelationSpec
    candidates: list[Candidate]
    #: object key (id or normalised English label) -> subject ids, over all source tuples
    subjects_by_object: dict[str, set[str]]
    #: English cloze templates (``[X]``, the ``[Y]`` slot removed): the paraphrase pool
    paraphrases: list[str]
    #: English ``[X]``/``[Y]`` patterns that read as sentences (context distractors)
    statements: list[str]
    #: language -> cloze templates, human-checked ones first as (template, checked)
    multilingual: dict[str, list[tuple[str, bool]]]
    #: distinct English object labels of the relation (recognition distractors)
    objects: list[str]
    #: candidates dropped by the degenerate-object gate, per reason
    #: (:func:`fks.data.rules.degenerate_object`)
    degenerate_dropped: dict[str, int] = field(default_factory=dict)

    def reverse_is_well_posed(self, c: Candidate) -> bool:
        """Return True when the relation is ``reversible`` and the object has one subject.

        The source-wide check (by object id and by normalised English label, over every tuple
        before any filter) is stricter than uniqueness within the built set.
        """
        return self.spec.reversible and all(
            self.subjects_by_object.get(k, set()) == {c.sub_uri} for k in _object_keys(c))


def _english_pools(spec: RelationSpec, patterns: list[SourcePattern]) -> tuple[list[str],
                                                                               list[str]]:
    """Paraphrase templates and declarative statements of a relation."""
    paras: dict[str, str] = {}
    for p in patterns:
        for t in (y_last_prefix(p.text), invert_copula(p.text)):
            if t is not None:
                paras.setdefault(normalize(t), _capitalise(t))
    for t in spec.paraphrases:
        paras.setdefault(normalize(t.replace("{subject}", "[X]")), t.replace("{subject}", "[X]"))
    statements = [p.text for p in patterns if is_declarative(p.text)]
    if not statements:
        statements = [p.text for p in patterns]
    return list(paras.values()), list(dict.fromkeys(statements))


def _multilingual_pools(pattern_sets: dict[str, list[SourcePattern]]
                        ) -> dict[str, list[tuple[str, bool]]]:
    out: dict[str, list[tuple[str, bool]]] = {}
    for lang in LANGUAGES[1:]:
        seen: dict[str, tuple[str, bool]] = {}
        for p in pattern_sets.get(lang, []):
            t = y_last_prefix(p.text)
            if t is None:
                continue
            prior = seen.get(normalize(t))
            seen[normalize(t)] = (prior[0], prior[1] or p.checked) if prior else (t, p.checked)
        if seen:
            out[lang] = list(seen.values())
    return out


def _relation_plan(configs: ConfigSet) -> tuple[dict[str, tuple[str, bool]], dict[str, str]]:
    """Map each source property to (target relation, swap?) and record relations left out."""
    reg = configs.relations
    active: dict[str, RelationSpec] = {}
    left_out: dict[str, str] = {}
    for rid, spec in sorted(reg.relations.items()):
        if not spec.functional:
            left_out[rid] = "not functional"
        elif not spec.default_build:
            left_out[rid] = "default_build: false (relations.yaml)"
        elif spec.spec_6_2_flag and reg.drop_spec_6_2_flagged:
            left_out[rid] = "spec_6_2_flag (drop_spec_6_2_flagged: true)"
        else:
            active[rid] = spec
    plan: dict[str, tuple[str, bool]] = {}
    for rid, spec in active.items():
        target, swap = rid, False
        if spec.direction == "inverse" and reg.normalize_inverse_direction:
            target, swap = spec.inverse_of or rid, True
            if target not in active:
                left_out[rid] = f"inverse of {target}, which is left out"
                continue
        for pid in spec.source_relations:
            plan[pid] = (target, swap)
    return plan, left_out


def relation_pools(source: Source, configs: ConfigSet) -> tuple[dict[str, RelationPool],
                                                                 Counter[str]]:
    """Build candidate facts and template pools per relation; count what was dropped."""
    plan, _ = _relation_plan(configs)
    drops: Counter[str] = Counter()
    by_target: dict[str, list[Candidate]] = defaultdict(list)
    for pid, rs in source.relations.items():
        target, swap = plan[pid]
        by_target[target].extend(_candidates_of(rs, target, swap, drops))
    pools: dict[str, RelationPool] = {}
    for rid in sorted(by_target):
        spec = configs.relations.relations[rid]
        merged = _merge_duplicates(by_target[rid], drops)
        subjects_by_object: dict[str, set[str]] = defaultdict(set)
        for c in merged:
            for k in _object_keys(c):
                subjects_by_object[k].add(c.sub_uri)
        cands, degenerate = _degenerate_gate(_functional(merged, drops))
        own = [source.relations[p] for p in spec.source_relations if p in source.relations]
        en_patterns = [p for rs in own for p in rs.patterns.get("en", [])]
        paraphrases, statements = _english_pools(spec, en_patterns)
        ml_sets: dict[str, list[SourcePattern]] = defaultdict(list)
        for rs in own:
            for lang, pats in rs.patterns.items():
                ml_sets[lang].extend(pats)
        objects = sorted({c.norm_object: c.object for c in cands}.values())
        pools[rid] = RelationPool(rid, spec, cands, dict(subjects_by_object), paraphrases,
                                  statements, _multilingual_pools(ml_sets), objects,
                                  dict(sorted(degenerate.items())))
        log.debug("%s: %d candidates, %d paraphrase templates, %d statements", rid,
                  len(cands), len(paraphrases), len(statements))
    return pools, drops


# -------------------------------------------------------------------------------- selection
def allocate_quotas(available: dict[str, int], cap: int | None) -> dict[str, int]:
    """Split ``cap`` facts as evenly as possible over relations (water-filling).

    Small relations give all they have; what they cannot use is shared among the others.
    ``cap=None`` keeps everything.

    >>> allocate_quotas({"a": 2, "b": 10, "c": 10}, 12)
    {'a': 2, 'b': 5, 'c': 5}
    >>> allocate_quotas({"a": 2, "b": 10}, None)
    {'a': 2, 'b': 10}
    """
    if cap is None or cap >= sum(available.values()):
        return dict(available)
    quotas: dict[str, int] = {}
    remaining = cap
    order = sorted(available, key=lambda r: (available[r], r))
    for i, rid in enumerate(order):
        quotas[rid] = min(available[rid], remaining // (len(order) - i))
        remaining -= quotas[rid]
    return {rid: quotas[rid] for rid in sorted(available)}


def select_facts(pools: dict[str, RelationPool], *, max_facts: int | None,
                 seed: int) -> list[Candidate]:
    """Draw a relation-balanced, seeded sample; sorted by relation, then subject."""
    quotas = allocate_quotas({rid: len(p.candidates) for rid, p in pools.items()}, max_facts)
    chosen: list[Candidate] = []
    for rid in sorted(pools):
        cands = pools[rid].candidates
        picked = seeded_rng(seed, "select", rid).sample(range(len(cands)), quotas[rid])
        chosen.extend(cands[i] for i in sorted(picked))
    return chosen


# ---------------------------------------------------------------------------------- queries
@dataclass(frozen=True)
class QuerySpec:
    """A query before ids and flags are attached."""

    variant_id: str
    query: str
    language: str = "en"
    extra: dict[str, Any] = field(default_factory=dict)
    guarded: bool = False  # subject to the D1 context guard


@dataclass
class FactContext:
    """What the family builders need about one fact."""

    cand: Candidate
    pool: RelationPool
    seed: int
    anchor: str
    paraphrases: list[tuple[str, str]]  # (variant_id, text)

    def rng(self, purpose: str, *more: str) -> random.Random:
        """Return a generator for ``purpose`` on this fact."""
        c = self.cand
        return seeded_rng(self.seed, purpose, c.relation_id, c.sub_uri, c.obj_uri, *more)


def _fill_anchor(template: str, subject: str) -> str:
    return template.replace("{subject}", subject)


def _choose_paraphrases(cand: Candidate, pool: RelationPool, seed: int) -> list[tuple[str, str]]:
    rng = seeded_rng(seed, "paraphrase", cand.relation_id, cand.sub_uri, cand.obj_uri)
    k = min(rng.randint(*PARAPHRASES_PER_FACT), len(pool.paraphrases))
    out: dict[str, tuple[str, str]] = {}
    for i in sorted(rng.sample(range(len(pool.paraphrases)), k)):
        text = _fill_prefix(pool.paraphrases[i], cand.subject)
        out.setdefault(normalize(text), (f"para_{i + 1:02d}", text))
    return list(out.values())


def _family_anchor(ctx: FactContext) -> list[QuerySpec]:
    """Ask the registry's canonical question (exactly one per fact)."""
    return [QuerySpec("anchor", ctx.anchor)]


def _family_paraphrase(ctx: FactContext) -> list[QuerySpec]:
    """3-5 cloze paraphrases from the relation's ``[Y]``-last patterns."""
    return [QuerySpec(vid, text) for vid, text in ctx.paraphrases]


def _family_format(ctx: FactContext) -> list[QuerySpec]:
    """Exactly three answer-format variants: name only, fill in the blank, JSON."""
    statement = ctx.paraphrases[0][1] if ctx.paraphrases else f"{ctx.anchor} The answer is"
    return [
        QuerySpec("fmt_short", f"{ctx.anchor} Answer with the name only."),
        QuerySpec("fmt_blank", f"Fill in the blank: {statement} ____."),
        QuerySpec("fmt_json", f'{ctx.anchor} Respond in JSON as {{"answer": "..."}}.'),
    ]


def _family_context(ctx: FactContext) -> list[QuerySpec]:
    """Prefix the anchor with a true sentence about another fact of the relation (D1-guarded)."""
    c, pool = ctx.cand, ctx.pool
    if not pool.statements:
        return []

    def other(o: Candidate) -> bool:
        return (o.obj_uri != c.obj_uri and o.norm_object != c.norm_object
                and o.norm_subject not in (c.norm_subject, o.norm_object))

    rng = ctx.rng("context")
    out = []
    for i, o in enumerate(_sample_where(rng, pool.candidates, CONTEXTS_PER_FACT, other), 1):
        sentence = fill_statement(rng.choice(pool.statements), o.subject, o.object)
        out.append(QuerySpec(f"ctx_{i:02d}", f"{sentence} {ctx.anchor}",
                             extra={"context_distractor": sentence}, guarded=True))
    return out


def _family_multilingual(ctx: FactContext) -> list[QuerySpec]:
    """One cloze query per non-English language with labels and a ``[Y]``-last pattern."""
    out = []
    for lang, templates in ctx.pool.multilingual.items():
        if lang not in ctx.cand.labels:
            continue
        tier = [t for t, checked in templates if checked] or [t for t, _ in templates]
        template = ctx.rng("multilingual", lang).choice(tier)
        out.append(QuerySpec(f"ml_{lang}", _fill_prefix(template, ctx.cand.labels[lang][0]),
                             language=lang))
    return out


def _reverse_texts(ctx: FactContext) -> list[str]:
    return [t.replace("{object}", ctx.cand.object) for t in ctx.pool.spec.reverse]


def _family_reverse(ctx: FactContext) -> list[QuerySpec]:
    """Ask the subject-slot questions where they are well posed (``reversible``, unique)."""
    if not ctx.pool.reverse_is_well_posed(ctx.cand):
        return []
    return [QuerySpec(f"rev_{i:02d}", t) for i, t in enumerate(_reverse_texts(ctx), 1)]


def _family_reverse_illposed(ctx: FactContext) -> list[QuerySpec]:
    """Ask the first reverse question where it is ill-posed (diagnostic only)."""
    if ctx.pool.reverse_is_well_posed(ctx.cand):
        return []
    return [QuerySpec("revill_01", _reverse_texts(ctx)[0])]


def _family_recognition(ctx: FactContext) -> list[QuerySpec]:
    """Ask the anchor as multiple choice: the gold and up to three same-relation objects."""
    golds = ctx.cand.aliases(1)

    def distinct(label: str) -> bool:
        return not any(find_alias(label, g) or find_alias(g, label) for g in golds)

    rng = ctx.rng("recognition")
    distractors = _sample_where(rng, ctx.pool.objects, RECOGNITION_DISTRACTORS, distinct)
    if not distractors:
        return []
    options = [ctx.cand.object, *distractors]
    rng.shuffle(options)
    return [QuerySpec("rec_01", ctx.anchor, extra={"options": options})]


#: One builder per condition family (checked against eval_conditions.yaml at build time).
FAMILY_BUILDERS: dict[str, Callable[[FactContext], list[QuerySpec]]] = {
    "anchor": _family_anchor,
    "paraphrase": _family_paraphrase,
    "format": _family_format,
    "context": _family_context,
    "multilingual": _family_multilingual,
    "reverse": _family_reverse,
    "recognition": _family_recognition,
    "reverse_illposed": _family_reverse_illposed,
}


def _entity(label: str, entity_id: str, aliases: list[str]) -> dict[str, Any]:
    return {"canonical": label, "entity_id": entity_id, "aliases": aliases}


def fact_row(fact_id: str, c: Candidate, spec: RelationSpec) -> dict[str, Any]:
    """Return the ``benchmark_facts`` row of a candidate (README data schema)."""
    relation: dict[str, Any] = {"relation_id": c.relation_id,
                                "source_relations": list(c.source_relations),
                                "direction": spec.direction}
    if spec.inverse_of is not None:
        relation["inverse_of"] = spec.inverse_of
    return {
        "fact_id": fact_id,
        "subject": _entity(c.subject, c.sub_uri, c.aliases(0)),
        "object": _entity(c.object, c.obj_uri, c.aliases(1)),
        "relation": relation,
        "qualification_question": _fill_anchor(spec.anchor, c.subject),
        "sources": sorted({r["source"] for r in c.records}),
        "source_records": [dict(r) for r in c.records],
        "is_functional": spec.functional,
        "answer_type": spec.answer_type,
        "answer_granularity": spec.answer_granularity,
        # English-only first reading; fact_queries() finalises it over the surfaces used
        "answer_in_subject_surface": answer_in_subject_surface(c.subject, c.aliases(1)),
        "spec_6_2_flag": spec.spec_6_2_flag,
        "languages": [lang for lang in LANGUAGES if lang in c.labels],
    }


@dataclass
class QueryCounts:
    """Per-family counts before the guard, and what the guard dropped."""

    before_guard: Counter[str] = field(default_factory=Counter)
    guard_dropped: Counter[str] = field(default_factory=Counter)


def copy_flag(fact: dict[str, Any], rows: Iterable[dict[str, Any]]) -> bool:
    """F1 over what the fact's questions show: gold aliases vs the subject surfaces used.

    The surfaces are the subject labels that occur in the fact's object-slot queries
    (:func:`fks.data.rules.used_subject_surfaces`); the golds are the object's canonical label
    and aliases. The validator recomputes the flag the same way.
    """
    subject, obj = fact["subject"], fact["object"]
    used = used_subject_surfaces([subject["canonical"], *subject["aliases"]],
                                 [r["query"] for r in rows if r["target_slot"] == "object"])
    return answer_in_subject_surface(used, [obj["canonical"], *obj["aliases"]])


def fact_queries(fact: dict[str, Any], cand: Candidate, pool: RelationPool, *,
                 configs: ConfigSet, seed: int, counts: QueryCounts) -> list[dict[str, Any]]:
    """Every query row of one fact (without ``query_id``), families in canonical order.

    Sets the fact's ``answer_in_subject_surface`` (:func:`copy_flag`) and gives every query
    its fact's flag, so the real/copy split is a split of facts.
    """
    ctx = FactContext(cand, pool, seed, fact["qualification_question"],
                      _choose_paraphrases(cand, pool, seed))
    gold_aliases = {"object": fact["object"]["aliases"], "subject": fact["subject"]["aliases"]}
    gold = {"object": fact["object"]["canonical"], "subject": fact["subject"]["canonical"]}
    rows: list[dict[str, Any]] = []
    families = configs.eval_conditions.families
    for family in (f for f in FAMILIES if f in families):
        spec = families[family]
        for q in FAMILY_BUILDERS[family](ctx):
            counts.before_guard[family] += 1
            if q.guarded and context_leaks_gold(q.query, gold_aliases[spec.target_slot],
                                                fact["subject"]["aliases"]) is not None:
                counts.guard_dropped[family] += 1
                continue
            rows.append({
                "fact_id": fact["fact_id"],
                "relation": cand.relation_id,
                "condition_family": family,
                "variant_id": q.variant_id,
                "language": q.language,
                "query": q.query,
                "target_slot": spec.target_slot,
                "gold_canonical": gold[spec.target_slot],
                "gold_aliases": list(gold_aliases[spec.target_slot]),
                "is_assisted": spec.is_assisted,
                "is_well_posed": spec.is_well_posed,
                **spec.flags(),
                "answer_in_subject_surface": fact["answer_in_subject_surface"],
                **q.extra,
            })
    fact["answer_in_subject_surface"] = copy_flag(fact, rows)
    for row in rows:
        row["answer_in_subject_surface"] = fact["answer_in_subject_surface"]
    return rows


# ------------------------------------------------------------------------------------ build
@dataclass(frozen=True)
class BuildResult:
    """What :func:`build_benchmark` wrote and found."""

    out: Path
    facts_path: Path
    queries_path: Path
    statistics: dict[str, Any]
    report: dict[str, Any]
    manifest: dict[str, Any]


def _check_builders(configs: ConfigSet) -> None:
    missing = sorted(set(configs.eval_conditions.families) - set(FAMILY_BUILDERS))
    if missing:  # pragma: no cover - the config validator already insists on the eight
        raise RuntimeError(f"no query builder for families {missing}")


def _generate(selected: list[Candidate], pools: dict[str, RelationPool], configs: ConfigSet,
              seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], QueryCounts]:
    counts = QueryCounts()
    facts: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    by_rel: dict[str, list[Candidate]] = defaultdict(list)
    for c in selected:
        by_rel[c.relation_id].append(c)
    with progress_bar() as progress:
        task = progress.add_task("building queries per relation", total=len(by_rel))
        for rid in sorted(by_rel):
            pool = pools[rid]
            for c in by_rel[rid]:
                fact = fact_row(f"fact_{len(facts) + 1:06d}", c, pool.spec)
                facts.append(fact)
                for row in fact_queries(fact, c, pool, configs=configs, seed=seed,
                                        counts=counts):
                    queries.append({"query_id": f"query_{len(queries) + 1:08d}", **row})
            progress.advance(task)
    return facts, queries, counts


def _clear_stale(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for pattern in ("benchmark_facts_*.jsonl", "evaluation_queries_*.jsonl"):
        for stale in out.glob(pattern):
            stale.unlink()


def _manifest(source: Path, src: Source, configs: ConfigSet, *, seed: int,
              max_facts: int | None, facts: list[dict[str, Any]],
              queries: list[dict[str, Any]], counts: QueryCounts,
              pools: dict[str, RelationPool]) -> dict[str, Any]:
    families = [f for f in FAMILIES if f in configs.eval_conditions.families]
    deviations = [
        {"id": "D1-guard", "family": fam, "delta": -counts.guard_dropped[fam],
         "reason": D1_REASON}
        for fam in families if counts.guard_dropped[fam]
    ]
    used = sorted({f["relation"]["relation_id"] for f in facts})
    return {
        "fks_version": __version__,
        "builder": "fks.data.build",
        "seed": seed,
        "max_facts": max_facts,
        "source": str(source),
        "source_checksum": src.checksum(),
        "expected_counts": {"n_facts": len(facts),
                            "queries": {f: counts.before_guard[f] for f in families}},
        "accepted_deviations": deviations,
        "relations": used,
        "languages": [lang for lang in LANGUAGES if any(q["language"] == lang for q in queries)],
        "switches": {
            "drop_spec_6_2_flagged": configs.relations.drop_spec_6_2_flagged,
            "normalize_inverse_direction": configs.relations.normalize_inverse_direction,
        },
        "relation_templates": {
            rid: {"paraphrase": pools[rid].paraphrases,
                  "context_statements": pools[rid].statements,
                  "multilingual": {lang: [t for t, _ in ts]
                                   for lang, ts in pools[rid].multilingual.items()}}
            for rid in used
        },
    }


def _build_counts(src: Source, pools: dict[str, RelationPool], drops: Counter[str],
                  selected: list[Candidate], counts: QueryCounts,
                  left_out: dict[str, str]) -> dict[str, Any]:
    return {
        "source_relations_read": sorted(src.relations, key=lambda p: int(p[1:])),
        "source_relations_skipped": src.skipped_pids,
        "relations_left_out": left_out,
        "dropped": {k: drops[k] for k in ("duplicate_triples", "non_functional_subjects",
                                          "non_functional_tuples", "ambiguous_subject_label",
                                          "repeated_subject_label",
                                          "merged_across_properties")},
        "degenerate_objects_dropped": {rid: p.degenerate_dropped for rid, p in pools.items()
                                       if p.degenerate_dropped},
        "subject_label_chosen_to_avoid_copy": drops["subject_label_chosen_to_avoid_copy"],
        "candidates": sum(len(p.candidates) for p in pools.values()),
        "candidates_per_relation": {rid: len(p.candidates) for rid, p in pools.items()},
        "selected": len(selected),
        "queries_before_guard": dict(counts.before_guard),
        "context_guard_dropped": dict(counts.guard_dropped),
    }


def build_benchmark(source: str | Path, out: str | Path, *, configs: ConfigSet,
                    max_facts: int | None, seed: int) -> BuildResult:
    """Build a benchmark directory from a ParaRel/mParaRel source folder.

    Args:
        source: the source folder (see :func:`read_source` for its layout).
        out: the benchmark directory to write; stale benchmark files in it are removed.
        configs: the configs in force (relation registry, condition registry, switches).
        max_facts: cap on facts, spread evenly over relations; ``None`` keeps all candidates.
        seed: sampling seed; the same source and seed give byte-identical files.

    Returns:
        The paths written, the dataset statistics, the manifest and the validation report.

    Raises:
        FksInputError: the source is missing, malformed, or yields no usable fact.
    """
    source, out = Path(source), Path(out)
    if max_facts is not None and max_facts < 1:
        raise FksInputError(f"must be a positive number of facts; found {max_facts}",
                            field="max_facts")
    _check_builders(configs)
    plan, left_out = _relation_plan(configs)
    for rid, why in left_out.items():
        log.info("relation %s left out: %s", rid, why)
    src = read_source(source, plan)
    pools, drops = relation_pools(src, configs)
    if not any(p.candidates for p in pools.values()):
        raise FksInputError("no usable functional facts for any registry relation "
                            f"(read {', '.join(src.relations) or 'no relation'})", path=source)
    selected = select_facts(pools, max_facts=max_facts, seed=seed)
    facts, queries, counts = _generate(selected, pools, configs, seed)
    fact_models = [Fact.model_validate(f) for f in facts]
    query_models = [Query.model_validate(q) for q in queries]
    log.info("built %d facts over %d relations, %d queries (%d context candidates dropped by "
             "the D1 guard)", len(facts), len({c.relation_id for c in selected}), len(queries),
             sum(counts.guard_dropped.values()))

    _clear_stale(out)
    facts_path = out / f"benchmark_facts_{len(facts)}.jsonl"
    queries_path = out / f"evaluation_queries_{len(queries)}.jsonl"
    atomic_write_jsonl(facts_path, facts)
    atomic_write_jsonl(queries_path, queries)
    from fks.data.stats import dataset_statistics

    bench = Benchmark(files=find_benchmark_files(out), facts=fact_models, queries=query_models)
    statistics = dataset_statistics(bench) | {
        "build": _build_counts(src, pools, drops, selected, counts, left_out)}
    atomic_write_json(out / "dataset_statistics.json", statistics)
    manifest = _manifest(source, src, configs, seed=seed, max_facts=max_facts, facts=facts,
                         queries=queries, counts=counts, pools=pools)
    atomic_write_json(out / "benchmark_manifest.json", manifest)

    from fks.data.validate import validate_benchmark

    report = validate_benchmark(out, configs=configs)
    atomic_write_json(out / "validation_report.json", report)
    log.info("validation: %s (%d hard errors)", "passed" if report["passed"] else "FAILED",
             len(report["hard_errors"]))
    return BuildResult(out, facts_path, queries_path, statistics, report, manifest)
