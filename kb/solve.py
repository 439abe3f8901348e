"""Capacity and reverse-sizing questions: max users, max context, largest model, how many GPUs.

In: a Workload whose `question` is set, the Knowledge. Out: the value found, checked against the
forward model (the value fits, the next one does not), per GPU; kb.engine then answers the
workload at that value so every figure in the answer belongs to it.
The search only calls the forward model (resolve → scope → `fits`); it knows no formula.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

from kb.model import Knowledge
from kb.workload import Workload


@dataclass
class Probe:
    fits: bool                       # holds the job and meets the targets the query set
    per_gpu_gb: float | None
    usable_gb: float | None
    memory_fits: bool | None = None  # holds the job (memory alone)
    meets_target: bool | None = None  # speed floor, ttft bound, tokens a day (None: not asked)


def targets_asked(w: Workload) -> bool:
    """The query set a speed, time to first token or volume target: solve under it too."""
    return any(v is not None for v in (w.speed_floor_tok_s, w.ttft_max_s, w.tokens_per_day))


def _with(w: Workload, vary: str, value: float) -> Workload:
    w2 = copy.deepcopy(w)
    w2.question = None
    if vary == "users":
        w2.users = int(value)
    elif vary == "context_tokens":
        w2.context_tokens = int(value)
        if w2.prompt_tokens is not None and w2.prompt_tokens > value:
            w2.prompt_tokens = int(value)
    elif vary == "params":
        w2.model_id = None
        w2.params = float(value)
    elif vary == "gpu_count":
        for g in w2.gpus:
            g.count = int(value)
    return w2


def probe(kn: Knowledge, w: Workload, vary: str, value: float, gpu: dict[str, Any], count: int) -> Probe:
    from kb.engine import Evaluated, base_scope, evaluate, gpu_scope, resolve

    w2 = _with(w, vary, value)
    if vary == "gpu_count":
        count = int(value)
    r = resolve(w2, kn)
    ev = Evaluated(gpu_scope(base_scope(r, kn), gpu, count, r.precision))
    targets = targets_asked(w)
    evaluate(kn, ev, ["fits", "per_gpu_gb", "usable_vram_gb", *(["meets_target"] if targets else [])])
    s = ev.scope
    memory = bool(s.get("fits"))
    meets = s.get("meets_target") if targets else None
    return Probe(memory and meets is not False, s.get("per_gpu_gb"), s.get("usable_vram_gb"), memory,
                 None if meets is None else bool(meets))


def largest_fitting(kn: Knowledge, w: Workload, vary: str, lower: float, upper: float,
                    gpu: dict[str, Any], count: int) -> tuple[float | None, bool]:
    """The largest value in [lower, upper] that fits (None if even `lower` does not), and
    whether the search hit `upper`. Integers, except params (searched to 3 significant digits)."""
    if not probe(kn, w, vary, lower, gpu, count).fits:
        return None, False
    if probe(kn, w, vary, upper, gpu, count).fits:
        return upper, True
    lo, hi = lower, upper
    if vary == "params":
        while hi / lo > 1.001:
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if probe(kn, w, vary, mid, gpu, count).fits else (lo, mid)
        scale = 10 ** (math.floor(math.log10(lo)) - 2)          # keep 3 significant digits,
        return math.floor(lo / scale) * scale, False             # rounded down so it still fits
    lo_i, hi_i = int(lo), int(hi)
    while hi_i - lo_i > 1:
        mid = (lo_i + hi_i) // 2
        if probe(kn, w, vary, mid, gpu, count).fits:
            lo_i = mid
        else:
            hi_i = mid
    return float(lo_i), False


def smallest_fitting(kn: Knowledge, w: Workload, lower: int, upper: int, gpu: dict[str, Any]) -> int | None:
    """Fewest GPUs that hold the job (memory only falls as GPUs are added)."""
    if not probe(kn, w, "gpu_count", upper, gpu, upper).fits:
        return None
    lo, hi = lower - 1, upper
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if probe(kn, w, "gpu_count", mid, gpu, mid).fits:
            hi = mid
        else:
            lo = mid
    return hi


def step_of(vary: str, value: float) -> float:
    if vary == "params":
        return float(f"{value * 1.01:.3g}") if float(f"{value * 1.01:.3g}") > value else value * 1.01
    return value + 1


def solve_row(kn: Knowledge, w: Workload, question: str, gpu: dict[str, Any], count: int) -> dict[str, Any]:
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
                "per_gpu_gb_at_previous": prev.per_gpu_gb if prev else None}
    value, capped = largest_fitting(kn, w, vary, spec["lower"], spec["upper"], gpu, count)
    row: dict[str, Any] = {"gpu": gpu["name"], "gpu_id": gpu["id"], "count": count, "value": value,
                           "found": value is not None, "at_upper_bound": capped}
    if value is not None:
        nxt = step_of(vary, value)
        at, after = probe(kn, w, vary, value, gpu, count), probe(kn, w, vary, nxt, gpu, count)
        row.update(fits_at_value=at.fits, per_gpu_gb=at.per_gpu_gb, usable_gb=at.usable_gb,
                   next=nxt, fits_at_next=after.fits, per_gpu_gb_at_next=after.per_gpu_gb,
                   binds=binding(after, w))
    return row


def binding(after: Probe, w: Workload) -> str | None:
    """Which constraint stops the next value: memory, the targets the query set, or both."""
    if after.fits:
        return None
    parts = ["memory"] if after.memory_fits is False else []
    if after.meets_target is False:
        parts.append(target_text(w))
    return " and ".join(parts) or None


def target_text(w: Workload) -> str:
    asked = [f"the speed floor ({w.speed_floor_tok_s:g} tok/s per user)" if w.speed_floor_tok_s is not None else "",
             f"time to first token under {w.ttft_max_s:g} s" if w.ttft_max_s is not None else "",
             f"{w.tokens_per_day:,.0f} tokens a day" if w.tokens_per_day is not None else ""]
    return ", ".join(a for a in asked if a) or "the target"


def verdict(kn: Knowledge, question: str, row: dict[str, Any]) -> str:
    from kb.render import num

    spec = kn.query["solve"][question]
    if not row["found"]:
        return (f"Does not fit on {row.get('count', 1)}× {row['gpu']} even at "
                f"{num(spec['lower'])} {spec['unit']}.")
    fields = {
        "value": num(row["value"], 6) if question != "largest_model" else num(row["value"]),
        "value_b": num(row["value"] / kn.billion), "gpu": row["gpu"], "count": row.get("count", 1),
        "value_next": num(row.get("next"), 6), "value_next_b": num((row.get("next") or 0) / kn.billion),
        "next_gb": num(row.get("per_gpu_gb_at_next")), "usable_gb": num(row.get("usable_gb")),
        "per_gpu_gb": num(row.get("per_gpu_gb")), "value_prev": row.get("previous"),
        "prev_gb": num(row.get("per_gpu_gb_at_previous")),
    }
    text = spec["verdict"]
    for key, val in fields.items():
        text = text.replace("{" + key + "}", str(val))
    if row.get("at_upper_bound"):
        text += f" (the search stops at {num(spec['upper'])} {spec['unit']})"
    if row.get("binds"):
        text += f" Binding constraint: {row['binds']}."
    return text
