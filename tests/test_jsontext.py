"""`kbq --json` is JSON in kbq's layout: it parses back to the value written, keys in their order,
two spaces of indent a level, non-ASCII characters as they are, one newline at the end. Which
library writes it, and so how a number is spelled (`1e16` or `1e+16`), is not part of the contract."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kb import ask
from kb.present.jsontext import indented


def _pairs(text: bytes) -> object:
    """The JSON text read back with every object as its list of (key, value) pairs, in order."""
    return json.loads(text, object_pairs_hook=list)


def _as_pairs(value: object) -> object:
    """value with every dict as its list of (key, value) pairs and every tuple as a list."""
    if isinstance(value, dict):
        return [(k, _as_pairs(v)) for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return [_as_pairs(v) for v in value]
    return value


def _layout_faults(text: str) -> list[str]:
    """Lines whose indent is not two spaces per open bracket. A string never holds a raw newline
    and always ends with a quote, so a line ending in an open bracket opens a container."""
    faults, depth = [], 0
    for n, line in enumerate(text.split("\n")[:-1], 1):
        body = line.lstrip(" ")
        if body[:1] in ("}", "]"):
            depth -= 1
        if len(line) - len(body) != 2 * depth:
            faults.append(f"line {n}: {line!r} at depth {depth}")
        if line.rstrip(",").endswith(("{", "[")):
            depth += 1
    return faults


def _check(value: object) -> None:
    out = indented(value)
    text = out.decode("utf-8")
    assert text.endswith("\n") and not text.endswith("\n\n")
    assert _pairs(out) == _as_pairs(value)
    assert _layout_faults(text) == []


EDGES = [
    {}, [], {"a": []}, {"a": {}}, [[[]]], "", "x\u2028y\x7f\x00\x1f\t\n\"\\/é😀",
    1e-05, -1.5e-05, 1e-300, 5e-324, 1e16, -1.5e16, 1e300, -0.0, 0.1,
    2 ** 63 - 1, -(2 ** 63), 2 ** 64, -(2 ** 80), True, False, None,
    {"k\\\"": 1e-05, "s": "x {", "t": "a [,", "u": ["1e-05", 3e-05, {"v": 1e22}]},
    [1, [2, [3, {}]], {"x": {"y": [1e-5, 2.5e-7, 1e16]}}],
    {"t": (1, "a", (2.5e-7, None)), "u": (), "v": [(1,), {"w": ()}]},
    {"b": 1, "a": 2, "é": {"z": [], "y": {}}},
]


@pytest.mark.parametrize("value", EDGES, ids=repr)
def test_edge_cases_parse_back_in_kbq_layout(value: object) -> None:
    _check(value)


def test_non_ascii_is_kept_as_it_is() -> None:
    assert "é😀".encode() in indented({"name": "é😀"})


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2 ** 70), 2 ** 70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_any_json_value_parses_back_in_kbq_layout(value: object) -> None:
    _check(value)


@pytest.mark.usefixtures("kbq_installed")
@pytest.mark.parametrize("query", ["serve 70B int4 16 users", "train 13B qlora on 20GB?",
                                   "infer 7B fp16 on rtx 4000 ada vs rtx 6000 ada"])
def test_cli_json_is_the_answer_in_kbq_layout(query: str) -> None:
    """The installed CLI's --json is the answer's to_dict(), in its key order and layout."""
    out = subprocess.run([shutil.which("kbq") or "kbq", "--json", query],
                         capture_output=True, check=True, timeout=120).stdout
    assert _pairs(out) == _as_pairs(ask(query).to_dict())
    assert _layout_faults(out.decode()) == []
