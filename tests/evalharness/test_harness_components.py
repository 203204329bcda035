"""Component kernels and the D4 graph similarity."""

from __future__ import annotations

import pytest

from fks.evalharness.components import (
    confusion_matrix,
    frequency_tier_weights,
    kl_score,
    macro_accuracy,
    mae_score,
    mape_score,
    norm_set,
    penalized_entity_f1,
    rank_correlation,
    rescaled_rank_correlation,
    set_prf,
    weighted_and_macro_f1,
)
from fks.evalharness.graph import pattern_occurs, pattern_similarity_bound, subiso_score
from fks.evalharness.inputs import CausalGraph, PatternGraph


def test_vacuous_rule_for_empty_gold():
    assert set_prf(set(), set()) == (1.0, 1.0, 1.0)
    assert set_prf({"x"}, set()) == (0.0, 0.0, 0.0)
    assert set_prf(set(), {"x"}) == (0.0, 0.0, 0.0)


def test_norm_set_normalises_and_drops_blanks():
    assert norm_set(["  Zürich ", "ZURICH", None, " "]) == {"zurich"}


def test_penalty_only_beyond_twice_gold():
    # 4 predicted for 2 gold: no decay (P = 0.5, R = 1, F1 = 2/3)
    at_limit = penalized_entity_f1({"a", "b", "c", "d"}, {"a", "b"})
    assert at_limit["penalty"] == 1.0 and at_limit["f1"] == pytest.approx(2 / 3)
    # 6 predicted: P = 1/3 decayed by 4/6 -> 2/9; F1 = 2*(2/9)/(2/9 + 1) = 4/11
    beyond = penalized_entity_f1({"a", "b", "c", "d", "e", "f"}, {"a", "b"})
    assert beyond["penalty"] == pytest.approx(2 / 3)
    assert beyond["f1"] == pytest.approx(4 / 11)


def test_rank_correlation_conventions():
    gold = {"a": 3.0, "b": 2.0, "c": 1.0}
    assert rank_correlation({"a": 1, "b": 2, "c": 3}, gold) == pytest.approx(-1.0)
    assert rescaled_rank_correlation({"a": 1, "b": 2, "c": 3}, gold) == pytest.approx(0.0)
    # a gold key the prediction omits ranks last: (a, b, c) -> (3, 2, 1) again
    assert rank_correlation({"a": 5, "b": 4}, gold) == pytest.approx(1.0)
    # constant prediction: no information -> rho 0, rho' 0.5
    assert rank_correlation({"a": 1, "b": 1, "c": 1}, gold) == 0.0
    assert rank_correlation({}, gold) == 0.0
    # gold too short or constant: undefined
    assert rank_correlation({"a": 1}, {"a": 1.0}) is None
    assert rank_correlation({"a": 1, "b": 2}, {"a": 1.0, "b": 1.0}) is None
    # Kendall: (a,b) and (a,c) concordant, (b,c) discordant -> (2 - 1)/3
    assert rank_correlation({"a": 3, "b": 1, "c": 2}, gold, method="kendall") == pytest.approx(
        1 / 3
    )
    with pytest.raises(ValueError, match="method"):
        rank_correlation({}, gold, method="pearson")


def test_numeric_terms():
    assert mape_score({"a": 150.0}, {"a": 100.0}) == pytest.approx(0.5)
    assert mape_score({"a": 400.0}, {"a": 100.0}) == 0.0  # MAPE 3 clipped at 1
    assert mape_score({}, {}) is None
    with pytest.raises(ValueError, match="is 0"):
        mape_score({"a": 1.0}, {"a": 0.0})
    assert mae_score({"x": 0}, {"x": 4}, max_error=8) == 0.5
    assert mae_score({}, {}, max_error=8) is None
    assert kl_score({"a": 1.0}, {"a": 1.0, "b": 1.0}) == pytest.approx(1 / (1 + 0.6931471805599453))
    assert kl_score({"a": 1.0, "b": 1.0}, {"a": 1.0}) == 0.0  # mass where gold has none
    assert kl_score({}, {"a": 1.0}) == 0.0
    assert kl_score({"a": 1.0}, {}) is None


def test_frequency_tiers_and_weighted_f1():
    counts = {f"l{k}": k for k in range(1, 7)}  # l1 rarest ... l6 commonest
    w = frequency_tier_weights(counts)
    assert [w[f"l{k}"] for k in range(1, 7)] == [2.0, 2.0, 1.0, 1.0, 0.5, 0.5]
    f1w, f1m = weighted_and_macro_f1({"l1": 0.0, "l6": 1.0}, w)
    assert f1w == pytest.approx(0.5 / 2.5) and f1m == 0.5
    assert weighted_and_macro_f1({}, w) == (1.0, 1.0)


def test_macro_accuracy_and_confusion():
    assert macro_accuracy([], []) is None
    assert macro_accuracy(["x", "y", "y"], [False, True, True]) == 0.5
    m = confusion_matrix(["a", "b", "b"], ["a", None, "a"], classes=["a", "b"])
    assert m == [[1, 0, 0], [1, 0, 1]]


# ------------------------------------------------------------------------------- graph
def _graph(edges, labels=None):
    ids = sorted({x for e in edges for x in e[:2]} | set(labels or {}))
    labels = labels or {}
    return CausalGraph(
        nodes=[{"id": i, "label": labels.get(i, i)} for i in ids],
        edges=[{"source": s, "target": t, "edge_type": k} for s, t, k in edges],
    )


def _pattern(edges):
    g = _graph(edges)
    return PatternGraph(name="p", nodes=g.nodes, edges=g.edges)


def test_pattern_occurs_is_a_typed_monomorphism():
    chain = _pattern([("a", "b", "causal"), ("b", "c", "causal")])
    big = _graph([("a", "b", "causal"), ("b", "c", "causal"), ("a", "c", "causal"),
                  ("c", "d", "other")])
    assert pattern_occurs(chain, big)  # the extra a->c edge does not hide it
    assert not pattern_occurs(chain, _graph([("a", "b", "causal"), ("b", "c", "other")]))
    # labels must match, ids need not
    relabelled = _graph([("x", "y", "causal"), ("y", "z", "causal")],
                        labels={"x": "a", "y": "b", "z": "c"})
    assert pattern_occurs(chain, relabelled)


def test_hungarian_bound_is_a_lower_bound_in_unit_interval():
    chain = _pattern([("a", "b", "causal"), ("b", "c", "causal")])
    present = _graph([("a", "b", "causal"), ("b", "c", "causal"), ("c", "d", "causal")])
    assert pattern_similarity_bound(chain, present) == 1.0
    # nothing in common: every node mislabelled or deleted, both edges missing -> 0
    assert pattern_similarity_bound(chain, _graph([("x", "y", "other")])) == 0.0
    # c maps onto q: one label substitution, both edges kept -> cost 1 of |V|+|E| = 5
    one_off = _graph([("a", "b", "causal"), ("b", "q", "causal")])
    assert pattern_similarity_bound(chain, one_off) == pytest.approx(0.8)


def test_subiso_undefined_without_patterns():
    score, method, per = subiso_score([], _graph([("a", "b", "causal")]))
    assert score is None and per == {}
    assert method == "networkx_monomorphism"
