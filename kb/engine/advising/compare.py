"""The sides of a comparison: "llama 3.1 70b fp8 vs int4 on h100", "vllm vs llama.cpp",
"llama 3.1 8b vs qwen3 8b". The GPUs' own comparison is the GPU table; this is for one field
with two or more values (Workload.compare).

In: the Workload as the query gave it, the answer to its first value, the Knowledge. Out: one
Side per value (the first is the answer itself): the value, the query that answers that side
alone (kb.query.unparse) and that answer's figures, for every surface to show side by side.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.engine.assembly.answer import Answer
from kb.knowledge import names as N
from kb.engine import answer
from kb.query.unparse import unparse

if TYPE_CHECKING:
    from kb.engine.assembly.answer_records import Side
    from kb.knowledge.data import Knowledge
    from kb.query.workload import Workload


def sides(kn: Knowledge, asked: Workload, first: Answer) -> list[Side]:
    """Each value of asked.compare answered on its own; the first value's answer is `first`."""
    cmp = asked.compare
    if cmp is None:
        return []
    out: list[Side] = []
    for i, value in enumerate(cmp["values"]):
        w = asked.copy()
        w.compare = None
        setattr(w, cmp["field"], value)
        if cmp["field"] == "runtime" and w.precision is None:
            # each side at the format its runtime's users load (runtimes.yaml default_precision:
            # Q4_K_M under llama.cpp, 4-bit under MLX), named in each side's query; a runtime with
            # none, or a model published as narrow, at the format the question was sized at
            w.precision = _side_format(kn, w, str(value), first)
        if cmp["field"] == N.PARAMS:
            w.model_id = None
        query = unparse(w, kn)
        a = first if i == 0 and w.precision == first.workload.get(N.PRECISION) else answer(w, kn, query)
        side = _side(cmp["field"], value, query, a)
        if cmp["field"] == N.PRECISION:
            side["quality_rank"] = quality_rank(kn, value)
        out.append(side)
    return out


def _side_format(kn: Knowledge, w: Workload, runtime: str, first: Answer) -> str | None:
    """The format one side of a runtime comparison is sized at: its runtime's default_precision,
    unless the model's own checkpoint is as narrow; else the format the question was sized at."""
    asked = first.workload.get(N.PRECISION)
    rt = kn.runtimes.get(runtime)
    fmt = kn.precisions.get(str(rt.get("default_precision"))) if rt is not None else None
    model = kn.models.get(w.model_id or "")
    native = kn.precisions.get(str(model.get("native_precision"))) if model is not None else None
    if fmt is None or (native is not None and native["bits_per_weight"] <= fmt["bits_per_weight"]):
        return str(asked) if asked is not None else None
    return str(fmt["id"])


def quality_rank(kn: Knowledge, precision: object) -> int | None:
    """The quality cost the rules rank a precision at (the options of rules/prices.yaml that
    change the weights to it: quality_rank, 0 no quality cost); None where none ranks it."""
    for rule in kn.advice.get("options") or []:
        if rule.get(N.PRECISION) == precision and rule.get("quality_rank") is not None:
            return int(rule["quality_rank"])
    return None


def _side(field: str, value: object, query: str, a: Answer) -> Side:
    rows = [g for g in a.gpus if g.requested] or a.gpus[:1]
    row = rows[0] if rows else None
    return {"field": field, "value": value, "query": query, "verdict": a.verdict,
            N.FITS: row.fits if row else None, "gpu": row.name if row else None,
            "count": row.count if row else None, N.TOTAL_GB: a.memory.get(N.TOTAL_GB),
            N.PER_GPU_GB: row.per_gpu_gb if row else None,
            N.USABLE_VRAM_GB: row.usable_vram_gb if row else None,
            N.GPUS_NEEDED: row.gpus_needed if row else None,
            N.DECODE_TOKENS_PER_S: row.decode_tokens_per_s if row else None,
            N.PREFILL_TOKENS_PER_S: row.prefill_tokens_per_s if row else None,
            N.TRAIN_TOKENS_PER_S: row.train_tokens_per_s if row else None,
            N.USD_PER_MILLION_TOKENS: row.usd_per_million_tokens if row else None,
            N.RUN_COST_USD: row.run_cost_usd if row else None,
            N.PRECISION: a.workload.get(N.PRECISION)}
