"""Which trace steps the page shows: those the answer's own figures depend on.

In: an Answer and the Knowledge it came from. Out: the set of formula names reached by
walking back from the figures the answer reports (memory, throughput, bottleneck, fit) through
the inputs each step actually read (the case taken, as recorded in the step's values), checked
against the formulas' declared dependencies (`Formula.deps`). A serving answer thus shows no
LoRA or optimizer steps, a training answer no decode steps it never used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from kb.knowledge.build import Knowledge
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.engine.assembly.answer import Answer, Step


def figure_roots(answer: Answer, kn: Knowledge) -> set[str]:
    """The formulas behind the figures the answer shows (non-empty values only)."""
    first = answer.gpus[0] if answer.gpus else None
    sections: list[Mapping[str, object]] = [answer.throughput, answer.memory, answer.memory["breakdown"]]
    if first is not None:
        sections.append(vars(first))
    roots = {k for sec in sections for k, v in sec.items() if k in kn.formulas and v}
    if first is not None:
        roots |= {k for k in (N.FITS, N.HEADROOM_GB, N.GPUS_NEEDED) if k in kn.formulas}
    phases = answer.bottleneck.get("arithmetic_intensity") or {}
    for phase in phases:
        roots |= {n for n in (f"{phase}_intensity", f"{phase}_bound") if n in kn.formulas}
    if phases and N.RIDGE_POINT in kn.formulas:
        roots.add(N.RIDGE_POINT)
    return roots


def needed(answer: Answer, kn: Knowledge) -> set[str]:
    """Every formula the shown figures read, directly or through others."""
    steps = {s.rule_id: s for s in answer.trace}
    todo, seen = list(figure_roots(answer, kn)), set()
    while todo:
        name = todo.pop()
        if name in seen or name not in steps:
            continue
        seen.add(name)
        declared = set(kn.formulas[name].deps) if name in kn.formulas else set()
        for dep in steps[name].values:
            if dep in declared and not _idle(steps.get(dep)):
                todo.append(dep)
    return seen


def _idle(step: Step | None) -> bool:
    """A step that read nothing and came to nothing (a case that does not apply here)."""
    return step is not None and not step.values and not step.result


def relevant(answer: Answer, kn: Knowledge) -> list[Step]:
    """The answer's trace steps the figures depend on, in computed order; the path's edges (the
    steps that are no formula) stay."""
    keep = needed(answer, kn)
    return [s for s in answer.trace if s.rule_id in keep or s.rule_id not in kn.formulas]
