"""One argument behaviour for every declared option of kbq: `--opt VALUE` and `--opt=VALUE` read
the same, and every option appears in the help of its command (issue 24, item 6).

The options are enumerated from their declarations (kb.cli.query.QUERY_OPTIONS for the plain
query, --batch and `kbq ask`; each kb.cli.declared Command's options for the subcommands kbq reads
itself; the click parameters of the click subcommands, built from the same declarations), so an
option added later is checked without touching this file.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import click
import pytest

from kb.cli import declared
from kb.cli.clicked import DeclaredType
from kb.cli.commands import cli
from kb.cli.declared import Command, Opt
from kb.cli.main import ASK_HELP, QUERY_HELP
from kb.cli.query import QUERY_OPTIONS, QueryArgs, parse
from kb.cli.subcommands import OWN, SUBCOMMANDS

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


def _value(opt: Opt, tmp: Path) -> str:
    """A value the declared option takes: its first choice, a number, or a path."""
    if opt.choices:
        return opt.choices[0]
    if opt.metavar == "ADDRESSES":
        return "127.0.0.1"
    if opt.kind is declared.amount or getattr(opt.kind, "low", None) is not None:
        return "1"
    return str(tmp)


def _own() -> list[Command]:
    import importlib

    out = []
    for name in sorted(OWN):
        module, _, attr = SUBCOMMANDS[name][0].partition(":")
        out.append(getattr(importlib.import_module(module), attr))
    return out


def test_the_commands_kbq_reads_itself_import_no_click() -> None:
    import subprocess
    import sys

    code = ("import sys; from kb.cli.main import main; main(['gpus', '--json']); main(['validate', '--help']);"
            " main(['models', '--search=llama']); main(['rules']);"
            " print('click' in sys.modules, 'orjson' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.splitlines()[-1] == "False False"


@pytest.mark.parametrize("command", _own(), ids=lambda c: c.name)
def test_an_own_command_reads_each_option_both_ways_and_lists_it(command: Command, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert command.main(["--help"]) == 0
    helptext = capsys.readouterr().out
    assert helptext.startswith(f"Usage: kbq {command.name} [OPTIONS]")
    for opt in command.options:
        assert f"\n  {opt.flag} " in helptext or f"\n  {opt.flag}\n" in helptext, (command.name, opt.flag)
        if opt.value is not None:
            assert declared.read([opt.flag], command.options).values == {opt.dest: opt.value}
            assert declared.read([f"{opt.flag}=yes"], command.options) == f"{opt.flag} takes no value"
            continue
        value = _value(opt, tmp_path)
        spaced = declared.read([opt.flag, value], command.options)
        joined = declared.read([f"{opt.flag}={value}"], command.options)
        assert not isinstance(spaced, str) and not isinstance(joined, str)
        assert spaced.values == joined.values and spaced.values[opt.dest] is not None
        assert spaced.words == joined.words == []
        assert declared.read([opt.flag], command.options) == f"{opt.flag} needs a value"


def test_a_bad_value_or_option_is_a_usage_error_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    gpus = next(c for c in _own() if c.name == "gpus")
    for argv, message in [(["--vendor=nvidai"], "--vendor must be one of nvidia, amd"),
                          (["--vendor", "nvidai"], "(did you mean 'nvidia'?)"),
                          (["--min-vram", "lots"], "'--min-vram': 'lots' is not a number"),
                          (["--min-vram=-1"], "'-1' is negative"),
                          (["--min-vram", "nan"], "'nan' is not a finite number"),
                          (["--colour"], "no such option: --colour"),
                          (["h100"], "unexpected argument 'h100'")]:
        assert gpus.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("Error: ") and message in err, (argv, err)


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
    for name, (path, _) in SUBCOMMANDS.items():
        if not path or name in OWN:
            continue
        cmd = cli.get_command(ctx, name)
        assert cmd is not None, name
        out.append((name, cmd))
        if isinstance(cmd, click.Group):
            out += [(f"{name} {sub}", cmd.get_command(ctx, sub)) for sub in cmd.list_commands(ctx)]  # type: ignore[misc]
    return out


def test_every_subcommand_is_found() -> None:
    names = [n for n, _ in _commands()]
    assert {"schema", "export", "export flow", "serve"} <= set(names)
    assert {c.name for c in _own()} == {"gpus", "models", "rules", "validate"}


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
