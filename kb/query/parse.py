"""Query text → Workload.

In: what a person typed ("serve llama-3.1-70b awq 32 users 8k context on 2x L40S").
Out: a Workload, or a QueryError with the column of the bad token, what was expected and the
nearest valid word. grammar/query.lark is the query language, run by lark's code: the module
lark's standalone tool generates from it, kb.query.standalone_parser (`python -m
lark.tools.standalone -l basic grammar/query.lark -o kb/query/standalone_parser.py` writes it
again; tests/test_grammar.py checks that it holds the grammar's tables). lark's lexer cuts the
text into the grammar's item terminals; kb.query.classify classifies the items by the vocabulary
of the rules (tasks, questions, units, phrases, situations from query.yaml; GPU, model,
precision and runtime ids and aliases) into the grammar's phrase terminals, longest phrase
first; lark's LALR parser, fed those terminals, groups them into the grammar's phrases
(_Phrases), and kb.query.resolve reads each phrase into the Workload.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from kb.errors import HubModelNamed, QueryError
from kb.knowledge.data import Knowledge
from kb.query.resolve import Resolver
from kb.query.tokens import Tok
from kb.query.words import Vocab, vocabulary  # noqa: F401  (kept importable from here)
from kb.query.workload import Workload

if TYPE_CHECKING:
    from kb.query import standalone_parser

MAX_QUERY_CHARS = 500

_parser: standalone_parser.Lark | None = None
_parser_lock = threading.Lock()


def parser() -> standalone_parser.Lark:
    """lark's LALR parser of grammar/query.lark, making (rule, terminals) phrases as it reduces
    (_Phrases), built once per process. Threads that ask at once (a server worker's first
    questions) wait for the one build under a lock and get the finished parser: it is
    published only once whole. The server builds it before its workers accept."""
    global _parser
    made = _parser
    if made is None:
        with _parser_lock:
            made = _parser
            if made is None:
                made = _parser = _build()
    return made


def _build() -> standalone_parser.Lark:
    """The parser, read from the tables lark's standalone tool wrote into
    kb.query.standalone_parser (no grammar analysis at run time, and no cache file)."""
    from kb.query.standalone_parser import Lark_StandAlone

    made: standalone_parser.Lark = Lark_StandAlone(transformer=_Phrases())  # type: ignore[no-untyped-call]
    return made


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

# item terminal → the Tok of an item
_ITEM: dict[str, Callable[[str, int], Tok]] = {
    "WORD": lambda t, col: Tok("word", t, col),
    "DIGIT_WORD": lambda t, col: Tok("word", t, col),
    "NUMBER_PAIR": lambda t, col: Tok("word", "".join(t.split()), col),   # '2k / 500' reads as '2k/500'
    "NUMBER": lambda t, col: Tok("num", t, col, t),
    "SIZE": lambda t, col: Tok("size", t, col, float(t[:-1]), "billion"),
    "MOE_SIZE": lambda t, col: Tok("moe", t, col),
    "COUNT": lambda t, col: Tok("count", t, col, int(re.match(_DIGITS, t).group())),  # type: ignore[union-attr]
    "MEMORY": lambda t, col: Tok("mem", t, col, float(re.match(_DECIMAL, t).group())),  # type: ignore[union-attr]
    "MONEY": lambda t, col: Tok("money", t, col),
    "VS": lambda t, col: Tok("vs", t, col),
    # '-ot ".ffn_.*_exps.=CPU"': a word whose key is the tensors' kind and the device (exps=cpu)
    "TENSOR_OVERRIDE": lambda t, col: Tok("word", t, col, "exps=" + t.rsplit("=", 1)[1].lower()),
}


def _lex(query: str) -> list[Tok]:
    """The query's items as Toks (lark's lexer; the ignored terminals, spaces, punctuation and
    a flag's dashes, skipped), each marked with its terminal; a QueryError at the first
    character where no item of the grammar starts. A query is one line, so lark's column is
    the item's column in the query."""
    from kb.query.standalone_parser import UnexpectedCharacters

    out = []
    try:
        for t in parser().lex(query):
            tok = _ITEM[t.type](str(t), t.column or 1)
            tok.type = t.type
            out.append(tok)
    except UnexpectedCharacters as exc:
        raise QueryError(query, exc.column, f"the character {query[exc.column - 1]!r} has no meaning here",
                         expected=["words", "numbers", "?"]) from None
    return out


def _phrases(query: str) -> Callable[[list[Tok]], list[tuple[str, list[Tok]]]]:
    """The grammar's parser over the phrase terminals kb.query.classify made of a query."""
    def parse_phrases(toks: list[Tok]) -> list[tuple[str, list[Tok]]]:
        from kb.query.standalone_parser import UnexpectedInput

        try:
            interactive = parser().parse_interactive()
            for tok in toks:                  # lark's parser reads a token's .type (a Tok's terminal)
                interactive.feed_token(tok)           # type: ignore[arg-type]
            phrases: list[tuple[str, list[Tok]]] = interactive.feed_eof()  # type: ignore[no-untyped-call]
            return phrases
        except UnexpectedInput as exc:       # every terminal alone is a phrase
            column = getattr(getattr(exc, "token", None), "col", None)
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


# a number joined to a length or count word by a dash ('2000-token prompts', '500-user'): the dash
# is a space (a compound adjective); a model name's dashes ('llama-3.1-8b') have no digit before them
_NUMBER_DASH_UNIT = r"(?<![\w.\-])(\d[\d.,]*[km]?)-(?=(?:tokens?|tok|users?)\b)"


def parse(query: str, kn: Knowledge, model_given: bool = False) -> Workload:
    """Read a query into a Workload. Raises QueryError."""
    if not isinstance(query, str):
        raise QueryError(str(query), 1, "the query must be text")
    query = query.translate(_SPACES)     # a query is one line (same length: columns hold)
    query = re.sub(_NUMBER_DASH_UNIT, r"\1 ", query, flags=re.I)   # '2000-token inputs': '2000 token inputs' (same length)
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
        return Resolver(query, toks, kn, _phrases(query), model_given,
                        lambda other: parse(other, kn, model_given)).run()
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
            Resolver(fixed, _lex(fixed), kn, _phrases(fixed), model_given,
                     lambda other: parse(other, kn, model_given)).run()
            return err
    except HubModelNamed:
        return err                      # read once its model's config is (kb.query.hub)
    except QueryError:
        pass
    return replace(err, suggestion=None)
