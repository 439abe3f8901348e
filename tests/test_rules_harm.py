"""Rule files cannot do harm.

A copy of rules/ is edited the way a careless or hostile contributor might, and each edit must
end as a load error at its position (`rules/<file>:line:col: message`) — or, for a value that
only goes wrong at evaluation (a division by zero), as an answer that names the formula in its
warnings. Never code run, a file written, a crash, a RecursionError or a hang. Here: YAML tags
and expressions that try to reach outside; sizes and numbers in tests/test_rules_harm_limits.py,
evaluation in tests/test_rules_harm_eval.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rules_harm_common import EXPR_LINE, ask_with, edit, error_at, load_errors

from kb.errors import RuleErrors

# ---------------------------------------------------------------- YAML tags

def _system(target: Path) -> str:
    return f'!!python/object/apply:os.system ["echo pwned > {target}"]'


# (file, text replaced, replacement with {tag}, anchor): the tag as a mapping value, a list,
# a flow-mapping value, a key, a list item and a flow's node text.
PLACES = [
    ("gpus.yaml", "aliases: [a10g, nvidia a10g, a10g 24gb, aws a10g]", "aliases: {tag}", None),
    ("formulas.yaml", "expr: mlp_matrices * model.hidden_size * model.intermediate_size", "expr: {tag}", None),
    ("formulas.yaml", "1.0e9, unit: B/GB", "{tag}, unit: B/GB", None),
    ("models.yaml", "models:\n", "{tag}: 1\nmodels:\n", None),
    ("query.yaml", '"yes", "no", "off", be,', '"yes", {tag}, "off", be,', None),
    ("flows/sizing.yaml", "text: Training or inference?", "text: {tag}", None),
    ("runtimes.yaml", "decode_bandwidth_efficiency: 0.861", "decode_bandwidth_efficiency: {tag}",
     "id: ollama"),
]


@pytest.mark.parametrize("file, old, new, after", PLACES, ids=[f"{p[0]}:{p[2][:12]}" for p in PLACES])
def test_a_python_tag_anywhere_is_an_error_and_never_runs(
        rules: Path, tmp_path: Path, file: str, old: str, new: str, after: str | None) -> None:
    target = tmp_path / "PWNED"
    line, column = edit(rules, file, old, new.format(tag=_system(target)), after)
    column += new.index("{tag}")
    errors = load_errors(rules)
    error_at(errors, file, line, column, "tag:yaml.org,2002:python/object/apply:os.system",
             "not allowed")
    assert not target.exists() and not (tmp_path / "pwned").exists()


TAGS = [
    '!!python/object/apply:os.system ["echo pwned > {target}"]',
    '!!python/object/new:os.system ["echo pwned > {target}"]',
    '!!python/object/apply:subprocess.check_output [["sh", "-c", "echo pwned > {target}"]]',
    "!!python/name:os.system ''",
    "!!python/module:os ''",
    "!!python/object:builtins.object {{}}",
    "!!python/tuple [1, 2]",
    '!<tag:yaml.org,2002:python/object/apply:os.system> ["echo pwned > {target}"]',
    '!os.system ["echo pwned > {target}"]',
    "!!binary aGVsbG8=",
]


@pytest.mark.parametrize("tag", TAGS, ids=[t.split()[0] for t in TAGS])
def test_every_kind_of_tag_is_refused(rules: Path, tmp_path: Path, tag: str) -> None:
    target = tmp_path / "PWNED"
    line, column = edit(rules, "gpus.yaml", "bandwidth_gb_s: 600", "bandwidth_gb_s: "
                        + tag.format(target=target), after="id: a10g")
    errors = load_errors(rules)
    error_at(errors, "gpus.yaml", line, column + len("bandwidth_gb_s: "))
    assert not target.exists()


def test_a_tagged_document_is_refused(rules: Path, tmp_path: Path) -> None:
    target = tmp_path / "PWNED"
    (rules / "sources.yaml").write_text(f"--- {_system(target)}\n", encoding="utf-8")
    errors = load_errors(rules)
    error_at(errors, "sources.yaml", 1, 5, "not allowed")
    assert not target.exists()


def test_a_python_tag_is_refused_through_the_snapshot_path_too(rules: Path, tmp_path: Path) -> None:
    """ask(rules_dir=…) goes through the knowledge snapshot: the same error, nothing run,
    nothing cached."""
    from kb import ask

    target = tmp_path / "PWNED"
    edit(rules, "formulas.yaml", "expr: mlp_matrices * model.hidden_size * model.intermediate_size",
         f"expr: {_system(target)}")
    with pytest.raises(RuleErrors):
        ask("serve 7B", rules_dir=rules)
    assert not target.exists()
    assert not list((tmp_path / "cache").glob("knowledge-*"))


# ---------------------------------------------------------------- expressions reaching out

# (expression, what the error says, column of the error within the expression, 0-based)
ESCAPES = [
    ("__import__('os')", "unknown function '__import__'", 0),
    ("__import__('os').system('echo pwned')", "unexpected '.'", 16),
    ("open('x')", "unknown function 'open'", 0),
    ("eval('1')", "unknown function 'eval'", 0),
    ("exec('import os')", "unknown function 'exec'", 0),
    ("getattr(model, 'hidden_size')", "unknown function 'getattr'", 0),
    ("os.system('echo pwned')", "unexpected '('", 9),
    ("model.__class__.__mro__", "unknown name 'model.__class__.__mro__'", 0),
    ("gpu.__class__.__init__.__globals__", "unknown name 'gpu.__class__.__init__.__globals__'", 0),
    ("__builtins__", "unknown name '__builtins__'", 0),
    ("().__class__", "unexpected ')'", 1),
    ("[].__class__", "unexpected character '['", 0),
    ("'x'.join('y')", "unexpected '.'", 3),
    ("lambda: 1", "unexpected character ':'", 6),
    ("model.hidden_size; import os", "unexpected character ';'", 17),
]


@pytest.mark.parametrize("expr, message, offset", ESCAPES, ids=[e[0] for e in ESCAPES])
def test_an_expression_cannot_reach_outside(rules: Path, expr: str, message: str,
                                            offset: int) -> None:
    quoted = json.dumps(expr)            # a YAML double-quoted scalar
    line, column = edit(rules, "formulas.yaml", EXPR_LINE, f"expr: {quoted}")
    errors = load_errors(rules)
    error_at(errors, "formulas.yaml", line, column + len("expr: ") + 1 + offset, message)


def test_code_in_a_string_stays_text(rules: Path) -> None:
    line, column = edit(rules, "formulas.yaml", EXPR_LINE,
                        """expr: '"__import__(''os'').system(''echo pwned'')"'""")
    errors = load_errors(rules)
    error_at(errors, "formulas.yaml", line, column + len("expr: "), "units")


def test_a_flow_condition_cannot_reach_outside(rules: Path) -> None:
    line, column = edit(rules, "flows/sizing.yaml", "when: is_training,",
                        "when: \"__import__('os')\",")
    errors = load_errors(rules)
    error_at(errors, "flows/sizing.yaml", line, column + len('when: "'),
             "unknown function '__import__'")


def test_a_verdict_template_cannot_reach_attributes(rules: Path) -> None:
    line, _ = edit(rules, "flows/sizing.yaml", "Needs {total_gb} GB in all; ",
                   "Needs {gpu.__class__.__init__.__globals__} GB in all; ")
    errors = load_errors(rules)
    hits = [e for e in errors if e.startswith(f"rules/flows/sizing.yaml:{line}:")]
    assert hits and "unknown name 'gpu.__class__.__init__.__globals__'" in hits[0], errors


def test_a_verdict_format_spec_cannot_blow_up_the_answer(rules: Path) -> None:
    edit(rules, "flows/sizing.yaml", "Needs {total_gb} GB in all; ",
         "Needs {total_gb:>10000000} GB in all; ")
    try:
        d = ask_with(rules, "serve 7B")
    except RuleErrors:
        return
    assert len(d["verdict"]) < 10_000
