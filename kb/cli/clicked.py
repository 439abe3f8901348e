"""click options built from kb.cli.declared's declarations, for the commands that run under click
(`kbq serve`, `kbq export`, `kbq schema`): the same flags, names, checks, choices and help as the
commands kbq reads itself, so one option behaves the same everywhere.

In: an Opt. Out: a click option decorator; `DeclaredType` runs the Opt's own check on a value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from kb.cli.declared import RULES, Opt, check

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
            self.fail(str(err).removeprefix(f"invalid value for '{self.opt.flag}': "), param, ctx)


def option(opt: Opt) -> Callable[[F], F]:
    """The click option of a declaration."""
    text = " ".join(opt.help.split("\n")) + (f" (one of: {', '.join(opt.choices)})" if opt.choices else "")
    if opt.value is not None:
        return click.option(opt.flag, *opt.names, opt.dest, flag_value=opt.value,
                            default=opt.unset, help=text or None)
    return click.option(opt.flag, *opt.names, opt.dest, type=DeclaredType(opt), default=opt.default,
                        multiple=opt.multiple, metavar=opt.metavar or None, help=text or None,
                        show_default=opt.show_default)


def options(*opts: Opt) -> Callable[[F], F]:
    """Every declaration's click option, in the order given (as the help lists them)."""
    def decorate(fn: F) -> F:
        for opt in reversed(opts):
            fn = option(opt)(fn)
        return fn

    return decorate


rules_option = option(RULES)
