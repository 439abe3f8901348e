"""Headroom in a which-GPU verdict: whether a configuration is tight, and the words that say so.

In: a ranked GPU row (kb.engine.assembly.answer.GpuRow), the answer's rows and the Knowledge (formulas.yaml
recommend_headroom_fraction, the share of its need a recommended configuration keeps spare for
the memory estimate's error: the `roomy_fit` formula). Out: the sentence that calls a pick tight
and names the cheapest roomy configuration beside it (worded by query.yaml verdict.templates), and whether an alternative it names is tight.
A "cheapest" ranking puts price before headroom (prices.yaml sorts.cost), so the verdict says
plainly when the configuration it leads with, or a cheaper one it names, is short of that margin.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from kb.figures import num
from kb.knowledge import names as N

if TYPE_CHECKING:
    from collections.abc import Callable
    from kb.engine.assembly.answer import Answer, GpuRow
    from kb.knowledge.data import Knowledge


def margin(kn: Knowledge) -> float:
    """The spare share a recommendation keeps (formulas.yaml recommend_headroom_fraction)."""
    return float(kn.constants[N.RECOMMEND_HEADROOM_FRACTION]["value"])


def tight(kn: Knowledge, g: GpuRow) -> bool:
    """Fits, with less spare per GPU than the margin (the roomy_fit formula, false)."""
    return bool(g.fits and g.headroom_gb is not None and g.per_gpu_gb
                and g.headroom_gb < g.per_gpu_gb * margin(kn))


def more_context(a: Answer, pick: GpuRow) -> float | None:
    """Tokens of context per user the pick's spare memory holds beyond the context sized, when the
    KV cache splits over its GPUs with the layers (no tensor-parallel copies): the spare of every
    card over the KV cache's GB per token (the answer's memory is the pick's); else None."""
    mem, w = a.memory, a.workload
    kv, tokens = mem.get("breakdown", {}).get(N.KV_CACHE_GB), (w.get(N.USERS) or 1) * (w.get(N.CONTEXT_TOKENS) or 0)
    parallel = w.get("parallel")
    tp = parallel[N.TP] if parallel else 1
    if not kv or not tokens or tp != 1 or mem.get("gpu") != pick.name or pick.headroom_gb is None:
        return None
    return pick.headroom_gb * pick.count / (kv / tokens) / (w.get(N.USERS) or 1)


def tight_sentences(kn: Knowledge, a: Answer, pick: GpuRow, rows: list[GpuRow],
                    price: Callable[[GpuRow], str | None]) -> list[str]:
    """For a tight pick: what it gives up, and the first configuration of the ranking with the
    margin (`price`: what a configuration costs as the question counts it)."""
    if not tight(kn, pick):
        return []
    training = "training" in a.bottleneck
    extra = None if training else more_context(a, pick)
    t = kn.query["verdict"]["templates"]
    gives = (t["tight_more_context"].format(tokens=f"{round(extra, 1 - int(math.log10(extra))):,.0f}")
             if extra and extra >= 1 else t["tight_training"] if training else t["tight_inference"])
    said = [t["tight"].format(per_gpu=num(pick.per_gpu_gb), usable=num(pick.usable_vram_gb),
                              pct=f"{100 * margin(kn):.0f}", gives=gives)]
    roomy = [g for g in rows if g.fits and g is not pick and not tight(kn, g) and g.meets_target is not False]
    if roomy:
        g = roomy[0]
        cost = price(g)
        said.append(t["roomier"].format(config=f"{g.count}× {g.name}", cost=f" ({cost})" if cost else ""))
    return said
