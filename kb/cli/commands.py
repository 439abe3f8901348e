"""Every kbq command as one click group, whose default command answers a query.

In: argv after `kbq`. Out: the click group `cli`. A first argument that names no command is the
default command `query` (hidden): `kbq "serve 70B"`, `kbq --json "…"`, `kbq --batch FILE`, and
`kbq --help`/`--version`, which are the query command's. Each subcommand's module is imported
only when that subcommand runs or its help is asked for, as click's documentation shows for
lazily loaded subcommands.
"""

from __future__ import annotations

import importlib

import click

from kb.cli.subcommands import SUBCOMMANDS

DEFAULT = "query"


class KbqGroup(click.Group):
    """A click group whose subcommands are named with the import path of their command, and
    whose arguments, when the first names no command, are the default command's."""

    def __init__(self, *args: object, lazy_subcommands: dict[str, str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy_subcommands = lazy_subcommands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy_subcommands])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_subcommands:
            return self._load(cmd_name)
        return super().get_command(ctx, cmd_name)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or args[0] not in self.lazy_subcommands:
            args = [DEFAULT, *args]
        return super().parse_args(ctx, args)

    def _load(self, cmd_name: str) -> click.Command:
        module, _, attr = self.lazy_subcommands[cmd_name].partition(":")
        command = getattr(importlib.import_module(module), attr)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module}:{attr} is not a click command")
        return command


@click.group(cls=KbqGroup, add_help_option=False,
             lazy_subcommands={DEFAULT: "kb.cli.query:query",
                               **{name: path for name, (path, _) in SUBCOMMANDS.items()}})
def cli() -> None:
    pass
