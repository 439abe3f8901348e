"""Units of measure for rule expressions.

In: unit text from a rule file ('GB/s', 'tokens/s', 'bool', '1').
Out: a Unit (sorted tuple of (symbol, power); None for a bare literal), its text, and the
combining rules (`same`, `mul`, `sqrt`) that kb.expr.nodes uses to infer an expression's unit.
"""

from __future__ import annotations

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


def same(a: Unit, b: Unit, what: str) -> Unit:
    if a is None:
        return b
    if b is None or a == b:
        return a
    raise UnitError(f"{what}: {format_unit(a)} and {format_unit(b)} do not agree")


def mul(a: Unit, b: Unit, sign: int) -> Unit:
    powers: dict[str, int] = dict(a or ())
    for k, v in b or ():
        powers[k] = powers.get(k, 0) + sign * v
    return tuple(sorted((k, v) for k, v in powers.items() if v))



def sqrt(a: Unit) -> Unit:
    if a is None or a == ONE:
        return a
    if any(v % 2 for _, v in a):
        raise UnitError(f"sqrt() of {format_unit(a)}")
    return tuple((k, v // 2) for k, v in a)


def power(a: Unit, n: int) -> Unit:
    """a ^ n for an integer n (a not None)."""
    return tuple((k, v * n) for k, v in a or ())


def plain(name: str, a: Unit) -> Unit:
    """A function of a plain number (log2): its argument must be one."""
    if a not in (None, ONE):
        raise UnitError(f"{name}() needs a plain number, got {format_unit(a)}")
    return ONE
