"""Compiling the rule files' expressions: formulas, flows and claims, and the graph's orders.

In: validated formulas.yaml, flows/*.yaml and sources.yaml models, their documents, the unit of
every name, and the knowledge graph (kb.knowledge.graph). Out: compiled `Formula`, `Flow` and `Claim`
objects (kb.knowledge.data), each formula's evaluation order (`closures`) and whether it varies per GPU
(`mark_per_gpu`); problems go to the Collector (kb.knowledge.checks) with file:line:col.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import networkx as nx

from kb.expr import parse as ex
from kb.errors import nearest
from kb.knowledge.graph import (add_flow, evaluation_orders, flow_cycle, formula_cycles, knowledge_graph, out_edges,
                      unreachable)
from kb.knowledge.checks import (Collector, NeedSource, check_unit, col_offset, compile_expr, is_gpu_name,
                                 unique)
from kb.knowledge.loader import Doc
from kb.knowledge.data import GPU_INPUT_PREFIX, TEMPLATE_FIELD, TEMPLATE_SPEC, Case, Claim, Edge, Flow, Formula, Node
from kb.knowledge.schema import FlowFile, NodeSchema
from kb.knowledge.schema import FormulasFile, SourcesFile


def compile_formulas(doc: Doc, ffile: FormulasFile, units: dict[str, ex.Unit],
                      errs: Collector) -> dict[str, Formula]:
    out: dict[str, Formula] = {}
    for name, f in ffile.formulas.items():
        base = ("formulas", name)
        if (f.expr is None) == (f.cases is None):
            errs.add(doc.error(base, f"formula '{name}' needs either expr or cases (one of them)"))
            continue
        raw_cases: list[tuple[Any, ...]] = [(None, f.expr, None, base + ("expr",), None)] if f.expr is not None else [
            (c.when, c.expr, c.note, base + ("cases", i, "expr"), base + ("cases", i, "when"))
            for i, c in enumerate(f.cases or [])]
        cases: list[Case] = []
        want = units[name]
        for when_text, expr_text, note, eloc, wloc in raw_cases:
            e = compile_expr(doc, eloc, expr_text, units, errs, want=want)
            w = compile_expr(doc, wloc, when_text, units, errs, want=ex.BOOL) if when_text else None
            if e is not None and (when_text is None or w is not None):
                cases.append(Case(w, e, note))
        if len(cases) != len(raw_cases):
            continue
        names: list[str] = []
        for c in cases:
            names.extend(c.expr.names)
            if c.when:
                names.extend(c.when.names)
        names = list(dict.fromkeys(names))
        deps = tuple(n for n in names if n in ffile.formulas)
        line = doc.pos(base + ("<key>",))[0]
        out[name] = Formula(name, f.unit, f.meaning, tuple(cases), tuple(f.sources),
                            f"{doc.display}:{line}", tuple(names), deps, False, f.note)
    return out


def closures(doc: Doc, graph: nx.DiGraph[str], errs: Collector) -> dict[str, tuple[str, ...]]:
    """For each formula, the formulas to compute before it (its ancestors in the graph, in
    topological order); cycles are errors."""
    for cycle in formula_cycles(graph):
        errs.add(doc.error(("formulas", cycle[0], "<key>"),
                           "formulas depend on each other in a cycle: " + " → ".join(cycle)))
    return {name: order[:-1] for name, order in evaluation_orders(graph).items()}


def mark_per_gpu(formulas: dict[str, Formula], closure: dict[str, tuple[str, ...]]) -> dict[str, Formula]:
    direct = {n for n, f in formulas.items() if any(is_gpu_name(x) for x in f.names)}
    out = {}
    for name, f in formulas.items():
        per_gpu = name in direct or any(d in direct for d in closure.get(name, ()))
        out[name] = Formula(f.name, f.unit, f.meaning, f.cases, f.sources, f.where, f.names,
                            f.deps, per_gpu, f.note)
    return out


def compile_flow(doc: Doc, flow: FlowFile, units: dict[str, ex.Unit], formulas: set[str],
                  need_source: NeedSource, errs: Collector, graph: nx.DiGraph[str]) -> Flow:
    """`formulas`: every declared formula name (one that failed to compile is reported once,
    in formulas.yaml, not again at each node that computes it). The flow joins `graph` (a flow
    whose id another flow already has is checked on a graph of its own)."""
    need_source(doc, ("source",), flow.source)
    nodes: dict[str, Node] = {}
    for i, n in enumerate(flow.nodes):
        if n.id in nodes:
            errs.add(doc.error(("nodes", i, "id"), f"duplicate node id '{n.id}'"))
            continue
        nodes[n.id] = _node(doc, i, n, units, formulas, errs)
    for i, n in enumerate(flow.nodes):
        for j, e in enumerate(n.edges):
            if e.to not in nodes:
                errs.add(doc.error(("nodes", i, "edges", j, "to"), f"edge to unknown node '{e.to}'",
                                   nearest(e.to, nodes)))
    if flow.entry not in nodes:
        errs.add(doc.error(("entry",), f"entry '{flow.entry}' is not a node", nearest(flow.entry, nodes)))
    ranking: list[tuple[str, str]] = []
    for i, r in enumerate(flow.ranking):
        if r.by not in units:
            errs.add(doc.error(("ranking", i, "by"), f"unknown name '{r.by}'", nearest(r.by, units)))
        ranking.append((r.by, r.order))
    applies = compile_expr(doc, ("applies",), flow.applies, units, errs, want=ex.BOOL) if flow.applies else None
    result = Flow(flow.id, flow.title, flow.role, flow.order, flow.source, flow.entry, nodes,
                  ranking, doc.display, applies=applies)
    if any(graph.nodes[n].get("flow") == flow.id for n in graph):
        graph = knowledge_graph({})      # a duplicate id (reported below): checked on its own
    add_flow(graph, result)
    if flow.entry in nodes and all(e.to in nodes for n in nodes.values() for e in n.edges):
        _check_graph(doc, flow, result, errs, graph)
    # the walk follows the graph: each node's edges are its out-edges there
    for node_id, out in out_edges(graph, result).items():
        result.nodes[node_id] = replace(result.nodes[node_id], edges=out)
    return result


def _node(doc: Doc, i: int, n: NodeSchema, units: dict[str, ex.Unit], formulas: set[str], errs: Collector) -> Node:
    """Node i of a flow: the formulas it computes known, its edges' conditions compiled, how it
    ends checked (a verdict has no edges, any other node an otherwise branch), its agreement
    with kbq's answer compiled and the names its texts fill in known."""
    for j, fname in enumerate(n.compute):
        if fname not in formulas:
            errs.add(doc.error(("nodes", i, "compute", j), f"unknown formula '{fname}'",
                               nearest(fname, formulas)))
    edges = _edges(doc, i, n, units, errs)
    if n.kind == "verdict":
        _verdict(doc, i, n, units, errs)
    elif not n.edges:
        errs.add(doc.error(("nodes", i, "id"), f"node '{n.id}' has no edges; only a verdict can end a flow"))
    elif n.edges[-1].when is not None:
        errs.add(doc.error(("nodes", i, "edges", len(n.edges) - 1),
                           f"the last edge of '{n.id}' has a condition, so some workloads match no branch; "
                           "leave its 'when' out to make it the otherwise branch"))
    line = doc.pos(("nodes", i))[0]
    agrees = compile_expr(doc, ("nodes", i, "agrees"), n.agrees, units, errs, want=ex.BOOL) if n.agrees else None
    for m in TEMPLATE_FIELD.finditer(n.differs or ""):
        if m.group(1) not in units:
            errs.add(doc.error(("nodes", i, "differs"), f"unknown name '{m.group(1)}' in the text",
                               nearest(m.group(1), units)))
    return Node(n.id, n.kind, n.text, tuple(n.compute), tuple(edges), n.style,
                f"{doc.display}:{line}", agrees, n.differs)


def _edges(doc: Doc, i: int, n: NodeSchema, units: dict[str, ex.Unit], errs: Collector) -> list[Edge]:
    """Node i's edges, each condition compiled; two edges to one node are one too many."""
    edges = []
    for j, e in enumerate(n.edges):
        if any(earlier.to == e.to for earlier in n.edges[:j]):
            errs.add(doc.error(("nodes", i, "edges", j, "to"),
                               f"a second edge from '{n.id}' to '{e.to}'; join the two conditions "
                               "with 'or' in one edge"))
        when = compile_expr(doc, ("nodes", i, "edges", j, "when"), e.when, units, errs, want=ex.BOOL) if e.when else None
        edges.append(Edge(e.to, when, e.label))
    return edges


def _verdict(doc: Doc, i: int, n: NodeSchema, units: dict[str, ex.Unit], errs: Collector) -> None:
    """A verdict node ends the flow, and its text fills in known names in allowed formats."""
    if n.edges:
        errs.add(doc.error(("nodes", i, "edges"), f"verdict node '{n.id}' cannot have edges"))
    text_loc = ("nodes", i, "text")
    quote = col_offset(doc, text_loc) - (doc.pos(text_loc)[1] - 1)
    for m in TEMPLATE_FIELD.finditer(n.text):
        if m.group(1) not in units:
            errs.add(doc.error(text_loc, f"unknown name '{m.group(1)}' in the verdict text",
                               nearest(m.group(1), units),
                               column_offset=quote + m.start(1) if "\n" not in n.text else 0))
        elif m.group(2) is not None and not TEMPLATE_SPEC.match(m.group(2)):
            errs.add(doc.error(("nodes", i, "text"),
                               f"format '{m.group(2)}' of {{{m.group(1)}}} is not allowed; "
                               "use a width of up to 2 digits and up to 6 decimals, e.g. :.1f"))


def _check_graph(doc: Doc, raw: FlowFile, flow: Flow, errs: Collector, graph: nx.DiGraph[str]) -> None:
    index = {n.id: i for i, n in enumerate(raw.nodes)}
    cycle = flow_cycle(graph, flow)
    if cycle is not None:
        closing_from, closing_to = cycle[-2], cycle[-1]      # the edge that closes it
        node = raw.nodes[index[closing_from]]
        j = next(k for k, e in enumerate(node.edges) if e.to == closing_to)
        errs.add(doc.error(("nodes", index[closing_from], "edges", j, "to"),
                           "the flow has a cycle: " + " → ".join(cycle)))
    for node_id in unreachable(graph, flow):
        errs.add(doc.error(("nodes", index[node_id], "id"),
                           f"node '{node_id}' cannot be reached from the entry '{flow.entry}'"))


def compile_claims(src_doc: Doc, sfile: SourcesFile, units: dict[str, ex.Unit],
                   need_source: NeedSource, errs: Collector) -> list[Claim]:
    """sources.yaml's claims, each with its expressions compiled and unit checked."""
    claims: list[Claim] = []
    for i, c in enumerate(sfile.claims):
        need_source(src_doc, ("claims", i, "source"), c.source)
        computed = compile_expr(src_doc, ("claims", i, "computed"), c.computed, units, errs)
        when = compile_expr(src_doc, ("claims", i, "applies_when"), c.applies_when, units, errs, want=ex.BOOL)
        if computed is None or when is None:
            continue
        check_unit(src_doc, ("claims", i, "computed"), computed, units, ex.parse_unit(c.unit), errs)
        # checked against every GPU row only when the claim names a GPU property itself
        per_gpu = any(n.startswith(GPU_INPUT_PREFIX) for n in when.names)
        line = src_doc.pos(("claims", i))[0]
        claims.append(Claim(c.id, c.source, c.text, computed, c.unit, c.value, c.tolerance, when,
                            c.example_query, c.note, per_gpu, f"{src_doc.display}:{line}"))
    unique(src_doc, [("claims", i, "id") for i in range(len(claims))], [c.id for c in claims], "claim id", errs)
    return claims
