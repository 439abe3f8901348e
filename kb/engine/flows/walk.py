"""Walking the flows: from each flow's entry, the first edge whose condition holds, with a trace.

The edges a node leaves by are its out-edges in the knowledge graph (kb.knowledge.graph.out_edges, read
into each Node when the knowledge is built), tried in the order the rule file lists them.

In: a Flow, the Knowledge and one GPU's Evaluated scope. Out: the path of node ids walked, the
verdict text its last node fills in, and (through Tracer) a trace step for every formula a node
computes (after the formulas it needs) and every conditional edge taken.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kb.engine.assembly.answer import Step
from kb.engine.evaluate import Evaluated, Scope, condition, evaluate, formula_order
from kb.errors import EvalError
from kb.figures import num
from kb.knowledge.data import TEMPLATE_FIELD, TEMPLATE_SPEC, Flow, Formula, Knowledge, Node

if TYPE_CHECKING:
    from kb.engine.assembly.answer_records import ClaimChecked
    from kb.knowledge.data import Edge


class Tracer:
    def __init__(self, kn: Knowledge, ev: Evaluated) -> None:
        self.kn = kn
        self.ev = ev
        self.steps: list[Step] = []
        self.done: set[str] = set()

    def formula(self, node: str, name: str) -> None:
        done = self.done
        for dep in formula_order(self.kn)[name]:
            if dep not in done:
                done.add(dep)
                self.steps.append(self._step(node, self.kn.formulas[dep]))

    def _step(self, node: str, f: Formula) -> Step:
        s = self.ev.scope
        idx = self.ev.cases.get(f.name)
        names, text, note, rule, source = self.kn.derived.case_text[
            f.name, idx if isinstance(idx, int) else len(f.cases) - 1]
        if f.name in self.ev.errors:
            note = f"not computed: {self.ev.errors[f.name]}"
        elif s.get(f.name) is None:
            missing = [n for n in names if s.get(n) is None]
            note = "not computed: no value for " + ", ".join(missing) if missing else note
        return Step(node, rule, text, {n: s.get(n) for n in names}, s.get(f.name), f.unit, source,
                    note, f.name, f.where, list(f.sources))

    def edge(self, flow: Flow, here: Node, edge: Edge) -> None:
        """The step of a conditional edge taken from the flow node `here`."""
        when = edge.when
        if when is None:
            return
        s = self.ev.scope
        node, where = f"{flow.id}/{here.id}", here.where
        rule_id = f"edge {node} → {flow.id}/{edge.to}"
        self.steps.append(Step(node=node, rule=f"{rule_id} ({where})",
                               formula=when.text, values={n: s.get(n) for n in when.names},
                               result=True, unit="bool", source=flow.source, note=edge.label,
                               rule_id=rule_id, location=where, sources=[flow.source]))


def walk(flow: Flow, kn: Knowledge, ev: Evaluated, tracer: Tracer) -> tuple[list[str], str]:
    node = flow.nodes[flow.entry]
    path: list[str] = []
    for _ in range(len(flow.nodes) + 1):
        nid = f"{flow.id}/{node.id}"
        path.append(nid)
        if node.compute:
            evaluate(kn, ev, node.compute)
            for name in node.compute:
                tracer.formula(nid, name)
        if node.kind == "verdict":
            return path, render_template(node.text, ev.scope)
        for edge in node.edges:
            if condition(edge.when, ev.scope):
                tracer.edge(flow, node, edge)
                node = flow.nodes[edge.to]
                break
    raise EvalError(f"flow {flow.id} did not reach a verdict")


def applies(kn: Knowledge, flow: Flow, ev: Evaluated) -> bool:
    """Whether a flow bears on the question (its `applies` condition on the answer's figures)."""
    if flow.applies is None:
        return True
    evaluate(kn, ev, [n for n in flow.applies.names if n in kn.formulas])
    return condition(flow.applies, ev.scope)


def differs(kn: Knowledge, flow: Flow, node: Node, text: str, ev: Evaluated) -> list[ClaimChecked]:
    """The flow's outcome, under the sources' disagreements, when it is not what kbq's figures
    say (the node's `agrees` condition does not hold): what the flowchart says, and why not."""
    if node.agrees is None:
        return []
    evaluate(kn, ev, [n for n in node.agrees.names if n in kn.formulas])
    if condition(node.agrees, ev.scope):
        return []
    source = kn.sources.get(flow.source)
    return [{"id": f"{flow.id}/{node.id}", "source": flow.source,
             "source_title": source.get("title") if source else None,
             "claim": f"{flow.title}: {text}", "claimed": None, "computed": None, "unit": "",
             "difference_pct": None, "agrees": False, "gpu": None, "formula": node.agrees.text,
             "note": render_template(node.differs or "kbq's figures point elsewhere", ev.scope),
             "rule": node.where}]


def render_template(text: str, scope: Scope) -> str:
    def fill(m: re.Match[str]) -> str:
        value = scope.get(m.group(1))
        if value is None:
            return "n/a"
        if isinstance(value, bool) or isinstance(value, str):
            return str(value)
        spec = m.group(2)
        if not spec or not TEMPLATE_SPEC.match(spec):
            return num(value)           # as the answer shows every figure (kb.figures)
        try:
            return format(value, spec)
        except (ValueError, TypeError):
            return str(value)
    return TEMPLATE_FIELD.sub(fill, text)
