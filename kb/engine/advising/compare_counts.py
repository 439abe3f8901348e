"""Cards compared with no count: "b200 vs h200 for deepseek r1", "m4 pro or rtx 4070 for llama 3 8b".

People who compare cards for a job compare what each takes to run it: one card each when one
holds it, otherwise the fewest of each that hold it (an 8-GPU H200 node against a B200 node),
and on their own desks the format they would run there (query.yaml `local_fallback`) before a
second card. The reader marks a compared card whose count was not typed with count 0
(kb.query.finish); this module settles those counts before the answer is computed.

In: the Workload as read, the Knowledge, the query. Out: the Workload with every count set and
the sentence that says what was chosen (empty when one card of each was enough as asked).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.engine.verdicts.wording import say
from kb.figures import num
from kb.knowledge import names as N
from kb.engine import answer
from kb.engine.advising.options import valid_count

if TYPE_CHECKING:
    from kb.engine.assembly.answer import Answer
    from kb.knowledge.data import Knowledge
    from kb.knowledge.records_rules import LocalFallback
    from kb.query.workload import Workload


def compared(w: Workload) -> bool:
    """Cards compared for one job ("2x 3090 or 1x 5090"), or counts the reader left to the
    engine (count 0)."""
    return any(g.count == 0 for g in w.gpus) or (
        len(w.gpus) >= 2 and all(g.gpu_id is not None for g in w.gpus) and w.question is None)


def settle(kn: Knowledge, w: Workload, query: str) -> str:
    """Set every count-0 card of `w` (in place) to what the comparison should show; the sentence
    that says so for the verdict and the assumptions ("" when one of each fits as asked)."""
    free = [g for g in w.gpus if g.count == 0]
    for g in free:
        g.count = 1
    first = answer(w.copy(), kn, query, brief=True)
    short = [g for g in first.gpus if g.requested and not g.fits]
    if not short:
        return ""
    said, notes = [], []
    fb = local_fallback(kn, w, first)
    if fb is not None:
        w.precision = fb[N.PRECISION]
        which = (say(kn, "counts_one_short", gpu=short[0].name) if len(short) == 1 else
                 say(kn, "counts_neither") if len(short) == 2 else say(kn, "counts_none"))
        asked = first.workload.get('precision')
        said.append(say(kn, "counts_fallback", asked=asked, which=which, precision=fb['precision']))
        notes.append(say(kn, "counts_fallback_note", asked=asked, short=", ".join(
            say(kn, "counts_short", gpu=g.name, per_gpu=num(g.per_gpu_gb or 0), usable=num(g.usable_vram_gb or 0))
            for g in short), precision=fb['precision'], text=fb['text'], source=fb['source']))
        first = answer(w.copy(), kn, query, brief=True)
        short = [g for g in first.gpus if g.requested and not g.fits]
    most = int(kn.advice.get("max_gpus_per_config", 1))
    counted = []
    for g in free:
        row = next((r for r in short if r.id == g.gpu_id), None)
        if row is None or not row.gpus_needed:
            continue
        needed = valid_count(kn, first.workload, row.gpus_needed, most)
        if needed is not None and needed > 1:
            g.count = needed
            counted.append(say(kn, "config", count=needed, gpu=row.name))
    if counted:
        said.append(say(kn, "counts_fewest_also" if said else "counts_fewest"))
        notes.append(say(kn, "counts_fewest_note", counted=", ".join(counted)))
    w.notes.extend(notes)
    text = ", ".join(said)
    return text[:1].upper() + text[1:] + "." if text else ""


def local_fallback(kn: Knowledge, w: Workload, a: Answer) -> LocalFallback | None:
    """The format a plain question on one person's own cards is answered at when it names none
    and its 16-bit default does not fit them (query.yaml local_fallback); None otherwise."""
    fb = kn.query.get("local_fallback")
    if (fb is None or w.precision is not None or w.runtime is not None or w.question is not None
            or w.compare is not None or w.task in kn.query["training_tasks"] or (w.users or 1) > fb["max_users"]):
        return None
    asked = [g for g in a.gpus if g.requested]
    if not asked or any(g.id not in kn.gpus or kn.gpus[g.id].get("segment") not in fb["segments"] for g in asked):
        return None
    return fb
