"""One argument behaviour for every declared option of kbq: `--opt VALUE` and `--opt=VALUE` read
the same, and every option appears in the help of its command (issue 24, item 6).

The options are enumerated from their declarations (kb.cli.query.QUERY_OPTIONS for the plain
query, --batch and `kbq ask`; the click parameters of each subcommand kb.cli.subcommands names),
so an option added later is checked without touching this file.
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from kb.cli.commands import cli
from kb.cli.main import ASK_HELP, QUERY_HELP
from kb.cli.query import QUERY_OPTIONS, QueryArgs, parse
from kb.cli.subcommands import SUBCOMMANDS
from kb.recordtype import fields

# a value each kind of query option takes (its check refuses most other words)
QUERY_VALUES = {"jobs": "2", "sort": "cost"}


def _fields(args: QueryArgs | int) -> dict[str, object]:
    assert not isinstance(args, int), args
    return {f.name: getattr(args, f.name) for f in fields(args)}


@pytest.mark.parametrize("opt", [o for o in QUERY_OPTIONS if o.value is None], ids=lambda o: o.flag)
def test_a_query_option_reads_its_value_both_ways(opt) -> None:
    value = QUERY_VALUES.get(opt.dest, "some/file")
    spaced = parse([opt.flag, value, "serve", "7B"], QUERY_HELP)
    joined = parse([f"{opt.flag}={value}", "serve", "7B"], QUERY_HELP)
    assert _fields(spaced) == _fields(joined)
    assert getattr(spaced, opt.dest) == (int(value) if opt.dest == "jobs" else value)
    assert spaced.words == ["serve", "7B"]     # type: ignore[union-attr]


@pytest.mark.parametrize("opt", [o for o in QUERY_OPTIONS if o.value is not None], ids=lambda o: o.flag)
def test_a_query_flag_takes_no_value(opt, capsys: pytest.CaptureFixture[str]) -> None:
    assert getattr(parse([opt.flag, "7B"], QUERY_HELP), opt.dest) == opt.value
    assert parse([f"{opt.flag}=yes", "7B"], QUERY_HELP) == 2
    assert f"{opt.flag} takes no value" in capsys.readouterr().err


def test_every_query_option_is_in_the_help() -> None:
    for o in QUERY_OPTIONS:
        assert f"\n  {o.flag} " in QUERY_HELP or f"\n  {o.flag}\n" in QUERY_HELP, o.flag
        assert (f"\n  {o.flag}" in ASK_HELP) is not o.batch_only, o.flag


def test_ask_refuses_the_batch_options(capsys: pytest.CaptureFixture[str]) -> None:
    for o in QUERY_OPTIONS:
        if o.batch_only:
            assert parse([f"{o.flag}=x", "7B"], ASK_HELP, batch=False) == 2
            assert f"no such option: {o.flag}" in capsys.readouterr().err


def _sample(param: click.Parameter, tmp: Path) -> str:
    kind = param.type
    if isinstance(kind, click.Choice):
        return str(kind.choices[0])
    if isinstance(kind, (click.types.IntParamType, click.types.FloatParamType)) or kind.name == "amount":
        return "1"
    if isinstance(kind, click.Path):
        return str(tmp)
    return "x"


def _commands() -> list[tuple[str, click.Command]]:
    out: list[tuple[str, click.Command]] = []
    ctx = click.Context(cli)
    for name, (path, _) in SUBCOMMANDS.items():
        if not path:
            continue
        cmd = cli.get_command(ctx, name)
        assert cmd is not None, name
        out.append((name, cmd))
        if isinstance(cmd, click.Group):
            out += [(f"{name} {sub}", cmd.get_command(ctx, sub)) for sub in cmd.list_commands(ctx)]  # type: ignore[misc]
    return out


def test_every_subcommand_is_found() -> None:
    names = [n for n, _ in _commands()]
    assert {"gpus", "models", "rules", "validate", "schema", "export", "export flow", "serve"} <= set(names)


@pytest.mark.parametrize("name", [n for n, _ in _commands()])
def test_a_subcommand_option_reads_its_value_both_ways_and_is_in_its_help(name: str, tmp_path: Path) -> None:
    cmd = dict(_commands())[name]
    required = [_sample(p, tmp_path) for p in cmd.params
                if isinstance(p, click.Argument) and p.required]
    helptext = cmd.get_help(click.Context(cmd, info_name=name))
    for p in cmd.params:
        if not isinstance(p, click.Option) or p.hidden:
            continue
        for flag in p.opts:
            assert flag in helptext, (name, flag)
        if p.is_flag:
            continue
        flag, value = p.opts[0], _sample(p, tmp_path)
        spaced = cmd.make_context(name, [flag, value, *required], resilient_parsing=False)
        joined = cmd.make_context(name, [f"{flag}={value}", *required], resilient_parsing=False)
        assert spaced.params == joined.params, (name, flag)
        assert p.name is not None and spaced.params[p.name] is not None, (name, flag)
