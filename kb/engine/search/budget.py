"""Budgets for the costliest searches of an answer, set by whoever serves it.

In: `within(seconds, probes)` around the work (the server sets both from its config,
KBQ_ANSWER_BUDGET_S and KBQ_SEARCH_PROBES; the CLI sets none). Out: `spent()` says whether a
budget is used up; `count_probe()` counts one probe of a capacity search (kb.engine.search.probes);
`note(budget, text)` records what a search left unfinished because of it; `within` yields the
Budget so the caller can see what was cut and, when the clock cut it, not keep such an answer in
a cache.

Two budgets, for two reasons:
- a work budget, in probes (one probe: the forward model at one value on one card, the unit of
  every capacity search: max users, max context, largest model, how many GPUs, and the options
  searched when a job does not fit). It is counted, not timed, so the same question under the
  same budget always stops at the same place and gives the same answer: such an answer can be
  kept in the server's answer cache. Its cuts are in `stopped`.
- a time budget, in CPU seconds of the thread doing the work (time.thread_time, not the wall
  clock: a search is cut for what it costs, not for how busy the machine was around it). It is
  the guard for work the probes do not count; an answer it cut depends on the moment, so its cuts
  are in `cut` and the server does not keep that answer.
Without a budget (the CLI, tests, `kbq --batch`) nothing is ever cut, so the answer stays a pure
function of the query and the knowledge. This module reads the clock only while a time budget
is set.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class Budget:
    def __init__(self, seconds: float | None, probes: int | None = None) -> None:
        self.seconds = seconds if seconds is not None and seconds > 0 else None
        self.until = time.thread_time() + self.seconds if self.seconds is not None else None
        self.probes = probes if probes is not None and probes > 0 else None
        self.used = 0                   # probes made so far
        self.cut: list[str] = []        # what the time budget left unfinished (not to be cached)
        self.stopped: list[str] = []    # what the probe budget left unfinished (deterministic)

    def out_of_probes(self) -> bool:
        return self.probes is not None and self.used >= self.probes

    def out_of_time(self) -> bool:
        return self.until is not None and time.thread_time() >= self.until

    def spent(self) -> bool:
        return self.out_of_probes() or self.out_of_time()

    def reason(self) -> str:
        """Which budget ran out, as an answer says it."""
        if self.out_of_probes():
            return f"search budget ({self.probes:,} probes of the forward model)"
        return f"time budget ({self.seconds:g} s of computing)"


_current: ContextVar[Budget | None] = ContextVar("kb_budget", default=None)


@contextmanager
def within(seconds: float | None, probes: int | None = None) -> Iterator[Budget | None]:
    """Work inside runs under a budget of `seconds` CPU seconds and `probes` probes (None or
    <= 0: no budget of that kind; neither: no budget at all)."""
    budget = Budget(seconds, probes)
    if budget.seconds is None and budget.probes is None:
        yield None
        return
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


def spent() -> Budget | None:
    """The budget in force if it is used up, else None."""
    budget = _current.get()
    return budget if budget is not None and budget.spent() else None


def group_size(per_item: int, most: int) -> int:
    """How many items of a search to run side by side before the budget is looked at again:
    `most`, or under a probe budget as many as its probes left allow at `per_item` probes an
    item, at least one. Counted, not timed: the same budget cuts at the same item."""
    budget = _current.get()
    if budget is None or budget.probes is None:
        return most
    return min(most, max(1, (budget.probes - budget.used) // per_item))


def count_probe() -> None:
    """One probe made (kb.engine.search.probes.Probes.probe)."""
    budget = _current.get()
    if budget is not None:
        budget.used += 1


def note(budget: Budget, text: str) -> None:
    """Record what `budget` left unfinished, under the budget that ran out (the time budget's
    cuts first: an answer both cut is not kept)."""
    (budget.cut if budget.out_of_time() or not budget.out_of_probes() else budget.stopped).append(text)
