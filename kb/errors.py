"""Typed errors. Every error a user can cause is a KbError with a message that says
where (a caret under the bad spot, or file:line:col) and, where one exists, a way out.

The CLI maps these to exit code 2 and the server to HTTP 400; nothing else does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


def nearest(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The closest valid word to `word`, or None."""
    import difflib                      # only when a word is not known: off a plain query's path

    pool = sorted(set(choices))
    lowered = {c.lower(): c for c in pool}
    hits = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=cutoff)
    return lowered[hits[0]] if hits else None


class KbError(Exception):
    """Base class of every error kbq reports to a user."""

    exit_code = 2

    def to_dict(self) -> dict[str, object]:
        return {"message": str(self)}


@dataclass
class QueryError(KbError):
    """A query the parser cannot read. `column` is 1-based."""

    query: str
    column: int
    message: str
    suggestion: str | None = None
    expected: list[str] = field(default_factory=list)
    width: int = 1

    def __post_init__(self) -> None:
        super().__init__(self.render())

    def caret(self) -> str:
        return " " * (self.column - 1) + "^" * max(1, self.width)

    def render(self) -> str:
        shown = "".join("?" if ord(c) < 32 or 0x7F <= ord(c) <= 0x9F or 0x202A <= ord(c) <= 0x202E
                        or 0x2066 <= ord(c) <= 0x2069 else c for c in self.query)
        lines = [f"cannot read the query at column {self.column}: {self.message}",
                 f"  {shown}", f"  {self.caret()}"]
        if self.suggestion:
            lines.append(f"did you mean '{self.suggestion}'?")
        if self.expected:
            lines.append("expected: " + ", ".join(self.expected))
        lines.append('try e.g.: kbq "serve 70B int4 16 users on h100"')
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()

    def to_dict(self) -> dict[str, object]:
        return {"message": self.message, "column": self.column,
                "suggestion": self.suggestion, "query": self.query,
                "expected": self.expected, "text": self.render()}


@dataclass
class RuleError(KbError):
    """A rule file that does not validate: file:line:col: message."""

    file: str
    line: int
    column: int
    message: str
    suggestion: str | None = None

    def __post_init__(self) -> None:
        super().__init__(self.render())

    def render(self) -> str:
        text = f"{self.file}:{self.line}:{self.column}: {self.message}"
        if self.suggestion:
            text += f" (did you mean '{self.suggestion}'?)"
        return text

    def __str__(self) -> str:
        return self.render()

    def to_dict(self) -> dict[str, object]:
        return {"message": self.render(), "file": self.file, "line": self.line,
                "column": self.column, "suggestion": self.suggestion}


class RuleErrors(KbError):
    """Several rule errors, all reported in one run."""

    def __init__(self, errors: list[RuleError]) -> None:
        self.errors = errors
        super().__init__("\n".join(e.render() for e in errors))


class EvalError(KbError):
    """A formula that cannot be evaluated for this workload (e.g. division by zero)."""


class HubModelNamed(KbError):
    """A query names a Hugging Face Hub id (org/name) that no models.yaml entry names: the
    model's config.json must be read (kb.query.hub) before the query can be answered. kb.ask and
    kb.answer_in do that; anything else that meets it reports its message."""

    def __init__(self, query: str, column: int, repo_id: str) -> None:
        self.query, self.column, self.repo_id = query, column, repo_id
        super().__init__(f"no model '{repo_id}' in models.yaml: its config.json is read from the "
                         "Hugging Face Hub for a query asked with kbq \"QUERY\" or the API; or "
                         "pass --model-config config.json")
