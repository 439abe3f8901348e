"""Answering from the command line: `kbq "QUERY"`, `kbq --batch FILE` and `kbq ask`.

In: the query options, declared once in QUERY_OPTIONS (kb.cli.declared's Opt), made click
options by kb.cli.clicked for the click commands `query` (the kbq group's default command,
`kbq "QUERY"`) and `ask`.
Out: `run(QueryArgs)` → an answer on stdout (text, Markdown or JSON) or JSON Lines for a batch,
errors on stderr as `Error: …`; exit 0 on an answer, 2 on a query or rule error.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import click

from kb.cli.clicked import options
from kb.cli.declared import RULES, Opt, fail
from kb.version import __version__

SORTS = ("value", "cost", "speed", "memory", "power")


def _jobs(flag: str, text: str) -> int:
    t = text.strip()
    if not (t.isascii() and t.isdigit()) or not t.strip("0"):
        raise ValueError(f"{flag} needs a number of processes, e.g. {flag} 2")
    return min(int(t[:9]) if len(t) <= 9 else MAX_JOBS, MAX_JOBS)


QUERY_OPTIONS = (
    Opt("--json", "fmt", "json", help="print the Answer as JSON"),
    Opt("--markdown", "fmt", "markdown", help="print a Markdown version for a wiki"),
    Opt("--quote", "fmt", "quote",
        help="print a one-page quote in Markdown: the recommended configuration with\n"
             "buy and rent prices and their dates, two alternatives, assumptions, sources"),
    Opt("--all", "limit", 0, help="list every GPU judged (text shows the first 5, Markdown 12)"),
    Opt("--explain", "explain", True,
        help="add the trace, the sources' flowcharts, where they agree or disagree, every\n"
             "assumption and the memory breakdown to the text answer"),
    Opt("--trace", "explain", True, help="the same as --explain"),
    Opt("--no-trace", "trace", False, help="with --explain, leave the trace out"),
    RULES,
    Opt("--batch", "batch", metavar="FILE", batch_only=True,
        help="answer one query per line of FILE ('-' for stdin) as JSON Lines, with\n"
             "--model-config, --prices, --sort and --options as given"),
    Opt("--jobs", "jobs", metavar="N", batch_only=True, kind=_jobs,
        help="worker processes for --batch (default: one per core)"),
    Opt("--model-config", "config", metavar="PATH",
        help="a Hugging Face config.json for a model not in the rules"),
    Opt("--prices", "prices", metavar="FILE",
        help="use the prices in FILE (the rules/prices.yaml schema) instead of the shipped ones"),
    Opt("--sort", "sort", metavar="NAME", choices=SORTS,
        help="order the GPU configurations: value (default), cost, speed, memory or power"),
    Opt("--options", "options", True, help="list what to change so it fits (other precisions, context, GPUs…)"),
)
_ASK_OPTIONS = tuple(o for o in QUERY_OPTIONS if not o.batch_only)


@dataclass(slots=True)
class QueryArgs:
    fmt: str = "text"                   # text, markdown, json or quote
    limit: int | None = None            # 0 (--all): every GPU row; None: text 5, Markdown 12
    explain: bool = False               # the trace and the sources behind the plain answer
    trace: bool = True
    rules: str | None = None
    batch: str | None = None
    jobs: int | None = None
    config: str | None = None
    prices: str | None = None
    sort: str | None = None
    options: bool = False
    words: list[str] = field(default_factory=list)


HELP = """Answer a GPU sizing question for LLM training or inference, with the trace of every number.

\b
kbq "serve 70B int4 16 users"
kbq "train 13B qlora on 20GB?"
kbq --json "infer 7B fp16 on rtx 4000 ada vs rtx 6000 ada"
"""
HELP_SETTINGS = {"help_option_names": ["-h", "--help"]}


class _QueryContext(click.Context):
    """The default command is named by no word of the command line: its path is the group's."""

    @property
    def command_path(self) -> str:
        return self.parent.command_path if self.parent is not None else "kbq"


class QueryCommand(click.Command):
    """The default command of the kbq group: its usage is the plain `kbq "QUERY"`, and its help
    lists the other commands after its options."""

    context_class = _QueryContext

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write('Usage: kbq [OPTIONS] "QUERY"\n       kbq COMMAND [ARGS]...\n')

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from kb.cli.subcommands import SUBCOMMANDS

        with formatter.section("Commands"):
            formatter.write_dl([(name, summary) for name, (_, summary) in SUBCOMMANDS.items()])
        formatter.write_paragraph()
        formatter.write_text("kbq COMMAND --help lists a command's options.")


def _args(values: dict[str, Any], words: tuple[str, ...]) -> QueryArgs:
    """The options click read (an option not given is None: QueryArgs' default) and the words."""
    return QueryArgs(**{k: v for k, v in values.items() if v is not None}, words=list(words))


@click.command("query", cls=QueryCommand, help=HELP, hidden=True, context_settings=HELP_SETTINGS)
@options(*QUERY_OPTIONS)
@click.argument("words", nargs=-1, metavar='"QUERY"')
@click.version_option(__version__, prog_name="kbq", message="%(prog)s %(version)s")
@click.pass_context
def query(ctx: click.Context, /, words: tuple[str, ...], **values: Any) -> int:
    return run(_args(values, words), ctx.get_help)


@click.command("ask", help='Answer QUERY, as kbq "QUERY" does, with the same options (but --batch and --jobs).',
               context_settings=HELP_SETTINGS)
@options(*_ASK_OPTIONS)
@click.argument("words", nargs=-1, metavar='"QUERY"')
@click.pass_context
def ask(ctx: click.Context, /, words: tuple[str, ...], **values: Any) -> int:
    args = _args(values, words)
    if not " ".join(args.words).strip():
        return fail("missing QUERY, e.g. kbq ask \"serve 70B int4 16 users\"")
    return run(args, ctx.get_help)


def run(args: QueryArgs, usage: Callable[[], str]) -> int:
    """`usage` gives the command's help, printed for an empty query (made only then: click's help
    text takes a few milliseconds a cold start need not spend)."""
    if args.batch is not None:
        return _batch(args.batch, args.rules, args.jobs,
                      Settings(args.config, args.prices, args.sort, args.options))
    query = " ".join(args.words).strip()
    if not query:
        sys.stdout.write(usage() + "\n")
        return 2
    from kb import as_typed, ask, asked_in
    from kb.errors import KbError

    try:
        result, kn = asked_in(args.rules, query, args.config, prices=args.prices, sort=args.sort,
                              options=args.options)
    except KbError as err:
        return fail(str(err), err.exit_code)
    if args.fmt == "quote":
        from kb.present.quote import build, markdown, to_quote

        try:
            quoted, asked, wider = to_quote(result, kn, lambda q: ask(
                as_typed(q, result.model_source), args.rules, args.config, prices=args.prices,
                sort=args.sort))
        except KbError as err:
            return fail(str(err), err.exit_code)
        sys.stdout.write(markdown(build(quoted, kn, asked, wider)))
    elif args.fmt == "json":
        from kb.present.jsontext import indented

        sys.stdout.buffer.write(indented(result.to_dict()))
    else:
        from kb.present import render
        if args.fmt == "markdown":
            out = render.markdown(result, None if args.limit == 0 else 12)
        else:
            out = render.text(result, None if args.limit == 0 else render.TOP_ROWS, args.trace, args.explain)
        sys.stdout.write(out)
    return 0


# ---------------------------------------------------------------- --batch

@dataclass(frozen=True, slots=True)
class Settings:
    """What a batch line is answered with besides its query: the options of the command line
    that the plain `kbq "QUERY"` takes (--model-config, --prices, --sort, --options)."""

    config: str | None = None
    prices: str | None = None
    sort: str | None = None
    options: bool = False


# A batch is read in blocks of CHUNK_LINES lines; a block longer than PARALLEL_FROM lines is
# shared among worker processes TASK_LINES at a time, so more than MAX_JOBS workers would have
# nothing to do, and a short batch starts none.
CHUNK_LINES = 4096
TASK_LINES = 64
PARALLEL_FROM = 256
MAX_JOBS = CHUNK_LINES // TASK_LINES

_RULES: str | None = None      # the --rules of a batch, read by its worker processes
_SETTINGS = Settings()         # and the rest of its options
ECHO_CHARS = 80                 # a refused query longer than this is echoed cut, with its length
KEEP_BYTES = 4096               # a batch line longer than any query is kept only this far


def _answer_line(item: tuple[str, int]) -> bytes:
    """One batch line (its text, cut at KEEP_BYTES, and its length in bytes) → one JSON line
    (an answer or an error); b'' for a blank or # line."""
    import orjson

    from kb import ask
    from kb.errors import KbError

    line, length = item
    query = line.strip()
    if not query or query.startswith("#"):
        return b""
    s = _SETTINGS
    try:
        return ask(query, _RULES, s.config, prices=s.prices, sort=s.sort, options=s.options).to_json() + b"\n"
    except KbError as err:
        if len(query) <= ECHO_CHARS and length <= KEEP_BYTES:
            return orjson.dumps({"query": query, "error": err.to_dict()}) + b"\n"
        return orjson.dumps({"query": query[:ECHO_CHARS] + "…", "query_bytes": length,
                             "error": err.to_dict()}) + b"\n"


class _LineTooLong(Exception):
    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.number = number


def _lines(raw: BinaryIO, state: dict[str, Any]) -> Iterator[tuple[str, int]]:
    """The lines of a batch as (text, length in bytes); at most MAX_FILE_BYTES read into one line,
    so /dev/zero or a file without newlines is refused, not held. A line that is not UTF-8
    becomes a query error of its own, not the end of the batch."""
    from kb.paths import MAX_FILE_BYTES

    while True:
        try:
            line = raw.readline(MAX_FILE_BYTES + 1)
        except OSError as exc:          # /proc/self/mem, a device that fails: the batch ends here
            state["unreadable"] = state["number"] + 1
            state["reason"] = exc.strerror or str(exc)
            return
        if not line:
            return
        state["number"] += 1
        if len(line) > MAX_FILE_BYTES and not line.endswith(b"\n"):
            state["too_long"] = state["number"]
            return
        yield line[:KEEP_BYTES].decode("utf-8", errors="replace"), len(line.rstrip(b"\r\n"))


def _batch(path: str, rules: str | None, jobs: int | None = None, settings: Settings | None = None) -> int:
    """One query per line → one JSON object per line, in the same order; errors are lines too.
    Large batches are shared among worker processes (one per core unless --jobs says).
    A price file or model config that cannot be read stops the batch before its first line."""
    import multiprocessing
    import signal
    from itertools import islice

    from kb import cpu_cores, get_knowledge
    from kb.errors import KbError
    from kb.paths import MAX_FILE_BYTES

    global _RULES, _SETTINGS
    settings = settings or Settings()
    _RULES, _SETTINGS = rules, settings
    try:
        kn = get_knowledge(rules)       # load once, before any worker starts (they inherit it)
        if settings.prices is not None:
            from kb.knowledge.store import LOADED

            LOADED.priced(rules, settings.prices)
        if settings.config is not None:
            from kb.engine.resolving.hfconfig import read

            read(settings.config, kn)
    except KbError as err:
        return fail(str(err), err.exit_code)
    try:
        raw = sys.stdin.buffer if path == "-" else open(path, "rb")
    except OSError as exc:
        return fail(f"cannot read {path}: {exc.strerror or exc}")
    out = sys.stdout.buffer
    jobs = min(jobs or cpu_cores(), MAX_JOBS)
    forks = jobs > 1 and "fork" in multiprocessing.get_all_start_methods()
    pool = None
    before = None
    finished = False
    state: dict[str, Any] = {"number": 0, "too_long": 0, "unreadable": 0, "reason": ""}
    lines = _lines(raw, state)
    try:
        while chunk := list(islice(lines, CHUNK_LINES)):
            parallel = forks and len(chunk) > PARALLEL_FROM
            if parallel and pool is None:   # started for the first long block: no more workers
                # than its lines fill. SIGTERM to this process alone: stop the workers, then end
                # as SIGTERM does, rather than leave them writing into a closed pipe
                before = signal.signal(signal.SIGTERM, _terminated)
                pool = multiprocessing.get_context("fork").Pool(
                    min(jobs, -(-len(chunk) // TASK_LINES)), initializer=_worker_signals)
            answers = pool.imap(_answer_line, chunk, chunksize=TASK_LINES) if parallel and pool \
                else map(_answer_line, chunk)
            for line in answers:
                out.write(line)
        out.flush()
        finished = True
    finally:
        if pool is not None:
            if finished:
                pool.close()
            else:                   # interrupted, or the output closed: stop the workers now
                pool.terminate()
            pool.join()
            signal.signal(signal.SIGTERM, before)
        if path != "-":
            raw.close()
    name = "stdin" if path == "-" else path
    if state["too_long"]:
        return fail(f"{name}: line {state['too_long']} is longer than "
                     f"{MAX_FILE_BYTES} bytes; a query is one short line (stopped there)")
    if state["unreadable"]:
        return fail(f"cannot read {name} at line {state['unreadable']}: {state['reason']} (stopped there)")
    return 0


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)      # through _batch's finally, which stops the workers


def _worker_signals() -> None:
    """In a batch worker: Ctrl-C reaches the whole process group, and the parent handles it;
    SIGTERM (sent by the parent when it stops the pool) ends the worker quietly."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
