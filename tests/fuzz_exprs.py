"""The fuzzing's expression generators (tests/test_fuzz.py, bench/fuzz.py): the formulas of
rules/formulas.yaml, mutated, token soup, deep nesting and raw text, and finite floats with the
awkward ones well represented."""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

from fuzz_queries import KN, Source, mutate, raw_text

from kb.expr import parse as ex

# ---------------------------------------------------------------- expression vocabulary

def formula_texts(kn: Any) -> tuple[str, ...]:
    """Every expression the shipped rules hold: formula cases, flow conditions, claims."""
    out: list[str] = []
    for f in kn.formulas.values():
        for case in f.cases:
            out.append(case.expr.text)
            if case.when is not None:
                out.append(case.when.text)
    for flow in kn.flows:
        for node in flow.nodes.values():
            out += [e.when.text for e in node.edges if e.when is not None]
    for claim in kn.claims:
        out += [claim.computed.text, claim.applies_when.text] if claim.applies_when else [claim.computed.text]
    return tuple(dict.fromkeys(out))


FORMULA_TEXTS = formula_texts(KN)
EXPR_NAMES = tuple(sorted(set(KN.inputs) | set(KN.constants) | set(KN.formulas)))
EXPR_TOKENS = ("(", ")", "(", ")", "+", "-", "*", "/", "^", "**", "<", "<=", ">", ">=", "==",
               "!=", ",", ".", "and", "or", "not", "0", "1", "2", "0.0", ".5", "1.", "1e3",
               "1e300", "1e308", "1e400", "1e-400", "9" * 400, "1e", "0x10", "1_000", "'fp16'",
               '"mla"', "'", '"', "''", "[", "]", "{", "}", ":", ";", "@", "$", "#", "`", "\\",
               "=", "!", "?", "lambda", "__import__('os')", "open('x')", "eval", "exec",
               "os.system", "gpu.__class__", "__builtins__", "().__class__", "x.y.z", "_",
               *ex.FUNCTIONS, "nope")


def expr_token(r: Source) -> str:
    roll = r.random()
    if roll < 0.55:
        return r.choice(EXPR_TOKENS)
    if roll < 0.9:
        return r.choice(EXPR_NAMES)
    return r.choice(tuple(ex.FUNCTIONS)) + "("


def mutate_expr(r: Source, text: str) -> str:
    """Character mutations, or a token of the expression language put in or taken out."""
    for _ in range(r.randint(1, 4)):
        if r.random() < 0.5:
            text = mutate(r, text, rounds=1)
            continue
        tokens = text.split(" ")
        i = r.randint(0, len(tokens))
        op = r.randint(0, 2)
        if op == 0:
            tokens.insert(i, expr_token(r))
        elif op == 1 and tokens:
            tokens.pop(min(i, len(tokens) - 1))
        elif tokens:
            tokens[min(i, len(tokens) - 1)] = expr_token(r)
        text = " ".join(tokens)
    return text


def expr_soup(r: Source) -> str:
    return r.choice(("", " ")).join(expr_token(r) for _ in range(r.randint(0, 14)))


def deep_expr(r: Source) -> str:
    """Nesting and length beyond any formula: parentheses, unary chains, long operator chains."""
    n = r.choice((59, 60, 61, 62, 100, 500, 1000, 5000))
    kind = r.randint(0, 6)
    if kind == 0:
        return "(" * n + "1" + ")" * n
    if kind == 1:
        return "-" * n + "1"
    if kind == 2:
        return "not " * n + "true_"
    if kind == 3:
        return "2 ^ " * n + "2"
    if kind == 4:
        return " + ".join(["params"] * n)
    if kind == 5:
        return "min(" * min(n, 70) + "1" + ")" * min(n, 70)
    return "(" * n + "1"


EXPR_GENERATORS: dict[str, Callable[[Source], str]] = {
    "formula": lambda r: r.choice(FORMULA_TEXTS),
    "mutated formula": lambda r: mutate_expr(r, r.choice(FORMULA_TEXTS)),
    "soup": expr_soup,
    "deep": deep_expr,
    "raw text": lambda r: raw_text(r, 40),
}
EXPR_MIX = {"formula": 5, "mutated formula": 55, "soup": 25, "deep": 5, "raw text": 10}


def finite_float(r: Source) -> float:
    """Finite floats with the awkward ones well represented."""
    roll = r.random()
    if roll < 0.25:
        return r.choice((0.0, -0.0, 1.0, -1.0, 2.0, 0.5, 5e-324, -5e-324, 2.2250738585072014e-308,
                         1e308, -1e308, 1.7976931348623157e308, -1.7976931348623157e308,
                         1e154, 1e-154, 3.0, 80.0, 1e9))
    if roll < 0.6:
        return (r.random() * 2 - 1) * 10.0 ** r.randint(-320, 308)
    if roll < 0.8:
        return float(r.randint(-10**6, 10**6))
    # any finite bit pattern
    bits = r.randint(0, 2**64 - 1)
    value = struct.unpack("<d", struct.pack("<Q", bits))[0]
    return value if math.isfinite(value) else 0.0
