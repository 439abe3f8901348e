"""`kbq export`: wiki pages and Mermaid charts from the rules (kb.present.export).

The pages are written by the installed console script. Their figures are checked against the
engine itself (kb.engine.answer on the same query), the Mermaid charts are parsed back and
compared with the flows, and every relative link must reach a page and an anchor on it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kb.engine import answer
from kb.present.export import code, literal, math, mermaid, mermaid_ids, number, with_unit
from kb.knowledge.build import Edge, Flow, Knowledge, Node, build
from kb.knowledge.data import readable_template
from kb.paths import rules_dir
from kb.query.parse import parse

RULES = rules_dir()


def kbq(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The installed console script, as a user runs it."""
    return subprocess.run(["kbq", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})}, check=False)


def export(out: Path, *extra: str, env: dict[str, str] | None = None) -> dict[str, bytes]:
    result = kbq("export", "--format", "markdown", "--out", str(out), *extra, env=env)
    assert result.returncode == 0, result.stderr
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file()}


@pytest.fixture(scope="module")
def kn() -> Knowledge:
    return build(RULES)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    files = export(tmp_path_factory.mktemp("wiki"))
    return {k: v.decode("utf-8") for k, v in files.items()}


# ---------------------------------------------------------------- the pages

def test_every_page_is_written(pages: dict[str, str], kn: Knowledge) -> None:
    expected = {"index.md", "gpus.md", "gpus-full.md", "models.md", "precisions.md", "runtimes.md",
                "formulas.md", "sources.md", "prices.md"}
    expected |= {f"flows/{f.id}.md" for f in kn.flows}
    assert set(pages) == expected
    for text in pages.values():
        assert text.startswith("# ") and text.endswith("\n") and not text.endswith("\n\n")


def test_same_rules_same_bytes(tmp_path: Path) -> None:
    first = export(tmp_path / "a", env={"PYTHONHASHSEED": "1"})
    second = export(tmp_path / "b", env={"PYTHONHASHSEED": "2"})
    assert first == second


def test_a_second_export_into_the_same_directory_changes_nothing(tmp_path: Path) -> None:
    assert export(tmp_path) == export(tmp_path)


LINK = re.compile(r"\]\(([^)\s]+)\)")
ANCHOR = re.compile(r'<a id="([^"]+)"></a>')


def test_links_reach_pages_and_anchors(pages: dict[str, str]) -> None:
    anchors = {path: set(ANCHOR.findall(text)) for path, text in pages.items()}
    for path, text in pages.items():
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue
            file, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            assert dest in pages, f"{path}: link to missing page {target}"
            if frag:
                assert frag in anchors[dest], f"{path}: link to missing anchor {target}"


def test_anchors_are_unique(pages: dict[str, str]) -> None:
    for path, text in pages.items():
        ids = ANCHOR.findall(text)
        assert len(ids) == len(set(ids)), path


def test_index_links_every_page(pages: dict[str, str]) -> None:
    linked = {t.partition("#")[0] for t in LINK.findall(pages["index.md"])}
    assert linked == set(pages) - {"index.md"}


def _table_rows(text: str, first_header: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def test_gpu_page_leads_with_the_figures_people_compare(pages: dict[str, str], kn: Knowledge) -> None:
    """gpus.md: name, VRAM, bandwidth, FP16 and FP8 TFLOPS, power and price (issue 23), each GPU
    linked to its entry on the full table's page."""
    header = next(line for line in pages["gpus.md"].splitlines() if line.startswith("| GPU |"))
    assert [c.strip() for c in header.split("|")[1:-1]] == [
        "GPU", "memory GB", "GB/s", "FP16 TFLOPS", "FP8 TFLOPS", "TDP W", "buy; rent"]
    rows = _table_rows(pages["gpus.md"], "GPU")
    assert len(rows) == len(kn.gpus)
    for row, gpu in zip(rows, kn.gpus.values()):
        assert row[0].endswith(f"(gpus-full.md#gpu-{gpu['id']})")
        fp8 = gpu["tensor_tflops"]["fp8"]
        assert float(row[1].replace(",", "")) == pytest.approx(gpu["memory_gb"], rel=0.005)   # decimal GB, as answers
        assert row[2:5] == [number(gpu["bandwidth_gb_s"]),
                            "–" if gpu["tensor_tflops"]["fp16"] is None else number(gpu["tensor_tflops"]["fp16"]),
                            "–" if fp8 is None else number(fp8)]
    assert "[the full table](gpus-full.md)" in pages["gpus.md"]


def test_gpu_table_has_every_gpu_and_its_figures(pages: dict[str, str], kn: Knowledge) -> None:
    rows = _table_rows(pages["gpus-full.md"], "GPU")
    assert [r[1].strip("`") for r in rows] == list(kn.gpus)
    for row, gpu in zip(rows, kn.gpus.values()):
        assert float(row[6].replace(",", "")) == pytest.approx(gpu["memory_gb"], rel=0.005)  # decimal GB, 3 digits as answers show it
        assert row[8] == number(gpu["bandwidth_gb_s"])
        fp16 = gpu["tensor_tflops"]["fp16"]
        assert row[11] == ("–" if fp16 is None else number(fp16))
        assert f"(sources.md#src-{gpu['source']})" in row[-1]


def test_models_and_precisions_tables(pages: dict[str, str], kn: Knowledge) -> None:
    models = _table_rows(pages["models.md"], "model")
    assert [r[1].strip("`") for r in models] == list(kn.models)
    precisions = _table_rows(pages["precisions.md"], "precision")
    assert [r[1].strip("`") for r in precisions] == list(kn.precisions)
    for row, p in zip(precisions, kn.precisions.values()):
        assert row[4] == number(p["bits_per_weight"] / 8)


# ---------------------------------------------------------------- formulas.md

def test_formulas_read_as_math(pages: dict[str, str], kn: Knowledge) -> None:
    text = pages["formulas.md"]
    assert "`weights_gb = params × weight_bytes_per_param ÷ bytes_per_gb`" in text
    assert "when `is_full_ft or is_pretrain`: `weights_gb = params × grad_bytes ÷ bytes_per_gb`" in text
    for name, f in kn.formulas.items():
        assert f'<a id="f-{name}"></a>\n### {name}\n' in text
        assert f"Unit: {f.unit}." in text.split(f"### {name}\n", 1)[1].split("\n### ", 1)[0]


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"^### (\S+)\n", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2]))


WORKED = re.compile(r"Worked example: `kbq \"([^\"]+)\"`(?:, case (\d+))?, ([^:]+):\n\n```text\n"
                    r"(.*?)\n```", re.DOTALL)


def test_worked_examples_are_the_engines_figures(pages: dict[str, str], kn: Knowledge) -> None:
    """Each worked example shows the case, values and result of that query's trace."""
    sections = _sections(pages["formulas.md"])
    answers: dict[str, object] = {}
    traced = 0
    for name, body in sections.items():
        m = WORKED.search(body)
        if m is None:
            assert "No worked example" in body, name
            continue
        query, _case, how, block = m.groups()
        if query not in answers:
            answers[query] = answer(parse(query, kn), kn, query)
        last = block.splitlines()[-1]
        if how == "from its trace":
            traced += 1
            step = next(s for s in answers[query].trace  # type: ignore[attr-defined]
                        if s.rule.startswith(f"{name} (") and s.result is not None)
            assert last.split("= ", 1)[1] == with_unit(number(step.result), kn.formulas[name].unit)
            for value in step.values.values():
                assert number(value) in block
        assert block.splitlines()[0].startswith(f"{name} = ") or block.splitlines()[0].strip().startswith("when ")
    assert traced >= len(kn.formulas) // 2


def test_a_worked_example_by_hand(pages: dict[str, str]) -> None:
    """7B at FP16: 7e9 parameters × 2 bytes ÷ 1e9 = 14 GB (decimal GB, seed 000's arithmetic)."""
    body = _sections(pages["formulas.md"])["weights_gb"]
    assert "weights_gb = params × weight_bytes_per_param ÷ bytes_per_gb\n" in body
    assert "           = 7e9 × 2 ÷ 1e9\n           = 14 GB\n" in body


# ---------------------------------------------------------------- sources.md

def test_every_source_and_claim_with_the_engines_comparison(pages: dict[str, str],
                                                            kn: Knowledge) -> None:
    text = pages["sources.md"]
    for sid in kn.sources:
        assert f'<a id="src-{sid}"></a>' in text
    for claim in kn.claims:
        block = text.split(f'<a id="claim-{claim.id}"></a>', 1)[1].split("\n\n", 2)[1]
        a = answer(parse(claim.example_query, kn), kn, claim.example_query)
        entries = [e for e in a.claims_checked + a.disagreements if e["id"] == claim.id]
        assert entries, f"{claim.id} does not apply to its own example query"
        e = entries[0]
        assert f"kbq computes {with_unit(number(e['computed']), claim.unit)}" in block
        assert ("agrees" if e["agrees"] else "differs") in block
        assert f'`kbq "{claim.example_query}"`' in block


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


def _ascii(text: str) -> str:
    for sym, op in (("×", "*"), ("÷", "/"), ("≤", "<="), ("≥", ">="), ("≠", "!="), (" = ", " == ")):
        text = text.replace(sym, op)
    return text


TRICKY = ["a - (b - c)", "(a - b) - c", "a / (b * c)", "-(a ^ b)", "(-a) ^ b", "a ^ b ^ c",
          "(a ^ b) ^ c", "not (a and b)", "not a and b", "(a or b) and c", "(a < b) == c",
          "a * -b", "a - -b", "min(a, b - c) * 2", "1e9 * 2.5e-3", 'if(a > 0, "x", "y") == "x"']


def _shipped_expressions(kn: Knowledge) -> list[Any]:
    out: list[Any] = []
    for f in kn.formulas.values():
        for c in f.cases:
            out += [c.expr] + ([c.when] if c.when else [])
    for flow in kn.flows:
        out += [e.when for n in flow.nodes.values() for e in n.edges if e.when]
    for claim in kn.claims:
        out += [claim.computed, claim.applies_when]
    return out


def test_math_reads_back_as_the_same_expression(kn: Knowledge) -> None:
    """The readable math keeps every parenthesis the meaning needs, and no more than that."""
    from kb.expr import parse as ex
    for compiled in [ex.parse(t) for t in TRICKY] + _shipped_expressions(kn):
        shown = math(compiled.ast)
        assert ex.parse(_ascii(shown)).ast == compiled.ast, shown
    assert math(ex.parse("(a - b) - c").ast) == "a - b - c"
    assert math(ex.parse("a * (b / c)").ast) == "a × (b ÷ c)"


@pytest.mark.parametrize(("value", "text"), [(7e9, "7e9"), (70.6e9, "7.06e10"), (2.0, "2"),
                                             (0.75, "0.75"), (1e12, "1e12"), (4096.0, "4096")])
def test_literals_are_written_as_in_a_rule(value: float, text: str) -> None:
    assert literal(value) == text


# ---------------------------------------------------------------- round trip

NEW_GPU = """\
  - id: acme-x1-64gb
    name: Acme X1 64GB
    vendor: amd
    segment: datacenter
    architecture: Test
    release_year: 2025
    aliases: [acme x1, x1 64gb]
    vram_gb: 64
    memory_bytes: 68_719_476_736
    memory_type: HBM3
    bandwidth_gb_s: 2000
    fp32_tflops: 50
    tensor_tflops: {tf32: 200, fp16: 400, bf16: 400, fp8: 800, int8: 800, int4: null, fp4: null}
    tdp_w: 500
    interconnect: {kind: pcie, generation: "5", gb_s: 128}
    pcie_generation: 5
    ecc: true
    form_factor: PCIe dual-slot
    source: kbq-defaults
"""


def test_a_new_gpu_goes_from_yaml_to_answer_and_wiki(tmp_path: Path) -> None:
    root = tmp_path / "rules"
    shutil.copytree(RULES, root)
    gpus = root / "gpus.yaml"
    text = gpus.read_text(encoding="utf-8")
    gpus.write_text(text.rstrip("\n") + "\n" + NEW_GPU, encoding="utf-8")

    checked = kbq("validate", str(root))
    assert checked.returncode == 0, checked.stderr
    assert "ok — " in checked.stdout

    shown = kbq("--rules", str(root), "infer 7B fp16 on acme x1")
    assert shown.returncode == 0, shown.stderr
    assert "Acme X1 64GB" in shown.stdout
    as_json = json.loads(kbq("--rules", str(root), "--json", "infer 7B fp16 on acme x1").stdout)
    assert [g["id"] for g in as_json["gpus"]] == ["acme-x1-64gb"]
    assert as_json["gpus"][0]["fits"] is True

    files = export(tmp_path / "wiki", "--rules", str(root))
    rows = _table_rows(files["gpus-full.md"].decode("utf-8"), "GPU")
    assert ["Acme X1 64GB", "`acme-x1-64gb`", "amd", "datacenter", "Test", "2025", "68.7", "HBM3",      # 64 GiB in GB
            "2000", "50", "200", "400", "400", "800", "800", "–", "–", "500",
            "pcie 5, 128 GB/s", "yes", "PCIe dual-slot", "–",        # no price in prices.yaml
            "[kbq-defaults](sources.md#src-kbq-defaults)"] in rows
    assert "GPU `acme-x1-64gb`" in files["sources.md"].decode("utf-8")


# ---------------------------------------------------------------- the knowledge graph

def test_docs_graph_is_what_export_graph_writes_today() -> None:
    result = kbq("export", "graph", "--markdown")
    assert result.returncode == 0, result.stderr
    docs = (Path(__file__).resolve().parent.parent / "docs" / "graph.md").read_text(encoding="utf-8")
    assert docs == result.stdout, "run: kbq export graph --markdown > docs/graph.md"


def test_export_graph_is_the_same_built_or_read_from_a_snapshot() -> None:
    read = kbq("export", "graph")
    built = kbq("export", "graph", env={"KBQ_NO_CACHE": "1"})
    assert read.returncode == built.returncode == 0, read.stderr + built.stderr
    assert read.stdout == built.stdout


def test_the_graph_chart_has_every_formula_flow_node_and_edge(kn: Knowledge) -> None:
    """Read back from the Mermaid text: the declared labels, and the edges by arrow kind, against
    the rule files (each formula's deps, each node's edges and compute list)."""
    result = kbq("export", "graph")
    assert result.returncode == 0, result.stderr
    label = {m.group(1): m.group(2) for m in
             re.finditer(r'^ +(n\d+)[\[\(\{]+"([^"]*)"', result.stdout, re.M)}
    name = {i: (text.split(":")[0] if ":" in text else text) for i, text in label.items()}
    flow_of = {}
    for m in re.finditer(r'subgraph n\d+_flow\["flow ([^"]+)"\]\n(.*?)\n    end', result.stdout, re.S):
        flow_of.update({i: m.group(1) for i in re.findall(r"^ +(n\d+)[\[\(\{]", m.group(2), re.M)})
    key = {i: f"{flow_of[i]}/{n}" if i in flow_of else n for i, n in name.items()}
    arrows = {"==>": "flow", "-.->": "computes", "-->": "reads"}
    edges = {(key[a], key[b], arrows[arrow]) for a, arrow, b in
             re.findall(r"^    (n\d+) (==>|-\.->|-->)(?:\|\"[^\"]*\"\|)? (n\d+)$", result.stdout, re.M)}
    assert sorted(key.values()) == sorted([*kn.formulas, *(f"{f.id}/{n}" for f in kn.flows for n in f.nodes)])
    want = {(d, n, "reads") for n, f in kn.formulas.items() for d in f.deps if d in kn.formulas}
    want |= {(f"{f.id}/{n.id}", f"{f.id}/{e.to}", "flow") for f in kn.flows for n in f.nodes.values()
             for e in n.edges}
    want |= {(f"{f.id}/{n.id}", c, "computes") for f in kn.flows for n in f.nodes.values() for c in n.compute}
    assert edges == want
