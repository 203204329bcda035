"""Choose the SECOND fresh test set for judge validation (issue 26, release 4); reads benchmarks only.

Usage: python choose_facts2.py [OUT_JSON] [RANK]
(defaults /work/real/fresh2/choice.json and 3; stop 33 also wrote the third set, ``../fresh3``,
with ``/work/real/fresh3/choice.json 4``: rank 4 of every relation, for release 5, and the
fourth, ``../fresh4``, with ``/work/real/fresh4/choice.json 5``, and the fifth, ``../fresh5``,
with ``/work/real/fresh5/choice.json 6``; stop 34 wrote the sixth, ``../fresh6``, with
``/work/real/fresh6/choice.json 7``; stop 35 the seventh, ``../fresh7``, with
``/work/real/fresh7/choice.json 8``, and the eighth, ``../fresh8``, with
``/work/real/fresh8/choice.json 9,10``: ranks 9 and 10, 44 facts, so that the BCS gap is
measured over twice as many facts; stop 36 the ninth, ``../fresh9``, with
``/work/real/fresh9/choice.json 11,12``, and the tenth, ``../fresh10``, with
``/work/real/fresh10/choice.json 13,14``, and the eleventh, ``../fresh11``, with
``/work/real/fresh11/choice.json 15,16``, the first labelled under the guide's §8; stop 37
the twelfth, ``../fresh12``, with ``/work/real/fresh12/choice.json 17,18``, and the
thirteenth, ``../fresh13``, with ``/work/real/fresh13/choice.json 19,20``, and the
fourteenth, ``../fresh14``, with ``/work/real/fresh14/choice.json 21,22``, and the fifteenth,
``../fresh15``, with ``/work/real/fresh15/choice.json 23,24,25,26``: 88 facts, one read;
stop 38 ``../fresh16`` to ``../fresh18``, ranks 27-30, 31-34 and 35-38; stop 39 the nineteenth,
``../fresh19``, with ``/work/real/fresh19/choice.json 39,40,41,42``, and the twentieth,
``../fresh20``, with ``/work/real/fresh20/choice.json 43,44,45,46``, both labelled under the
guide's §9)

The first fresh set (`../fresh/choice.json`) took rank 1 (test) and rank 2 (dev) of every relation
under the ranking and exclusions of `../fresh/choose_facts.py`. Its test split has been read for
three releases of the reader rules, so from release 4 on it is tuning data, and this set is the
new test split: rank 3 of every relation under exactly the same exclusions and ranking (the
functions of `../fresh/choose_facts.py` are imported, not copied). It has no dev split; the dev
data of release 4 is everything labelled before it (`../labels.jsonl` and both `../fresh` splits).
Checked here: no chosen fact is a fact of `../fresh/choice.json`.
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fresh"))
import choose_facts as cf  # noqa: E402

from fks.data.load import load_benchmark  # noqa: E402

HERE = Path(__file__).resolve().parent
FIRST = HERE.parent / "fresh" / "choice.json"
#: the later sets' choices by the highest rank each one took (their facts are excluded when a
#: set of higher ranks is chosen; the second set's choice lies next to this script)
LATER: dict[int, Path] = {3: HERE / "choice.json", **{
    r: HERE.parent / name / "choice.json" for r, name in (
        (4, "fresh3"), (5, "fresh4"), (6, "fresh5"), (7, "fresh6"), (8, "fresh7"),
        (10, "fresh8"), (12, "fresh9"), (14, "fresh10"), (16, "fresh11"), (18, "fresh12"),
        (20, "fresh13"), (22, "fresh14"), (26, "fresh15"), (30, "fresh16"), (34, "fresh17"),
        (38, "fresh18"), (42, "fresh19"), (46, "fresh20"), (50, "fresh21"))}}


def choose(rank: int = 3, ranks: tuple[int, ...] = ()):
    """``rank`` of every relation; with ``ranks`` (stop 35: ``9,10``), each of those ranks."""
    bench = load_benchmark(cf.CURRENT)
    order = {f.fact_id: i for i, f in enumerate(bench.facts)}
    by_rel: dict[str, list] = collections.defaultdict(list)
    for f in bench.facts:
        by_rel[f.relation.relation_id].append(f)
    e1 = {f.fact_id for fs in by_rel.values() for f in fs[:3]}
    e2 = cf.limit_ids(bench, 300)
    trip, info = cf.old_triples()
    e3 = {f.fact_id for f in bench.facts if cf.triple(f) in trip}
    excluded = e1 | e2 | e3
    fams, langs = collections.defaultdict(set), collections.defaultdict(set)
    for q in bench.queries:
        if q.use_for_main_forward:
            fams[q.fact_id].add(q.condition_family)
            langs[q.fact_id].add(q.language)

    def key(f):
        return (not set(cf.MAIN_FAMILIES) <= fams[f.fact_id], -len(langs[f.fact_id]),
                order[f.fact_id])

    first = json.loads(FIRST.read_text(encoding="utf-8"))
    used = set(first["test"]) | set(first["dev"])
    for r, path in LATER.items():  # the later sets' facts too
        if rank > r:
            used |= set(json.loads(path.read_text(encoding="utf-8"))["test"])
    test, detail = [], []
    for rel, fs in by_rel.items():
        ranked = sorted((f for f in fs if f.fact_id not in excluded), key=key)
        # the same ranking as the earlier sets: their facts are the ranks above this one
        assert {f.fact_id for f in ranked[:min(ranks or (rank,)) - 1]} <= used, rel
        for r in ranks or (rank,):
            f = ranked[r - 1]
            assert f.fact_id not in used
            test.append(f.fact_id)
            detail.append({"split": "test", "fact_id": f.fact_id, "relation": rel, "rank": r,
                           "subject": f.subject.canonical, "object": f.object.canonical,
                           "families": sorted(fams[f.fact_id]),
                           "languages": sorted(langs[f.fact_id]),
                           "rank_in_relation": order[f.fact_id] - order[fs[0].fact_id]})
    stats = {"relations": len(by_rel), "excluded_total": len(excluded), **info}
    return test, detail, stats


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/real/fresh2/choice.json")
    arg = sys.argv[2] if len(sys.argv) > 2 else "3"
    ranks = tuple(int(x) for x in arg.split(","))
    rank = ranks[0]
    test, detail, stats = choose(rank, ranks if len(ranks) > 1 else ())
    out.parent.mkdir(parents=True, exist_ok=True)
    rule = (f"rank {arg} of every relation under the exclusions and ranking of "
            "../fresh/choose_facts.py (ranks 1 and 2 are the first fresh set's test and dev "
            "facts, ranks 3 to 14 the second to tenth sets')")
    out.write_text(json.dumps({"test": test, "dev": [], "rule": rule, "current_build": cf.CURRENT,
                               "stats": stats, "facts": detail}, ensure_ascii=False, indent=1)
                   + "\n", encoding="utf-8")
    for d in detail:
        print(d["fact_id"], d["relation"], len(d["families"]), ",".join(d["languages"]))
    print(json.dumps(stats))
