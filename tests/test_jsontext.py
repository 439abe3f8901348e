"""`kbq --json` writes an answer with the standard library, and must write the bytes orjson writes
with OPT_INDENT_2 (the server's and --batch's writer, and the answer's JSON before this writer):
orjson is the reference here, over hand-picked edge cases and generated JSON values."""

from __future__ import annotations

import math

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kb import ask
from kb.present.jsontext import indented


def _reference(value: object) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n"


EDGES = [
    {}, [], {"a": []}, {"a": {}}, [[[]]], "", "x\u2028y\x7f\x00\x1f\t\n\"\\/é😀",
    1e-05, -1.5e-05, 9.99e-05, 0.0001, 2.5e-07, 1e-300, 5e-324, 1e16, -1.5e16, 1e15, 1e300, -0.0, 0.1,
    2 ** 63 - 1, -(2 ** 63), True, False, None,
    {"k\\\"": 1e-05, "s": "x 1e-05", "t": "a 1e-05,", "u": ["1e-05", 3e-05, {"v": 1e22}]},
    [1, [2, [3, {}]], {"x": {"y": [1e-5, 2.5e-7, 1e16]}}],
    {"t": (1, "a", (2.5e-7, None)), "u": (), "v": [(1,), {"w": ()}]},
    {"a": float("nan")}, [float("inf")], -math.inf,     # orjson writes null
    {"%s": "%d", "a%%": [1, {"%": "%s%"}], "é%": {"%(x)s": 1e-05}},  # '%' in keys and values
    {"%": []}, {"%%": {"%": {}}},                                     # ...with no scalar at all
    [{"a": 1, "b": "x"}, {"a": 2.5, "b": None}, {"b": 1, "a": 2}],  # rows that share their keys, or not
]


@pytest.mark.parametrize("value", EDGES, ids=repr)
def test_edge_cases_are_written_as_orjson_writes_them(value: object) -> None:
    assert indented(value) == _reference(value)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2 ** 63), 2 ** 63 - 1)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30)


@settings(max_examples=400, deadline=None)
@given(JSON)
def test_any_json_value_is_written_as_orjson_writes_it(value: object) -> None:
    assert indented(value) == _reference(value)


@pytest.mark.parametrize("query", ["serve 70B int4 16 users", "train 13B qlora on 20GB?",
                                   "infer 7B fp16 on rtx 4000 ada vs rtx 6000 ada",
                                   "max context for 34B fp8 on rtx 4090"])
def test_answers_are_written_as_orjson_writes_them(query: str) -> None:
    data = ask(query).to_dict()
    assert indented(data) == _reference(data)
