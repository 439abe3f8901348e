"""Every class name is declared once across kb/ and server/, so a name says which thing it is
(issue 24): the Knowledge's Flow, the flow file's schema (FlowFile) and an expression's node
(ExprNode) are not three classes called alike."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def class_names(root: Path = ROOT) -> dict[str, list[str]]:
    """Class name → the modules (paths under root) that declare it, at any depth."""
    found: dict[str, list[str]] = defaultdict(list)
    for package in ("kb", "server"):
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    found[node.name].append(str(path.relative_to(root)))
    return found


def test_no_class_name_is_declared_twice() -> None:
    twice = {name: where for name, where in class_names().items() if len(where) > 1}
    assert twice == {}


def test_the_check_sees_a_name_declared_twice(tmp_path: Path) -> None:
    (tmp_path / "kb" / "sub").mkdir(parents=True)
    (tmp_path / "server").mkdir()
    (tmp_path / "kb" / "a.py").write_text("class Node:\n    class Inner: ...\n")
    (tmp_path / "kb" / "sub" / "b.py").write_text("def f():\n    class Node: ...\n")
    (tmp_path / "server" / "c.py").write_text("class Other: ...\n")
    names = class_names(tmp_path)
    assert names["Node"] == ["kb/a.py", "kb/sub/b.py"] and names["Other"] == ["server/c.py"]
