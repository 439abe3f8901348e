"""Fuzzing: whatever is typed, kbq answers or says where it cannot read it — nothing else.

Queries are built from the rules' own vocabulary and mutated, plus raw text, bytes decoded
leniently and very long input (tests/fuzz_queries.py); formulas from rules/formulas.yaml are
mutated the same way (tests/fuzz_exprs.py). Each query must give an Answer that serialises to
JSON, or a QueryError whose column lies in 1..len(query)+1 and whose text has a caret under
that column; an expression must parse to an Expr or raise ExprSyntaxError, and a parsed
expression evaluated on random finite floats gives a value or an EvalError
(tests/fuzz_checks.py). hypothesis draws the generators' choices here, so failures shrink;
bench/fuzz.py runs the same generators for 100,000+ queries. Bugs the fuzzing found are kept in
tests/test_fuzz_found.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_checks import check_expr, check_query
from fuzz_exprs import FORMULA_TEXTS, deep_expr, expr_soup, finite_float, mutate_expr
from fuzz_queries import (
    DECODINGS,
    VOCAB,
    Drawn,
    long_text,
    mutate,
    raw_text,
    soup_query,
    vocab_query,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# ---------------------------------------------------------------- the tests

FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ
@given(st.data())
def test_vocabulary_queries(data: Any) -> None:
    check_query(vocab_query(Drawn(data)))


@FUZZ
@given(st.data())
def test_mutated_queries(data: Any) -> None:
    r = Drawn(data)
    check_query(mutate(r, vocab_query(r)))


@FUZZ
@given(st.data())
def test_vocabulary_soup(data: Any) -> None:
    check_query(soup_query(Drawn(data)))


@FUZZ
@given(st.text(max_size=80))
def test_any_text(q: str) -> None:
    check_query(q)


@FUZZ
@given(st.data())
def test_awkward_unicode(data: Any) -> None:
    check_query(raw_text(Drawn(data)))


@FUZZ
@given(st.binary(max_size=120), st.sampled_from(DECODINGS))
def test_bytes_decoded_leniently(raw: bytes, decoding: tuple[str, str]) -> None:
    check_query(raw.decode(*decoding))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_long_input(data: Any) -> None:
    check_query(long_text(Drawn(data)))


@pytest.mark.parametrize("q", [
    "", " ", "\t\n", "?", "??", "\x00", "serve\x0070B", "serve 70B\x7f", "\u202eserve 70B",
    "serve 70B 😀", "serve 70B e\u0301", "ｓｅｒｖｅ 70B", "serve ٣b", "serve 70B on ٢x h100",
    "serve 70B \udcff", "serve 70B\u2028on h100", "x" * 10_000, "serve 70B " * 1_000,
    "serve 70B" + " " * 10_000, "8x", "8x h100", "2x 2x h100", "on h100", "vs", "serve vs 70B",
    "serve 70B on h100 vs", "serve 70B 99999999999999999999 users", "serve 70B 0 users",
    "serve 0.001b", "serve 100000B", "serve 8x7b q2_k 1m context", "train 70B 1m seq",
    "llama", "mixtral 8x", "rtx 4090 context 128", "serve 70B rtx 4090 context",
])
def test_edge_queries(q: str) -> None:
    check_query(q)


def test_every_vocabulary_word_reads_alone_or_fails_cleanly() -> None:
    for words in VOCAB.values():
        for word in words:
            check_query(word)
            check_query(f"serve 7B {word}")


@FUZZ
@given(st.data())
def test_mutated_formulas(data: Any) -> None:
    r = Drawn(data)
    check_expr(mutate_expr(r, r.choice(FORMULA_TEXTS)), lambda: finite_float(r))


@FUZZ
@given(st.data())
def test_expression_soup(data: Any) -> None:
    r = Drawn(data)
    check_expr(expr_soup(r), lambda: finite_float(r))


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_deep_expressions(data: Any) -> None:
    r = Drawn(data)
    check_expr(deep_expr(r), lambda: finite_float(r))


@FUZZ
@given(st.text(max_size=60), st.lists(st.floats(allow_nan=False, allow_infinity=False),
                                      min_size=1, max_size=8))
def test_any_expression_text(text: str, floats: list[float]) -> None:
    it = iter(floats * 100)
    check_expr(text, lambda: next(it))


@pytest.mark.parametrize("text", FORMULA_TEXTS)
def test_every_shipped_expression_evaluates_on_random_floats(text: str) -> None:
    import random

    r = random.Random(text)
    for _ in range(50):
        assert check_expr(text, lambda: finite_float(r)) != "ExprSyntaxError"
