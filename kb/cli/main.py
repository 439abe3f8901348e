"""The kbq command line.

In: argv. Out: an answer on stdout, errors on stderr as `Error: …`, exit 0 on an answer and 2 on a
query or rule error or a command line click cannot read. Every command is a click command of one
group (kb.cli.commands), whose default command answers the query (`kbq "QUERY"`, kb.cli.query).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

# the commands that exit as usual (see console): a server, files written, a schema
EXIT_AS_USUAL = frozenset({"serve", "export", "schema"})


def main(argv: Sequence[str] | None = None) -> int:
    import click

    from kb.cli.commands import cli

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        code = cli.main(args=args, prog_name="kbq", standalone_mode=False)
        return code if isinstance(code, int) else 0
    except BrokenPipeError:
        return 0
    except (KeyboardInterrupt, click.Abort):
        return 130
    except click.ClickException as exc:
        exc.show()
        return 2
    except Exception as exc:  # the last line of defence: never a traceback
        from kb.cli.declared import fail
        from kb.errors import KbError

        if isinstance(exc, KbError):
            return fail(str(exc), exc.exit_code)
        return fail(f"internal error: {type(exc).__name__}: {exc}", 1)


def console() -> None:
    """The `kbq` command. A query without --batch, `ask`, a listing or `validate` is a one-shot
    process: it runs with the cyclic garbage collector off (what one answer makes is freed with
    the process), from before kbq's modules are imported (neither this module nor kb/__init__.py
    imports them at import time, so the collector does not walk what their import makes), and,
    once its output is flushed, leaves without tearing the interpreter down
    (module by module and object by object, ~7% of its cold start's work). The commands in
    EXIT_AS_USUAL exit as usual, and so does any run whose output cannot be flushed (the usual
    message and exit status)."""
    args = sys.argv[1:]
    one_shot = not (args and args[0] in EXIT_AS_USUAL) and not any(
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
