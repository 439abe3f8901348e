"""click options built from kb.cli.declared's declarations, for every kbq command: the same
flags, names, checks, choices and help wherever an option is declared, so one option behaves
the same everywhere.

In: an Opt, or a declared listing Command. Out: a click option decorator (`DeclaredType` runs
the Opt's own check on a value), or a click command.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from kb.cli.declared import RULES, Command, Opt, check

F = TypeVar("F", bound=Callable[..., Any])


class DeclaredType(click.ParamType[object]):
    """A value checked as the declaration says (kb.cli.declared.check): a refused value is
    click's usage error (exit 2) with the declaration's own message."""

    def __init__(self, opt: Opt) -> None:
        self.opt = opt
        self.name = opt.metavar.lower() or "text"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> object:
        if not isinstance(value, str):      # a default, already converted
            return value
        try:
            return check(self.opt, self.opt.flag, value)
        except ValueError as err:    # click says "Invalid value for '--opt'" itself
            flag = self.opt.flag
            self.fail(str(err).removeprefix(f"invalid value for '{flag}': ").removeprefix(f"{flag} "), param, ctx)


def _settings(opt: Opt) -> tuple[list[str], dict[str, Any]]:
    """A declaration as click.Option's declarations and attributes."""
    text = " ".join(opt.help.split("\n")) + (f" (one of: {', '.join(opt.choices)})" if opt.choices else "")
    decls = [opt.flag, *opt.names, opt.dest]
    if opt.value is not None:
        return decls, {"flag_value": opt.value, "default": opt.unset, "help": text or None}
    return decls, {"type": DeclaredType(opt), "default": opt.default, "multiple": opt.multiple,
                   "metavar": opt.metavar or None, "help": text or None, "show_default": opt.show_default}


def option(opt: Opt) -> Callable[[F], F]:
    """The click option of a declaration, as a decorator."""
    decls, attrs = _settings(opt)
    return click.option(*decls, **attrs)


def click_option(opt: Opt) -> click.Option:
    """The click option of a declaration, as a parameter."""
    decls, attrs = _settings(opt)
    return click.Option(decls, **attrs)


def options(*opts: Opt) -> Callable[[F], F]:
    """Every declaration's click option, in the order given (as the help lists them)."""
    def decorate(fn: F) -> F:
        for opt in reversed(opts):
            fn = option(opt)(fn)
        return fn

    return decorate


rules_option = option(RULES)


def command(declared: Command) -> click.Command:
    """The click command of a declared listing command: its options, its positional words
    (`declared.args`, as the usage line shows them) and its function, whose exit code is the
    command's."""
    params: list[click.Parameter] = []
    if declared.args:
        params.append(click.Argument(["words"], nargs=-1, metavar=declared.args,
                                     type=click.Path()))

    def callback(words: tuple[str, ...] = (), **values: object) -> int:
        return declared.run(values, list(words))

    return click.Command(declared.name, callback=callback, help=declared.help,
                         params=[*map(click_option, declared.options), *params],
                         context_settings={"help_option_names": ["-h", "--help"]})
