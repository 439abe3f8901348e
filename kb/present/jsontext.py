"""An answer as indented JSON for `kbq --json`, written by the standard library.

In: a JSON value (an Answer's to_dict()). Out: UTF-8 bytes, two-space indent, non-ASCII kept,
keys in their order, one trailing newline: the bytes orjson writes with OPT_INDENT_2, as
`kbq --json` wrote them before (the server and --batch still write compact JSON with orjson).

Why not orjson here: importing orjson imports dataclasses, inspect, uuid, platform and datetime,
which costs more than writing an answer this way (counted in instructions: bench/README.md).
How: one walk over the containers makes the layout (brackets, newlines, indents) as a %-template
with a `%s` for each key and scalar, and lists the keys and scalars in the same order; one call of
the standard library's C encoder writes that list, one scalar a line (a JSON text holds no raw
newline), and the template takes the lines. A container of scalars only (a GPU row, a step's
values) costs the walk one template from a cache and one C-level extend, not a step per member.
The two writers differ only in how a float in exponent form is spelled: Python's repr writes
1e-05 and 1e+16, orjson writes 0.00001 and 1e16 (a decimal point four places or fewer to the left
of the first digit is written out; an exponent has no '+' and no leading zero). `_respell` turns
the first into the second. A value orjson would write as null (NaN, an infinity) goes to orjson
itself, so the bytes stay its own; the engine's floats are finite (kb.engine.answer), and an
integer beyond 64 bits, which orjson refuses, is written as it is.
"""

from __future__ import annotations

import json
import re
from itertools import repeat
from json.encoder import encode_basestring as _string

_NUMBER = re.compile(rb"(-?[0-9][0-9.]*)e([-+][0-9]+)")     # a float in exponent form, as repr writes it
_CONTAINERS = (dict, list, tuple)   # a tuple is written as a list, as both encoders do
_SCALARS = frozenset((str, int, float, bool, type(None)))   # exactly these: no container can hide in one
_LINES = json.JSONEncoder(ensure_ascii=False, check_circular=False, allow_nan=False, separators=("\n", ": "))
_RUNS: dict[tuple[tuple[str, ...], str], str] = {}     # (keys, indent) → a dict of scalars' template
MAX_RUNS = 4096     # templates kept (an answer has a few hundred; a long-lived caller stays bounded)


def _respell(number: bytes) -> bytes:
    """A float in exponent form as repr writes it → as orjson writes it; any other text as it is."""
    m = _NUMBER.fullmatch(number)
    if m is None:
        return number
    digits, exp = m.group(1).decode(), int(m.group(2))
    if exp == -5:     # 1.5e-05 → 0.000015
        sign = "-" if digits.startswith("-") else ""
        return f"{sign}0.0000{digits.lstrip('-').replace('.', '')}".encode()
    return f"{digits}e{exp}".encode()


def _respelled(lines: bytes) -> bytes:
    """lines (one encoded scalar a line) with each float in exponent form respelled: the lines
    holding 'e-' or 'e+' are found by a search of the text (rare, and mostly inside strings), not
    by a step per line."""
    spans: list[tuple[int, int]] = []
    for mark in (b"e-", b"e+"):
        at = lines.find(mark)
        while at != -1:
            start = lines.rfind(b"\n", 0, at) + 1
            end = lines.find(b"\n", at)
            end = len(lines) if end == -1 else end
            if lines[start:start + 1] != b'"':
                spans.append((start, end))
            at = lines.find(mark, end)
    if not spans:
        return lines
    pieces: list[bytes] = []
    done = 0
    for start, end in sorted(spans):
        pieces += [lines[done:start], _respell(lines[start:end])]
        done = end
    pieces.append(lines[done:])
    return b"".join(pieces)


def _key(k: object) -> str:
    """A key as the template holds it: encoded, with its '%' doubled (TypeError if not a str)."""
    return _string(k).replace("%", "%%")     # type: ignore[arg-type]


def _dict_of_scalars(value: dict[str, object], indent: str) -> str:
    """The template of a dict of scalars whose closing brace is at indent, its keys written in: the
    GPU rows share one, so their keys are encoded once, not once a row."""
    keys = tuple(value)
    template = _RUNS.get((keys, indent))
    if template is None:
        if len(_RUNS) >= MAX_RUNS:
            _RUNS.clear()
        inner = indent + "  "
        template = _RUNS[keys, indent] = (
            "{\n" + inner + (",\n" + inner).join([_key(k) + ": %s" for k in keys]) + "\n" + indent + "}")
    return template


def _walk(value: object, indent: str, flat: list[object]) -> str:
    """value's template, its closing bracket at indent, with its keys written in and a %s for each
    scalar; the scalars appended to flat in the same order. A container whose members are all of
    the exact scalar types is taken whole (the common case); any other member is looked at on its own."""
    if isinstance(value, dict):
        if not value:
            return "{}"
        if _SCALARS.issuperset(map(type, value.values())):
            flat.extend(value.values())
            return _dict_of_scalars(value, indent)
        inner = indent + "  "
        parts = []
        for k, v in value.items():
            if isinstance(v, _CONTAINERS):
                parts.append(_key(k) + ": " + _walk(v, inner, flat))
            else:
                flat.append(v)
                parts.append(_key(k) + ": %s")
        return "{\n" + inner + (",\n" + inner).join(parts) + "\n" + indent + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        inner = indent + "  "
        if _SCALARS.issuperset(map(type, value)):
            flat.extend(value)
            return "[\n" + inner + (",\n" + inner).join(repeat("%s", len(value))) + "\n" + indent + "]"
        parts = []
        for v in value:
            if isinstance(v, _CONTAINERS):
                parts.append(_walk(v, inner, flat))
            else:
                flat.append(v)
                parts.append("%s")
        return "[\n" + inner + (",\n" + inner).join(parts) + "\n" + indent + "]"
    flat.append(value)
    return "%s"


def _bytes(value: object) -> bytes:
    """value as indented JSON in UTF-8: the template (the layout and the keys) takes the encoded scalars as bytes,
    so no text is widened to the answer's widest character and encoded again."""
    flat: list[object] = []
    template = _walk(value, "", flat).encode("utf-8")
    if not flat:
        return template % ()                # no scalar: {}, [], or keys over empty containers
    lines = _LINES.encode(flat).encode("utf-8")[1:-1]       # "[scalar\nscalar\n…]" without its brackets
    if b"e-" in lines or b"e+" in lines:
        lines = _respelled(lines)
    return template % tuple(lines.split(b"\n"))


def indented(value: object) -> bytes:
    """value as orjson.dumps(value, option=orjson.OPT_INDENT_2) writes it, plus a newline."""
    try:
        data = _bytes(value)
    except (ValueError, TypeError, UnicodeEncodeError):     # NaN or an infinity; not JSON; a lone surrogate
        import orjson

        data = orjson.dumps(value, option=orjson.OPT_INDENT_2)
    return data + b"\n"
