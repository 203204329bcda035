"""BCS, BES and behaviour classes: kernel vs spec §16.1, production path vs kernel, chance
floors, thresholds, coverage modes, denominators and family membership."""

from __future__ import annotations

import itertools
import math
import random
from collections import defaultdict
from math import comb

import numpy as np
import pytest

from fks.metrics.behavior import (
    GROUPS,
    JudgedColumns,
    behavior_group,
    behavior_summary,
    compute_bcs_bes,
    fact_behavior,
)

MAIN = ["anchor", "paraphrase", "format", "context", "multilingual"]


def spec_compute_bcs_bes(records, main_families):
    """Literal transcription of spec §16.1 (do not edit: it is the reference)."""
    family_cluster_counts = defaultdict(lambda: defaultdict(int))
    family_totals = defaultdict(int)

    for item in records:
        family = item["condition_family"]
        if family not in main_families:
            continue
        cluster = item["cluster_id"]
        family_cluster_counts[family][cluster] += 1
        family_totals[family] += 1

    valid_families = sorted(family_totals)
    if not valid_families:
        raise ValueError("No valid main-family queries.")

    clusters = {
        cluster
        for family in valid_families
        for cluster in family_cluster_counts[family]
    }

    p = {}
    for cluster in clusters:
        p[cluster] = sum(
            family_cluster_counts[family].get(cluster, 0)
            / family_totals[family]
            for family in valid_families
        ) / len(valid_families)

    modal_cluster = max(p, key=p.get)
    bcs = p[modal_cluster]

    positive_probs = [value for value in p.values() if value > 0]
    if len(positive_probs) == 1:
        bes = 1.0
    else:
        entropy = -sum(value * math.log(value) for value in positive_probs)
        bes = 1.0 - entropy / math.log(len(positive_probs))

    return {
        "bcs": bcs,
        "bes": bes,
        "modal_cluster": modal_cluster,
        "cluster_distribution": p,
        "valid_families": valid_families,
    }


def rec(fact, family, cluster, correctness="INCORRECT", *, main=True, relation="r1",
        copy=False, qid=None, **extra):
    return {"model": "m", "query_id": qid or f"q{random.random()}", "fact_id": fact,
            "relation": relation, "condition_family": family, "language": "en",
            "cluster_id": cluster, "status": "ANSWER", "correctness": correctness,
            "use_for_main_forward": main, "use_for_reverse_analysis": False,
            "use_for_recognition_analysis": False, "answer_in_subject_surface": copy,
            "judge": "test", **extra}


def random_fact_records(rng, fact="fact_000001", families=MAIN, n_clusters=4, max_q=5):
    out = []
    for fam in families:
        if rng.random() < 0.2:
            continue  # ragged: family missing
        for _ in range(rng.randint(1, max_q)):
            c = f"C{rng.randrange(n_clusters)}"
            out.append(rec(fact, fam, c, "CORRECT" if c == "C0" else "INCORRECT"))
    if not out:
        out.append(rec(fact, families[0], "C0", "CORRECT"))
    # a non-main record must never count
    out.append(rec(fact, "recognition", "C9", main=False))
    return out


# ============================================================================ kernel
@pytest.mark.parametrize("seed", range(200))
def test_kernel_matches_spec_transcription(seed):
    rng = random.Random(seed)
    fams = MAIN if seed % 2 else MAIN[1:]
    records = random_fact_records(rng, families=MAIN, n_clusters=rng.randint(1, 6))
    ours = compute_bcs_bes(records, fams) if any(
        r["condition_family"] in fams for r in records) else None
    main_only = [r for r in records if r["use_for_main_forward"]]
    if ours is None:
        with pytest.raises(ValueError):
            spec_compute_bcs_bes(main_only, fams)
        return
    ref = spec_compute_bcs_bes(main_only, fams)
    assert set(ours) == {"bcs", "bes", "modal_cluster", "cluster_distribution",
                         "valid_families"}
    assert ours["valid_families"] == ref["valid_families"]
    assert ours["cluster_distribution"] == pytest.approx(ref["cluster_distribution"], abs=1e-15)
    assert ours["bcs"] == pytest.approx(ref["bcs"], abs=1e-15)
    assert ours["bes"] == pytest.approx(ref["bes"], abs=1e-12)
    p = sorted(ref["cluster_distribution"].values(), reverse=True)
    if len(p) == 1 or p[0] - p[1] > 1e-9:  # a unique maximum: the modal cluster is defined
        assert ours["modal_cluster"] == ref["modal_cluster"]
    else:  # a tie: the pseudo-code's pick depends on set order; ours is the smallest id
        tied = [c for c, v in ref["cluster_distribution"].items() if v >= p[0] - 1e-12]
        assert ours["modal_cluster"] == min(tied)


def test_kernel_single_cluster_and_two_way_split():
    one = [rec("f", "anchor", "A"), rec("f", "paraphrase", "A"), rec("f", "paraphrase", "A")]
    r = compute_bcs_bes(one, MAIN)
    assert (r["bcs"], r["bes"], r["cluster_distribution"]) == (1.0, 1.0, {"A": 1.0})
    even = [rec("f", "paraphrase", "A"), rec("f", "paraphrase", "B")]
    r = compute_bcs_bes(even, MAIN)
    assert r["bcs"] == 0.5 and r["bes"] == pytest.approx(0.0, abs=1e-15)
    assert r["modal_cluster"] == "A"  # tie -> smallest id
    with pytest.raises(ValueError, match="No valid main-family queries"):
        compute_bcs_bes([rec("f", "reverse", "A")], MAIN)


def test_family_balance_not_query_count():
    """One anchor query weighs as much as ten paraphrases (§4.1-4.3)."""
    records = [rec("f", "anchor", "A")] + [rec("f", "paraphrase", "B")] * 10
    r = compute_bcs_bes(records, ["anchor", "paraphrase"])
    assert r["cluster_distribution"] == {"A": 0.5, "B": 0.5}


# ============================================================================ production path
def random_dataset(seed, n_facts=60):
    rng = random.Random(seed)
    records = []
    for i in range(n_facts):
        fid = f"fact_{i:06d}"
        rel = f"rel{i % 4}"
        copy = i % 5 == 0
        for r in random_fact_records(rng, fact=fid, n_clusters=rng.randint(1, 5)):
            r.update(relation=rel, answer_in_subject_surface=copy)
            records.append(r)
    return records


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("families", [MAIN, MAIN[1:], ["paraphrase", "format"]])
def test_production_path_equals_kernel(seed, families):
    records = random_dataset(seed)
    cols = JudgedColumns.from_records(records)
    fb = fact_behavior(cols, families)
    by_fact = defaultdict(list)
    for r in records:
        by_fact[r["fact_id"]].append(r)
    expected_facts = sorted(f for f, rs in by_fact.items()
                            if any(r["use_for_main_forward"] and r["condition_family"] in families
                                   for r in rs))
    assert fb.fact_ids.tolist() == expected_facts
    for i, fid in enumerate(fb.fact_ids.tolist()):
        k = compute_bcs_bes(by_fact[fid], families)
        assert fb.bcs[i] == pytest.approx(k["bcs"], abs=1e-12)
        assert fb.bes[i] == pytest.approx(k["bes"], abs=1e-12)
        assert fb.modal_cluster[i] == k["modal_cluster"]
        assert fb.valid_families(i) == k["valid_families"]
        assert fb.distribution(i) == pytest.approx(k["cluster_distribution"], abs=1e-12)
        modal_corr = {r["correctness"] for r in by_fact[fid]
                      if r["cluster_id"] == k["modal_cluster"] and r["use_for_main_forward"]}
        assert {fb.modal_correctness[i]} == modal_corr


def test_membership_comes_from_the_booleans():
    records = [rec("f", "paraphrase", "A"),
               rec("f", "paraphrase", "B", main=False),     # flag off: never counts
               rec("f", "reverse", "C", main=True)]          # flag on, family not configured
    fb = fact_behavior(JudgedColumns.from_records(records), MAIN)
    assert fb.bcs.tolist() == [1.0] and fb.distribution(0) == {"A": 1.0}


# ============================================================================ chance floors
# README: "a model choosing at random between two answers scores ~0.61" (BCS), "BES chance
# floor ~0.06". Simulation set-up: the benchmark's family structure -- 2,592 facts; anchor 1
# query each; paraphrase 4 queries (315 facts: 3; 10,053 in all); format 3; context on 2,591
# facts (944: 2 queries, 1,647: 3; 6,829 in all); multilingual 5 queries on 2,402 facts
# (12,010) -- i.e. 39,260 main queries, each answered A or B with probability 1/2 (numpy
# seed 0), scored by the production path. The exact expectation over that structure
# (enumerating the binomial counts of every fact shape):
#   four perturbation families (no anchor): BCS 0.6110, BES 0.0577  <- the README's 0.61/0.06
#   with anchor as a fifth family:          BCS 0.6230, BES 0.0679  (anchor raises the floor,
#                                                                    README caveat 4)
# The simulation's standard error is about 0.0017 for both means; the simulated means must lie
# within 4 standard errors of the exact values.


def benchmark_structure():
    facts = []
    for i in range(2592):
        fam = {"anchor": 1, "paraphrase": 3 if i < 315 else 4, "format": 3}
        if i < 2591:
            fam["context"] = 2 if i < 944 else 3
        if i < 2402:
            fam["multilingual"] = 5
        facts.append(fam)
    return facts


def exact_moments(structure, families):
    """E and Var of BCS and BES for one fact structure, two equiprobable answers."""
    ns = [structure[f] for f in families if f in structure]
    e_b = e_b2 = e_e = e_e2 = 0.0
    for ks in itertools.product(*(range(n + 1) for n in ns)):
        w = math.prod(comb(n, k) / 2 ** n for n, k in zip(ns, ks, strict=True))
        pa = sum(k / n for n, k in zip(ns, ks, strict=True)) / len(ns)
        bcs = max(pa, 1 - pa)
        probs = [p for p in (pa, 1 - pa) if p > 1e-15]
        bes = 1.0 if len(probs) == 1 else 1 + sum(p * math.log(p) for p in probs) / math.log(2)
        e_b += w * bcs
        e_b2 += w * bcs * bcs
        e_e += w * bes
        e_e2 += w * bes * bes
    return e_b, e_b2 - e_b ** 2, e_e, e_e2 - e_e ** 2


@pytest.mark.parametrize("families,bcs_exact,bes_exact", [
    (MAIN[1:], 0.6110, 0.0577), (MAIN, 0.6230, 0.0679)])
def test_chance_floors_by_simulation(families, bcs_exact, bes_exact):
    structure = benchmark_structure()
    rng = np.random.default_rng(0)
    rows = []
    for i, fam in enumerate(structure):
        for f, n in fam.items():
            for c in rng.integers(0, 2, size=n):
                rows.append(rec(f"fact_{i:06d}", f, "AB"[c], qid="q"))
    assert len(rows) == 39_260
    fb = fact_behavior(JudgedColumns.from_records(rows), families)
    cache: dict[tuple, tuple] = {}
    moments = []
    for fam in structure:
        key = tuple(sorted(fam.items()))
        if key not in cache:
            cache[key] = exact_moments(fam, families)
        moments.append(cache[key])
    m = np.array(moments)
    exact_bcs, exact_bes = m[:, 0].mean(), m[:, 2].mean()
    se_bcs = math.sqrt(m[:, 1].sum()) / len(m)
    se_bes = math.sqrt(m[:, 3].sum()) / len(m)
    assert exact_bcs == pytest.approx(bcs_exact, abs=1e-4)
    assert exact_bes == pytest.approx(bes_exact, abs=1e-4)
    assert abs(fb.bcs.mean() - exact_bcs) < 4 * se_bcs
    assert abs(fb.bes.mean() - exact_bes) < 4 * se_bes
    if "anchor" not in families:  # the README's rounded figures
        assert abs(exact_bcs - 0.61) < 0.005
        assert abs(exact_bes - 0.06) < 0.005


# ============================================================================ thresholds
def fact_with_share(fid, share_num, families=5, per_family=3):
    """Records whose family-balanced modal share is ``share_num / (families*per_family)``."""
    out = []
    left = share_num
    for t in range(families):
        k = min(per_family, left)
        left -= k
        out += [rec(fid, MAIN[t], "A", "CORRECT")] * k
        out += [rec(fid, MAIN[t], f"B{t}{j}") for j in range(per_family - k)]
    return out


@pytest.mark.parametrize("tau", [0.7, 0.8, 0.9])
def test_group_boundary_at_tau_is_stable(tau):
    # 5 families x 6 queries: BCS = k/30; k = 30*tau is exactly tau in exact arithmetic
    k = round(30 * tau)
    at = fact_with_share("fact_000001", k, per_family=6)
    below = fact_with_share("fact_000002", k - 1, per_family=6)
    records = at + below
    fb = fact_behavior(JudgedColumns.from_records(records), MAIN)
    assert fb.bcs[0] == pytest.approx(tau, abs=1e-12)
    assert fb.bcs[1] == pytest.approx(tau - 1 / 30, abs=1e-12)
    assert behavior_group(fb.bcs[0], "CORRECT", tau) == "Stable Correct"
    assert behavior_group(fb.bcs[1], "CORRECT", tau) == "Unstable"
    summary, facts = behavior_summary(JudgedColumns.from_records(records), MAIN, tau_b=tau)
    assert facts["with_anchor"].groups[tau].tolist() == ["Stable Correct", "Unstable"]


def test_float_rounding_does_not_move_a_fact_off_the_boundary():
    # p = (1 + 1 + 1 + 2/3 + 1/3) / 5 is 0.8 in exact arithmetic
    records = []
    for t, k in zip(MAIN, (3, 3, 3, 2, 1), strict=True):
        records += [rec("f", t, "A", "CORRECT")] * k + [rec("f", t, f"X{t}")] * (3 - k)
    fb = fact_behavior(JudgedColumns.from_records(records), MAIN)
    assert fb.bcs[0] == pytest.approx(0.8, abs=1e-12)
    assert behavior_group(fb.bcs[0], "CORRECT", 0.8) == "Stable Correct"


@pytest.mark.parametrize("modal,group", [
    ("CORRECT", "Stable Correct"), ("INCORRECT", "Stable Wrong"),
    ("ABSTAIN", "Stable Abstention"), ("AMBIGUOUS", "Stable Multiple"),
    ("REVIEW_REQUIRED", "Stable Review")])
def test_stable_groups_by_modal_correctness(modal, group):
    assert behavior_group(0.95, modal, 0.8) == group
    assert behavior_group(0.5, modal, 0.8) == "Unstable"


# ============================================================================ summary
def ragged_records():
    rs = []
    # fact 1: all five families, stable correct; anchor correct; real
    rs += [rec("fact_000001", f, "A", "CORRECT", relation="r1") for f in MAIN]
    # fact 2: no multilingual, stable wrong (anchor wrong); copy
    rs += [rec("fact_000002", f, "W", "INCORRECT", relation="r1", copy=True) for f in MAIN[:4]]
    # fact 3: anchor + paraphrase only, abstains everywhere
    rs += [rec("fact_000003", f, "ABSTAIN", "ABSTAIN", relation="r2") for f in MAIN[:2]]
    # fact 4: all five, unstable, anchor correct
    rs += [rec("fact_000004", f, c, "CORRECT" if c == "A" else "INCORRECT", relation="r2")
           for f, c in zip(MAIN, "ABCDA", strict=True)]
    # reverse/recognition answers never enter the main figures
    rs += [rec("fact_000001", "reverse", "Z", "INCORRECT", main=False,
               use_for_reverse_analysis=True),
           rec("fact_000002", "recognition", "W", "CORRECT", main=False,
               use_for_recognition_analysis=True)]
    return rs


def test_coverage_modes_on_ragged_facts_never_zero_fill():
    summary, facts = behavior_summary(JudgedColumns.from_records(ragged_records()), MAIN,
                                      tau_b=0.8, tau_sensitivity=[0.7, 0.9])
    fb = facts["with_anchor"].fb
    assert fb.bcs.tolist()[:3] == [1.0, 1.0, 1.0]  # ragged facts are not penalised
    r = summary["readings"]["with_anchor"]
    cf, fs = r["complete_family"]["fixed"]["all"], r["full_set"]["fixed"]["all"]
    assert (cf["n_facts"], fs["n_facts"]) == (2, 4)
    assert cf["bcs"] == pytest.approx((1.0 + 0.4) / 2)
    assert fs["bcs"] == pytest.approx((1.0 + 1.0 + 1.0 + 0.4) / 4)
    assert fs["family_coverage"] == {"anchor": 4, "context": 3, "format": 3,
                                     "multilingual": 2, "paraphrase": 4}
    assert fs["by_tau"]["0.8"]["counts"] == {"Stable Correct": 1, "Stable Wrong": 1,
                                            "Stable Abstention": 1, "Unstable": 1,
                                            "Stable Multiple": 0, "Stable Review": 0,
                                            "Unscorable": 0}
    assert fs["by_tau"]["0.8"]["stable_by_modal"]["ABSTAIN"] == 1


def test_every_block_partitions_and_counts_add_up():
    summary, _ = behavior_summary(JudgedColumns.from_records(random_dataset(3, 80)), MAIN,
                                  tau_b=0.8, tau_sensitivity=[0.7, 0.9])
    seen = 0
    for reading in summary["readings"].values():
        for cov in ("complete_family", "full_set"):
            for denom in ("fixed", "anchored"):
                blocks = reading[cov][denom]
                assert blocks["real"]["n_facts"] + blocks["copy"]["n_facts"] == \
                    blocks["all"]["n_facts"]
                for b in blocks.values():
                    if not b["n_facts"]:
                        continue
                    seen += 1
                    for shares in b["by_tau"].values():
                        assert sum(shares[k] for k in ("scr", "swr", "sar", "ur",
                                                       "stable_multiple", "stable_review",
                                                       "unscorable")) == pytest.approx(1.0)
                        assert sum(shares["counts"].values()) == b["n_facts"]
                    assert b["relation_macro"]["n_relations"] == len(b["per_relation"])
                    assert sum(x["n_facts"] for x in b["per_relation"].values()) == b["n_facts"]
    assert seen >= 20


def test_anchored_denominator_and_real_copy_split():
    summary, facts = behavior_summary(JudgedColumns.from_records(ragged_records()), MAIN,
                                      tau_b=0.8)
    fs = summary["readings"]["with_anchor"]["full_set"]
    # anchors: fact 1 correct, fact 2 wrong, fact 3 abstain, fact 4 correct -> K_m = {1, 4}
    assert fs["fixed"]["all"]["anchor_accuracy"] == pytest.approx(0.5)
    assert fs["anchored"]["all"]["n_facts"] == 2
    assert fs["anchored"]["all"]["scr"] == pytest.approx(0.5)
    assert fs["fixed"]["copy"]["n_facts"] == 1 and fs["fixed"]["copy"]["swr"] == 1.0
    assert fs["fixed"]["real"]["n_facts"] == 3
    # the without-anchor reading is reported beside it; fact 3 keeps only paraphrase
    wo = summary["readings"]["without_anchor"]
    assert wo["families_configured"] == MAIN[1:]
    assert wo["full_set"]["fixed"]["all"]["n_facts"] == 4
    assert summary["reverse"]["all"]["n_queries"] == 1
    assert summary["reverse"]["all"]["accuracy"] == 0.0
    assert summary["recognition"]["all"]["accuracy"] == 1.0
    assert GROUPS == ("Stable Correct", "Stable Wrong", "Stable Abstention", "Unstable")


def test_config_without_anchor_reports_the_with_anchor_reading_too():
    summary, facts = behavior_summary(JudgedColumns.from_records(ragged_records()), MAIN[1:],
                                      tau_b=0.8)
    assert summary["primary_reading"] == "without_anchor"
    assert list(summary["readings"]) == ["without_anchor", "with_anchor"]
    assert facts["with_anchor"].fb.families == tuple(sorted(MAIN))
