"""Capacity and reverse-sizing questions: max users, max context, largest model, how many GPUs.

In: a Workload whose `question` is set, the Knowledge. Out: the value found, checked against the
forward model (the value fits, the next one does not), per GPU; kb.engine.run then answers
the workload at that value (at_value) so every figure in the answer belongs to it.
The search only calls the forward model (resolve → scope → `fits`); it knows no formula.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kb.engine.evaluate import Evaluated, evaluate
from kb.engine.gpus import gpu_scope, layout_of
from kb.engine import training as tr
from kb.engine.scope import Resolved, base_scope, resolve
from kb.knowledge.data import Knowledge
from kb.recordtype import record
from kb.figures import num
from kb.query.workload import Workload

if TYPE_CHECKING:
    from kb.knowledge.records import GPU


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

    w2 = copy.deepcopy(w)
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


def probe(kn: Knowledge, w: Workload, vary: str, value: float, gpu: GPU, count: int,
          holds: str = "fits") -> Probe:
    w2 = at_value(w, vary, value, kn)
    if vary == "gpu_count":
        count = int(value)
    r = resolve(w2, kn)
    if r.is_training and not (w2.tp or w2.pp) and tr.is_model_parallel(w2, kn):
        choose_split(kn, r, gpu, count)
    return _probe(kn, r, w, gpu, count, holds)


def choose_split(kn: Knowledge, r: Resolved, gpu: GPU, count: int) -> None:
    """A model-parallel training stack with no tp / pp asked: the first valid split
    (kb.engine.training.model_parallel_layouts, fewest model-parallel GPUs first) that holds the job on
    `count` of this GPU with the headroom a recommendation keeps (roomy_fit), else the first that
    holds it, set on the workload (the last tried where none does)."""
    m, w = r.model, r.workload
    splits = tr.model_parallel_layouts(count, int(m["attention_heads"]), int(m["kv_heads"]), int(m["layers"]),
                                       int(kn.constants["gpus_per_node"]["value"]))
    for holds in ("roomy_fit", "fits"):      # with the headroom a recommendation keeps, else just holding it
        for t, p in splits:
            w.tp, w.pp = t, p
            if _probe(kn, r, w, gpu, count, holds).fits:
                return
    w.tp, w.pp = splits[-1] if splits else (None, None)


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


def largest_fitting(kn: Knowledge, w: Workload, vary: str, lower: float, upper: float,
                    gpu: GPU, count: int, holds: str = "fits") -> tuple[float | None, bool]:
    """The largest value in [lower, upper] that fits (None if even `lower` does not), and
    whether the search hit `upper`. Integers, except params (searched to 3 significant digits)."""
    if not probe(kn, w, vary, lower, gpu, count, holds).fits:
        return None, False
    if probe(kn, w, vary, upper, gpu, count, holds).fits:
        return upper, True
    lo, hi = lower, upper
    if vary == "params":
        while hi / lo > 1.001:
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if probe(kn, w, vary, mid, gpu, count, holds).fits else (lo, mid)
        scale = 10 ** (math.floor(math.log10(lo)) - 2)          # keep 3 significant digits,
        return math.floor(lo / scale) * scale, False             # rounded down so it still fits
    lo_i, hi_i = int(lo), int(hi)
    while hi_i - lo_i > 1:
        mid = (lo_i + hi_i) // 2
        if probe(kn, w, vary, mid, gpu, count, holds).fits:
            lo_i = mid
        else:
            hi_i = mid
    return float(lo_i), False


def fewest_scanned(kn: Knowledge, w: Workload, gpu: GPU, upper: int) -> int | None:
    """The fewest GPUs from 2 up to `upper` that hold a training job whose layout changes with
    the count (kb.engine.training.resolve_at_scale: FSDP on tens, Megatron on hundreds), so memory
    need not fall as GPUs are added: counts are tried one by one up to a node, then doubling by
    halves (12, 16, 24, 32, 48…: counts a model-parallel split divides), and the gap below the
    first that holds it is bisected (in whole nodes past a node's square of GPUs)."""
    node = int(kn.constants["gpus_per_node"]["value"])
    prev, n = 1, 2
    while n <= upper:
        if probe(kn, w, "gpu_count", n, gpu, n).fits:
            step = node if prev >= node * node and prev % node == 0 and n % node == 0 else 1  # past tens, whole nodes
            lo, hi = prev // step, n // step
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if probe(kn, w, "gpu_count", mid * step, gpu, mid * step).fits else (mid, hi)
            return hi * step
        prev, n = n, n + 1 if n < node else (n * 3 // 2 if n & (n - 1) == 0 else n * 4 // 3)
    return None


def smallest_fitting(kn: Knowledge, w: Workload, lower: int, upper: int, gpu: GPU) -> int | None:
    """Fewest GPUs that hold the job in a canonical layout (kb.engine.layout: tensor parallel that
    divides the heads inside a node, whole nodes as pipeline stages). Memory falls as GPUs are
    added, so a bisection finds the fewest that hold it; then the next canonical count up."""
    if not probe(kn, w, "gpu_count", upper, gpu, upper).fits:
        return None
    lo, hi = lower - 1, upper
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if probe(kn, w, "gpu_count", mid, gpu, mid).fits:
            hi = mid
        else:
            lo = mid
    for n in range(hi, upper + 1):
        if _canonical(kn, w, n) and probe(kn, w, "gpu_count", n, gpu, n).fits:
            return n
    return hi


# a capacity question solved on one GPU (Answer.question["answer"]): its keys depend on the
# question, their values are the engine's figures
Row = dict[str, Any]


def _layout_facts(kn: Knowledge, w: Workload, count: int) -> dict[str, int]:
    r = resolve(at_value(w, "gpu_count", count), kn)
    return {"heads": r.model["attention_heads"], "node": int(kn.constants["gpus_per_node"]["value"])}


def _canonical(kn: Knowledge, w: Workload, count: int) -> bool:
    return layout_of(resolve(at_value(w, "gpu_count", count), kn), kn, count).canonical


def step_of(vary: str, value: float) -> float:
    if vary == "params":
        return float(f"{value * 1.01:.3g}") if float(f"{value * 1.01:.3g}") > value else value * 1.01
    return value + 1


def solve_row(kn: Knowledge, w: Workload, question: str, gpu: GPU, count: int) -> Row:
    spec = kn.query["solve"][question]
    vary = spec["vary"]
    if question == "how_many_gpus":
        n = smallest_fitting(kn, w, int(spec["lower"]), int(spec["upper"]), gpu)
        if n is None:
            return {"gpu": gpu["name"], "gpu_id": gpu["id"], "value": None, "found": False}
        at = probe(kn, w, vary, n, gpu, n)
        prev = probe(kn, w, vary, n - 1, gpu, n - 1) if n > 1 else None
        return {"gpu": gpu["name"], "gpu_id": gpu["id"], "value": n, "found": True, "count": n,
                "fits_at_value": at.fits, "per_gpu_gb": at.per_gpu_gb, "usable_gb": at.usable_gb,
                "previous": n - 1 if prev else None, "fits_at_previous": prev.fits if prev else None,
                "per_gpu_gb_at_previous": prev.per_gpu_gb if prev else None,
                "layout_binding": bool(prev and prev.fits), **_layout_facts(kn, w, n)}
    holds = spec.get("holds", "fits")
    value, capped = largest_fitting(kn, w, vary, spec["lower"], spec["upper"], gpu, count, holds)
    row: Row = {"gpu": gpu["name"], "gpu_id": gpu["id"], "count": count, "value": value,
                           "found": value is not None, "at_upper_bound": capped}
    if value is not None:
        nxt = step_of(vary, value)
        at, after = probe(kn, w, vary, value, gpu, count, holds), probe(kn, w, vary, nxt, gpu, count, holds)
        row.update(fits_at_value=at.fits, per_gpu_gb=at.per_gpu_gb, usable_gb=at.usable_gb,
                   next=nxt, fits_at_next=after.fits, per_gpu_gb_at_next=after.per_gpu_gb,
                   binds=binding(after, w))
        if holds != "fits":
            row.update(speed_floor=at.floor, speed_at_value=at.speed, speed_at_next=after.speed,
                       floor_binding=after.fits_memory and not after.fits)
    elif holds != "fits":
        first = probe(kn, w, vary, spec["lower"], gpu, count, holds)
        row.update(speed_floor=first.floor, speed_at_lower=first.speed,
                   floor_binding=first.fits_memory)
    return row


def binding(after: Probe, w: Workload) -> str | None:
    """Which constraint stops the next value: memory, the targets the query set, or both."""
    if after.fits:
        return None
    parts = [] if after.fits_memory else ["memory"]
    if after.meets_target is False:
        parts.append(target_text(w))
    return " and ".join(parts) or None


def target_text(w: Workload) -> str:
    asked = [f"the speed floor ({w.speed_floor_tok_s:g} tok/s per user)" if w.speed_floor_tok_s is not None else "",
             f"time to first token under {w.ttft_max_s:g} s" if w.ttft_max_s is not None else "",
             f"{w.tokens_per_day:,.0f} tokens a day" if w.tokens_per_day is not None else ""]
    return ", ".join(a for a in asked if a) or "the target"


def verdict(kn: Knowledge, question: str, row: Row) -> str:
    spec = kn.query["solve"][question]
    if not row["found"]:
        if row.get("floor_binding"):
            return (f"Fits on {row.get('count', 1)}× {row['gpu']}, but even {num(spec['lower'])} "
                    f"{spec['unit']} get only {num(row.get('speed_at_lower'))} tokens/s each, under the "
                    f"{num(row.get('speed_floor'))} tokens/s floor.")
        return (f"Does not fit on {row.get('count', 1)}× {row['gpu']} even at "
                f"{num(spec['lower'])} {spec['unit']}.")
    fields = {
        "value": num(row["value"], 6) if question != "largest_model" else num(row["value"]),
        "value_b": num(row["value"] / kn.billion), "gpu": row["gpu"], "count": row.get("count", 1),
        "value_next": num(row.get("next"), 6), "value_next_b": num((row.get("next") or 0) / kn.billion),
        "next_gb": num(row.get("per_gpu_gb_at_next")), "usable_gb": num(row.get("usable_gb")),
        "per_gpu_gb": num(row.get("per_gpu_gb")), "value_prev": row.get("previous"),
        "prev_gb": num(row.get("per_gpu_gb_at_previous")),
        "speed": num(row.get("speed_at_value")), "speed_next": num(row.get("speed_at_next")),
        "floor": num(row.get("speed_floor")), "heads": row.get("heads"), "node": row.get("node"),
    }
    text = spec["verdict"]
    if row.get("floor_binding") and (floor_text := spec.get("verdict_floor")):
        text = floor_text
    elif row.get("layout_binding") and (layout_text := spec.get("verdict_layout")):
        text = layout_text
    for key, val in fields.items():
        text = text.replace("{" + key + "}", str(val))
    if row.get("at_upper_bound"):
        text += f" (the search stops at {num(spec['upper'])} {spec['unit']})"
    if row.get("binds"):
        text += f" Binding constraint: {row['binds']}."
    return text


def fewest_gpus(kn: Knowledge, w: Workload, gpu: GPU, lower: int, steps: int) -> int | None:
    """The fewest GPUs of this kind that hold the job, from `lower` (the count if memory split
    evenly, which no layout beats) up: replicated KV can need more."""
    for n in range(max(1, lower), max(1, lower) + steps):
        if probe(kn, w, "gpu_count", n, gpu, n).fits:
            return n
    return None
