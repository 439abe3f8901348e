"""The kbq subcommands by name: where each is defined and its one-line summary.

In: nothing (a table, no imports). Out: SUBCOMMANDS, read by kb.cli.main (where each command
is, and the Commands lines of `kbq --help`) and by kb.cli.commands (the click group loads a
subcommand's module only when that subcommand is named). `ask` is answered by kb.cli.query's
reader, like the plain `kbq "QUERY"`; the commands in OWN are kb.cli.declared Commands that kbq
reads itself, without importing click; the others are click commands.
"""

from __future__ import annotations

# name → ("module:attribute" of its click command, or "" for ask; the summary `kbq --help` shows)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "ask": ("", "answer QUERY, as kbq \"QUERY\" does (the same options but --batch and --jobs)"),
    "gpus": ("kb.cli.listings:gpus", "list the GPU catalogue"),
    "models": ("kb.cli.listings:models", "list the model architectures"),
    "rules": ("kb.cli.listings:rules", "list the formulas with their meaning and sources"),
    "validate": ("kb.cli.validate:validate", "check rule files; every error as file:line:col"),
    "schema": ("kb.cli.rulefiles:schema", "print the JSON Schema of a rule file or of the answer"),
    "export": ("kb.cli.export:export", "write wiki pages (Markdown + Mermaid) from the rules"),
    "serve": ("kb.cli.serve:serve", "run the web page and JSON API"),
}


# the subcommands read by kb.cli.declared (no click): each is a Command at its path
OWN = frozenset({"gpus", "models", "rules", "validate"})


def commands_help() -> str:
    """The Commands lines of `kbq --help`; each command's options are in `kbq COMMAND --help`."""
    lines = [f"  {name:<10} {summary}" for name, (_, summary) in SUBCOMMANDS.items()]
    return "\n".join([*lines, "", "  kbq COMMAND --help lists a command's options."]) + "\n"
