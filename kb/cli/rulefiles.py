"""`kbq schema`: print the JSON Schema of a rule file kind or of the answer.

In: a schema name (one of the rule file kinds, or "answer"). Out: a JSON Schema on stdout.
"""

from __future__ import annotations

import click

from kb.cli.common import dump


def _schema_names() -> list[str]:
    from kb.knowledge.schema import FILES

    return [*FILES, "answer"]


@click.command(help="Print the JSON Schema of a rule file kind (gpus, models, formulas, flow, …) or of the answer.")
@click.argument("name", type=click.Choice(_schema_names()))
def schema(name: str) -> None:
    if name == "answer":
        from pydantic import TypeAdapter

        from kb.engine.assembly.answer import Answer

        click.echo(dump(TypeAdapter(Answer).json_schema()), nl=False)
        return
    from kb.knowledge.schema import json_schema

    click.echo(dump(json_schema(name)), nl=False)


