"""The knowledge graph (kb.knowledge.graph): formulas and flow nodes in one networkx DiGraph, and what
the engine and the pictures read from it: each formula's evaluation order, each flow's layers.

The expectations are checked against the rule files' own text (each formula's `deps`, each
flow node's edges and `compute` list) with simple searches written here, not against the graph.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kb.expr import parse as ex
from kb.knowledge.graph import (evaluation_orders, flow_key, flow_layers, formula_cycles,
                      knowledge_graph, layers_of)
from kb.knowledge.build import build
from kb.knowledge.data import Case, Edge, Flow, Formula, Node
from kb.paths import rules_dir
from kb.knowledge.snapshot import from_data, to_data

KN = build(rules_dir())


def _formula(name: str, text: str) -> Formula:
    e = ex.parse(text)
    return Formula(name, "1", name, (Case(None, e, None),), (), "f:1", e.names,
                   tuple(e.names), False, None)


def _reads(name: str) -> set[str]:
    """Every formula `name` needs, by a breadth-first search over the formulas' `deps`."""
    seen: set[str] = set()
    todo = [d for d in KN.formulas[name].deps if d in KN.formulas]
    while todo:
        d = todo.pop()
        if d not in seen:
            seen.add(d)
            todo.extend(x for x in KN.formulas[d].deps if x in KN.formulas)
    return seen


def test_the_graph_has_every_formula_flow_node_and_edge() -> None:
    g = KN.graph
    flow_nodes = {flow_key(f.id, n) for f in KN.flows for n in f.nodes}
    assert set(g.nodes) == set(KN.formulas) | flow_nodes
    want = {(d, name, "reads") for name, f in KN.formulas.items() for d in f.deps if d in KN.formulas}
    want |= {(flow_key(f.id, n.id), flow_key(f.id, e.to), "flow")
             for f in KN.flows for n in f.nodes.values() for e in n.edges}
    want |= {(flow_key(f.id, n.id), c, "computes")
             for f in KN.flows for n in f.nodes.values() for c in n.compute}
    assert {(u, v, k) for u, v, k in g.edges(data="kind")} == want


def test_each_order_is_the_formulas_ancestors_then_itself_each_after_what_it_reads() -> None:
    for name, order in KN.derived.order.items():
        assert order[-1] == name
        assert len(set(order)) == len(order), name
        assert set(order[:-1]) == _reads(name), name
        position = {n: i for i, n in enumerate(order)}
        for n in order:
            for d in KN.formulas[n].deps:
                if d in KN.formulas:
                    assert position[d] < position[n], (name, d, n)


def test_an_order_by_hand() -> None:
    # c reads b then a, b reads a, d reads c: each input before its reader, in the order the
    # expression names them (b's own input a first), so d's order is a, b, c, d.
    fs = {n: _formula(n, t) for n, t in
          (("a", "x + 1"), ("b", "a * 2"), ("c", "b + a"), ("d", "c - 1"))}
    orders = evaluation_orders(knowledge_graph(fs))
    assert orders["d"] == ("a", "b", "c", "d")
    assert orders["c"] == ("a", "b", "c")
    assert orders["a"] == ("a",)


def test_a_formula_cycle_is_found_from_the_formula_met_again() -> None:
    fs = {n: _formula(n, t) for n, t in (("a", "b + 1"), ("b", "c + 1"), ("c", "b * 2"))}
    assert formula_cycles(knowledge_graph(fs)) == [["b", "c", "b"]]
    assert formula_cycles(knowledge_graph({"s": _formula("s", "s + 1")})) == [["s", "s"]]


def _longest_from_entry(flow: Flow) -> dict[str, int]:
    """Each node's depth: the longest path from the entry, by relaxing every edge once per node
    (Bellman-Ford on negated weights; a flow is acyclic)."""
    depth = {flow.entry: 0}
    for _ in flow.nodes:
        for n in flow.nodes.values():
            for e in n.edges:
                if n.id in depth:
                    depth[e.to] = max(depth.get(e.to, 0), depth[n.id] + 1)
    return depth


def test_every_flow_edge_goes_down_the_layers() -> None:
    for flow in KN.flows:
        layer = {n: i for i, nodes in enumerate(flow.layers) for n in nodes}
        assert sorted(layer) == sorted(flow.nodes)
        assert sum(len(x) for x in flow.layers) == len(flow.nodes)
        assert layer == _longest_from_entry(flow), flow.id
        for n in flow.nodes.values():
            for e in n.edges:
                assert layer[n.id] < layer[e.to], (flow.id, n.id, e.to)


def test_a_flow_made_by_hand_is_layered_from_its_own_graph() -> None:
    # a → b, a → c, b → c: c sits below b (its lowest parent), not beside it
    nodes = {"a": Node("a", "question", "A?", (), (Edge("b", None, None), Edge("c", None, None)), None, "f:1"),
             "b": Node("b", "question", "B?", (), (Edge("c", None, None),), None, "f:2"),
             "c": Node("c", "verdict", "C", (), (), None, "f:3")}
    flow = Flow("t", "T", "advice", 1, "s", "a", nodes, [], "f")
    assert layers_of(flow) == (("a",), ("b",), ("c",))
    assert flow_layers(knowledge_graph({}, [flow]), flow) == (("a",), ("b",), ("c",))


def test_the_snapshot_keeps_what_the_graph_gave() -> None:
    again = from_data(json.loads(json.dumps(to_data(KN))), KN.root)
    assert again.graph is None
    assert dict(again.derived.order) == dict(KN.derived.order)
    assert [f.layers for f in again.flows] == [f.layers for f in KN.flows]
    rebuilt = knowledge_graph(again.formulas, again.flows)
    assert set(rebuilt.edges(data="kind")) == set(KN.graph.edges(data="kind"))


@pytest.mark.parametrize("query", ["serve 70B int4 16 users"])
def test_a_query_from_the_snapshot_does_not_import_networkx(tmp_path: Path, query: str) -> None:
    env = {**os.environ, "KBQ_CACHE_DIR": str(tmp_path)}
    env.pop("KBQ_NO_CACHE", None)
    subprocess.run([sys.executable, "-c", "from kb import get_knowledge; get_knowledge()"],
                   env=env, check=True)
    code = (f"import sys; from kb.cli.main import main; main(['--json', {query!r}]); "
            "print('networkx' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True)
    assert done.stderr.strip().splitlines()[-1] == "False"
