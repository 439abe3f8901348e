"""Evaluating formulas over a scope: one value per name, or a Col per candidate GPU.

In: the Knowledge (compiled formulas and each one's dependency order) and an Evaluated scope
(a workload's inputs, the constants, and the GPU names as scalars or kb.expr.parse.Col columns).
Out: the formulas asked for, and what they depend on, written into the scope in dependency
order, with the case each used and any error (per candidate where the scope holds columns).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from operator import add, not_
from typing import Any, TypeAlias

from kb.errors import EvalError
from kb.expr.parse import MISSING, RAISED, Col, Expr, Failed, at, filled, guarded
from kb.knowledge.data import Formula, Knowledge

Scope: TypeAlias = "dict[str, Any]"
INFINITE = (math.inf, -math.inf)


@dataclass(slots=True)
class Evaluated:
    """A scope and, for each formula computed in it, the index of the case used and any error.
    In a scope over several candidate GPUs a value, case or error may be a Col (kb.expr.parse): one
    entry per candidate (its name is then in `columns`); `view(i)` is candidate i's own scope."""
    scope: Scope
    cases: dict[str, int | Col] = field(default_factory=dict)
    errors: dict[str, str | Col] = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)   # the names whose value is a Col

    def view(self, i: int) -> Evaluated:
        scope = dict(self.scope)
        for k in self.columns:
            scope[k] = scope[k][i]
        return Evaluated(scope, {k: v[i] if v.__class__ is Col else v for k, v in self.cases.items()},
                         {k: e for k, v in self.errors.items() if (e := at(v, i)) is not None})


def evaluate(kn: Knowledge, ev: Evaluated, names: Iterable[str]) -> None:
    """Compute formulas (and what they depend on) into ev.scope, in dependency order."""
    scope = ev.scope
    order = formula_order(kn)
    formulas = kn.formulas
    for name in names:
        if name in scope:
            continue
        for dep in order[name]:
            if dep not in scope:
                value = scope[dep] = _eval_formula(formulas[dep], ev)
                if value.__class__ is Col:
                    ev.columns.append(dep)


def formula_order(kn: Knowledge) -> Mapping[str, tuple[str, ...]]:
    """Each formula after the formulas it needs, in the order to compute them."""
    return kn.derived.order


def _eval_formula(f: Formula, ev: Evaluated) -> Any:
    """The first case whose condition holds. A figure the workload lacks (None, e.g. the
    bandwidth of a bare '20GB') makes the result None; any other failure is recorded."""
    scope = ev.scope
    for i, case in enumerate(f.cases):
        if case.when is not None:
            try:
                holds = case.when.fn(scope)
            except RAISED as exc:
                return _failed(f, ev, case.when, exc, scope)
            if holds.__class__ is Col:
                return _eval_cases_each(f, ev, i, holds)
            if not holds:
                continue
        try:
            value = case.expr.fn(scope)
        except RAISED as exc:
            return _failed(f, ev, case.expr, exc, scope)
        ev.cases[f.name] = i
        if value.__class__ is Col:
            return _checked(f, ev, value, case.expr)
        if value.__class__ is float and (value != value or value in INFINITE):
            ev.errors[f.name] = "the result is not a finite number"
            return None
        return value
    return None


def _failed(f: Formula, ev: Evaluated, expr: Expr, exc: Exception, scope: Scope) -> None:
    """A failure is recorded (with the expression's message) unless an input it reads is missing."""
    if not any(scope.get(n) is None for n in f.names):
        ev.errors[f.name] = expr.message(exc, scope)
    return None


def _checked(f: Formula, ev: Evaluated, col: Col, expr: Any) -> Col:
    """A result over the candidates: failed or non-finite elements become None, with an error."""
    holes = col.holes
    try:
        clean = math.isfinite(math.fsum(filled(col, holes) if holes else col))
    except (TypeError, OverflowError, ValueError):      # text, truth values, failures, inf
        clean = False
    if clean and not holes:
        return col                                      # all numbers, all finite: the common case
    positions = holes if clean else range(len(col))
    out = list(col)
    errors: dict[int, str] = {}
    for i in positions:
        v = out[i]
        if v.__class__ is Failed:
            out[i] = None
            if v is not MISSING and not any(at(ev.scope.get(n), i) is None for n in f.names):
                errors[i] = expr.message(v.error, {n: at(ev.scope.get(n), i) for n in expr.names})
        elif v.__class__ is float and (v != v or v in INFINITE):
            out[i] = None
            errors[i] = "the result is not a finite number"
    if errors:
        ev.errors[f.name] = Col(errors.get(i) for i in range(len(out)))
    return Col.of(out, holes if clean else None)


def _eval_cases_each(f: Formula, ev: Evaluated, start: int, first: Col) -> Any:
    """Cases whose conditions differ between candidates: each candidate takes its first case
    that holds, as it would on its own."""
    scope = ev.scope
    cases = f.cases
    if start + 2 == len(cases) and cases[start + 1].when is None:
        found = _two_cases(f, ev, start, first)
        if found is not None:
            return found
    chosen: list[Any] = [None] * len(first)     # case index, or a Failed condition
    holds: Any = first
    conditions: dict[int, object] = {}
    for i in range(start, len(cases)):
        if i > start:
            when = cases[i].when
            holds = True if when is None else guarded(when.fn, scope)
        conditions[i] = holds
        if holds.__class__ is Col:
            chosen = [c if c is not None else h if h.__class__ is Failed else i if h else None
                      for c, h in zip(chosen, holds)]
        elif holds.__class__ is Failed or holds:    # every candidate left takes this one
            taken = holds if holds.__class__ is Failed else i
            chosen = [taken if c is None else c for c in chosen]
            break
    values = {i: guarded(cases[i].expr.fn, scope) for i in {c for c in chosen if c.__class__ is int}}
    col = Col.of([c if c is None or c.__class__ is Failed else v[k] if (v := values[c]).__class__ is Col else v
                  for k, c in enumerate(chosen)])
    last = len(cases) - 1
    ev.cases[f.name] = Col([c if c.__class__ is int else last for c in chosen])
    out = _checked(f, ev, col, cases[next((c for c in chosen if c.__class__ is int), -1)].expr)

    def failed_in(k: int) -> Expr:      # the condition that failed, or the case's expression
        c = chosen[k]
        if c.__class__ is int:
            return cases[c].expr
        return cases[next(i for i, h in conditions.items() if at(h, k) is c)].when or cases[-1].expr
    _said_as_alone(f, ev, col, failed_in)
    return out


def _said_as_alone(f: Formula, ev: Evaluated, col: Col, failed_in: Callable[[int], Expr]) -> None:
    """A candidate's error (kb.engine.evaluate._checked) as it is alone: the message of the
    expression that failed for it (its case's, or the condition's), not the first candidate's."""
    errors = ev.errors.get(f.name)
    if errors.__class__ is not Col:
        return
    said = list(errors)
    for k, e in enumerate(said):
        if e is not None and (v := col[k]).__class__ is Failed and v.error is not None:
            expr = failed_in(k)
            said[k] = expr.message(v.error, {n: at(ev.scope.get(n), k) for n in expr.names})
    ev.errors[f.name] = Col(said)


def _two_cases(f: Formula, ev: Evaluated, start: int, holds: Col) -> Col | None:
    """_eval_cases_each where case `start` is the last but one and the last has no condition
    (\"when …, else …\"), in C-level passes: each candidate whose condition is false (or
    missing) takes the last. None where a condition failed (the general path then runs)."""
    try:
        later = list(map(not_, holds))      # per candidate: whether it takes the last case
    except TypeError:                       # a Failed condition
        return None
    n = len(later)
    scope = ev.scope
    taken = (start,) * (not all(later)) + (start + 1,) * any(later)
    values = {i: guarded(f.cases[i].expr.fn, scope) for i in taken}
    columns = [v if v.__class__ is Col else [v] * n for v in (values.get(start), values.get(start + 1))]
    col = Col(map(tuple.__getitem__, zip(*columns), later))
    holes = {k for i, v in values.items() for k in (v.holes if v.__class__ is Col else
             (range(n) if v is None or v.__class__ is Failed else ())) if later[k] == (i > start)}
    if holes:
        col.holes = frozenset(holes)
    ev.cases[f.name] = Col(map(add, repeat(start), later))
    out = _checked(f, ev, col, f.cases[start + later[0]].expr)
    _said_as_alone(f, ev, col, lambda k: f.cases[start + later[k]].expr)
    return out


def condition(expr: Any, scope: Scope) -> bool:
    """An edge or claim condition; one that reads a figure the workload lacks does not hold."""
    if expr is None:
        return True
    try:
        return bool(expr(scope))
    except EvalError:
        return False
