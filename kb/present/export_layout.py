"""How wide a flowchart draws, and how to split one that would be too wide to read in a wiki.

In: a Flow. Out: `drawn(flow, nodes)`, the chart of some of its nodes as Mermaid will lay it out
(a node with LADDER edges or more tries them as a ladder of "or else" steps, so its outcomes
stack downwards); `width_px(chart)`, an estimate of that chart's natural width; and
`sections(flow)`, the flow as one chart or, when that would be wider than WIDTH_PX, split at the
highest branch whose branches share no node: the part above with each branch's first node,
then each branch on its own (split again while still too wide).

The estimate follows Mermaid's layered layout: a node's rank is its longest path from the
chart's roots; a node is as wide as its text wrapped at Mermaid's 200 px (a question's diamond
wider), nodes of a rank sit 50 px apart, and the labels of the edges leaving a rank form a row of
their own. It decides where to split; the wiki's test renders each chart with Mermaid itself
and measures it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING


if TYPE_CHECKING:
    from kb.knowledge.data import Flow

LADDER = 3           # a node with this many edges or more is drawn as a ladder
WIDTH_PX = 900       # a chart estimated wider than this is split (it must stay under ~1,200 as drawn)
ELSE = "or else"
CHAR_PX, WRAP_PX, PAD_PX, LINE_PX, GAP_PX = 8.0, 200.0, 32.0, 24.0, 50.0


@dataclass(frozen=True, slots=True)
class Chart:
    """Nodes (flow node ids, top to bottom), the ladder's steps, and the edges between them
    (from, to, label; an id is a flow node's or a step's)."""
    nodes: tuple[str, ...]
    steps: tuple[str, ...]
    edges: tuple[tuple[str, str, str], ...]
    texts: tuple[tuple[str, str, str], ...]      # id, kind, text of every node and step


def _label(flow: Flow, node_id: str, i: int) -> str:
    node = flow.nodes[node_id]
    edge = node.edges[i]
    if edge.label:
        return edge.label
    if edge.when is not None:
        return edge.when.text
    return "otherwise" if any(e.when is not None for e in node.edges) else ""


def drawn(flow: Flow, nodes: list[str], text: dict[str, str]) -> Chart:
    """The chart of `nodes` (in that order) and the edges between them; `text`: each node's."""
    inside = set(nodes)
    taken = set(flow.nodes)
    steps: list[str] = []
    edges: list[tuple[str, str, str]] = []
    for nid in nodes:
        out = [i for i, e in enumerate(flow.nodes[nid].edges) if e.to in inside]
        here = nid
        for k, i in enumerate(out):
            edges.append((here, flow.nodes[nid].edges[i].to, _label(flow, nid, i)))
            if len(out) >= LADDER and k < len(out) - 2:       # the rest hang from an "or else" step
                step = f"{nid}_else{k + 1}"
                while step in taken:
                    step = f"n_{step}"
                taken.add(step)
                steps.append(step)
                edges.append((here, step, ""))
                here = step
    texts = tuple((n, flow.nodes[n].kind, text[n]) for n in nodes) + tuple((s, "else", ELSE) for s in steps)
    return Chart(tuple(nodes), tuple(steps), tuple(edges), texts)


def _node_px(kind: str, text: str) -> float:
    wide = len(text) * CHAR_PX
    w = min(wide, WRAP_PX)
    if kind == "question":                      # a diamond holds its text in its middle
        lines = math.ceil(wide / WRAP_PX)
        return w + lines * LINE_PX + PAD_PX
    return w + PAD_PX


def width_px(chart: Chart) -> float:
    """The chart's estimated natural width in px: its widest rank of nodes or of edge labels."""
    rank: dict[str, int] = {}
    ids = [t[0] for t in chart.texts]
    incoming = {i: [a for a, b, _ in chart.edges if b == i] for i in ids}
    for _ in ids:                               # longest path from a root (the chart has no cycle)
        for i in ids:
            rank[i] = max((rank.get(a, 0) + 1 for a in incoming[i]), default=0)
    rows: dict[float, list[float]] = {}
    for i, kind, text in chart.texts:
        rows.setdefault(rank[i], []).append(_node_px(kind, text))
    for a, _, label in chart.edges:
        if label:
            rows.setdefault(rank[a] + 0.5, []).append(min(len(label) * CHAR_PX, WRAP_PX) + 8)
    return max(sum(r) + GAP_PX * (len(r) - 1) for r in rows.values())


def _reach(flow: Flow, start: str, within: set[str]) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for e in flow.nodes[todo.pop()].edges:
            if e.to in within and e.to not in seen:
                seen.add(e.to)
                todo.append(e.to)
    return seen


def sections(flow: Flow, order: list[str], text: dict[str, str],
             head: str | None = None) -> list[tuple[str | None, Chart]]:
    """(the branch's first node, or None for the top) → chart, top first; one chart when the
    whole flow (`order`: its nodes top to bottom) is narrow enough."""
    whole = drawn(flow, order, text)
    if width_px(whole) <= WIDTH_PX:
        return [(head, whole)]
    inside = set(order)
    for nid in order:
        kids = list(dict.fromkeys(e.to for e in flow.nodes[nid].edges if e.to in inside))
        if len(kids) < 2:
            continue
        reach = [_reach(flow, k, inside) for k in kids]
        if any(reach[i] & reach[j] for i in range(len(kids)) for j in range(i + 1, len(kids))):
            continue
        below = set().union(*reach)
        top = [n for n in order if n not in below or n in kids]
        out: list[tuple[str | None, Chart]] = [(head, drawn(flow, top, text))]
        for k, r in zip(kids, reach):
            part = [n for n in order if n in r]
            out += sections(flow, part, text, k) if len(part) > 1 else []
        return out
    return [(head, whole)]          # no branch to split at: one chart, however wide
