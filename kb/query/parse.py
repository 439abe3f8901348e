"""Query text → Workload.

In: what a person typed ("serve llama-3.1-70b awq 32 users 8k context on 2x L40S").
Out: a Workload, or a QueryError with the column of the bad token, what was expected and the
nearest valid word. grammar/query.lark is the query language: its item terminals cut the text
(one pattern, in lark's order: _Lexer); kb.query.classify classifies the items by the vocabulary
of the rules (tasks, questions, units, phrases, situations from query.yaml; GPU, model,
precision and runtime ids and aliases) into the grammar's phrase terminals, longest phrase
first; lark's LALR parser (its tables generated into kb.query._query_parser, run by
kb.query.lalr) groups them into the grammar's phrases, and kb.query.resolve reads each phrase
into the Workload.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from kb.hints import TYPE_CHECKING

from kb.query import lalr
from kb.errors import HubModelNamed, QueryError
from kb.knowledge.data import Knowledge
from kb.query.resolve import Resolver
from kb.query.tokens import Tok
from kb.query.words import Vocab, vocabulary  # noqa: F401  (kept importable from here)
from kb.recordtype import replace
from kb.query.workload import Workload

if TYPE_CHECKING:
    from typing import Any
    from lark.lexer import TerminalDef

MAX_QUERY_CHARS = 500

_parser: Any = None
_errors: Any = None    # the module whose Unexpected* exceptions the parser raises


def _get_parser() -> Any:
    """The LALR parser of grammar/query.lark, making (rule, terminals) phrases as it reduces (_Phrases): kb.query.lalr
    running the tables kb.query.parsergen generated, when they were made from this very grammar (no
    lark import), else lark itself. Its lexer (_Lexer) is made along with it."""
    global _parser, _errors, _lexer
    if _parser is None:
        import os

        from kb.paths import grammar_root

        path = os.path.join(grammar_root(), "query.lark")
        try:
            from kb.query import _query_parser as tables
            with open(path, encoding="utf-8") as f:
                current = tables.GRAMMAR == f.read()
        except (ImportError, AttributeError, OSError, ValueError):
            current = False
        if current:
            _parser = lalr.Parser(tables.STATES, tables.RULES, tables.START_STATE, tables.END_STATE, _Phrases())
            _errors = lalr
            _lexer = _Lexer(re.compile(tables.PATTERN, tables.FLAGS), frozenset(tables.IGNORE), tables.FOLDED)
        else:
            import lark
            from lark import exceptions

            _parser = lark.Lark.open(str(path), parser="lalr", maybe_placeholders=False,
                                     transformer=_Phrases())
            _errors = exceptions
            _lexer = _Lexer.of(_parser)
    return _parser


# grammar/query.lark's phrase rules (kb.query.resolve reads each with its on_<rule> method)
RULES = ("gpu", "cards", "comparison", "capacity", "count", "quantity", "unit", "number", "cost", "money", "model", "family",
         "size", "task", "question", "knob", "precision", "runtime", "setting", "situation", "ttft",
         "join", "unknown")


class _Phrases:
    """What the parser makes of each rule as it reduces it (lark's transformer hook): a phrase
    as (rule, its terminals); `start` gives the phrases in order."""

    def start(self, phrases: list[object]) -> list[object]:
        return phrases


for _rule in RULES:
    setattr(_Phrases, _rule, lambda self, children, _name=_rule: (_name, children))


_DIGITS = r"\d+"             # compiled when a count or a memory size is first read (re caches them)
_DECIMAL = r"[\d.]+"

# terminal → the Tok of an item
_SINGLE: dict[str, Callable[[str, int], Tok]] = {
    "WORD": lambda t, col: Tok("word", t, col),
    "DIGIT_WORD": lambda t, col: Tok("word", t, col),
    "NUMBER": lambda t, col: Tok("num", t, col, t),
    "SIZE": lambda t, col: Tok("size", t, col, float(t[:-1]), "billion"),
    "MOE_SIZE": lambda t, col: Tok("moe", t, col),
    "COUNT": lambda t, col: Tok("count", t, col, int(re.match(_DIGITS, t).group())),  # type: ignore[union-attr]
    "MEMORY": lambda t, col: Tok("mem", t, col, float(re.match(_DECIMAL, t).group())),  # type: ignore[union-attr]
    "MONEY": lambda t, col: Tok("money", t, col),
    "VS": lambda t, col: Tok("vs", t, col),
}


def _sep(text: str, col: int) -> Tok:
    return Tok("sep", text, col)          # _SEP, _FLAG: the grammar drops them


# The text a folded pattern (kb.query.parsergen) reads: ASCII letters in lowercase, and the four
# characters that `re`, ignoring case, matches to an ASCII letter (İ ı → i, ſ → s, Kelvin K → k),
# one character for one, so columns hold. A pattern compiled without ignoring case costs half
# as much to compile (tests/test_query.py checks the four against `re`, and the cut against lark's).
FOLD = str.maketrans({**{chr(c): chr(c + 32) for c in range(ord("A"), ord("Z") + 1)},
                      "\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})


class _Lexer:
    """Cuts a query into the grammar's terminals exactly as lark's lexer does, for lark's LALR
    parser to read. lark's basic lexer tries the terminals in one order (priority, then the
    longest pattern) at each position and skips the ignored ones (WS); this does the same with
    one regular expression of those terminals in that order, one match per item, and makes each
    item's Tok as it goes, instead of lark's per-token bookkeeping (line counter, one lexer per
    parser state, its Token objects). `folded`: the pattern reads the query folded by FOLD.
    tests/test_query.py checks both cut every query alike."""

    def __init__(self, pattern: re.Pattern[str], ignore: frozenset[str], folded: bool = False) -> None:
        self.pattern = pattern
        self.ignore = ignore
        self.folded = folded

    @staticmethod
    def order(parser: Any) -> list[TerminalDef] | None:
        """A lark LALR parser's terminals in the order its basic lexer tries them (the first that
        matches is taken); None where lark would not match them one pattern at a time (a literal
        string terminal, the `regex` module, bytes)."""
        terminals = list(parser.terminals)
        if parser.lexer_conf.use_bytes or getattr(parser.options, "regex", False) or any(
                t.pattern.type != "re" for t in terminals):
            return None
        return sorted(terminals, key=lambda t: (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name))

    @classmethod
    def of(cls, parser: Any) -> _Lexer | None:
        """The lexer of a lark LALR parser's terminals (None as `order` says)."""
        terminals = cls.order(parser)
        if terminals is None:
            return None
        pattern = "|".join(f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in terminals)
        return cls(re.compile(pattern, parser.lexer_conf.g_regex_flags), frozenset(parser.lexer_conf.ignore))

    def items(self, query: str) -> list[Tok]:
        """The query's items as Toks, each marked with its terminal for the parser; a
        QueryError at the first character no terminal matches."""
        match, ignore, make = self.pattern.match, self.ignore, _SINGLE.get
        text = query.translate(FOLD) if self.folded else query
        pos, end, out = 0, len(query), []
        while pos < end:
            m = match(text, pos)
            if m is None:
                raise QueryError(query, pos + 1, f"the character {query[pos]!r} has no meaning here",
                                 expected=["words", "numbers", "?"])
            name = m.lastgroup
            start, pos = m.span()
            if name in ignore:
                continue
            tok = make(name, _sep)(query[start:pos], start + 1)     # type: ignore[arg-type]
            tok.type = name                                  # type: ignore[assignment]
            out.append(tok)
        return out


_lexer: _Lexer | None = None


def _lex(query: str) -> list[Tok]:
    """The query's items as Toks; a QueryError where no item of the grammar starts."""
    parser = _get_parser()
    if _lexer is not None:
        return _lexer.items(query)
    try:                                    # lark's own lexer
        return [_SINGLE[t.type](str(t), t.column or 1) for t in parser.lex(query)
                if t.type not in parser.lexer_conf.ignore]
    except _errors.UnexpectedCharacters as exc:
        ch = query[exc.pos_in_stream]
        raise QueryError(query, exc.column, f"the character {ch!r} has no meaning here",
                         expected=["words", "numbers", "?"]) from None


def _phrases(query: str) -> Any:
    """The grammar's parser over the phrase terminals kb.query.classify made of a query."""
    def parse_phrases(toks: list[Tok]) -> list[tuple[str, list[Tok]]]:
        parser = _get_parser()
        try:
            if _errors is lalr:
                return parser.parse(toks)               # type: ignore[no-any-return]
            interactive = parser.parse_interactive()
            for tok in toks:
                interactive.feed_token(tok)
            return interactive.feed_eof()               # type: ignore[no-any-return]
        except _errors.UnexpectedInput as exc:     # every terminal alone is a phrase
            column = getattr(exc, "column", None)
            raise QueryError(query, column if isinstance(column, int) else 1,
                             "the query cannot be read") from None
    return parse_phrases


# ---------------------------------------------------------------- resolving

_SPACES = {ord(c): " " for c in "\t\n\r\v\f"}


def _unprintable(ch: str) -> bool:
    """Control characters (C0, DEL, C1) and the bidirectional overrides that can disguise text."""
    o = ord(ch)
    return o < 32 or 0x7F <= o <= 0x9F or 0x202A <= o <= 0x202E or 0x2066 <= o <= 0x2069


def _printable(text: str) -> str:
    return "".join("?" if _unprintable(ch) else ch for ch in text)


# _unprintable as a pattern, compiled when a query is not printable ASCII (re caches it): a printable
# ASCII query, nearly every one, holds none of these, and a cold start does not compile it
_UNPRINTABLE = r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"


def parse(query: str, kn: Knowledge, model_given: bool = False) -> Workload:
    """Read a query into a Workload. Raises QueryError."""
    if not isinstance(query, str):
        raise QueryError(str(query), 1, "the query must be text")
    query = query.translate(_SPACES)     # a query is one line (same length: columns hold)
    if len(query) > MAX_QUERY_CHARS:
        raise QueryError(_printable(query[:80]) + "…", 1, f"the query is longer than {MAX_QUERY_CHARS} characters")
    bad = None if query.isascii() and query.isprintable() else re.search(_UNPRINTABLE, query)
    if bad is not None:
        raise QueryError(_printable(query), bad.start() + 1, "control characters are not allowed")
    if not query.strip():
        raise QueryError(query, 1, "the query is empty",
                         expected=["a task (serve, infer, train, lora, qlora)", "a model or size"])
    toks = _lex(query)
    _names_bounded(query, toks)
    try:
        return Resolver(query, toks, kn, _phrases(query), model_given).run()
    except QueryError as err:
        raise _checked_suggestion(err, kn, model_given) from None


def _names_bounded(query: str, toks: list[Tok]) -> None:
    """A word longer than any name (kb.paths.MAX_NAME_CHARS) is refused as such, before it is
    looked up or compared with every known word."""
    from kb.paths import MAX_NAME_CHARS

    for tok in toks:
        if tok.kind == "word" and len(tok.text) > MAX_NAME_CHARS:
            raise QueryError(query, tok.col, f"a word of {len(tok.text)} characters; a name has at "
                             f"most {MAX_NAME_CHARS}", width=len(tok.text))


def _checked_suggestion(err: QueryError, kn: Knowledge, model_given: bool) -> QueryError:
    """The error, keeping its suggestion only when the query with the suggestion in place of
    the marked text can itself be read (a suggestion is always a real query)."""
    if not err.suggestion:
        return err
    start = err.column - 1
    fixed = err.query[:start] + err.suggestion + err.query[start + max(1, err.width):]
    try:
        if len(fixed) <= MAX_QUERY_CHARS:
            Resolver(fixed, _lex(fixed), kn, _phrases(fixed), model_given).run()
            return err
    except HubModelNamed:
        return err                      # read once its model's config is (kb.query.hub)
    except QueryError:
        pass
    return replace(err, suggestion=None)
