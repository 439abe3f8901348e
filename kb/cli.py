"""The kbq command line.

In: argv. Out: an answer on stdout, errors on stderr as `Error: …`, exit 0 on an answer and 2 on a
query or rule error. `kbq "QUERY"` takes a short path that imports neither click nor the server;
the subcommands (gpus, models, rules, validate, schema, export, serve) are a click group.
"""

from __future__ import annotations

import sys
import typing
from collections.abc import Iterator, Sequence
from typing import NamedTuple

SORTS = ("value", "cost", "speed", "memory", "power")
SUBCOMMANDS = ("gpus", "models", "rules", "validate", "schema", "export", "serve", "ask")
QUERY_HELP = """Usage: kbq [OPTIONS] "QUERY"
       kbq COMMAND [ARGS]...

  Answer a GPU sizing question for LLM training or inference, with the trace of every number.

  kbq "serve 70B int4 16 users"
  kbq "train 13B qlora on 20GB?"
  kbq --json "infer 7B fp16 on rtx 4000 ada vs rtx 6000 ada"

Options:
  --json         print the Answer as JSON
  --markdown     print a Markdown version for a wiki
  --all          list every GPU judged (text and Markdown show the first 12)
  --no-trace     leave the trace out of the text answer
  --rules DIR    use the rule files in DIR instead of the shipped ones
  --batch FILE   answer one query per line of FILE ('-' for stdin) as JSON Lines, with
                 --model-config, --prices, --sort and --options as given
  --jobs N       worker processes for --batch (default: one per core)
  --model-config PATH
                 a Hugging Face config.json for a model not in the rules
  --prices FILE  use the prices in FILE (the rules/prices.yaml schema) instead of the shipped ones
  --sort NAME    order the GPU configurations: value (default), cost, speed, memory or power
  --options      list what to change so it fits (other precisions, context, GPUs…)
  --version      print the version
  -h, --help     show this message

Commands:
  gpus       list the GPU catalogue (--json, --min-vram, --min-bandwidth, --vendor, --segment, --runtime)
  models     list the model architectures (--json, --family, --min-params)
  rules      list the formulas with their meaning and sources
  validate   check rule files; every error as file:line:col
  schema     print the JSON Schema of a rule file
  export     write wiki pages (Markdown + Mermaid) from the rules
  serve      run the web page and JSON API
"""


def _fail(message: str, code: int = 2) -> int:
    sys.stderr.write(f"Error: {message}\n")
    return code


def _ask_fast(argv: list[str]) -> int:
    """kbq [--json|--markdown] [--all] [--no-trace] [--rules DIR] QUERY…"""
    fmt, trace = "text", True
    limit: int | None = 12
    rules: str | None = None
    batch: str | None = None
    config: str | None = None
    jobs: int | None = None
    prices: str | None = None
    sort: str | None = None
    options = False
    words: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            words.extend(argv[i + 1:])
            break
        if arg in ("-h", "--help"):
            sys.stdout.write(QUERY_HELP)
            return 0
        if arg == "--version":
            from kb import __version__

            sys.stdout.write(f"kbq {__version__}\n")
            return 0
        if arg == "--json":
            fmt = "json"
        elif arg == "--markdown":
            fmt = "markdown"
        elif arg == "--all":
            limit = None
        elif arg == "--no-trace":
            trace = False
        elif arg == "--options":
            options = True
        elif arg == "--jobs":
            if i + 1 >= len(argv) or not argv[i + 1].isdigit() or int(argv[i + 1]) < 1:
                return _fail("--jobs needs a number of processes, e.g. --jobs 2")
            jobs = int(argv[i + 1])
            i += 1
        elif arg in ("--rules", "--batch", "--model-config", "--prices", "--sort"):
            if i + 1 >= len(argv):
                return _fail(f"{arg} needs a value")
            if arg == "--rules":
                rules = argv[i + 1]
            elif arg == "--batch":
                batch = argv[i + 1]
            elif arg == "--prices":
                prices = argv[i + 1]
            elif arg == "--sort":
                sort = argv[i + 1]
                if sort not in SORTS:
                    from kb.errors import nearest

                    hint = nearest(sort, SORTS)
                    return _fail(f"--sort must be one of {', '.join(SORTS)}"
                                 + (f" (did you mean '{hint}'?)" if hint else ""))
            else:
                config = argv[i + 1]
            i += 1
        elif arg.startswith("--rules="):
            rules = arg.split("=", 1)[1]
        elif arg.startswith("--") and len(arg) > 2:
            return _fail(f"no such option: {arg}\nTry 'kbq --help'.")
        else:
            words.append(arg)
        i += 1
    if batch is not None:
        return _batch(batch, rules, jobs, Settings(config, prices, sort, options))
    query = " ".join(words).strip()
    if not query:
        sys.stdout.write(QUERY_HELP)
        return 2
    from kb import ask
    from kb.errors import KbError

    try:
        result = ask(query, rules, config, prices=prices, sort=sort, options=options).to_dict()
    except KbError as err:
        return _fail(str(err), err.exit_code)
    if fmt == "json":
        import orjson

        sys.stdout.buffer.write(orjson.dumps(result, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        from kb import render

        out = render.markdown(result, limit) if fmt == "markdown" else render.text(result, limit, trace)
        sys.stdout.write(out)
    return 0


class Settings(NamedTuple):
    """What a batch line is answered with besides its query: the options of the command line
    that the plain `kbq "QUERY"` takes (--model-config, --prices, --sort, --options)."""

    config: str | None = None
    prices: str | None = None
    sort: str | None = None
    options: bool = False


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


def _lines(raw: typing.BinaryIO, state: dict[str, int]) -> Iterator[tuple[str, int]]:
    """The lines of a batch as (text, length in bytes); at most MAX_FILE_BYTES read into one line,
    so /dev/zero or a file without newlines is refused, not held. A line that is not UTF-8
    becomes a query error of its own, not the end of the batch."""
    from kb.paths import MAX_FILE_BYTES

    while line := raw.readline(MAX_FILE_BYTES + 1):
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
            from kb.store import LOADED

            LOADED.priced(rules, settings.prices)
        if settings.config is not None:
            from kb.hfconfig import read

            read(settings.config, kn)
    except KbError as err:
        return _fail(str(err), err.exit_code)
    try:
        raw = sys.stdin.buffer if path == "-" else open(path, "rb")
    except OSError as exc:
        return _fail(f"cannot read {path}: {exc.strerror or exc}")
    out = sys.stdout.buffer
    jobs = jobs or cpu_cores()
    pool = None
    before = None
    if jobs > 1 and "fork" in multiprocessing.get_all_start_methods():
        # SIGTERM to this process alone: stop the workers, then end as SIGTERM does, rather than
        # leave them writing into a closed pipe
        before = signal.signal(signal.SIGTERM, _terminated)
        pool = multiprocessing.get_context("fork").Pool(jobs, initializer=_worker_signals)
    finished = False
    state = {"number": 0, "too_long": 0}
    lines = _lines(raw, state)
    try:
        while chunk := list(islice(lines, 4096)):
            answers = pool.imap(_answer_line, chunk, chunksize=64) if pool and len(chunk) > 256 \
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
    if state["too_long"]:
        return _fail(f"{'stdin' if path == '-' else path}: line {state['too_long']} is longer than "
                     f"{MAX_FILE_BYTES} bytes; a query is one short line (stopped there)")
    return 0


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)      # through _batch's finally, which stops the workers


def _worker_signals() -> None:
    """In a batch worker: Ctrl-C reaches the whole process group, and the parent handles it;
    SIGTERM (sent by the parent when it stops the pool) ends the worker quietly."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and args[0] in SUBCOMMANDS:
            from kb.commands import cli

            return cli.main(args=args, prog_name="kbq", standalone_mode=False, obj=_ask_fast) or 0
        return _ask_fast(args)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the last line of defence: never a traceback
        from kb.errors import KbError

        if isinstance(exc, KbError):
            return _fail(str(exc), exc.exit_code)
        try:
            import click

            if isinstance(exc, click.ClickException):
                exc.show()
                return 2
        except ImportError:
            pass
        return _fail(f"internal error: {type(exc).__name__}: {exc}", 1)


if __name__ == "__main__":
    sys.exit(main())
