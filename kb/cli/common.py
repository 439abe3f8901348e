"""What the click subcommands share: the --rules option, the knowledge they read, tables and JSON.

In: a --rules directory or none. Out: the Knowledge (a rule error as click's error, exit 2),
listings as aligned text or indented JSON.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from kb.knowledge.data import Knowledge


class Amount(click.ParamType[float]):
    """A finite number, 0 or more: a memory size, a bandwidth, a price, a cache size. 'nan',
    'inf' and negatives are usage errors (exit 2) that say so, rather than a filter that
    silently keeps nothing or a failure further on."""

    name = "amount"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        import math

        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            self.fail(f"'{value}' is not a number", param, ctx)
        if not math.isfinite(number):
            self.fail(f"'{value}' is not a finite number", param, ctx)
        if number < 0:
            self.fail(f"'{value}' is negative; give 0 or more", param, ctx)
        return number


AMOUNT = Amount()


def dump(value: object) -> str:
    """A listing as JSON: indented, non-ASCII kept, one trailing newline."""
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def knowledge(rules: str | None) -> Knowledge:
    from kb import get_knowledge
    from kb.errors import KbError

    try:
        return get_knowledge(rules)
    except KbError as err:
        raise click.ClickException(str(err)) from None


rules_option = click.option("--rules", "rules", metavar="DIR", default=None,
                            help="Rule files to use instead of the shipped ones.")


def figure(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def table(head: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, ["-" * w for w in widths], *rows]:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
