"""`kbq validate` and `kbq schema`: check rule files, print the JSON Schema of a file kind.

In: paths of rule files or directories; a schema name. Out: a report (every error as
file:line:col, exit 2 if any) or a JSON Schema on stdout.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import click

from kb.cli.common import dump


@click.command(help="Check rule files: schema, expressions, names, units, flows, sources.")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
def validate(paths: tuple[Path, ...]) -> None:
    from kb.errors import RuleErrors
    from kb.knowledge.build import build
    from kb.paths import rules_dir

    roots = _rule_roots(paths) if paths else [rules_dir()]
    failed = 0
    for root in roots:
        try:
            kn = build(root)
        except RuleErrors as errs:
            failed += len(errs.errors)
            for e in errs.errors:
                click.echo(e.render(), err=True)
            continue
        except Exception as exc:  # a RuleError of a single file
            from kb.errors import KbError

            if not isinstance(exc, KbError):
                raise
            failed += 1
            click.echo(str(exc), err=True)
            continue
        click.echo(f"{root}: ok — {len(kn.gpus)} GPUs, {len(kn.models)} models, "
                   f"{len(kn.precisions)} precisions, {len(kn.formulas)} formulas, "
                   f"{len(kn.flows)} flows, {len(kn.sources)} sources, {len(kn.claims)} claims")
    if failed:
        click.echo(f"{failed} error(s)", err=True)
        sys.exit(2)


def _rule_roots(paths: tuple[Path, ...]) -> list[Path]:
    """A rules directory, or files inside one (the directory holding them is checked)."""
    roots: list[Path] = []
    for p in paths:
        root = p if p.is_dir() else (p.parent.parent if p.parent.name == "flows" else p.parent)
        if root not in roots:
            roots.append(root)
    return roots


def _schema_names() -> list[str]:
    from kb.knowledge.schema import FILES

    return [*FILES, "answer"]


class LazyChoice(click.Choice):  # type: ignore[type-arg]
    """A click.Choice whose choices are computed when first read (a usage error, the help, a
    completion), so that importing the command does not import what lists them."""

    def __init__(self, choices: Callable[[], Sequence[str]]) -> None:
        super().__init__(())
        self._make = choices
        self._made: Sequence[str] | None = None

    @property
    def choices(self) -> Sequence[str]:
        if self._made is None:
            self._made = tuple(self._make())
        return self._made

    @choices.setter
    def choices(self, value: Sequence[str]) -> None:
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


