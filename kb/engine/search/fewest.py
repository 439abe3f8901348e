"""The card that answers a how-many-GPUs question over the catalogue, without every card's row.

In: the Knowledge and the question's Probes over the catalogue (Probes.shared_counts()). Out:
the row (kb.engine.search.solve.Row) kb.engine.run would choose among every card's rows
(solve.how_many_rows): the fewest GPUs, then the card with the most memory bandwidth, then
the first in the catalogue; the first card's row when no card holds the job. What an option's
answer reads (kb.engine.advising.options: the card and count that answer it), for far fewer probes.

Why it is the same row: a card's count (its bisection, then the next canonical count that
holds the job) is a count that holds the job, so it is never below the fewest that hold it on
that card. The counts from `lower` up are probed over every card still in the race; a card
that holds the job at count m is searched alone, exactly as how_many_rows searches it; a card
that has not held it at any count up to m answers more than m. Once the best row's count is
below the next count probed (or equal, with only cards of less bandwidth left), no card left
can beat it. Past a node of GPUs without an answer, every card is searched side by side as the
full answer does (a long scan would cost more than it saves).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.engine.search import solve
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.engine.search.probes import Probes
    from kb.knowledge.data import Knowledge


def primary(kn: Knowledge, p: Probes) -> solve.Row:
    """The row the catalogue's how-many answer leads with (see the module's docstring)."""
    spec = kn.query["solve"]["how_many_gpus"]
    lower, upper = int(spec["lower"]), int(spec["upper"])
    cards = p.cards
    at_upper = p.fits_at({i: upper for i in range(len(cards))})
    left = [i for i in range(len(cards)) if at_upper[i]]

    def rank(i: int) -> tuple[float, int]:
        return -(cards[i]["bandwidth_gb_s"] or 0), i

    best: tuple[int, tuple[float, int]] | None = None      # (count, rank of its card)
    scan_to = int(kn.constants[N.GPUS_PER_NODE]["value"])
    m = lower
    while left and not (best is not None and best[0] < m):
        if m > scan_to or m > upper:
            rows = solve.how_many_rows(kn, p.w, p, 0, len(cards))
            found = [r for r in rows if r["found"]]
            return min(found, key=lambda r: (r["value"], -(kn.gpus[r["gpu_id"]]["bandwidth_gb_s"] or 0)))
        at = p.fits_at({i: m for i in left})
        here = sorted((i for i in left if at[i]), key=rank)
        left = [i for i in left if not at[i]]
        for i in here:                      # each answers m or more
            if best is not None and (best[0], best[1]) < (m, rank(i)):
                continue
            n = _count(p, i, lower, upper)
            if best is None or (n, rank(i)) < best:
                best = (n, rank(i))
        m += 1
    if best is None:
        return solve.how_many_row(p, cards[0], None, None, None)    # no card holds it: the first card's row
    n, (_, i) = best
    gpu = cards[i]
    return solve.how_many_row(p, gpu, n, p.probe(N.GPU_COUNT, n, gpu, n),
                              p.probe(N.GPU_COUNT, n - 1, gpu, n - 1) if n > 1 else None)


def _count(p: Probes, i: int, lower: int, upper: int) -> int:
    """Card i's count as solve.how_many_rows finds it (the job holds on it at `upper`): the
    bisection, then the next canonical count up that holds it (the bisection's if none does)."""
    gpu = p.cards[i]

    def fits(n: int) -> bool:
        return p.probe(N.GPU_COUNT, n, gpu, n).fits

    lo, hi = lower - 1, upper
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    n = hi
    while True:
        while n <= upper and not p.layout(N.GPU_COUNT, n, n).canonical:
            n += 1
        if n > upper:
            return hi
        if fits(n):
            return n
        n += 1
