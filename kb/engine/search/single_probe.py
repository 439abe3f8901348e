"""One probe of a capacity search, and the pieces kb.engine.search.probes makes every probe from.

In: the Knowledge, a Workload, the value a search tries, a card and a count. Out: the Probe there
(whether the job fits, with the figures the verdict quotes); the Workload at a value (at_value);
and, for a model-parallel training stack with no split asked, the split chosen for this card and
count (choose_split), all of its valid splits computed at once as columns.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kb.engine.resolving import training as tr
from kb.engine.evaluate import Evaluated, Scope, evaluate
from kb.engine.resolving.gpus import gpu_scope, layout_of
from kb.engine.resolving.layout import Layout
from kb.engine.resolving.inputs import base_scope
from kb.engine.resolving.scope import Resolved
from kb.expr.parse import Col
from kb.knowledge.data import Knowledge
from kb.query.workload import GpuRequest, Workload
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.knowledge.records import GPU


@dataclass(slots=True)
class Probe:
    fits: bool                      # the search's condition holds (memory, the speed floor, the targets asked)
    per_gpu_gb: float | None
    usable_gb: float | None
    fits_memory: bool = False
    speed: float | None = None      # per-user decode tokens/s
    floor: float | None = None
    meets_target: bool | None = None  # speed floor, ttft bound, tokens a day (None: not asked)


def targets_asked(w: Workload) -> bool:
    """The query set a speed, time to first token, volume or deadline target: solve under it too."""
    return any(v is not None for v in (w.speed_floor_tok_s, w.ttft_max_s, w.e2e_max_s, w.tokens_per_day,
                                             w.deadline_hours))


def at_value(w: Workload, vary: str, value: float, kn: Knowledge | None = None) -> Workload:
    """The workload at `value`. A context the query did not split into prompt and output is
    prompt + output: the default output, and the rest is prompt."""
    w2 = object.__new__(Workload)   # what copy.copy gives: every field a plain value but the two
    w2.__dict__.update(w.__dict__)  # lists, copied here
    w2.gpus = [GpuRequest(g.gpu_id, g.count, g.capacity_gb) for g in w.gpus]
    w2.notes = list(w.notes)
    w2.question = None
    if vary == N.USERS:
        w2.users = int(value)
    elif vary == N.CONTEXT_TOKENS:
        w2.context_tokens = int(value)
        if w2.prompt_tokens is None and kn is not None:
            out = w2.output_tokens or int(kn.defaults[N.OUTPUT_TOKENS])
            w2.output_tokens = min(out, int(value) - 1) if value > 1 else out
            w2.prompt_tokens = max(1, int(value) - w2.output_tokens)
        if w2.prompt_tokens is not None and w2.prompt_tokens > value:
            w2.prompt_tokens = int(value)
    elif vary == N.PARAMS:
        w2.size_unnamed = w2.size_unnamed or (w.model_id is None and w.params is None)
        w2.model_id = None
        w2.params = float(value)
    elif vary == N.GPU_COUNT:
        for g in w2.gpus:
            g.count = int(value)
    elif vary == N.BATCH:
        w2.batch = int(value)
    return w2


def choose_split(kn: Knowledge, r: Resolved, gpu: GPU, count: int, holds: str = N.FITS,
                 base: Scope | None = None) -> Probe:
    """A model-parallel training stack with no tp / pp asked: the first valid split
    (kb.engine.resolving.training.model_parallel_layouts, fewest model-parallel GPUs first) that holds the job on
    `count` of this GPU with the headroom a recommendation keeps (roomy_fit), else the first that
    holds it, set on the workload (the last tried where none does). Every split is computed at
    once, as columns of tp, pp and dp (kb.expr.parse.Col: each entry what that split computes
    alone); returned: the probe (under `holds`) of the split chosen. `base`: the workload's scope
    (base_scope), with formulas that read neither the card, the count nor the split computed."""
    m, w = r.model, r.workload
    splits = tr.model_parallel_layouts(count, int(m["attention_heads"]), int(m["kv_heads"]), int(m["layers"]),
                                       int(kn.constants[N.GPUS_PER_NODE]["value"]))
    if not splits:
        w.tp, w.pp = None, None
        return _probe(kn, r, w, gpu, count, holds, base)
    first, columns = _layouts(w, count, splits, kn)
    scope = gpu_scope(base_scope(r, kn) if base is None else base, gpu, count, r.precision, first)
    scope.update(columns)
    ev = Evaluated(scope)
    targets = targets_asked(w)
    evaluate(kn, ev, _probe_formulas(holds, bool(targets)))
    s = ev.scope
    speed, floor = s.get(N.DECODE_TOKENS_PER_S), s.get(N.SPEED_FLOOR_TOK_S)  # the probe's, as computed for `holds`
    evaluate(kn, ev, [N.ROOMY_FIT])

    def at(name: str, k: int) -> object:
        v = s.get(name)
        return v[k] if v.__class__ is Col else v

    def holding(k: int, name: str) -> bool:
        return bool(at(name, k)) and not (targets and not at(N.MEETS_TARGET, k))

    chosen = next((k for name in (N.ROOMY_FIT, N.FITS) for k in range(len(splits)) if holding(k, name)),
                  len(splits) - 1)
    w.tp, w.pp = splits[chosen]
    meets = bool(at(N.MEETS_TARGET, chosen)) if targets else None
    return Probe(holding(chosen, holds), at(N.PER_GPU_GB, chosen), at(N.USABLE_VRAM_GB, chosen),  # type: ignore[arg-type]
                 bool(at(N.FITS, chosen)), speed[chosen] if speed.__class__ is Col else speed,
                 floor[chosen] if floor.__class__ is Col else floor, meets)


def _layouts(w: Workload, count: int, splits: list[tuple[int, int]], kn: Knowledge) -> tuple[Layout, Scope]:
    """kb.engine.resolving.training.layout of `count` GPUs under the first split, on a copy of the workload
    (the layout reads its stack and its split), and tp, pp and dp under each split as columns
    (training.split: a model-parallel stack's layout)."""
    w2 = copy.copy(w)
    w2.tp, w2.pp = splits[0]
    each = [tr.split(count, t, p) for t, p in splits]
    return tr.layout(count, w2, kn), {name: Col.of(s[k] for s in each) for k, name in enumerate((N.TP, N.PP, N.DP))}


def _probe_formulas(holds: str, targets: bool) -> list[str]:
    """What a probe evaluates: its fit, and the figure it holds for and the target when asked."""
    names = [N.FITS, N.PER_GPU_GB, N.USABLE_VRAM_GB]
    if holds != N.FITS:
        names += [holds, N.DECODE_TOKENS_PER_S]
    if targets:
        names.append(N.MEETS_TARGET)
    return names


def _probe(kn: Knowledge, r: Resolved, w: Workload, gpu: GPU, count: int, holds: str,
           base: Scope | None = None) -> Probe:
    ev = Evaluated(gpu_scope(base_scope(r, kn) if base is None else base, gpu, count, r.precision,
                             layout_of(r, kn, count)))
    targets = targets_asked(w)
    evaluate(kn, ev, _probe_formulas(holds, bool(targets)))
    s = ev.scope
    meets = bool(s.get(N.MEETS_TARGET)) if targets else None
    return Probe(bool(s.get(holds)) and meets is not False, s.get(N.PER_GPU_GB), s.get(N.USABLE_VRAM_GB),
                 bool(s.get(N.FITS)), s.get(N.DECODE_TOKENS_PER_S), s.get(N.SPEED_FLOOR_TOK_S), meets)
