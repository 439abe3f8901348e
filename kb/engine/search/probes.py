"""The forward model at the values a capacity question's search tries (kb.engine.search.solve).

In: the Knowledge, the question's Workload and the cards its rows search. Out: a Probe per
(value, card, count): whether the job fits there, with the figures the verdict quotes.

Every probe is made from scratch: the workload resolved at the value (kb.engine.resolving.scope.resolve_workload of
kb.engine.search.single_probe.at_value), its inputs, the card and the parallel layout of the count, and
the probe's formulas evaluated. A how-many search over the catalogue asks probes_at: each card at
its own count, all in one evaluation, the cards, their counts and layouts as columns
(kb.expr.parse.Col), as the catalogue's answer evaluates every card at once; a column holds what
each card computes alone, so each Probe is the one its card gives alone.

A Probes keeps, bounded (KEPT), the workload resolved at each value (a search asks a value's
layout apart from its probe) and the probes made (a search asks its last values again for the
row it fills).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar
from dataclasses import replace

from kb.engine.resolving import training as tr
from kb.engine.search.budget import count_probe
from kb.engine.evaluate import Evaluated, Scope, evaluate
from kb.engine.resolving.gpus import gpu_scope, layout_columns, layout_of
from kb.engine.resolving.inputs import base_scope
from kb.engine.resolving.layout import Layout
from kb.engine.resolving.scope import Resolved, resolve_workload
from kb.engine.search.single_probe import Probe, at_value, choose_split, targets_asked
from kb.expr.parse import Col
from kb.knowledge.data import Knowledge
from kb.knowledge.gpu_names import FP32_GEMM, gpu_columns
from kb.query.workload import Workload
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.knowledge.records import GPU

Names = tuple[str, ...]

KEPT = 1024     # resolved workloads and probes a Probes keeps (a search tries a few dozen values)

K = TypeVar("K")
V = TypeVar("V")


def _kept(table: dict[K, V], key: K, make: Callable[[], V]) -> V:
    """table[key], made on first ask; the oldest entry goes when the table holds KEPT."""
    found = table.get(key)
    if found is None:
        if len(table) >= KEPT:
            del table[next(iter(table))]
        found = table[key] = make()
    return found


def _speed_of(holds: str) -> str:
    """The per-user speed a probe under `holds` reports: a replica under load its tokens a second
    with the prompts counted (formulas.yaml serves_load), anything else its decode alone."""
    return N.SERVING_TOKENS_PER_S_PER_USER if holds == N.SERVES_LOAD else N.DECODE_TOKENS_PER_S


class Probes:
    """The probes of one question's search, on its cards."""

    def __init__(self, kn: Knowledge, w: Workload, cards: list[GPU] | None = None) -> None:
        self.kn, self.w = kn, w
        self.targets = targets_asked(w)
        self.cards = cards or []    # the cards a how-many search over several runs side by side
        self._resolved: dict[tuple[str, float], Resolved] = {}
        self._made: dict[tuple[str, float, str, int, str], Probe] = {}
        # the most users one replica serves, as a search over these probes found it between a
        # least and a most asked (kb.engine.search.replicas._serves): (least, most, found) by what holds
        self.served: dict[str, tuple[int, int, int | None]] = {}

    def resolved(self, vary: str, value: float) -> Resolved:
        """The workload at this value, resolved (kept: a search asks a value's layout apart)."""
        return _kept(self._resolved, (vary, value), lambda: self._resolve(vary, value))

    def _resolve(self, vary: str, value: float) -> Resolved:
        """The workload at this value, resolved. With no GPU named, a count reaches the workload
        only through the runtime recipes made for some counts (kb.engine.resolving.training.count_windows)."""
        w = at_value(self.w, vary, value, self.kn)
        if vary == N.GPU_COUNT and not w.gpus and self._count_windows:
            w.gpu_count = int(value)
        return resolve_workload(w, self.kn)

    @cached_property
    def _count_windows(self) -> bool:
        """Whether the runtime's recipes change the job with the GPU count (no GPU named)."""
        return bool(tr.count_windows(self.w, resolve_workload(self.w.copy(), self.kn).runtime))

    def layout(self, vary: str, value: float, count: int) -> Layout:
        """The parallel layout of `count` GPUs for the workload at this value."""
        return layout_of(self.resolved(vary, value), self.kn, count)

    def names(self, holds: str = N.FITS) -> Names:
        """What a probe evaluates: the fit, the figure it holds for, and the target asked."""
        names: Names = (N.FITS, N.PER_GPU_GB, N.USABLE_VRAM_GB)
        if holds != N.FITS:
            names += (holds, _speed_of(holds))
        return names + (N.MEETS_TARGET,) if self.targets else names

    def probe(self, vary: str, value: float, gpu: GPU, count: int, holds: str = N.FITS) -> Probe:
        """The probe at `value` on `count` of `gpu` (on `value` of it where the count varies)."""
        count_probe()                       # the server's search budget (kb.engine.search.budget)
        return _kept(self._made, (vary, value, str(gpu["id"]), count, holds),
                     lambda: self._fresh(vary, value, gpu, count, holds))

    def _fresh(self, vary: str, value: float, gpu: GPU, count: int, holds: str) -> Probe:
        r = self.resolved(vary, value)
        if vary == N.GPU_COUNT:
            count = int(value)
        w = r.workload
        if r.is_training and not (w.tp or w.pp) and tr.is_model_parallel(w, self.kn):
            own = replace(r, workload=w.copy())     # choose_split sets the split on its workload
            return choose_split(self.kn, own, gpu, count, holds)
        ev = Evaluated(gpu_scope(base_scope(r, self.kn), gpu, count, r.precision, layout_of(r, self.kn, count)))
        evaluate(self.kn, ev, self.names(holds))
        return self._probe_of(ev.scope, holds, None)

    def _probe_of(self, s: Scope, holds: str, k: int | None) -> Probe:
        """The Probe a scope holds (entry k of its columns)."""
        def at(name: str) -> Any:
            v = s.get(name)
            return v[k] if k is not None and v.__class__ is Col else v

        meets = bool(at(N.MEETS_TARGET)) if self.targets else None
        return Probe(bool(at(holds)) and meets is not False, at(N.PER_GPU_GB), at(N.USABLE_VRAM_GB),
                     bool(at(N.FITS)), at(_speed_of(holds)) if holds != N.FITS else None,
                     at(N.SPEED_FLOOR_TOK_S), meets)

    def shared_counts(self) -> bool:
        """Whether probes_at may stand for probe: the query names no GPU and the cards are
        several, with no split chosen per card (a model-parallel training stack)."""
        if self.w.gpus or len(self.cards) < 2:
            return False
        r = self.resolved(N.GPU_COUNT, 1)
        return not (r.is_training and not (r.workload.tp or r.workload.pp) and tr.is_model_parallel(r.workload, self.kn))

    def probes_at(self, counts: dict[int, int]) -> dict[int, Probe]:
        """probe("gpu_count", n, cards[i], n) for each card i and its own count n, each counted,
        computed over the cards at once where the counts resolve to the same workload (no
        recipe window between them). Only where shared_counts()."""
        for _ in counts:
            count_probe()
        groups: dict[int | None, dict[int, int]] = {}
        for i, n in counts.items():
            groups.setdefault(n if self._count_windows else None, {})[i] = n
        return {i: at for group in groups.values() for i, at in self._over_cards(group).items()}

    def fits_at(self, counts: dict[int, int]) -> dict[int, bool]:
        """probes_at(counts)[i].fits."""
        return {i: at.fits for i, at in self.probes_at(counts).items()}

    def fits_over_counts(self, gpu: GPU, counts: list[int]) -> list[bool] | None:
        """probe("gpu_count", n, gpu, n).fits for each count n, each counted, in one evaluation
        over the counts (the card's figures and each count's layout as columns): an inference job
        whose resolution does not change with the count. None where it may (a training job, whose
        runtime recipes and split change with it), for the caller to probe count by count."""
        r = self.resolved(N.GPU_COUNT, counts[0])
        if r.is_training or self._count_windows:
            return None
        for _ in counts:
            count_probe()
        return [at.fits for at in self._columns(r, [(gpu, n) for n in counts])]

    def _over_cards(self, counts: dict[int, int]) -> dict[int, Probe]:
        """Each card i of `counts` at its count, one evaluation over them all."""
        which = list(counts)
        r = self.resolved(N.GPU_COUNT, counts[which[0]])
        return dict(zip(which, self._columns(r, [(self.cards[i], counts[i]) for i in which])))

    def _columns(self, r: Resolved, pairs: list[tuple[GPU, int]]) -> list[Probe]:
        """The probe of each (card, count) pair, one evaluation over them all: the cards' figures
        and each count's layout as columns of the workload resolved once."""
        scope = base_scope(r, self.kn)
        scope.update(gpu_columns(pairs, r.precision, scope.get("_gemm", FP32_GEMM)))
        scope.update(layout_columns([layout_of(r, self.kn, n) for _, n in pairs]))
        ev = Evaluated(scope)
        evaluate(self.kn, ev, self.names())
        return [self._probe_of(ev.scope, N.FITS, k) for k in range(len(pairs))]
