"""`kbq schema`: print the JSON Schema of a rule file kind or of the answer.

In: a schema name (a choice computed when read). Out: a JSON Schema on stdout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import click

from kb.cli.common import dump


def _schema_names() -> list[str]:
    from kb.knowledge.schema import FILES

    return [*FILES, "answer"]


class LazyChoice(click.Choice[str]):
    """A click.Choice whose choices are computed when first read (a usage error, the help, a
    completion), so that importing the command does not import what lists them."""

    def __init__(self, choices: Callable[[], Sequence[str]]) -> None:
        super().__init__(())
        self._make = choices
        self._made: tuple[str, ...] | None = None

    @property
    def choices(self) -> tuple[str, ...]:
        if self._made is None:
            self._made = tuple(self._make())
        return self._made

    @choices.setter
    def choices(self, value: tuple[str, ...]) -> None:     # click.Choice.__init__ sets ()
        self._made = tuple(value) if value else None


@click.command(help="Print the JSON Schema of a rule file kind (gpus, models, formulas, flow, …) or of the answer.")
@click.argument("name", type=LazyChoice(_schema_names))
def schema(name: str) -> None:
    if name == "answer":
        from pydantic import TypeAdapter

        from kb.engine.answer import Answer
        from kb.recordtype import as_dataclass

        as_dataclass(Answer)
        click.echo(dump(TypeAdapter(Answer).json_schema()), nl=False)
        return
    from kb.knowledge.schema import json_schema

    click.echo(dump(json_schema(name)), nl=False)


