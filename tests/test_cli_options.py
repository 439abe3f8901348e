"""One argument behaviour for every declared option of kbq: `--opt VALUE` and `--opt=VALUE`
read the same, and every option appears in the help of its command (issue 24, item 6).

Every command is a click command of one group (kb.cli.commands), its options built from their
declarations (kb.cli.query.QUERY_OPTIONS for the plain query, --batch and `kbq ask`; each
listing's Opts), so the commands are enumerated from the group and an option added later is
checked without touching this file.
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from kb.cli import declared
from kb.cli.clicked import DeclaredType
from kb.cli.commands import DEFAULT, cli
from kb.cli.declared import Opt
from kb.cli.main import main
from kb.cli.query import QUERY_OPTIONS, ask, query
from kb.cli.subcommands import SUBCOMMANDS

# a value each kind of query option takes (its check refuses most other words)
QUERY_VALUES = {"jobs": "2", "sort": "cost"}


def _params(argv: list[str], command: click.Command = query) -> dict[str, object]:
    return command.make_context("kbq", list(argv)).params


@pytest.mark.parametrize("opt", [o for o in QUERY_OPTIONS if o.value is None], ids=lambda o: o.flag)
def test_a_query_option_reads_its_value_both_ways(opt) -> None:
    value = QUERY_VALUES.get(opt.dest, "some/file")
    spaced = _params([opt.flag, value, "serve", "7B"])
    joined = _params([f"{opt.flag}={value}", "serve", "7B"])
    assert spaced == joined
    assert spaced[opt.dest] == (int(value) if opt.dest == "jobs" else value)
    assert spaced["words"] == ("serve", "7B")


@pytest.mark.parametrize("opt", [o for o in QUERY_OPTIONS if o.value is not None], ids=lambda o: o.flag)
def test_a_query_flag_takes_no_value(opt, capsys: pytest.CaptureFixture[str]) -> None:
    assert _params([opt.flag, "7B"])[opt.dest] == opt.value
    assert main([f"{opt.flag}=yes", "7B"]) == 2
    assert f"Option '{opt.flag}' does not take a value" in capsys.readouterr().err


def test_every_query_option_is_in_the_help() -> None:
    query_help = query.get_help(query.make_context("kbq", ["--help"], resilient_parsing=True))
    ask_help = ask.get_help(ask.make_context("ask", ["--help"], resilient_parsing=True)).split("\nOptions:")[1]
    for o in QUERY_OPTIONS:
        assert f"\n  {o.flag} " in query_help or f"\n  {o.flag}\n" in query_help, o.flag
        assert (f"\n  {o.flag}" in ask_help) is not o.batch_only, o.flag


def test_ask_refuses_the_batch_options(capsys: pytest.CaptureFixture[str]) -> None:
    for o in QUERY_OPTIONS:
        if o.batch_only:
            assert main(["ask", f"{o.flag}=x", "7B"]) == 2
            assert f"No such option '{o.flag}'" in capsys.readouterr().err


def _value(opt: Opt, tmp: Path) -> str:
    """A value the declared option takes: its first choice, a number, or a path."""
    if opt.dest in QUERY_VALUES:
        return QUERY_VALUES[opt.dest]
    if opt.choices:
        return opt.choices[0]
    if opt.metavar == "ADDRESSES":
        return "127.0.0.1"
    if opt.kind is declared.amount or getattr(opt.kind, "low", None) is not None:
        return "1"
    return str(tmp)


def test_a_bad_value_or_option_is_a_usage_error_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, message in [(["--vendor=nvidai"], "'--vendor': must be one of nvidia, amd"),
                          (["--vendor", "nvidai"], "(did you mean 'nvidia'?)"),
                          (["--min-vram", "lots"], "'--min-vram': 'lots' is not a number"),
                          (["--min-vram=-1"], "'-1' is negative"),
                          (["--min-vram", "nan"], "'nan' is not a finite number"),
                          (["--colour"], "No such option '--colour'"),
                          (["h100"], "unexpected extra argument (h100)")]:
        assert main(["gpus", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert "\nError: " in err and message in err, (argv, err)


def _sample(param: click.Parameter, tmp: Path) -> str:
    kind = param.type
    if isinstance(kind, DeclaredType):
        return _value(kind.opt, tmp)
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
    for name in [DEFAULT, *SUBCOMMANDS]:
        cmd = cli.get_command(ctx, name)
        assert cmd is not None, name
        out.append((name, cmd))
        if isinstance(cmd, click.Group):
            out += [(f"{name} {sub}", cmd.get_command(ctx, sub)) for sub in cmd.list_commands(ctx)]  # type: ignore[misc]
    return out


def test_every_subcommand_is_found() -> None:
    names = [n for n, _ in _commands()]
    assert {"query", "ask", "gpus", "models", "rules", "validate", "schema", "export", "export flow",
            "serve"} <= set(names)


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
