"""A time budget for the costliest searches of an answer, set by whoever serves it.

In: `within(seconds)` around the work (the server sets it from its own limit, config
KBQ_ANSWER_BUDGET_S; the CLI sets none). Out: `spent()` says whether the budget is used up;
`note(text)` records what a search left unfinished because of it; `within` yields the Budget so
the caller can see what was cut and, for one, not keep such an answer in a cache.

The budget counts the CPU seconds of the thread doing the work (time.thread_time), not the wall
clock: a search is cut for what it costs, not for how busy the machine was around it. Without a
budget (the CLI, tests, `kbq --batch`) nothing is ever cut, so the answer stays a pure function
of the query and the knowledge. This module reads the clock only while a budget is set.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class Budget:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.until = time.thread_time() + seconds
        self.cut: list[str] = []

    def spent(self) -> bool:
        return time.thread_time() >= self.until


_current: ContextVar[Budget | None] = ContextVar("kb_budget", default=None)


@contextmanager
def within(seconds: float | None) -> Iterator[Budget | None]:
    """Work inside runs under a budget of `seconds` CPU seconds (None or <= 0: no budget)."""
    if seconds is None or seconds <= 0:
        yield None
        return
    budget = Budget(seconds)
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


def spent() -> Budget | None:
    """The budget in force if it is used up, else None."""
    budget = _current.get()
    return budget if budget is not None and budget.spent() else None


def note(budget: Budget, text: str) -> None:
    budget.cut.append(text)
