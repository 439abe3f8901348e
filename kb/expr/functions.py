"""The functions a rule expression may call: the whole list, with their semantics.

In: a function name and its compiled arguments (or their units). Out: `FUNCTIONS[name]`, a
Function that builds the call's closure (scalars and columns alike) and infers its unit. A call
can only reach this table: there is no `eval`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from kb.expr import units as u
from kb.expr.columns import Col, Fn, Scope, elementwise, guarded, lift1, liftn, pick
from kb.errors import EvalError
from kb.expr.units import BOOL, Unit, UnitError


def num(value: object, what: str) -> float:
    """value if it is a number (not a bool); else an EvalError naming `what`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EvalError(f"{what} is not a number ({value!r})")
    return value


@dataclass(frozen=True, slots=True)
class Function:
    low: int                                   # fewest arguments
    high: int                                  # most arguments
    build: Callable[[list[Fn]], Fn]            # compiled arguments → compiled call
    unit: Callable[[list[Unit]], Unit]         # argument units → result unit

    def arity(self) -> str:
        return str(self.low) if self.low == self.high else f"{self.low} to {self.high}"


def _if(args: list[Fn]) -> Fn:
    cond, yes, no = args

    def if_(s: Scope) -> object:
        c = cond(s)
        if c.__class__ is not Col:
            return yes(s) if c else no(s)
        return elementwise(pick, c, guarded(yes, s), guarded(no, s), none_fails=False)
    return if_


def _if_unit(args: list[Unit]) -> Unit:
    if args[0] not in (BOOL, None):
        raise UnitError("if() needs a condition as its first argument")
    return u.same(args[1], args[2], "the two branches of if()")


def _extreme(pick_one: Callable[..., object]) -> Callable[[list[Fn]], Fn]:
    return lambda args: args[0] if len(args) == 1 else liftn(pick_one, args)


def _agreeing(name: str) -> Callable[[list[Unit]], Unit]:
    def unit(args: list[Unit]) -> Unit:
        out = args[0]
        for other in args[1:]:
            out = u.same(out, other, f"{name}()")
        return out
    return unit


def _first(args: list[Unit]) -> Unit:
    return args[0]


def _clamp(x: object, lo: object, hi: object) -> object:
    # the bounds are compared as they are (the unit check made them numbers of x's unit)
    return min(max(num(x, "clamp() value"), cast(float, lo)), cast(float, hi))


def _round2(x: object, digits: object) -> float:
    digits = num(digits, "round() digits")
    if not (digits == digits and -20 <= digits <= 20):
        raise EvalError("round() keeps between -20 and 20 digits")
    return round(num(x, "round()"), int(digits))


def _round(args: list[Fn]) -> Fn:
    if len(args) == 2:
        return liftn(_round2, args)
    return lift1(lambda x: float(round(num(x, "round()"))), args[0])


def _sqrt(x: object) -> float:
    x = num(x, "sqrt()")
    if x < 0:
        raise EvalError("sqrt() of a negative number")
    return math.sqrt(x)


def _log2(x: object) -> float:
    x = num(x, "log2()")
    if x <= 0:
        raise EvalError("log2() of a non-positive number")
    return math.log2(x)


def _unary(f: Callable[[float], float], name: str) -> Callable[[list[Fn]], Fn]:
    what = f"{name}()"
    return lambda args: lift1(lambda x: float(f(num(x, what))), args[0])


FUNCTIONS: dict[str, Function] = {
    "min": Function(1, 16, _extreme(min), _agreeing("min")),
    "max": Function(1, 16, _extreme(max), _agreeing("max")),
    "ceil": Function(1, 1, _unary(math.ceil, "ceil"), _first),
    "floor": Function(1, 1, _unary(math.floor, "floor"), _first),
    "round": Function(1, 2, _round, _first),
    "sqrt": Function(1, 1, lambda args: lift1(_sqrt, args[0]), lambda a: u.sqrt(a[0])),
    "log2": Function(1, 1, lambda args: lift1(_log2, args[0]), lambda a: u.plain("log2", a[0])),
    "abs": Function(1, 1, _unary(abs, "abs"), _first),
    "if": Function(3, 3, _if, _if_unit),
    "clamp": Function(3, 3, lambda args: liftn(_clamp, args), _agreeing("clamp")),
}
