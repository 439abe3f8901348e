"""An answer as indented JSON for `kbq --json`, written by the standard library.

In: a JSON value (an Answer's to_dict()). Out: UTF-8 bytes, two-space indent, non-ASCII kept,
keys in their order, one trailing newline: the bytes orjson writes with OPT_INDENT_2, as
`kbq --json` wrote them before (the server and --batch still write compact JSON with orjson).

Why not orjson here: importing orjson imports dataclasses, inspect, uuid, platform and datetime,
which costs more than writing an answer this way (counted in instructions, `kbq --json` 286 M
with orjson, 274 M with this writer, 243 M for the plain text answer: bench/README.md). The two
writers differ only in how a float in exponent form is spelled: Python's repr writes 1e-05 and
1e+16, orjson writes 0.00001 and 1e16 (a decimal point four places or fewer to the left of the
first digit is written out; an exponent has no '+' and no leading zero). `_respell` turns the
first into the second where a piece holds an exponent. Each run of more than SMALL scalar members
is written by one call of the C encoder, a shorter one member by member. A value orjson would write as null (NaN, an
infinity) goes to orjson itself, so the bytes stay its own; the engine's floats are finite
(kb.engine.answer), and an integer beyond 64 bits, which orjson refuses, is written as it is.
"""

from __future__ import annotations

import json
import re
from itertools import repeat
from json.encoder import encode_basestring as _string

# a number in exponent form ending its line of indented JSON (before the comma, if any) after
# the key's ": ", the indent or the start of a piece: never inside a string, which ends its
# line with '"' (a JSON string holds no raw newline)
_EXPONENT = re.compile(r"(?<![^ ])(-?[0-9][0-9.]*)e([-+][0-9]+)(?=,?(?:\n|\Z))")
_CONTAINERS = (dict, list, tuple)   # a tuple is written as a list, as both encoders do
_ENCODERS: dict[str, json.JSONEncoder] = {}


def _respell(m: re.Match[str]) -> str:
    digits, exp = m.groups()
    e = int(exp)
    if e == -5:     # 1.5e-05 → 0.000015
        sign = "-" if digits.startswith("-") else ""
        return f"{sign}0.0000{digits.lstrip('-').replace('.', '')}"
    return f"{digits}e{e}"


def _scalar(value: object) -> str:
    """One scalar as the C encoder writes it (with orjson's exponents): for a container of a few
    members, where a call of the encoder costs more than writing the members one by one."""
    if isinstance(value, str):
        return _string(value)
    if value is None or value is True or value is False:
        return _LITERALS[value]
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float) and value - value == 0:     # finite
        text = float.__repr__(value)
        return _EXPONENT.sub(_respell, text) if "e" in text else text
    raise ValueError("not finite, or not JSON")     # orjson's null or error, from orjson


_LITERALS = {None: "null", True: "true", False: "false"}
SMALL = 16      # a container of at most this many scalars is written member by member


def _c(value: dict[str, object] | list[object] | tuple[object, ...], inner: str) -> str:
    """The members of a container of scalars, one per line at inner, without the brackets: one
    call of the standard library's C encoder, whose item separator carries the newline and the
    indent; an exponent respelled as orjson writes it."""
    if len(value) <= SMALL:
        sep = ",\n" + inner
        if isinstance(value, dict):
            return sep.join([f"{_string(k)}: {_scalar(v)}" for k, v in value.items()])
        return sep.join([_scalar(v) for v in value])
    enc = _ENCODERS.get(inner)
    if enc is None:
        enc = _ENCODERS[inner] = json.JSONEncoder(
            ensure_ascii=False, check_circular=False, allow_nan=False, separators=(",\n" + inner, ": "))
    text = enc.encode(value)[1:-1]
    if "e-" in text or "e+" in text:
        text = _EXPONENT.sub(_respell, text)
    return text


def _text(value: object, indent: str) -> str:
    """value, on a line indented by indent, as json.dumps(indent=2) writes it (with orjson's
    exponents). Each run of scalar members (most of an answer: a GPU row, a trace step) is
    written by one call of the C encoder, each container member by a call of its own."""
    if not isinstance(value, _CONTAINERS):
        return _c([value], "")
    if not value:
        return "{}" if isinstance(value, dict) else "[]"
    inner = indent + "  "
    ends = "{}" if isinstance(value, dict) else "[]"
    members = value.values() if isinstance(value, dict) else value
    if not any(map(isinstance, members, repeat(_CONTAINERS))):     # scalars only: one call
        return f"{ends[0]}\n{inner}{_c(value, inner)}\n{indent}{ends[1]}"
    parts: list[str] = []
    if isinstance(value, dict):
        run: dict[str, object] = {}
        for k, v in value.items():
            if isinstance(v, _CONTAINERS):
                if run:
                    parts.append(_c(run, inner))
                    run = {}
                parts.append(f"{_string(k)}: {_text(v, inner)}")
            else:
                run[k] = v
        if run:
            parts.append(_c(run, inner))
    else:
        items: list[object] = []
        for v in value:
            if isinstance(v, _CONTAINERS):
                if items:
                    parts.append(_c(items, inner))
                    items = []
                parts.append(_text(v, inner))
            else:
                items.append(v)
        if items:
            parts.append(_c(items, inner))
    return f"{ends[0]}\n{inner}{(',' + chr(10) + inner).join(parts)}\n{indent}{ends[1]}"


def indented(value: object) -> bytes:
    """value as orjson.dumps(value, option=orjson.OPT_INDENT_2) writes it, plus a newline."""
    try:
        data = _text(value, "").encode("utf-8")
    except (ValueError, TypeError, UnicodeEncodeError):     # NaN or an infinity; not JSON; a lone surrogate
        import orjson

        data = orjson.dumps(value, option=orjson.OPT_INDENT_2)
    return data + b"\n"
