"""The packaged gazetteer: every answer entity of mParaRel with its labels in six languages.

Why: a wrong answer outside the relation's lexicon (``Denmark`` where no fact of that relation
has Denmark as its object) would otherwise stay a string cluster, and the same wrong entity in
another language (``Dänemark``) would be a second cluster. The gazetteer gives it one
``ENTITY_<Qid>`` cluster in every language.

How it ships (decision): a compact packaged resource, ``fks/judge/gazetteer.tsv.gz`` (one
line per entity: ``Qid<TAB>label<TAB>label...``; about 2,800 entities, 76 KB), built once by
``python -m fks.judge._gazetteer SRC OUT`` from ``mpararel_reviewed/tuples/{lang}/P*.jsonl``
(the ``obj_uri``/``obj_label`` of every tuple of every relation and language: the entities
that are answers somewhere), plus the subjects of two or more relations (countries and other
hubs such as the United States, which mParaRel never has as an object; the other 29,000
subjects, rarely answers, are left out).
Only named entities are kept (English label capitalised; class items such as ``capital``,
``tea`` are everyday words), and only labels of three or more characters (two for CJK).
Labels are Wikidata's (CC0), via mParaRel (Fierro & Søgaard, 2022). Read at run time from
the installed package: no network, no source data needed. The benchmark's own entities (all
relations, subjects and objects) are added on top at judge time (:func:`fks.judge.build_lexicons`).
"""

from __future__ import annotations

import gzip
import json
import sys
from functools import lru_cache
from importlib import resources
from pathlib import Path

__all__ = ["load_gazetteer", "build_gazetteer"]

RESOURCE = "gazetteer.tsv.gz"


@lru_cache(maxsize=1)
def load_gazetteer() -> dict[str, tuple[str, ...]]:
    """``{Qid: labels}`` of the packaged gazetteer (first label: the English one, if any)."""
    data = resources.files("fks.judge").joinpath(RESOURCE).read_bytes()
    out: dict[str, tuple[str, ...]] = {}
    for line in gzip.decompress(data).decode("utf-8").splitlines():
        qid, *labels = line.split("\t")
        if qid and labels:
            out[qid] = tuple(labels)
    return out


def _proper(label: str) -> bool:
    """Tell whether an English label names an entity: it opens with a capital or a digit.

    Common nouns such as ``capital`` or ``tea`` (class items) are left out: their labels are
    everyday words, and ``thé`` normalises to ``the``.
    """
    return label[:1].isupper() or label[:1].isdigit()


def _usable(label: str) -> bool:
    """Tell whether a label is long enough to name something (3+ characters; 2 for CJK)."""
    return len(label.strip()) >= 3 or (len(label.strip()) == 2 and not label.isascii())


def build_gazetteer(tuples_root: str | Path, out: str | Path) -> int:
    """Build the resource from mParaRel's tuples folder; returns the number of entities."""
    root = Path(tuples_root)
    labels: dict[str, dict[str, str]] = {}
    subject_labels: dict[str, dict[str, str]] = {}
    subject_relations: dict[str, set[str]] = {}
    for lang_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for f in sorted(lang_dir.glob("P*.jsonl")):
            for line in f.open(encoding="utf-8"):
                row = json.loads(line)
                labels.setdefault(row["obj_uri"], {}).setdefault(lang_dir.name, row["obj_label"])
                subject_labels.setdefault(row["sub_uri"], {}).setdefault(lang_dir.name,
                                                                         row["sub_label"])
                subject_relations.setdefault(row["sub_uri"], set()).add(f.stem)
    for qid, rels in subject_relations.items():
        if len(rels) >= 2:  # countries and other hubs: subjects of several relations
            for lang, label in subject_labels[qid].items():
                labels.setdefault(qid, {}).setdefault(lang, label)
    lines = []
    for qid in sorted(labels):
        by_lang = labels[qid]
        first = [by_lang["en"]] if "en" in by_lang else []
        if not first or not _proper(first[0]):
            continue
        rest = sorted(set(by_lang.values()) - set(first))
        kept = [x for x in [*first, *rest] if _usable(x)]
        if kept:
            lines.append("\t".join([qid, *kept]))
    Path(out).write_bytes(gzip.compress(("\n".join(lines) + "\n").encode("utf-8"), mtime=0))
    return len(lines)


if __name__ == "__main__":  # pragma: no cover - a maintainer's build step
    from fks.log import console

    console.print(f"{build_gazetteer(sys.argv[1], sys.argv[2])} entities")
