"""The expression language of rule files: parsing, evaluation, errors with columns, units."""

import math

import pytest

from kb.expr import parse as ex
from kb.errors import EvalError


EVALUATES = [
    ("1 + 2 * 3", {}, 7),                       # precedence: * before +
    ("(1 + 2) * 3", {}, 9),
    ("2 ^ 3 ^ 2", {}, 512),                      # right-associative power
    ("-2 ^ 2", {}, 4),                           # unary minus binds tighter than ^ here
    ("10 / 4", {}, 2.5),
    ("gpu.vram_gb * 2", {"gpu.vram_gb": 24}, 48),
    ("min(3, 1, 2) + max(4, 5)", {}, 6),
    ("ceil(2.1) + floor(2.9) + abs(-1)", {}, 6),
    ("round(2.345, 2)", {}, 2.35),
    ("sqrt(16) + log2(8)", {}, 7),
    ("clamp(15, 0, 10)", {}, 10),
    ("if(x > 1, 10, 20)", {"x": 2}, 10),
    ("if(x > 1, 10, 20)", {"x": 0}, 20),
    ("a < b and not c or d", {"a": 1, "b": 2, "c": True, "d": False}, False),
    ("kind == \"mla\"", {"kind": "mla"}, True),
    ("1e9 / 2.5e8", {}, 4),
    (".5 * 4", {}, 2),
    ("-x + 1", {"x": 2}, -1),
    ("not y and -x < 0", {"x": 2, "y": False}, True),
]


@pytest.mark.parametrize("text, scope, expected", EVALUATES)
def test_evaluates(text, scope, expected):
    assert ex.parse(text)(scope) == pytest.approx(expected)


@pytest.mark.parametrize("text, scope, expected", EVALUATES)
def test_the_stored_form_compiles_to_what_its_nodes_compile_to(text, scope, expected):
    """A snapshot's expression compiles from its list form without making its nodes
    (kb.expr.nodes.compile_list); the closure gives what the nodes' own compile gives, folded alike."""
    from kb.expr.nodes import compile_list
    from kb.expr.columns import CONSTANT as _CONSTANT

    parsed = ex.parse(text)
    stored = ex.StoredExpr(text, parsed.ast.to_list(), parsed.names, {})
    assert "ast" not in stored.__dict__ and stored(scope) == parsed(scope) == pytest.approx(expected)
    assert "ast" not in stored.__dict__                 # evaluated without making the nodes
    assert (compile_list(parsed.ast.to_list()).__code__ is _CONSTANT) == (parsed.fn.__code__ is _CONSTANT)


def test_a_subtree_that_reads_no_name_is_folded_once_and_its_error_waits_for_use():
    """Compiling evaluates each operator whose operands read no name (kb.expr.nodes_base), once:
    the closure of `x * (2 * 3 + max(1, 4))` multiplies x by a 10 it holds, not by nodes it
    walks. A constant subtree that fails (1 / 0) is not folded and fails when evaluated."""
    from kb.expr.columns import CONSTANT as _CONSTANT

    assert ex.parse("2 * 3 + max(1, 4)").fn.__code__ is _CONSTANT
    scaled = ex.parse("x * (2 * 3 + max(1, 4))")
    assert scaled({"x": 2}) == 20
    held = [c.cell_contents for c in scaled.fn.__closure__ or ()]      # the 10, or its closure
    assert 10 in [h for h in held if not callable(h)] or [
        h for h in held if callable(h) and getattr(h, "__code__", None) is _CONSTANT]
    assert ex.parse("x").fn.__code__ is not _CONSTANT
    failing = ex.parse("x + 1 / 0")
    assert failing.fn.__code__ is not _CONSTANT         # compiled without raising
    with pytest.raises(EvalError, match="division by zero"):
        failing({"x": 1})


def test_if_is_lazy():
    # the branch not taken is never evaluated, so a division by zero there is harmless
    assert ex.parse("if(x == 0, 0, 1 / x)")({"x": 0}) == 0


@pytest.mark.parametrize("text, column, words", [
    ("2 +", 4, "ends too early"),
    ("3 $ 4", 3, "unexpected character"),
    ("a b", 3, "unexpected"),
    ("foo(1)", 1, "unknown function 'foo'"),
    ("min()", 1, "min() takes"),
    ("(((1)", 6, "ends too early"),
    ("", 1, "empty"),
])
def test_syntax_errors_have_columns(text, column, words):
    with pytest.raises(ex.ExprSyntaxError) as info:
        ex.parse(text)
    assert info.value.column == column
    assert words in info.value.message


def test_unknown_function_suggests():
    with pytest.raises(ex.ExprSyntaxError) as info:
        ex.parse("cel(2)")
    assert info.value.suggestion == "ceil"


@pytest.mark.parametrize("text", [
    "__import__('os')", "open('x')", "eval('1')", "().__class__", "getattr(x, 'y')",
])
def test_nothing_outside_the_function_table(text):
    with pytest.raises(ex.ExprSyntaxError):
        ex.parse(text)


def test_dunder_names_are_plain_lookups():
    e = ex.parse("x.__class__")
    with pytest.raises(EvalError):
        e({})


def test_runtime_errors_are_eval_errors():
    with pytest.raises(EvalError, match="division by zero"):
        ex.parse("1 / x")({"x": 0})
    with pytest.raises(EvalError, match="sqrt"):
        ex.parse("sqrt(x)")({"x": -1})
    with pytest.raises(EvalError, match="mixes text and numbers"):
        ex.parse("x + 1")({"x": "text"})


def test_deep_nesting_is_an_error_not_a_crash():
    with pytest.raises(ex.ExprSyntaxError, match="nested"):
        ex.parse("(" * 500 + "1" + ")" * 500)


def test_huge_literal_is_rejected():
    with pytest.raises(ex.ExprSyntaxError, match="too large"):
        ex.parse("1e400")


def test_ast_round_trip_is_json_data():
    import json

    e = ex.parse("max(a, 2) * b.c")
    again = ex.from_ast(e.text, json.loads(json.dumps(e.ast.to_list())))
    assert again({"a": 3, "b.c": 2}) == 6
    assert again.names == ("a", "b.c")


@pytest.mark.parametrize("text, units, expected", [
    ("a_gb / bw_gb_s", {"a_gb": "GB", "bw_gb_s": "GB/s"}, "s"),
    ("params * bpp / bpg", {"params": "param", "bpp": "B/param", "bpg": "B/GB"}, "GB"),
    ("x_gb + 1", {"x_gb": "GB"}, "GB"),            # a bare literal fits any unit in a sum
    ("t > 0", {"t": "s"}, "bool"),
    ("tok / t", {"tok": "tokens", "t": "s"}, "tokens/s"),
])
def test_units_infer(text, units, expected):
    parsed = {k: ex.parse_unit(v) for k, v in units.items()}
    assert ex.infer_unit(ex.parse(text).ast, parsed) == ex.parse_unit(expected)


@pytest.mark.parametrize("text, units", [
    ("a_gb + bw", {"a_gb": "GB", "bw": "GB/s"}),
    ("a_gb < t", {"a_gb": "GB", "t": "s"}),
    ("min(a_gb, t)", {"a_gb": "GB", "t": "s"}),
    ("if(a_gb, 1, 2)", {"a_gb": "GB"}),
])
def test_units_disagree(text, units):
    parsed = {k: ex.parse_unit(v) for k, v in units.items()}
    with pytest.raises(ex.UnitError):
        ex.infer_unit(ex.parse(text).ast, parsed)


def test_parse_unit_counts_drop_out():
    assert ex.parse_unit("tokens/s") == ex.parse_unit("1/s")
    assert ex.format_unit(ex.parse_unit("GB/s")) == "GB/s"
    assert math.isclose(ex.parse("2 ^ 0.5")({}), math.sqrt(2))


def test_nodes_are_immutable_values():
    """kb.expr.nodes writes its records out by hand (no dataclass at import): two parses of one text
    are equal and hash alike, a different operator or operand is not equal, a node cannot be
    changed, and it survives copying and its JSON form unchanged."""
    import copy
    import pickle
    from dataclasses import FrozenInstanceError

    from kb.expr.nodes import Bin, Name, Num, from_list

    a = ex.parse("2 * x + y").ast
    b = Bin("+", Bin("*", Num(2.0), Name("x")), Name("y"))     # built apart from the parse
    assert a is not b and a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert ex.parse("2 * x + y") is ex.parse("2 * x + y")      # one process parses a text once
    assert a != ex.parse("2 * x - y").ast and a != ex.parse("2 * z + y").ast
    assert Num(2.0) == Num(2.0) and Num(2.0) != Name("2.0") and Num(2.0) != 2.0
    assert a == Bin("+", Bin("*", Num(2.0), Name("x")), Name("y"))
    assert repr(Bin("*", Num(2.0), Name("x"))) == "Bin(op='*', left=Num(value=2.0), right=Name(name='x'))"
    with pytest.raises(FrozenInstanceError):
        a.op = "-"  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        del a.left  # type: ignore[misc]
    assert copy.deepcopy(a) == a and pickle.loads(pickle.dumps(a)) == a and from_list(a.to_list()) == a
