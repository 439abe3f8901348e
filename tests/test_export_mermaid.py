"""`kbq export`'s Mermaid charts: parsed back and compared with the flows, escaped, `kbq export
flow`, and the command's errors."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from export_common import RULES, kbq

from kb.knowledge.build import Edge, Flow, Knowledge, Node
from kb.knowledge.data import readable_template
from kb.present.export import code, math, mermaid, mermaid_ids

# ---------------------------------------------------------------- Mermaid

ENTITIES = {"quot": '"', "lt": "<", "gt": ">", "amp": "&", "35": "#", "124": "|", "96": "`"}
SHAPES = {("([", "])"): "start", ("{", "}"): "question", ("[", "]"): "compute",
          ("(", ")"): "verdict", ("{{", "}}"): "else"}
NODE = re.compile(r'^    (\w+)(\(\[|\{\{|\{|\[|\()"([^"]*)"(\]\)|\}\}|\}|\]|\))$')
EDGE = re.compile(r'^    (\w+) -->(?:\|"([^"]*)"\|)? (\w+)$')
CLASS = re.compile(r"^    class ([\w,]+) (\w+)$")


def unescape(text: str) -> str:
    return re.sub(r"#(\w+);", lambda m: ENTITIES[m.group(1)], text)


def parse_mermaid(chart: str) -> tuple[dict[str, tuple[str, str]], list[tuple[str, str, str | None]], dict[str, str]]:
    """nodes {id: (kind, text)}, edges [(from, to, label)], styles {id: class}. An "or else" step
    of a ladder (kb.present.export_layout) is folded back: the edges that hang from it are its node's."""
    lines = chart.rstrip("\n").split("\n")
    assert lines[0] == "flowchart TD"
    nodes: dict[str, tuple[str, str]] = {}
    drawn: list[tuple[str, str, str | None]] = []
    styles: dict[str, str] = {}
    for line in lines[1:]:
        if m := NODE.match(line):
            assert m.group(1) not in nodes
            nodes[m.group(1)] = (SHAPES[(m.group(2), m.group(4))], unescape(m.group(3)))
        elif m := EDGE.match(line):
            drawn.append((m.group(1), m.group(3), unescape(m.group(2)) if m.group(2) else None))
        elif m := CLASS.match(line):
            styles.update({nid: m.group(2) for nid in m.group(1).split(",")})
        else:
            assert line.startswith("    classDef "), line
    steps = {n for n, (kind, _) in nodes.items() if kind == "else"}
    owner = {b: a for a, b, _ in drawn if b in steps}
    assert all(nodes[s][1] == "or else" for s in steps)

    def origin(n: str) -> str:
        return origin(owner[n]) if n in steps else n

    edges = [(origin(a), b, label) for a, b, label in drawn if b not in steps]
    return {n: v for n, v in nodes.items() if n not in steps}, edges, styles


def _charts(page: str) -> list[str]:
    return [c.split("\n```", 1)[0] + "\n" for c in page.split("```mermaid\n")[1:]]


def _chart(page: str) -> str:
    return _charts(page)[0]


def _edge_label(node: Any, edge: Any) -> str | None:
    """What the chart writes on an edge: its label, else its condition, else "otherwise" where
    its siblings have conditions."""
    if edge.label:
        return edge.label
    if edge.when is not None:
        return edge.when.text
    return "otherwise" if any(e.when is not None for e in node.edges) else None


def test_every_node_and_edge_is_in_its_chart(pages: dict[str, str], kn: Knowledge) -> None:
    """Every node and edge of a flow is drawn, on one chart or across its sections (a node that
    heads a section is drawn twice, the same); every condition is listed under the charts."""
    for flow in kn.flows:
        page = pages[f"flows/{flow.id}.md"]
        nodes: dict[str, tuple[str, str]] = {}
        edges: set[tuple[str, str, str | None]] = set()
        styles: dict[str, str] = {}
        for chart in _charts(page):
            n, e, s = parse_mermaid(chart)
            assert all(nodes.get(k, v) == v for k, v in n.items())
            nodes.update(n)
            edges |= set(e)
            styles.update(s)
        # a verdict's placeholders read as ‹per-GPU› GB where no answer fills them
        assert nodes == {n.id: (n.kind, " ".join(
            (readable_template(n.text) if n.kind == "verdict" else n.text).split()))
            for n in flow.nodes.values()}
        assert edges == {(n.id, e.to, _edge_label(n, e)) for n in flow.nodes.values() for e in n.edges}
        assert styles == {n.id: n.style for n in flow.nodes.values() if n.style}
        nodes_list = page.split("## Nodes", 1)[1]
        for node in flow.nodes.values():
            assert f'<a id="node-{node.id}"></a>' in page
            for e in node.edges:
                if e.when is not None:
                    assert f"when {code(math(e.when.ast))}" in nodes_list


def test_whole_flow_chart_has_every_edge(kn: Knowledge) -> None:
    """`kbq export flow ID` prints the whole flow as one chart."""
    for flow in kn.flows:
        _, edges, _ = parse_mermaid(mermaid(flow))
        assert sorted(edges, key=str) == sorted(
            ((n.id, e.to, _edge_label(n, e)) for n in flow.nodes.values() for e in n.edges), key=str)


def test_export_flow_prints_the_pages_chart(pages: dict[str, str], kn: Knowledge) -> None:
    for flow in kn.flows:
        result = kbq("export", "flow", flow.id)
        assert result.returncode == 0, result.stderr
        assert result.stdout == mermaid(flow)


def test_export_flow_unknown_id_suggests() -> None:
    result = kbq("export", "flow", "which_gpus")
    assert result.returncode == 2
    assert "no flow 'which_gpus' (did you mean 'which_gpu'?)" in result.stderr
    assert result.stdout == ""


def test_export_needs_a_directory() -> None:
    result = kbq("export", "--format", "markdown")
    assert result.returncode == 2
    assert "--out" in result.stderr


def test_export_of_broken_rules_exits_2(tmp_path: Path) -> None:
    root = tmp_path / "rules"
    shutil.copytree(RULES, root)
    (root / "precisions.yaml").write_text("", encoding="utf-8")
    result = kbq("export", "--out", str(tmp_path / "wiki"), "--rules", str(root))
    assert result.returncode == 2
    assert "rules/precisions.yaml:1:1: file is empty" in result.stderr
    assert not (tmp_path / "wiki").exists()


AWKWARD = 'He said "no" [x] {y} (z) <b>bold</b> a|b #1 & `c`; done'


def test_mermaid_escapes_awkward_text(tmp_path: Path) -> None:
    """Quotes, brackets, <, >, |, # and & in node text and edge labels survive, escaped."""
    root = tmp_path / "rules"
    shutil.copytree(RULES, root)
    path = root / "flows" / "which_gpu.yaml"
    text = path.read_text(encoding="utf-8")
    text = text.replace("    text: Model + precision fits in VRAM?\n",
                        f"    text: {json.dumps(AWKWARD)}\n", 1)
    text = text.replace("{to: INF_MULTI, label: Needs >48 GB}",
                        '{to: INF_MULTI, label: "Needs >48 GB | \\"multi\\" [GPU]"}', 1)
    path.write_text(text, encoding="utf-8")
    assert kbq("validate", str(root)).returncode == 0
    result = kbq("export", "flow", "which_gpu", "--rules", str(root))
    assert result.returncode == 0, result.stderr
    chart = result.stdout
    assert '    INF_SIZE{"He said #quot;no#quot; [x] {y} (z) #lt;b#gt;bold#lt;/b#gt; a#124;b ' \
           '#35;1 #amp; #96;c#96;; done"}' in chart
    nodes, edges, _ = parse_mermaid(chart)
    assert nodes["INF_SIZE"] == ("question", AWKWARD)
    assert ("INF_SIZE", "INF_MULTI", 'Needs >48 GB | "multi" [GPU]') in edges
    assert ("INF_SIZE", "INF_SMALL", "Fits in 20 GB") in edges


def test_mermaid_renames_its_keywords_as_node_ids() -> None:
    nodes = {
        "end": Node("end", "question", "Done?", (), (Edge("graph", None, None),), None, "f:1"),
        "graph": Node("graph", "verdict", "yes", (), (), "good", "f:2"),
    }
    flow = Flow("t", "T", "advice", 1, "s", "end", nodes, [], "f")
    assert mermaid_ids(flow) == {"end": "n_end", "graph": "n_graph"}
    parsed_nodes, edges, styles = parse_mermaid(mermaid(flow))
    assert parsed_nodes == {"n_end": ("question", "Done?"), "n_graph": ("verdict", "yes")}
    assert edges == [("n_end", "n_graph", None)]
    assert styles == {"n_graph": "good"}
