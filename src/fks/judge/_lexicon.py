r"""Known entities of a relation, and resolving an answer span to one of them.

A lexicon holds the entities that fill one slot of one relation across the whole benchmark
(every fact's object for forward queries, every fact's subject for reverse ones), with all
their aliases in every language. It is reference-blind: the gold entity of a fact is in it,
unmarked, among all the others.

Matching follows :func:`fks.text.find_alias` exactly -- after :func:`fks.text.normalize`, an
alias in a spaced script must sit on word boundaries (not preceded or followed by a letter,
digit or underscore, i.e. regex ``\w``), an alias in a CJK script matches as a substring --
but finds *every* occurrence of *every* alias in one scan over the span (an index by first
character and length), which is what resolving 44,000 answers against a thousand aliases each
needs. ``tests/judge/test_lexicon.py`` checks the equivalence with ``find_alias``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

from fks.text import has_cjk, normalize

if TYPE_CHECKING:
    from fks.data.load import Benchmark

__all__ = [
    "EntityLexicon",
    "Resolution",
    "answer_span",
    "semantic_key",
    "entity_key",
    "build_lexicons",
    "build_gazetteer",
    "religion_key",
    "religion_words",
]

_EDGE_PUNCT = re.compile(r"^[\W_]+|[\W_]+$")
#: results kept per lexicon (:meth:`EntityLexicon.find_all`, :meth:`EntityLexicon.resolve`)
_CACHE_MAX = 1_000_000


_SENTENCE_END = re.compile(r"[。！？]|[.!?](?=\s|$)")
_ASCII_WS = re.compile(r"[\s_]+")  # fks.text's whitespace rule (an underscore is a space)


@lru_cache(maxsize=1 << 18)
def normalize_cached(text: str) -> str:
    """Return :func:`fks.text.normalize` of ``text``, memoised.

    A pure function; the judge normalises the same answer, sentence and alias many times.
    ASCII text takes a shortcut with the same result: NFKC and NFD leave ASCII unchanged,
    it has no combining marks, and its casefold is its lower case.
    """
    if text.isascii():
        return _ASCII_WS.sub(" ", text.lower()).strip()
    return normalize(text)


def semantic_key(text: str) -> str:
    """Normalised text without leading/trailing punctuation: the string-cluster key.

    >>> semantic_key("  Lyon. ")
    'lyon'
    >>> semantic_key("«Zürich»")
    'zurich'
    """
    return _EDGE_PUNCT.sub("", normalize_cached(text))


def entity_key(entity_id: str | None, canonical: str) -> str:
    """Cluster id of an entity: ``ENTITY_<Qid>``, or ``SEMANTIC_<key>`` when it has no Qid."""
    return f"ENTITY_{entity_id}" if entity_id else f"SEMANTIC_{semantic_key(canonical)}"


def answer_span(raw_response: str, extracted_answer: str | None) -> str:
    r"""Return the core answer span: the scorer's extraction, else the response's first segment.

    The first segment is the first non-blank line, cut at the first sentence end (a CJK
    full stop/exclamation/question mark, or ``.``/``!``/``?`` followed by a space or the end).
    A known limitation of this fallback: an abbreviation such as ``St. Louis`` is cut at
    ``St``; the scorer's extraction, used first, does not have that problem.

    >>> answer_span("Paris. It is in France.\nMore", None)
    'Paris'
    >>> answer_span("anything", " Lyon ")
    'Lyon'
    """
    if extracted_answer is not None and extracted_answer.strip():
        return extracted_answer.strip()
    for line in raw_response.splitlines():
        if line.strip():
            first = line.strip()
            m = _SENTENCE_END.search(first)
            return (first[: m.start()] if m else first).strip()
    return ""


@dataclass(frozen=True)
class Resolution:
    """How a span resolves against a lexicon.

    ``kind``: ``entity`` (one entity, ``key``), ``ambiguous_alias`` (the matched alias names
    several entities; ``text`` is the alias), ``conflict`` (aliases of different entities, i.e.
    several answers), or ``none``.
    """

    kind: Literal["entity", "ambiguous_alias", "conflict", "none"]
    key: str | None = None
    text: str | None = None
    keys: frozenset[str] = frozenset()


class EntityLexicon:
    """Entities of one relation slot, indexed for longest-match resolution.

    Args:
        entities: ``{cluster_key: (canonical label, aliases)}``; aliases in any language.

    >>> lex = EntityLexicon({"ENTITY_Q90": ("Paris", ["Paris", "巴黎"]),
    ...                      "ENTITY_Q64": ("Berlin", ["Berlin"])})
    >>> lex.resolve("The answer is 巴黎").key
    'ENTITY_Q90'
    >>> lex.resolve("Paris or Berlin").kind
    'conflict'
    """

    def __init__(self, entities: Mapping[str, tuple[str, Iterable[str]]]) -> None:
        self._canonical: dict[str, str] = {}
        self._aliases: dict[str, tuple[str, ...]] = {}
        keys_by_alias: dict[str, set[str]] = defaultdict(set)
        for key, (canonical, aliases) in entities.items():
            self._canonical[key] = canonical
            norm = [normalize(a) for a in dict.fromkeys([canonical, *aliases])]
            # an abbreviation's final period ("Apple Inc.") is also written without it, as a
            # line that a cue-stripper has cut ("Apple Inc") or at a sentence end
            norm += [a[:-1].rstrip() for a in norm if a.endswith(".") and len(a) > 2]
            self._aliases[key] = tuple(a for a in dict.fromkeys(norm) if a)
            for a in self._aliases[key]:
                keys_by_alias[a].add(key)
        self._keys = {a: frozenset(k) for a, k in keys_by_alias.items()}
        #: aliases some entity spells with a lower-case initial (``physician``, ``iPhone``)
        self._lower_ok = frozenset(
            normalize(a) for _, (canonical, aliases) in entities.items()
            for a in [canonical, *aliases] if a[:1].islower())
        self._cjk = frozenset(a for a in self._keys if has_cjk(a))
        self._spaced = frozenset(self._keys) - self._cjk
        self._cjk_first = self._first_char_index(self._cjk)
        self._spaced_first = self._first_char_index(self._spaced)
        self._cache: dict[str, Resolution] = {}
        self._found: dict[str, tuple[tuple[int, int, str], ...]] = {}

    @staticmethod
    def _first_char_index(aliases: Iterable[str]) -> dict[str, tuple[int, ...]]:
        lengths: dict[str, set[int]] = defaultdict(set)
        for a in aliases:
            lengths[a[0]].add(len(a))
        return {ch: tuple(sorted(ls)) for ch, ls in lengths.items()}

    def __len__(self) -> int:
        return len(self._canonical)

    def __contains__(self, key: object) -> bool:
        return key in self._canonical

    def canonical(self, key: str) -> str:
        """Return the canonical label of entity ``key``."""
        return self._canonical[key]

    @property
    def common_nouns(self) -> bool:
        """Whether most entities are named in lower case (``midfielder``, ``goaltender``)."""
        names = list(self._canonical.values())
        return bool(names) and 2 * sum(n[:1].islower() for n in names) > len(names)

    def aliases(self, key: str) -> tuple[str, ...]:
        """Return the normalised aliases of entity ``key`` (canonical first)."""
        return self._aliases[key]

    def find_all(self, text: str, *, normalized: bool = False) -> list[tuple[int, int, str]]:
        """Every ``(start, end, alias)`` occurrence of a known alias in ``text``.

        Positions refer to the normalised text; the boundary rules are those of
        :func:`fks.text.find_alias`. Results are memoised per normalised text (the reader
        scans one sentence several times, and answers repeat across facts).
        """
        t = text if normalized else normalize_cached(text)
        hit = self._found.get(t)
        if hit is None:
            hit = self._scan(t)
            if len(self._found) < _CACHE_MAX:
                self._found[t] = hit
        return list(hit)

    def _scan(self, t: str) -> tuple[tuple[int, int, str], ...]:
        n = len(t)
        found: list[tuple[int, int, str]] = []
        cjk_first, cjk = self._cjk_first, self._cjk
        spaced_first, spaced = self._spaced_first, self._spaced
        # word[i]: t[i] is regex \w; an alias in a spaced script starts after a non-word
        # character (or at 0) and ends before one (or at the end)
        word = [ch.isalnum() or ch == "_" for ch in t]
        word.append(False)
        for i, ch in enumerate(t):
            lengths = cjk_first.get(ch)
            if lengths:
                for length in lengths:
                    if i + length <= n and (s := t[i : i + length]) in cjk:
                        found.append((i, i + length, s))
            lengths = spaced_first.get(ch)
            if lengths and (i == 0 or not word[i - 1]):
                for length in lengths:
                    j = i + length
                    if j > n:
                        break
                    if not word[j] and (s := t[i:j]) in spaced:
                        found.append((i, j, s))
        return tuple(found)

    def needs_capital(self, alias: str) -> bool:
        """Tell whether every spelling of a normalised alias opens with a capital (a name)."""
        return alias not in self._lower_ok and alias[:1].isalpha() and not has_cjk(alias[:1])

    def keys_of(self, alias: str) -> frozenset[str]:
        """Return the entities a normalised alias names."""
        return self._keys.get(alias, frozenset())

    def alias_in(self, text: str, key: str) -> str | None:
        """Return the longest alias of entity ``key`` found in ``text`` (normalised), or None."""
        hits = [a for _, _, a in self.find_all(text) if key in self._keys[a]]
        return max(hits, key=len) if hits else None

    def resolve(self, text: str) -> Resolution:
        """Resolve a span: longest non-overlapping alias matches, then their entities.

        Longer matches win over shorter ones they overlap (``New York City`` over ``York``).
        The kept matches resolve to one entity when their entity sets share exactly one
        entity; to ``ambiguous_alias`` when they share several (one alias naming several
        entities); to ``conflict`` when they share none (two different answers).
        """
        norm = normalize_cached(text)
        hit = self._cache.get(norm)
        if hit is None:
            hit = self._resolve(norm)
            if len(self._cache) < _CACHE_MAX:
                self._cache[norm] = hit
        return hit

    def _resolve(self, norm: str) -> Resolution:
        matches = sorted(self.find_all(norm, normalized=True), key=lambda m: (m[0] - m[1], m[0]))
        kept: list[tuple[int, int, str]] = []
        for m in matches:
            if all(m[1] <= k[0] or m[0] >= k[1] for k in kept):
                kept.append(m)
        if not kept:
            return Resolution("none")
        common = frozenset.intersection(*(self._keys[m[2]] for m in kept))
        if len(common) == 1:
            return Resolution("entity", key=next(iter(common)), keys=common)
        if common:
            first = min(kept)[2]
            return Resolution("ambiguous_alias", text=first, keys=common)
        return Resolution("conflict", keys=frozenset().union(*(self._keys[m[2]] for m in kept)))


def build_gazetteer(benchmark: Benchmark | None = None, *, packaged: bool = True
                    ) -> EntityLexicon:
    """Build one lexicon of every entity fks knows (the judge's gazetteer).

    The benchmark's entities (all relations, subjects and objects, every alias) and, with
    ``packaged``, the packaged mParaRel gazetteer (:mod:`fks.judge._gazetteer`); labels of one
    Qid are merged.
    """
    from fks.judge._gazetteer import load_gazetteer

    table: dict[str, tuple[str, list[str]]] = {}
    if packaged:
        for qid, labels in load_gazetteer().items():
            table[f"ENTITY_{qid}"] = (labels[0], list(labels))
    for fact in benchmark.facts if benchmark is not None else ():
        for ent in (fact.object, fact.subject):
            key = entity_key(ent.entity_id, ent.canonical)
            canonical, aliases = table.get(key, (ent.canonical, []))
            table[key] = (canonical, [*aliases, ent.canonical, *ent.aliases])
    _add_short_names(table)
    return EntityLexicon(table)


def _add_short_names(table: dict[str, tuple[str, list[str]]]) -> None:
    """J28 in the reader (release 13): a formal name's part before ``of`` names the entity.

    ``United States`` is how answers name ``United States of America``, the entity they name
    most (Wikidata's label is the formal name, and mParaRel ships no aliases). Two words or
    more before the first `` of ``, opening with a capital (one word, ``Republic`` of
    ``Republic of Ireland``, is a class noun; ``15th arrondissement`` of ``15th arrondissement
    of Paris`` is a numbered class), and only where no other entity has that name; the cut is
    added to the entity's own names in place. :func:`fks.judge._alias.join_variants` did the
    same after reading, for string answers only: a reader that knows the name also reads it
    inside a longer filler (``in the United States in 1920``).
    """
    taken = {normalize(a) for _, aliases in table.values() for a in aliases}
    short: dict[str, list[str]] = defaultdict(list)
    for key, (canonical, _) in table.items():
        head = canonical.split(" of ", 1)[0] if " of " in canonical else ""
        if len(head.split()) >= 2 and head[:1].isupper() and normalize(head) not in taken:
            short[normalize(head)].append(key)
    for keys in short.values():
        if len(keys) == 1:
            canonical, aliases = table[keys[0]]
            table[keys[0]] = (canonical, [*aliases, canonical.split(" of ", 1)[0]])


#: J41 (release 19, guide §9): on a religion slot an adherent word names its religion, as §1's
#: language adjective names its language (``X is a Muslim scholar`` -> Islam). Religion (Wikidata
#: id) -> (English label, adherent words in the six benchmark languages). A lexical table of
#: the language, like the gazetteer: it names no fact, subject or answer of the benchmark.
RELIGION_ADHERENTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "Q432": ("Islam", (
        "Muslim", "Muslims", "Moslem", "Islamic", "musulman", "musulmane", "musulmans",
        "islamique", "musulmán", "musulmana", "musulmanes", "islámico", "islámica", "Muslime",
        "muslimisch", "muslimische", "muslimischer", "islamisch", "islamische",
        "мусульманин", "мусульманка", "мусульмане", "мусульманином", "мусульманский",
        "исламский", "穆斯林")),
    "Q5043": ("Christianity", (
        "Christian", "Christians", "chrétien", "chrétienne", "chrétiens", "cristiano",
        "cristiana", "cristianos", "Christin", "Christen", "christlich",
        "christliche", "christlicher", "христианин", "христианка", "христиане",
        "христианином", "христианский", "基督徒")),
    "Q9268": ("Judaism", (
        "Jewish", "Jew", "Jews", "juif", "juive", "juifs", "judío", "judía", "judíos",
        "jüdisch", "jüdische", "jüdischer", "Jude", "Jüdin", "Juden", "еврей", "еврейка",
        "евреи", "евреем", "иудей", "еврейский", "犹太人")),
    "Q1841": ("Catholicism", (
        "Catholic", "Catholics", "Roman Catholic", "catholique", "catholiques", "católico",
        "católica", "católicos", "katholisch", "katholische", "katholischer", "Katholik",
        "Katholikin", "католик", "католичка", "католики", "католиком", "католический",
        "天主教徒")),
    "Q748": ("Buddhism", (
        "Buddhist", "Buddhists", "bouddhiste", "bouddhistes", "budista", "budistas",
        "buddhistisch", "buddhistische", "буддист", "буддистка", "буддисты", "буддистом",
        "буддийский", "佛教徒")),
    "Q9089": ("Hinduism", (
        "Hindu", "Hindus", "hindou", "hindoue", "hindous", "hindú", "hindúes", "hinduistisch",
        "индуист", "индуистка", "индуисты", "индуистом", "индуистский", "印度教徒")),
    "Q23540": ("Protestantism", (
        "Protestant", "Protestants", "protestante", "protestantes", "evangelisch",
        "протестант", "протестантка", "протестанты", "протестантом", "新教徒")),
}
#: Wikidata's adherent entities, which mParaRel uses as objects (``Muslim``): their religion
ADHERENT_ENTITIES: dict[str, str] = {"Q47740": "Q432", "Q106039": "Q5043", "Q10090": "Q9089"}
#: a church is an entity of its own (guide §9), one whatever the ``Roman``; listed so that the
#: adherent word inside its name (``Catholic``) is not read alone (longest match wins)
CHURCHES: dict[str, tuple[str, tuple[str, ...]]] = {
    "Q9592": ("Catholic Church", (
        "Catholic Church", "Roman Catholic Church", "Église catholique",
        "Église catholique romaine", "Iglesia católica", "Iglesia católica romana",
        "katholische Kirche", "römisch-katholische Kirche", "Католическая церковь",
        "Римско-католическая церковь", "天主教会")),
}


def religion_key(key: str) -> str:
    """J41: the religion an adherent entity's cluster key stands for (else ``key``).

    >>> religion_key("ENTITY_Q47740"), religion_key("ENTITY_Q90")
    ('ENTITY_Q432', 'ENTITY_Q90')
    """
    qid = key[len("ENTITY_"):] if key.startswith("ENTITY_") else ""
    return f"ENTITY_{ADHERENT_ENTITIES[qid]}" if qid in ADHERENT_ENTITIES else key


def religion_words(key: str) -> tuple[str, ...]:
    """J41: the religion ``key``'s label and adherent words (after :func:`religion_key`).

    >>> religion_words("ENTITY_Q47740")[:3]
    ('Islam', 'Muslim', 'Muslims')
    """
    qid = religion_key(key)[len("ENTITY_"):]
    label, words = RELIGION_ADHERENTS.get(qid, ("", ()))
    return (label, *words) if label else ()


def _fold_religions(table: dict[str, tuple[str, list[str]]]) -> None:
    """J41: a religion slot's lexicon, with adherent words as their religion's names.

    An adherent entity (``Muslim``) joins its religion's entry; every religion of
    :data:`RELIGION_ADHERENTS` and every church of :data:`CHURCHES` is an entry.
    """
    for qid, religion in ADHERENT_ENTITIES.items():
        if (got := table.pop(f"ENTITY_{qid}", None)) is not None:
            key = f"ENTITY_{religion}"
            canonical, aliases = table.get(key, (RELIGION_ADHERENTS[religion][0], []))
            table[key] = (canonical, [*aliases, *got[1]])
    for qid, (label, words) in (RELIGION_ADHERENTS | CHURCHES).items():
        canonical, aliases = table.get(f"ENTITY_{qid}", (label, [label]))
        table[f"ENTITY_{qid}"] = (canonical, [*aliases, *words])


def build_lexicons(benchmark: Benchmark) -> dict[tuple[str, str], EntityLexicon]:
    """Build one lexicon per ``(relation, slot)`` of a benchmark.

    Slot ``object``: every fact's object of that relation; ``subject``: every fact's subject;
    each entity with its canonical label and every alias. A slot whose answer type is
    ``religion`` also knows the adherent words of each religion (J41, :func:`_fold_religions`).
    """
    tables: dict[tuple[str, str], dict[str, tuple[str, list[str]]]] = defaultdict(dict)
    religious: set[tuple[str, str]] = set()
    for fact in benchmark.facts:
        rel = fact.relation.relation_id
        for slot, ent in (("object", fact.object), ("subject", fact.subject)):
            key = entity_key(ent.entity_id, ent.canonical)
            canonical, aliases = tables[(rel, slot)].get(key, (ent.canonical, []))
            tables[(rel, slot)][key] = (canonical, [*aliases, ent.canonical, *ent.aliases])
        if fact.answer_type == "religion":
            religious.add((rel, "object"))
    for k in religious:
        _fold_religions(tables[k])
    return {k: EntityLexicon(v) for k, v in tables.items()}
