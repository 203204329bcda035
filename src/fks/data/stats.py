"""Dataset statistics of a benchmark (``dataset_statistics.json``, ``fks data summary``).

Everything is derived from the rows themselves: a family's role comes from its queries' own
booleans (``use_for_main_forward`` / ``_reverse_analysis`` / ``_recognition_analysis``), and the
main families used for the complete-family count are the families whose queries are flagged
main-forward -- no family list is hard-coded (README caveat 3).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from rich.table import Table

from fks.configs import FAMILIES
from fks.data.load import Benchmark
from fks.data.schema import LANGUAGES, Query
from fks.log import console
from fks.text import find_alias, has_cjk, normalize

__all__ = ["dataset_statistics", "render_statistics", "query_role"]

#: Name of the role of a query flagged for none of the three analyses.
NO_ROLE = "diagnostic"


def query_role(q: Query) -> str:
    """Return the role a query's booleans give it: main, reverse, recognition or diagnostic."""
    if q.use_for_main_forward:
        return "main"
    if q.use_for_reverse_analysis:
        return "reverse"
    if q.use_for_recognition_analysis:
        return "recognition"
    return NO_ROLE


def _ordered(keys: set[str], canonical: tuple[str, ...]) -> list[str]:
    """Keys in canonical order first, unknown keys after them, sorted."""
    return [k for k in canonical if k in keys] + sorted(keys - set(canonical))


def _share(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


#: A spaced-script gold alias this long counts as contained in a query as a plain substring;
#: a shorter one only as a whole word (the F1 rule's substring threshold).
_CONTAINS_MIN = 4


def query_contains_gold(q: Query) -> bool:
    """Return True when the query's own text contains one of its gold aliases.

    The check behind ``copy_answerable.unflagged_main_queries_with_gold``: normalised text, a
    plain substring for CJK aliases and aliases of at least four characters, a whole word for
    shorter ones. It looks at the whole query, template included, so it also counts template
    coincidences (German ``befindet`` holds the French alias ``Inde``) that are not copies.
    """
    text = normalize(q.query)
    for alias in dict.fromkeys([q.gold_canonical, *q.gold_aliases]):
        a = normalize(alias)
        if not a:
            continue
        if has_cjk(a) or len(a) >= _CONTAINS_MIN:
            if a in text:
                return True
        elif find_alias(text, a, normalized=True):
            return True
    return False


def dataset_statistics(benchmark: Benchmark) -> dict[str, Any]:
    """Count per family, relation and language; coverage, copy share and flag totals.

    Returns a JSON-able dict (keys are sorted when written):

    * ``families[f]``: ``queries``, ``facts`` (distinct facts with such a query), ``role``
      (from the rows' booleans; ``mixed`` if rows disagree);
    * ``coverage``: the main families (rows flagged main-forward), facts per family,
      ``complete_family_facts`` (facts with every main family), ``full_set_facts`` (facts with
      at least one main-family query);
    * ``relations[r]`` / ``languages[l]``: facts and queries;
    * ``copy_answerable``: facts and queries with ``answer_in_subject_surface`` (F1), and
      ``unflagged_main_queries_with_gold`` -- main-forward queries not flagged whose own text
      still contains their gold (:func:`query_contains_gold`), with their share of the main
      queries; per relation ``copy_answerable_facts`` and ``copy_share``;
    * ``spec_6_2``: flagged facts and their relations (C1);
    * ``flags``: query counts per boolean, and ``none`` for rows with no analysis flag.
    """
    facts, queries = benchmark.facts, benchmark.queries
    fam_queries: Counter[str] = Counter()
    fam_facts: dict[str, set[str]] = defaultdict(set)
    fam_roles: dict[str, set[str]] = defaultdict(set)
    lang_queries: Counter[str] = Counter()
    lang_facts: dict[str, set[str]] = defaultdict(set)
    rel_queries: Counter[str] = Counter()
    flags: Counter[str] = Counter()
    copy_queries = 0
    unflagged_with_gold = 0
    for q in queries:
        fam_queries[q.condition_family] += 1
        fam_facts[q.condition_family].add(q.fact_id)
        role = query_role(q)
        fam_roles[q.condition_family].add(role)
        lang_queries[q.language] += 1
        lang_facts[q.language].add(q.fact_id)
        rel_queries[q.relation] += 1
        flags[{"main": "use_for_main_forward", "reverse": "use_for_reverse_analysis",
               "recognition": "use_for_recognition_analysis"}.get(role, "none")] += 1
        copy_queries += q.answer_in_subject_surface
        if role == "main" and not q.answer_in_subject_surface and query_contains_gold(q):
            unflagged_with_gold += 1

    families = _ordered(set(fam_queries), FAMILIES)
    main = [f for f in families if "main" in fam_roles[f]]
    fact_ids = [f.fact_id for f in facts]
    complete = sum(all(fid in fam_facts[f] for f in main) for fid in fact_ids)
    full_set = sum(any(fid in fam_facts[f] for f in main) for fid in fact_ids)

    rel_facts: Counter[str] = Counter(f.relation.relation_id for f in facts)
    rel_copy: Counter[str] = Counter(f.relation.relation_id for f in facts
                                     if f.answer_in_subject_surface)
    rel_62: Counter[str] = Counter(f.relation.relation_id for f in facts if f.spec_6_2_flag)
    n_copy = sum(rel_copy.values())
    n = len(facts)
    return {
        "n_facts": n,
        "n_queries": len(queries),
        "n_relations": len(rel_facts),
        "families": {
            f: {"queries": fam_queries[f], "facts": len(fam_facts[f]),
                "role": next(iter(fam_roles[f])) if len(fam_roles[f]) == 1 else "mixed"}
            for f in families
        },
        "coverage": {
            "main_families": main,
            "facts_per_family": {f: len(fam_facts[f]) for f in families},
            "complete_family_facts": complete,
            "full_set_facts": full_set,
        },
        "relations": {
            r: {"facts": rel_facts[r], "queries": rel_queries[r],
                "copy_answerable_facts": rel_copy[r], "copy_share": _share(rel_copy[r],
                                                                           rel_facts[r]),
                "spec_6_2_facts": rel_62[r]}
            for r in sorted(set(rel_facts) | set(rel_queries))
        },
        "languages": {
            lang: {"queries": lang_queries[lang], "facts": len(lang_facts[lang])}
            for lang in _ordered(set(lang_queries), LANGUAGES)
        },
        "copy_answerable": {"facts": n_copy, "share": _share(n_copy, n),
                            "queries": copy_queries,
                            "unflagged_main_queries_with_gold": unflagged_with_gold,
                            "unflagged_main_queries_with_gold_share": round(
                                unflagged_with_gold / flags["use_for_main_forward"], 5)
                            if flags["use_for_main_forward"] else 0.0},
        "spec_6_2": {"facts": sum(rel_62.values()), "relations": sorted(rel_62)},
        "flags": {k: flags[k] for k in ("use_for_main_forward", "use_for_reverse_analysis",
                                        "use_for_recognition_analysis", "none")},
    }


def _int(n: int) -> str:
    return f"{n:,}"


def render_statistics(stats: dict[str, Any]) -> None:
    """Print the family, relation and language tables (and build drops, if any) to the console."""
    fam = Table(title=f"{_int(stats['n_facts'])} facts x {_int(stats['n_queries'])} queries "
                      f"({stats['n_relations']} relations)")
    for col in ("family", "queries", "facts", "role"):
        fam.add_column(col, justify="left" if col in ("family", "role") else "right")
    for name in _ordered(set(stats["families"]), FAMILIES):
        row = stats["families"][name]
        fam.add_row(name, _int(row["queries"]), _int(row["facts"]), row["role"])
    console.print(fam)

    cov, copy, flags = stats["coverage"], stats["copy_answerable"], stats["flags"]
    console.print(
        f"complete-family facts ({' + '.join(cov['main_families'])}): "
        f"{_int(cov['complete_family_facts'])}; full-set facts: {_int(cov['full_set_facts'])}\n"
        f"copy-answerable (answer_in_subject_surface): {_int(copy['facts'])} facts "
        f"({copy['share']:.1%}), {_int(copy['queries'])} queries; unflagged main queries "
        f"containing their gold: {_int(copy.get('unflagged_main_queries_with_gold', 0))}; "
        f"spec 6.2 flagged: {_int(stats['spec_6_2']['facts'])} facts\n"
        f"main forward {_int(flags['use_for_main_forward'])} / reverse "
        f"{_int(flags['use_for_reverse_analysis'])} / recognition "
        f"{_int(flags['use_for_recognition_analysis'])} / none {_int(flags['none'])} queries",
        highlight=False,
    )

    rel = Table(title="relations")
    for col in ("relation", "facts", "queries", "copy", "copy share", "spec 6.2"):
        rel.add_column(col, justify="left" if col == "relation" else "right")
    for name, row in sorted(stats["relations"].items()):
        rel.add_row(name, _int(row["facts"]), _int(row["queries"]),
                    _int(row["copy_answerable_facts"]), f"{row.get('copy_share', 0.0):.1%}",
                    _int(row["spec_6_2_facts"]))
    console.print(rel)

    lang = Table(title="languages")
    for col in ("language", "queries", "facts"):
        lang.add_column(col, justify="left" if col == "language" else "right")
    for name in _ordered(set(stats["languages"]), LANGUAGES):
        row = stats["languages"][name]
        lang.add_row(name, _int(row["queries"]), _int(row["facts"]))
    console.print(lang)

    build = stats.get("build")
    if build:
        dropped = ", ".join(f"{k} {v:,}" for k, v in build["dropped"].items() if v)
        guard = sum(build["context_guard_dropped"].values())
        console.print(f"build: {_int(build['candidates'])} candidates, "
                      f"{_int(build['selected'])} selected; dropped: {dropped or 'nothing'}; "
                      f"D1 guard dropped {guard} context candidates", highlight=False)
        degenerate = build.get("degenerate_objects_dropped") or {}
        if degenerate:
            console.print("degenerate objects dropped: " + "; ".join(
                f"{rid} " + ", ".join(f"{k} {v}" for k, v in reasons.items())
                for rid, reasons in sorted(degenerate.items())), highlight=False)
