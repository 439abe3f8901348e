"""Reading rule files: libyaml's fast composer gives exactly what PyYAML's own loader gives, and
every text it refuses is read (and its error reported) by the checked loader."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import kb.knowledge.loader
from kb.errors import RuleError
from kb.knowledge.loader import load

RULES = Path(__file__).resolve().parent.parent / "rules"
FILES = sorted(RULES.rglob("*.yaml"))

needs_libyaml = pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml")


@needs_libyaml
@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(RULES)))
def test_both_loaders_read_each_rule_file_alike(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    used = []
    real = kb.knowledge.loader._fast_node

    def spy(text: str):  # type: ignore[no-untyped-def]
        got = real(text)
        used.append(got is not None)
        return got

    monkeypatch.setattr(kb.knowledge.loader, "_fast_node", spy)
    fast = load(path, RULES)
    assert used == [True]                       # the shipped files take the fast path
    monkeypatch.setattr(kb.knowledge.loader, "_fast_node", lambda text: None)
    slow = load(path, RULES)
    assert fast.data == slow.data
    assert fast.positions == slow.positions
    # the same types too (1e9 a float, 7 an int), which == alone would not tell apart
    assert repr(fast.data) == repr(slow.data)


@pytest.mark.parametrize(("text", "where", "message"), [
    ("a: &x [1, 2]\nb: *x\n", (2, 4), "YAML: aliases (*x) are not used in rule files; write the value out"),
    ("a: " + "[" * 60 + "]" * 60 + "\n", (1, 44), "nested deeper than 40 levels"),
    ("a: [1, 2\nb: 3\n", (1, 4), "YAML: this [ is not closed"),
    ("a: 1\na: 2\n", (2, 1), "duplicate key 'a'"),
])
def test_what_the_fast_path_refuses_gets_the_checked_loaders_error(
        text: str, where: tuple[int, int], message: str, tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(RuleError) as info:
        load(path)
    err = info.value
    assert (err.line, err.column) == where
    assert err.message.startswith(message)
