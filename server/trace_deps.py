"""Which trace steps the page shows: those the answer's own figures depend on.

In: an Answer dict and the Knowledge it came from. Out: the set of formula names reached by
walking back from the figures the answer reports (memory, throughput, bottleneck, fit) through
the inputs each step actually read (the case taken, as recorded in the step's values), checked
against the formulas' declared dependencies (`Formula.deps`). A serving answer thus shows no
LoRA or optimizer steps, a training answer no decode steps it never used.
"""

from __future__ import annotations

from typing import Any

from kb.knowledge import Knowledge


def _name(step: dict[str, Any]) -> str:
    return str(step["rule"]).partition(" (")[0]


def figure_roots(answer: dict[str, Any], kn: Knowledge) -> set[str]:
    """The formulas behind the figures the answer shows (non-empty values only)."""
    first = answer["gpus"][0] if answer.get("gpus") else {}
    sections = (answer["throughput"], answer["memory"], answer["memory"]["breakdown"], first)
    roots = {k for sec in sections for k, v in sec.items() if k in kn.formulas and v}
    roots |= {k for k in ("fits", "headroom_gb", "gpus_needed") if k in first and k in kn.formulas}
    phases = (answer.get("bottleneck") or {}).get("arithmetic_intensity") or {}
    for phase in phases:
        roots |= {n for n in (f"{phase}_intensity", f"{phase}_bound") if n in kn.formulas}
    if phases and "ridge_point" in kn.formulas:
        roots.add("ridge_point")
    return roots


def needed(answer: dict[str, Any], kn: Knowledge) -> set[str]:
    """Every formula the shown figures read, directly or through others."""
    steps = {_name(s): s for s in answer["trace"]}
    todo, seen = list(figure_roots(answer, kn)), set()
    while todo:
        name = todo.pop()
        if name in seen or name not in steps:
            continue
        seen.add(name)
        declared = set(kn.formulas[name].deps) if name in kn.formulas else set()
        for dep in steps[name].get("values") or {}:
            if dep in declared and not _idle(steps.get(dep)):
                todo.append(dep)
    return seen


def _idle(step: dict[str, Any] | None) -> bool:
    """A step that read nothing and came to nothing (a case that does not apply here)."""
    return step is not None and not step.get("values") and not step.get("result")


def relevant(answer: dict[str, Any], kn: Knowledge) -> list[dict[str, Any]]:
    """The answer's trace steps the figures depend on, in computed order; path edges stay."""
    keep = needed(answer, kn)
    return [s for s in answer["trace"]
            if _name(s) in keep or (_name(s) not in kn.formulas and _name(s).startswith("edge "))]
