"""Where a capacity search's boundary lies, told from the probes made so far (kb.engine.search.solve).

In: the probes of a search (kb.engine.search.probes) and what it varies. Out: margin, how far one
probe is from the boundary; Bracket, whether a size inside one architecture's range fits, from
the sizes known to fit and not to, with few probes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.engine.search.probes import Probes
    from kb.engine.search.single_probe import Probe
    from kb.knowledge.records import GPU


def margin(p: Probe) -> float | None:
    """How far a probe is from the boundary, positive past it: the memory per GPU over what the
    card holds, as a share of it, and where a speed floor counts, the floor over the speed
    (the speed per user falls about as 1 / users, so this grows about linearly too); None
    without the figures."""
    if p.per_gpu_gb is None or not p.usable_gb:
        return None
    margin = (float(p.per_gpu_gb) - float(p.usable_gb)) / float(p.usable_gb)
    if p.floor is not None and p.speed is not None:
        if p.speed <= 0:
            return None
        margin = max(margin, float(p.floor) / float(p.speed) - 1)
    return margin


class Bracket:
    """Whether a size inside one architecture's range fits, where the job's memory grows with
    the size (kb.engine.search.solve._largest_params): from the largest size known to fit (at first the
    range's smallest, with its probe) and the smallest known not to, the sizes at or below the one
    fit and those at or above the other do not, unprobed. A size between them, once they are
    within AIM_SPAN of each other, is first bracketed closely around where the margin (margin),
    drawn as a straight line between them, crosses zero (memory grows about linearly with the
    size), so that the bisection's later sizes are told without a probe; then probed if still
    between."""

    def __init__(self, p: Probes, gpu: GPU, count: int, holds: str, bottom: tuple[float, Probe]) -> None:
        self.p, self.gpu, self.count, self.holds = p, gpu, count, holds
        self.fit: tuple[float, Probe | None] = bottom       # the range's smallest size, which fits
        self.over: tuple[float, Probe] | None = None
        self.aimed = False

    def fits(self, v: float) -> bool:
        if v <= self.fit[0]:
            return True
        if self.over is not None and v >= self.over[0]:
            return False
        if (not self.aimed and self.over is not None and self.fit[1] is not None
                and self.over[0] <= AIM_SPAN * self.fit[0]):
            self.aimed = True
            m_lo, m_hi = margin(self.fit[1]), margin(self.over[1])
            if m_lo is not None and m_hi is not None and m_hi > m_lo:
                at = self.fit[0] + (self.over[0] - self.fit[0]) * (-m_lo / (m_hi - m_lo))
                for x in (at / SECANT_SPREAD, at * SECANT_SPREAD):
                    if self.fit[0] < x < self.over[0]:
                        self._probe(x)
            return self.fits(v)
        return self._probe(v)

    def _probe(self, v: float) -> bool:
        at = self.p.probe(N.PARAMS, v, self.gpu, self.count, self.holds)
        if at.fits:
            self.fit = (v, at)
        else:
            self.over = (v, at)
        return at.fits


SECANT_SPREAD = 1.001 ** 0.25   # the bracket around the margin's zero: a quarter of the search's step
AIM_SPAN = 5.0   # a bracket aimed from once its ends are this close (a wider one spans the bend near a range's top)
