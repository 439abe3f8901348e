"""Every formula computed over workloads of every kind the rules serve: a formula that fails on
every workload of one kind is an error.

In: built Knowledge and the positioned formulas.yaml. Out: RuleErrors (file:line:col), one per
formula that, for some task of query.yaml `tasks` (serve, infer, prefill, full_ft, lora, qlora,
pretrain, dpo, …), fails on every workload of that task (a division by zero, a result that is
not a finite number) and is finite on none: a `/ (users - users)` in the inference case of
kv_cache_gb, which the reference workloads of kb.engine.flows.reference cannot catch (training takes the
other case), and which would leave every inference answer "Unknown". A formula that gives no
value without failing (its case does not apply, or a figure the workload lacks) is not counted,
nor is one that fails on some workloads of a kind and is finite on others.

A formula applies to a workload when its answer reads it: the formulas no formula reads (what
flows, claims and answers read), and what the case each of those takes reads, down the chain.

The workloads are generated, not listed: for each task, PER_TASK queries in the rules' own words
(the task's first word; query.yaml's first word for users, context, batch and sequence length)
over the precisions of precisions.yaml, the models of models.yaml and the GPUs of gpus.yaml
taken in turn, at the values query.yaml bounds each axis with (the lowest of its limits, its
default and the geometric middle of its limits), each parsed and resolved as a query is and
evaluated on the card it names.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kb.errors import KbError, QueryError, RuleError
from kb.expr.columns import RAISED
from kb.knowledge import names as N
from kb.engine import Evaluated, base_scope, evaluate, gpu_scope, layout_of, resolve_workload
from kb.engine.resolving.scope import capacity_gpu
from kb.query.parse import parse

if TYPE_CHECKING:
    from kb.knowledge.loader import Doc, Path_
    from kb.knowledge.data import Case, Knowledge
    from kb.knowledge.records_rules import QueryRules
    from kb.query.workload import Workload

PER_TASK = 16       # workloads of each task: users × context lengths, each with its own model


# The query.yaml units that size the work: how many at once, and how long each is. Every task
# takes them all: the decode figures a training answer prices read users too.
AXES = (N.USERS, "context", N.BATCH, "seq")



def evaluated_on_its_gpu(kn: Knowledge, w: Workload, names: list[str]) -> Evaluated:
    """`names` computed for a workload on the first GPU it names (a card, or a bare memory size),
    at its count and layout: how the build checks a formula on a workload."""
    r = resolve_workload(w, kn)
    req = w.gpus[0]
    gpu = kn.gpus[req.gpu_id] if req.gpu_id else capacity_gpu(req, kn)
    ev = Evaluated(gpu_scope(base_scope(r, kn), gpu, req.count, r.precision,
                             layout_of(r, kn, req.count)))
    evaluate(kn, ev, names)
    return ev

def workload_queries(kn: Knowledge) -> list[tuple[str, str]]:
    """(task, query text) for every generated workload, task by task: each its own precision,
    model and card, and each axis's values in turn (so every value of every axis is met)."""
    q = kn.query
    axes = [_axis(q, unit) for unit in AXES]
    precisions, models, gpus = list(kn.precisions), list(kn.models), list(kn.gpus)
    out = []
    for t, (task, words) in enumerate(q["tasks"].items()):
        lead = _task_phrase(kn, words[0])
        for j in range(PER_TASK):
            k = t * PER_TASK + j
            sizes = " ".join(f"{values[j // (a + 1) % len(values)]} {word}" for a, (values, word) in enumerate(axes))
            out.append((task, f"{lead} {models[k * 7 % len(models)]} {precisions[k % len(precisions)]} "
                              f"{sizes} on {gpus[k * 5 % len(gpus)]}"))
    return out


def _task_phrase(kn: Knowledge, word: str) -> str:
    """A task's first word, or, where that word only modifies another ('full' needs a training
    word), the word followed by the first word of the first task that makes it read."""
    model = next(iter(kn.models))
    for lead in [word] + [f"{word} {words[0]}" for words in kn.query["tasks"].values()]:
        try:
            parse(f"{lead} {model}", kn)
        except QueryError:
            continue
        return lead
    return word


def _axis(q: QueryRules, unit: str) -> tuple[list[int], str]:
    """A unit's values (the lowest of its limits, the default and the geometric middle of the
    limits) and the first word that names it."""
    spec = q["units"][unit]
    lo, hi = q["limits"][spec["limit"]]
    defaults: dict[str, Any] = dict(q["defaults"])
    values = [max(1, int(lo)), int(defaults[spec["field"]]), int(math.sqrt(max(lo, 1) * hi))]
    return list(dict.fromkeys(values)), spec["words"][0]


def check(kn: Knowledge, formulas_doc: Doc) -> list[RuleError]:
    names = list(kn.formulas)
    read = {d for f in kn.formulas.values() for d in f.deps}
    roots = [n for n in names if n not in read]         # what flows, claims and answers read
    finite: dict[str, set[str]] = {}                      # task → formulas finite on one of its workloads
    failed: dict[str, dict[str, tuple[str, str, Evaluated]]] = {}  # task → formula → first failure
    for task, query in workload_queries(kn):
        try:
            ev = evaluated_on_its_gpu(kn, parse(query, kn), names)
        except (KbError, ArithmeticError, TypeError, ValueError, IndexError):
            continue                            # not a workload these rules answer: not counted
        ok, bad = finite.setdefault(task, set()), failed.setdefault(task, {})
        for name in _applied(kn, ev, roots):
            value = ev.scope.get(name)
            if value is not None and (not isinstance(value, float) or math.isfinite(value)):
                ok.add(name)
            elif name in ev.errors:
                bad.setdefault(name, (query, str(ev.errors[name]), ev))
    kinds: dict[str, list[str]] = {}                    # formula → the tasks it never computes
    for task, bad in failed.items():
        never = {n for n in bad if n not in finite[task]}
        for name in never:                  # where it first fails, not each formula that reads it
            if not any(dep in never for dep in kn.formulas[name].deps):
                kinds.setdefault(name, []).append(task)
    return [_error(kn, formulas_doc, name, tasks, failed[tasks[0]][name])
            for name, tasks in kinds.items()]


def _applied(kn: Knowledge, ev: Evaluated, roots: list[str]) -> set[str]:
    """The formulas a workload's answer reads: the roots (no formula reads them; flows, claims
    and answers do), and, from each, what the case it takes reads (its conditions up to that
    case, and that case's expression). kv_cache_gb's inference case, which reads
    kv_cache_gb_per_user, is not taken by a training workload: there it does not apply."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        f = kn.formulas[name]
        taken = ev.cases.get(name)
        i = taken if isinstance(taken, int) else _taken(f.cases, ev.scope)
        for case in f.cases[:i + 1]:
            todo += [n for n in case.when.names if n in kn.formulas] if case.when else []
        todo += [n for n in f.cases[i].expr.names if n in kn.formulas]
    return seen


def _taken(cases: tuple[Case, ...], scope: dict[str, Any]) -> int:
    """The case a formula takes (or fails in) on this scope: the first whose condition holds
    or cannot be told."""
    for i, case in enumerate(cases):
        try:
            if case.when is None or case.when.fn(scope):
                return i
        except RAISED:
            return i
    return len(cases) - 1


def _error(kn: Knowledge, doc: Doc, name: str, tasks: list[str],
           first: tuple[str, str, Evaluated]) -> RuleError:
    query, message, ev = first
    f = kn.formulas[name]
    loc: Path_ = ("formulas", name, "expr")
    if len(f.cases) > 1 or f.cases[0].when is not None:
        i = _taken(f.cases, ev.scope)
        when = f.cases[i].when
        try:
            part = "when" if when is not None and when.fn(ev.scope) is None else "expr"
        except RAISED:                  # the condition itself failed: point at it
            part = "when"
        loc = ("formulas", name, "cases", i, part)
    if loc not in doc.positions:
        loc = ("formulas", name, "<key>")
    which = tasks[0] if len(tasks) == 1 else ", ".join(tasks[:-1]) + " and " + tasks[-1]
    return doc.error(loc, f"{name} is never a finite number for {which} workloads ({PER_TASK} "
                          "each, over query.yaml's users, contexts, batches and sequence lengths and "
                          f"the catalogue's precisions, models and GPUs; e.g. '{query}': {message}); "
                          "give it a case for the workloads it does not apply to, or fix what fails")
