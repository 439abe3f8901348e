"""The kbq subcommands by name: where each is defined and its one-line summary.

In: nothing (a table, no imports). Out: SUBCOMMANDS, read by kb.cli.commands (the click group
loads a subcommand's module only when that subcommand is named) and by kb.cli.query (the
Commands lines of `kbq --help`). Each is a click command.
"""

from __future__ import annotations

# name → ("module:attribute" of its click command, the summary `kbq --help` shows)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "ask": ("kb.cli.query:ask", "answer QUERY, as kbq \"QUERY\" does (the same options but --batch and --jobs)"),
    "gpus": ("kb.cli.listings:gpus", "list the GPU catalogue"),
    "models": ("kb.cli.listings:models", "list the model architectures"),
    "rules": ("kb.cli.listings:rules", "list the formulas with their meaning and sources"),
    "validate": ("kb.cli.validate:validate", "check rule files; every error as file:line:col"),
    "schema": ("kb.cli.rulefiles:schema", "print the JSON Schema of a rule file or of the answer"),
    "export": ("kb.cli.export:export", "write wiki pages (Markdown + Mermaid) from the rules"),
    "serve": ("kb.cli.serve:serve", "run the web page and JSON API"),
}

