"""Issue 13 point 2: behaviour classes as spec §6.3 defines them, unscorable facts apart,
empty answers visible."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest
from test_behavior import MAIN, rec

from fks.metrics.behavior import (
    ALL_GROUPS,
    JudgedColumns,
    answer_coverage_line,
    behavior_summary,
    compute_bcs_bes,
    fact_behavior,
    per_fact_rows,
    per_query_rows,
)


def failed(fact, family, *, how="error", relation="r1"):
    """A main record that is not an answer: a generation error, an empty answer, a judge
    failure or an unparseable output (what the judge makes of each)."""
    if how == "error":
        return rec(fact, family, "UNPARSEABLE", "REVIEW_REQUIRED", relation=relation,
                   generation_status="timeout", raw_response="", status="UNPARSEABLE")
    if how == "empty":
        return rec(fact, family, "UNPARSEABLE", "REVIEW_REQUIRED", relation=relation,
                   raw_response="", status="UNPARSEABLE")
    if how == "judge":
        return rec(fact, family, "REVIEW_REQUIRED", "REVIEW_REQUIRED", relation=relation,
                   raw_response="Paris, I think", status="UNPARSEABLE")
    return rec(fact, family, "UNPARSEABLE", "REVIEW_REQUIRED", relation=relation,
               raw_response="hmm well", status="UNPARSEABLE")


def summary_of(records, tau=0.8):
    return behavior_summary(JudgedColumns.from_records(records), MAIN, tau_b=tau)


def test_all_errored_fact_is_unscorable_not_stable_abstention():
    """Before: BCS = 1 (one UNPARSEABLE cluster) and Stable Abstention."""
    records = [failed("fact_000001", f) for f in MAIN]
    records += [rec("fact_000002", f, "A", "CORRECT", raw_response="Paris") for f in MAIN]
    summary, facts = summary_of(records)
    fb = facts["with_anchor"].fb
    assert fb.fact_ids.tolist() == ["fact_000001", "fact_000002"]  # still in the fixed N
    assert not fb.scorable[0] and fb.scorable[1]
    assert facts["with_anchor"].groups[0.8].tolist() == ["Unscorable", "Stable Correct"]
    block = summary["readings"]["with_anchor"]["full_set"]["fixed"]["all"]
    assert block["n_facts"] == 2 and block["n_unscorable"] == 1 and block["n_scorable"] == 1
    assert block["sar"] == 0.0 and block["scr"] == 0.5 and block["unscorable"] == 0.5
    assert block["bcs"] == 1.0  # the mean over scorable facts: fact 2 only
    rows = per_fact_rows("m", facts, tau_b=0.8, taus=[0.8])
    assert rows[0]["bcs"] is None and rows[0]["bes"] is None
    assert rows[0]["behavior_group"] == "Unscorable" and rows[0]["modal_cluster"] is None
    assert rows[0]["n_main_records"] == 5 and rows[0]["n_scorable_answers"] == 0
    with pytest.raises(ValueError, match="No valid main-family queries"):
        compute_bcs_bes(records[:5], MAIN)


@pytest.mark.parametrize("how", ["error", "empty", "judge", "unparseable"])
def test_non_answers_never_make_a_fact_stable(how):
    # three families fail, two answer with different clusters: below half the families
    records = [failed("f", f, how=how) for f in MAIN[:3]]
    records += [rec("f", MAIN[3], "A", "CORRECT"), rec("f", MAIN[4], "B")]
    summary, facts = summary_of(records)
    assert facts["with_anchor"].groups[0.8].tolist() == ["Unscorable"]
    reason = {"error": "generation_error", "judge": "judge_failure"}.get(how, how)
    cov = summary["records"]["main_by_family"]
    assert cov["anchor"][reason] == 1 and cov["anchor"]["scorable"] == 0
    qrows = per_query_rows(JudgedColumns.from_records(records), facts["with_anchor"], MAIN)
    assert [r["unscorable_reason"] for r in qrows[:3]] == [reason] * 3
    assert all(r["cluster_probability"] is None for r in qrows)


def test_failed_queries_leave_the_distribution_like_missing_ones():
    # anchor errored, the other four answer A (3 of 5 families needed): BCS 1 over four
    records = [failed("f", "anchor")] + [rec("f", f, "A", "CORRECT") for f in MAIN[1:]]
    records += [failed("f", "paraphrase", how="empty")]  # a second paraphrase, empty
    summary, facts = summary_of(records)
    fb = facts["with_anchor"].fb
    assert fb.scorable.tolist() == [True]
    assert fb.bcs[0] == 1.0 and fb.valid_families(0) == sorted(MAIN[1:])
    assert fb.has_family[0].all()  # coverage still counts the errored anchor
    assert facts["with_anchor"].groups[0.8].tolist() == ["Stable Correct"]


def test_stable_abstention_is_modal_abstain_and_the_rest_stay_visible():
    records = []
    records += [rec("f1", f, "ABSTAIN", "ABSTAIN") for f in MAIN]
    records += [rec("f2", f, "MULTIPLE", "AMBIGUOUS") for f in MAIN]
    records += [rec("f3", f, "ENTITY_Q1", "REVIEW_REQUIRED") for f in MAIN]  # ungrounded
    records += [rec("f4", f, "W", "INCORRECT") for f in MAIN]
    records += [failed("f5", f, how="judge") for f in MAIN]
    summary, facts = summary_of(records)
    assert facts["with_anchor"].groups[0.8].tolist() == [
        "Stable Abstention", "Stable Multiple", "Stable Review", "Stable Wrong", "Unscorable"]
    shares = summary["readings"]["with_anchor"]["full_set"]["fixed"]["all"]["by_tau"]["0.8"]
    # the four §6 shares, each a count over the fixed |D_eval| = 5
    assert (shares["scr"], shares["swr"], shares["sar"], shares["ur"]) == (0, 0.2, 0.2, 0)
    assert shares["stable_multiple"] == shares["stable_review"] == shares["unscorable"] == 0.2
    assert shares["shares_total"] == 1.0
    assert set(shares["counts"]) == set(ALL_GROUPS)
    assert shares["stable_by_modal"] == {"CORRECT": 0, "INCORRECT": 1, "ABSTAIN": 1,
                                         "AMBIGUOUS": 1, "REVIEW_REQUIRED": 1}


def test_anchored_denominator_keeps_an_unscorable_fact():
    # anchor correct (K_m), every other family timed out: in the anchored N, unscorable
    records = [rec("f1", "anchor", "A", "CORRECT")] + [failed("f1", f) for f in MAIN[1:]]
    records += [rec("f2", f, "A", "CORRECT") for f in MAIN]
    summary, _ = summary_of(records)
    anchored = summary["readings"]["with_anchor"]["full_set"]["anchored"]["all"]
    assert anchored["n_facts"] == 2 and anchored["n_unscorable"] == 1
    assert anchored["scr"] == 0.5 and anchored["unscorable"] == 0.5


def test_empty_answers_per_family_are_in_the_summary_and_the_line():
    records = []
    for i in range(4):
        fid = f"fact_{i:06d}"
        for f in MAIN:
            empty = f == "format" or (f == "anchor" and i < 2)
            records.append(failed(fid, f, how="empty") if empty
                           else rec(fid, f, "A", "CORRECT", raw_response="Paris"))
    summary, _ = summary_of(records)
    cov = summary["records"]["main_by_family"]
    assert cov["format"]["empty_share"] == 1.0 and cov["anchor"]["empty_share"] == 0.5
    assert cov["paraphrase"]["empty_share"] == 0.0 and cov["format"]["scorable_share"] == 0.0
    line = answer_coverage_line(summary)
    assert "format 100%" in line and "anchor 50%" in line and "empty 6" in line


@pytest.mark.parametrize("seed", range(6))
def test_production_path_equals_kernel_with_failures(seed):
    rng = random.Random(seed)
    records = []
    for i in range(50):
        fid = f"fact_{i:06d}"
        for fam in MAIN:
            for _ in range(rng.randint(1, 3)):
                if rng.random() < 0.3:
                    records.append(failed(fid, fam, how=rng.choice(
                        ["error", "empty", "judge", "unparseable"])))
                else:
                    c = f"C{rng.randrange(3)}"
                    records.append(rec(fid, fam, c, "CORRECT" if c == "C0" else "INCORRECT"))
    fb = fact_behavior(JudgedColumns.from_records(records), MAIN)
    by_fact = defaultdict(list)
    for r in records:
        by_fact[r["fact_id"]].append(r)
    n_unscorable = 0
    for i, fid in enumerate(fb.fact_ids.tolist()):
        if not fb.scorable[i]:
            n_unscorable += 1
            assert len(fb.valid_families(i)) < 3
            continue
        k = compute_bcs_bes(by_fact[fid], MAIN)
        assert fb.bcs[i] == pytest.approx(k["bcs"], abs=1e-12)
        assert fb.bes[i] == pytest.approx(k["bes"], abs=1e-12)
        assert fb.modal_cluster[i] == k["modal_cluster"]
        assert fb.valid_families(i) == k["valid_families"]
        assert fb.distribution(i) == pytest.approx(k["cluster_distribution"], abs=1e-12)
    assert len(fb.fact_ids) == 50 and n_unscorable < 50
