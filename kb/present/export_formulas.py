"""The wiki's formulas.md, with a worked example under each formula.

In: the Knowledge and the example queries' answers (`run_examples`, the engine answering
EXAMPLE_QUERIES and each claim's example query). Out: `formulas_page(kn, runs)`: inputs,
constants and formulas, each formula with its cases as math, what it reads and what reads it,
its sources, and a worked example taken from a trace (or evaluated on a trace's figures).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kb.engine.assembly.answer import Answer, Step
from kb.errors import EvalError, KbError
from kb.present.export_text import anchor, code, math, name_link, number, page, src_link, table, with_unit
from kb.knowledge.data import Formula, Knowledge
from kb.expr.nodes_base import literal
from kb.present.render import md
from kb.engine import answer
from kb.query.parse import parse

# Queries whose traces give the formulas' worked examples; the claims' own example queries
# are tried after these. A query the rules cannot answer is skipped.
EXAMPLE_QUERIES = (
    "infer 7B fp16 on rtx 4000 ada",
    "serve 70B int4 16 users on h100",
    "full fine-tune 7B on 8x h100",
    "fine-tune mistral 7b lora bf16 seq 4096 batch 8 on rtx 4090",
    "train 13B qlora on rtx 4000 ada",
    "prefill 70B fp8 on h100",
)

# ---------------------------------------------------------------- running the examples

@dataclass
class Run:
    query: str
    answer: Answer


def run_examples(kn: Knowledge, queries: Iterable[str]) -> dict[str, Run]:
    """Answer each query with the engine; a query these rules cannot answer is left out."""
    runs: dict[str, Run] = {}
    for q in dict.fromkeys(queries):
        try:
            runs[q] = Run(q, answer(parse(q, kn), kn, q))
        except KbError:
            continue
    return runs


def example_queries(kn: Knowledge) -> list[str]:
    return list(dict.fromkeys([*EXAMPLE_QUERIES, *(c.example_query for c in kn.claims)]))


def traced_step(run: Run, name: str) -> Step | None:
    for step in run.answer.trace:
        if step.rule_id == name and step.result is not None:
            return step
    return None


def trace_scope(kn: Knowledge, run: Run) -> dict[str, Any]:
    """Every figure the answer's trace shows: the values substituted and the results."""
    scope: dict[str, Any] = {k: c["value"] for k, c in kn.constants.items()}
    for step in run.answer.trace:
        scope.update({k: v for k, v in step.values.items() if v is not None})
        if step.rule_id in kn.formulas and step.result is not None:
            scope[step.rule_id] = step.result
    return scope


@dataclass
class Worked:
    query: str
    case: int
    values: dict[str, Any]
    result: Any
    traced: bool


def worked_example(kn: Knowledge, f: Formula, runs: list[Run]) -> Worked | None:
    """The formula on the first example query whose trace computes it; failing that, the
    formula evaluated on the figures a trace shows."""
    steps = [(run, step) for run in runs if (step := traced_step(run, f.name)) is not None]
    if steps:  # a figure that is not 0 or false shows the formula at work: the first such
        run, step = min(steps, key=lambda rs: rs[1].result in (0, False))
        return Worked(run.query, _case_of(f, step), dict(step.values), step.result, True)
    for run in runs:
        found = _evaluate_on(f, run, trace_scope(kn, run))
        if found is not None:
            return found
    return None


def _evaluate_on(f: Formula, run: Run, scope: dict[str, Any]) -> Worked | None:
    """The formula's first case that holds, evaluated by the expression interpreter, or
    None when the scope lacks a figure it needs."""
    try:
        for i, case in enumerate(f.cases):
            if case.when is not None:
                if any(scope.get(n) is None for n in case.when.names):
                    return None
                if not case.when(scope):
                    continue
            if any(scope.get(n) is None for n in case.expr.names):
                return None
            names = [*(case.when.names if case.when else ()), *case.expr.names]
            values = {n: scope[n] for n in dict.fromkeys(names)}
            return Worked(run.query, i, values, case.expr(scope), False)
    except EvalError:
        return None
    return None


def _case_of(f: Formula, step: Step) -> int:
    for i, case in enumerate(f.cases):
        if step.formula.startswith(case.expr.text) and (
                case.when is None or case.when.text in step.formula[len(case.expr.text):]):
            return i
    return len(f.cases) - 1


# ---------------------------------------------------------------- formulas.md

def formulas_page(kn: Knowledge, runs: list[Run]) -> str:
    body = [("Every quantity kbq computes. A formula with cases uses the first case whose "
            "condition holds. GB = 10⁹ bytes; counts (param, token, user) are plain numbers "
            "in the unit check."), "", "## Inputs", "",
            *table(["name", "unit", "meaning"],
                   ([f"{anchor('n-' + n)}{code(n)}", md(i["unit"]), md(i["meaning"])]
                    for n, i in sorted(kn.inputs.items()))),
            "", "## Constants", "",
            *table(["name", "value", "unit", "meaning", "source"],
                   ([f"{anchor('n-' + n)}{code(n)}", literal(c["value"]), md(c["unit"]),
                     md(c["meaning"]), src_link(c["source"])] for n, c in sorted(kn.constants.items())),
                   "lr"),
            "", "## Formulas", ""]
    readers = _readers(kn)
    for f in kn.formulas.values():
        body += formula_section(kn, f, readers.get(f.name, []), runs)
    return page("Formulas", body)


def formula_section(kn: Knowledge, f: Formula, readers: list[str], runs: list[Run]) -> list[str]:
    out = [anchor("f-" + f.name), f"### {md(f.name)}", "",
           f"{md(f.meaning)}. Unit: {md(f.unit)}. Rule: {code(f.where)}.", ""]
    for i, case in enumerate(f.cases):
        eq = code(f"{f.name} = {math(case.expr.ast)}")
        note = f": {md(case.note)}" if case.note else ""
        if len(f.cases) == 1:
            out.append(f"{eq}{note}")
        else:
            when = f"when {code(math(case.when.ast))}" if case.when else "otherwise"
            out.append(f"{i + 1}. {when}: {eq}{note}")
    out.append("")
    if f.note:
        out += [f"Note: {md(f.note)}", ""]
    out.append("- reads " + ", ".join(name_link(n, kn) for n in f.names))
    out.append("- read by " + (", ".join(readers) if readers else "nothing in these rules"))
    out.append("- sources: " + ", ".join(f"{src_link(s)} ({md(kn.sources[s]['title'])})"
                                         for s in f.sources))
    out.append("")
    return out + worked_lines(kn, f, runs)


def worked_lines(kn: Knowledge, f: Formula, runs: list[Run]) -> list[str]:
    ex = worked_example(kn, f, runs)
    if ex is None:
        return ["No worked example: none of the example queries reaches this formula.", ""]
    case = f.cases[ex.case]
    how = "from its trace" if ex.traced else "evaluated on the figures its trace shows"
    which = f", case {ex.case + 1}" if len(f.cases) > 1 else ""
    lines = [f"Worked example: {code('kbq ' + chr(34) + ex.query + chr(34))}{which}, {how}:", "",
             "```text"]
    pad = " " * len(f.name)
    if case.when is not None:
        lines.append(f"{pad}   when {math(case.when.ast, lambda n: number(ex.values.get(n)))}")
    lines += [f"{f.name} = {math(case.expr.ast)}",
              f"{pad} = {math(case.expr.ast, lambda n: number(ex.values.get(n)))}",
              f"{pad} = {with_unit(number(ex.result), f.unit)}", "```", ""]
    return lines


def _readers(kn: Knowledge) -> dict[str, list[str]]:
    """For each formula: the formulas, flow nodes, rankings and claims that read it."""
    out: dict[str, list[str]] = {}
    for f in kn.formulas.values():
        for dep in f.deps:
            out.setdefault(dep, []).append(f"[{md(f.name)}](#f-{f.name})")
    for flow in kn.flows:
        for node in flow.nodes.values():
            names = list(node.compute) + [n for e in node.edges if e.when for n in e.when.names]
            for name in dict.fromkeys(names):
                if name in kn.formulas:
                    out.setdefault(name, []).append(
                        f"flow [{md(flow.id)}/{md(node.id)}](flows/{flow.id}.md#node-{node.id})")
        for by, _order in flow.ranking:
            out.setdefault(by, []).append(f"the ranking of [{md(flow.id)}](flows/{flow.id}.md)")
    for c in kn.claims:
        for name in dict.fromkeys([*c.computed.names, *c.applies_when.names]):
            out.setdefault(name, []).append(f"claim [{md(c.id)}](sources.md#claim-{c.id})")
    return out

