"""The options of every kbq command, declared once: read from argv, listed in the help, and made
into click options where a command still runs under click.

In: an Opt per option (its flag, the name it sets, what it takes and its help line) and a Command
per subcommand that runs without click (its options, its positional arguments, its function).
Out: `read(argv, options)` → the values by name and the positional words, or an error message;
`options_help(options)` → the Options lines of a help text; `command_help(command)` → a whole
help text; `Command.main(argv)` → an exit code. Every option that takes a value takes it as
`--opt VALUE` or `--opt=VALUE`; a flag takes none. A bad value is a usage error (exit 2) that
names the option and, for a choice, the choices and the nearest one.

kbq reads its arguments itself rather than with click because click's import alone costs more
instructions than a whole plain answer (bench/README.md, "Every command's start-up"); kb.cli.clicked
builds the click options of `kbq serve`, `kbq export` and `kbq schema` from these same
declarations, so every command reads its options the same way.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from kb.errors import KbError

Kind = Callable[[str, str], object]     # (flag, text) → the value; ValueError(message) if refused
Values: TypeAlias = "dict[str, Any]"               # the options of a command line by dest


@dataclass(frozen=True, slots=True)
class Opt:
    flag: str
    dest: str                       # the name it sets
    value: object = None            # what a flag sets; None: the option takes a value (metavar)
    metavar: str = ""
    help: str = ""                  # as the help shows it; a newline breaks the line there
    batch_only: bool = False        # kbq "QUERY" only, not kbq ask
    kind: Kind | None = None        # checks and converts the value (None: the text as given)
    choices: tuple[str, ...] = ()   # the values it takes, if a choice
    default: object = None          # when not given (a flag that sets True: False)
    names: tuple[str, ...] = ()     # other flags for the same option
    multiple: bool = False          # may be given more than once: a list of values
    show_default: bool = False      # the help says the default

    @property
    def unset(self) -> object:
        """The value when the option is not given."""
        if self.multiple:
            return []
        return False if self.default is None and self.value is True else self.default


class UsageError(KbError):
    """A command line a command cannot run: `Error: …` and exit 2, as a query error."""


def amount(flag: str, text: str) -> float:
    """A finite number, 0 or more: a memory size, a bandwidth, a price, a cache size. 'nan',
    'inf' and negatives are refused, rather than a filter that silently keeps nothing."""
    import math

    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"invalid value for '{flag}': '{text}' is not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"invalid value for '{flag}': '{text}' is not a finite number")
    if number < 0:
        raise ValueError(f"invalid value for '{flag}': '{text}' is negative; give 0 or more")
    return number


def integer(low: int, high: int) -> Kind:
    """A whole number from low to high."""
    def kind(flag: str, text: str) -> int:
        t = text.strip()
        if not (t.lstrip("-").isascii() and t.lstrip("-").isdigit()) or len(t) > 12:
            raise ValueError(f"invalid value for '{flag}': '{text}' is not a whole number")
        if not low <= int(t) <= high:
            raise ValueError(f"invalid value for '{flag}': {t} is not in the range {low}<=x<={high}")
        return int(t)

    kind.low, kind.high = low, high     # type: ignore[attr-defined]  # read by kb.cli.clicked
    return kind


def check(opt: Opt, flag: str, text: str) -> object:
    """The value of opt given as text (under flag); ValueError(message) if it is refused."""
    if opt.choices and text not in opt.choices:
        from kb.errors import nearest

        hint = nearest(text, opt.choices)
        raise ValueError(f"{flag} must be one of {', '.join(opt.choices)}"
                         + (f" (did you mean '{hint}'?)" if hint else ""))
    return opt.kind(flag, text) if opt.kind is not None else text


@dataclass(slots=True)
class Read:
    """What `read` found: the options given (by dest), the other words, and "help" or "version"
    if one of those came first (the rest is then not read)."""

    values: Values
    words: list[str]
    asked: str = ""


def read(argv: list[str], options: tuple[Opt, ...] | list[Opt]) -> Read | str:
    """argv → what it gives, or the message of the first error."""
    by_flag = {f: o for o in options for f in (o.flag, *o.names)}
    values: Values = {}
    words: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            words.extend(argv[i + 1:])
            break
        if arg in ("-h", "--help"):
            return Read(values, words, "help")
        if arg == "--version":
            return Read(values, words, "version")
        flag, eq, inline = arg.partition("=")
        opt = by_flag.get(arg) or (by_flag.get(flag) if eq and arg.startswith("--") else None)
        if opt is None:
            if arg.startswith("--") and len(arg) > 2:
                return f"no such option: {flag if eq else arg}"
            words.append(arg)
        elif opt.value is not None:
            if eq:
                return f"{flag} takes no value"
            values[opt.dest] = opt.value
        else:
            if eq:
                text = inline
            elif i + 1 < len(argv):
                text = argv[i + 1]
                i += 1
            else:
                return f"{arg} needs a value"
            try:
                value = check(opt, flag if eq else arg, text)
            except ValueError as err:
                return str(err)
            if opt.multiple:
                values.setdefault(opt.dest, []).append(value)
            else:
                values[opt.dest] = value
        i += 1
    return Read(values, words)


def options_help(options: tuple[Opt, ...] | list[Opt], batch: bool = True, version: bool = False) -> str:
    """The Options lines of a help text, from the declarations (without the batch-only options
    when batch is False); a choice's values are listed unless its help names them all."""
    lines = []
    for o in options:
        if o.batch_only and not batch:
            continue
        head = ", ".join((o.flag, *o.names)) + (f" {o.metavar}" if o.metavar else "")
        listed = all(c in o.help for c in o.choices)     # the help names them itself
        text = o.help + (f"\none of: {', '.join(o.choices)}" if not listed else "") \
            + (f"  [default: {o.default}]" if o.show_default else "")
        first, *rest = text.split("\n")
        if len(head) > 13:
            lines += [f"  {head}", f"{'':17}{first}"]
        else:
            lines.append(f"  {head:<15}{first}")
        lines += [f"{'':17}{r}" for r in rest]
    lines += ["  --version      print the version"] if version else []
    lines += ["  -h, --help     show this message"]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class Command:
    """A subcommand that runs without click: `kbq NAME [OPTIONS] ARGS…`."""

    name: str
    help: str
    options: tuple[Opt, ...]
    run: Callable[[Values, list[str]], int]    # (values by dest, positional words) → exit code
    args: str = ""          # the positional arguments as the usage line shows them; "": none

    def main(self, argv: list[str]) -> int:
        got = read(argv, self.options)
        if isinstance(got, str):
            return fail(f"{got}\nTry 'kbq {self.name} --help'.")
        if got.asked == "help":
            sys.stdout.write(command_help(self))
            return 0
        if got.asked == "version":
            return fail(f"no such option: --version\nTry 'kbq {self.name} --help'.")
        if got.words and not self.args:
            return fail(f"unexpected argument '{got.words[0]}'\nTry 'kbq {self.name} --help'.")
        values = {o.dest: o.unset for o in self.options}
        values.update(got.values)
        return self.run(values, got.words)


def command_help(command: Command) -> str:
    usage = f"Usage: kbq {command.name} [OPTIONS]" + (f" {command.args}" if command.args else "")
    return f"{usage}\n\n  {command.help}\n\nOptions:\n{options_help(command.options)}"


def fail(message: str, code: int = 2) -> int:
    sys.stderr.write(f"Error: {message}\n")
    return code


RULES = Opt("--rules", "rules", metavar="DIR", help="use the rule files in DIR instead of the shipped ones")
