"""A how-many question over the catalogue for a training job no one card's copy of it holds.

In: the Knowledge, the question's Workload (no GPU named), its resolution and the catalogue
cards the runtime runs on. Out: those cards split in two: the cards that can hold the copy of
the model state the runtime's own data parallel keeps on every GPU (kb.engine.resolving.training.copy_gb),
searched as before (kb.engine.search.solve); and the rows of the others, each at the count that holds
the job in the layout people run at that scale (runtimes.yaml sharding.at_scale: FSDP over the
GPUs), as `how many <card> for …` finds it on that card alone: the cards of the platforms the
training stack supports well (runtimes.yaml well_supported), where such runs are made.

On such a card the workload at a count is the same whichever of them it is (the layout follows
the count once one card cannot hold the copy), so the cards are probed side by side: the counts
from 2 up to a node one by one, then growing by half (kb.engine.resolving.layout.count_scan), each
count one evaluation over every card still searching (kb.engine.search.probes.Probes.probes_at), and the gap below the first count that holds the job on a card bisected. Memory per
GPU falls as the sharded state is split over more GPUs, so that is the fewest that hold it, the
count the card's own search finds. The scan stops below the first count where the layout becomes
model parallel (Megatron: each card's split is its own); the cards that need more are said,
not sized, and where no card holds the job below it the card with the most memory is searched
alone as a question naming it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.engine.search import solve

from kb.engine.resolving import training as tr
from kb.engine.resolving.layout import count_scan
from kb.engine.search.probes import Probes
from kb.engine.resolving.inputs import stack_platforms
from kb.query.workload import GpuRequest
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.engine.resolving.scope import Resolved
    from kb.engine.search.solve import Row
    from kb.knowledge.data import Knowledge
    from kb.knowledge.records import GPU
    from kb.query.workload import Workload


def split_off(kn: Knowledge, w: Workload, got: Resolved,
              targets: list[tuple[GPU, int]]) -> tuple[list[tuple[GPU, int]], list[Row], list[str]]:
    """(the targets searched as before, the rows of the cards that cannot hold the copy, what
    the answer warns of the cards left unsized)."""
    if not got.is_training:
        return targets, [], []
    state_gb = tr.copy_gb(w, kn, got.runtime, float(got.model["params_total"]))   # as the query asked it
    well = stack_platforms(got.runtime, str(got.workload.task))   # the platforms such runs are made on
    small = [g for g, _ in targets if state_gb is not None and float(g["memory_gb"] or 0) < state_gb
             and g["vendor"] in well]
    if not small:
        return targets, [], []
    strategies = kn.sharding.get("strategies", {})
    upper = int(kn.query["solve"]["how_many_gpus"]["upper"])
    split_at, split_by = min(((r["min_gpus"], strategies[r["strategy"]]["name"].split(" ")[0])
                              for r in kn.sharding.get("at_scale") or [] if got.workload.task in r["tasks"]
                              and strategies[r["strategy"]].get(N.MODEL_PARALLEL)), default=(upper + 1, ""))
    scaled = w.copy()
    scaled.gpus = [GpuRequest(small[0]["id"], 1)]
    p = Probes(kn, scaled, small)
    found = _fewest(p, kn, min(split_at - 1, upper))
    if not found:       # none below the model-parallel layouts: the card with the most memory, alone
        big = max(small, key=lambda g: (float(g["memory_gb"] or 0), g["bandwidth_gb_s"] or 0))
        alone = w.copy()
        alone.gpus = [GpuRequest(big["id"], 1)]
        row = solve.solve_row(kn, alone, "how_many_gpus", big, 1, Probes(kn, alone, [big]))
        rows = [row] + [solve.how_many_row(p, g, None, None, None) for g in small if g is not big]
    else:
        rows = [solve.how_many_row(p, g, found.get(i), p.probe(N.GPU_COUNT, found[i], g, found[i])
                                   if i in found else None,
                                   p.probe(N.GPU_COUNT, found[i] - 1, g, found[i] - 1) if found.get(i, 0) > 1 else None)
                for i, g in enumerate(small)]
    left = sum(not r["found"] for r in rows) if split_at <= upper else 0
    text = [f"{left} of the GPUs cannot hold {state_gb:,.0f} GB of model state each and would need more "
            f"than {split_at - 1}, where the layout splits the model ({split_by}): not sized here; name one "
            f"to size it"] if left else []
    small_ids = {g["id"] for g in small}
    return [t for t in targets if t[0]["id"] not in small_ids], rows, text


def _fewest(p: Probes, kn: Knowledge, last: int) -> dict[int, int]:
    """Each card's fewest GPUs from 2 to `last` that hold the job (see the module's docstring)."""
    scan = count_scan(int(kn.constants[N.GPUS_PER_NODE]["value"]), last)
    if scan and scan[-1] != last:
        scan.append(last)
    left = list(range(len(p.cards)))
    found: dict[int, int] = {}
    prev = 1
    for n in scan:
        at = p.fits_at({i: n for i in left})
        for i in [i for i in left if at[i]]:
            lo, hi = prev, n
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if p.probe(N.GPU_COUNT, mid, p.cards[i], mid).fits else (mid, hi)
            found[i] = hi
        left = [i for i in left if not at[i]]
        if not left:
            break
        prev = n
    return found
