"""An answer as indented JSON: what `kbq --json` prints.

In: a JSON value (an Answer's to_dict()). Out: UTF-8 bytes with kbq's layout: two-space indent,
keys in their order, non-ASCII characters kept, one trailing newline. orjson writes it (the
server and --batch write compact JSON with orjson too). How a number is spelled (`1e16` or
`1e+16`) is the writer's choice, not part of the contract: a reader gets the same value either way.
"""

from __future__ import annotations

import json

import orjson

_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE


def indented(value: object) -> bytes:
    """value as indented JSON. An integer beyond 64 bits, which orjson refuses, is written by the
    standard library in the same layout."""
    try:
        return orjson.dumps(value, option=_OPTIONS)
    except orjson.JSONEncodeError:
        return (json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode()
