"""Fuzzing: whatever is typed, kbq answers or says where it cannot read it — nothing else.

Queries are built from the rules' own vocabulary (task words, model, GPU, precision and runtime
ids and aliases, fillers, numbers with units), then mutated (swaps, deletions, insertions,
unicode: RTL marks, emoji, combining marks, NUL and other control characters), plus raw text,
bytes decoded leniently and very long input. Each query must give an Answer that serialises to
JSON, or a QueryError whose column lies in 1..len(query)+1 and whose text has a caret under
that column. Formulas from rules/formulas.yaml are mutated the same way: `kb.expr.parse.parse` gives
an Expr or an ExprSyntaxError, and a parsed expression evaluated on random finite floats gives
a value or an EvalError.

The generators take any object with `choice`, `randint` and `random` (a `random.Random`, or
`Drawn` below, which draws from hypothesis so failures shrink). bench/fuzz.py runs the same
generators for 100,000+ queries.
"""

from __future__ import annotations

import json
import math
import re
import signal
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kb import ask, get_knowledge
from kb.expr import parse as ex
from kb.errors import EvalError, QueryError
from kb.query.parse import MAX_QUERY_CHARS

KN = get_knowledge()

# ---------------------------------------------------------------- randomness


class Source(Protocol):
    def choice(self, seq: Sequence[Any]) -> Any: ...
    def randint(self, a: int, b: int) -> int: ...
    def random(self) -> float: ...


class Drawn:
    """A Source that draws from hypothesis (`st.data()`), so a failing input shrinks."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def choice(self, seq: Sequence[Any]) -> Any:
        return self.data.draw(st.sampled_from(list(seq)))

    def randint(self, a: int, b: int) -> int:
        return self.data.draw(st.integers(a, b))

    def random(self) -> float:
        return self.data.draw(st.floats(0, 1, exclude_max=True))


def shuffled(r: Source, items: list[Any]) -> list[Any]:
    items = list(items)
    for i in range(len(items) - 1, 0, -1):
        j = r.randint(0, i)
        items[i], items[j] = items[j], items[i]
    return items


# ---------------------------------------------------------------- query vocabulary

def query_vocabulary(kn: Any) -> dict[str, tuple[str, ...]]:
    """Every phrase the query language knows, by kind, from the loaded rules."""
    q = kn.query

    def words(table: dict[str, list[str]]) -> tuple[str, ...]:
        return tuple(sorted({str(w) for ws in table.values() for w in ws}))

    def catalogue(items: dict[str, dict[str, Any]]) -> tuple[str, ...]:
        out: set[str] = set()
        for item_id, item in items.items():
            out.add(item_id)
            out.update(str(a) for a in item.get("aliases", []))
        return tuple(sorted(out))

    return {
        "task": words(q["tasks"]),
        "question": words(q["questions"]),
        "knob": words(q["knobs"]),
        "filler": tuple(sorted(str(w) for w in q["fillers"])),
        "model": catalogue(kn.models),
        "gpu": catalogue(kn.gpus),
        "precision": catalogue(kn.precisions),
        "runtime": catalogue(kn.runtimes),
        "family": tuple(sorted({str(m["family"]) for m in kn.models.values()})),
    }


VOCAB = query_vocabulary(KN)

UNIT_WORDS = ("users", "user", "concurrent users", "sessions", "streams", "concurrency",
              "requests", "context", "ctx", "context length", "seq", "seq_len", "seq-len",
              "sequence", "sequence length", "batch", "batch size", "bs", "micro-batch",
              "rank", "lora rank", "prompt", "output", "outputs", "gen")
# (in range, out of range or odd): the odd ones are drawn now and then
NUMBERS = (("1", "2", "4", "8", "16", "32", "64", "128", "512", "4096", "8k", "32k", "128k",
            "1.5", "2.5k", "65536"),
           ("0", "00", "007", "1000000", "1000001", "99999999999999999999", "3.", ".5", "1e5",
            "1m", "0.5k", "65537", "100000000"))
SIZES = (("7B", "13b", "70B", "405B", "1.5b", "1b", "3B", "8x7b"),
         ("0.5b", "0.001b", "100000B", "999999b", "8x22B", "2x1b", "0B"))
COUNTS = (("1x", "2x", "4 x", "8×", "16X"), ("0x", "4096x", "4097x"))
MEMORY = (("8GB", "24 gb", "80GiB", "20g", "1.5 GiB"), ("0GB", "0.5GB", "99999GB", "100000GB"))
TOKENS = (("20B tokens", "2048 tokens", "1 token"), ("1m tokens", "0 tokens", "99999999B tokens"))
VS = ("vs", "vs.", "versus", "compared to", "against")
SEPARATORS = (" ", " ", " ", "  ", ", ", "\t", " ; ", "? ")


def pick(r: Source, table: tuple[tuple[str, ...], tuple[str, ...]], odd: float = 0.15) -> str:
    return r.choice(table[1] if r.random() < odd else table[0])


def number(r: Source) -> str:
    if r.random() < 0.9:
        return pick(r, NUMBERS)
    return str(r.randint(0, 10**r.randint(1, 12)))


def quantity(r: Source) -> str:
    kind = r.randint(0, 6)
    if kind == 0:
        return f"{number(r)} {r.choice(UNIT_WORDS)}"
    if kind == 1:
        return f"{r.choice(UNIT_WORDS)} {number(r)}"
    if kind == 2:
        return pick(r, COUNTS)
    if kind == 3:
        return pick(r, MEMORY)
    if kind == 4:
        return pick(r, SIZES)
    if kind == 5:
        return pick(r, TOKENS)
    return r.choice(VS)


def vocab_query(r: Source, v: dict[str, tuple[str, ...]] = VOCAB) -> str:
    """A query in the shape people type, from the vocabulary (often valid, sometimes not)."""
    parts: list[str] = []
    if r.random() < 0.8:
        parts.append(r.choice(v["task"]))
    if r.random() < 0.15:
        parts.append(r.choice(v["question"]))
    kind = r.randint(0, 9)
    if kind < 5:
        parts.append(r.choice(v["model"]))
    elif kind < 8:
        parts.append(pick(r, SIZES))
    elif kind == 8:
        parts += [r.choice(v["family"]), pick(r, SIZES)]
    if r.random() < 0.6:
        parts.append(r.choice(v["precision"]))
    for _ in range(r.randint(0, 3)):
        parts.append(quantity(r))
    if r.random() < 0.6:
        if r.random() < 0.7:
            parts.append("on")
        for k in range(r.randint(1, 3)):
            if k:
                parts.append(r.choice(VS))
            if r.random() < 0.4:
                parts.append(pick(r, COUNTS))
            parts.append(r.choice(v["gpu"]) if r.random() < 0.85 else pick(r, MEMORY))
    if r.random() < 0.3:
        parts += [r.choice(("with", "using")), r.choice(v["runtime"])]
    if r.random() < 0.2:
        parts.append(r.choice(v["knob"]))
    if r.random() < 0.3:
        parts.insert(r.randint(0, len(parts)), r.choice(v["filler"]))
    if r.random() < 0.25:
        parts = shuffled(r, parts)
    text = ""
    for i, p in enumerate(parts):
        text += (r.choice(SEPARATORS) if i else "") + p
    if r.random() < 0.2:
        text += "?"
    if r.random() < 0.15:
        text = text.upper() if r.random() < 0.5 else text.title()
    return text


def soup_query(r: Source, v: dict[str, tuple[str, ...]] = VOCAB) -> str:
    """Any pieces of the vocabulary in any order."""
    kinds = list(v) + ["quantity", "number", "punct"]
    parts = []
    for _ in range(r.randint(0, 12)):
        kind = r.choice(kinds)
        if kind == "quantity":
            parts.append(quantity(r))
        elif kind == "number":
            parts.append(number(r))
        elif kind == "punct":
            parts.append(r.choice(("?", ",", ";", "!", ".", "-", "_", "+", "x", "×", "(", ")",
                                   "'", '"', "/", ":", "=", "#", "%", "&", "*", "\\")))
        else:
            parts.append(r.choice(v[kind]))
    return "".join(p + r.choice(SEPARATORS + ("",)) for p in parts)


# Unicode that has broken text tools before: bidi controls, RTL scripts, emoji (with ZWJ and
# flags), combining marks, NUL and C0/C1 controls, odd spaces and line breaks, full-width
# letters, characters whose case mapping changes length or lands on ASCII, digits of other
# scripts, lone surrogates, the last code point.
SPECIALS = ("\u202e", "\u202d", "\u2066", "\u200f", "\u200e", "\u061c", "שלום", "مرحبا",
            "😀", "👩\u200d💻", "🇺🇸", "e\u0301", "\u0301", "\u0300\u0301\u0302\u0303",
            "\x00", "\x01", "\x07", "\x1b[31m", "\x7f", "\x85", "\x9b", "\u2028", "\u2029",
            "\ufeff", "\u00a0", "\u3000", "\u200b", "\u2060", "ｓｅｒｖｅ", "７０Ｂ", "İ", "ı",
            "ß", "ﬁ", "\u212a", "\u017f", "Ⅻ", "²", "٣", "߀", "१६", "\ud800", "\udfff",
            "\U0010ffff", "\ufffd", "\t", "\n", "\r\n", "\r", "\x0b", "\x0c", "\u0000\u0000")
ASCII = "abcdefghijklmnopqrstuvwxyz0123456789 ?,;!.-_+x×()'\"/\\:=#%&*@$`~[]{}<>|^"


def mutate(r: Source, text: str, rounds: int | None = None) -> str:
    """Typos and worse: swaps, deletions, insertions, replacements, duplicated or cut text."""
    for _ in range(r.randint(1, 4) if rounds is None else rounds):
        n = len(text)
        op = r.randint(0, 8)
        i = r.randint(0, n) if n else 0
        if op == 0 and n >= 2:                       # swap two neighbours
            i = min(i, n - 2)
            text = text[:i] + text[i + 1] + text[i] + text[i + 2:]
        elif op == 1 and n:                          # delete one character
            i = min(i, n - 1)
            text = text[:i] + text[i + 1:]
        elif op == 2:                                # insert an ASCII character
            text = text[:i] + r.choice(ASCII) + text[i:]
        elif op == 3:                                # insert special unicode
            text = text[:i] + r.choice(SPECIALS) + text[i:]
        elif op == 4 and n:                          # replace one character
            i = min(i, n - 1)
            text = text[:i] + r.choice(ASCII + "".join(SPECIALS[:20])) + text[i + 1:]
        elif op == 5 and n:                          # duplicate a slice
            j = r.randint(i, n)
            text = text[:j] + text[i:j] + text[j:]
        elif op == 6:                                # cut the end or the start
            text = text[:i] if r.random() < 0.5 else text[i:]
        elif op == 7 and n:                          # change the case of a slice
            j = r.randint(i, n)
            text = text[:i] + text[i:j].swapcase() + text[j:]
        else:                                        # a word of the vocabulary, glued in
            word = r.choice(VOCAB[r.choice(list(VOCAB))])
            text = text[:i] + word + text[i:]
    return text


RANGES = ((0x00, 0x1F), (0x20, 0x7E), (0x20, 0x7E), (0x20, 0x7E), (0x7F, 0x9F), (0xA0, 0x24F),
          (0x300, 0x36F), (0x590, 0x6FF), (0x900, 0x97F), (0x2000, 0x206F), (0x3000, 0x30FF),
          (0x4E00, 0x4E80), (0xD800, 0xDFFF), (0xFE00, 0xFFFF), (0x1F300, 0x1FAFF),
          (0xE0000, 0xE007F), (0x10FFF0, 0x10FFFF))


def raw_text(r: Source, max_len: int = 60) -> str:
    out = []
    for _ in range(r.randint(0, max_len)):
        lo, hi = r.choice(RANGES)
        out.append(chr(r.randint(lo, hi)))
    return "".join(out)


DECODINGS = (("utf-8", "replace"), ("utf-8", "surrogateescape"), ("utf-8", "ignore"),
             ("latin-1", "strict"), ("cp1252", "replace"), ("utf-16-le", "replace"))


def raw_bytes_text(r: Source, max_len: int = 80) -> str:
    """Random bytes (sometimes around a valid query), decoded leniently."""
    data = bytes(r.randint(0, 255) for _ in range(r.randint(0, max_len)))
    if r.random() < 0.5:
        q = vocab_query(r).encode("utf-8")
        i = r.randint(0, len(q))
        data = q[:i] + data[: r.randint(0, 8)] + q[i:]
    encoding, errors = r.choice(DECODINGS)
    return data.decode(encoding, errors)


def long_text(r: Source) -> str:
    """Around and far over the length limit: a snippet repeated to 450..10,050 characters."""
    kind = r.randint(0, 2)
    if kind == 0:
        snippet = vocab_query(r) + " "
    elif kind == 1:
        snippet = raw_text(r, 20) or "x"
    else:
        snippet = r.choice(("a", "1", " ", "(", "?", "8x", "😀", "\u0301", "serve "))
    n = r.choice((450, 499, 500, 501, 1000, 10_000, 10_050)) if r.random() < 0.7 else r.randint(450, 10_050)
    return (snippet * (n // len(snippet) + 1))[:n]


QUERY_GENERATORS: dict[str, Callable[[Source], str]] = {
    "vocabulary": vocab_query,
    "mutated": lambda r: mutate(r, vocab_query(r)),
    "soup": soup_query,
    "raw text": raw_text,
    "raw bytes": raw_bytes_text,
    "long": long_text,
}
# share of the bench run given to each generator
QUERY_MIX = {"vocabulary": 30, "mutated": 35, "soup": 12, "raw text": 9, "raw bytes": 9, "long": 5}


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


# ---------------------------------------------------------------- bugs the fuzzing found

def test_column_after_a_line_break_points_at_the_bad_word() -> None:
    q = "serve 70B\nfoo"
    with pytest.raises(QueryError) as info:
        ask(q)
    assert info.value.column == q.index("foo") + 1


@pytest.mark.parametrize("fn", ["ceil", "floor", "round"])
def test_eval_rounding_infinity_is_an_eval_error(fn: str) -> None:
    with pytest.raises(EvalError):
        ex.parse(f"{fn}(a * b)")({"a": 1e200, "b": 1e200})


@pytest.mark.parametrize("fn", ["ceil", "floor", "round"])
def test_eval_rounding_nan_is_an_eval_error(fn: str) -> None:
    with pytest.raises(EvalError):
        ex.parse(f"{fn}(a * a - a * a)")({"a": 1e200})


@pytest.mark.parametrize("text, scope", [("round(1, a * a)", {"a": 1e200}),
                                         ("round(1, 'x')", {})])
def test_eval_round_digits_is_checked(text: str, scope: dict[str, float]) -> None:
    with pytest.raises(EvalError):
        ex.parse(text)(scope)


def _gpu_aliases(with_memory_size: bool) -> list[tuple[str, str]]:
    out = []
    for gpu_id, gpu in KN.gpus.items():
        for alias in [gpu_id, *gpu.get("aliases", [])]:
            if bool(re.search(r"\d\s*(gb|gib|g)\b", alias, re.I)) == with_memory_size:
                out.append((alias, gpu_id))
    return out


def test_every_id_and_alias_reads_as_its_item() -> None:
    """Model, precision and runtime ids and aliases, and GPU ones without a memory size."""
    from kb.query.parse import parse

    wrong = []
    for alias, gpu_id in _gpu_aliases(with_memory_size=False):
        w = parse(f"serve 7B on {alias}", KN)
        if [(g.gpu_id, g.count, g.capacity_gb) for g in w.gpus] != [(gpu_id, 1, None)]:
            wrong.append((alias, gpu_id))
    for attr, items, template in (("model_id", KN.models, "serve {}"),
                                  ("precision", KN.precisions, "serve 7B {}"),
                                  ("runtime", KN.runtimes, "serve 7B with {}")):
        for item_id, item in items.items():
            for alias in [item_id, *item.get("aliases", [])]:
                if attr == "runtime" and item["kind"] == "training":
                    template = "lora 7B with {}"     # a training runtime needs a training task
                w = parse(template.format(alias), KN)
                if getattr(w, attr) != item_id:
                    wrong.append((alias, item_id))
    assert wrong == []


def test_gpu_aliases_with_a_memory_size_read_as_their_gpu() -> None:
    from kb.query.parse import parse

    aliases = _gpu_aliases(with_memory_size=True)
    assert len(aliases) >= 30
    wrong = []
    for alias, gpu_id in aliases:
        try:
            w = parse(f"serve 7B on {alias}", KN)
            got: object = [(g.gpu_id, g.count, g.capacity_gb) for g in w.gpus]
        except QueryError as err:
            got = err.message
        if got != [(gpu_id, 1, None)]:
            wrong.append((alias, gpu_id, got))
    assert wrong == []


def test_runtime_of_the_wrong_kind_is_shown_in_the_query() -> None:
    q = "train 7B with vllm"
    with pytest.raises(QueryError) as info:
        ask(q)
    assert info.value.query == q
    assert info.value.column == q.index("vllm") + 1


def test_size_that_contradicts_the_model_is_shown_in_the_query() -> None:
    q = "serve llama-3.1-8b 70B"
    with pytest.raises(QueryError) as info:
        ask(q)
    assert info.value.query == q
    assert q[info.value.column - 1:].startswith(("llama-3.1-8b", "70B"))


def test_the_error_for_a_control_character_does_not_carry_it() -> None:
    q = "serve 70B \x1b[2J\x1b[31mpwned"
    with pytest.raises(QueryError) as info:
        ask(q)
    assert info.value.column == q.index("\x1b") + 1
    assert not any(ord(c) < 32 and c != "\n" for c in info.value.render())


def test_generators_cover_what_they_promise() -> None:
    """The generators do produce both outcomes, and the awkward characters."""
    import random

    r = random.Random(1)
    kinds = {check_query(QUERY_GENERATORS[name](r)) for name in QUERY_GENERATORS for _ in range(40)}
    assert {"answer", "QueryError"} <= kinds
    assert "\x00" in SPECIALS and "\u202e" in SPECIALS and "😀" in SPECIALS
    assert len(long_text(random.Random(3))) >= 450
    exprs = {check_expr(EXPR_GENERATORS[name](r), lambda: finite_float(r)).split(":")[0]
             for name in EXPR_GENERATORS for _ in range(300)}
    assert {"ExprSyntaxError", "value", "EvalError"} <= exprs
