"""The fuzzing's properties (tests/test_fuzz.py, bench/fuzz.py): a query gives an Answer that
serialises to JSON, or a QueryError whose column lies in 1..len(query)+1 with a caret under it;
an expression parses to an Expr or raises ExprSyntaxError, and evaluates on random floats to a
value or an EvalError; neither hangs."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kb import ask
from kb.errors import EvalError, QueryError
from kb.expr import parse as ex
from kb.query.parse import MAX_QUERY_CHARS

# ---------------------------------------------------------------- the properties

class Hang(Exception):
    """A call took longer than its time limit."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise Hang in the main thread after `seconds` (no-op where SIGALRM is missing)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise Hang(f"no result after {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


QUERY_SECONDS = 10.0

def check_query(q: str) -> str:
    """The query property. Returns 'answer' or 'QueryError'; raises AssertionError when the
    error breaks its contract, and lets any other exception through."""
    with time_limit(QUERY_SECONDS):
        try:
            result = ask(q)
        except QueryError as err:
            assert isinstance(err.column, int), err.column
            assert 1 <= err.column <= len(q) + 1, (err.column, len(q))
            text = err.render()
            lines = text.split("\n")
            caret = "  " + " " * (err.column - 1) + "^" * max(1, err.width)
            assert caret in lines, text
            json.dumps(err.to_dict())
            shown = q if len(q) <= MAX_QUERY_CHARS else q[:80] + "…"
            # a query is one line: tabs and line breaks read as spaces (same length, so the
            # caret still points at the same character); the error shows unprintable ones as ?
            one_line = shown.translate({ord(c): " " for c in "\t\n\r\v\f"})
            printable = "".join("?" if ord(c) < 32 or 0x7F <= ord(c) <= 0x9F or 0x202A <= ord(c) <= 0x202E
                                or 0x2066 <= ord(c) <= 0x2069 else c for c in one_line)
            assert err.query in (one_line, printable), f"the error shows {err.query!r}, not the query {q!r}"
            return "QueryError"
    d = result.to_dict()
    json.dumps(d, allow_nan=False)
    return "answer"


def check_expr(text: str, values: Callable[[], float]) -> str:
    """The expression property. Returns 'ExprSyntaxError', 'value' or 'EvalError'; raises
    AssertionError or the unexpected exception otherwise."""
    with time_limit(QUERY_SECONDS):
        try:
            e = ex.parse(text)
        except ex.ExprSyntaxError as err:
            assert isinstance(err.column, int) and 1 <= err.column <= len(text) + 1, (
                err.column, len(text))
            assert err.message
            return "ExprSyntaxError"
        assert isinstance(e, ex.Expr)
        json.dumps(e.ast.to_list(), allow_nan=False)
        scope = {name: values() for name in e.names}
        try:
            value = e(scope)
        except EvalError:
            return "EvalError"
    assert isinstance(value, (int, float, bool, str)), type(value)
    return "value"
