"""The page's charts: roofline, memory bars and flow chart, drawn from the answer and escaped."""

from __future__ import annotations

import re

import pytest
from server_common import QUERY

from kb import ask, get_knowledge
from kb.figures import num
from kb.knowledge.build import Edge, Flow, Node
from server import charts, charts_roofline

# ---------------------------------------------------------------- charts

def test_roofline_ridge_point_is_peak_over_bandwidth(client):
    # Williams et al. 2009: the ridge point is peak FLOP/s ÷ memory bandwidth (FLOP per byte).
    gpu = next(g for g in client.get("/api/gpus").get_json() if g["id"] == "h100-sxm5")
    ridge = gpu["tensor_tflops"]["fp16"] * 1e12 / (gpu["bandwidth_gb_s"] * 1e9)
    a = ask("infer 7B fp16 on h100 sxm5")
    assert a.bottleneck["ridge_point"] == pytest.approx(ridge, rel=1e-4)
    svg = charts_roofline.roofline(a)
    assert f"ridge point {num(ridge)} FLOP/B" in svg
    for phase, ai in a.bottleneck["arithmetic_intensity"].items():
        assert f"{phase} {num(ai)} FLOP/B: {a.bottleneck[phase]}" in svg


def test_roofline_points_sit_on_the_roof():
    a = ask("infer 7B fp16 on h100 sxm5")
    svg = charts_roofline.roofline(a)
    roof = re.search(r'<polyline points="([^"]+)"', svg).group(1).split()
    (x0, y0), (xr, yr), (_, y1) = [tuple(map(float, p.split(","))) for p in roof]
    assert yr == y1                                            # flat compute ceiling
    for cx, cy in re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)" r="7"', svg):
        cx, cy = float(cx), float(cy)
        if cx <= xr:                                           # on the bandwidth slope
            assert cy == pytest.approx(y0 + (yr - y0) * (cx - x0) / (xr - x0), abs=0.2)
        else:
            assert cy == pytest.approx(yr, abs=0.1)


def test_memory_bar_splits_the_job_over_the_gpus():
    # 7B at bf16 is 7e9 × 2 bytes = 14 GB of weights; fully sharded over 8 GPUs, 1.75 GB each,
    # plus the two whole layers (of 32) a rank gathers to run: 2 × 14 / 32 = 0.875 GB, plus the
    # token embedding and output head FSDP keeps gathered in its root unit (2 × 32,000 × 4,096
    # × 2 B = 0.52 GB, 7/8 of it beyond the rank's share)
    a = ask("full fine-tune 7B on 8x H100 with fsdp for 20B tokens")
    row = a.gpus[0]
    parts = charts.per_gpu_parts(a.memory["breakdown"], row)
    root = 2 * 32_000 * 4_096 * 2 / 1e9 * 7 / 8
    assert parts["weights_gb"] == pytest.approx(7e9 * 2 / 1e9 / 8 + 2 * 7e9 * 2 / 1e9 / 32 + root)
    assert sum(parts.values()) == pytest.approx(row.per_gpu_gb, rel=1e-5)


def test_memory_bar_draws_top_gpus_against_their_capacity():
    a = ask(QUERY)
    svg = charts.memory_bar(a)
    rows = a.gpus[:8]
    assert svg.count("GB per GPU of") == len(rows)
    for g in rows:
        assert f"{num(g.per_gpu_gb)} / {num(g.usable_vram_gb)} GB" in svg


def test_flow_chart_marks_the_walked_path():
    a = ask(QUERY)
    kn = get_knowledge()
    for flow in kn.flows:
        nodes = [p.split("/", 1)[1] for p in a.path if p.startswith(flow.id + "/")]
        svg = charts.flow_chart(flow, a.path)
        assert svg.count('stroke="#1d4ed8" stroke-width="2.5"/>') + \
            svg.count('stroke="#1d4ed8" stroke-width="2.5" stroke-dasharray') == len(nodes)
        assert svg.count(f'marker-end="url(#flow-{flow.id}-arrow-on)"') == len(nodes) - 1
        assert svg.count("<g><title>") == len(flow.nodes)


def test_flow_chart_draws_every_flow_edge_downwards():
    """Each node's box in the SVG (its <title> and the top y of its <rect>): every edge of the
    flow goes from a higher box to a lower one, and every node is drawn once."""
    box = re.compile(r'<g><title>(\w+) \((\w+)\): [^<]*</title><rect x="[^"]+" y="([0-9.]+)"')
    for flow in get_knowledge().flows:
        top = {m.group(1): float(m.group(3)) for m in box.finditer(charts.flow_chart(flow))}
        assert sorted(top) == sorted(flow.nodes), flow.id
        for node in flow.nodes.values():
            for e in node.edges:
                assert top[node.id] < top[e.to], (flow.id, node.id, e.to)


def test_charts_escape_text():
    evil = '<script>alert(1)</script>"'
    flow = Flow(id="f", title=evil, role="advice", order=0, source="s", entry="a", where="x",
                ranking=[], nodes={
                    "a": Node("a", "question", evil, (), (Edge("b", None, evil),), None, "x"),
                    "b": Node("b", "verdict", evil, (), (), None, "x")})
    svg = charts.flow_chart(flow, ["f/a", "f/b"])
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    a = ask(QUERY)
    a.gpus[0].name = evil
    a.bottleneck["gpu"] = evil
    for out in (charts.memory_bar(a), charts_roofline.roofline(a)):
        assert "<script>" not in out and "&lt;script&gt;" in out
