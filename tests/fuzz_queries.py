"""The fuzzing's query generators (tests/test_fuzz.py, bench/fuzz.py): queries built from the
rules' own vocabulary (task words, model, GPU, precision and runtime ids and aliases, fillers,
numbers with units), mutated (swaps, deletions, insertions, unicode: RTL marks, emoji, combining
marks, NUL and other control characters), plus raw text, bytes decoded leniently and very long
input. A generator takes any object with `choice`, `randint` and `random` (a `random.Random`, or
`Drawn`, which draws from hypothesis so failures shrink)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from hypothesis import strategies as st

from kb import get_knowledge

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
