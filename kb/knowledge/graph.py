"""The knowledge as one networkx graph: the formulas and the flows' nodes.

In: the compiled formulas and flows (kb.knowledge.build builds the graph once, while it checks the
rules). Out: `knowledge_graph`, an nx.DiGraph whose nodes are
- each formula, by its name (attribute kind "formula"), and
- each flow node, as "flow/node" (the id an Answer's path uses; kind "flow"),
with three kinds of edge (attribute kind):
- "reads": formula → each formula whose expression or condition reads it,
- "flow": flow node → the flow node an edge of it leads to (the Edge, with its condition and label),
- "computes": flow node → each formula the node computes.

What the engine needs from it is computed here at build and stored with the knowledge (and in
its snapshot), so answering a query never imports networkx: `evaluation_orders` (each formula
after its ancestors among the formulas, in topological order), `flow_layers` (each flow's nodes
in topological generations, for the pictures), `formula_cycles` and `flow_cycle` (the errors).
Formula names are identifiers and never hold a "/", so the two kinds of node cannot collide.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeAlias

import networkx as nx

from kb.knowledge.data import Edge, Flow, Formula

Layers = tuple[tuple[str, ...], ...]
Graph: TypeAlias = "nx.DiGraph[str]"      # nodes by name: a formula, or flow/node


def flow_key(flow_id: str, node_id: str) -> str:
    return f"{flow_id}/{node_id}"


def knowledge_graph(formulas: Mapping[str, Formula], flows: Iterable[Flow] = ()) -> Graph:
    """The graph of these formulas and flows. A formula's "reads" edges come in the order its
    expressions name them, which fixes the order a formula's ancestors are computed in."""
    g: Graph = nx.DiGraph()
    for name in formulas:
        g.add_node(name, kind="formula")
    for name, f in formulas.items():
        for dep in f.deps:
            if dep in formulas:
                g.add_edge(dep, name, kind="reads")
    for flow in flows:
        add_flow(g, flow)
    return g


def add_flow(g: Graph, flow: Flow) -> None:
    """Add one flow's nodes, its edges and its "computes" edges to the graph. An edge to a node
    the flow lacks is left out (the rule check reports it)."""
    for node in flow.nodes.values():
        g.add_node(flow_key(flow.id, node.id), kind="flow", flow=flow.id, node=node.id,
                   node_kind=node.kind, text=node.text)
    for node in flow.nodes.values():
        here = flow_key(flow.id, node.id)
        for edge in node.edges:
            if edge.to in flow.nodes:
                g.add_edge(here, flow_key(flow.id, edge.to), kind="flow", edge=edge)
        for name in node.compute:
            if g.nodes.get(name, {}).get("kind") == "formula":
                g.add_edge(here, name, kind="computes")


def formulas_only(g: Graph) -> Graph:
    """The formulas and their "reads" edges (a view)."""
    view: Graph = nx.subgraph_view(g, filter_node=lambda n: g.nodes[n]["kind"] == "formula")
    return view


def flow_only(g: Graph, flow_id: str) -> Graph:
    """One flow's nodes and the edges between them (a view)."""
    view: Graph = nx.subgraph_view(g, filter_node=lambda n: g.nodes[n].get("flow") == flow_id)
    return view


def evaluation_orders(g: Graph) -> dict[str, tuple[str, ...]]:
    """Formula → its ancestors among the formulas, then itself, in topological order: the
    depth-first postorder along the "reads" edges walked backwards, each formula's inputs in the
    order its expressions name them (the order an answer's trace lists the steps in)."""
    back = formulas_only(g).reverse(copy=True)    # a plain graph: searching a filtered view costs n times more
    return {name: tuple(nx.dfs_postorder_nodes(back, name)) for name in back}


def formula_cycles(g: Graph) -> list[list[str]]:
    """Each cycle among the formulas as a depth-first search from every formula (in file order)
    along what it reads meets it: [a, b, …, a], starting at the formula met again."""
    back = formulas_only(g).reverse(copy=False)
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for _, v, kind in nx.dfs_labeled_edges(back):
        if kind == "forward":
            stack.append(v)
            on_stack.add(v)
        elif kind == "reverse":
            on_stack.discard(stack.pop())
        elif kind == "nontree" and v in on_stack:
            cycles.append(stack[stack.index(v):] + [v])
    return cycles


def out_edges(g: Graph, flow: Flow) -> dict[str, tuple[Edge, ...]]:
    """Each node of the flow → the edges it leaves by in the graph, in the order they were
    added (the order the walk tries their conditions in). The flow's nodes read their edges
    from here, so what the walk follows is the graph."""
    out: dict[str, tuple[Edge, ...]] = {}
    for node_id in flow.nodes:
        here = flow_key(flow.id, node_id)
        out[node_id] = tuple(data["edge"] for _, _, data in g.out_edges(here, data=True)
                             if data["kind"] == "flow")
    return out


def flow_cycle(g: Graph, flow: Flow) -> list[str] | None:
    """A cycle among the flow's nodes reached from its entry, as node ids [a, …, a], or None."""
    try:
        cycle = nx.find_cycle(flow_only(g, flow.id), source=flow_key(flow.id, flow.entry))
    except nx.NetworkXNoCycle:
        return None
    return [g.nodes[u]["node"] for u, _ in cycle] + [g.nodes[cycle[-1][1]]["node"]]


def unreachable(g: Graph, flow: Flow) -> list[str]:
    """The flow's nodes that cannot be reached from its entry, in the flow's order."""
    entry = flow_key(flow.id, flow.entry)
    reachable = nx.descendants(flow_only(g, flow.id), entry) | {entry}
    return [n for n in flow.nodes if flow_key(flow.id, n) not in reachable]


def flow_layers(g: Graph, flow: Flow) -> Layers:
    """The flow's nodes in layers: the topological generations of its subgraph, so a node sits
    one layer below the lowest of its parents; within a layer, in the flow's order."""
    position = {n: i for i, n in enumerate(flow.nodes)}
    return tuple(tuple(sorted((g.nodes[k]["node"] for k in generation), key=position.__getitem__))
                 for generation in nx.topological_generations(flow_only(g, flow.id)))


def layers_of(flow: Flow) -> Layers:
    """The flow's layers: as built with the knowledge, or (a flow made by hand) from a graph of
    this flow alone."""
    return flow.layers or flow_layers(knowledge_graph({}, [flow]), flow)
