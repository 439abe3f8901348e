"""Every formula computed on the reference workloads: one that is never a finite number is an error.

In: built Knowledge and the positioned rule files. Out: RuleErrors (file:line:col) for
- a reference query (query.yaml reference_queries) that does not read, or names no GPU;
- a formula that gives no finite number on any reference workload (a `… / 0`, or a constant
  that makes it so): the formula where it first fails, not each one that reads it; where a
  constant of 0 is what every failing division divides by, the error stands at that constant.
A formula like that would otherwise pass validation and leave answers with a figure unknown.
The reference queries are a handful of representative workloads (serving, training, a capacity
question, a named card and a bare memory size), each evaluated on the card it names.
"""

from __future__ import annotations

import math

from kb.errors import KbError, RuleError
from kb.knowledge.loader import Doc, Path_
from kb.knowledge.data import Knowledge
from kb.engine.flows import sweep
from kb.query.parse import parse

DIVISION = "division by zero"


def check(kn: Knowledge, query_doc: Doc, formulas_doc: Doc) -> list[RuleError]:
    errors: list[RuleError] = []
    finite: set[str] = set()
    why: dict[str, tuple[str, str]] = {}          # formula → (query, its error there)
    zeros: dict[str, set[str]] = {}                # formula failing on a division → constants at 0
    names = list(kn.formulas)
    evaluated = 0
    for i, query in enumerate(kn.query.get("reference_queries", [])):
        where: Path_ = ("reference_queries", i)
        try:
            w = parse(query, kn)
            if not w.gpus:
                errors.append(query_doc.error(where, f"the reference query '{query}' names no GPU "
                                                   "or memory size to compute it on"))
                continue
            ev = sweep.evaluated_on_its_gpu(kn, w, names)
            evaluated += 1
        except (KbError, ArithmeticError, TypeError, ValueError) as exc:
            errors.append(query_doc.error(where, f"the reference query '{query}' cannot be answered: {exc}"))
            continue
        for name in names:
            value = ev.scope.get(name)
            if value is not None and (not isinstance(value, float) or math.isfinite(value)):
                finite.add(name)
            elif name in ev.errors:
                message = str(ev.errors[name])
                why.setdefault(name, (query, message))
                if DIVISION in message:
                    zeros.setdefault(name, set()).update(
                        n for n in kn.formulas[name].names
                        if n in kn.constants and kn.constants[n].get("value") == 0)
    never = [n for n in names if n not in finite]
    if not never or not evaluated:
        return errors
    roots = [n for n in never if not any(d in never for d in kn.formulas[n].deps)]
    by_constant: dict[str, list[str]] = {}
    for name in roots:
        for const in sorted(zeros.get(name, ())):
            by_constant.setdefault(const, []).append(name)
    blamed = {n for found in by_constant.values() for n in found}
    for const, found in by_constant.items():
        errors.append(formulas_doc.error(
            ("constants", const, "value"),
            f"constant {const} is 0, and {_names(found)} divide by it: never a finite number on "
            "the reference workloads (query.yaml reference_queries)"))
    for name in roots:
        if name in blamed:
            continue
        query, message = why.get(name, ("", ""))
        reason = f" ({query}: {message})" if query else " (what it reads is unknown on every one)"
        loc: Path_ = ("formulas", name, "expr")
        if loc not in formulas_doc.positions:
            loc = ("formulas", name, "<key>")
        errors.append(formulas_doc.error(
            loc, f"{name} is never a finite number on the reference workloads "
                 f"(query.yaml reference_queries){reason}"))
    return errors


def _names(found: list[str]) -> str:
    return found[0] if len(found) == 1 else ", ".join(found[:-1]) + " and " + found[-1]


def check_all(kn: Knowledge, query_doc: Doc, formulas_doc: Doc) -> list[RuleError]:
    """The reference queries first (check); when they pass, every formula over the workloads
    generated for each task (kb.engine.flows.sweep), so the earlier messages stay as they were."""
    return check(kn, query_doc, formulas_doc) or sweep.check(kn, formulas_doc)
