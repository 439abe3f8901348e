"""The flows as Mermaid flowcharts, and the wiki's flows/<id>.md pages.

In: a compiled Flow (its nodes, edges and layers from the knowledge graph, kb.knowledge.graph) and the
Knowledge (sources, formula links). Out: `mermaid(flow)`, one flowchart as text, and
`flow_page(kn, flow)`, its page: the chart, then every node with what it computes and its edges.
"""

from __future__ import annotations

from kb.knowledge.data import Flow, Knowledge, Node, readable_template
from kb.present.export_layout import Chart, drawn, sections
from kb.present.export_text import anchor, code, math, name_link, page, src_link
from kb.present.render import md

_SHAPES = {"start": ('(["', '"])'), "question": ('{"', '"}'), "compute": ('["', '"]'),
           "verdict": ('("', '")'), "else": ('{{"', '"}}')}
_STYLES = {"compute": "fill:#fde8e4,stroke:#c0392b,color:#222",
           "bandwidth": "fill:#e4eefb,stroke:#2c6fbb,color:#222",
           "good": "fill:#e5f5ea,stroke:#1e8449,color:#222",
           "warn": "fill:#fdf3e1,stroke:#b9770e,color:#222"}
_MERMAID_ESCAPES = str.maketrans({"#": "#35;", '"': "#quot;", "<": "#lt;", ">": "#gt;",
                                  "|": "#124;", "&": "#amp;", "`": "#96;"})
_MERMAID_RESERVED = frozenset({"end", "graph", "flowchart", "subgraph", "style", "class",
                               "classdef", "click", "linkstyle", "direction", "call", "href",
                               "default", "interpolate"})


def mermaid_text(text: str) -> str:
    """Text for a quoted Mermaid label: one line, with #quot; #lt; #gt; #35; #124; #amp;."""
    return " ".join(text.split()).translate(_MERMAID_ESCAPES)


def shown_text(node: Node) -> str:
    """A node's text where no answer fills it: a verdict's {placeholders} read as ‹names›."""
    return readable_template(node.text) if node.kind == "verdict" else node.text


def mermaid_ids(flow: Flow) -> dict[str, str]:
    """Node id → Mermaid id (the same, unless it is a Mermaid keyword)."""
    ids: dict[str, str] = {}
    for nid in flow.nodes:
        mid = nid
        while mid.lower() in _MERMAID_RESERVED or mid in ids.values() or (
                mid != nid and mid in flow.nodes):
            mid = f"n_{mid}"
        ids[nid] = mid
    return ids


def _order(flow: Flow) -> list[str]:
    """The flow's nodes top to bottom, in the layers the knowledge graph gives it
    (kb.knowledge.graph.flow_layers); a flow made by hand is layered from its own graph."""
    layers = flow.layers
    if not layers:
        from kb.knowledge.graph import layers_of

        layers = layers_of(flow)
    return [n for layer in layers for n in layer]


def mermaid(flow: Flow) -> str:
    """The whole flow as one Mermaid flowchart (`kbq export flow ID`); the wiki page splits a
    wide one into sections (flow_page, kb.present.export_layout.sections)."""
    order = _order(flow)
    return chart_text(flow, drawn(flow, order, {n: shown_text(flow.nodes[n]) for n in order}))


def chart_text(flow: Flow, chart: Chart) -> str:
    """A chart (kb.present.export_layout.drawn) as a Mermaid flowchart, drawn top-down: every node with
    its text and shape, declared top to bottom; each edge with its label (its condition when it
    has no label: the conditions are listed under the chart on the page); the "or else" steps of
    a node with many edges, tried in order as the engine does; nodes styled by their `style`."""
    ids = mermaid_ids(flow)
    ids.update({s: s for s in chart.steps})
    lines = ["flowchart TD"]
    for nid, kind, text in chart.texts:
        left, right = _SHAPES[kind]
        lines.append(f"    {ids[nid]}{left}{mermaid_text(text)}{right}")
    for a, b, label in chart.edges:
        arrow = f' -->|"{mermaid_text(label)}"| ' if label else " --> "
        lines.append(f"    {ids[a]}{arrow}{ids[b]}")
    styled: dict[str, list[str]] = {}
    for nid in chart.nodes:
        if flow.nodes[nid].style:
            styled.setdefault(str(flow.nodes[nid].style), []).append(ids[nid])
    for style in sorted(styled):
        lines.append(f"    classDef {style} {_STYLES[style]}")
        lines.append(f"    class {','.join(styled[style])} {style}")
    return "\n".join(lines) + "\n"


def flow_page(kn: Knowledge, flow: Flow) -> str:
    src = kn.sources[flow.source]
    body = [(f"Flow {code(flow.id)} ({flow.role}, order {flow.order}), from "
            f"{src_link(flow.source, '../')} ({md(src['title'])}). Rule file: {code(flow.where)}. "
            f"Starts at {code(flow.entry)}; edges are tried in order, the first whose condition "
            "holds is followed, and an edge without a condition is the otherwise branch."), ""]
    if flow.ranking:
        body += ["GPUs are ranked by " + ", then ".join(
            f"{name_link(by, kn, '../')} ({'highest' if order == 'desc' else 'lowest'} first)"
            for by, order in flow.ranking) + ".", ""]
    order = _order(flow)
    parts = sections(flow, order, {n: shown_text(flow.nodes[n]) for n in order})
    if len(parts) > 1:
        body += [f"The flow is drawn in {len(parts)} charts, each narrow enough to read: the top, then "
                 "each branch from its first node.", ""]
    for head, chart in parts:
        if head is not None:
            body += [f"## From {md(head)}: {md(shown_text(flow.nodes[head]))}", ""]
        body += ["```mermaid", chart_text(flow, chart).rstrip("\n"), "```", ""]
    body += ["## Nodes", ""]
    for node in flow.nodes.values():
        body.append(f"{anchor('node-' + node.id)}**{md(node.id)}** ({node.kind}"
                    + (f", {node.style}" if node.style else "") + f"): {md(shown_text(node))}")
        body.append("")
        if node.compute:
            body.append("- computes " + ", ".join(name_link(n, kn, "../") for n in node.compute))
        branches = any(e.when is not None for e in node.edges)
        for edge in node.edges:
            cond = f" when {code(math(edge.when.ast))}" if edge.when else (
                " otherwise" if branches else "")
            label = f" ({md(edge.label)})" if edge.label else ""
            body.append(f"- → [{md(edge.to)}](#node-{edge.to}){cond}{label}")
        if node.compute or node.edges:
            body.append("")
    return page(flow.title, body)

