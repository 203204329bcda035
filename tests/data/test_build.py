"""``fks data build``: a tiny synthetic mParaRel source, determinism, bad sources, shared data."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from fks.configs import FAMILIES, load_configs
from fks.data.build import DEFAULT_MAX_FACTS, allocate_quotas, build_benchmark
from fks.data.load import load_benchmark
from fks.errors import FksInputError

LANG_DIRS = ("en", "zh-hans", "fr", "es", "de", "ru")
BASE = Path("mpararel/data/mpararel_reviewed")


def t(s_id, s, o_id, o):
    return {"sub_uri": s_id, "obj_uri": o_id, "sub_label": s, "obj_label": o, "lineid": 0}


# P36 capital (reversible): a duplicate line, a multi-valued subject (South Africa), Paris
# shared by France and Ile-de-France (reverse ill-posed for both), ragged languages.
TUPLES = {
    "P36": {
        "en": [t("Q142", "France", "Q90", "Paris"), t("Q183", "Germany", "Q64", "Berlin"),
               t("Q183", "Germany", "Q64", "Berlin"), t("Q17", "Japan", "Q1490", "Tokyo"),
               t("Q38", "Italy", "Q220", "Rome"), t("Q258", "South Africa", "Q3926", "Pretoria"),
               t("Q258", "South Africa", "Q5465", "Cape Town"),
               t("Q13917", "Île-de-France", "Q90", "Paris")],
        "zh-hans": [t("Q142", "法国", "Q90", "巴黎"), t("Q183", "德国", "Q64", "柏林")],
        "fr": [t("Q142", "France", "Q90", "Paris"), t("Q183", "Allemagne", "Q64", "Berlin"),
               t("Q17", "Japon", "Q1490", "Tokyo")],
        "es": [t("Q183", "Alemania", "Q64", "Berlín")],
        "de": [t("Q183", "Deutschland", "Q64", "Berlin")],
        "ru": [t("Q142", "Франция", "Q90", "Париж"), t("Q183", "Германия", "Q64", "Берлин")],
    },
    # P30 continent (not reversible): "Little Europe Mall" leaks "Europe" into the context
    # distractors of the two European facts -> exactly two D1-guard drops.
    "P30": {
        "en": [t("Q142", "France", "Q46", "Europe"), t("Q183", "Germany", "Q46", "Europe"),
               t("Q17", "Japan", "Q48", "Asia"), t("Q1033", "Nigeria", "Q15", "Africa"),
               t("Q99001", "Little Europe Mall", "Q49", "North America")],
    },
    # P176 manufacturer (spec 6.2): copy-answerable subjects; Airbus has two products.
    "P176": {
        "en": [t("Q6475", "Airbus A320", "Q67", "Airbus"),
               t("Q6476", "Airbus A330", "Q67", "Airbus"),
               t("Q5830", "Boeing 747", "Q66", "Boeing"),
               t("Q2766", "iPhone", "Q312", "Apple Inc.")],
        "zh-hans": [t("Q6475", "空中客车A320", "Q67", "空中客车")],
    },
    "P999": {"en": [t("Q1", "Foo", "Q2", "Bar")]},  # not in the registry
    "P108": {"en": [t("Q5", "Ann", "Q6", "Acme")]},  # registry, but not functional
}
PATTERNS = {
    "P36": {
        "en": ["the capital of [X] is [Y]", "[X]'s capital is [Y]", "[X]'s capital city is [Y]",
               "the capital city of [X] is [Y]", "[Y] is the capital of [X]",
               "[X], which has the capital [Y]"],
        "zh-hans": ["[X]的首都是[Y]"],
        "fr": [("la capitale de [X] est [Y]", True), "[Y] est la capitale de [X]"],
        "es": ["[Y] es la capital de [X]"],
        "de": ["die Hauptstadt von [X] ist [Y]"],
        "ru": ["столица [X] — [Y]"],
    },
    "P30": {"en": ["[X] is located in [Y]", "[X] belongs to the continent of [Y]",
                   "[X] is a part of the continent of [Y]"]},
    "P176": {"en": ["[X] is made by [Y]"], "zh-hans": ["[Y]生产的[X]"]},
}
# ParaRel's original-cased English patterns win over mParaRel's for English.
PARAREL = {"P176": ["[X] is produced by [Y].", "[X] is developed by [Y].",
                    "[X], a product of [Y],", "[Y] and its product [X]"]}


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")


def write_source(root: Path, tuples=TUPLES, patterns=PATTERNS, pararel=PARAREL) -> Path:
    for lang in LANG_DIRS:
        (root / BASE / "tuples" / lang).mkdir(parents=True, exist_ok=True)
        (root / BASE / "patterns" / lang).mkdir(parents=True, exist_ok=True)
    for pid, by_lang in tuples.items():
        for lang, rows in by_lang.items():
            _jsonl(root / BASE / "tuples" / lang / f"{pid}.jsonl", rows)
    for pid, by_lang in patterns.items():
        for lang, pats in by_lang.items():
            rows = [{"pattern": p[0], "checked-by-human": p[1]} if isinstance(p, tuple)
                    else {"pattern": p, "checked-by-human": False} for p in pats]
            _jsonl(root / BASE / "patterns" / lang / f"{pid}.jsonl", rows)
    for pid, pats in (pararel or {}).items():
        _jsonl(root / "pararel/data/pattern_data/graphs_json" / f"{pid}.jsonl",
               [{"pattern": p, "lemma": "x"} for p in pats])
    return root


@pytest.fixture(scope="module")
def configs():
    return load_configs()


@pytest.fixture(scope="module")
def built(tmp_path_factory, configs):
    root = tmp_path_factory.mktemp("build")
    src = write_source(root / "src")
    result = build_benchmark(src, root / "out", configs=configs, max_facts=None, seed=7)
    return result, load_benchmark(root / "out")


def _by_fact(bench):
    subj = {f.fact_id: (f.relation.relation_id, f.subject.canonical) for f in bench.facts}
    out = defaultdict(lambda: defaultdict(list))
    for q in bench.queries:
        out[subj[q.fact_id]][q.condition_family].append(q)
    return out


def test_counts_and_drops(built):
    result, bench = built
    rels = Counter(f.relation.relation_id for f in bench.facts)
    assert rels == {"capital": 5, "continent": 5, "manufacturer": 4}
    build = result.statistics["build"]
    assert build["dropped"]["duplicate_triples"] == 1
    assert build["dropped"]["non_functional_subjects"] == 1
    assert build["dropped"]["non_functional_tuples"] == 2
    assert "South Africa" not in {f.subject.canonical for f in bench.facts}
    assert build["source_relations_skipped"] == ["P108", "P999"]  # not functional; unknown
    assert "employer" in build["relations_left_out"]
    assert result.facts_path.name == "benchmark_facts_14.jsonl"
    assert result.queries_path.name == f"evaluation_queries_{len(bench.queries)}.jsonl"
    assert result.report["passed"], result.report["hard_errors"][:3]
    for name in ("dataset_statistics.json", "benchmark_manifest.json", "validation_report.json"):
        assert (result.out / name).is_file()


def test_every_family_and_registry_flags(built, configs):
    _, bench = built
    present = {q.condition_family for q in bench.queries}
    assert present == set(FAMILIES)
    for q in bench.queries:
        spec = configs.eval_conditions.families[q.condition_family]
        assert q.target_slot == spec.target_slot
        assert (q.is_assisted, q.is_well_posed) == (spec.is_assisted, spec.is_well_posed)
        assert {k: getattr(q, k) for k in spec.flags()} == spec.flags()
    # ids are dense and in fact order
    assert [q.query_id for q in bench.queries] == [f"query_{i:08d}" for i in
                                                   range(1, len(bench.queries) + 1)]
    assert [f.fact_id for f in bench.facts] == [f"fact_{i:06d}" for i in range(1, 15)]
    order = [(q.fact_id, FAMILIES.index(q.condition_family)) for q in bench.queries]
    assert order == sorted(order)


def test_per_fact_families(built):
    _, bench = built
    per = _by_fact(bench)
    facts = {(f.relation.relation_id, f.subject.canonical): f for f in bench.facts}
    for key, fams in per.items():
        fact = facts[key]
        assert [q.query for q in fams["anchor"]] == [fact.qualification_question]
        assert len(fams["format"]) == 3
        assert {q.variant_id for q in fams["format"]} == {"fmt_short", "fmt_blank", "fmt_json"}
        paras = [q.query for q in fams["paraphrase"]]
        assert 3 <= len(paras) <= 5 and len(set(paras)) == len(paras)
        assert all(fact.subject.canonical in p for p in paras)
        assert len(fams["recognition"]) == 1
        opts = fams["recognition"][0].options
        assert fact.object.canonical in opts and len(set(opts)) == len(opts) >= 2
        assert len(fams["reverse"]) + len(fams["reverse_illposed"]) >= 1
        assert not (fams["reverse"] and fams["reverse_illposed"])
    # ParaRel patterns win over mParaRel's for English
    a320 = per[("manufacturer", "Airbus A320")]
    assert "Airbus A320 is produced by" in [q.query for q in a320["paraphrase"]]
    assert not any("made by" in q.query for q in a320["paraphrase"])
    assert len(per[("manufacturer", "Airbus A320")]["recognition"][0].options) == 3  # 2 others


def test_reverse_rules(built):
    _, bench = built
    per = _by_fact(bench)
    # capital is reversible: Berlin/Tokyo/Rome point back to one subject, Paris to two
    for subj in ("Germany", "Japan", "Italy"):
        rev = per[("capital", subj)]["reverse"]
        assert len(rev) == 2 and all(q.gold_canonical == subj for q in rev)
    for subj in ("France", "Île-de-France"):
        ill = per[("capital", subj)]["reverse_illposed"]
        assert len(ill) == 1 and ill[0].gold_canonical == subj and ill[0].target_slot == "subject"
    # continent is not reversible: Asia -> Japan is unique in the data, still ill-posed
    assert not per[("continent", "Japan")]["reverse"]
    ill = per[("continent", "Japan")]["reverse_illposed"]
    assert [q.query for q in ill] == ["Name a place located on Asia."]


def test_context_guard_recorded(built):
    result, bench = built
    per = _by_fact(bench)
    assert result.statistics["build"]["context_guard_dropped"] == {"context": 2}
    manifest = result.manifest
    assert manifest["accepted_deviations"] == [
        {"id": "D1-guard", "family": "context", "delta": -2,
         "reason": manifest["accepted_deviations"][0]["reason"]}]
    actual = Counter(q.condition_family for q in bench.queries)
    assert manifest["expected_counts"]["queries"]["context"] - 2 == actual["context"]
    for fam in FAMILIES:
        if fam != "context":
            assert manifest["expected_counts"]["queries"][fam] == actual[fam]
    for subj in ("France", "Germany"):  # gold Europe: the Little Europe Mall sentence is gone
        ctx = per[("continent", subj)]["context"]
        assert len(ctx) == 2
        assert not any("Europe" in q.context_distractor for q in ctx)
        assert all(q.query.endswith(f"On which continent is {subj} located?") for q in ctx)
    assert len(per[("continent", "Japan")]["context"]) == 3


def test_multilingual_ragged(built):
    _, bench = built
    per = _by_fact(bench)
    langs = {k: sorted(q.language for q in v["multilingual"]) for k, v in per.items()}
    assert langs[("capital", "France")] == ["fr", "ru", "zh"]
    assert langs[("capital", "Germany")] == ["de", "fr", "ru", "zh"]  # es: no [Y]-last pattern
    assert langs[("capital", "Japan")] == ["fr"]
    assert langs[("capital", "Italy")] == []
    assert langs[("manufacturer", "Airbus A320")] == []  # zh label, but no [Y]-last pattern
    ml = {q.language: q.query for q in per[("capital", "France")]["multilingual"]}
    assert ml == {"zh": "法国的首都是", "fr": "La capitale de France est",
                  "ru": "Столица Франция —"}
    assert all(q.gold_canonical == "Paris" for q in per[("capital", "France")]["multilingual"])


def test_fact_fields(built):
    _, bench = built
    facts = {f.subject.canonical + "/" + f.relation.relation_id: f for f in bench.facts}
    a320 = facts["Airbus A320/manufacturer"]
    assert a320.answer_in_subject_surface and a320.spec_6_2_flag
    assert a320.subject.aliases == ["Airbus A320", "空中客车A320"]
    fr = facts["France/capital"]
    assert not fr.answer_in_subject_surface and not fr.spec_6_2_flag
    assert fr.object.aliases == ["Paris", "巴黎", "Париж"]  # en, zh, fr (dup), ru
    assert fr.object.entity_id == "Q90" and fr.is_functional
    assert {r["language"] for r in fr.source_records} == {"en", "zh", "fr", "ru"}
    assert all(r["file"].endswith("P36.jsonl") and r["line"] >= 1 for r in fr.source_records)
    stats = json.loads((built[0].out / "dataset_statistics.json").read_text())
    assert stats["copy_answerable"]["facts"] == 3  # Airbus A320, A330, Boeing 747
    assert stats["spec_6_2"]["facts"] == 4


def _snapshot(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_deterministic_bytes(tmp_path, configs):
    src = write_source(tmp_path / "src")
    build_benchmark(src, tmp_path / "out", configs=configs, max_facts=8, seed=3)
    first = _snapshot(tmp_path / "out")
    shutil.rmtree(tmp_path / "out")
    build_benchmark(src, tmp_path / "out", configs=configs, max_facts=8, seed=3)
    assert _snapshot(tmp_path / "out") == first
    subjects = set()
    for seed in range(1, 6):
        r = build_benchmark(src, tmp_path / "o2", configs=configs, max_facts=6, seed=seed)
        bench = load_benchmark(r.out)
        assert Counter(f.relation.relation_id for f in bench.facts) == {
            "capital": 2, "continent": 2, "manufacturer": 2}
        subjects.add(tuple(sorted(f.subject.canonical for f in bench.facts)))
        assert len(list(r.out.glob("benchmark_facts_*.jsonl"))) == 1  # stale files removed
    assert len(subjects) > 1  # the seed changes the sample


def test_deterministic_across_processes(tmp_path):
    """Same bytes under different hash seeds (no set-iteration order leaks into the output)."""
    src = write_source(tmp_path / "src")
    outs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"out{hash_seed}"
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        subprocess.run([sys.executable, "-m", "fks", "data", "build", "--source", str(src),
                        "--out", str(out), "--max-facts", "10"], env=env, check=True,
                       capture_output=True)
        outs.append({k: v for k, v in _snapshot(out).items() if k != "validation_report.json"})
    assert outs[0] == outs[1] and len(outs[0]) == 4


def test_allocate_quotas_balances():
    q = allocate_quotas({"a": 3, "b": 100, "c": 100, "d": 50}, 100)
    assert sum(q.values()) == 100 and q["a"] == 3
    assert max(q.values()) - min(v for k, v in q.items() if k != "a") <= 1


def test_inverse_normalisation_and_spec62_switch(tmp_path):
    tuples = dict(TUPLES)
    tuples["P1376"] = {"en": [t("Q64", "Berlin", "Q183", "Germany"),
                              t("Q1085", "Prague", "Q213", "Czech Republic")]}
    src = write_source(tmp_path / "src", tuples=tuples)
    plain = build_benchmark(src, tmp_path / "a", configs=load_configs(), max_facts=None, seed=1)
    inv = [f for f in load_benchmark(plain.out).facts if f.relation.relation_id == "capital_of"]
    assert {(f.subject.canonical, f.relation.direction, f.relation.inverse_of) for f in inv} == {
        ("Berlin", "inverse", "capital"), ("Prague", "inverse", "capital")}
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg/relations.yaml").write_text(
        "normalize_inverse_direction: true\ndrop_spec_6_2_flagged: true\n")
    cfg = load_configs([tmp_path / "cfg"])
    r = build_benchmark(src, tmp_path / "b", configs=cfg, max_facts=None, seed=1)
    bench = load_benchmark(r.out)
    rels = Counter(f.relation.relation_id for f in bench.facts)
    assert "capital_of" not in rels and "manufacturer" not in rels
    assert rels["capital"] == 6  # + Czech Republic; Germany/Berlin merged, not doubled
    assert r.statistics["build"]["dropped"]["merged_across_properties"] == 1
    cz = next(f for f in bench.facts if f.subject.canonical == "Czech Republic")
    assert cz.object.canonical == "Prague" and cz.relation.source_relations == ["P1376"]
    de = next(f for f in bench.facts if f.subject.canonical == "Germany"
              and f.relation.relation_id == "capital")
    assert de.relation.source_relations == ["P1376", "P36"]
    assert "manufacturer" in r.statistics["build"]["relations_left_out"]


# ----------------------------------------------------------------------------- bad sources
def _corrupt(tmp_path: Path, text: str, line: int) -> Path:
    src = write_source(tmp_path / "src")
    p = src / BASE / "tuples/en/P36.jsonl"
    lines = p.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[line - 1] = text + "\n"
    p.write_text("".join(lines), encoding="utf-8")
    return src


def test_bad_json_line(tmp_path, configs):
    src = _corrupt(tmp_path, '{"sub_uri": "Q1", ', 3)
    with pytest.raises(FksInputError) as exc:
        build_benchmark(src, tmp_path / "out", configs=configs, max_facts=None, seed=1)
    assert exc.value.path.endswith("tuples/en/P36.jsonl") and exc.value.line == 3


def test_missing_field(tmp_path, configs):
    src = _corrupt(tmp_path, json.dumps({"obj_uri": "Q1", "sub_label": "a", "obj_label": "b"}), 2)
    with pytest.raises(FksInputError) as exc:
        build_benchmark(src, tmp_path / "out", configs=configs, max_facts=None, seed=1)
    assert (exc.value.line, exc.value.field) == (2, "sub_uri")
    assert "P36.jsonl:2: field 'sub_uri'" in exc.value.one_line()


def test_bad_pattern_and_missing_folder(tmp_path, configs):
    src = write_source(tmp_path / "src")
    _jsonl(src / BASE / "patterns/fr/P30.jsonl", [{"pattern": "[X] est en Y"}])
    with pytest.raises(FksInputError) as exc:
        build_benchmark(src, tmp_path / "out", configs=configs, max_facts=None, seed=1)
    assert (exc.value.line, exc.value.field) == (1, "pattern")
    shutil.rmtree(src / BASE / "tuples/ru")
    with pytest.raises(FksInputError) as exc:
        build_benchmark(src, tmp_path / "out", configs=configs, max_facts=None, seed=1)
    assert exc.value.path.endswith("tuples/ru")


def test_cli_exit_codes(tmp_path):
    from fks.cli import main

    src = _corrupt(tmp_path, "not json", 4)
    with pytest.raises(SystemExit) as exc:
        main(["data", "build", "--source", str(src), "--out", str(tmp_path / "out")])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["data", "build", "--source", str(tmp_path / "nowhere"), "--out",
              str(tmp_path / "out")])
    assert exc.value.code == 2
    good = write_source(tmp_path / "good")
    with pytest.raises(SystemExit) as exc:
        main(["data", "build", "--source", str(good), "--out", str(tmp_path / "ok"),
              "--max-facts", "9"])
    assert exc.value.code == 0
    assert len(load_benchmark(tmp_path / "ok").facts) == 9


# ------------------------------------------------------------------------------ shared data
@pytest.mark.shared_data
def test_shared_data_small(shared_data_dir, tmp_path, configs):
    r = build_benchmark(shared_data_dir, tmp_path / "out", configs=configs, max_facts=300,
                        seed=20260101)
    assert r.report["passed"], r.report["hard_errors"][:3]
    stats = r.statistics
    assert stats["n_facts"] == 300 and stats["n_relations"] >= 15
    assert set(stats["families"]) == set(FAMILIES)
    assert 0 < stats["coverage"]["complete_family_facts"] <= 300
    assert set(stats["languages"]) == {"en", "zh", "fr", "es", "de", "ru"}
    assert r.manifest["source_checksum"] and r.manifest["expected_counts"]["n_facts"] == 300


@pytest.mark.slow
@pytest.mark.shared_data
def test_shared_data_full_scale(shared_data_dir, tmp_path, configs):
    r = build_benchmark(shared_data_dir, tmp_path / "out", configs=configs,
                        max_facts=DEFAULT_MAX_FACTS, seed=20260101)
    stats = r.statistics
    assert r.report["passed"]
    assert stats["n_facts"] == DEFAULT_MAX_FACTS and stats["n_relations"] >= 15
    assert stats["n_queries"] >= 30_000
    # issue 13 point 5: the copy flag misses (almost) nothing a main query shows
    assert stats["copy_answerable"]["unflagged_main_queries_with_gold_share"] < 0.002
