"""A ranking's runtime per card: the cards the ranking's default runtime does not run, ranked under
the runtime that runs them.

In: the Workload as asked (before the engine filled it in), the Knowledge (runtimes.yaml
defaults.per_card: the runtime, and each format as it runs there), the ranking's Answer and the
engine's answer function. Out: the same Answer, or the answer whose first row ranks first, with
the rows of both in one ranking (prices.yaml sort keys, read from each row), the recommendation
made again, the cards ranked under the other runtime listed on Answer.question (per_card) and said
in the assumptions. Applies to an inference ranking (no GPU named) whose runtime was not named,
of a format the rule lists, for no more users than it says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from kb.engine.advising import advice as rightsize
from kb.engine.verdicts.verdict_room import tight
from kb.knowledge.gpu_names import gpu_values, runs_on
from kb.knowledge import names as N

if TYPE_CHECKING:
    from collections.abc import Callable

    from kb.engine.assembly.answer import Answer, GpuRow
    from kb.engine.assembly.answer_records import Question
    from kb.knowledge.data import Knowledge
    from kb.query.workload import Workload

    Answerer = Callable[[Workload, frozenset[str]], Answer]



def applies(w: Workload, kn: Knowledge) -> bool:
    """An inference ranking whose runtime the query did not name, for as many users as the
    per-card rule takes."""
    rule = kn.runtime_defaults.get("per_card")
    if rule is None or w.gpus or w.runtime is not None or w.task in kn.query["training_tasks"]:
        return False
    most = rule.get("max_users")
    return most is None or (w.users or 1) <= most


def merged(asked: Workload, kn: Knowledge, result: Answer, answer: Answerer) -> Answer:
    """The ranking with the cards its runtime does not run added under the per-card runtime."""
    rule = kn.runtime_defaults.get("per_card")
    rt = kn.runtimes.get(str(result.workload.get("runtime")))
    if not rule or rt is None or rt["id"] == rule["runtime"]:
        return result
    other_rt = kn.runtimes[rule["runtime"]]
    fmt = rule["precisions"].get(str(result.workload.get(N.PRECISION)))
    segments = set(asked.segments)
    left_out = frozenset(g["id"] for g in kn.gpus.values()
                         if not runs_on(rt, g) and runs_on(other_rt, g)
                         and (not segments or g.get("segment") in segments))
    if fmt is None or not left_out:
        return result
    w = asked.copy()
    w.runtime, w.precision = other_rt["id"], fmt
    other = answer(w, left_out)
    added = [r for r in other.gpus if r.id in left_out]
    rows = sorted([*result.gpus, *added], key=lambda r: row_key(kn, asked, r))
    base = other if rows and rows[0] in added else result
    for i, r in enumerate(rows):
        r.rank = i + 1
    base.gpus = rows
    ids = {r.id for r in added}
    said = {r.id: f"{other_rt['name']} at {fmt}" for r in added}
    here = {r.id: f"{rt['name']} at {result.workload.get('precision')}" for r in result.gpus}
    facts: dict[str, object] = dict(base.question or {})
    facts["per_card"] = {**here, **said}
    base.question = cast("Question", facts)
    names = ", ".join(r.name for r in [x for x in rows if x.id in ids][:3]) + (", …" if len(ids) > 3 else "")
    base.assumptions.insert(0,
        f"runtime per card: the rest under {rt['name']} at {result.workload.get('precision')}; "
        f"{names} {rule['text']} ({other_rt['name']} at {fmt}: {rt['name']} does not run there) "
        f"[{rule['source']}]" if base is result else
        f"runtime per card: {names} {rule['text']} ({other_rt['name']} at {fmt}); the rest under "
        f"{rt['name']} at {result.workload.get('precision')}, which does not run these [{rule['source']}]")
    if base.recommendation is not None or result.recommendation is not None:
        base.recommendation = rightsize.recommendation(kn, asked, rows, False)
    return base


def row_key(kn: Knowledge, w: Workload, r: GpuRow) -> tuple[tuple[int, float], ...]:
    """The ranking's sort keys (prices.yaml advice.sorts) read from a row; a missing value last."""
    out: list[tuple[int, float]] = []
    for name, order in rightsize.sort_keys(kn, w, []):
        v = _value(kn, w, r, name)
        if v is None:
            out.append((1, 0.0))
        else:
            x = float(v)
            out.append((0, -x if order == "desc" else x))
    return tuple(out)


def _value(kn: Knowledge, w: Workload, r: GpuRow, name: str) -> float | bool | None:
    """A sort key's value for a row: the row's own field, or what its formula reads of the row."""
    if name == N.GPU_COUNT:
        return r.count
    if name == N.ROOMY_FIT:
        return r.fits and not tight(kn, r)
    if name == N.NEEDS_SERVER_BOARD:
        gpu = kn.gpus.get(r.id)
        return 0 if w.rent or gpu is None else int(gpu_values(gpu, 1, kn.precisions["fp16"])[N.GPU_MODULE])
    if name == N.RANK_SPEED_TOKENS_PER_S:
        return r.prefill_tokens_per_s if w.task == "prefill" else r.decode_tokens_per_s
    if name == N.CONFIG_POWER_W:
        return None if r.tdp_w is None else r.tdp_w * r.count
    if name == N.CONFIG_VRAM_GB:
        return None if r.vram_gb is None else r.vram_gb * r.count
    v = getattr(r, name, None)
    return v if v is None or isinstance(v, (bool, int, float)) else None
