"""``fks judge RUN``: read ``RUN/scored.jsonl``, judge every record, write ``RUN/judged.jsonl``.

Every record is judged. Records are grouped per ``(model, fact, analysis group, slot)`` where
the analysis group comes from the record's own booleans -- ``main`` (``use_for_main_forward``),
``reverse``, ``recognition``, else ``diagnostic:<family>`` -- so main-condition answers of a
fact are clustered in one pass and reverse/recognition answers in passes of their own (they
never enter the main averages). Step one is the judge's (reference-blind), step two is
:func:`fks.judge.mark_clusters` (reference-aware). The output keeps the input order and every
input field; ``status`` becomes the §3.1 judge status and the generation status moves to
``generation_status``. ``RUN/evaluation_manifest.json`` gains ``stages.judge``.

Sharding (``shard=(i, n)``, ``fks judge RUN --shard i/n``): the records of ``RUN/scored.jsonl``
whose facts :func:`fks.generate.runner.assign_shards` deals to shard ``i`` (all answers of a fact
stay together, so clusters are the same as unsharded) are judged into
``RUN/shards/shard_i_of_n/judged.jsonl``, with ``stages.judge`` in that folder's manifest;
``fks merge RUN`` joins the shards.
"""

from __future__ import annotations

import gc
import logging
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fks.data.load import Benchmark, load_benchmark
from fks.data.schema import Query, ScoredRecord
from fks.errors import FksInputError
from fks.generate.manifest import update_run_manifest
from fks.io import atomic_write_jsonl, iter_jsonl
from fks.judge._alias import HINT_CLUSTERS
from fks.judge._correctness import Reference, mark_clusters
from fks.judge._lexicon import (
    EntityLexicon,
    answer_span,
    build_gazetteer,
    build_lexicons,
    entity_key,
    religion_key,
    religion_words,
)
from fks.judge._reader import clear_caches
from fks.judge._types import REVIEW_REQUIRED, UNPARSEABLE, AnswerGroup, AnswerItem, Judge
from fks.log import track
from fks.runlock import locks_run_dir

__all__ = ["judge_run", "analysis_group", "build_groups", "judge_records", "read_scored"]

log = logging.getLogger(__name__)
_CHUNK = 256
#: cyclic-GC generation-0 threshold while judging (Python's default is 700)
_GC_GEN0 = 50_000


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """Run the cyclic garbage collector less often (restored afterwards).

    Judging allocates millions of small, acyclic objects (records, readings, rows) while tens
    of thousands of records stay alive; at the default threshold the collector rescans them
    hundreds of times, about a quarter of the alias judge's time on 44,000 records. Reference
    counting still frees everything as usual; only cycle detection runs less often.
    """
    old = gc.get_threshold()
    gc.set_threshold(_GC_GEN0, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


def analysis_group(use_for_main_forward: bool, use_for_reverse_analysis: bool,
                   use_for_recognition_analysis: bool, condition_family: str) -> str:
    """Name a record's analysis group from its booleans.

    Returns ``main``, ``reverse``, ``recognition`` or ``diagnostic:<family>``.
    """
    if use_for_main_forward:
        return "main"
    if use_for_reverse_analysis:
        return "reverse"
    if use_for_recognition_analysis:
        return "recognition"
    return f"diagnostic:{condition_family}"


@dataclass
class _Grouped:
    groups: list[AnswerGroup]
    refs: list[Reference]
    members: list[list[int]]  # record indices of each group, in item order


def _item(rec: ScoredRecord, query: str = "") -> AnswerItem:
    hint = rec.label if rec.label in HINT_CLUSTERS else None
    return AnswerItem(
        query_id=rec.query_id, condition_family=rec.condition_family, language=rec.language,
        raw_response=rec.raw_response, span=answer_span(rec.raw_response, rec.extracted_answer),
        hint=hint, generation_ok=rec.status == "ok", query=query,
    )


#: families whose query text is the relation's own template (context queries prepend a
#: distractor sentence about another subject; its words are not the predicate's)
_TEMPLATE_FAMILIES = frozenset({"anchor", "paraphrase", "format", "multilingual", "reverse",
                                "reverse_illposed"})


def slot_words(bench: Benchmark) -> dict[tuple[str, str], frozenset[str]]:
    """Collect the predicate words of each ``(relation, target slot)`` (reader rule J11).

    The words of the relation's template queries with the asked entity's names blanked out:
    in a cased script only words written in lower case (names are capitalised), and, where
    the relation has queries of two or more facts, only words used for two or more facts
    (a name, in any script, belongs to one fact). Built from the benchmark's queries alone.
    """
    import re

    from fks.judge._reader import _tokens, normalize
    from fks.text import mask_mentions

    facts = bench.facts_by_id
    seen: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    word = re.compile(r"\w+")
    for q in bench.queries:
        if q.condition_family not in _TEMPLATE_FAMILIES or q.fact_id not in facts:
            continue
        f = facts[q.fact_id]
        asked = f.subject if q.target_slot == "object" else f.object
        names = [normalize(x) for x in (asked.canonical, *asked.aliases) if x.strip()]
        masked, _ = mask_mentions(normalize(q.query), names)
        lower = {w for w in word.findall(q.query) if w.lower() == w}
        for w in _tokens(masked):
            cased = w.lower() != w.upper()
            if not cased or w in lower:
                seen[(q.relation, q.target_slot)][w].add(q.fact_id)
    out = {}
    for key, words in seen.items():
        n_facts = len({fid for fids in words.values() for fid in fids})
        need = 2 if n_facts >= 2 else 1
        out[key] = frozenset(w for w, fids in words.items() if len(fids) >= need)
    return out


def foreign_words(slots: dict[tuple[str, str], frozenset[str]]
                  ) -> dict[tuple[str, str], frozenset[str]]:
    """Predicate words that belong to one other relation's slot only (reader rule J14).

    A word of :func:`slot_words` is *distinctive* when the templates of exactly one relation
    (either slot) use it and it is a content word (four letters or more, or CJK): ``born``
    (place of birth), ``died`` (place of death), ``worked`` (work location), ``founded``;
    ``company`` or ``city``, shared by several relations, are not. The foreign words of a
    slot are the distinctive words of the *other* relations. Built from the benchmark's
    templates alone.
    """
    from fks.judge._reader import _FUNCTION, has_cjk

    owners: dict[str, set[str]] = defaultdict(set)
    for (relation, _), words in slots.items():
        for w in words:
            if w not in _FUNCTION and (len(w) >= 4 or has_cjk(w)) and w != "____":
                owners[w].add(relation)
    distinctive = {w: next(iter(r)) for w, r in owners.items() if len(r) == 1}
    return {key: frozenset(w for w, owner in distinctive.items() if owner != key[0])
            for key in slots}


#: J14 (release 13): predicate words the templates do not spell but every labelled set reads
#: as the slot's own, keyed by a template word of the slot. A slot that asks where something
#: was *founded* reads ``<subject> was born in X`` as its place of formation (15 of 16 dev
#: rows: a band, a company or a person "born" in a city; for a place of death or of work it
#: stays another relation's predicate, J14).
#: Release 17: the predicate's own verb in the forms the templates do not use -- ``established``
#: for *founded* (``The Polish Press Agency was established in 1996.``), ``working`` / ``works``
#: for *worked* (``I was working in Hamburg.``), in the six languages. Words are written as
#: :func:`fks.text.normalize` leaves them (no accents: release 13's ``né`` / ``née`` never
#: matched a normalised sentence; ``nee`` does now, ``ne`` -- also French negation -- not).
_SYNONYMS: dict[str, frozenset[str]] = {
    "founded": frozenset("born geboren nacido nacida nee родился родилась established "
                         "etabli etablie establecido establecida основан основана".split()),
    "worked": frozenset("working works travaille trabaja trabajaba arbeitet работал "
                        "работала".split()),
}


def with_synonyms(slots: dict[tuple[str, str], frozenset[str]]
                  ) -> dict[tuple[str, str], frozenset[str]]:
    """J14 (release 13): add :data:`_SYNONYMS`' words to every slot holding their key."""
    out = {}
    for key, words in slots.items():
        for word, extra in _SYNONYMS.items():
            if word in words:
                words = words | extra
        out[key] = words
    return out


def build_groups(records: list[ScoredRecord], bench: Benchmark,
                 lexicons: dict[tuple[str, str], EntityLexicon] | None = None) -> _Grouped:
    """Group records for judging and build each group's gold reference (kept apart)."""
    lexicons = lexicons if lexicons is not None else build_lexicons(bench)
    gazetteer = build_gazetteer(bench)
    slots = slot_words(bench)
    foreign = foreign_words(slots)
    slots = with_synonyms(slots)
    foreign = {key: words - slots[key] for key, words in foreign.items()}
    queries = {q.query_id: q for q in bench.queries}
    by_key: dict[tuple[str, str, str, str], list[int]] = defaultdict(list)
    for i, rec in enumerate(records):
        q = queries[rec.query_id]
        grp = analysis_group(rec.use_for_main_forward, rec.use_for_reverse_analysis,
                             rec.use_for_recognition_analysis, rec.condition_family)
        by_key[(rec.model, rec.fact_id, grp, q.target_slot)].append(i)
    out = _Grouped([], [], [])
    for (model, fact_id, grp, slot), idx in by_key.items():
        fact = bench.facts_by_id[fact_id]
        rel = fact.relation.relation_id
        qs: list[Query] = [queries[records[i].query_id] for i in idx]
        anchor = next((q for q in qs if q.condition_family == "anchor"), qs[0])
        ent, asked = (fact.object, fact.subject) if slot == "object" else (fact.subject,
                                                                            fact.object)
        gold = [ent.canonical, *ent.aliases]
        for q in qs:
            gold += [q.gold_canonical, *q.gold_aliases]
        out.groups.append(AnswerGroup(
            key=(model, fact_id, grp), relation=rel, target_slot=slot,
            answer_type=fact.answer_type, question=anchor.query,
            lexicon=lexicons[(rel, slot)],
            items=tuple(_item(records[i], queries[records[i].query_id].query) for i in idx),
            mentions=tuple(dict.fromkeys([asked.canonical, *asked.aliases])),
            gazetteer=gazetteer, slot=slots.get((rel, slot), frozenset()),
            foreign=foreign.get((rel, slot), frozenset()),
        ))
        gold_key = entity_key(ent.entity_id, ent.canonical)
        if fact.answer_type == "religion" and slot == "object":  # J41: as the lexicon reads it
            gold_key = religion_key(gold_key)
            gold += religion_words(gold_key)
        out.refs.append(Reference(gold_key, tuple(dict.fromkeys(gold)), fact.answer_type,
                                  fact.answer_granularity))
        out.members.append(idx)
    return out


def _review_reason(cluster_id: str, generation_ok: bool) -> str:
    if not generation_ok:
        return "generation_error"
    if cluster_id == REVIEW_REQUIRED:
        return "judge_invalid_output"
    if cluster_id == UNPARSEABLE:
        return "unparseable_answer"
    return "ungrounded_correct_cluster"


def _failure_kind(failure: str) -> str:
    """Return a group failure's last reason without its place or size (``schema violation``, ...).

    ``invalid_output: schema violation at assignments.0.status`` -> ``schema violation``;
    ``... cover answers 1..14 exactly once`` -> ``... cover answers 1..n exactly once``.
    """
    text = failure.removeprefix("invalid_output: ")
    text = text.split(" at ", 1)[0]
    return re.sub(r"1\.\.\d+", "1..n", text)


def judge_records(records: list[ScoredRecord], bench: Benchmark, judge: Judge
                  ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Judge ``records`` (both steps); returns (judged rows in input order, counts).

    Each row is the input record's fields plus ``cluster_id``, ``canonical_meaning``,
    ``status`` (§3.1), ``confidence``, ``correctness`` (§3.2), ``generation_status``, ``judge``.
    """
    grouped = build_groups(records, bench)
    rows: list[dict[str, Any] | None] = [None] * len(records)
    counts: Counter[str] = Counter()
    chunks = range(0, len(grouped.groups), _CHUNK)
    for start in track(chunks, "judging", total=len(chunks)):
        part = grouped.groups[start : start + _CHUNK]
        results = judge.cluster(part)
        if len(results) != len(part):
            raise RuntimeError(f"judge {judge.name!r} returned {len(results)} results "
                               f"for {len(part)} groups")
        for off, (group, res) in enumerate(zip(part, results, strict=True)):
            if len(res.assignments) != len(group.items):
                raise RuntimeError(f"judge {judge.name!r} dropped answers of group {group.key}")
            gi = start + off
            verdicts, extra = mark_clusters(group, res, grouped.refs[gi])
            counts["judge_calls"] += res.attempts
            counts["ungrounded_clusters"] += extra["ungrounded_clusters"]
            if res.failure:
                counts["invalid_output_groups"] += 1
                counts[f"invalid:{_failure_kind(res.failure)}"] += 1
            for ri, item, a, v in zip(grouped.members[gi], group.items, res.assignments,
                                      verdicts, strict=True):
                row = records[ri].model_dump(mode="json")
                row["generation_status"] = row.pop("status")
                row.update(cluster_id=a.cluster_id, canonical_meaning=a.canonical_meaning,
                           status=a.status, confidence=a.confidence, correctness=v,
                           judge=judge.name, judge_answer=a.span)
                rows[ri] = row
                if v == "REVIEW_REQUIRED":
                    counts[f"review:{_review_reason(a.cluster_id, item.generation_ok)}"] += 1
    assert all(r is not None for r in rows)
    final: list[dict[str, Any]] = rows  # type: ignore[assignment]
    summary = _summarise(final, grouped, counts)
    return final, summary


def _summarise(rows: list[dict[str, Any]], grouped: _Grouped, counts: Counter[str]
               ) -> dict[str, Any]:
    review = {k.split(":", 1)[1]: n for k, n in sorted(counts.items()) if k.startswith("review:")}
    per_group: Counter[str] = Counter()
    for g in grouped.groups:
        per_group[g.key[2]] += len(g.items)
    return {
        "records": len(rows),
        "groups": len(grouped.groups),
        "facts": len({g.key[1] for g in grouped.groups}),
        "records_by_analysis_group": dict(sorted(per_group.items())),
        "by_status": dict(sorted(Counter(r["status"] for r in rows).items())),
        "by_correctness": dict(sorted(Counter(r["correctness"] for r in rows).items())),
        "review_required": sum(review.values()),
        "review_required_by_reason": review,
        "invalid_output_groups": counts["invalid_output_groups"],
        "invalid_output_by_kind": {k.split(":", 1)[1]: n for k, n in sorted(counts.items())
                                   if k.startswith("invalid:")},
        "ungrounded_clusters": counts["ungrounded_clusters"],
        "judge_calls": counts["judge_calls"],
    }


def read_scored(path: Path, bench: Benchmark, protocol: Any = None) -> list[ScoredRecord]:
    """Read and check ``scored.jsonl``: schema, query ids known to the benchmark, facts match.

    ``protocol``: a :class:`fks.provenance.ProtocolCheck` called on every row (one prompt
    version and decoding protocol per run); None: the rows are checked against each other.

    Raises:
        FksInputError: naming the file, line and field of the first bad row.
    """
    queries = {q.query_id: q for q in bench.queries}
    seen: dict[tuple[str, str], int] = {}
    records: list[ScoredRecord] = []
    if protocol is None:
        from fks.provenance import ProtocolCheck

        protocol = ProtocolCheck(path)
    for line, rec in iter_jsonl(path, ScoredRecord):
        assert isinstance(rec, ScoredRecord)
        protocol(line, rec)
        q = queries.get(rec.query_id)
        if q is None:
            raise FksInputError(f"query {rec.query_id!r} is not in the benchmark "
                                f"({bench.root})", path=path, line=line, field="query_id")
        if q.fact_id != rec.fact_id:
            raise FksInputError(f"expected fact {q.fact_id!r} for {rec.query_id}; found "
                                f"{rec.fact_id!r}", path=path, line=line, field="fact_id")
        first = seen.setdefault((rec.model, rec.query_id), line)
        if first != line:
            raise FksInputError(f"duplicate query {rec.query_id!r} (first on line {first})",
                                path=path, line=line, field="query_id")
        records.append(rec)
    if not records:
        raise FksInputError("no scored records", path=path)
    return records


@locks_run_dir("run_dir")
def judge_run(run_dir: str | Path, benchmark: str | Path | Benchmark, judge: Judge, *,
              shard: tuple[int, int] | None = None) -> dict[str, Any]:
    """Judge ``RUN/scored.jsonl`` into ``RUN/judged.jsonl`` and record ``stages.judge``.

    Args:
        run_dir: the run directory.
        benchmark: the benchmark (directory, ``hf[:repo]`` or loaded).
        judge: the judge (:func:`fks.judge.make_judge`).
        shard: ``(i, n)``: judge only shard ``i``'s facts, into ``RUN/shards/shard_i_of_n/``.

    Returns:
        the ``stages.judge`` manifest entry (judge identity, counts, checksums).
    """
    try:
        with _fewer_collections():
            return _judge_run(Path(run_dir), benchmark, judge, shard)
    finally:
        clear_caches()


def _judge_run(run_dir: Path, benchmark: str | Path | Benchmark, judge: Judge,
               shard: tuple[int, int] | None) -> dict[str, Any]:
    from fks.provenance import (
        ProtocolCheck,
        check_benchmark,
        check_inputs,
        file_sha256,
        record_files,
    )

    bench = benchmark if isinstance(benchmark, Benchmark) else load_benchmark(benchmark)
    scored = run_dir / "scored.jsonl"
    inputs = check_inputs(run_dir, "judge", [scored.name])
    check_benchmark(run_dir, bench.checksum(), bench.root)
    records = read_scored(scored, bench, ProtocolCheck.for_run(run_dir, scored))
    target = run_dir
    if shard is not None:
        from fks.generate.runner import benchmark_shards, shard_dir

        owner = benchmark_shards(bench, shard[1])
        records = [r for r in records if owner[r.fact_id] == shard[0]]
        target = shard_dir(run_dir, shard)
        target.mkdir(parents=True, exist_ok=True)
    rows, counts = judge_records(records, bench, judge)
    out = target / "judged.jsonl"
    atomic_write_jsonl(out, rows)
    desc = judge.describe()
    info = {
        "judge": desc,
        "name": judge.name,
        "revision": desc.get("revision"),
        "temperature": desc.get("temperature"),
        "counts": counts,
        "output": out.name,
        "sha256": file_sha256(out),
        "input": {"file": scored.name, "sha256": inputs[scored.name]},
        "benchmark": {"root": str(bench.root), "checksum": bench.checksum()},
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if shard is not None:
        info["shard"] = list(shard)
    update_run_manifest(target, stage="judge", stage_info=info)
    # a shard's own folder records only its output (the merge records the run's chain)
    record_files(target, "judge", inputs if shard is None else {}, [out])
    log.info("judged %d records (%d review required) -> %s", counts["records"],
             counts["review_required"], out)
    return info
