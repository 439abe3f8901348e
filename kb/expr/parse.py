"""The expression language of rule files.

In: formula or condition text (`2 * model.layers * model.kv_heads`, `total_gb <= gpu.vram_gb`).
Out: an `Expr` — the text, its typed syntax tree (kb.expr.nodes; JSON form via `ast.to_list()`), the
names it reads, and a compiled closure that evaluates it against a flat scope dict
(`{"gpu.vram_gb": 80.0, …}`, a value or a kb.expr.columns.Col per name).

Parsing uses grammar/expr.lark (lark, LALR). Evaluation is our own interpreter: there is no
`eval`, and a call can only reach the fixed kb.expr.functions.FUNCTIONS table.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, cached_property, lru_cache
from typing import TYPE_CHECKING, Any, TypeAlias

from kb.expr.columns import MISSING, NO_HOLES, RAISED, Col, Failed, Fn, Scope, at, elementwise
from kb.expr.columns import filled, guarded
from kb.errors import EvalError, nearest
from kb.expr.functions import FUNCTIONS
from kb.expr.nodes import Bin, Call, Cmp, Logic, Neg, Not, compile_list, from_list
from kb.expr.nodes_base import Name, ExprNode, Num, Str
from kb.expr.units import BOOL, COUNTS, ONE, TEXT, Unit, UnitError, format_unit, parse_unit
from kb.paths import grammar_dir

if TYPE_CHECKING:
    from lark import Lark, Token, Tree

__all__ = ["BOOL", "COUNTS", "FUNCTIONS", "MAX_DEPTH", "MISSING", "NO_HOLES", "ONE", "RAISED",
           "TEXT", "Col", "Expr", "ExprSyntaxError", "Failed", "Fn", "Scope", "Unit",
           "StoredExpr", "UnitError", "at", "elementwise", "filled", "format_unit", "from_ast", "guarded",
           "infer_unit", "parse", "parse_unit"]

MAX_DEPTH = 60
MAX_MAGNITUDE = 1e300
class ExprSyntaxError(Exception):
    """Raised by parse(); `column` is 1-based within the expression text."""

    def __init__(self, message: str, column: int, suggestion: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.column = column
        self.suggestion = suggestion


@dataclass(frozen=True)
class Expr:
    text: str
    ast: ExprNode
    names: tuple[str, ...]
    name_columns: dict[str, int] = field(compare=False, hash=False)

    @cached_property
    def fn(self) -> Fn:
        """The compiled closure, made when the expression is first evaluated: a plain query
        evaluates a fraction of the rules' expressions, so none is compiled at load."""
        return self.ast.compile()

    def __call__(self, scope: Scope) -> object:
        try:
            return self.fn(scope)
        except RAISED as exc:
            raise EvalError(self.message(exc, scope)) from None

    def message(self, exc: Exception, scope: Scope) -> str:
        """What went wrong, for a person: the names without a value, or the failing step."""
        if isinstance(exc, EvalError):
            return str(exc)
        if isinstance(exc, ZeroDivisionError):
            return "division by zero"
        if isinstance(exc, TypeError):
            missing = [n for n in self.names if scope.get(n) is None]
            if missing:
                return "no value for " + ", ".join(missing)
            return f"'{self.text}' mixes text and numbers"
        return f"'{self.text}': {exc}"     # ceil(inf), round(x, nan), 1e308 * 10 …


@cache
def _parser() -> Lark:
    """The LALR parser of grammar/expr.lark, built on first use."""
    from lark import Lark

    return Lark.open(str(grammar_dir() / "expr.lark"), parser="lalr",
                     propagate_positions=True, maybe_placeholders=False)


# ---------------------------------------------------------------- parse tree → nodes

Kids: TypeAlias = "list[Any]"
Builder: TypeAlias = "Callable[[Kids, dict[str, int], int], ExprNode]"


def _token(token: Token) -> ExprNode:
    if token.type == "NUMBER":
        value = float(token)
        if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
            raise ExprSyntaxError(f"number {token} is too large", token.column or 1)
        return Num(value)
    if token.type == "STRING":
        return Str(str(token)[1:-1])
    raise ExprSyntaxError(f"unexpected {token!s}", token.column or 1)


def _node(tree: Tree[Token] | Token, columns: dict[str, int], depth: int = 0) -> ExprNode:
    """One parse-tree node (a lark rule alias, or a token) → a typed node, depth first."""
    from lark import Token

    if depth > MAX_DEPTH:
        raise ExprSyntaxError(f"expression nested deeper than {MAX_DEPTH} levels", 1)
    if isinstance(tree, Token):
        return _token(tree)
    build = _BUILDERS.get(str(tree.data))
    if build is None:
        raise ExprSyntaxError(f"unsupported construct {tree.data}", 1)
    return build(tree.children, columns, depth + 1)


def _dotted(kids: Kids, columns: dict[str, int], depth: int) -> ExprNode:
    name = ".".join(str(k) for k in kids)
    columns.setdefault(name, kids[0].column or 1)
    return Name(name)


def _binary(kids: Kids, columns: dict[str, int], depth: int) -> ExprNode:
    op = "^" if str(kids[1]) in ("^", "**") else str(kids[1])
    return Bin(op, _node(kids[0], columns, depth), _node(kids[2], columns, depth))


def _call(kids: Kids, columns: dict[str, int], depth: int) -> ExprNode:
    fname = str(kids[0])
    args = tuple(_node(k, columns, depth) for k in kids[1:] if k is not None)
    if fname not in FUNCTIONS:
        raise ExprSyntaxError(f"unknown function '{fname}'", kids[0].column or 1,
                              nearest(fname, FUNCTIONS))
    fn = FUNCTIONS[fname]
    if not fn.low <= len(args) <= fn.high:
        raise ExprSyntaxError(f"{fname}() takes {fn.arity()} argument(s), got {len(args)}",
                              kids[0].column or 1)
    return Call(fname, args)


def _single(kind: str) -> Builder:
    def build(kids: Kids, columns: dict[str, int], depth: int) -> ExprNode:
        if len(kids) != 1:
            raise ExprSyntaxError(f"unsupported construct {kind}", 1)
        return _node(kids[0], columns, depth)
    return build


def _logic(op: str) -> Builder:
    return lambda kids, cols, d: Logic(op, _node(kids[0], cols, d), _node(kids[1], cols, d))


_BUILDERS: dict[str, Builder] = {
    "number": _single("number"), "string": _single("string"),
    "start": _single("start"), "expr": _single("expr"),
    "dotted": _dotted,
    "binary": _binary,
    "compare": lambda kids, cols, d: Cmp(str(kids[1]), _node(kids[0], cols, d), _node(kids[2], cols, d)),
    "and_": _logic("and"),
    "or_": _logic("or"),
    "not_": lambda kids, cols, d: Not(_node(kids[0], cols, d)),
    "neg": lambda kids, cols, d: Neg(_node(kids[0], cols, d)),
    "call": _call,
}


def parse(text: str) -> Expr:
    """Parse and compile one expression. Raises ExprSyntaxError with a column.

    An Expr is a pure function of its text (immutable, its closure made from the text alone),
    so one process reuses the Expr of a text it parsed before: a rebuild of edited rules (the
    server's live reload, `kbq validate` in a loop) parses only the expressions that changed."""
    if not isinstance(text, str):
        raise ExprSyntaxError("empty expression", 1)
    return _parse(text)


@lru_cache(maxsize=8192)
def _parse(text: str) -> Expr:
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput

    if not isinstance(text, str) or not text.strip():
        raise ExprSyntaxError("empty expression", 1)
    if text.count("(") > MAX_DEPTH:
        raise ExprSyntaxError(f"expression nested deeper than {MAX_DEPTH} levels", 1)
    try:
        tree = _parser().parse(text)
    except UnexpectedEOF:
        raise ExprSyntaxError("the expression ends too early", len(text) + 1) from None
    except UnexpectedCharacters as exc:
        raise ExprSyntaxError(f"unexpected character {text[exc.pos_in_stream or 0]!r}",
                              exc.column) from None
    except UnexpectedInput as exc:
        token = getattr(exc, "token", None)
        if token is not None and getattr(token, "type", "") == "$END":
            raise ExprSyntaxError("the expression ends too early", len(text.rstrip()) + 1) from None
        col = getattr(exc, "column", 1) or 1
        what = f"'{token}'" if token is not None and str(token) else "end of expression"
        raise ExprSyntaxError(f"unexpected {what}", col if col > 0 else len(text) + 1) from None
    except RecursionError:
        raise ExprSyntaxError("expression nested too deeply", 1) from None
    columns: dict[str, int] = {}
    return from_ast(text, _node(tree, columns), columns)


def from_ast(text: str, ast: ExprNode | list[Any], columns: dict[str, int] | None = None) -> Expr:
    """Build an Expr from a parsed tree, or from its JSON form (the knowledge snapshot)."""
    node = ast if isinstance(ast, ExprNode) else from_list(ast)
    names: list[str] = []
    node.names(names)
    return Expr(text=text, ast=node, names=tuple(dict.fromkeys(names)),
                name_columns=columns or {})


class StoredExpr(Expr):
    """An Expr read back from the knowledge snapshot (kb.knowledge.snapshot; its stored form is
    kb.knowledge.codec.StoredExpression, whose field names these arguments are) with the names it reads: its
    nodes are built from their list form (`ast.to_list()`) when first read, since a plain query
    reads a fraction of the rules' ~320 expressions, and its closure is compiled from that form
    without them (kb.expr.nodes.compile_list). Otherwise an Expr like any other."""

    def __init__(self, text: str, ast: list[object], names: tuple[str, ...], name_columns: dict[str, int]) -> None:
        d = self.__dict__
        d["text"], d["_stored"], d["names"], d["name_columns"] = text, ast, names, name_columns

    @cached_property
    def ast(self) -> ExprNode:
        return from_list(self.__dict__["_stored"])

    @cached_property
    def fn(self) -> Fn:
        """The closure, compiled from the stored form unless the nodes are made already."""
        made = self.__dict__.get("ast")
        return made.compile() if made is not None else compile_list(self.__dict__["_stored"])


def infer_unit(ast: ExprNode, units: dict[str, Unit]) -> Unit:
    """The unit of an expression, given the unit of every name it reads. Raises UnitError."""
    return ast.unit(units)
