"""D4 LinkSim (spec §1 D4, R1 revision replacing GED).

.. math::

    LinkSim = 0.35 F1_{node} + 0.35 F1_{edge} + 0.30 SubIso

* ``F1_node`` / ``F1_edge``: set F1 over node labels and over ``(label(source), label(target),
  edge_type)`` triples (labels normalised), so node ids never have to agree.
* ``SubIso = |{p in P_gold : p occurs in G_pred}| / |P_gold|``. A pattern *occurs* when an
  injective map of its nodes into the predicted graph keeps node labels and maps every pattern
  edge onto a predicted edge of the same type: a subgraph **monomorphism** (extra predicted edges
  among the matched nodes do not hide a pattern; the spec's "isomorphic" is read this way).
  Exact matching uses :class:`networkx.algorithms.isomorphism.DiGraphMatcher`.
* Fallback (the spec's "engineering substitute"): when networkx is not installed or the predicted
  graph has more than ``exact_max_nodes`` nodes, each pattern scores
  ``1 - cost / (|V_p| + |E_p|)`` where ``cost`` is the edit cost induced by a Riesen-Bunke
  bipartite assignment (Hungarian, :func:`scipy.optimize.linear_sum_assignment`, O(n^3)). The
  induced cost is an upper bound of the pattern-to-subgraph edit distance, so the similarity is
  a lower bound in [0, 1]; it is 1 whenever the assignment finds an occurrence.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from fks.evalharness.components import set_f1
from fks.evalharness.inputs import CausalGraph, PatternGraph
from fks.text import normalize

__all__ = [
    "LINKSIM_WEIGHTS",
    "node_keys",
    "edge_keys",
    "pattern_occurs",
    "pattern_similarity_bound",
    "subiso_score",
    "link_similarity",
]

LINKSIM_WEIGHTS = {"f1_node": 0.35, "f1_edge": 0.35, "subiso": 0.30}

_HAS_NETWORKX = importlib.util.find_spec("networkx") is not None

Graph = CausalGraph | PatternGraph


def _labels(graph: Graph) -> dict[str, str]:
    return {n.id: normalize(n.label) for n in graph.nodes}


def node_keys(graph: Graph) -> set[str]:
    """Normalised node labels of ``graph``."""
    return set(_labels(graph).values())


def edge_keys(graph: Graph) -> set[tuple[str, str, str]]:
    """``(label(source), label(target), edge_type)`` triples of ``graph`` (normalised)."""
    lab = _labels(graph)
    return {(lab[e.source], lab[e.target], normalize(e.edge_type)) for e in graph.edges}


def _typed_adjacency(graph: Graph) -> dict[tuple[str, str], set[str]]:
    adj: dict[tuple[str, str], set[str]] = {}
    for e in graph.edges:
        adj.setdefault((e.source, e.target), set()).add(normalize(e.edge_type))
    return adj


def pattern_occurs(pattern: PatternGraph, graph: CausalGraph) -> bool:
    """Test exactly whether ``pattern`` maps into ``graph`` (labels, edge types kept).

    Uses networkx's VF2 ``subgraph_is_monomorphic``; edges between the same ordered node pair
    are collapsed into a set of types, and a pattern edge needs its types among the graph's.
    """
    import networkx as nx
    from networkx.algorithms.isomorphism import DiGraphMatcher

    def build(g: Graph) -> nx.DiGraph:
        out = nx.DiGraph()
        for node_id, label in _labels(g).items():
            out.add_node(node_id, label=label)
        for (u, v), types in _typed_adjacency(g).items():
            out.add_edge(u, v, types=frozenset(types))
        return out

    matcher = DiGraphMatcher(
        build(graph),
        build(pattern),
        node_match=lambda a, b: a["label"] == b["label"],
        edge_match=lambda a, b: b["types"] <= a["types"],
    )
    return bool(matcher.subgraph_is_monomorphic())


def _star(graph: Graph, node_id: str) -> tuple[Counter[str], Counter[str]]:
    out_types: Counter[str] = Counter()
    in_types: Counter[str] = Counter()
    for e in graph.edges:
        if e.source == node_id:
            out_types[normalize(e.edge_type)] += 1
        if e.target == node_id:
            in_types[normalize(e.edge_type)] += 1
    return out_types, in_types


def pattern_similarity_bound(pattern: PatternGraph, graph: CausalGraph) -> float:
    """Riesen-Bunke bound: ``1 - cost / (|V_p| + |E_p|)`` in [0, 1] (see module docstring).

    Cost matrix (n pattern nodes x (m graph nodes + n deletions)): substituting pattern node u by
    graph node v costs ``[label(u) != label(v)]`` plus half the pattern star edges (typed, per
    direction) that v's star lacks; deleting u costs ``1 + deg(u) / 2``. The Hungarian
    assignment's *induced* edit cost (label mismatches, deleted nodes, pattern edges not mapped
    onto an edge of the same type) is the upper bound used.
    """
    p_nodes = [n.id for n in pattern.nodes]
    g_nodes = [n.id for n in graph.nodes]
    n, m = len(p_nodes), len(g_nodes)
    p_lab, g_lab = _labels(pattern), _labels(graph)
    p_star = {u: _star(pattern, u) for u in p_nodes}
    g_star = {v: _star(graph, v) for v in g_nodes}
    big = 1e9
    cost = np.full((n, m + n), big)
    for i, u in enumerate(p_nodes):
        pu_out, pu_in = p_star[u]
        for j, v in enumerate(g_nodes):
            gv_out, gv_in = g_star[v]
            missing = sum((pu_out - gv_out).values()) + sum((pu_in - gv_in).values())
            cost[i, j] = float(p_lab[u] != g_lab[v]) + 0.5 * missing
        cost[i, m + i] = 1.0 + 0.5 * (sum(pu_out.values()) + sum(pu_in.values()))
    rows, cols = linear_sum_assignment(cost)
    mapping = {p_nodes[i]: g_nodes[j] for i, j in zip(rows, cols, strict=True) if j < m}
    induced = float(n - len(mapping))  # deleted pattern nodes
    induced += sum(1.0 for u, v in mapping.items() if p_lab[u] != g_lab[v])
    g_adj = _typed_adjacency(graph)
    for e in pattern.edges:
        a, b = mapping.get(e.source), mapping.get(e.target)
        if a is None or b is None or normalize(e.edge_type) not in g_adj.get((a, b), set()):
            induced += 1.0
    total = n + len(pattern.edges)
    return max(0.0, 1.0 - induced / total)


def subiso_score(
    patterns: list[PatternGraph], graph: CausalGraph, *, exact_max_nodes: int = 200
) -> tuple[float | None, str, dict[str, float]]:
    """``SubIso`` over ``patterns`` (P_gold) in ``graph``.

    Returns:
        ``(score, method, per_pattern)``: ``score`` is ``None`` when P_gold is empty (undefined);
        ``method`` is ``"networkx_monomorphism"`` or ``"hungarian_ged_bound"``; ``per_pattern``
        maps each pattern name to its 0/1 occurrence or bounded similarity.
    """
    exact = _HAS_NETWORKX and len(graph.nodes) <= exact_max_nodes
    method = "networkx_monomorphism" if exact else "hungarian_ged_bound"
    if not patterns:
        return None, method, {}
    per: dict[str, float] = {}
    for k, p in enumerate(patterns):
        name = p.name if p.name not in per else f"{p.name}#{k}"
        if exact:
            per[name] = 1.0 if pattern_occurs(p, graph) else 0.0
        else:
            per[name] = pattern_similarity_bound(p, graph) if graph.nodes else 0.0
    return float(np.mean(list(per.values()))), method, per


def link_similarity(
    pred: CausalGraph, gold: CausalGraph, patterns: list[PatternGraph], *, exact_max_nodes: int
) -> dict[str, Any]:
    """``LinkSim = 0.35 F1_node + 0.35 F1_edge + 0.30 SubIso`` and its parts.

    Returns:
        ``{"f1_node", "f1_edge", "subiso", "subiso_method", "subiso_patterns", "linksim"}``;
        ``linksim`` and ``subiso`` are ``None`` when P_gold is empty.
    """
    f1_node = set_f1(node_keys(pred), node_keys(gold))
    f1_edge = set_f1(edge_keys(pred), edge_keys(gold))
    subiso, method, per = subiso_score(patterns, pred, exact_max_nodes=exact_max_nodes)
    linksim = None
    if subiso is not None:
        parts = {"f1_node": f1_node, "f1_edge": f1_edge, "subiso": subiso}
        linksim = sum(LINKSIM_WEIGHTS[k] * v for k, v in parts.items())
    return {
        "f1_node": f1_node,
        "f1_edge": f1_edge,
        "subiso": subiso,
        "subiso_method": method,
        "subiso_patterns": per,
        "linksim": linksim,
    }
