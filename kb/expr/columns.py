"""Evaluating over every candidate GPU at once: columns of values.

In: operator semantics (plain Python callables) and operand values, each a scalar or a Col.
Out: the same operator applied element by element, with failures kept in place (Failed), and
the lifting helpers kb.expr.nodes compiles expression nodes with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from itertools import repeat
from typing import Any, TypeAlias, cast

from kb.errors import EvalError

Scope = Mapping[str, object]   # a value per name: one figure, or a Col of them
Fn: TypeAlias = "Callable[[Scope], Any]"         # Any: what a formula gives is read by the engine as a number
Op = Callable[..., object]          # an operator's semantics: operator.add, min, a checked sqrt…

# what evaluating a formula may raise; each becomes an EvalError (or a Failed element)
RAISED = (EvalError, TypeError, ValueError, OverflowError, ZeroDivisionError)

# A scope value is either one value, the same for every candidate GPU, or a Col: one value per
# candidate. Every operator applies to a Col element by element with the same scalar semantics,
# so evaluating a formula once over the catalogue gives what evaluating it once per GPU gives.
# An element whose computation raised holds a Failed; it propagates through later operators
# and is reported when the formula's result is stored (kb.engine).

NO_HOLES: frozenset[int] = frozenset()


class Col(list):  # type: ignore[type-arg]
    """One value per candidate GPU, in candidate order. `holes`: positions known to hold None (a
    figure that candidate lacks) or a Failed. Knowing fewer than there are is safe (a fast pass
    then raises and the careful one runs); claiming one that is not is never done."""
    holes: frozenset[int] = NO_HOLES

    @classmethod
    def of(cls, values: Iterable[object], holes: frozenset[int] | None = None) -> Col:
        """A Col whose holes are `holes`, or found by a scan."""
        col = cls(values)
        if holes is None:
            holes = frozenset(i for i, v in enumerate(col) if v is None or v.__class__ is Failed)
        if holes:
            col.holes = holes
        return col


class Failed:
    """An element whose computation raised. Any use of it in arithmetic, comparison or truth
    raises TypeError, so a fast elementwise pass falls back to the careful one."""
    __slots__ = ("error",)

    def __init__(self, error: Exception | None) -> None:
        self.error = error          # None: an operand had no value (a figure the GPU lacks)

    def __bool__(self) -> bool:
        raise TypeError("failed element")

    def __eq__(self, other: object) -> bool:
        raise TypeError("failed element")

    __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __eq__
    __hash__ = None  # type: ignore[assignment]


MISSING = Failed(None)


def elementwise(op: Op, *args: object, none_fails: bool = True) -> Col:
    """op over the elements of the Col arguments, the others repeated. `none_fails`: op raises
    whenever an operand is None or a Failed (arithmetic, ordering, functions of numbers), so at
    the holes of its operands the result is known without calling it: the inherited failure."""
    holes = NO_HOLES
    n = 0
    everywhere = False                  # a single operand that is missing or failed
    for a in args:
        if a.__class__ is Col:
            n = len(a)
            if a.holes:
                holes = holes | a.holes
        elif a is None or a.__class__ is Failed:
            everywhere = True
    if everywhere or len(holes) == n:
        return _all_failed(args, n) if none_fails else _one_by_one(op, args)
    try:
        if not holes:
            return Col(map(op, *[a if a.__class__ is Col else repeat(a) for a in args]))
        if none_fails:
            out = Col.of(map(op, *[filled(a, holes) if a.__class__ is Col else repeat(a) for a in args]), holes)
            for i in holes:
                out[i] = MISSING
            for a in reversed(args):    # at each hole, the first operand's failure (as _failure)
                if a.__class__ is Col:
                    for i in a.holes:
                        if a[i].__class__ is Failed:
                            out[i] = a[i]
            return out
        out = Col(map(op, *[a if a.__class__ is Col else repeat(a) for a in args]))
    except RAISED:
        return _one_by_one(op, args)
    found = frozenset(i for i in holes if (v := out[i]) is None or v.__class__ is Failed)
    if found:
        out.holes = found
    return out


def _all_failed(args: tuple[object, ...], n: int) -> Col:
    """Every position of a none_fails operator holds a hole: each inherits, as _failure does,
    the first Failed among its operands, else MISSING."""
    out: list[object] = [None] * n
    for a in args:
        if a.__class__ is Col:
            for i in a.holes:
                if out[i] is None and a[i].__class__ is Failed:
                    out[i] = a[i]
        elif a.__class__ is Failed:
            out = [a if x is None else x for x in out]
            break
    return Col.of([MISSING if x is None else x for x in out], frozenset(range(n)))


def filled(col: Col, holes: frozenset[int]) -> list[Any]:
    """col with its holes filled by one of its own values (whatever is computed there is
    replaced or ignored)."""
    fill = next((v for i, v in enumerate(col) if i not in holes), 0.0)
    out = list(col)
    for i in holes:
        out[i] = fill
    return out


def _one_by_one(op: Op, args: tuple[object, ...]) -> Col:
    """Some element raised: every element again, each failure kept in its place."""
    out = []
    for t in zip(*[a if a.__class__ is Col else repeat(a) for a in args]):
        try:
            out.append(op(*t))
        except RAISED as exc:
            out.append(_failure(t, exc))
    return Col.of(out)


def _failure(operands: tuple[object, ...], exc: Exception | None) -> Failed:
    """What an element that raised holds: the failure it inherited, else a new one."""
    for a in operands:
        if a.__class__ is Failed:
            return a
    return MISSING if exc is None or any(a is None for a in operands) else Failed(exc)


def at(value: object, i: int) -> Any:       # Any: the engine reads it as the figure it is
    """Candidate i's value."""
    return value[i] if value.__class__ is Col else value


def guarded(fn: Fn, s: Scope) -> Any:
    """A branch that only some elements take: a failure becomes a Failed, not an exception."""
    try:
        return fn(s)
    except RAISED as exc:
        return Failed(exc)


def pick(cond: object, yes: object, no: object) -> object:          # never touches the branch not taken
    if cond.__class__ is Failed:
        return cond
    return yes if cond else no


def and_(a: object, b: object) -> object:
    if a.__class__ is Failed:
        return a
    if not a:
        return False
    return b if b.__class__ is Failed else bool(b)


def or_(a: object, b: object) -> object:
    if a.__class__ is Failed:
        return a
    if a:
        return True
    return b if b.__class__ is Failed else bool(b)


def _fast(op: Op, a: object, b: object) -> Col | None:
    """op over two operands in one C-level pass, when no position can fail on a hole."""
    if a.__class__ is Col:
        if a.holes:
            return None
        if b.__class__ is Col:
            if b.holes:
                return None
            return Col(map(op, a, b))
        if b is None or b.__class__ is Failed:
            return None
        return Col(map(op, a, repeat(b)))
    col = cast(Col, b)                  # one of the two is a Col
    if col.holes or a is None or a.__class__ is Failed:
        return None
    return Col(map(op, repeat(a), col))


def missing(name: str) -> EvalError:
    """What reading a name the scope lacks raises."""
    return EvalError(f"'{name}' has no value for this workload")


def constant(value: object) -> Fn:
    """The closure of a value known when compiled (a literal, or a subtree that reads no name);
    its `value` is read by lift2, as a name's `key`."""
    def const(s: Scope) -> object:
        return value
    const.value = value                 # type: ignore[attr-defined]
    return const


def reader(key: str) -> Fn:
    """The closure of a name: its value in the scope."""
    def lookup(s: Scope) -> object:
        try:
            return s[key]
        except KeyError:
            raise missing(key) from None
    lookup.key = key                    # type: ignore[attr-defined]
    return lookup


CONSTANT = constant(None).__code__      # what every constant's closure runs: how one is known
READER = reader("").__code__            # what every name's closure runs


def lift2(op: Callable[[object, object], object], left: Fn, right: Fn, none_fails: bool = True) -> Fn:
    """op over two operands, a scalar or a column each. A name operand is looked up and a
    constant one read in place, not called (`size * 2`, `a / b`: a formula's commonest nodes)."""
    def mixed(a: object, b: object) -> object:
        try:
            out = _fast(op, a, b)
        except RAISED:
            out = None
        return elementwise(op, a, b, none_fails=none_fails) if out is None else out

    name = getattr(left, "key", None) if getattr(left, "__code__", None) is READER else None
    if getattr(right, "__code__", None) is CONSTANT:
        c = right.value                 # type: ignore[attr-defined]

        def to_constant(s: Scope) -> object:
            if name is None:
                a = left(s)
            else:
                try:
                    a = s[name]
                except KeyError:
                    raise missing(name) from None
            if a.__class__ is Col or c.__class__ is Col:
                return mixed(a, c)
            return op(a, c)
        return to_constant
    if name is not None and getattr(right, "__code__", None) is READER:
        other = right.key               # type: ignore[attr-defined]

        def of_names(s: Scope) -> object:
            try:
                a = s[name]
                b = s[other]
            except KeyError as exc:
                raise missing(str(exc.args[0])) from None
            if a.__class__ is Col or b.__class__ is Col:
                return mixed(a, b)
            return op(a, b)
        return of_names

    def apply(s: Scope) -> object:
        a, b = left(s), right(s)
        if a.__class__ is Col or b.__class__ is Col:
            return mixed(a, b)
        return op(a, b)
    return apply


def lift1(op: Callable[[object], object], inner: Fn, none_fails: bool = True) -> Fn:
    def apply(s: Scope) -> object:
        a = inner(s)
        if a.__class__ is not Col:
            return op(a)
        if not a.holes:
            try:
                return Col(map(op, a))
            except RAISED:
                pass
        return elementwise(op, a, none_fails=none_fails)
    return apply


def liftn(op: Op, args: list[Fn]) -> Fn:
    def apply(s: Scope) -> object:
        vals = [a(s) for a in args]
        for v in vals:
            if v.__class__ is Col:
                return elementwise(op, *vals)
        return op(*vals)
    return apply


def short_circuit(both: Callable[[object, object], object], left: Fn, right: Fn, stop_on: bool) -> Fn:
    """and / or: the right side is read only where the left does not decide."""
    def apply(s: Scope) -> object:
        a = left(s)
        if a.__class__ is not Col:
            if bool(a) is stop_on:
                return stop_on
            b = right(s)
            return elementwise(bool, b, none_fails=False) if b.__class__ is Col else bool(b)
        return elementwise(both, a, guarded(right, s), none_fails=False)
    return apply

