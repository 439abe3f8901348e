"""The forward model at the values a capacity question's search tries (kb.engine.solve).

In: the Knowledge, the question's Workload and the cards its rows search. Out: a Probe per
(value, card, count): whether the job fits there, with the figures the verdict quotes.

A search tries a few dozen values on each of up to every catalogue card, and most of what a
probe computes does not depend on the card, or not even on the value: Probes makes each part
once and shares it. The workload at a value is resolved once, and once for all the values that
resolve alike (kb.engine.resolutions: the counts of one regime, the sizes of one); its scope with
the formulas that read neither the card nor the count (kb.knowledge.gpu_names.gpu_values and
the parallel layout, kb.engine.layout) is computed once per value, then with the layout of each
count the formulas that read the count but not the card; and the formulas that read the card
are computed for every card at once, as columns (kb.expr.parse.Col), as the catalogue's
answer computes them (those that read no count, once per value). A formula gives the same value
whether or not a name it does not read is in its scope, and a column holds what each card
computes alone, so every Probe is the one a probe made from scratch on that card gives.

Between values: a search's later values differ from its first in a few inputs (the users, the
context and the prompt it splits into); the formulas that read none of them, directly or
through other formulas, are copied from the first value's scopes (at the same count and card,
where the layout and the precision are the same) instead of computed again. A how-many search
over the catalogue asks probes_at: each card at its own count, all in one evaluation.
One probe made alone, and a model-parallel training probe, are kb.engine.single_probe's.
"""

from __future__ import annotations

from dataclasses import replace
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from kb.engine.budget import count_probe
from kb.engine.evaluate import Evaluated, Scope, compute
from kb.engine import formula_reads as fr
from kb.engine import training as tr
from kb.engine.gpus import catalogue_columns, layout_of
from kb.engine.layout import Layout, scope_values
from kb.engine.resolutions import Key, Resolutions
from kb.engine.scope import Resolved
from kb.engine.single_probe import Probe, choose_split, targets_asked
from kb.expr.parse import Col
from kb.knowledge.data import Knowledge
from kb.knowledge.gpu_names import FP32_GEMM, Gemm, gemm_of, gpu_columns, gpu_values, one_or_col
from kb.query.workload import Workload

if TYPE_CHECKING:
    from kb.knowledge.records import GPU, Precision

Names = tuple[str, ...]

FEW_COUNTS = 1      # probes_at with at most this many counts reads each count's columns over every card


class Probes:
    """The probes of one question, sharing what does not depend on the card or the count."""

    def __init__(self, kn: Knowledge, w: Workload, cards: list[GPU] | None = None,
                 catalogue: bool = False) -> None:
        self.kn, self.w = kn, w
        self.catalogue = catalogue      # the cards are the catalogue the runtime runs on, in its order
        self.targets = targets_asked(w)
        self.cards = cards or []    # the cards the rows search: a probe on one reads the columns over all
        self._index = {id(g): i for i, g in enumerate(self.cards)}
        self._res = Resolutions(kn, w)      # the workload at each value, shared where alike
        # per (vary, card, count, names, workload made from, model): the first whole probe scope,
        # with its workload's key; the formulas a change of inputs makes stale (_again)
        self._roots: dict[tuple[str, int, int, Names, Key, str], tuple[Key, Scope]] = {}
        self._stale: dict[tuple[int, Names], Names] = {}
        self._layouts: dict[tuple[str, float, int], Layout] = {}
        self._by_value: dict[tuple[str, float | None, Names], Scope] = {}
        self._by_count: dict[tuple[str, float, int, Names], Scope] = {}
        self._columns: dict[tuple[str, float, int, Names], Scope] = {}
        self._card_columns: dict[tuple[int, Gemm], Scope] = {}
        self._card_level_at: dict[tuple[str, float | None, Names], Scope] = {}
        # the first value a search probes (per architecture), with its inputs: a formula that reads
        # no input (or formula) that differs at another value has the same value there (_reuse)
        self._first: dict[tuple[str, Names, str], tuple[float | None, Scope]] = {}
        self._ref: dict[tuple[str, float | None, Names], float | None] = {}     # each value's first
        self._changed: dict[tuple[str, float | None, Names], dict[str, bool]] = {}
        self._first_cards: dict[tuple[str, int, int, Names, float | None], Scope] = {}
        # made probes and a card's names, each kept with its card (so that no other takes its id)
        self._made: dict[tuple[str, float, int, int, str, bool], tuple[GPU, Probe, Scope | None]] = {}
        self._card_values: dict[tuple[int, int, int, Gemm], tuple[GPU, Scope]] = {}
        self._alike_at: dict[tuple[str, float, float, int], bool] = {}
        self._copied: dict[tuple[int, tuple[str, ...]], tuple[str, ...]] = {}

    def _key(self, vary: str, value: float) -> tuple[str, float | None]:
        return self._res.key(vary, value)

    def resolved(self, vary: str, value: float) -> Resolved:
        """The workload resolved at this value (kb.engine.resolutions)."""
        return self._res.resolved(vary, value)

    def inputs(self, vary: str, value: float) -> Scope:
        """Its base_scope: a copy, made once per workload."""
        return self._res.inputs(vary, value)

    def layout(self, vary: str, value: float, count: int) -> Layout:
        key = (vary, value, count)
        found = self._layouts.get(key)
        if found is None:
            found = self._layouts[key] = layout_of(self.resolved(vary, value), self.kn, count)
        return found

    def _scope(self, vary: str, value: float, count: int, names: Names) -> Scope:
        """The scope at this value and count, with every formula `names` needs that does not
        read the card."""
        key = (vary, value, count, names)
        found = self._by_count.get(key)
        if found is None:
            kn = self.kn
            reads_card = fr.probe_reads(kn)[0]
            base = self._value_scope(vary, value, names)
            found = self._by_count[key] = dict(base)
            found.update(scope_values(self.layout(vary, value, count)))
            wanted = fr.wanted(kn, "count", names, reads_card)
            first = self._ref[(*self._key(vary, value), names)]
            if first is not None and self._alike(vary, value, first, count):
                self._reuse(found, self._by_count.get((vary, first, count, names)), vary, value, names, wanted)
            compute(kn, Evaluated(found), wanted)
        return found

    def _value_scope(self, vary: str, value: float, names: Names) -> Scope:
        """The scope at this value, with every formula `names` needs that reads neither the card
        nor the count."""
        vkey = (*self._key(vary, value), names)
        base = self._by_value.get(vkey)
        if base is None:
            kn = self.kn
            reads_count = fr.probe_reads(kn)[1]
            base = self._by_value[vkey] = self.inputs(vary, value)
            wanted = fr.wanted(kn, "value", names, reads_count)
            group = (vary, names, str(self.resolved(vary, value).model["id"]))
            first = self._first.get(group)
            self._ref[vkey] = vkey[1] if first is None else first[0]
            if first is None:
                self._first[group] = (vkey[1], dict(base))
            else:
                before = first[1]           # the names whose value differs (or that one lacks)
                try:                        # the items of one and not the other, compared as sets
                    changed = frozenset(k for k, _ in base.items() ^ before.items())
                except TypeError:           # a value that cannot be hashed: one by one
                    changed = frozenset({k for k, v in base.items() if v != before.get(k, base)} | set(before) - set(base))
                self._changed[vkey] = fr.changed_reads(kn, changed)
                self._reuse(base, self._by_value.get((vary, first[0], names)), vary, value, names, wanted)
            compute(kn, Evaluated(base), wanted)
        return base

    def _alike(self, vary: str, value: float, first: float, count: int) -> bool:
        """Whether the layout of `count` GPUs and the precision are the same at `value` as at the
        first value (the names they give are not among the inputs compared)."""
        key = (vary, value, first, count)
        found = self._alike_at.get(key)
        if found is None:
            found = self._alike_at[key] = (
                scope_values(self.layout(vary, value, count)) == scope_values(self.layout(vary, first, count))
                and self.resolved(vary, value).precision is self.resolved(vary, first).precision)
        return found

    def _reuse(self, scope: Scope, first: Scope | None, vary: str, value: float, names: Names,
               wanted: tuple[str, ...]) -> None:
        """Into `scope` (at `value`), the formulas of `wanted` that read nothing that differs from
        the search's first value, copied from `first` (the same scope at that value)."""
        reads = self._changed.get((*self._key(vary, value), names))
        if first is None or reads is None:
            return
        key = (id(reads), wanted)       # the reads maps are kept (Derived.tables, self._changed)
        unread = self._copied.get(key)
        if unread is None:
            unread = self._copied[key] = tuple(n for n in wanted if not reads.get(n, True))
        for n in unread:
            if n not in scope and n in first:
                scope[n] = first[n]

    def shared_counts(self) -> bool:
        """Whether probes_at may stand for probe: the query names no GPU (so the workload is the
        same at every count, or at the counts of one recipe window: _key) and the cards are
        several, with no split chosen per card."""
        r = None if self.w.gpus or len(self.cards) < 2 else self.resolved("gpu_count", 1)
        return r is not None and not (r.is_training and not (r.workload.tp or r.workload.pp) and tr.is_model_parallel(r.workload, self.kn))

    def probes_at(self, counts: dict[int, int]) -> dict[int, Probe]:
        """probe("gpu_count", n, cards[i], n) for each card i and its own count n, all computed at
        once: the cards and their counts as columns (each entry what that card computes alone at
        its count). Only where shared_counts()."""
        groups: dict[tuple[str, float | None], dict[int, int]] = {}
        for i, c in counts.items():         # the counts that share a workload (_key), each group at once
            groups.setdefault(self._key("gpu_count", c), {})[i] = c
        if len(groups) > 1:
            return {i: at for group in groups.values() for i, at in self.probes_at(group).items()}
        names = self.names()
        which = list(counts)
        for _ in which:
            count_probe()
        if len(set(counts.values())) <= FEW_COUNTS:     # the columns of each count, over every card, kept
            return self._at_one_count(which, counts[which[0]], names)
        some = counts[which[0]]
        base = self._value_scope("gpu_count", some, names)
        precision = self.resolved("gpu_count", some).precision
        accumulate = base.get("_gemm", FP32_GEMM)
        cards = self._cards(precision, accumulate, self.resolved("gpu_count", some))
        scope = dict(base)
        pick = itemgetter(*which)           # (two cards or more: their counts differ)
        for part in (cards, self._card_level("gpu_count", some, names)):
            for name, v in part.items():
                scope[name] = v if v.__class__ is not Col else Col.of(pick(v)) if v.holes else Col(pick(v))
        scope["gpu_count"] = Col.of(counts[i] for i in which)
        # each card's layout at its count; what reads it is computed over the cards with the rest
        by_count = {c: scope_values(self.layout("gpu_count", c, c)) for c in set(counts.values())}
        for name in ("tp", "pp", "dp"):
            scope[name] = one_or_col([by_count[counts[i]][name] for i in which])
        ev = Evaluated(scope)
        compute(self.kn, ev, fr.wanted(self.kn, "card", names, None))
        s = ev.scope
        out: dict[int, Probe] = {}
        for k, i in enumerate(which):
            at: dict[str, Any] = {}
            for n in (*names, "speed_floor_tok_s"):
                v = s.get(n)
                at[n] = v[k] if v.__class__ is Col else v
            meets = bool(at["meets_target"]) if self.targets else None
            out[i] = Probe(bool(at["fits"]) and meets is not False, at["per_gpu_gb"], at["usable_vram_gb"],
                           bool(at["fits"]), None, at["speed_floor_tok_s"], meets)
        return out

    def _at_one_count(self, which: list[int], count: int, names: Names) -> dict[int, Probe]:
        """_probe("gpu_count", count, cards[i], count) for each card i of `which`: one count, so
        the columns over every card at that count (kept) are read once for all of them."""
        columns = self._over_cards("gpu_count", count, count, names,
                                   self._scope("gpu_count", count, count, names), None)
        fits, per_gpu, usable = columns["fits"], columns["per_gpu_gb"], columns["usable_vram_gb"]
        floor, meets_at = columns["speed_floor_tok_s"], columns.get("meets_target")
        out: dict[int, Probe] = {}
        for i in which:
            fit = bool(fits[i] if fits.__class__ is Col else fits)
            meets = bool(meets_at[i] if meets_at.__class__ is Col else meets_at) if self.targets else None
            out[i] = Probe(fit and meets is not False, per_gpu[i] if per_gpu.__class__ is Col else per_gpu,
                           usable[i] if usable.__class__ is Col else usable, fit, None,
                           floor[i] if floor.__class__ is Col else floor, meets)
        return out

    def fits_at(self, counts: dict[int, int]) -> dict[int, bool]:
        """probes_at(counts)[i].fits, each probe counted; where the counts are one, read from that
        count's columns without making each card's Probe (a search's step needs no more)."""
        if not counts or len(set(counts.values())) > FEW_COUNTS:
            return {i: at.fits for i, at in self.probes_at(counts).items()} if counts else {}
        names = self.names()
        for _ in counts:
            count_probe()
        count = next(iter(counts.values()))
        columns = self._over_cards("gpu_count", count, count, names,
                                   self._scope("gpu_count", count, count, names), None)
        fits, meets = columns["fits"], columns.get("meets_target")
        return {i: bool(fits[i] if fits.__class__ is Col else fits) and (
                    not self.targets or bool(meets[i] if meets.__class__ is Col else meets)) for i in counts}

    def names(self, holds: str = "fits") -> Names:
        """What a probe evaluates: the fit, the figure it holds for, and the target asked."""
        names: Names = ("fits", "per_gpu_gb", "usable_vram_gb")
        if holds != "fits":
            names += (holds, "decode_tokens_per_s")
        return names + ("meets_target",) if self.targets else names

    def probe(self, vary: str, value: float, gpu: GPU, count: int, holds: str = "fits",
              alone: bool = False) -> Probe:
        """The probe at `value` on `count` of `gpu`; `alone`: computed for this card only, not read
        from the columns over every card unless those are made already (a search that follows
        one card of several)."""
        count_probe()                       # the server's search budget (kb.engine.budget)
        return self._probe(vary, value, gpu, count, holds, alone)

    def _probe(self, vary: str, value: float, gpu: GPU, count: int, holds: str = "fits",
               alone: bool = False) -> Probe:
        key = (vary, value, id(gpu), count, holds, alone)   # a search asks its last values again
        found = self._made.get(key)
        if found is None:
            self._made[key] = found = (gpu, *self._fresh(vary, value, gpu, count, holds, alone))
        return found[1]

    def scope_at(self, vary: str, value: float, gpu: GPU, count: int, holds: str = "fits") -> Scope | None:
        """The whole scope of the probe made at this value on this card (None: not made, or read
        from the columns over every card, or a split chosen for it)."""
        found = self._made.get((vary, value, id(gpu), count, holds, False))
        return found[2] if found is not None else None

    def _fresh(self, vary: str, value: float, gpu: GPU, count: int, holds: str,
               alone: bool) -> tuple[Probe, Scope | None]:
        r = self.resolved(vary, value)
        w = r.workload
        if r.is_training and not (w.tp or w.pp) and tr.is_model_parallel(w, self.kn):
            own = replace(r, workload=w.copy())     # choose_split sets the split on its workload
            return choose_split(self.kn, own, gpu, int(value) if vary == "gpu_count" else count, holds,
                                self._value_scope(vary, value, self.names(holds))), None
        if vary == "gpu_count":
            count = int(value)
        names = self.names(holds)
        i = self._index.get(id(gpu))
        whole = None                # the probe's own scope (not columns' values)
        if i is not None and len(self.cards) > 1 and (not alone or (vary, value, count, names) in self._columns):
            s = self._over_cards(vary, value, count, names, self._scope(vary, value, count, names), i)
        elif (again := self._again(vary, value, gpu, count, names)) is not None:
            s = whole = again
        else:
            shared = self._scope(vary, value, count, names)
            scope = dict(shared)
            precision = self.resolved(vary, value).precision
            gemm = shared.get("_gemm", FP32_GEMM)
            gkey = (id(gpu), count, id(precision), gemm)
            card = self._card_values.get(gkey)
            if card is None:
                card = self._card_values[gkey] = (gpu, gpu_values(gpu, count, precision, gemm))
            scope.update(card[1])
            wanted = fr.wanted(self.kn, "card", names, None)
            at_first = self._ref[(*self._key(vary, value), names)]
            ckey = (vary, id(gpu), count, names, at_first)
            first = self._first_cards.get(ckey)
            if first is not None and at_first is not None and self._alike(vary, value, at_first, count):
                self._reuse(scope, first, vary, value, names, wanted)
            ev = Evaluated(scope)
            compute(self.kn, ev, wanted)
            s = whole = ev.scope
            if first is None and self._key(vary, value)[1] == at_first:
                self._first_cards[ckey] = s
            key = self._key(vary, value)
            self._roots.setdefault((vary, id(gpu), count, names, self._res.derived_from(key) or key,
                                    str(r.model["id"])), (key, s))
        meets = bool(s.get("meets_target")) if self.targets else None
        return Probe(bool(s.get(holds)) and meets is not False, s.get("per_gpu_gb"), s.get("usable_vram_gb"),
                     bool(s.get("fits")), s.get("decode_tokens_per_s"), s.get("speed_floor_tok_s"),
                     meets), whole

    def _again(self, vary: str, value: float, gpu: GPU, count: int, names: Names) -> Scope | None:
        """The probe's whole scope made from the first made on this card at this count of a
        workload this value's is made from, or made from as well: this one's differs from it only
        in a few inputs (kb.engine.resolutions: changes), so a copy of that scope with those inputs
        set and the formulas that read them, directly or not, computed again is this probe's.
        None where no such probe was made."""
        key = self._key(vary, value)
        base = self._res.derived_from(key)
        root = base and self._roots.get((vary, id(gpu), count, names, base, str(self.resolved(vary, value).model["id"])))
        if root is None or not self._alike(vary, value, root[0][1], count):  # type: ignore[arg-type]
            return None
        changes = self._res.changes(key)
        reads = fr.changed_reads(self.kn, frozenset(changes))
        stale = self._stale.get((id(reads), names))
        if stale is None:
            stale = self._stale[(id(reads), names)] = tuple(n for n in fr.wanted(self.kn, "card", names, None) if reads[n])
        scope = dict(root[1])
        for n in stale:
            del scope[n]
        scope.update(changes)
        compute(self.kn, Evaluated(scope), stale)
        return scope

    def _cards(self, precision: Precision, accumulate: Gemm, r: Resolved) -> Scope:
        """The cards' names as columns, one card each (gpu_values reads the count only as
        gpu_count): the knowledge's own where the cards are the runtime's catalogue."""
        cards = self._card_columns.get((id(precision), accumulate))
        if cards is None:
            if self.catalogue and accumulate == gemm_of(r.runtime):
                cards = catalogue_columns(self.kn, precision, r.runtime)
            else:
                cards = gpu_columns([(g, 1) for g in self.cards], precision, accumulate)
            self._card_columns[(id(precision), accumulate)] = cards
        return cards

    def _card_level(self, vary: str, value: float, names: Names) -> Scope:
        """The formulas `names` needs that read the card but not its count or layout, over every
        card (a Col per formula where the cards differ), at this value: computed once per value."""
        key = (*self._key(vary, value), names)
        found = self._card_level_at.get(key)
        if found is None:
            r = self.resolved(vary, value)
            scope = dict(self._value_scope(vary, value, names))
            scope.update(self._cards(r.precision, scope.get("_gemm", FP32_GEMM), r))
            only = fr.card_only(self.kn, names)
            compute(self.kn, Evaluated(scope), only)
            found = self._card_level_at[key] = {n: scope[n] for n in only}
        return found

    def _over_cards(self, vary: str, value: float, count: int, names: Names, shared: Scope,
                    i: int | None) -> Scope:
        """Card i's values of `names`, computed once over every card (a Col per name where the
        cards differ); i None: the columns themselves."""
        key = (vary, value, count, names)
        columns = self._columns.get(key)
        if columns is None:
            precision = self.resolved(vary, value).precision
            accumulate = shared.get("_gemm", FP32_GEMM)
            cards = self._cards(precision, accumulate, self.resolved(vary, value))
            scope = dict(shared)
            scope.update(cards)
            scope.update(self._card_level(vary, value, names))
            scope["gpu_count"] = count
            ev = Evaluated(scope)
            compute(self.kn, ev, fr.wanted(self.kn, "card", names, None))
            columns = self._columns[key] = {n: ev.scope.get(n) for n in (*names, "speed_floor_tok_s")}
        if i is None:
            return columns
        return {n: v[i] if v.__class__ is Col else v for n, v in columns.items()}
