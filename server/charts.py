"""Charts drawn on the server: Answer (or Flow) → an SVG string.

In: a kb.engine.assembly.answer.Answer or a kb.knowledge.build.Flow. Out: inline SVG markup with a
<title> and <desc> for screen readers; every piece of text is XML-escaped here, so the markup
can be placed in a page as is. Presentation lives in SVG attributes (no style attributes), so
the page's Content-Security-Policy needs no 'unsafe-inline'.

- memory_bar: the memory each GPU needs, stacked by part, against each GPU's usable memory.
- roofline: log-log roofline of the primary GPU with the workload's operating points
  (server.charts_roofline, drawn with this module's pieces).
- flow_chart: a decision flowchart, layered top to bottom, the walked nodes and edges marked.

Every figure drawn comes from the Answer or the rules; this module only places it.
"""

from __future__ import annotations

import math
import textwrap
from html import escape
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from kb.knowledge.data import readable_template
from kb.figures import num
from kb.present.render import BREAKDOWN_LABELS
from kb.knowledge import names as N

if TYPE_CHECKING:
    from collections.abc import Mapping

    from kb.engine.assembly.answer import Answer, GpuRow

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
INK, MUTED, GRID = "#1f2937", "#6b7280", "#e5e7eb"
OK, BAD, WALKED = "#15803d", "#b91c1c", "#1d4ed8"
PART_COLOURS = {                   # Okabe-Ito: tells the parts apart for colour-blind readers
    N.WEIGHTS_GB: "#0072B2", N.KV_CACHE_GB: "#E69F00", N.ACTIVATIONS_GB: "#009E73",
    N.GRADIENTS_GB: "#CC79A7", N.OPTIMIZER_GB: "#D55E00", N.ADAPTERS_GB: "#56B4E9",
    N.OVERHEAD_GB: "#8c8c8c", N.OTHER_MODELS_GB: "#F0E442",
}
PHASE_COLOURS = {"decode": "#0072B2", "prefill": "#D55E00", "training": "#009E73"}
CHAR_W = 6.6                        # average glyph width at font-size 12, for layout


def esc(value: Any) -> str:
    return escape(str(value), quote=True)


def _svg(width: float, height: float, ident: str, title: str, desc: str, body: list[str]) -> str:
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'width="{width:.0f}" height="{height:.0f}" role="img" '
            f'aria-labelledby="{esc(ident)}-title {esc(ident)}-desc" font-family="{esc(FONT)}" font-size="12">')
    return "\n".join([
        head,
        f'<title id="{esc(ident)}-title">{esc(title)}</title>',
        f'<desc id="{esc(ident)}-desc">{esc(desc)}</desc>',
        *body, "</svg>"])


def _text(x: float, y: float, text: str, anchor: str = "start", fill: str = INK, size: int | None = None,
          weight: str | None = None, extra: str = "") -> str:
    attrs = f'x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="{fill}"'
    if size:
        attrs += f' font-size="{size}"'
    if weight:
        attrs += f' font-weight="{weight}"'
    return f"<text {attrs}{extra}>{esc(text)}</text>"


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars - 1].rstrip() + "…"


def _nice_step(span: float, ticks: int = 5) -> float:
    raw = span / ticks
    power: float = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)


# ---------------------------------------------------------------- memory bar

def per_gpu_parts(breakdown: Mapping[str, float | None], row: GpuRow) -> dict[str, float]:
    """The parts of one GPU's share: the job split evenly over the row's GPUs, and each GPU's own
    runtime overhead (per_gpu_gb less the split parts), so the parts add up to per_gpu_gb."""
    count = row.count or 1
    parts = {k: float(breakdown.get(k) or 0) / count for k in BREAKDOWN_LABELS if k != N.OVERHEAD_GB}
    per_gpu = row.per_gpu_gb
    split = sum(parts.values())
    overhead = float(breakdown.get(N.OVERHEAD_GB) or 0) / count if per_gpu is None else per_gpu - split
    parts[N.OVERHEAD_GB] = max(0.0, overhead)
    return parts


NARROW = 360                         # a phone's chart width: drawn at its size, not shrunk


def memory_bar(answer: Answer, limit: int = 8, ident: str = "memory", width: int = 780) -> str:
    """The bars, one row per GPU. At a phone's width (`width` < 500) the GPU's name and its figures
    go on a line above its bar, so the bar has the whole width and no text is shrunk."""
    rows = answer.gpus[:limit]
    breakdown = answer.memory["breakdown"]
    narrow = width < 500
    label_w, value_w, row_h = (0, 0, 40) if narrow else (250, 130, 30)
    bar_w = width - label_w - value_w - (8 if narrow else 0)
    legend = [(k, BREAKDOWN_LABELS[k], v) for k, v in breakdown.items()
              if k in BREAKDOWN_LABELS and v]
    body: list[str] = []
    x, y = 0.0, 14.0
    for key, label, value in legend:
        item = f"{label} {num(value)} GB"
        item_w = 16 + len(item) * CHAR_W + 18
        if x + item_w > width:
            x, y = 0.0, y + 20
        body.append(f'<rect x="{x:.1f}" y="{y - 10:.1f}" width="11" height="11" fill="{PART_COLOURS[key]}"/>')
        body.append(_text(x + 16, y, item))
        x += item_w
    top = y + 18
    caps = [r.usable_vram_gb or r.vram_gb or 0 for r in rows]
    needs = [r.per_gpu_gb or 0 for r in rows]
    scale_max = max([*caps, *needs, 1e-9]) * 1.04
    sx = bar_w / scale_max
    for i, (row, cap, need) in enumerate(zip(rows, caps, needs)):
        ry = top + i * row_h
        name = (f"{row.count}× " if row.count > 1 else "") + row.name
        fits = bool(row.fits)
        verdict = N.FITS if fits else "does not fit"
        figures = f"{num(need)} / {num(cap)} GB"
        body.append(f'<g><title>{esc(name)}: needs {esc(num(need))} GB per GPU of '
                    f'{esc(num(cap))} GB usable; {verdict}</title>')
        if narrow:
            room = int((width - len(figures) * CHAR_W - 12) / CHAR_W)
            body.append(_text(0, ry + 11, _clip(name, room)))
            body.append(_text(width, ry + 11, figures, anchor="end", fill=OK if fits else BAD, weight="600"))
            ry += 12
        else:
            body.append(_text(label_w - 10, ry + 16, _clip(name, 35), anchor="end"))
            body.append(_text(label_w + bar_w + 10, ry + 16, figures, fill=OK if fits else BAD, weight="600"))
        body.append(f'<rect x="{label_w}" y="{ry + 4}" width="{cap * sx:.1f}" height="18" '
                    f'fill="#f3f4f6" stroke="#9ca3af" stroke-width="1"/>')
        sx0 = float(label_w)
        for key, value in per_gpu_parts(breakdown, row).items():
            if value <= 0:
                continue
            body.append(f'<rect x="{sx0:.1f}" y="{ry + 7}" width="{value * sx:.1f}" height="12" '
                        f'fill="{PART_COLOURS[key]}"/>')
            sx0 += value * sx
        cx = label_w + cap * sx
        body.append(f'<line x1="{cx:.1f}" y1="{ry + 1}" x2="{cx:.1f}" y2="{ry + 25}" '
                    f'stroke="{INK}" stroke-width="2"/>')
        body.append("</g>")
    axis_y = top + len(rows) * row_h + (16 if narrow else 4)
    body.append(f'<line x1="{label_w}" y1="{axis_y}" x2="{label_w + bar_w}" y2="{axis_y}" stroke="{MUTED}"/>')
    step = _nice_step(scale_max, 4 if narrow else 5)
    tick = 0.0
    while tick <= scale_max:
        tx = label_w + tick * sx
        body.append(f'<line x1="{tx:.1f}" y1="{axis_y}" x2="{tx:.1f}" y2="{axis_y + 4}" stroke="{MUTED}"/>')
        body.append(_text(max(tx, 8.0), axis_y + 16, num(tick), anchor="middle", fill=MUTED, size=11))
        tick += step
    if narrow:
        body.append(_text(width, axis_y + 32, "GB per GPU", anchor="end", fill=MUTED, size=11))
    else:
        body.append(_text(label_w + bar_w + 10, axis_y + 16, "GB per GPU", fill=MUTED, size=11))
    height = axis_y + (40 if narrow else 24)
    fitting = sum(1 for r in rows if r.fits)
    title = f"Memory per GPU against each GPU's usable memory (top {len(rows)} GPUs)"
    desc = (f"The job needs {num(answer.memory['total_gb'])} GB in all; "
            + "; ".join(f"{BREAKDOWN_LABELS[k]} {num(v)} GB" for k, _, v in legend)
            + f". {fitting} of the {len(rows)} GPUs shown hold their share. Each bar is one GPU's share, "
            "the dark line that GPU's usable memory.")
    return _svg(width, height, ident, title, desc, body)


# ---------------------------------------------------------------- flowcharts

NODE_W, NODE_GAP, LAYER_GAP, LINE_H, MARGIN = 200, 36, 76, 15, 12


def _layers(flow: Any) -> list[list[str]]:
    """Nodes in layers, from the knowledge graph (kb.knowledge.graph.flow_layers): a node sits one layer
    below the lowest of its parents. A flow made by hand has none yet: built from its own graph."""
    layers = flow.layers
    if not layers:
        from kb.knowledge.graph import layers_of

        layers = layers_of(flow)
    return [list(layer) for layer in layers]


def _place(flow: Any, layers: list[list[str]]) -> dict[str, float]:
    """Centre x of each node: children fan out under their parent in edge order, siblings stay
    together, and a layer is pushed apart where nodes would overlap, then re-centred.
    A node whose parents all sit more than one layer up goes under the first of them."""
    step = NODE_W + NODE_GAP
    x = {flow.entry: 0.0}
    depth_of = {n: d for d, layer in enumerate(layers) for n in layer}
    parents: dict[str, list[str]] = {}
    for layer in layers:
        for parent in layer:
            for e in flow.nodes[parent].edges:
                parents.setdefault(e.to, []).append(parent)
    position: dict[str, tuple[int, int]] = {flow.entry: (0, 0)}     # layer, place in it
    for depth in range(1, len(layers)):
        here = set(layers[depth])
        wanted: dict[str, list[float]] = {}
        rank: dict[str, tuple[int, int]] = {}
        for i, parent in enumerate(layers[depth - 1]):
            edges = flow.nodes[parent].edges
            for j, e in enumerate(edges):
                if e.to in here:
                    wanted.setdefault(e.to, []).append(x[parent] + (j - (len(edges) - 1) / 2) * step)
                    rank.setdefault(e.to, (i, j))
        for n in layers[depth]:                                         # edges that skip layers
            if n not in wanted:
                skipping = [p for p in parents.get(n, []) if depth_of[p] < depth - 1]
                if skipping:
                    wanted[n], rank[n] = [x[min(skipping, key=position.__getitem__)]], (-1, 0)
        order = sorted(layers[depth], key=lambda n: rank.get(n, (len(layers[depth - 1]), 0)))
        desired = [sum(wanted.get(n, [0.0])) / len(wanted.get(n, [0.0])) for n in order]
        placed: list[float] = []
        for d in desired:
            placed.append(d if not placed else max(d, placed[-1] + step))
        shift = sum(p - d for p, d in zip(placed, desired)) / len(placed)
        x.update({n: p - shift for n, p in zip(order, placed)})
        position.update({n: (depth, k) for k, n in enumerate(order)})
        layers[depth] = order
    return x


def walked(path: list[str], flow: Any) -> tuple[list[str], set[tuple[str, str]]]:
    """The nodes of `flow` in an Answer's path (whose steps are "flow id/node id"), in order,
    and the edges between them."""
    ids = {f"{flow.id}/{n}": n for n in flow.nodes}
    nodes = [ids[p] for p in path if p in ids]
    return nodes, set(pairwise(nodes))


def node_text(node: Any) -> str:
    """A node's text where no answer fills it: a verdict's {per_gpu_gb:.1f} GB → ‹per-GPU› GB."""
    return readable_template(node.text) if node.kind == "verdict" else str(node.text)


def _bezier(p0: float, p1: float, p2: float, p3: float, t: float) -> float:
    u = 1 - t
    return u * u * u * p0 + 3 * u * u * t * p1 + 3 * u * t * t * p2 + t * t * t * p3


Box = tuple[float, float, float]     # centre x, top y, height


def _edge(src: Box, dst: Box, lit: bool, ident: str) -> str:
    (cx, top, h), (tx, ttop, _) = src, dst
    y1, y2 = top + h, ttop - 1
    ym = (y1 + y2) / 2
    return (f'<path d="M{cx:.1f},{y1:.1f} C{cx:.1f},{ym:.1f} {tx:.1f},{ym:.1f} {tx:.1f},{y2:.1f}" '
            f'fill="none" stroke="{WALKED if lit else "#9ca3af"}" stroke-width="{2.5 if lit else 1.2}" '
            f'marker-end="url(#{esc(ident)}-arrow-{"on" if lit else "off"})"/>')


def _edge_label(src: Box, dst: Box, label: str, lit: bool) -> list[str]:
    """The label on a white patch, a little past the middle of the edge."""
    (cx, top, h), (tx, ttop, _) = src, dst
    y1, y2 = top + h, ttop - 1
    ym, t = (y1 + y2) / 2, 0.55 if cx == tx else 0.7
    lx, ly = _bezier(cx, cx, tx, tx, t), _bezier(y1, ym, ym, y2, t)
    parts = textwrap.wrap(label, 22)
    lw, lh = max(len(p) for p in parts) * 6.0 + 8, len(parts) * 13 + 4
    out = [(f'<rect x="{lx - lw / 2:.1f}" y="{ly - lh / 2:.1f}" width="{lw:.1f}" height="{lh}" rx="3" '
            f'fill="#ffffff" fill-opacity="0.92"/>')]
    for k, part in enumerate(parts):
        out.append(_text(lx, ly - lh / 2 + 12 + k * 13, part, anchor="middle", size=11,
                         fill=WALKED if lit else MUTED, weight="600" if lit else None))
    return out


def _node(node: Any, box: Box, lines: list[str], text: str, lit: bool) -> list[str]:
    cx, top, h = box
    rx = {"start": 16, "verdict": 10}.get(node.kind, 3)
    if node.kind == "verdict":
        fill = "#dcfce7" if lit else "#f9fafb"
    else:
        fill = "#dbeafe" if lit else "#ffffff"
    out = [f'<g><title>{esc(node.id)} ({esc(node.kind)}): {esc(text)}</title>'
           f'<rect x="{cx - NODE_W / 2:.1f}" y="{top:.1f}" width="{NODE_W}" height="{h:.1f}" rx="{rx}" '
           f'fill="{fill}" stroke="{WALKED if lit else "#9ca3af"}" stroke-width="{2.5 if lit else 1}"'
           + (' stroke-dasharray="5 3"' if node.kind == "compute" else "") + "/>"]
    for k, line in enumerate(lines):
        out.append(_text(cx, top + 19 + k * LINE_H, line, anchor="middle", fill=INK if lit else "#4b5563"))
    out.append("</g>")
    return out


def flow_chart(flow: Any, path: list[str] | None = None, ident: str | None = None,
               filled: dict[str, str] | None = None) -> str:
    """The flowchart; `path` marks the walked nodes and edges, `filled` replaces node texts
    (a walked verdict with its figures filled in)."""
    ident = ident or f"flow-{flow.id}"
    nodes_walked, edges_walked = walked(path or [], flow)
    on = set(nodes_walked)
    layers = _layers(flow)
    xs = _place(flow, layers)
    texts = {n: (filled or {}).get(n) or node_text(flow.nodes[n]) for n in xs}
    lines = {n: textwrap.wrap(texts[n], 27) or [n] for n in xs}
    left = min(xs.values()) - NODE_W / 2 - MARGIN
    width = max(xs.values()) + NODE_W / 2 + MARGIN - left
    box: dict[str, tuple[float, float, float]] = {}      # id → centre x, top y, height
    y = float(MARGIN)
    for layer in layers:
        tallest = 0.0
        for n in layer:
            h = len(lines[n]) * LINE_H + 14
            box[n] = (xs[n] - left, y, h)
            tallest = max(tallest, h)
        y += tallest + LAYER_GAP
    height = y - LAYER_GAP + MARGIN
    body = ["<defs>"]
    for kind, colour in (("on", WALKED), ("off", "#9ca3af")):
        body.append(f'<marker id="{esc(ident)}-arrow-{kind}" viewBox="0 0 10 10" refX="9" refY="5" '
                    f'markerUnits="userSpac' 'eOnUse" markerWidth="9" markerHeight="9" orient="auto">'
                    f'<path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>')
    body.append("</defs>")
    ordered = [n for layer in layers for n in layer]
    edges = sorted(((n, e) for n in ordered for e in flow.nodes[n].edges),
                   key=lambda ne: (ne[0], ne[1].to) in edges_walked)      # walked edges on top
    labels: list[str] = []
    for n, e in edges:
        lit = (n, e.to) in edges_walked
        body.append(_edge(box[n], box[e.to], lit, ident))
        if e.label:
            labels.extend(_edge_label(box[n], box[e.to], e.label, lit))
    for n in ordered:
        body.extend(_node(flow.nodes[n], box[n], lines[n], texts[n], n in on))
    body.extend(labels)
    title = f"Flowchart: {flow.title}"
    if nodes_walked:
        desc = "Walked: " + " → ".join(texts[n] for n in nodes_walked if n in texts)
    else:
        desc = f"{len(flow.nodes)} nodes; entry: {texts[flow.entry]}"
    return _svg(width, height, ident, title, desc, body)
