"""The kbq command line.

In: argv. Out: an answer on stdout, errors on stderr as `Error: …`, exit 0 on an answer and 2 on a
query or rule error. `kbq "QUERY"` and `kbq --batch` go through kb.cli.query, which imports neither
click nor the server; the subcommands (ask, gpus, models, rules, validate, schema, export, serve)
are one click group (kb.cli.commands), imported only when a subcommand is named, and `kbq ask` runs
the same kb.cli.query code with the same options.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from kb.cli.query import fail, options_help, parse, run

SUBCOMMANDS = ("gpus", "models", "rules", "validate", "schema", "export", "serve", "ask")
QUERY_HELP = """Usage: kbq [OPTIONS] "QUERY"
       kbq COMMAND [ARGS]...

  Answer a GPU sizing question for LLM training or inference, with the trace of every number.

  kbq "serve 70B int4 16 users"
  kbq "train 13B qlora on 20GB?"
  kbq --json "infer 7B fp16 on rtx 4000 ada vs rtx 6000 ada"

Options:
""" + options_help() + """
Commands:
  gpus       list the GPU catalogue (--json, --min-vram, --min-bandwidth, --vendor, --segment, --runtime)
  models     list the model architectures (--json, --family, --min-params)
  rules      list the formulas with their meaning and sources
  validate   check rule files; every error as file:line:col
  schema     print the JSON Schema of a rule file
  export     write wiki pages (Markdown + Mermaid) from the rules
  serve      run the web page and JSON API
"""


def _ask(argv: list[str]) -> int:
    args = parse(argv, QUERY_HELP)
    return args if isinstance(args, int) else run(args, QUERY_HELP)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
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
    """The `kbq` command. A plain query or --batch-less ask is a one-shot process: it runs with
    the cyclic garbage collector off (what one answer makes is freed with the process) and,
    once its output is flushed, leaves without tearing the interpreter down (module by module
    and object by object, ~7% of its cold start's work). Every other command exits as usual,
    and so does any run whose output cannot be flushed (the usual message and exit status)."""
    args = sys.argv[1:]
    one_shot = not (args and args[0] in SUBCOMMANDS) and not any(
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
