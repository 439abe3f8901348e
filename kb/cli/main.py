"""The kbq command line.

In: argv. Out: an answer on stdout, errors on stderr as `Error: …`, exit 0 on an answer and 2 on a
query or rule error. `kbq "QUERY"` and `kbq --batch` go through kb.cli.query, which imports neither
click nor the server, and so does `kbq ask` (the same reader, the same options but --batch and
--jobs); `kbq gpus`, `models`, `rules` and `validate` are kb.cli.declared Commands, read by the
same reader without click; `kbq schema`, `export` and `serve` are one click group
(kb.cli.commands) whose options are built from the same declarations (kb.cli.clicked).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kb.cli.declared import fail
from kb.cli.query import options_help, parse, run
from kb.cli.subcommands import OWN, SUBCOMMANDS, commands_help

if TYPE_CHECKING:
    from kb.cli.declared import Command

QUERY_HELP = """Usage: kbq [OPTIONS] "QUERY"
       kbq COMMAND [ARGS]...

  Answer a GPU sizing question for LLM training or inference, with the trace of every number.

  kbq "serve 70B int4 16 users"
  kbq "train 13B qlora on 20GB?"
  kbq --json "infer 7B fp16 on rtx 4000 ada vs rtx 6000 ada"

Options:
""" + options_help() + """
Commands:
""" + commands_help()
ASK_HELP = """Usage: kbq ask [OPTIONS] "QUERY"

  Answer QUERY, as kbq "QUERY" does, with the same options (but --batch and --jobs).

Options:
""" + options_help(batch=False)


def _ask(argv: list[str], usage: str = QUERY_HELP, batch: bool = True) -> int:
    args = parse(argv, usage, batch)
    if isinstance(args, int):
        return args
    if not batch and not " ".join(args.words).strip():
        return fail("missing QUERY, e.g. kbq ask \"serve 70B int4 16 users\"")
    return run(args, usage)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and args[0] == "ask":
            return _ask(args[1:], ASK_HELP, batch=False)
        if args and args[0] in OWN:
            import importlib

            module, _, attr = SUBCOMMANDS[args[0]][0].partition(":")
            command: Command = getattr(importlib.import_module(module), attr)
            return command.main(args[1:])
        if args and args[0] in SUBCOMMANDS:
            from kb.cli.commands import cli

            return cli.main(args=args, prog_name="kbq", standalone_mode=False) or 0
        return _ask(args)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the last line of defence: never a traceback
        from kb.errors import KbError

        if isinstance(exc, KbError):
            return fail(str(exc), exc.exit_code)
        try:
            import click

            if isinstance(exc, click.ClickException):
                exc.show()
                return 2
        except ImportError:
            pass
        return fail(f"internal error: {type(exc).__name__}: {exc}", 1)


def console() -> None:
    """The `kbq` command. A query without --batch, or a command kbq reads itself (OWN), is a
    one-shot process: it runs with the cyclic garbage collector off (what one answer makes is
    freed with the process) and, once its output is flushed, leaves without tearing the
    interpreter down (module by module and object by object, ~7% of its cold start's work).
    Every click command exits as usual,
    and so does any run whose output cannot be flushed (the usual message and exit status)."""
    args = sys.argv[1:]
    one_shot = not (args and args[0] in SUBCOMMANDS and args[0] not in OWN and args[0] != "ask") and not any(
        a == "--batch" or a.startswith("--batch=") for a in args)
    if one_shot:
        import gc

        gc.disable()
    code = main(args)
    if one_shot:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            sys.exit(code)
        import os

        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    console()
