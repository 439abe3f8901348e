"""The roofline chart drawn on the server: Answer → an SVG string.

In: a kb.engine.assembly.answer.Answer. Out: a log-log roofline of the GPU the bottleneck was judged on, with
the workload's operating points, as inline SVG markup (made and escaped with server.charts'
pieces), or None when that GPU has no bandwidth or compute figures.

Every figure drawn comes from the Answer; this module only places it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from kb.figures import num
from server.charts import BAD, CHAR_W, GRID, INK, MUTED, PHASE_COLOURS, WALKED, _svg, _text, esc
from kb.knowledge import names as N

BOLD_W = 7.2            # average glyph width of bold 12 px text, for placing a label

if TYPE_CHECKING:
    from kb.engine.assembly.answer import Answer, GpuRow


def roofline_gpu(answer: Answer) -> GpuRow | None:
    """The GPU row the bottleneck was judged on, if it has bandwidth and compute figures."""
    name = answer.bottleneck.get("gpu")
    row = next((g for g in answer.gpus if g.name == name), None)
    if row is None or not row.bandwidth_gb_s or not row.compute_tflops:
        return None
    return row


def roofline(answer: Answer, ident: str = "roofline", width: int = 760) -> str | None:
    """Log-log roofline of the primary GPU, or None when it has no bandwidth/compute figures.
    At a phone's width (`width` < 500) it is drawn smaller with shorter axis titles, so that its
    text keeps its size when the page shows it at that width."""
    row = roofline_gpu(answer)
    if row is None:
        return None
    b = answer.bottleneck
    bw, peak = float(row.bandwidth_gb_s or 0), float(row.compute_tflops or 0)
    ridge = float(b.get(N.RIDGE_POINT) or peak * 1000 / bw)
    points = [(p, float(v)) for p, v in (b.get("arithmetic_intensity") or {}).items() if v and v > 0]

    def roof(x: float) -> float:     # TFLOP/s: GB/s × FLOP/B = GFLOP/s
        return min(peak, bw * x / 1000)

    xs = [ridge, *[v for _, v in points]]
    xlo = 10 ** math.floor(math.log10(min(xs) / 3))
    xhi = 10 ** math.ceil(math.log10(max(xs) * 3))
    ylo = 10 ** math.floor(math.log10(roof(xlo)))
    yhi = 10 ** math.ceil(math.log10(peak * 1.5))
    narrow = width < 500
    height, ml, mr, mt, mb = (300, 44, 8, 24, 44) if narrow else (360, 64, 16, 28, 52)
    pw, ph = width - ml - mr, height - mt - mb

    def X(v: float) -> float:
        return ml + (math.log10(v) - math.log10(xlo)) / (math.log10(xhi) - math.log10(xlo)) * pw

    def Y(v: float) -> float:
        return mt + ph - (math.log10(v) - math.log10(ylo)) / (math.log10(yhi) - math.log10(ylo)) * ph

    body = [f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="#ffffff" stroke="{GRID}"/>',
            f'<rect x="{ml}" y="{mt}" width="{X(ridge) - ml:.1f}" height="{ph}" fill="#eff6ff"/>']
    for k in range(round(math.log10(xlo)), round(math.log10(xhi)) + 1):
        gx = X(10 ** k)
        body.append(f'<line x1="{gx:.1f}" y1="{mt}" x2="{gx:.1f}" y2="{mt + ph}" stroke="{GRID}"/>')
        tick = num(10 ** k)
        edge = gx + len(tick) * 3.3 > width        # the last tick ends at the chart's edge
        body.append(_text(width - 1 if edge else gx, mt + ph + 16, tick, anchor="end" if edge else "middle",
                          fill=MUTED, size=11))
    for k in range(round(math.log10(ylo)), round(math.log10(yhi)) + 1):
        gy = Y(10 ** k)
        body.append(f'<line x1="{ml}" y1="{gy:.1f}" x2="{ml + pw}" y2="{gy:.1f}" stroke="{GRID}"/>')
        body.append(_text(ml - 6, gy + 4, num(10 ** k), anchor="end", fill=MUTED, size=11))
    x_title, y_title = (("FLOP per byte (log)", "TFLOP/s (log)") if narrow else
                        ("arithmetic intensity (FLOP per byte, log scale)", "attainable TFLOP/s (log scale)"))
    body.append(_text(ml + pw / 2, height - 12, x_title, anchor="middle", fill=MUTED))
    body.append(_text(12, mt + ph / 2, y_title, anchor="middle", fill=MUTED,
                      extra=f' transform="rotate(-90 12 {mt + ph / 2:.1f})"'))
    body.append(_text(ml + 8, mt + 16, "bandwidth bound" if narrow else "memory-bandwidth bound",
                      fill=WALKED, size=11))
    body.append(_text(ml + pw - 8, mt + 16, "compute bound", anchor="end", fill=BAD, size=11))
    body.append(f'<polyline points="{X(xlo):.1f},{Y(roof(xlo)):.1f} {X(ridge):.1f},{Y(peak):.1f} '
                f'{X(xhi):.1f},{Y(peak):.1f}" fill="none" stroke="{INK}" stroke-width="2.5"/>')
    angle = math.degrees(math.atan2(Y(roof(ridge)) - Y(roof(xlo)), X(ridge) - X(xlo)))
    lx = 10 ** ((math.log10(xlo) + math.log10(ridge)) / 2)
    body.append(_text(X(lx), Y(roof(lx)) - 8, f"bandwidth {num(bw)} GB/s", anchor="middle",
                      extra=f' transform="rotate({angle:.1f} {X(lx):.1f} {Y(roof(lx)) - 8:.1f})"'))
    precision = f" ({row.compute_precision})" if row.compute_precision else ""
    peak_label = f"compute {num(peak)} TFLOP/s{precision}"
    fits_right = X(ridge) + 8 + len(peak_label) * CHAR_W < width
    body.append(_text(X(ridge) + 8 if fits_right else ml + pw, Y(peak) - 8, peak_label,
                      anchor="start" if fits_right else "end"))
    body.append(f'<line x1="{X(ridge):.1f}" y1="{Y(peak):.1f}" x2="{X(ridge):.1f}" y2="{mt + ph}" '
                f'stroke="{MUTED}" stroke-dasharray="4 4"/>')
    body.append(f'<circle cx="{X(ridge):.1f}" cy="{Y(peak):.1f}" r="4" fill="{INK}"/>')
    ridge_label = f"ridge point {num(ridge)} FLOP/B"
    ridge_right = X(ridge) + 6 + len(ridge_label) * 6.0 < ml + pw
    body.append(_text(X(ridge) + (6 if ridge_right else -6), mt + ph - 8, ridge_label,
                      anchor="start" if ridge_right else "end", fill=MUTED, size=11))
    for i, (phase, x) in enumerate(points):
        px, py = X(x), Y(roof(x))
        bound = b.get(phase) or "?"
        label = f"{phase} {num(x)} FLOP/B: {bound}"
        shown = f"{phase}: {bound}" if narrow else label       # the figures are in the table
        text_w = len(shown) * BOLD_W
        right = px + 10 + text_w < ml + pw
        lx = px + 10 if right else max(px - 10, 4 + text_w)
        body.append(f'<g><title>{esc(label)}</title>'
                    f'<circle cx="{px:.1f}" cy="{py:.1f}" r="7" fill="{PHASE_COLOURS.get(phase, INK)}" '
                    f'stroke="#ffffff" stroke-width="2"/>'
                    + _text(lx, py + 18 + 14 * i, shown,
                            anchor="start" if right else "end", fill=PHASE_COLOURS.get(phase, INK),
                            weight="600")
                    + "</g>")
    title = f"Roofline of {row.name}"
    desc = (f"Bandwidth {num(bw)} GB/s and compute {num(peak)} TFLOP/s meet at the ridge point, "
            f"{num(ridge)} FLOP per byte. "
            + " ".join(f"{p}: {num(x)} FLOP/B, {b.get(p) or 'not judged'}." for p, x in points))
    return _svg(width, height, ident, title, desc, body)
