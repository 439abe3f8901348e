"""The expression language's node base class and its leaves: numbers, text and names.

In: values and names from kb.expr.parse's parse (or kb.expr.nodes.from_list). Out: the ExprNode base class (compile
with constant folding, units, names, text and Markdown, JSON form), its leaves Num, Str and Name,
and the precedence helpers kb.expr.nodes' operator nodes share.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import FrozenInstanceError
from typing import Any, ClassVar

from kb.expr.columns import CONSTANT, RAISED, Fn, Op, constant, reader
from kb.expr.units import TEXT, Unit

Show = Callable[[str], str]
Symbols = Mapping[str, str]

ASCII: Symbols = {}
MATH: Symbols = {"*": "×", "/": "÷", "<=": "≤", ">=": "≥", "!=": "≠", "==": "="}
ATOM = 9                                 # binding strength of a name, number or call

_COMPARE: dict[str, Op] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne,
}


def literal(value: float) -> str:
    """A number written in a rule, in full: 2, 0.75, 1e9, 3e10."""
    if float(value).is_integer() and abs(value) < 1e6:
        return str(int(value))
    for digits in range(1, 18):  # the shortest text that reads back as the same number
        text = f"{value:.{digits}g}"
        if float(text) == value:
            break
    return plain_exponent(text)


def plain_exponent(text: str) -> str:
    """'7e+09' → '7e9'."""
    if "e" not in text:
        return text
    mantissa, exp = text.split("e")
    return f"{mantissa}e{int(exp)}"


def folded(fn: Fn, operands: list[Fn]) -> Fn:
    """A node's closure `fn` over its operands' closures, or, when they all are constants (its
    subtree reads no name), the constant it evaluates to, unless evaluating it raises (it then
    raises, with its message, when used)."""
    for operand in operands:
        if getattr(operand, "__code__", None) is not CONSTANT:
            return fn
    try:
        value = fn({})
    except RAISED:
        return fn
    return constant(value)


# ---------------------------------------------------------------- the stored form, declared

_KINDS: dict[type, tuple[tuple[str, str], ...]] = {}


def field_types(cls: type) -> tuple[tuple[str, str], ...]:
    """Each of a node class's FIELDS with its annotation as declared (the nearest class's)."""
    found = []
    for name in cls.FIELDS:         # type: ignore[attr-defined]
        annotation = next(k.__dict__["__annotations__"][name] for k in cls.__mro__
                          if name in k.__dict__.get("__annotations__", {}))
        found.append((name, str(annotation)))
    return tuple(found)


def stored_kinds(cls: type) -> tuple[tuple[str, str], ...]:
    """Each field of a node class with how it is stored: "node" (its list form), "nodes" (a
    tuple of them, as a list) or "plain" (itself); read once per class from its annotations."""
    found = _KINDS.get(cls)
    if found is None:
        found = _KINDS[cls] = tuple(
            (name, {"ExprNode": "node", "tuple[ExprNode, ...]": "nodes"}.get(annotation, "plain"))
            for name, annotation in field_types(cls))
    return found


# ---------------------------------------------------------------- the nodes

class ExprNode:
    """One node of an expression. Subclasses say how they evaluate, type and print.

    Immutable records with slots, written out rather than made by the dataclass decorator: a
    plain query imports this module, and dataclasses would write and compile seven methods per
    class at import. `FIELDS` lists a class's fields in order; equality, hashing, repr, copying
    and the refusal to be changed are the ones a frozen dataclass with slots has."""

    __slots__ = ()
    FIELDS: ClassVar[tuple[str, ...]] = ()
    TAG: ClassVar[str]          # names the class in the stored (list) form
    # the closure of a node of the class, from its plain fields and then its operands' closures
    # (a leaf: from its value or name), as compile and kb.expr.nodes.compile_list make it
    closure: ClassVar[Callable[..., Fn]]

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.FIELDS)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}(" + ", ".join(
            f"{name}={getattr(self, name)!r}" for name in self.FIELDS) + ")"

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __getstate__(self) -> tuple[Any, ...]:
        return self._values()

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for name, value in zip(self.FIELDS, state):
            object.__setattr__(self, name, value)

    def children(self) -> tuple[ExprNode, ...]:
        return ()

    def names(self, out: list[str]) -> None:
        """Append the names read, left to right (with repeats)."""
        for child in self.children():
            child.names(out)

    def compile(self) -> Fn:
        """A closure scope → value (a Col where a name read holds one). A node whose operands
        all compiled to constants (they read no name) is evaluated now, once, unless that raises
        (it then raises, with its message, when used): each node is compiled once, its operands first."""
        operands = [child.compile() for child in self.children()]
        return folded(self._compile(operands), operands)

    def _compile(self, operands: list[Fn]) -> Fn:
        """The closure of this node over its children's compiled closures (`operands`, in
        `children()` order)."""
        raise NotImplementedError

    def unit(self, units: Mapping[str, Unit]) -> Unit:
        """The unit of the value, given the unit of every name. Raises UnitError."""
        raise NotImplementedError

    def render(self, show: Show, symbols: Symbols) -> tuple[str, int]:
        """(text, binding strength): the fewest parentheses that keep the meaning."""
        raise NotImplementedError

    def to_list(self) -> list[object]:
        """The JSON form, read from the class's declaration: its TAG, then each of FIELDS in
        order, a node as its own list form and a tuple of nodes as a list of them:
        ["num", x] ["name", n] ["bin", op, a, b] … (kb.expr.nodes.from_list reads it back)."""
        out: list[object] = [self.TAG]
        for name, kind in stored_kinds(type(self)):
            value = getattr(self, name)
            out.append(value if kind == "plain" else value.to_list() if kind == "node"
                       else [v.to_list() for v in value])
        return out

    def text(self, show: Show = str) -> str:
        """As typed in a rule: `a * b / c`."""
        return self.render(show, ASCII)[0]

    def markdown(self, show: Show = str) -> str:
        """As readable math: `a × b ÷ c`. `show` renders a name (or its value)."""
        return self.render(show, MATH)[0]


def _wrap(node: ExprNode, show: Show, symbols: Symbols, need: int) -> str:
    text, strength = node.render(show, symbols)
    return f"({text})" if strength < need else text


def _infix(left: ExprNode, op: str, right: ExprNode, show: Show, symbols: Symbols,
           strengths: tuple[int, int, int]) -> tuple[str, int]:
    p, lp, rp = strengths
    return (f"{_wrap(left, show, symbols, lp)} {symbols.get(op, op)} "
            f"{_wrap(right, show, symbols, rp)}", p)


class Literal(ExprNode):
    """A value written in the rule: it compiles to itself and reads no name. Its JSON form is
    [TAG, value]."""
    __slots__ = ("value",)
    FIELDS = ("value",)
    value: object

    def __init__(self, value: object) -> None:
        object.__setattr__(self, "value", value)

    closure = staticmethod(constant)

    def compile(self) -> Fn:
        return constant(self.value)


class Num(Literal):
    __slots__ = ()
    value: float
    TAG: ClassVar[str] = "num"

    def unit(self, units: Mapping[str, Unit]) -> Unit:
        return None

    def render(self, show: Show, symbols: Symbols) -> tuple[str, int]:
        return literal(self.value), ATOM


class Str(Literal):
    __slots__ = ()
    value: str
    TAG: ClassVar[str] = "str"

    def unit(self, units: Mapping[str, Unit]) -> Unit:
        return TEXT

    def render(self, show: Show, symbols: Symbols) -> tuple[str, int]:
        return f'"{self.value}"', ATOM


class Name(ExprNode):
    name: str
    __slots__ = ("name",)
    FIELDS = ("name",)
    TAG = "name"

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "name", name)

    def names(self, out: list[str]) -> None:
        out.append(self.name)

    closure = staticmethod(reader)

    def compile(self) -> Fn:
        return self.closure(self.name)

    def unit(self, units: Mapping[str, Unit]) -> Unit:
        return units[self.name]

    def render(self, show: Show, symbols: Symbols) -> tuple[str, int]:
        text = show(self.name)
        return (f"({text})", ATOM) if text.startswith("-") else (text, ATOM)
