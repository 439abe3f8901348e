"""The knowledge as pages: GPUs, models, formulas, flowcharts and sources.

In: the Knowledge the server answers from. Out: HTML tables and lists with stable anchors
(`/gpus#<id>`, `/models#<id>`, `/rules#<formula>`, `/flows/<id>#n-<node>`, `/sources#<id>`), so an
answer's trace can link to the rule and source behind each number. Each page shows the knowledge
alone, so it is built once per knowledge (off the event loop) and then given from memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, abort, current_app, render_template
from markupsafe import Markup

from kb.knowledge.build import Knowledge
from server import charts
from server.live import LiveKnowledge

bp = Blueprint("browse", __name__)

TENSOR_PRECISIONS = ("tf32", "fp16", "bf16", "fp8", "int8", "int4", "fp4")


def live() -> LiveKnowledge:
    return current_app.extensions["kbq"]  # type: ignore[no-any-return]


def knowledge() -> Knowledge:
    return live().get()


def built(key: str, build: Callable[[], str]) -> Response:
    """A page of the knowledge alone, built once per knowledge (LiveKnowledge.page)."""
    kn = knowledge()
    return current_app.response_class(live().page(kn, key, build), mimetype="text/html")


@bp.get("/gpus")
def gpus() -> Any:
    return built("gpus", lambda: render_template("browse/gpus.html", gpus=list(knowledge().gpus.values()),
                                                 precisions=TENSOR_PRECISIONS))


@bp.get("/models")
def models() -> Any:
    return built("models", lambda: render_template("browse/models.html",
                                                   models=list(knowledge().models.values())))


@bp.get("/rules")
def rules() -> Any:
    def build() -> str:
        kn = knowledge()
        return render_template("browse/rules.html", formulas=list(kn.formulas.values()),
                               constants=kn.constants, inputs=kn.inputs,
                               precisions=list(kn.precisions.values()), status=live().status())

    return built("rules", build)


@bp.get("/flows")
def flows() -> Any:
    return built("flows", lambda: render_template("browse/flows.html", flows=knowledge().flows))


@bp.get("/flows/<flow_id>")
def flow(flow_id: str) -> Any:
    kn = knowledge()
    found = next((f for f in kn.flows if f.id == flow_id), None)
    if found is None:
        abort(404, description=f"There is no flowchart with that id. The flowcharts: "
                               f"{', '.join(f.id for f in kn.flows)}.")
    return built(f"flows/{found.id}", lambda: render_template(
        "browse/flow.html", flow=found, svg=Markup(charts.flow_chart(found, ident=f"flow-{found.id}"))))


@bp.get("/sources")
def sources() -> Any:
    def build() -> str:
        kn = knowledge()
        claims: dict[str, list[Any]] = {}
        for claim in kn.claims:
            claims.setdefault(claim.source, []).append(claim)
        cited: dict[str, list[str]] = {}
        for f in kn.formulas.values():
            for sid in f.sources:
                cited.setdefault(sid, []).append(f.name)
        return render_template("browse/sources.html", sources=list(kn.sources.values()),
                               claims=claims, cited=cited)

    return built("sources", build)
