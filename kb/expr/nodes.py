"""Typed nodes of the expression language.

In: built by kb.expr.parse from a parse tree, or by `from_list` from the JSON form a snapshot stores.
Out: immutable nodes, each knowing how to compile itself into a closure over a scope (scalars
and kb.expr.columns.Col alike), infer its unit (kb.expr.units), list the names it reads, write itself as
text or as Markdown math, and turn itself into its JSON form, which its declaration gives
(TAG and FIELDS: kb.expr.nodes_base.ExprNode.to_list, `from_list`, `signature`).

Constant sub-expressions are folded once, when a node is compiled: a subtree that reads no name
is evaluated then, unless evaluating it raises (it then raises, with its message, when used).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeAlias

from kb.expr import units as u
from kb.expr.columns import Fn, Op, and_, lift1, lift2, or_, short_circuit
from kb.errors import EvalError
from kb.expr.functions import FUNCTIONS, num
from kb.expr.units import BOOL, ONE, TEXT, Unit, UnitError, format_unit
from kb.expr.nodes_base import (  # noqa: F401 - the leaves and helpers, re-exported for kb.expr.parse and kb.present.export
    _COMPARE, ATOM, ASCII, MATH, Literal, Name, ExprNode, Num, Show, Str, Symbols, _infix, _wrap, literal,
    plain_exponent)
from kb.expr.nodes_base import field_types, folded, stored_kinds


def _pow(a: object, b: object) -> float:
    a, b = num(a, "base"), num(b, "exponent")
    try:
        result: float | complex = float(a) ** float(b)   # floats: an int power could run without bound
    except (OverflowError, ZeroDivisionError) as exc:
        raise EvalError(f"{a} ^ {b}: {exc}") from None
    if isinstance(result, complex):
        raise EvalError(f"{a} ^ {b} is not a real number")
    return result


def _neg(a: object) -> float:
    return -num(a, "operand")


_ARITH: dict[str, Op] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "^": _pow}
_STRENGTH = {"+": 5, "-": 5, "*": 6, "/": 6, "^": 7}


class Binary(ExprNode):
    """A node of an operator and its two operands."""
    op: str
    left: ExprNode
    right: ExprNode
    __slots__ = ("op", "left", "right")
    FIELDS = ("op", "left", "right")

    def __init__(self, op: str, left: ExprNode, right: ExprNode) -> None:
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "left", left)
        object.__setattr__(self, "right", right)

    def children(self) -> tuple[ExprNode, ...]:
        return (self.left, self.right)


class Unary(ExprNode):
    """A node of an operator and its one operand."""
    inner: ExprNode
    __slots__ = ("inner",)
    FIELDS = ("inner",)

    def __init__(self, inner: ExprNode) -> None:
        object.__setattr__(self, "inner", inner)

    def children(self) -> tuple[ExprNode, ...]:
        return (self.inner,)


class Bin(Binary):
    """Arithmetic: + - * / ^ (the parser writes ** as ^)."""
    TAG = "bin"
    __slots__ = ()

    @staticmethod
    def closure(op: str, operands: list[Fn]) -> Fn:
        # Operand types are settled at load by the unit check (kb.knowledge.build); a None (a figure
        # the workload lacks) or text raises TypeError here, which Expr.__call__ reports.
        # x / 0 raises ZeroDivisionError, which Expr.message reports as "division by zero"
        return lift2(_ARITH[op], operands[0], operands[1])

    def _compile(self, operands: list[Fn]) -> Fn:
        return self.closure(self.op, operands)

    def unit(self, units: Mapping[str, Unit]) -> Unit:
        a, b = self.left.unit(units), self.right.unit(units)
        if self.op in "+-":
            return u.same(a, b, f"'{self.op}'")
        if self.op in "*/":
            if a is None and b is None:
                return None
            return u.mul(a, b, 1 if self.op == "*" else -1)
        if b not in (None, ONE):
            raise UnitError("an exponent must be a plain number")
        if a is None or a == ONE:
            return a
        if not isinstance(self.right, Num) or not float(self.right.value).is_integer():
            raise UnitError(f"{format_unit(a)} raised to a non-integer power")
        return u.power(a, int(self.right.value))

    def render(self, show: Show, symbols: Symbols) -> tuple[str, int]:
        p = _STRENGTH[self.op]
        # left-associative, except ^
        sides = (p, ATOM, p) if self.op == "^" else (p, p, p + 1)
        return _infix(self.left, self.op, self.right, show, symbols, sides)



class Cmp(Binary):
    TAG = "cmp"
    __slots__ = ()

    @staticmethod
    def closure(op: str, operands: list[Fn]) -> Fn:
        # None == x is a plain False, as in one GPU's scope; only ordering raises on None
        return lift2(_COMPARE[op], operands[0], operands[1], none_fails=op not in ("==", "!="))

    def _compile(self, operands: list[Fn]) -> Fn:
        return self.closure(self.op, operands)

    def unit(self, units: Mapping[str, Unit]) -> Unit:
        a, b = self.left.unit(units), self.right.unit(units)
        if TEXT in (a, b) and a != b and None not in (a, b):
            raise UnitError("comparing text with a number")
        u.same(a, b, f"'{self.op}'")
        return BOOL

    def render(self, show: Show, symbols: Symbols) -> tuple[str, int]:
        return _infix(self.left, self.op, self.right, show, symbols, (4, 5, 5))  # no chaining



def _truth(tag: str, operands: tuple[ExprNode, ...], units: Mapping[str, Unit]) -> Unit:
    for sub in operands:
        got = sub.unit(units)
        if got not in (BOOL, None):
            raise UnitError(f"'{tag}' needs true/false operands, got {format_unit(got)}")
    return BOOL


class Logic(Binary):
    """`and` / `or`: the right side is read only where the left does not decide."""
    _STRENGTH: ClassVar[dict[str, int]] = {"or": 1, "and": 2}
    TAG = "logic"
    __slots__ = ()

    @staticmethod
    def closure(op: str, operands: list[Fn]) -> Fn:
        return short_circuit(and_ if op == "and" else or_, operands[0], operands[1], op == "or")

    def _compile(self, operands: list[Fn]) -> Fn:
        return self.closure(self.op, operands)

    def unit(self, units: Mapping[str, Unit]) -> Unit:
        return _truth(self.op, self.children(), units)

    def render(self, show: Show, symbols: Symbols) -> tuple[str, int]:
        p = self._STRENGTH[self.op]
        return _infix(self.left, self.op, self.right, show, symbols, (p, p, p + 1))



class Not(Unary):
    TAG = "not"
    __slots__ = ()

    @staticmethod
    def closure(operands: list[Fn]) -> Fn:
        return lift1(operator.not_, operands[0], none_fails=False)

    def _compile(self, operands: list[Fn]) -> Fn:
        return self.closure(operands)

    def unit(self, units: Mapping[str, Unit]) -> Unit:
        return _truth("not", self.children(), units)

    def render(self, show: Show, symbols: Symbols) -> tuple[str, int]:
        return f"not {_wrap(self.inner, show, symbols, 3)}", 3



class Neg(Unary):
    TAG = "neg"
    __slots__ = ()

    @staticmethod
    def closure(operands: list[Fn]) -> Fn:
        return lift1(_neg, operands[0])

    def _compile(self, operands: list[Fn]) -> Fn:
        return self.closure(operands)

    def unit(self, units: Mapping[str, Unit]) -> Unit:
        return self.inner.unit(units)

    def render(self, show: Show, symbols: Symbols) -> tuple[str, int]:
        return f"-{_wrap(self.inner, show, symbols, ATOM)}", 8



class Call(ExprNode):
    """A call of one of the fixed FUNCTIONS ; the parser checks name and arity."""
    fn: str
    args: tuple[ExprNode, ...]
    __slots__ = ("fn", "args")
    FIELDS = ("fn", "args")
    TAG = "call"

    def __init__(self, fn: str, args: tuple[ExprNode, ...]) -> None:
        object.__setattr__(self, "fn", fn)
        object.__setattr__(self, "args", args)

    def children(self) -> tuple[ExprNode, ...]:
        return self.args

    @staticmethod
    def closure(fn: str, operands: list[Fn]) -> Fn:
        return FUNCTIONS[fn].build(operands)

    def _compile(self, operands: list[Fn]) -> Fn:
        return self.closure(self.fn, operands)

    def unit(self, units: Mapping[str, Unit]) -> Unit:
        return FUNCTIONS[self.fn].unit([a.unit(units) for a in self.args])

    def render(self, show: Show, symbols: Symbols) -> tuple[str, int]:
        return f"{self.fn}({', '.join(a.render(show, symbols)[0] for a in self.args)})", ATOM



ListForm: TypeAlias = "list[Any]"   # a node's stored form: [TAG, field, …] (nodes_base.ExprNode.to_list)

# every node class, found by its TAG when read back
NODES: tuple[type[ExprNode], ...] = (Num, Str, Name, Bin, Cmp, Logic, Not, Neg, Call)


def _builder(cls: type[ExprNode]) -> Callable[[ListForm], ExprNode]:
    """list form → node of `cls`, made from how its fields are stored (nodes_base.stored_kinds):
    the shapes the node classes have are spelt out (a snapshot's expressions are read with
    these), any other is read field by field."""
    make: Callable[..., ExprNode] = cls
    kinds = tuple(kind for _, kind in stored_kinds(cls))
    if kinds == ("plain",):
        return lambda a: make(a[1])
    if kinds == ("node",):
        return lambda a: make(from_list(a[1]))
    if kinds == ("plain", "node", "node"):
        return lambda a: make(a[1], from_list(a[2]), from_list(a[3]))
    if kinds == ("plain", "nodes"):
        return lambda a: make(a[1], tuple(from_list(x) for x in a[2]))
    return lambda a: make(*[value if kind == "plain" else from_list(value) if kind == "node"
                            else tuple(from_list(v) for v in value) for kind, value in zip(kinds, a[1:])])


_BUILDERS: dict[str, Callable[[ListForm], ExprNode]] = {}


def _tagged(data: ListForm) -> type[ExprNode]:
    cls = next((c for c in NODES if data and c.TAG == data[0]), None)
    if cls is None:
        raise ValueError(f"unknown AST node {data[0] if data else data!r}")
    return cls


def from_list(data: ListForm) -> ExprNode:
    """The node a `to_list()` form describes: its class by the TAG, its fields in FIELDS order
    as the class declares them (kb.expr.nodes_base.stored_kinds)."""
    build = _BUILDERS.get(data[0]) if data else None
    if build is None:
        cls = _tagged(data)
        build = _BUILDERS[cls.TAG] = _builder(cls)
    return build(data)


def _compiler(cls: type[ExprNode]) -> Callable[[ListForm], Fn]:
    """list form → the closure that compiling its node gives, through the class's `closure` (the one
    each node's own compile calls) and kb.expr.nodes_base.folded, for the shapes the node classes
    have; any other shape through its node."""
    close = cls.closure
    kinds = tuple(kind for _, kind in stored_kinds(cls))
    if kinds == ("plain",) and issubclass(cls, (Literal, Name)):      # a leaf: its value, or a name's lookup
        return lambda a: close(a[1])

    def one(a: ListForm) -> Fn:
        operands = [compile_list(a[1])]
        return folded(close(operands), operands)

    def two(a: ListForm) -> Fn:
        operands = [compile_list(a[2]), compile_list(a[3])]
        return folded(close(a[1], operands), operands)

    def many(a: ListForm) -> Fn:
        operands = [compile_list(x) for x in a[2]]
        return folded(close(a[1], operands), operands)
    shapes = {("node",): one, ("plain", "node", "node"): two, ("plain", "nodes"): many}
    return shapes.get(kinds) or (lambda a: from_list(a).compile())


_COMPILERS: dict[str, Callable[[ListForm], Fn]] = {}


def compile_list(data: ListForm) -> Fn:
    """The closure `from_list(data).compile()` gives, made from the list form without making the
    nodes: a snapshot's expression is first read to be evaluated (kb.expr.parse.StoredExpr)."""
    make = _COMPILERS.get(data[0]) if data else None
    if make is None:
        cls = _tagged(data)
        make = _COMPILERS[cls.TAG] = _compiler(cls)
    return make(data)


def signature() -> list[str]:
    """Every node class's stored form, one line each (TAG, fields and their annotations): part
    of what the knowledge snapshot's format is keyed by (kb.knowledge.codec.signature)."""
    return [f"{cls.__module__}.{cls.__qualname__}[{cls.TAG}](" + ", ".join(
        f"{name}: {annotation}" for name, annotation in field_types(cls)) + ")" for cls in NODES]
