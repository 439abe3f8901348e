"""What the subcommands share: the knowledge they read, tables and JSON.

In: a --rules directory or none. Out: the Knowledge (a rule error is a KbError: `Error: …`,
exit 2), listings as aligned text or indented JSON on stdout.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kb.knowledge.data import Knowledge


def dump(value: object) -> str:
    """A listing as JSON: indented, non-ASCII kept, one trailing newline."""
    import json     # only for --json: a text listing does without it

    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def knowledge(rules: str | None) -> Knowledge:
    from kb import get_knowledge

    return get_knowledge(rules)


def figure(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def echo(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def table(head: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    sys.stdout.write("".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n"
                             for r in [head, ["-" * w for w in widths], *rows]))
