"""The verdict's policy lives in rules/query.yaml `verdict`: its limits (each with a reason)
and the wording of its sentences. Changing them in the rules changes the verdict, with no
Python edited; every template names only the fields the code fills."""

from __future__ import annotations

import ast
import shutil
import string
from pathlib import Path

import yaml

from kb import ask, get_knowledge
from kb.knowledge import wording

RULES = Path(__file__).resolve().parent.parent / "rules"
QUERY = "serve 8b fp16 vs int4 on h100"

KB = Path(__file__).resolve().parent.parent / "kb"


def _names(node: ast.AST) -> set[str]:
    """The template names an expression may give: its string constants that name a template."""
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and n.value in wording.FIELDS}


def _filled() -> tuple[dict[str, set[frozenset[str]]], set[str]]:
    """What the code fills each template with, read from its source: `say(kn, NAME, field=…)`,
    `templates[NAME].format(field=…)` and `Note(NAME, ((field, value), …))` calls (a call with
    **values is only counted as a use)."""
    filled: dict[str, set[frozenset[str]]] = {}
    used: set[str] = set()
    for path in KB.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id == "say" and len(node.args) >= 2:
                names = _names(node.args[1])
            elif isinstance(func, ast.Attribute) and func.attr == "format" and isinstance(func.value, ast.Subscript):
                names = _names(func.value.slice)
            elif isinstance(func, ast.Name) and func.id == "Note" and len(node.args) >= 2:
                # a layout note (kb.engine.resolving.layout.Note): its values as (field, value) pairs
                names = _names(node.args[0])
                pairs = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else []
                fields = {p.elts[0].value for p in pairs if isinstance(p, ast.Tuple)
                          and isinstance(p.elts[0], ast.Constant)} | ({"problems"} if len(node.args) > 2 else set())
                used |= names
                for name in names:
                    filled.setdefault(name, set()).add(frozenset(str(f) for f in fields))
                continue
            else:
                continue
            used |= names
            if all(k.arg is not None for k in node.keywords):
                for name in names:
                    filled.setdefault(name, set()).add(frozenset(str(k.arg) for k in node.keywords))
    return filled, used


def test_the_code_fills_each_template_with_the_fields_validate_checks() -> None:
    """kbq validate checks the rules' templates against kb/knowledge/wording.py FIELDS; here the
    code's own calls are read: each fills a template with exactly those fields."""
    filled, used = _filled()
    assert len(filled) >= 100, len(filled)
    for name, calls in filled.items():
        for fields in calls:
            assert fields == set(wording.FIELDS[name]), (name, sorted(fields), wording.FIELDS[name])


def test_every_template_is_said_somewhere() -> None:
    """A template the code never names is wording no answer shows (a string constant equal to its
    name anywhere in kb/ counts: some are chosen from a table)."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in KB.rglob("*.py") if p.name != "wording.py"
                     or p.parent.name != "knowledge")
    unsaid = [name for name in wording.FIELDS if f'"{name}"' not in text]
    assert not unsaid, unsaid


def test_every_template_names_only_the_fields_the_code_fills() -> None:
    templates = get_knowledge().query["verdict"]["templates"]
    assert set(templates) == set(wording.FIELDS)
    for name, text in templates.items():
        named = {field for _, field, _, _ in string.Formatter().parse(text) if field}
        assert named == set(wording.FIELDS[name]), (name, named ^ set(wording.FIELDS[name]))


def test_every_limit_says_why() -> None:
    verdict = get_knowledge().query["verdict"]
    for key in ("max_words", "faster_ratio", "less_memory_fraction", "most_fixes", "most_alternatives",
                "memory_parts_named"):
        assert len(verdict[key]["reason"].split()) >= 10, key


def _rules(tmp_path: Path, **changes: object) -> Path:
    root = tmp_path / "rules"
    shutil.copytree(RULES, root)
    doc = yaml.safe_load((root / "query.yaml").read_text(encoding="utf-8"))
    for key, value in changes.items():
        if key in doc["verdict"]["templates"]:
            doc["verdict"]["templates"][key] = value
        else:
            doc["verdict"][key]["value"] = value
    (root / "query.yaml").write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    return root


def test_the_rules_word_and_weigh_an_a_vs_b_verdict(tmp_path: Path) -> None:
    """fp16 against int4 of an 8B model on one H100: int4 decodes about twice as fast and needs
    about a third of the memory (weights 16 against ~4.5 bits). A 3× lead is asked for speed and
    a 90% gap for memory: neither is named; the even sentence is the rules' own."""
    shipped = ask(QUERY).verdict
    assert "faster" in shipped and "GB less" in shipped
    root = _rules(tmp_path, faster_ratio=3.0, less_memory_fraction=0.9, sides_even="Even, by the rules.")
    changed = ask(QUERY, rules_dir=root).verdict
    assert changed.endswith("Even, by the rules."), changed
    assert "faster" not in changed and "GB less" not in changed


def test_the_rules_set_how_finely_the_largest_model_is_named(tmp_path: Path) -> None:
    """Two significant digits asked instead of three: the size named is the three-digit one
    rounded down to two (rounding down keeps a size that fits)."""
    query = "largest model for rtx 4090"
    three = ask(query).question
    root = tmp_path / "rules"
    shutil.copytree(RULES, root)
    doc = yaml.safe_load((root / "query.yaml").read_text(encoding="utf-8"))
    doc["solve"]["largest_model"]["precision"]["digits"] = 2
    (root / "query.yaml").write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    two = ask(query, rules_dir=root).question
    assert three is not None and two is not None
    b3, b2 = float(str(three["value_b"])), float(str(two["value_b"]))
    assert b2 == float(f"{b3:.2g}") or b2 == int(b3), (b3, b2)
    assert b2 <= b3


def test_the_rules_set_how_many_alternatives_a_which_gpu_verdict_names(tmp_path: Path) -> None:
    """'which gpu for 8b' names the pick and two alternatives (faster, cheaper or to rent) as
    shipped; with verdict.most_alternatives at 1 it names one, and the pick's sentence stays."""
    query = "which gpu for 8b"
    alternatives = ("Faster:", "Cheaper:", "Cheaper but tight:", "To rent:")

    def named(verdict: str) -> int:
        return sum(verdict.count(a) for a in alternatives)
    shipped = ask(query).verdict
    root = tmp_path / "rules"
    shutil.copytree(RULES, root)
    doc = yaml.safe_load((root / "query.yaml").read_text(encoding="utf-8"))
    doc["verdict"]["most_alternatives"]["value"] = 1
    (root / "query.yaml").write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    one = ask(query, rules_dir=root).verdict
    assert named(shipped) == 2, shipped
    assert named(one) == 1 and one.split(". ")[0] == shipped.split(". ")[0], one
