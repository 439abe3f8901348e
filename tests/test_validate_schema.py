"""The published JSON Schemas of the rule files (rules/schema/), what `kbq schema NAME` prints, and
the editors' guide (docs/rules.md) covering the expression language."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest
from validate_cases import RULES, SCHEMA_NAMES, kbq

from kb.cli.common import dump
from kb.knowledge.schema import FILES, json_schema

# ---------------------------------------------------------------- JSON Schema files

def _cli_schema_names() -> set[str]:
    from kb.cli.rulefiles import schema

    return set(schema.params[0].type.choices)  # type: ignore[attr-defined]


def _schema_name_params() -> list[Any]:
    offered = _cli_schema_names()
    return [pytest.param(name, marks=[] if name in offered else [pytest.mark.xfail(
        strict=True, reason=f"kbq schema does not offer '{name}': its list of names in "
        "kb/cli/rulefiles.py is written out by hand instead of taken from kb.knowledge.schema.FILES")])
        for name in FILES]


def test_every_kind_in_the_brief_has_a_schema() -> None:
    assert set(SCHEMA_NAMES) <= set(FILES)


@pytest.mark.parametrize("name", _schema_name_params())
def test_committed_schema_is_what_kbq_prints(name: str) -> None:
    printed = kbq("schema", name)
    assert printed.returncode == 0, printed.stderr
    committed = (RULES / "schema" / f"{name}.schema.json").read_text(encoding="utf-8")
    assert committed == printed.stdout, f"regenerate: kbq schema {name} > rules/schema/{name}.schema.json"


@pytest.mark.parametrize("name", list(FILES))
def test_committed_schema_is_current(name: str) -> None:
    """The same check without the CLI, for every kind kb.knowledge.schema knows."""
    committed = (RULES / "schema" / f"{name}.schema.json").read_text(encoding="utf-8")
    assert committed == dump(json_schema(name)), f"regenerate rules/schema/{name}.schema.json"


def _rule_files() -> list[Path]:
    return sorted(RULES.glob("*.yaml")) + sorted((RULES / "flows").glob("*.yaml"))


@pytest.mark.parametrize("path", _rule_files(), ids=lambda p: p.relative_to(RULES).as_posix())
def test_each_rule_file_names_its_schema(path: Path) -> None:
    kind = "flow" if path.parent.name == "flows" else path.stem
    first = path.read_text(encoding="utf-8").splitlines()[0]
    prefix = "# yaml-language-server: $schema="
    assert first.startswith(prefix)
    schema = (path.parent / first[len(prefix):]).resolve()
    assert schema == (RULES / "schema" / f"{kind}.schema.json").resolve()
    assert json.loads(schema.read_text(encoding="utf-8"))["title"] == f"kbq rules: {kind}"


def _schema_params() -> list[Any]:
    out = []
    for path in _rule_files():
        marks = []
        out.append(pytest.param(path, id=path.relative_to(RULES).as_posix(), marks=marks))
    return out


@pytest.mark.parametrize("path", _schema_params())
def test_shipped_rule_files_pass_their_published_schema(path: Path) -> None:
    """What an editor checks with the JSON Schema agrees with kbq on the shipped files."""
    jsonschema = pytest.importorskip("jsonschema")
    from kb.knowledge.loader import load

    kind = "flow" if path.parent.name == "flows" else path.stem
    schema = json.loads((RULES / "schema" / f"{kind}.schema.json").read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    problems = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
                for e in validator.iter_errors(load(path, RULES).data)]
    assert problems == []


def test_schema_rejects_a_misspelt_key_as_kbq_does() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((RULES / "schema" / "gpus.schema.json").read_text(encoding="utf-8"))
    from kb.knowledge.loader import load

    data = load(RULES / "gpus.yaml", RULES).data
    gpu = dict(data["gpus"][0])
    gpu["bandwith_gb_s"] = gpu.pop("bandwidth_gb_s")
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors({"gpus": [gpu]}))
    assert {e.validator for e in errors} == {"additionalProperties", "required"}


# ---------------------------------------------------------------- the editors' guide

DOC = Path(__file__).resolve().parent.parent / "docs" / "rules.md"


def test_the_guide_covers_the_expression_language() -> None:
    from kb.expr import parse as ex
    from kb.knowledge.schema import NodeSchema

    text = DOC.read_text(encoding="utf-8")
    for fn in ex.FUNCTIONS:
        assert f"`{fn}(" in text, fn
    for word in ex.COUNTS:
        assert f"`{word}`" in text, word
    for op in ("+", "-", "*", "/", "^", "<", "<=", ">", ">=", "==", "!=", "and", "or"):
        assert f"`a {op} b`" in text, op
    assert "`not a`" in text and "`-a`" in text
    for field_name in ("kind", "style"):
        for word in _literals(NodeSchema.model_fields[field_name].annotation):
            assert f" {word} " in text or f" {word}\n" in text, word
    for command in ("kbq validate", "kbq export --format markdown --out", "kbq export flow",
                    "kbq schema NAME"):
        assert command in text


def _literals(tp: Any) -> list[str]:
    if typing.get_origin(tp) is typing.Literal:
        return [str(a) for a in typing.get_args(tp)]
    return [w for arg in typing.get_args(tp) for w in _literals(arg)]
