"""A verdict whose deciding figure could not be computed says so, instead of a confident guess.

In: the knowledge, the sizing flow's walked path and the scope it was walked in. Out: None when
every figure the reached verdict shows is known; else the text "Unknown: …", naming the figures,
the formula that failed first and why (worded by rules/query.yaml verdict.templates.unknown). Without this, a formula that fails (a division by zero
in the rules, say) leaves `fits` unknown, the walk takes the "does not fit" branch, and the
verdict reads "Does not fit … even at 1 users" or "Needs n/a GB".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.knowledge.data import TEMPLATE_FIELD, Flow, Knowledge

if TYPE_CHECKING:
    from kb.engine.evaluate import Scope
    from kb.expr.parse import Col

PREFIX = "Unknown: "


def is_unknown(verdict: str) -> bool:
    return verdict.startswith(PREFIX)


def sizing_verdict(kn: Knowledge, flow: Flow, path: list[str], scope: Scope,
                   errors: dict[str, str | Col]) -> str | None:
    """The "Unknown: …" verdict when a figure the reached verdict shows is None because a
    formula failed (not merely because the workload lacks a figure); else None."""
    node = flow.nodes.get(path[-1].split("/", 1)[1]) if path else None
    if node is None or node.kind != "verdict":
        return None
    missing = [m.group(1) for m in TEMPLATE_FIELD.finditer(node.text) if scope.get(m.group(1)) is None]
    for name in dict.fromkeys(missing):
        failed = next((dep for dep in (*kn.closure.get(name, ()), name) if dep in errors), None)
        if failed is not None:
            figures = ", ".join(dict.fromkeys(missing))
            return PREFIX + kn.query["verdict"]["templates"]["unknown"].format(
                figures=figures, failed=failed, error=_text(errors[failed]))
    return None


def _text(error: str | Col) -> str:
    """An error message; over several GPUs, the first one's."""
    if isinstance(error, str):
        return error
    try:
        return next(str(e) for e in error if e is not None)
    except (TypeError, StopIteration):
        return str(error)
