"""Hostile input to the command line ends as a usage error (exit 2, one line, no traceback).

--model-config files that are deep, huge, or hold sizes no model has; an export target that is
not a directory; unbounded inputs such as /dev/zero.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

KBQ = shutil.which("kbq")
pytestmark = pytest.mark.skipif(KBQ is None, reason="the kbq console script is not installed")

# A Llama-3.1-8B-shaped config.json (figures from meta-llama/Llama-3.1-8B config.json)
LLAMA = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
         "num_key_value_heads": 8, "vocab_size": 128256, "intermediate_size": 14336,
         "max_position_embeddings": 131072, "model_type": "llama"}


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KBQ, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def refused(r: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr[-400:])
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-400:]
    for fragment in fragments:
        assert fragment in r.stderr, (fragment, r.stderr[-400:])
    assert len(r.stderr) < 2000


def test_the_plain_config_answers(tmp_path: Path) -> None:
    """The base config is sound: every refusal below comes from its edit."""
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    r = run("--json", "--model-config", "config.json", "serve 4 users", cwd=tmp_path)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("text, fragment", [
    ("[" * 100_000 + "]" * 100_000, "nested too deep"),
    ('{"hidden_size": ' + "9" * 5001 + "}", "too long"),
    ('{"hidden_size": 4096,\n "layers": }', "config.json:2:12"),
], ids=["100k-deep", "5001-digits", "syntax"])
def test_a_config_json_that_cannot_be_read_is_a_usage_error(tmp_path: Path, text: str,
                                                            fragment: str) -> None:
    (tmp_path / "config.json").write_text(text)
    refused(run("--json", "--model-config", "config.json", "serve 4 users", cwd=tmp_path), fragment)


@pytest.mark.parametrize("key", ["sliding_window", "hidden_size", "max_position_embeddings"])
def test_a_size_no_model_has_is_refused_by_name(tmp_path: Path, key: str) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, key: 1e20}))
    refused(run("--json", "--model-config", "config.json", "serve 4 users", cwd=tmp_path), key)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_an_endless_config_is_refused_after_the_cap(tmp_path: Path) -> None:
    refused(run("--model-config", "/dev/zero", "serve 4 users", cwd=tmp_path), "larger than")


def test_export_to_a_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "pages.md").write_text("x")
    refused(run("export", "--out", "pages.md", cwd=tmp_path), "pages.md")
    assert (tmp_path / "pages.md").read_text() == "x"


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="needs /dev/null")
def test_export_to_dev_null_is_a_usage_error(tmp_path: Path) -> None:
    refused(run("export", "--out", "/dev/null", cwd=tmp_path), "not a directory")


# ---------------------------------------------------------------- depth the rule files control

def _rules_copy(tmp_path: Path) -> Path:
    from kb.paths import rules_dir

    root = tmp_path / "rules"
    shutil.copytree(rules_dir(), root)
    return root


def _chain_flow(n: int) -> str:
    """An advice flow that is one chain of n nodes: start → question × (n-2) → verdict."""
    lines = ["id: chain", "title: A long chain", "role: advice", "order: 90",
             "source: 000_1ca19009ae21ed7e", "entry: N0", "nodes:"]
    for i in range(n):
        kind = "start" if i == 0 else "verdict" if i == n - 1 else "question"
        lines += [f"  - id: N{i}", f"    kind: {kind}", f"    text: step {i}"]
        if i < n - 1:
            lines += ["    edges:", f"      - {{to: N{i + 1}}}"]
    return "\n".join(lines) + "\n"


def test_a_1200_node_chain_flow_is_drawn(tmp_path: Path) -> None:
    """Python's recursion limit is 1,000 frames: a chain longer than that once passed validate,
    then failed every page that draws it. Each node sits one layer below the last, so the
    drawing holds 1,200 node boxes, one per layer."""
    from server import create_app

    root = _rules_copy(tmp_path)
    (root / "flows" / "chain.yaml").write_text(_chain_flow(1200), encoding="utf-8")
    r = run("validate", str(root), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-400:]
    client = create_app({"KBQ_RULES": str(root), "KBQ_RELOAD_SECONDS": 0}).test_client()
    page = client.get("/flows/chain")
    assert page.status_code == 200
    svg = page.get_data(as_text=True)
    assert len(re.findall(r"<title>N\d+ \((?:start|question|verdict)\)", svg)) == 1200
    assert "N1199 (verdict): step 1199" in svg
    answer = client.get("/?q=serve+7B")
    assert answer.status_code == 200
    shown = answer.get_data(as_text=True)
    assert len(re.findall(r"<title>N\d+ \((?:start|question|verdict)\)", shown)) == 1200


def _count(summary: str, what: str) -> int:
    """'rules: ok — 97 GPUs, …, 110 formulas, …' → 110 for 'formulas'."""
    return int(re.search(rf"(\d+) {what}\b", summary).group(1))  # type: ignore[union-attr]


def test_a_1500_deep_chain_of_formulas_validates_and_answers(tmp_path: Path) -> None:
    """chain_0 needs chain_1, …, chain_1499 needs runtime.overhead_gb: 1,500 levels of
    dependency, deeper than Python's recursion limit. Nothing reads chain_0, so answers are
    unchanged."""
    root = _rules_copy(tmp_path)
    path = root / "formulas.yaml"
    text = path.read_text(encoding="utf-8")
    chain = "".join(
        f"  chain_{i}:\n    unit: GB\n    meaning: one link of a long chain\n"
        f"    expr: {f'chain_{i + 1}' if i < 1499 else 'runtime.overhead_gb'}\n"
        f"    sources: [kaplan-2020-scaling]\n" for i in range(1500))
    path.write_text(text.replace("\nformulas:\n", "\nformulas:\n" + chain, 1), encoding="utf-8")
    r = run("validate", str(root), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-400:]
    shipped = run("validate", cwd=tmp_path).stdout
    assert _count(r.stdout, "formulas") == _count(shipped, "formulas") + 1500
    assert run("--rules", str(root), "--no-trace", "serve 7B", cwd=tmp_path).returncode == 0
