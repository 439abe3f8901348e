"""Generate kb/_query_parser.py: the LALR tables lark computes for grammar/query.lark.

    python -m kb.query.parsergen          # after editing grammar/query.lark

The generated module holds data only: the grammar's text, the one pattern of its terminals
in lark's lexer order (kb.query.parse._Lexer), and lark's LALR(1) parse table with what each rule's
reduction keeps. kb.query.lalr runs the table, so a plain query imports neither lark nor a copy of
its runtime. kb.query.parse uses the module only while its grammar text is the one on disk, and
lark itself otherwise, so a stale module is never used; tests/test_snapshot.py checks it is
current and tests/test_query.py that both read every query alike.

The tables stand for lark's tree builder only on the grammars kb.query.lalr follows: no aliases,
no `?rule` and no kept punctuation; anything else is refused here.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb.query.lalr import DROP, KEEP, REDUCE, SHIFT, SPLICE
from kb.paths import grammar_dir

if TYPE_CHECKING:
    from lark.lexer import TerminalDef

OUT = Path(__file__).resolve().parent / "_query_parser.py"


def grammar_text() -> str:
    return (grammar_dir() / "query.lark").read_text(encoding="utf-8")


def tables() -> dict[str, Any]:
    """The generated module's values, from lark's LALR parser of grammar/query.lark."""
    import lark
    from lark.parsers.lalr_analysis import Shift

    from kb.query.parse import _Lexer

    parser = lark.Lark(grammar_text(), parser="lalr", maybe_placeholders=False)
    lexer = _Lexer.of(parser)
    terminals = _Lexer.order(parser)
    if lexer is None or terminals is None or parser.options.keep_all_tokens:
        raise SystemExit("grammar/query.lark: kb.query.parse's one-pattern lexer cannot cut its terminals")
    index: dict[Any, int] = {}
    rules: list[tuple[str, tuple[int, ...]]] = []
    for rule in parser.rules:
        o = rule.options
        if rule.alias or o.expand1 or o.keep_all_tokens or o.empty_indices:
            raise SystemExit(f"grammar/query.lark: rule {rule} needs lark's tree builder "
                             "(an alias, ?rule or kept tokens): kb.query.lalr does not follow it")
        index[rule] = len(rules)
        rules.append((str(rule.origin.name), tuple(
            (DROP if getattr(s, "filter_out", False) else KEEP) if s.is_term else (SPLICE if s.name.startswith("_") else KEEP)
            for s in rule.expansion)))
    table = parser.parser.parser.parser.parse_table
    (start,) = parser.options.start
    # lark numbers its states in no fixed order: number them as met from the start state,
    # each state's shifts in the order of their symbols, so the same grammar gives the same file
    order = [table.start_states[start]]
    number = {order[0]: 0}
    for state in order:                     # grows as it goes
        for _, (action, arg) in sorted(table.states[state].items()):
            if action is Shift and arg not in number:
                number[arg] = len(order)
                order.append(arg)
    states = {number[state]: {str(symbol): (SHIFT, number[arg]) if action is Shift else (REDUCE, index[arg])
                              for symbol, (action, arg) in sorted(table.states[state].items())}
              for state in number}
    folded = folded_pattern(terminals)
    return {"GRAMMAR": grammar_text(), "PATTERN": lexer.pattern.pattern if folded is None else folded,
            "FLAGS": lexer.pattern.flags, "FOLDED": folded is not None,
            "IGNORE": tuple(sorted(lexer.ignore)), "START_STATE": 0,
            "END_STATE": number[table.end_states[start]], "RULES": tuple(rules), "STATES": states}


# what in a terminal's regular expression is no literal character: an escape (\d, \x0c, \u00d7,
# \N{…}, \-) and a group's name
_NOT_LITERAL = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|N\{[^}]*\}|.)|\(\?P(?:<\w+>|=\w+\))",
                          re.DOTALL)
_RANGE = re.compile(r"(.)-([^\]])", re.DOTALL)


def _foldable(value: str, caseless: bool) -> bool:
    """Whether a terminal's regular expression reads a query folded by kb.query.parse.FOLD (ASCII
    letters in lowercase; İ ı ſ and the Kelvin sign as the letters `re` matches them to) as the
    terminal reads the query itself: a case-insensitive terminal (`caseless`) writes its letters
    in lowercase, sets no flag inside and has no other cased character; any other terminal reads
    no letter. A range (`a-z`) spanning a letter is taken only as `a-z` or within it, in a
    case-insensitive terminal. Conservative: a `-` outside a class counts as a range."""
    rest = _NOT_LITERAL.sub("", value)
    if "(?" in rest.replace("(?:", "").replace("(?=", "").replace("(?!", "").replace("(?<", ""):
        return False                        # an inline flag
    for lo, hi in _RANGE.findall(rest):
        spans = [c for c in map(chr, range(ord(lo), ord(hi) + 1)) if c.isascii() and c.isalpha()]
        if spans and not (caseless and "a" <= lo and hi <= "z"):
            return False
    return all(not ch.isalpha() or (caseless and "a" <= ch <= "z")
               if ch.isascii() else ch.lower() == ch == ch.upper() for ch in rest)


def folded_pattern(terminals: list[TerminalDef]) -> str | None:
    """The terminals' one pattern (in lark's order, as kb.query.parse._Lexer.of makes it) for the
    query folded by kb.query.parse.FOLD: each case-insensitive terminal without its `(?i:…)`, which
    halves the pattern's compile at every start; None when a terminal does not read folded text
    alike (`_foldable`), or sets another flag."""
    parts = []
    for t in terminals:
        flags = set(t.pattern.flags)
        if flags - {"i"} or not _foldable(t.pattern.value, "i" in flags):
            return None
        parts.append(f"(?P<{t.name}>(?:{t.pattern.value}))" if flags else f"(?P<{t.name}>{t.pattern.to_regexp()})")
    return "|".join(parts)


def _literal(value: Any) -> str:
    """A value as Python source: a table one entry a line (a state's actions, a rule), the rest
    on one line, so the generated module stays short to read and diff."""
    if isinstance(value, dict):
        return "{\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in value.items()) + "}"
    if isinstance(value, tuple) and len(value) > 1 and all(isinstance(v, tuple) for v in value):
        return "(\n" + "".join(f"    {v!r},\n" for v in value) + ")"
    return repr(value)


def main() -> int:
    values = tables()
    body = "".join(f"{name} = {_literal(value)}\n\n" for name, value in values.items())
    OUT.write_text('"""Generated by `python -m kb.query.parsergen` from grammar/query.lark; do not edit.\n\n'
                   "lark's LALR(1) tables for the query grammar, run by kb.query.lalr (SHIFT 0, REDUCE 1;\n"
                   'a rule keeps 0, drops 1 or splices 2 each child), and its terminals as one pattern."""\n'
                   "# flake8: noqa\n\n" + body.rstrip("\n") + "\n", encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
