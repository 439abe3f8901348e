"""From a rule file to an answer and the wiki (a new GPU), and the knowledge graph's chart
(docs/graph, `kbq export graph`)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from export_common import RULES, export, kbq, table_rows

from kb.knowledge.build import Knowledge

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
    rows = table_rows(files["gpus-full.md"].decode("utf-8"), "GPU")
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
