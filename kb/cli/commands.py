"""The kbq subcommands as one click group whose commands load on first use.

In: argv after `kbq` when it names a subcommand (kb.cli.subcommands). Out: the click group `cli`;
a subcommand's module (kb.cli.rulefiles, kb.cli.export, kb.cli.serve) is imported only when that
subcommand runs or its help is asked for, as click's documentation shows for lazily loaded
subcommands. The listings and `kbq validate` are not here: kbq reads them without click.
"""

from __future__ import annotations

import importlib

import click

from kb.cli.subcommands import OWN, SUBCOMMANDS


class LazyGroup(click.Group):
    """A click group whose subcommands are named with the import path of their command."""

    def __init__(self, *args: object, lazy_subcommands: dict[str, str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy_subcommands = lazy_subcommands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy_subcommands])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_subcommands:
            return self._load(cmd_name)
        return super().get_command(ctx, cmd_name)

    def _load(self, cmd_name: str) -> click.Command:
        module, _, attr = self.lazy_subcommands[cmd_name].partition(":")
        command = getattr(importlib.import_module(module), attr)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module}:{attr} is not a click command")
        return command


@click.group(cls=LazyGroup, help="kbq: GPU sizing answers for LLM work, from rules you can read.",
             lazy_subcommands={name: path for name, (path, _) in SUBCOMMANDS.items()
                                if path and name not in OWN})
@click.version_option(package_name="kbq", prog_name="kbq")
def cli() -> None:
    pass
