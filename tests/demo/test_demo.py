"""The embedded demo source (hand-written, mParaRel layout), its benchmark and ``fks demo``."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest

import fks
from fks.configs import FAMILIES, load_configs
from fks.data.build import y_last_prefix
from fks.data.load import load_benchmark
from fks.data.rules import answer_in_subject_surface
from fks.data.schema import LANGUAGES
from fks.demo.benchmark import build_demo_benchmark, demo_source_dir
from fks.io import read_json

LANG_DIRS = ("en", "zh-hans", "fr", "es", "de", "ru")
BASE = Path("mpararel/data/mpararel_reviewed")
QID = re.compile(r"^Q[1-9]\d*$")
TUPLE_KEYS = {"sub_uri", "obj_uri", "sub_label", "obj_label", "lineid"}
CJK = re.compile(r"[\u4e00-\u9fff]")
CYRILLIC = re.compile(r"[\u0400-\u04ff]")


def _read(path: Path) -> list[dict]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        assert line.strip(), f"{path}:{n}: blank line"
        row = json.loads(line)
        assert isinstance(row, dict), f"{path}:{n}: not an object"
        rows.append(row)
    return rows


@pytest.fixture(scope="module")
def source() -> dict[str, dict[str, dict[str, list[dict]]]]:
    """kind ("tuples"/"patterns") -> P-id -> language dir -> rows, for every file shipped."""
    root = demo_source_dir() / BASE
    out: dict[str, dict[str, dict[str, list[dict]]]] = {"tuples": {}, "patterns": {}}
    for kind in out:
        for lang in LANG_DIRS:
            for path in sorted((root / kind / lang).glob("*.jsonl")):
                out[kind].setdefault(path.stem, {})[lang] = _read(path)
    return out


@pytest.fixture(scope="module")
def demo_benchmark(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_demo_benchmark(tmp_path_factory.mktemp("demo") / "benchmark",
                                configs=load_configs())


# ----------------------------------------------------------------------------- the source
def test_source_is_packaged_inside_fks():
    root = demo_source_dir()
    assert root.is_dir()
    assert root.is_relative_to(Path(fks.__file__).parent)
    assert (root / "README.md").is_file()
    assert not (root / "pararel").exists()  # the ParaRel part is optional and absent


def test_every_line_parses_with_the_expected_fields(source):
    assert set(source["tuples"]) == set(source["patterns"])
    for pid, by_lang in source["tuples"].items():
        assert re.fullmatch(r"P\d+", pid)
        assert set(by_lang) == set(LANG_DIRS), pid
        for lang, rows in by_lang.items():
            assert rows, (pid, lang)
            for r in rows:
                assert set(r) == TUPLE_KEYS, (pid, lang, r)
                assert QID.match(r["sub_uri"]) and QID.match(r["obj_uri"]), r
                assert isinstance(r["lineid"], int) and r["lineid"] >= 0, r
                for key in ("sub_label", "obj_label"):
                    assert isinstance(r[key], str) and r[key] == r[key].strip() and r[key], r
    for pid, by_lang in source["patterns"].items():
        assert set(by_lang) == set(LANG_DIRS), pid
        for lang, rows in by_lang.items():
            for r in rows:
                assert set(r) == {"pattern", "checked-by-human"}, (pid, lang, r)
                assert r["checked-by-human"] is True
                p = r["pattern"]
                assert p.count("[X]") == 1 and p.count("[Y]") == 1, (pid, lang, p)


def test_size_relations_and_languages(source):
    en = {pid: rows["en"] for pid, rows in source["tuples"].items()}
    assert sum(map(len, en.values())) >= 150
    assert len(en) >= 8
    registry = load_configs().relations
    by_source = registry.by_source()
    for pid in en:
        assert pid in by_source, f"{pid} is not a source relation of the registry"
        spec = registry.relations[by_source[pid]]
        assert spec.functional, pid
    assert len({by_source[p] for p in en}) == len(en)  # one registry relation per file


def test_functional_and_at_least_four_objects(source):
    for pid, by_lang in source["tuples"].items():
        objects: dict[str, set[str]] = defaultdict(set)
        for r in by_lang["en"]:
            objects[r["sub_uri"]].add(r["obj_uri"])
        multi = {s: o for s, o in objects.items() if len(o) > 1}
        assert not multi, (pid, multi)
        assert len(by_lang["en"]) == len(objects), f"{pid}: a repeated (subject, object) line"
        assert len({r["obj_uri"] for r in by_lang["en"]}) >= 4, pid
        subject_labels = Counter(r["sub_label"].casefold() for r in by_lang["en"])
        assert max(subject_labels.values()) == 1, (pid, subject_labels.most_common(1))


def test_other_languages_follow_english_lines(source):
    """A non-English line is an English fact (same ids, same lineid); lineids count from 0."""
    for pid, by_lang in source["tuples"].items():
        en = by_lang["en"]
        assert [r["lineid"] for r in en] == list(range(len(en))), pid
        en_ids = {r["lineid"]: (r["sub_uri"], r["obj_uri"]) for r in en}
        for lang in LANG_DIRS[1:]:
            ids = [r["lineid"] for r in by_lang[lang]]
            assert ids == sorted(set(ids)), (pid, lang)
            for r in by_lang[lang]:
                assert en_ids[r["lineid"]] == (r["sub_uri"], r["obj_uri"]), (pid, lang, r)


#: Slots that hold companies, products or software, whose names zh and ru may keep in Latin
#: script (iPhone, Microsoft); every other label (places, people, languages, films) must not.
BRAND_SLOTS = {("P176", "sub_label"), ("P176", "obj_label"), ("P178", "sub_label"),
               ("P178", "obj_label"), ("P159", "sub_label")}


def test_labels_are_consistent_and_in_the_right_script(source):
    """One label per entity and language, whatever the file; zh in Han, ru in Cyrillic."""
    labels: dict[tuple[str, str], set[str]] = defaultdict(set)
    for by_lang in source["tuples"].values():
        for lang, rows in by_lang.items():
            for r in rows:
                labels[(lang, r["sub_uri"])].add(r["sub_label"])
                labels[(lang, r["obj_uri"])].add(r["obj_label"])
    assert all(len(v) == 1 for v in labels.values()), {k: v for k, v in labels.items()
                                                       if len(v) > 1}
    script = {"zh-hans": CJK, "ru": CYRILLIC}
    for pid, by_lang in source["tuples"].items():
        for lang, rows in by_lang.items():
            for r in rows:
                for slot in ("sub_label", "obj_label"):
                    if lang in script and (pid, slot) not in BRAND_SLOTS:
                        assert script[lang].search(r[slot]), (pid, lang, slot, r[slot])
                    if lang not in script:
                        assert not (CJK.search(r[slot]) or CYRILLIC.search(r[slot])), (lang, r)


def test_coverage_is_ragged_but_mostly_complete(source):
    facts = {lang: {(pid, r["sub_uri"], r["obj_uri"]) for pid, by in source["tuples"].items()
                    for r in by[lang]} for lang in LANG_DIRS}
    complete = set.intersection(*facts.values())
    assert len(complete) >= 0.7 * len(facts["en"])  # most facts in all six languages
    assert len(complete) < len(facts["en"])  # ... but not all
    for lang in LANG_DIRS[1:]:
        assert facts[lang] < facts["en"], lang  # every language lacks some facts
    per_fact = Counter(f for lang in LANG_DIRS[1:] for f in facts[lang])
    assert min(per_fact[f] for f in facts["en"]) >= 3  # no fact misses more than two languages


def test_patterns_give_cloze_prompts(source):
    for pid, by_lang in source["patterns"].items():
        en = [r["pattern"] for r in by_lang["en"]]
        y_last = [p for p in en if y_last_prefix(p) is not None]
        assert 4 <= len(y_last) <= 6, (pid, en)
        assert len(en) - len(y_last) <= 2, pid
        assert any(y_last_prefix(p) is None for p in en), pid  # a [Y]-first one to skip
        for lang in LANG_DIRS[1:]:
            rows = by_lang[lang]
            assert 1 <= len(rows) <= 3, (pid, lang)
            assert any(y_last_prefix(r["pattern"]) is not None for r in rows), (pid, lang)


def test_copy_answerable_and_reverse_mix(source):
    """Some objects inside their subject's label; some objects once, some several times."""
    en = [(pid, r) for pid, by in source["tuples"].items() for r in by["en"]]
    copy = [r for _, r in en if answer_in_subject_surface(r["sub_label"], r["obj_label"])]
    assert len(copy) >= 5
    per_object = Counter((pid, r["obj_uri"]) for pid, r in en)
    assert any(n == 1 for n in per_object.values())
    assert any(n >= 3 for n in per_object.values())


# -------------------------------------------------------------------------- the benchmark
def test_demo_benchmark_has_everything_and_validates(demo_benchmark, source):
    bench = load_benchmark(demo_benchmark)
    n_source = sum(len(by["en"]) for by in source["tuples"].values())
    stats = read_json(demo_benchmark / "dataset_statistics.json")
    degenerate = sum(n for reasons in stats["build"]["degenerate_objects_dropped"].values()
                     for n in reasons.values())
    assert degenerate == 1  # Luxembourg (city) capital of Luxembourg: object_equals_subject
    # max_facts=None keeps every candidate the degenerate-object gate lets through
    assert len(bench.facts) == n_source - degenerate
    assert {q.condition_family for q in bench.queries} == set(FAMILIES)
    assert {q.language for q in bench.queries} == set(LANGUAGES)
    assert len({f.relation.relation_id for f in bench.facts}) == len(source["tuples"])
    assert any(f.answer_in_subject_surface for f in bench.facts)
    report = read_json(demo_benchmark / "validation_report.json")
    assert report["passed"] is True and report["hard_errors"] == []
    anchors = Counter(q.fact_id for q in bench.queries if q.condition_family == "anchor")
    assert set(anchors.values()) == {1} and len(anchors) == len(bench.facts)


def test_demo_benchmark_is_reproducible(demo_benchmark, tmp_path):
    again = build_demo_benchmark(tmp_path / "again", configs=load_configs())
    for name in ("benchmark_facts", "evaluation_queries"):
        (first,) = demo_benchmark.glob(f"{name}_*.jsonl")
        (second,) = again.glob(f"{name}_*.jsonl")
        assert first.name == second.name
        assert first.read_bytes() == second.read_bytes()


def test_fks_demo_command(tmp_path, monkeypatch):
    import functools

    from fks.cli import main
    from fks.demo import run as demo
    from fks.demo.model import DemoModelConfig

    # fks demo also trains a demo model and runs every stage: keep it small and its cache here
    # (the full-size path is tested at reduced size in tests/pipeline/test_demo_pipeline.py)
    small = DemoModelConfig(n_layers=3, hidden=32, n_heads=2, n_kv_heads=2, intermediate=64,
                            vocab_size=400, steps=4, batch_size=16, warmup_steps=1)
    monkeypatch.setattr(demo, "run_demo", functools.partial(
        demo.run_demo, model_config=small, limit=10, jlens_prompts=4,
        cache_dir=tmp_path / "cache"))
    out = tmp_path / "demo_out"
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--out", str(out)])
    assert exc.value.code == 0
    bench = load_benchmark(out / "benchmark")
    assert {q.condition_family for q in bench.queries} == set(FAMILIES)
    assert read_json(out / "benchmark" / "validation_report.json")["passed"] is True
