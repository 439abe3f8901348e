"""Fleets of two or more cards compared for one traffic ('how many h200 or b200 for …', '… 20 rps,
ttft p95 3 s: H200 or B200?'): each card sized as its own fleet, side by side.

In: the Knowledge, the Workload of a fleet question (kb.engine.search.replicas applies) that names
two or more cards with no count, the query. Out: the Answer of the fleet that costs least an hour
to rent (the fewest GPUs where a card has no rental price; the first card named when no card
serves the traffic), its `comparison` one Side per card in the order named, each with that card's
replicas block (None where no count of it serves the traffic within its targets).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.engine.search import replicas
from kb.engine.verdicts.verdict_fleet import weight
from kb.knowledge import names as N
from kb.query.unparse import unparse
from kb.query.workload import GpuRequest

if TYPE_CHECKING:
    from collections.abc import Callable

    from kb.engine.assembly.answer import Answer
    from kb.engine.assembly.answer_records import Side
    from kb.knowledge.data import Knowledge
    from kb.query.workload import Workload


def cards(kn: Knowledge, w: Workload) -> list[str]:
    """The cards a fleet question names, each once, when there are two or more and none counted."""
    ids: list[str] = []
    for g in w.gpus:
        if g.gpu_id is not None and g.gpu_id not in ids:
            ids.append(g.gpu_id)
    return ids if len(ids) >= 2 and w.gpu_count is None and replicas.applies(kn, w) else []


def answered(kn: Knowledge, w: Workload, query: str,
             fleet: Callable[[Workload, Knowledge, str], Answer]) -> Answer | None:
    """Each card's fleet (`fleet`: kb.engine.pipeline.fleet_answer, one card's answer), the
    cheapest to rent an hour first; None when `w` names fewer than two cards for a fleet
    question (cards())."""
    ids = cards(kn, w)
    if not ids:
        return None
    spec = kn.query.get("fleets_compared")
    most = spec["most"] if spec else len(ids)
    ids, left = ids[:most], ids[most:]
    fleets: list[tuple[Answer, Side]] = []
    for gpu_id in ids:
        one = w.copy()
        one.gpus = [GpuRequest(gpu_id, 1)]
        asked = unparse(one, kn)
        a = fleet(one, kn, asked)
        fleets.append((a, _side(kn, gpu_id, asked, a)))
    served = [(a, r) for a, _ in fleets if (r := a.replicas)]
    priced = all(r.get("usd_per_hour") for _, r in served)
    first = min(served, key=lambda ar: weight(ar[1], priced))[0] if served else fleets[0][0]
    first.query = query
    first.comparison = [s for _, s in fleets]
    if spec and left:
        first.assumptions.append(spec["note"].format(most=spec["most"], cards=", ".join(ids)))
    return first


def _side(kn: Knowledge, gpu_id: str, query: str, a: Answer) -> Side:
    """One card's fleet as a side of the comparison: its count, figures under load and plan."""
    r = a.replicas
    row = next((g for g in a.gpus if g.requested), a.gpus[0] if a.gpus else None)
    return {"field": "gpu", "value": gpu_id, "query": query, "verdict": a.verdict,
            N.FITS: r is not None, "gpu": str(kn.gpus[gpu_id]["name"]),
            "count": int(r["gpus"]) if r else None, N.TOTAL_GB: a.memory.get(N.TOTAL_GB),
            N.PER_GPU_GB: row.per_gpu_gb if row else None,
            N.USABLE_VRAM_GB: row.usable_vram_gb if row else None,
            N.DECODE_TOKENS_PER_S: r["tokens_per_s_per_user"] if r else None,
            N.PREFILL_TOKENS_PER_S: None, N.TRAIN_TOKENS_PER_S: None,
            N.USD_PER_MILLION_TOKENS: r.get("usd_per_million_tokens") if r else None,
            N.RUN_COST_USD: None, "replicas": r}
