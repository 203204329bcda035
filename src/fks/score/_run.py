"""Score a run directory: ``RUN/generations.jsonl`` -> ``RUN/scored.jsonl`` + ``known_labels.json``.

Stage V of the construction log: the anchor query's label is each model's ``K_m`` for the
fact, a **label, never a filter** -- every fact of the benchmark appears in
``known_labels.json``; a fact whose anchor record is missing or failed simply has no entry
for that model. Stage VI: every query is scored with the same rules (:mod:`fks.score`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from fks import __version__
from fks.configs import FAMILIES, ConfigSet, load_configs
from fks.data.load import Benchmark, load_benchmark
from fks.data.schema import LABELS, Entity, Fact, GenerationRecord, Query, ScoredRecord
from fks.errors import FksInputError
from fks.generate.manifest import read_run_manifest, update_run_manifest
from fks.io import atomic_write_json, atomic_write_jsonl, iter_jsonl, sha256_file, unique_rows
from fks.log import console, track
from fks.provenance import ProtocolCheck, check_inputs, record_files
from fks.runlock import locks_run_dir
from fks.score._scorer import (
    SCORER_VERSION,
    AliasSet,
    ScoreResult,
    lettered_options,
    score_answer,
)
from fks.score.match import norm

__all__ = ["ScoreSummary", "score_run", "render_summary", "competitor_index"]

log = logging.getLogger(__name__)

GENERATIONS = "generations.jsonl"
SCORED = "scored.jsonl"
KNOWN_LABELS = "known_labels.json"
MANIFEST = "evaluation_manifest.json"
#: Stage V: K_m is read from the unperturbed anchor query (one per fact).
ANCHOR_FAMILY = "anchor"


@dataclass(frozen=True)
class ScoreSummary:
    """What :func:`score_run` wrote and counted.

    Attributes:
        run_dir: the run directory.
        scored_path: ``RUN/scored.jsonl`` (one row per generation record, same order).
        known_labels_path: ``RUN/known_labels.json``.
        n_records: rows scored (= rows of generations.jsonl).
        n_facts: facts of the benchmark (= keys of known_labels.json).
        label_counts: label -> rows, over all families.
        by_family: family -> label -> rows.
        anchors_missing: model -> facts without an anchor label (missing or failed record).
    """

    run_dir: Path
    scored_path: Path
    known_labels_path: Path
    n_records: int
    n_facts: int
    label_counts: dict[str, int]
    by_family: dict[str, dict[str, int]]
    anchors_missing: dict[str, int] = field(default_factory=dict)


def _entity_key(entity: Entity) -> str:
    """Identity of an entity: its Wikidata id, else its normalised canonical label."""
    return entity.entity_id or "label:" + norm(entity.canonical)


def _names(entity: Entity) -> tuple[str, ...]:
    return tuple(dict.fromkeys([entity.canonical, *entity.aliases]))


def competitor_index(facts: list[Fact]) -> Callable[[Fact, str], AliasSet]:
    """Build ``competitors(fact, target_slot) -> AliasSet`` for a benchmark's facts.

    For the object slot: the aliases of every OTHER object entity of the fact's relation; for
    the subject slot (reverse queries): the aliases of every other subject. Entities are told
    apart by Wikidata id (else normalised canonical label), so facts sharing an object (many
    facts have ``France`` as country) never compete with each other. Results are cached per
    (relation, slot): each fact gets a view that drops its own entity.
    """
    pools: dict[tuple[str, str], dict[tuple[str, str], None]] = {}
    for fact in facts:
        for slot, entity in (("object", fact.object), ("subject", fact.subject)):
            pool = pools.setdefault((fact.relation.relation_id, slot), {})
            key = _entity_key(entity)
            pool.update(dict.fromkeys((alias, key) for alias in _names(entity)))
    prepared: dict[tuple[str, str], AliasSet] = {}

    def competitors(fact: Fact, slot: str) -> AliasSet:
        pool_key = (fact.relation.relation_id, slot)
        if pool_key not in prepared:
            pairs = list(pools.get(pool_key, {}))
            prepared[pool_key] = AliasSet((a for a, _ in pairs), owners=(o for _, o in pairs))
        own = _entity_key(fact.object if slot == "object" else fact.subject)
        return prepared[pool_key].excluding(own)

    return competitors


def _prompt_builder() -> Callable[[Query], str] | None:
    """``fks.generate.prompts.build_prompt`` when that module exists (R10 letters), else None."""
    try:
        from fks.generate.prompts import build_prompt
    except ImportError:
        return None
    return build_prompt


class _Scorer:
    """Per-query scoring context (gold, granularity, competitors, options) for one benchmark."""

    def __init__(self, bench: Benchmark) -> None:
        self.queries = {q.query_id: q for q in bench.queries}
        self.facts = bench.facts_by_id
        self.competitors = competitor_index(bench.facts)
        self.build_prompt = _prompt_builder()
        self._letters: dict[str, dict[str, str]] = {}

    def query_for(self, gen: GenerationRecord, path: Path, line: int) -> Query:
        """Return the benchmark query of a generation record; bad ids raise FksInputError."""
        query = self.queries.get(gen.query_id)
        if query is None:
            raise FksInputError(
                f"query_id {gen.query_id!r} is not in the benchmark "
                f"({len(self.queries)} queries)",
                path=path, line=line, field="query_id",
            )
        for name in ("fact_id", "condition_family"):
            if getattr(gen, name) != getattr(query, name):
                raise FksInputError(
                    f"{name} {getattr(gen, name)!r} does not match the benchmark's "
                    f"{getattr(query, name)!r} for {query.query_id}",
                    path=path, line=line, field=name,
                )
        return query

    def letters(self, query: Query, gen: GenerationRecord) -> dict[str, str]:
        """R10: option letters from the prompt the model saw (record, build_prompt, query)."""
        if query.query_id not in self._letters:
            prompt = getattr(gen, "prompt", None)
            if not isinstance(prompt, str):
                prompt = self.build_prompt(query) if self.build_prompt else query.query
            self._letters[query.query_id] = lettered_options(prompt, query.options or [])
        return self._letters[query.query_id]

    def score(self, gen: GenerationRecord, query: Query) -> ScoreResult:
        """R12 for failed generations, else :func:`score_answer` with the query's context."""
        if gen.status != "ok":
            return ScoreResult("unparseable")
        fact = self.facts[query.fact_id]
        return score_answer(
            gen.raw_response,
            list(dict.fromkeys([query.gold_canonical, *query.gold_aliases])),
            answer_granularity=fact.answer_granularity,
            competitor_aliases=self.competitors(fact, query.target_slot),
            options=query.options,
            option_letters=self.letters(query, gen) if query.options else None,
            # R13/R14 read open questions line by line; recognition keeps R10's first segment
            query=None if query.options else query.query,
            subject_aliases=() if query.options else _names(
                fact.subject if query.target_slot == "object" else fact.object),
        )


def _count_rows(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(1 for line in fh if line.strip())


def _read_manifest(run_dir: Path) -> dict[str, Any]:
    """``RUN/evaluation_manifest.json`` as a dict (a skeleton when the run has none yet)."""
    return read_run_manifest(run_dir)


def _recorded_benchmark(manifest: dict[str, Any], key: str) -> str | None:
    """``manifest["benchmark"][key]`` (written by ``fks generate``) when it is a string."""
    section = manifest.get("benchmark")
    value = section.get(key) if isinstance(section, dict) else None
    return value if isinstance(value, str) else None


def _load_run_benchmark(
    run_dir: Path, benchmark: str | Path | None, manifest: dict[str, Any]
) -> tuple[Benchmark, str, str]:
    """Load the benchmark to score against and check it is the one the run was generated on.

    ``benchmark`` None means the one recorded in the run manifest. A recorded checksum that
    differs from the loaded benchmark's is an input error (labels would join the wrong gold).
    """
    source = benchmark if benchmark is not None else _recorded_benchmark(manifest, "path")
    if source is None:
        raise FksInputError("no benchmark given (--benchmark) and the run manifest records none",
                            path=run_dir / MANIFEST, field="benchmark.path")
    bench = load_benchmark(source)
    checksum = bench.checksum()
    recorded = _recorded_benchmark(manifest, "checksum")
    if recorded is not None and recorded != checksum:
        raise FksInputError(
            f"the run was generated on benchmark checksum {recorded[:12]}..., but {source} has "
            f"{checksum[:12]}...; score against the benchmark the run used",
            path=run_dir / MANIFEST, field="benchmark.checksum",
        )
    return bench, str(source), checksum


@dataclass
class _Tally:
    """Running counts of a scoring pass and the stage V labels (K_m) from the anchors."""

    known: dict[str, dict[str, str]]
    by_family: dict[str, Counter[str]] = field(default_factory=dict)
    models: set[str] = field(default_factory=set)
    duplicates: int = 0

    def add(self, gen: GenerationRecord, query: Query, label: str) -> None:
        """Count one scored record; an ``ok`` anchor record sets the model's label."""
        self.models.add(gen.model)
        self.by_family.setdefault(query.condition_family, Counter())[label] += 1
        if query.condition_family != ANCHOR_FAMILY or gen.status != "ok":
            return
        if gen.model in self.known[query.fact_id]:
            self.duplicates += 1
        else:
            self.known[query.fact_id][gen.model] = label

    def missing(self) -> dict[str, int]:
        """Model -> facts without an anchor label."""
        return {m: sum(m not in lab for lab in self.known.values()) for m in sorted(self.models)}

    def table(self, family_order: Iterable[str]) -> dict[str, dict[str, int]]:
        """Family -> label -> count, families in ``family_order``, every label present."""
        order = [f for f in dict.fromkeys(family_order) if f in self.by_family]
        return {f: {lab: self.by_family[f][lab] for lab in LABELS} for f in order}


def _scored_rows(gen_path: Path, scorer: _Scorer, tally: _Tally, protocol: ProtocolCheck
                 ) -> Iterator[dict[str, Any]]:
    """Stream generations.jsonl as scored rows (same order), counting them into ``tally``."""
    records = unique_rows(iter_jsonl(gen_path, GenerationRecord), gen_path, what="generations")
    for line, row in track(records, "scoring", total=_count_rows(gen_path)):
        gen = cast(GenerationRecord, row)
        protocol(line, gen)
        query = scorer.query_for(gen, gen_path, line)
        result = scorer.score(gen, query)
        tally.add(gen, query, result.label)
        record = ScoredRecord.model_validate(gen.model_dump() | {
            "label": result.label,
            "extracted_answer": result.extracted_answer,
            "matched_alias": result.matched_alias,
        })
        yield record.model_dump(mode="json")


@locks_run_dir("run_dir")
def score_run(
    run_dir: str | Path, benchmark: str | Path | None, *, configs: ConfigSet | None = None
) -> ScoreSummary:
    """Score every record of ``RUN/generations.jsonl`` against a benchmark.

    Writes, each atomically: ``RUN/scored.jsonl`` (one :class:`ScoredRecord` per generation
    record, same order, none dropped; non-``ok`` records are ``unparseable``),
    ``RUN/known_labels.json`` (``{fact_id: {model: label}}`` from the anchor queries, every
    benchmark fact present), and ``stages.score`` of ``RUN/evaluation_manifest.json``
    (created if absent).

    Args:
        run_dir: the run directory.
        benchmark: a benchmark directory or ``hf[:repo]``; None uses the benchmark recorded
            in the run manifest by ``fks generate``.
        configs: the configs in force (family order of the summary); defaults when None.

    Raises:
        FksInputError: generations.jsonl is missing or has a bad row, a record's query_id is
            not in the benchmark, or its fact_id/condition_family disagree with the benchmark,
            or the benchmark is not the one the run manifest records (checksum).
    """
    run_dir = Path(run_dir)
    gen_path = run_dir / GENERATIONS
    if not gen_path.is_file():
        raise FksInputError("file not found (run `fks generate` first)", path=gen_path)
    configs = configs or load_configs()
    inputs = check_inputs(run_dir, "score", [GENERATIONS])
    bench, source, checksum = _load_run_benchmark(run_dir, benchmark, _read_manifest(run_dir))
    tally = _Tally(known={f.fact_id: {} for f in bench.facts})
    scored_path = run_dir / SCORED
    n_records = atomic_write_jsonl(scored_path, _scored_rows(
        gen_path, _Scorer(bench), tally, ProtocolCheck.for_run(run_dir, gen_path)))
    known_path = run_dir / KNOWN_LABELS
    atomic_write_json(known_path, tally.known)

    missing = tally.missing()
    for model, n in missing.items():
        if n:
            log.warning("%s: %d of %d facts have no anchor label (anchor record missing or "
                        "failed)", model, n, len(tally.known))
    if tally.duplicates:
        log.warning("%d duplicate anchor records; the first of each gave K_m", tally.duplicates)
    by_family = tally.table([*configs.eval_conditions.families, *FAMILIES])
    totals = {lab: sum(c[lab] for c in by_family.values()) for lab in LABELS}
    update_run_manifest(run_dir, stage="score", stage_info={
        "scorer_version": SCORER_VERSION,
        "fks_version": __version__,
        "scored_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "n_records": n_records,
        "label_counts": totals,
        "label_counts_by_family": by_family,
        "scored_sha256": sha256_file(scored_path),
        "known_labels_sha256": sha256_file(known_path),
        "anchors_missing": missing,
        "benchmark": {"source": source, "checksum": checksum},
    })
    record_files(run_dir, "score", inputs)
    log.info("scored %d records -> %s (%s)", n_records, scored_path,
             ", ".join(f"{lab} {n}" for lab, n in totals.items()))
    return ScoreSummary(
        run_dir=run_dir, scored_path=scored_path, known_labels_path=known_path,
        n_records=n_records, n_facts=len(tally.known), label_counts=totals,
        by_family=by_family, anchors_missing=missing,
    )


def render_summary(summary: ScoreSummary) -> None:
    """Print the label counts per family as a rich table (to the fks console, stderr)."""
    from rich.table import Table

    table = Table(title=f"five-label scores: {summary.scored_path}")
    table.add_column("family")
    for lab in LABELS:
        table.add_column(lab, justify="right")
    table.add_column("total", justify="right")
    for family, counts in summary.by_family.items():
        table.add_row(family, *(str(counts[lab]) for lab in LABELS), str(sum(counts.values())))
    table.add_section()
    table.add_row("all", *(str(summary.label_counts[lab]) for lab in LABELS),
                  str(summary.n_records), style="bold")
    console.print(table)
