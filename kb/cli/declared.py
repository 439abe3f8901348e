"""The options of every kbq command, declared once as data: kb.cli.clicked makes each a click
option, so every command reads and lists its options the same way.

In: an Opt per option (its flag, the name it sets, what it takes and its help line) and a Command
per listing subcommand (its options, its positional arguments, its function). Out: `check(opt,
flag, text)` → the value or a ValueError naming the option and, for a choice, the choices and
the nearest one; `fail(message)` → `Error: …` on stderr and the exit code. Every option that
takes a value takes it as `--opt VALUE` or `--opt=VALUE` (click's reading); a flag takes none.
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


@dataclass(frozen=True, slots=True)
class Command:
    """A listing subcommand, `kbq NAME [OPTIONS] ARGS…`, made a click command by kb.cli.clicked."""

    name: str
    help: str
    options: tuple[Opt, ...]
    run: Callable[[Values, list[str]], int]    # (values by dest, positional words) → exit code
    args: str = ""          # the positional arguments as the usage line shows them; "": none


def fail(message: str, code: int = 2) -> int:
    sys.stderr.write(f"Error: {message}\n")
    return code


RULES = Opt("--rules", "rules", metavar="DIR", help="use the rule files in DIR instead of the shipped ones")
