"""What the rule-harm tests share (tests/test_rules_harm*.py): an edit to a copy of the rules, the
load errors it gives, one error found by position, and an answer on the edited rules."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from kb.engine import answer
from kb.errors import RuleErrors
from kb.knowledge.build import build
from kb.query.parse import parse

SHAPE = re.compile(r"^rules/[\w./-]+:\d+:\d+: \S")
# a formula line of rules/formulas.yaml the tests edit
EXPR_LINE = "expr: mlp_matrices * model.hidden_size * model.intermediate_size"


def edit(root: Path, name: str, old: str, new: str, after: str | None = None) -> tuple[int, int]:
    """Replace the first `old` (after `after`, when given) in root/name with `new`; return the
    1-based (line, column) where `new` starts."""
    path = root / name
    text = path.read_text(encoding="utf-8")
    start = text.index(after) if after is not None else 0
    i = text.index(old, start)
    if after is None:
        assert text.count(old) == 1, f"{old!r} is not unique in {name}"
    path.write_text(text[:i] + new + text[i + len(old):], encoding="utf-8")
    line = text.count("\n", 0, i) + 1
    column = i - (text.rfind("\n", 0, i) + 1) + 1
    return line, column


def load_errors(root: Path) -> list[str]:
    with pytest.raises(RuleErrors) as info:
        build(root)
    rendered = [e.render() for e in info.value.errors]
    assert rendered
    for text in rendered:
        assert SHAPE.match(text), text
    return rendered


def error_at(errors: list[str], file: str, line: int, column: int, *fragments: str) -> str:
    """The one error at file:line:col; it must hold every fragment."""
    prefix = f"rules/{file}:{line}:{column}: "
    hits = [e for e in errors if e.startswith(prefix)]
    assert hits, f"no error at {prefix!r} in {errors}"
    for fragment in fragments:
        assert any(fragment in h for h in hits), (fragment, hits)
    return hits[0]


def ask_with(root: Path, q: str, one_card: bool = False) -> dict:
    kn = build(root)
    if one_card:       # every GPU on one card, ranked by the sizing flow (no prices.yaml advice)
        kn = replace(kn, advice={})
    d = answer(parse(q, kn), kn, q).to_dict()
    json.dumps(d, allow_nan=False)
    return d
