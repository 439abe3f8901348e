"""The sources' claims checked against the engine's figures.

In: the Knowledge (sources.yaml claims), the Evaluated scope over every candidate and the answer
GPU's own view, and the candidates' rank order. Out: the claims that disagree and those that
agree, each with the claimed and computed figure, its formula and the source.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from kb.engine.evaluate import Evaluated, evaluate
from kb.expr.parse import Col, Failed, at, guarded
from kb.knowledge.data import Claim, Knowledge
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.knowledge.records import Value
    from kb.engine.assembly.answer_records import ClaimChecked


def check_claims(kn: Knowledge, every: Evaluated, primary: Evaluated,
                 order: list[int]) -> tuple[list[ClaimChecked], list[ClaimChecked]]:
    """Each source's claim against the engine: a per-GPU claim for every candidate (in rank
    order), any other for the answer's GPU."""
    differ: list[ClaimChecked] = []
    agree: list[ClaimChecked] = []
    for claim in kn.claims:
        ev = every if claim.per_gpu else primary
        s = ev.scope
        needs_when, needs_value = kn.derived.claim_formulas[claim.id]
        if claim.applies_when is None:
            applies: Value | Col | Failed = True
        else:
            if needs_when:
                evaluate(kn, ev, needs_when)
            applies = guarded(claim.applies_when.fn, s)
        if applies.__class__ is Col:
            where = [i for i in order if (ok := applies[i]).__class__ is not Failed and ok]
        elif applies.__class__ is Failed or not applies:
            continue
        else:
            where = order if claim.per_gpu else [0]
        if needs_value:
            evaluate(kn, ev, needs_value)
        computed = guarded(claim.computed.fn, s)
        gpu = s.get(N.GPU_NAME)
        for i in where:
            value = at(computed, i)
            if value is None or value.__class__ is Failed or (
                    value.__class__ is float and not math.isfinite(value)):
                continue
            if any(at(s.get(n), i) is None for n in claim.computed.names):
                continue
            entry = _claim_entry(kn, claim, value, at(gpu, i) if claim.per_gpu else None)
            (agree if entry["agrees"] else differ).append(entry)
    return differ, agree


def _claim_entry(kn: Knowledge, claim: Claim, computed: float, gpu: str | None) -> ClaimChecked:
    value = claim.value
    if isinstance(value, (tuple, list)):
        lo, hi = value
        agrees = lo <= computed <= hi
        mid = (lo + hi) / 2
        claimed: float | list[float] = [lo, hi]
    else:
        agrees = abs(computed - value) <= claim.tolerance * abs(value)
        mid = value
        claimed = value
    src = kn.sources.get(claim.source)
    return {"id": claim.id, "source": claim.source, "source_title": src["title"] if src else None,
            "claim": claim.text, "claimed": claimed, "computed": computed, "unit": claim.unit,
            "difference_pct": (computed - mid) / mid * 100 if mid else None,
            "agrees": agrees, "gpu": gpu, "formula": claim.computed.text,
            "note": claim.note, "rule": claim.where}
