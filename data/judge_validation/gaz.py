"""Reading aid for the labeller: an entity label in any of six languages -> Wikidata id.

Looks the label up in the
mParaRel tuples and print its Wikidata id and English label. Not a judge; never run on answers
automatically. Usage: python gaz.py "Кабул" "Alemania" ...
"""

import json
import sys
from pathlib import Path

ROOT = Path("/work/shared/data/mpararel/data/mpararel_reviewed/tuples")
CACHE = Path("/tmp/fks_gaz_i20.json")


def build():
    """Index every mParaRel tuple label (casefolded) to its Wikidata ids, and ids to English."""
    by_label, en = {}, {}
    for lang_dir in sorted(ROOT.iterdir()):
        for f in lang_dir.glob("P*.jsonl"):
            for line in f.open(encoding="utf-8"):
                r = json.loads(line)
                for uri, lab in ((r["sub_uri"], r["sub_label"]), (r["obj_uri"], r["obj_label"])):
                    by_label.setdefault(lab.casefold(), set()).add(uri)
                    if lang_dir.name == "en":
                        en[uri] = lab
    return {"by_label": {k: sorted(v) for k, v in by_label.items()}, "en": en}


if CACHE.exists():
    G = json.loads(CACHE.read_text())
else:
    G = build()
    CACHE.write_text(json.dumps(G, ensure_ascii=False))

for term in sys.argv[1:]:
    uris = G["by_label"].get(term.casefold(), [])
    print(term, "->", [(u, G["en"].get(u)) for u in uris] or "not found")
