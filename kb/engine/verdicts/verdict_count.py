"""The verdict of a how-many-GPUs question: the count that holds the job, and what sets it.

In: the Answer, its Question (the count found, the fewest by memory alone) and the search's row;
the speed (or, under a deadline, the time sentence) kb.engine.verdicts.verdict writes; the wording,
rules/query.yaml verdict.templates count_*. Out: the verdict's sentences. Memory sets the count
unless a layout does (tensor parallel within a node) or a target the query set (a deadline, a
speed floor, a time to first token, tokens a day) needs more cards than memory does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from kb.figures import duration, num
from kb.knowledge import names as N

if TYPE_CHECKING:
    from collections.abc import Mapping

    from kb.engine.assembly.answer import Answer
    from kb.engine.assembly.answer_records import Question
    from kb.knowledge.records import Value
    from kb.knowledge.records_rules import Verdict


def target(v: Verdict, a: Answer) -> str | None:
    """The target a capacity search solved under, as the query set it; None without one
    (`v`: query.yaml verdict, the target_* templates)."""
    w, t = a.workload, cast("Mapping[str, str]", v["templates"])
    deadline = w.get("deadline_hours")
    if deadline is not None:
        return t["target_deadline"].format(duration=duration(deadline * 3600))
    parts = []                  # every target asked, as the query set it
    if w.get(N.SPEED_FLOOR_TOK_S) is not None:
        parts.append(t["target_speed"].format(speed=num(w['speed_floor_tok_s'])))
    if w.get("ttft_max_s") is not None and t.get("target_first_token"):
        pct = w.get("ttft_percentile")
        parts.append(t["target_first_token"].format(
            seconds=num(w["ttft_max_s"]), percentile=t["target_percentile"].format(p=num(pct)) if pct else ""))
    if w.get("e2e_max_s") is not None:
        parts.append(t["target_e2e"].format(seconds=num(w['e2e_max_s'])))
    if w.get("tokens_per_day") is not None and t.get("target_volume"):
        parts.append(t["target_volume"])
    if not parts and (w.get("ttft_max_s") is not None or w.get("tokens_per_day") is not None):
        return t["target_ttft"]
    return ", ".join(parts) or None


def how_many(v: Verdict, a: Answer, q: Question, row: Mapping[str, Value], speed: str | None,
             timed: bool = False) -> list[str]:
    """The count that holds it, what sets the count (memory, a valid layout, or a target asked),
    the speed; `v`: query.yaml verdict (the count_* templates); `timed`: `speed` is the time a
    deadline asked for takes (verdict_lead.lead's lead_time_training), said as it is."""
    t = v["templates"]
    n = row["value"]
    first = t["count_holds"].format(n=n, gpu=row.get("gpu"), verb="hold" if n != 1 else "holds",
                                    per_gpu=num(row.get(N.PER_GPU_GB)), usable=num(row.get("usable_gb")))
    by_memory = q.get("fewest_by_memory")
    mem = t["count_memory_alone"].format(fewest=by_memory) if by_memory and by_memory != n else ""
    if row.get("layout_binding"):
        why = t["count_layout"].format(memory=mem, n=n, heads=row.get("heads"), node=row.get("node"))
    elif row.get("target_binding") and target(v, a):          # a target, not memory, sets the count
        why = t["count_target"].format(memory=mem, previous=row["previous"], target=target(v, a))
    elif row.get("previous"):
        why = t["count_memory_binds"].format(previous=row["previous"],
                                             per_gpu=num(row.get("per_gpu_gb_at_previous")))
    else:
        why = ""
    if speed and timed:                                         # a deadline asked: the time it takes
        return [first, why, speed]
    return [first, why, t["count_speed"].format(speed=speed) if speed else ""]
