"""Capacity and reverse-sizing questions: max users, max context, largest model, how many GPUs.

In: a Workload whose `question` is set, the Knowledge. Out: the value found, checked against the
forward model (the value fits, the next one does not), per GPU; kb.engine.run then answers
the workload at that value (at_value) so every figure in the answer belongs to it.
The search only calls the forward model (resolve → scope → `fits`); it knows no formula.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kb.engine.resolving.bare_size import bare_size_refs
from kb.engine.search.bracket import Bracket, margin as _margin
from kb.engine.resolving.layout import count_scan
from kb.engine.search.budget import count_probe, group_size
from kb.engine.search.probes import Probes
from kb.engine.search.single_probe import Probe
from kb.knowledge.data import Knowledge
from kb.figures import duration, num
from kb.query.workload import Workload
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.knowledge.records import GPU
    from kb.knowledge.records_rules import SolvePrecision


def probe(kn: Knowledge, w: Workload, vary: str, value: float, gpu: GPU, count: int,
          holds: str = N.FITS) -> Probe:
    return Probes(kn, w).probe(vary, value, gpu, count, holds)


def largest_fitting(kn: Knowledge, w: Workload, vary: str, lower: float, upper: float,
                    gpu: GPU, count: int, holds: str = N.FITS,
                    probes: Probes | None = None) -> tuple[float | None, bool]:
    """The largest value in [lower, upper] that fits (None if even `lower` does not), and
    whether the search hit `upper`. Integers, except params (searched to 3 significant digits)."""
    p = probes or Probes(kn, w)
    probe = p.probe
    at_lower = probe(vary, lower, gpu, count, holds)
    if not at_lower.fits:
        return None, False
    if vary == N.PARAMS:
        return _largest_params(kn, p, (lower, at_lower), upper, gpu, count, holds)
    at_upper = probe(vary, upper, gpu, count, holds)
    if at_upper.fits:
        return upper, True
    lo_i, hi_i = int(lower), int(upper)
    return float(_boundary(p, vary, gpu, count, holds, (lo_i, at_lower), (hi_i, at_upper))), False


def _arch_ranges(kn: Knowledge, lower: float, upper: float) -> list[tuple[float, float]]:
    """[lower, upper] cut where the architecture assumed for a bare size changes (the reference
    nearest on a log scale, kb.engine.resolving.bare_size.bare_size_ref: the cut is the two references' geometric
    mean), largest first; each range's ends are inside it."""
    sizes = sorted(float(kn.models[r]["params_total"]) for r in bare_size_refs(kn, unnamed=True))
    cuts = [c for c in (math.sqrt(a * b) for a, b in zip(sizes, sizes[1:])) if lower < c < upper]
    ends = list(zip([lower] + [c * (1 + 1e-9) for c in cuts], [c * (1 - 1e-9) for c in cuts] + [upper]))
    return ends[::-1]


def _largest_params(kn: Knowledge, p: Probes, low: tuple[float, Probe], upper: float, gpu: GPU,
                    count: int, holds: str) -> tuple[float, bool]:
    """The largest size in (lower, upper] that fits (`lower` does), to 3 significant digits
    rounded down so it still fits, and whether it is `upper`. Memory grows with the size only while the
    architecture stays (weights grow; KV cache and activations follow the reference's layers and
    heads), and a larger reference can need less (Llama 2 13B's 40 KV heads against CodeLlama
    34B's 8): the range that holds the answer is the largest whose smallest size fits (nothing
    above a range whose smallest size does not fit fits). The bisection over the whole span is
    then run as if the sizes below that range fit and those above it did not, probing only inside
    it; where that range's top fits, the top."""
    def fits(v: float) -> bool:
        return p.probe(N.PARAMS, v, gpu, count, holds).fits

    lower = low[0]
    ranges = _arch_ranges(kn, lower, upper)
    found = _fitting_range(p, ranges, low, upper, gpu, count, holds)
    if found is None:
        return upper, True
    bottom, top, at_bottom = found
    inside = Bracket(p, gpu, count, holds, (bottom, at_bottom))
    lo, hi = lower, upper
    fine = _precision(kn)
    while hi / lo > fine["tolerance"]:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if (mid < bottom or (mid <= top and inside.fits(mid))) else (lo, mid)
    lo = max(lo, bottom)
    if hi > top and top > lo and top < upper and fits(top):
        lo = top
    digits = fine["digits"]
    value = _floor_digits(lo, digits)
    if value >= bottom or fits(value):          # in [bottom, lo], so it fits; below the range,
        return value, False                     # asked
    return (_floor_digits(lo, digits + 1) if _floor_digits(lo, digits + 1) >= bottom else lo), False


def _precision(kn: Knowledge) -> SolvePrecision:
    """How finely the parameters of the largest model are searched (query.yaml
    solve.largest_model.precision)."""
    fine = kn.query["solve"]["largest_model"]["precision"]
    if fine is None:
        raise ValueError("rules/query.yaml solve.largest_model needs its `precision`")
    return fine


def _fitting_range(p: Probes, ranges: list[tuple[float, float]], low: tuple[float, Probe], upper: float,
                   gpu: GPU, count: int, holds: str) -> tuple[float, float, Probe] | None:
    """None if `upper` fits; else the first of `ranges` (largest first) whose smallest size fits
    (`low`'s size does: its probe), else the last, with that size's probe."""
    lower = low[0]
    if p.probe(N.PARAMS, upper, gpu, count, holds).fits:
        return None
    for b, t in ranges:
        if b == lower:
            return b, t, low[1]
        if (found := p.probe(N.PARAMS, b, gpu, count, holds)).fits:
            return b, t, found
    return (*ranges[-1], low[1])


def _floor_digits(v: float, digits: int) -> float:
    scale: int | float = 10 ** (math.floor(math.log10(v)) - digits + 1)   # keep `digits`
    return math.floor(v / scale) * scale                                   # rounded down


def _boundary(p: Probes, vary: str, gpu: GPU, count: int, holds: str, low: tuple[int, Probe],
              high: tuple[int, Probe]) -> int:
    """The largest integer value that fits, between `low` (fits) and `high` (does not). The
    bracket is narrowed at the value where the margin (_margin), drawn as a straight line
    between the bracket's ends, crosses zero (regula falsi, with the Illinois rule: an end kept
    twice in a row counts half its margin): memory grows about linearly with users, context or
    batch, so this lands next to the boundary in a few probes. Where the line gives nothing, or
    three steps have not halved the bracket, the step is a bisection's. Each probe keeps the
    bracket (fits below, does not above), so the value found is the bisection's: the largest
    that fits, with the next one not fitting."""
    (lo, at_lo), (hi, at_hi) = low, high
    m_lo, m_hi = _margin(at_lo), _margin(at_hi)
    last, slow, width = "", 0, hi - lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if m_lo is not None and m_hi is not None and m_hi > m_lo and slow < 3:
            mid = min(max(int(lo + (hi - lo) * (-m_lo / (m_hi - m_lo))), lo + 1), hi - 1)
        at = p.probe(vary, mid, gpu, count, holds)
        if at.fits:
            lo, m_lo = mid, _margin(at)
            if last == "lo" and m_hi is not None:
                m_hi /= 2
            last = "lo"
        else:
            hi, m_hi = mid, _margin(at)
            if last == "hi" and m_lo is not None:
                m_lo /= 2
            last = "hi"
        if hi - lo <= width // 2:
            slow, width = 0, hi - lo
        else:
            slow += 1
    return lo


def fewest_scanned(kn: Knowledge, w: Workload, gpu: GPU, upper: int) -> int | None:
    """The fewest GPUs from 2 up to `upper` that hold a training job whose layout changes with the
    count (kb.engine.resolving.training.resolve_at_scale: FSDP on tens, Megatron on hundreds): counts one by
    one up to a node, then growing by half (12, 16, 24, 32…: counts a split divides), and the gap
    below the first that holds it bisected (in whole nodes past a node's square of GPUs)."""
    node = int(kn.constants[N.GPUS_PER_NODE]["value"])
    p = Probes(kn, w)
    one, two = p.resolved(N.GPU_COUNT, 1).workload, p.resolved(N.GPU_COUNT, 2).workload
    st = kn.sharding.get("strategies", {}).get(two.sharding or "")   # plain data parallel at every count:
    if st and two.sharding == one.sharding and not (st["stage"] or st.get(N.MODEL_PARALLEL) or two.offload):
        return None                     # every GPU keeps its copy, so no count holds what one does not
    scan = count_scan(node, upper)
    for k, n in enumerate(scan):        # the counts in order, the gap below the first that holds it bisected
        if p.probe(N.GPU_COUNT, n, gpu, n).fits:
            prev = scan[k - 1] if k else 1
            step = node if prev >= node * node and prev % node == 0 and n % node == 0 else 1  # past tens, whole nodes
            lo, hi = prev // step, n // step
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if p.probe(N.GPU_COUNT, mid * step, gpu, mid * step).fits else (mid, hi)
            return hi * step
    return None


def smallest_fitting(kn: Knowledge, w: Workload, lower: int, upper: int, gpu: GPU,
                     probes: Probes | None = None) -> int | None:
    """Fewest GPUs that hold the job in a canonical layout (kb.engine.resolving.layout: tensor parallel that
    divides the heads inside a node, whole nodes as pipeline stages). Memory falls as GPUs are
    added, so a bisection finds the fewest that hold it; then the next canonical count up."""
    p = probes or Probes(kn, w)
    probe = p.probe
    if not probe(N.GPU_COUNT, upper, gpu, upper).fits:
        return None
    lo, hi = lower - 1, upper
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if probe(N.GPU_COUNT, mid, gpu, mid).fits:
            hi = mid
        else:
            lo = mid
    for n in range(hi, upper + 1):
        if _canonical(p, n) and probe(N.GPU_COUNT, n, gpu, n).fits:
            return n
    return hi


# a capacity question solved on one GPU (Answer.question["answer"]): its keys depend on the
# question, their values are the engine's figures
Row = dict[str, Any]


def cards_at_once(kn: Knowledge, most: int = 256) -> int:
    """How many cards a how-many search over the catalogue runs side by side, at most `most`
    (kb.engine.search.budget.group_size; a card's search: the bisection of the count range, two more)."""
    spec = kn.query["solve"]["how_many_gpus"]
    return group_size(math.ceil(math.log2(int(spec["upper"]) - int(spec["lower"]) + 2)) + 2, most)


def how_many_rows(kn: Knowledge, w: Workload, p: Probes, first: int, last: int) -> list[Row]:
    """solve_row("how_many_gpus") on each of p.cards[first:last], where p.shared_counts(): the
    cards' searches run side by side, each step one probe per card still searching, all computed
    at once (Probes.probes_at). Each card takes the steps smallest_fitting takes on it alone (the
    bisection, then the next canonical count up), so each row is the one solve_row gives."""
    spec = kn.query["solve"]["how_many_gpus"]
    lower, upper = int(spec["lower"]), int(spec["upper"])
    cards = range(first, last)
    at = _SideBySide(p)
    at_upper = at.fits({i: upper for i in cards})
    bounds = _bisected(at, {i: (lower - 1, upper) for i in cards if at_upper[i]})
    found: dict[int, int | None] = {i: None for i in cards}
    found.update(_canonical_up(p, at, bounds, upper))
    counts = {i: n for i, n in found.items() if n is not None}
    at_n = at.probes(counts) if counts else {}
    before = {i: n - 1 for i, n in counts.items() if n > 1}
    at_prev = at.probes(before) if before else {}
    return [how_many_row(p, p.cards[i], found[i], at_n.get(i), at_prev.get(i)) for i in cards]


class _SideBySide:
    """Probes.probes_at, each (card, count) computed once (a row's figures read the counts the
    search ended at again); each asked counts against the budget."""

    def __init__(self, p: Probes) -> None:
        self.p = p
        self.seen: dict[tuple[int, int], Probe] = {}

    def probes(self, counts: dict[int, int]) -> dict[int, Probe]:
        new = {i: n for i, n in counts.items() if (i, n) not in self.seen}
        for _ in range(len(counts) - len(new)):
            count_probe()
        if new:
            self.seen.update(((i, new[i]), at) for i, at in self.p.probes_at(new).items())
        return {i: self.seen[(i, n)] for i, n in counts.items()}

    def fits(self, counts: dict[int, int]) -> dict[int, bool]:
        return {i: at.fits for i, at in self.probes(counts).items()}


def _bisected(at: _SideBySide, bounds: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """Each card's bracket (the low end does not hold the job, the high end does) narrowed to
    neighbours, a bisection's step on every card at once."""
    while searching := {i: (lo + hi) // 2 for i, (lo, hi) in bounds.items() if hi - lo > 1}:
        for i, ok in at.fits(searching).items():
            lo, hi = bounds[i]
            bounds[i] = (lo, searching[i]) if ok else (searching[i], hi)
    return bounds


def _canonical_up(p: Probes, at: _SideBySide, bounds: dict[int, tuple[int, int]], upper: int) -> dict[int, int]:
    """From each card's fewest that hold the job, the next canonical count up that holds it (the
    bisection's where none up to `upper` does)."""
    found: dict[int, int] = {}
    scan = {i: hi for i, (_, hi) in bounds.items()}
    while scan:
        for i, n in list(scan.items()):
            while n <= upper and not _canonical(p, n):
                n += 1
            if n > upper:
                found[i] = bounds[i][1]
                del scan[i]
            else:
                scan[i] = n
        if scan:
            for i, ok in at.fits(scan).items():
                if ok:
                    found[i] = scan.pop(i)
                else:
                    scan[i] += 1
    return found


def _layout_facts(p: Probes, count: int) -> dict[str, int]:
    kn, r = p.kn, p.resolved(N.GPU_COUNT, count)
    return {"heads": r.model["attention_heads"], "node": int(kn.constants[N.GPUS_PER_NODE]["value"])}


def _canonical(p: Probes, count: int) -> bool:
    return p.layout(N.GPU_COUNT, count, count).canonical


def step_of(kn: Knowledge, vary: str, value: float) -> float:
    """The next value up a verdict weighs: one more, or for the parameters a step of
    query.yaml solve.largest_model.precision (next_ratio, to its digits)."""
    if vary == N.PARAMS:
        fine = _precision(kn)
        up = value * fine["next_ratio"]
        shown = float(f"{up:.{fine['digits']}g}")
        return shown if shown > value else up
    return value + 1


def solve_row(kn: Knowledge, w: Workload, question: str, gpu: GPU, count: int,
              probes: Probes | None = None) -> Row:
    """The question solved on `count` of `gpu`; `probes`: shared by the rows of one question."""
    p = probes or Probes(kn, w)
    probe = p.probe
    spec = kn.query["solve"][question]
    vary = spec["vary"]
    if question == "how_many_gpus":
        n = smallest_fitting(kn, w, int(spec["lower"]), int(spec["upper"]), gpu, p)
        if n is None:
            return how_many_row(p, gpu, None, None, None)
        return how_many_row(p, gpu, n, probe(vary, n, gpu, n), probe(vary, n - 1, gpu, n - 1) if n > 1 else None)
    holds = spec.get("holds", N.FITS)
    value, capped = largest_fitting(kn, w, vary, spec["lower"], spec["upper"], gpu, count, holds, p)
    row: Row = {"gpu": gpu["name"], "gpu_id": gpu["id"], "count": count, "value": value, "found": value is not None, "at_upper_bound": capped}
    if value is not None:
        nxt = step_of(kn, vary, value)
        at, after = probe(vary, value, gpu, count, holds), probe(vary, nxt, gpu, count, holds)
        row.update(fits_at_value=at.fits, per_gpu_gb=at.per_gpu_gb, usable_gb=at.usable_gb,
                   next=nxt, fits_at_next=after.fits, per_gpu_gb_at_next=after.per_gpu_gb,
                   binds=binding(after, w))
        if holds != N.FITS:
            row.update(speed_floor=at.floor, speed_at_value=at.speed, speed_at_next=after.speed,
                       floor_binding=after.fits_memory and not after.fits)
    elif holds != N.FITS:
        first = probe(vary, spec["lower"], gpu, count, holds)
        row.update(speed_floor=first.floor, speed_at_lower=first.speed, floor_binding=first.fits_memory)
    return row


def how_many_row(p: Probes, gpu: GPU, n: int | None, at: Probe | None, prev: Probe | None) -> Row:
    if n is None or at is None:
        return {"gpu": gpu["name"], "gpu_id": gpu["id"], "value": None, "found": False}
    return {"gpu": gpu["name"], "gpu_id": gpu["id"], "value": n, "found": True, "count": n,
            "fits_at_value": at.fits, N.PER_GPU_GB: at.per_gpu_gb, "usable_gb": at.usable_gb,
            "previous": n - 1 if prev else None, "fits_at_previous": prev.fits if prev else None,
            "per_gpu_gb_at_previous": prev.per_gpu_gb if prev else None,
            "layout_binding": bool(prev and prev.fits),
            # one fewer holds the job but misses the target the query set ('in 30 days')
            "target_binding": bool(prev and prev.fits_memory and prev.meets_target is False),
            **_layout_facts(p, n)}


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
             f"end-to-end latency under {w.e2e_max_s:g} s" if w.e2e_max_s is not None else "",
             f"{w.tokens_per_day:,.0f} tokens a day" if w.tokens_per_day is not None else "",
             f"the run within {duration(w.deadline_hours * 3600)}" if w.deadline_hours is not None else ""]
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
        N.PER_GPU_GB: num(row.get(N.PER_GPU_GB)), "value_prev": row.get("previous"),
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


def fewest_gpus(kn: Knowledge, w: Workload, gpu: GPU, lower: int, steps: int,
                probes: Probes | None = None) -> int | None:
    """The fewest GPUs of this kind that hold the job, from `lower` (the count if memory split
    evenly, which no layout beats) up: replicated KV can need more. The counts are evaluated a
    node's worth at a time, as columns (Probes.fits_over_counts)."""
    probes = probes or Probes(kn, w)
    start = max(1, lower)
    block = int(kn.constants[N.GPUS_PER_NODE]["value"])
    for first in range(start, start + steps, block):   # a node's worth of counts at a time
        counts = list(range(first, min(first + block, start + steps)))
        fits = probes.fits_over_counts(gpu, counts)
        if fits is None:                                # a training job: count by count
            fits = [probes.probe(N.GPU_COUNT, n, gpu, n).fits for n in counts]
        for n, ok in zip(counts, fits):
            if ok:
                return n
    return None
