"""The forward model at the values a capacity question's search tries (kb.engine.solve).

In: the Knowledge, the question's Workload and the cards its rows search. Out: a Probe per
(value, card, count): whether the job fits there, with the figures the verdict quotes.

A search tries a few dozen values on each of up to every catalogue card, and most of what a
probe computes does not depend on the card, or not even on the value: Probes makes each part
once and shares it. The workload at a value is resolved once (once in all for a GPU count
when the query names no GPU: the count then changes nothing of the workload); its scope with
the formulas that read neither the card nor the count (kb.knowledge.gpu_names.gpu_values and
the parallel layout, kb.engine.layout) is computed once per value, then with the layout of each
count the formulas that read the count but not the card; and the formulas that read the card
are computed for every card at once, as columns (kb.expr.parse.Col), as the catalogue's
answer computes them. A formula gives the same value whether or not a name it does not read
is in its scope, and a column holds what each card computes alone, so every Probe is the one
a probe made from scratch on that card gives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kb.engine.budget import count_probe
from kb.engine.evaluate import Evaluated, Scope, evaluate
from kb.engine import training as tr
from kb.engine.gpus import gpu_scope, layout_of
from kb.engine.layout import Layout, scope_values
from kb.engine.scope import Resolved, base_scope, resolve
from kb.expr.parse import Col
from kb.knowledge.data import Knowledge
from kb.knowledge.gpu_names import FP32_GEMM, gpu_columns, gpu_values
from kb.query.workload import Workload
from kb.recordtype import record

if TYPE_CHECKING:
    from kb.knowledge.records import GPU

Names = tuple[str, ...]


@record
class Probe:
    fits: bool                      # the search's condition holds (memory, the speed floor, the targets asked)
    per_gpu_gb: float | None
    usable_gb: float | None
    fits_memory: bool = False
    speed: float | None = None      # per-user decode tokens/s
    floor: float | None = None
    meets_target: bool | None = None  # speed floor, ttft bound, tokens a day (None: not asked)


def targets_asked(w: Workload) -> bool:
    """The query set a speed, time to first token or volume target: solve under it too."""
    return any(v is not None for v in (w.speed_floor_tok_s, w.ttft_max_s, w.tokens_per_day))


def at_value(w: Workload, vary: str, value: float, kn: Knowledge | None = None) -> Workload:
    """The workload at `value`. A context the query did not split into prompt and output is
    prompt + output: the default output, and the rest is prompt."""
    import copy                 # capacity questions only: copy is kept off the plain query's path

    w2 = copy.copy(w)           # every field a plain value but the two lists, copied here
    w2.gpus = [copy.copy(g) for g in w.gpus]
    w2.notes = list(w.notes)
    w2.question = None
    if vary == "users":
        w2.users = int(value)
    elif vary == "context_tokens":
        w2.context_tokens = int(value)
        if w2.prompt_tokens is None and kn is not None:
            out = w2.output_tokens or int(kn.defaults["output_tokens"])
            w2.output_tokens = min(out, int(value) - 1) if value > 1 else out
            w2.prompt_tokens = max(1, int(value) - w2.output_tokens)
        if w2.prompt_tokens is not None and w2.prompt_tokens > value:
            w2.prompt_tokens = int(value)
    elif vary == "params":
        w2.model_id = None
        w2.params = float(value)
    elif vary == "gpu_count":
        for g in w2.gpus:
            g.count = int(value)
    elif vary == "batch":
        w2.batch = int(value)
    return w2


FEW_COUNTS = 4      # probes_at with at most this many counts reads each count's columns over every card


class Probes:
    """The probes of one question, sharing what does not depend on the card or the count."""

    def __init__(self, kn: Knowledge, w: Workload, cards: list[GPU] | None = None) -> None:
        self.kn, self.w = kn, w
        self.targets = targets_asked(w)
        # the cards the rows search (a question naming no GPU: the catalogue the runtime runs
        # on): a probe on one of them reads its value from the columns over all of them
        self.cards = cards or []
        self._index = {id(g): i for i, g in enumerate(self.cards)}
        self._resolved: dict[tuple[str, float | None], Resolved] = {}
        self._layouts: dict[tuple[str, float, int], Layout] = {}
        self._by_value: dict[tuple[str, float | None, Names], Scope] = {}
        self._by_count: dict[tuple[str, float, int, Names], Scope] = {}
        self._columns: dict[tuple[str, float, int, Names], Scope] = {}
        self._card_columns: dict[tuple[int, str], Scope] = {}
        self._reads: tuple[dict[str, bool], dict[str, bool]] | None = None

    def _key(self, vary: str, value: float) -> tuple[str, float | None]:
        """The workload at a GPU count is the workload itself when the query names no GPU."""
        return (vary, None) if vary == "gpu_count" and not self.w.gpus else (vary, value)

    def resolved(self, vary: str, value: float) -> Resolved:
        key = self._key(vary, value)
        found = self._resolved.get(key)
        if found is None:
            found = self._resolved[key] = resolve(at_value(self.w, vary, value, self.kn), self.kn)
        return found

    def layout(self, vary: str, value: float, count: int) -> Layout:
        key = (vary, value, count)
        found = self._layouts.get(key)
        if found is None:
            found = self._layouts[key] = layout_of(self.resolved(vary, value), self.kn, count)
        return found

    def _reading(self) -> tuple[dict[str, bool], dict[str, bool]]:
        """Formula → whether it reads a name of the card; and whether it reads the card or the
        count (gpu_count, the layout): directly or through the formulas it reads. Made once per
        knowledge and kept with it (Derived.tables)."""
        reads = self._reads
        if reads is None:
            tables = self.kn.derived.tables
            found = tables.get("engine.probe_reads")
            if isinstance(found, tuple):
                reads = found
            else:
                some_gpu = next(iter(self.kn.gpus.values()))
                card = set(gpu_values(some_gpu, 1, next(iter(self.kn.precisions.values()))))
                count = card | set(scope_values(Layout(1, 1, 1, True, None)))
                reads = (self._read_map(card), self._read_map(count))
                tables["engine.probe_reads"] = reads
            self._reads = reads
        return reads

    def _read_map(self, names: set[str]) -> dict[str, bool]:
        formulas = self.kn.formulas
        reads: dict[str, bool] = {}
        for order in self.kn.derived.order.values():
            for name in order:              # each formula after the formulas it reads
                if name not in reads:
                    f = formulas[name]
                    reads[name] = any(n in names for n in f.names) or any(reads.get(d, True) for d in f.deps)
        return reads

    def _scope(self, vary: str, value: float, count: int, names: Names) -> Scope:
        """The scope at this value and count, with every formula `names` needs that does not
        read the card."""
        key = (vary, value, count, names)
        found = self._by_count.get(key)
        if found is None:
            kn, order = self.kn, self.kn.derived.order
            reads_card, reads_count = self._reading()
            base = self._value_scope(vary, value, names)
            found = self._by_count[key] = dict(base)
            found.update(scope_values(self.layout(vary, value, count)))
            evaluate(kn, Evaluated(found), [n for name in names for n in order[name] if not reads_card[n]])
        return found

    def _value_scope(self, vary: str, value: float, names: Names) -> Scope:
        """The scope at this value, with every formula `names` needs that reads neither the card
        nor the count."""
        vkey = (*self._key(vary, value), names)
        base = self._by_value.get(vkey)
        if base is None:
            kn, order = self.kn, self.kn.derived.order
            reads_count = self._reading()[1]
            base = self._by_value[vkey] = base_scope(self.resolved(vary, value), kn)
            evaluate(kn, Evaluated(base), [n for name in names for n in order[name] if not reads_count[n]])
        return base

    def shared_counts(self) -> bool:
        """Whether probes_at may stand for probe: the query names no GPU (so the workload is the
        same at every count) and the cards are several, with no split chosen per card."""
        if self.w.gpus or len(self.cards) < 2:
            return False
        r = self.resolved("gpu_count", 1)
        return not (r.is_training and not (r.workload.tp or r.workload.pp) and tr.is_model_parallel(r.workload, self.kn))

    def probes_at(self, counts: dict[int, int]) -> dict[int, Probe]:
        """probe("gpu_count", n, cards[i], n) for each card i and its own count n, all computed at
        once: the cards and their counts as columns (each entry what that card computes alone at
        its count). Only where shared_counts()."""
        names: Names = ("fits", "per_gpu_gb", "usable_vram_gb")
        if self.targets:
            names += ("meets_target",)
        which = list(counts)
        for _ in which:
            count_probe()
        if len(set(counts.values())) <= FEW_COUNTS:     # the columns of each count, over every card, kept
            return {i: self._probe("gpu_count", counts[i], self.cards[i], counts[i]) for i in which}
        some = counts[which[0]]
        base = self._value_scope("gpu_count", some, names)
        precision = self.resolved("gpu_count", some).precision
        accumulate = base.get("_gemm", FP32_GEMM)
        cards = self._card_columns.get((id(precision), accumulate))
        if cards is None:
            cards = self._card_columns[(id(precision), accumulate)] = gpu_columns(
                [(g, 1) for g in self.cards], precision, accumulate)
        scope = dict(base)
        for name, v in cards.items():
            scope[name] = Col.of(v[i] for i in which) if v.__class__ is Col else v
        scope["gpu_count"] = Col.of(counts[i] for i in which)
        layouts = [self.layout("gpu_count", counts[i], counts[i]) for i in which]
        for name in ("tp", "pp", "dp"):
            scope[name] = Col.of(getattr(x, name) for x in layouts)
        ev = Evaluated(scope)
        evaluate(self.kn, ev, names)
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

    def probe(self, vary: str, value: float, gpu: GPU, count: int, holds: str = "fits") -> Probe:
        count_probe()                       # the server's search budget (kb.engine.budget)
        return self._probe(vary, value, gpu, count, holds)

    def _probe(self, vary: str, value: float, gpu: GPU, count: int, holds: str = "fits") -> Probe:
        r = self.resolved(vary, value)
        w = r.workload
        if r.is_training and not (w.tp or w.pp) and tr.is_model_parallel(w, self.kn):
            return _split_probe(self.kn, self.w, vary, value, gpu, count, holds)
        if vary == "gpu_count":
            count = int(value)
        names: Names = ("fits", "per_gpu_gb", "usable_vram_gb")
        if holds != "fits":
            names += (holds, "decode_tokens_per_s")
        if self.targets:
            names += ("meets_target",)
        shared = self._scope(vary, value, count, names)
        i = self._index.get(id(gpu))
        if i is not None and len(self.cards) > 1:
            s = self._over_cards(vary, value, count, names, shared, i)
        else:
            scope = dict(shared)
            precision = self.resolved(vary, value).precision
            scope.update(gpu_values(gpu, count, precision, shared.get("_gemm", FP32_GEMM)))
            ev = Evaluated(scope)
            evaluate(self.kn, ev, names)
            s = ev.scope
        meets = bool(s.get("meets_target")) if self.targets else None
        return Probe(bool(s.get(holds)) and meets is not False, s.get("per_gpu_gb"), s.get("usable_vram_gb"),
                     bool(s.get("fits")), s.get("decode_tokens_per_s"), s.get("speed_floor_tok_s"), meets)

    def _over_cards(self, vary: str, value: float, count: int, names: Names, shared: Scope,
                    i: int) -> Scope:
        """Card i's values of `names`, computed once over every card (a Col per name where the
        cards differ)."""
        key = (vary, value, count, names)
        columns = self._columns.get(key)
        if columns is None:
            precision = self.resolved(vary, value).precision
            accumulate = shared.get("_gemm", FP32_GEMM)
            cards = self._card_columns.get((id(precision), accumulate))
            if cards is None:               # gpu_values reads the count only as gpu_count
                cards = self._card_columns[(id(precision), accumulate)] = gpu_columns(
                    [(g, 1) for g in self.cards], precision, accumulate)
            scope = dict(shared)
            scope.update(cards)
            scope["gpu_count"] = count
            ev = Evaluated(scope)
            evaluate(self.kn, ev, names)
            columns = self._columns[key] = {n: ev.scope.get(n) for n in (*names, "speed_floor_tok_s")}
        return {n: v[i] if v.__class__ is Col else v for n, v in columns.items()}


def _split_probe(kn: Knowledge, w: Workload, vary: str, value: float, gpu: GPU, count: int,
                 holds: str) -> Probe:
    """A model-parallel training stack with no tp / pp asked: its split depends on the card and
    the count (choose_split sets it on the workload), so nothing is shared with the other cards
    or counts: the probe is made for this one, its splits side by side."""
    w2 = at_value(w, vary, value, kn)
    if vary == "gpu_count":
        count = int(value)
    r = resolve(w2, kn)
    return choose_split(kn, r, gpu, count, holds)


def choose_split(kn: Knowledge, r: Resolved, gpu: GPU, count: int, holds: str = "fits") -> Probe:
    """A model-parallel training stack with no tp / pp asked: the first valid split
    (kb.engine.training.model_parallel_layouts, fewest model-parallel GPUs first) that holds the job on
    `count` of this GPU with the headroom a recommendation keeps (roomy_fit), else the first that
    holds it, set on the workload (the last tried where none does). Every split is computed at
    once, as columns of tp, pp and dp (kb.expr.parse.Col: each entry what that split computes
    alone); returned: the probe (under `holds`) of the split chosen."""
    m, w = r.model, r.workload
    splits = tr.model_parallel_layouts(count, int(m["attention_heads"]), int(m["kv_heads"]), int(m["layers"]),
                                       int(kn.constants["gpus_per_node"]["value"]))
    if not splits:
        w.tp, w.pp = None, None
        return _probe(kn, r, w, gpu, count, holds)
    layouts = [tr.layout(count, _split(w, t, p), kn) for t, p in splits]
    scope = gpu_scope(base_scope(r, kn), gpu, count, r.precision, layouts[0])
    for name in ("tp", "pp", "dp"):
        scope[name] = Col.of(getattr(x, name) for x in layouts)
    ev = Evaluated(scope)
    targets = targets_asked(w)
    names = ["fits", "per_gpu_gb", "usable_vram_gb"]
    if holds != "fits":
        names += [holds, "decode_tokens_per_s"]
    if targets:
        names.append("meets_target")
    evaluate(kn, ev, names)
    s = ev.scope
    speed, floor = s.get("decode_tokens_per_s"), s.get("speed_floor_tok_s")  # the probe's, as computed for `holds`
    evaluate(kn, ev, ["roomy_fit"])

    def at(name: str, k: int) -> object:
        v = s.get(name)
        return v[k] if v.__class__ is Col else v

    def holding(k: int, name: str) -> bool:
        return bool(at(name, k)) and not (targets and not at("meets_target", k))

    chosen = next((k for name in ("roomy_fit", "fits") for k in range(len(splits)) if holding(k, name)),
                  len(splits) - 1)
    w.tp, w.pp = splits[chosen]
    meets = bool(at("meets_target", chosen)) if targets else None
    return Probe(holding(chosen, holds), at("per_gpu_gb", chosen), at("usable_vram_gb", chosen),  # type: ignore[arg-type]
                 bool(at("fits", chosen)), speed[chosen] if speed.__class__ is Col else speed,
                 floor[chosen] if floor.__class__ is Col else floor, meets)


def _split(w: Workload, t: int, p: int) -> Workload:
    """What kb.engine.training.layout reads of the workload, with the split (t, p)."""
    import copy

    w2 = copy.copy(w)
    w2.tp, w2.pp = t, p
    return w2


def _probe(kn: Knowledge, r: Resolved, w: Workload, gpu: GPU, count: int, holds: str) -> Probe:
    ev = Evaluated(gpu_scope(base_scope(r, kn), gpu, count, r.precision, layout_of(r, kn, count)))
    targets = targets_asked(w)
    names = ["fits", "per_gpu_gb", "usable_vram_gb"]
    if holds != "fits":
        names += [holds, "decode_tokens_per_s"]
    if targets:
        names.append("meets_target")
    evaluate(kn, ev, names)
    s = ev.scope
    meets = bool(s.get("meets_target")) if targets else None
    return Probe(bool(s.get(holds)) and meets is not False, s.get("per_gpu_gb"), s.get("usable_vram_gb"),
                 bool(s.get("fits")), s.get("decode_tokens_per_s"), s.get("speed_floor_tok_s"), meets)
