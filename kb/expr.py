"""The expression language of rule files.

In: formula or condition text (`2 * model.layers * model.kv_heads`, `total_gb <= gpu.vram_gb`).
Out: an `Expr` — a small JSON-serialisable AST (nested lists), the names it reads, and a compiled
closure that evaluates it against a flat scope dict (`{"gpu.vram_gb": 80.0, …}`).

Parsing uses grammar/expr.lark (lark, LALR). Evaluation is our own interpreter: there is no
`eval`, and a call can only reach the fixed FUNCTIONS table below.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from kb.errors import EvalError

Scope = Mapping[str, Any]
Fn = Callable[[Scope], Any]

# Operator precedence is in the grammar; here only the operator semantics.
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne,
}

# name → (min args, max args). Semantics in _call.
FUNCTIONS: dict[str, tuple[int, int]] = {
    "min": (1, 16), "max": (1, 16), "ceil": (1, 1), "floor": (1, 1), "round": (1, 2),
    "sqrt": (1, 1), "log2": (1, 1), "abs": (1, 1), "if": (3, 3), "clamp": (3, 3),
}

MAX_DEPTH = 60
# what evaluating a formula may raise; each becomes an EvalError (or a Failed element)
RAISED = (EvalError, TypeError, ValueError, OverflowError, ZeroDivisionError)
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
    ast: Any
    names: tuple[str, ...]
    name_columns: dict[str, int] = field(compare=False, hash=False)
    fn: Fn = field(compare=False, hash=False, repr=False)

    def __call__(self, scope: Scope) -> Any:
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


_parser = None


def _get_parser() -> Any:
    global _parser
    if _parser is None:
        from lark import Lark

        from kb.paths import grammar_dir

        _parser = Lark.open(str(grammar_dir() / "expr.lark"), parser="lalr",
                            propagate_positions=True, maybe_placeholders=False)
    return _parser


def _to_ast(tree: Any, columns: dict[str, int], depth: int = 0) -> Any:
    """lark tree → nested lists: ["num", x] ["str", s] ["name", n] ["bin", op, a, b]
    ["cmp", op, a, b] ["and", a, b] ["or", a, b] ["not", a] ["neg", a] ["call", f, [args]]."""
    from lark import Token

    if depth > MAX_DEPTH:
        raise ExprSyntaxError(f"expression nested deeper than {MAX_DEPTH} levels", 1)
    if isinstance(tree, Token):
        if tree.type == "NUMBER":
            value = float(tree)
            if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
                raise ExprSyntaxError(f"number {tree} is too large", tree.column or 1)
            return ["num", value]
        if tree.type == "STRING":
            return ["str", str(tree)[1:-1]]
        raise ExprSyntaxError(f"unexpected {tree!s}", tree.column or 1)
    kind = tree.data
    kids = tree.children
    d = depth + 1
    if kind == "number":
        return _to_ast(kids[0], columns, d)
    if kind == "string":
        return _to_ast(kids[0], columns, d)
    if kind == "dotted":
        name = ".".join(str(k) for k in kids)
        columns.setdefault(name, kids[0].column or 1)
        return ["name", name]
    if kind == "binary":
        op = "^" if str(kids[1]) in ("^", "**") else str(kids[1])
        return ["bin", op, _to_ast(kids[0], columns, d), _to_ast(kids[2], columns, d)]
    if kind == "compare":
        return ["cmp", str(kids[1]), _to_ast(kids[0], columns, d), _to_ast(kids[2], columns, d)]
    if kind in ("and_", "or_"):
        return [kind[:-1], _to_ast(kids[0], columns, d), _to_ast(kids[1], columns, d)]
    if kind == "not_":
        return ["not", _to_ast(kids[0], columns, d)]
    if kind == "neg":
        return ["neg", _to_ast(kids[0], columns, d)]
    if kind == "call":
        fname = str(kids[0])
        args = [_to_ast(k, columns, d) for k in kids[1:] if k is not None]
        if fname not in FUNCTIONS:
            from kb.errors import nearest

            raise ExprSyntaxError(f"unknown function '{fname}'", kids[0].column or 1,
                                  nearest(fname, FUNCTIONS))
        lo, hi = FUNCTIONS[fname]
        if not lo <= len(args) <= hi:
            raise ExprSyntaxError(f"{fname}() takes {lo if lo == hi else f'{lo} to {hi}'} "
                                  f"argument(s), got {len(args)}", kids[0].column or 1)
        return ["call", fname, args]
    if kind in ("start", "expr") and len(kids) == 1:
        return _to_ast(kids[0], columns, d)
    raise ExprSyntaxError(f"unsupported construct {kind}", 1)


def parse(text: str) -> Expr:
    """Parse and compile one expression. Raises ExprSyntaxError with a column."""
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput

    if not isinstance(text, str) or not text.strip():
        raise ExprSyntaxError("empty expression", 1)
    if text.count("(") > MAX_DEPTH:
        raise ExprSyntaxError(f"expression nested deeper than {MAX_DEPTH} levels", 1)
    try:
        tree = _get_parser().parse(text)
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
    ast = _to_ast(tree, columns)
    return from_ast(text, ast, columns)


def from_ast(text: str, ast: Any, columns: dict[str, int] | None = None) -> Expr:
    """Build an Expr from an already-parsed AST (used by the knowledge snapshot)."""
    names: list[str] = []
    _collect_names(ast, names)
    return Expr(text=text, ast=ast, names=tuple(dict.fromkeys(names)),
                name_columns=columns or {}, fn=compile_ast(ast))


def _collect_names(ast: Any, out: list[str]) -> None:
    tag = ast[0]
    if tag == "name":
        out.append(ast[1])
    elif tag in ("bin", "cmp"):
        _collect_names(ast[2], out)
        _collect_names(ast[3], out)
    elif tag in ("and", "or"):
        _collect_names(ast[1], out)
        _collect_names(ast[2], out)
    elif tag in ("not", "neg"):
        _collect_names(ast[1], out)
    elif tag == "call":
        for arg in ast[2]:
            _collect_names(arg, out)


def _num(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EvalError(f"{what} is not a number ({value!r})")
    return value


def _power(a: float, b: float) -> float:
    try:
        result = float(a) ** float(b)       # floats: an int power could run without bound
    except (OverflowError, ZeroDivisionError) as exc:
        raise EvalError(f"{a} ^ {b}: {exc}") from None
    if isinstance(result, complex):
        raise EvalError(f"{a} ^ {b} is not a real number")
    return result


# ---------------------------------------------------------------- columns
#
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
    def of(cls, values: Any, holes: frozenset[int] | None = None) -> Col:
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

    __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __eq__  # type: ignore[assignment]
    __hash__ = None  # type: ignore[assignment]


MISSING = Failed(None)


def elementwise(op: Callable[..., Any], *args: Any, none_fails: bool = True) -> Col:
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
                out[i] = _failure(tuple(at(a, i) for a in args), None)
            return out
        out = Col(map(op, *[a if a.__class__ is Col else repeat(a) for a in args]))
    except RAISED:
        return _one_by_one(op, args)
    found = frozenset(i for i in holes if (v := out[i]) is None or v.__class__ is Failed)
    if found:
        out.holes = found
    return out


def _all_failed(args: tuple[Any, ...], n: int) -> Col:
    """Every position of a none_fails operator holds a hole: each inherits, as _failure does,
    the first Failed among its operands, else MISSING."""
    out: list[Any] = [None] * n
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


def _one_by_one(op: Callable[..., Any], args: tuple[Any, ...]) -> Col:
    """Some element raised: every element again, each failure kept in its place."""
    out = []
    for t in zip(*[a if a.__class__ is Col else repeat(a) for a in args]):
        try:
            out.append(op(*t))
        except RAISED as exc:
            out.append(_failure(t, exc))
    return Col.of(out)


def _failure(operands: tuple[Any, ...], exc: Exception | None) -> Failed:
    """What an element that raised holds: the failure it inherited, else a new one."""
    for a in operands:
        if a.__class__ is Failed:
            return a
    return MISSING if exc is None or any(a is None for a in operands) else Failed(exc)


def at(value: Any, i: int) -> Any:
    """Candidate i's value."""
    return value[i] if value.__class__ is Col else value


def guarded(fn: Fn, s: Scope) -> Any:
    """A branch that only some elements take: a failure becomes a Failed, not an exception."""
    try:
        return fn(s)
    except RAISED as exc:
        return Failed(exc)


def _pick(cond: Any, yes: Any, no: Any) -> Any:          # never touches the branch not taken
    if cond.__class__ is Failed:
        return cond
    return yes if cond else no


def _and(a: Any, b: Any) -> Any:
    if a.__class__ is Failed:
        return a
    if not a:
        return False
    return b if b.__class__ is Failed else bool(b)


def _or(a: Any, b: Any) -> Any:
    if a.__class__ is Failed:
        return a
    if a:
        return True
    return b if b.__class__ is Failed else bool(b)


def _fast(op: Callable[..., Any], a: Any, b: Any) -> Col | None:
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
    if b.holes or a is None or a.__class__ is Failed:
        return None
    return Col(map(op, repeat(a), b))


def _lift2(op: Callable[[Any, Any], Any], left: Fn, right: Fn, none_fails: bool = True) -> Fn:
    def apply(s: Scope) -> Any:
        a, b = left(s), right(s)
        if a.__class__ is Col or b.__class__ is Col:
            try:
                out = _fast(op, a, b)
            except RAISED:
                out = None
            return elementwise(op, a, b, none_fails=none_fails) if out is None else out
        return op(a, b)
    return apply


def _lift1(op: Callable[[Any], Any], inner: Fn, none_fails: bool = True) -> Fn:
    def apply(s: Scope) -> Any:
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


def _liftn(op: Callable[..., Any], args: list[Fn]) -> Fn:
    def apply(s: Scope) -> Any:
        vals = [a(s) for a in args]
        for v in vals:
            if v.__class__ is Col:
                return elementwise(op, *vals)
        return op(*vals)
    return apply


def _short_circuit(both: Callable[[Any, Any], Any], left: Fn, right: Fn, stop_on: bool) -> Fn:
    """and / or: the right side is read only where the left does not decide."""
    def apply(s: Scope) -> Any:
        a = left(s)
        if a.__class__ is not Col:
            if bool(a) is stop_on:
                return stop_on
            b = right(s)
            return elementwise(bool, b, none_fails=False) if b.__class__ is Col else bool(b)
        return elementwise(both, a, guarded(right, s), none_fails=False)
    return apply


def _neg(a: Any) -> Any:
    return -_num(a, "operand")


def _pow(a: Any, b: Any) -> Any:
    return _power(_num(a, "base"), _num(b, "exponent"))


def compile_ast(ast: Any) -> Fn:
    """AST → closure over a scope mapping (values or Cols)."""
    tag = ast[0]
    if tag in ("num", "str"):
        value = ast[1]
        return lambda s: value
    if tag == "name":
        key = ast[1]

        def lookup(s: Scope) -> Any:
            try:
                return s[key]
            except KeyError:
                raise EvalError(f"'{key}' has no value for this workload") from None
        return lookup
    if tag == "bin":
        # Operand types are settled at load by the unit check (kb.knowledge); a None (a figure
        # the workload lacks) or text raises TypeError here, which Expr.__call__ reports.
        # x / 0 raises ZeroDivisionError, which Expr.message reports as "division by zero"
        op = {"+": operator.add, "-": operator.sub, "*": operator.mul,
              "/": operator.truediv}.get(ast[1], _pow)
        return _lift2(op, compile_ast(ast[2]), compile_ast(ast[3]))
    if tag == "cmp":
        # None == x is a plain False, as in one GPU's scope; only ordering raises on None
        return _lift2(_COMPARE[ast[1]], compile_ast(ast[2]), compile_ast(ast[3]),
                      none_fails=ast[1] not in ("==", "!="))
    if tag in ("and", "or"):
        both = _and if tag == "and" else _or
        return _short_circuit(both, compile_ast(ast[1]), compile_ast(ast[2]), tag == "or")
    if tag == "not":
        return _lift1(operator.not_, compile_ast(ast[1]), none_fails=False)
    if tag == "neg":
        return _lift1(_neg, compile_ast(ast[1]))
    if tag == "call":
        return _compile_call(ast[1], [compile_ast(a) for a in ast[2]])
    raise ValueError(f"unknown AST node {tag!r}")


def _round2(x: Any, digits: Any) -> float:
    digits = _num(digits, "round() digits")
    if not (digits == digits and -20 <= digits <= 20):
        raise EvalError("round() keeps between -20 and 20 digits")
    return round(_num(x, "round()"), int(digits))


def _sqrt(x: Any) -> float:
    x = _num(x, "sqrt()")
    if x < 0:
        raise EvalError("sqrt() of a negative number")
    return math.sqrt(x)


def _log2(x: Any) -> float:
    x = _num(x, "log2()")
    if x <= 0:
        raise EvalError("log2() of a non-positive number")
    return math.log2(x)


def _clamp(x: Any, lo: Any, hi: Any) -> Any:
    return min(max(_num(x, "clamp() value"), lo), hi)


def _unary(f: Callable[[Any], Any], name: str) -> Callable[[Any], float]:
    what = f"{name}()"
    return lambda x: float(f(_num(x, what)))


def _compile_call(name: str, args: list[Fn]) -> Fn:
    if name == "if":
        cond, yes, no = args

        def if_(s: Scope) -> Any:
            c = cond(s)
            if c.__class__ is not Col:
                return yes(s) if c else no(s)
            return elementwise(_pick, c, guarded(yes, s), guarded(no, s), none_fails=False)
        return if_
    if name in ("min", "max"):
        if len(args) == 1:
            return args[0]
        return _liftn(min if name == "min" else max, args)
    if name == "clamp":
        return _liftn(_clamp, args)
    if name == "round":
        if len(args) == 2:
            return _liftn(_round2, args)
        return _lift1(lambda x: float(round(_num(x, "round()"))), args[0])
    if name == "sqrt":
        return _lift1(_sqrt, args[0])
    if name == "log2":
        return _lift1(_log2, args[0])
    unary: dict[str, Callable[[Any], Any]] = {"ceil": math.ceil, "floor": math.floor, "abs": abs}
    return _lift1(_unary(unary[name], name), args[0])


# ---------------------------------------------------------------- units

Unit = tuple[tuple[str, int], ...] | None  # None: a bare literal, fits any unit in + - compare
BOOL: Unit = (("bool", 1),)
TEXT: Unit = (("text", 1),)
ONE: Unit = ()


# Counts are written in units for the reader but are plain numbers in the check.
COUNTS = frozenset({"param", "params", "token", "tokens", "user", "users", "seq", "value",
                    "layer", "gpu", "gpus", "step", "request"})


def parse_unit(text: str) -> Unit:
    """'GB/s' → (('GB', 1), ('s', -1)); '1' or '' → (); 'bool' and 'text' are special.
    Count words (COUNTS) drop out: 'tokens/s' is checked as '1/s'."""
    text = text.strip()
    if text in ("", "1", "-"):
        return ONE
    if text == "bool":
        return BOOL
    if text == "text":
        return TEXT
    powers: dict[str, int] = {}
    for i, part in enumerate(text.split("/")):
        for factor in part.split("*"):
            factor = factor.strip()
            if not factor or factor == "1":
                continue
            sym, _, exp = factor.partition("^")
            if sym in COUNTS:
                continue
            n = int(exp) if exp else 1
            powers[sym] = powers.get(sym, 0) + (n if i == 0 else -n)
    return tuple(sorted((k, v) for k, v in powers.items() if v))


def format_unit(unit: Unit) -> str:
    if unit is None:
        return "number"
    if unit == ONE:
        return "1"
    num = [f"{k}^{v}" if v > 1 else k for k, v in unit if v > 0]
    den = [f"{k}^{-v}" if v < -1 else k for k, v in unit if v < 0]
    top = "*".join(num) or "1"
    return top + ("/" + "/".join(den) if den else "")


class UnitError(Exception):
    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


def _same(a: Unit, b: Unit, what: str) -> Unit:
    if a is None:
        return b
    if b is None or a == b:
        return a
    raise UnitError(f"{what}: {format_unit(a)} and {format_unit(b)} do not agree")


def _mul(a: Unit, b: Unit, sign: int) -> Unit:
    powers: dict[str, int] = dict(a or ())
    for k, v in b or ():
        powers[k] = powers.get(k, 0) + sign * v
    return tuple(sorted((k, v) for k, v in powers.items() if v))


def infer_unit(ast: Any, units: Mapping[str, Unit]) -> Unit:
    """The unit of an expression, given the unit of every name it reads."""
    tag = ast[0]
    if tag == "num":
        return None
    if tag == "str":
        return TEXT
    if tag == "name":
        return units[ast[1]]
    if tag == "bin":
        a, b = infer_unit(ast[2], units), infer_unit(ast[3], units)
        op = ast[1]
        if op in "+-":
            return _same(a, b, f"'{op}'")
        if op in "*/":
            if a is None and b is None:
                return None
            return _mul(a, b, 1 if op == "*" else -1)
        if b not in (None, ONE):
            raise UnitError("an exponent must be a plain number")
        if a in (None, ONE):
            return a
        if ast[3][0] != "num" or not float(ast[3][1]).is_integer():
            raise UnitError(f"{format_unit(a)} raised to a non-integer power")
        n = int(ast[3][1])
        return tuple((k, v * n) for k, v in a)
    if tag == "cmp":
        a, b = infer_unit(ast[2], units), infer_unit(ast[3], units)
        if TEXT in (a, b) and a != b and None not in (a, b):
            raise UnitError("comparing text with a number")
        _same(a, b, f"'{ast[1]}'")
        return BOOL
    if tag in ("and", "or", "not"):
        for sub in ast[1:]:
            u = infer_unit(sub, units)
            if u not in (BOOL, None):
                raise UnitError(f"'{tag}' needs true/false operands, got {format_unit(u)}")
        return BOOL
    if tag == "neg":
        return infer_unit(ast[1], units)
    if tag == "call":
        return _call_unit(ast[1], [infer_unit(a, units) for a in ast[2]])
    raise UnitError(f"unknown node {tag}")


def _call_unit(name: str, args: list[Unit]) -> Unit:
    if name == "if":
        if args[0] not in (BOOL, None):
            raise UnitError("if() needs a condition as its first argument")
        return _same(args[1], args[2], "the two branches of if()")
    if name in ("min", "max", "clamp"):
        unit = args[0]
        for other in args[1:]:
            unit = _same(unit, other, f"{name}()")
        return unit
    if name in ("ceil", "floor", "round", "abs"):
        return args[0]
    if name == "sqrt":
        a = args[0]
        if a in (None, ONE):
            return a
        if any(v % 2 for _, v in a):
            raise UnitError(f"sqrt() of {format_unit(a)}")
        return tuple((k, v // 2) for k, v in a)
    if args[0] not in (None, ONE):
        raise UnitError(f"{name}() needs a plain number, got {format_unit(args[0])}")
    return ONE
