"""Each shape is declared once and the rest follows: the snapshot stores a record from its
declaration (a field added is stored and read back with no code written for it), the snapshot's
format key follows every declaration, and what is generated from them is not stale."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

import pytest
from pydantic import create_model

from kb.expr import nodes
from kb.expr import parse as ex
from kb.expr.nodes_base import ExprNode
from kb.knowledge import codec, shapes, snapshot
from kb.knowledge import data as kd
from kb.knowledge import schema as sc


@dataclass(frozen=True, slots=True)
class Leaf:
    name: str
    when: ex.Expr | None


@dataclass(slots=True)
class Tree:
    title: str
    leaves: tuple[Leaf, ...]
    by_name: dict[str, Leaf]
    pairs: list[tuple[str, str]]
    value: float | tuple[float, float]
    note: str | None = None
    cached: object = field(default=None, compare=False)     # derived: not stored


@dataclass(slots=True)
class TreeWithMore(Tree):
    added: tuple[str, ...] = ()
    extra: Leaf | None = None


def _tree(cls: type[Tree] = Tree, **more: Any) -> Tree:
    leaf = Leaf("a", ex.parse("x * 2 + 1"))
    return cls("t", (leaf, Leaf("b", None)), {"a": leaf}, [("by", "asc")], (1.0, 2.0), **more)


def _through_json(value: Tree) -> Tree:
    stored = json.loads(json.dumps(codec.encode_record(value)))
    back = codec.record_decoder(type(value))(stored)
    assert type(back) is type(value)
    return back


def test_a_record_comes_back_as_declared() -> None:
    tree = _tree()
    back = _through_json(tree)
    # an expression comes back as a StoredExpr (nodes built on first read): compared as stored
    assert codec.encode_record(back) == codec.encode_record(tree)
    assert back.leaves[1] == tree.leaves[1] and back.by_name["a"].when.text == "x * 2 + 1"  # type: ignore[union-attr]
    assert type(back.leaves) is tuple and type(back.pairs[0]) is tuple
    assert type(back.value) is tuple and back.cached is None


def test_a_field_added_to_a_declaration_is_stored_with_no_code_for_it() -> None:
    tree = _tree(TreeWithMore, added=("x", "y"), extra=Leaf("c", None))
    back = _through_json(tree)
    assert isinstance(back, TreeWithMore)
    assert codec.encode_record(back) == codec.encode_record(tree)
    assert back.added == ("x", "y") and back.extra == Leaf("c", None)
    assert len(codec.encode_record(tree)) == len(codec.encode_record(_tree())) + 2


def test_an_expression_is_stored_as_its_ast_and_read_back() -> None:
    leaf = Leaf("a", ex.parse("x * 2 + 1"))
    back = codec.record_decoder(Leaf)(json.loads(json.dumps(codec.encode_record(leaf))))
    assert isinstance(back, Leaf)
    assert back.when is not None and back.when.text == "x * 2 + 1"
    assert back.when.ast.to_list() == leaf.when.ast.to_list()       # type: ignore[union-attr]
    assert back.when.names == leaf.when.names                        # type: ignore[union-attr]


def test_a_type_the_codec_cannot_store_is_refused_when_declared() -> None:
    @dataclass(slots=True)
    class Odd:
        items: set[str]

    with pytest.raises(TypeError, match="cannot store"):
        codec.record_decoder(Odd)


def test_the_generated_digests_are_those_of_the_declarations() -> None:
    """Fails after a schema or a knowledge record changed until `python -m kb.knowledge.shapes`
    is run: the snapshot's format key is read from that file."""
    assert shapes.DIGEST_FILE.read_text(encoding="utf-8") == shapes.generated()


def test_the_format_key_follows_a_record_declaration(monkeypatch: pytest.MonkeyPatch) -> None:
    before = shapes.records_digest()

    @dataclass(frozen=True, slots=True)
    class Formula(kd.Formula):
        unit_note: str | None = None

    monkeypatch.setattr(kd, "Formula", Formula)       # Knowledge.formulas: dict[str, Formula]
    monkeypatch.setattr(codec, "_SHAPES", {})         # annotations are read once per process
    assert "unit_note: str | None" in codec.signature(kd.Knowledge)
    assert shapes.records_digest() != before
    assert shapes.generated() != shapes.DIGEST_FILE.read_text(encoding="utf-8")


def test_the_format_key_follows_the_stored_form_of_an_expression(monkeypatch: pytest.MonkeyPatch) -> None:
    """An expression is stored as its declared StoredExpression: a field added to it (or one
    renamed or retyped) makes another snapshot format."""
    before = shapes.records_digest()
    encode, decode, _, more = codec.LEAVES[ex.Expr]

    @dataclass(frozen=True, slots=True)
    class StoredExpression(codec.StoredExpression):
        spans: dict[str, int] | None = None

    monkeypatch.setitem(codec.LEAVES, ex.Expr, (encode, decode, StoredExpression, more))
    assert "spans: dict[str, int] | None" in codec.signature(kd.Knowledge)
    assert shapes.records_digest() != before


def test_an_expression_is_stored_in_its_declared_order() -> None:
    e = ex.parse("a * 2 + b")
    stored = codec.LEAVES[ex.Expr][0](e)
    assert isinstance(stored, list)
    by_name = dict(zip((f.name for f in fields(codec.StoredExpression)), stored))
    assert by_name == {"text": "a * 2 + b", "ast": e.ast.to_list(), "names": ["a", "b"],
                       "name_columns": e.name_columns}


@pytest.mark.parametrize("change", ["tag", "field", "annotation"])
def test_the_format_key_follows_an_expression_node_declaration(monkeypatch: pytest.MonkeyPatch,
                                                              change: str) -> None:
    """An expression's nodes are stored as their declarations say (TAG, FIELDS and their
    annotations): changing any of them makes another snapshot format."""
    before = shapes.records_digest()
    if change == "tag":
        monkeypatch.setattr(nodes.Logic, "TAG", "bool")
    elif change == "field":
        monkeypatch.setattr(nodes.Call, "FIELDS", ("fn", "args", "note"))
        monkeypatch.setitem(nodes.Call.__annotations__, "note", "str")
    else:
        monkeypatch.setitem(nodes.Unary.__annotations__, "inner", "Name")
    assert shapes.records_digest() != before


def test_a_node_is_stored_from_its_declaration() -> None:
    """Every node class comes back from its list form, which is [TAG, *FIELDS]."""
    e = ex.parse('not (a * 2 > 1 and b <= 2) or -max(c, 3) == 4 and d == "x"')
    seen: set[str] = set()

    def walk(node: ExprNode) -> None:
        listed = node.to_list()
        assert listed[0] == node.TAG and len(listed) == 1 + len(node.FIELDS)
        seen.add(node.TAG)
        for child in node.children():
            walk(child)

    walk(e.ast)
    assert seen == {cls.TAG for cls in nodes.NODES}
    assert nodes.from_list(json.loads(json.dumps(e.ast.to_list()))) == e.ast
    with pytest.raises(ValueError, match="unknown AST node 'and'"):
        nodes.from_list(["and", ["name", "a"], ["name", "b"]])


def test_the_format_key_follows_a_schema_declaration(monkeypatch: pytest.MonkeyPatch) -> None:
    before = shapes.schemas_digest()
    gpu = create_model("GpuSchema", __base__=sc.GpuSchema, shared_memory_gb=(float | None, None))
    monkeypatch.setitem(sc.FILES, "gpus", create_model("GpusFile", __base__=sc.Strict,
                                                        gpus=(list[gpu], ...)))  # type: ignore[valid-type]
    assert shapes.schemas_digest() != before


def test_the_format_key_follows_the_keys_added_after_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot stores a GPU as plain data with the keys kbq adds (its capacity, its prices):
    a key added to or dropped from their declaration makes another format."""
    from kb.knowledge import views

    before = shapes.schemas_digest()
    gpu = views.VIEWS["GpuSchema"]
    declared = dict(gpu.added)
    monkeypatch.setattr(gpu, "added", {**declared, "memory_tib": "float | None"})
    assert shapes.schemas_digest() != before
    monkeypatch.setattr(gpu, "added", {k: v for k, v in declared.items() if k != "memory_gib"})
    assert shapes.schemas_digest() != before
    assert shapes.generated() != shapes.DIGEST_FILE.read_text(encoding="utf-8")


def test_the_format_key_follows_a_table_declaration() -> None:
    from kb import STORED

    @dataclass(slots=True)
    class Vocab:
        table: dict[str, str]

    @dataclass(slots=True)
    class VocabWithMore(Vocab):
        keys: tuple[str, ...]

    make = STORED["vocabulary"][0]
    one = snapshot.format_key({"vocabulary": (make, lambda: Vocab)})
    assert snapshot.format_key({"vocabulary": (make, lambda: VocabWithMore)}) != one
    assert snapshot.format_key(STORED) != one


def test_the_names_module_is_that_of_the_rules() -> None:
    """kb/knowledge/names.py holds a constant for every input, constant and formula of
    rules/formulas.yaml and no other: fails while it is stale (run `python -m kb.knowledge.shapes`)."""
    import yaml

    from kb.knowledge import names
    from kb.paths import rules_dir

    assert shapes.NAMES_FILE.read_text(encoding="utf-8") == shapes.names_text(), "names.py is stale"
    doc = yaml.safe_load((rules_dir() / "formulas.yaml").read_text(encoding="utf-8"))
    listed = {*doc["inputs"], *doc["constants"], *doc["formulas"]}
    held = {v for k, v in vars(names).items() if k.isupper() and isinstance(v, str)}
    assert held == listed
    assert names.MODEL_KV_HEADS == "model.kv_heads"     # a dotted input: its dots become _


def test_the_typed_dicts_are_those_the_schemas_give() -> None:
    """kb/knowledge/records.py and records_rules.py are written from the schemas: fails while
    either is stale (run `python -m kb.knowledge.shapes`)."""
    for path, text in shapes.typed_dicts().items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name} is stale"


def test_a_field_added_to_a_schema_reaches_its_typed_dict(monkeypatch: pytest.MonkeyPatch) -> None:
    from kb.knowledge import views

    own = {name: (f.annotation, f) for name, f in sc.GpuSchema.model_fields.items()}
    gpu = create_model("GpuSchema", __base__=sc.Strict, **own,  # type: ignore[call-overload]
                       shared_memory_gb=(float | None, None))
    monkeypatch.setattr(sc, "GpuSchema", gpu)
    text = views.module_text("records")
    gpu_class = text[text.index("class GPU(TypedDict):"):].split("\n\n")[0]
    assert "    shared_memory_gb: NotRequired[float | None]" not in gpu_class   # not listed optional
    assert "    shared_memory_gb: float | None" in gpu_class
    assert "    memory_gb: float | None" in gpu_class                          # what kbq adds, kept
    assert text != (shapes.DIGEST_FILE.parent / "records.py").read_text(encoding="utf-8")
