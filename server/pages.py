"""The page: ask a question, see the numbers, follow the trace.

In: `/?q=…` (a query from the form) or `/embed?q=…`. Out: HTML rendered on the server from
the typed Answer (kb.engine.assembly.answer): verdict, memory bar, roofline, GPU table, the walked flowcharts,
sources that agree or disagree, assumptions and the trace. A query the parser rejects gives
status 400 with the caret message and a link to the query with the nearest valid word.

Templates get the Answer itself, `answer`, and one context object made from it, `view` (see
`answer_view`). Nothing here reads a string the engine built to take it apart: a trace step's
rule, place and sources are its own fields (kb.engine.assembly.answer.Step). The JSON API alone uses
`Answer.to_dict()`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from flask import Blueprint, current_app, render_template, request
from markupsafe import Markup

from kb.errors import KbError, QueryError
from kb.knowledge.build import Knowledge
from kb.present.render import BREAKDOWN_LABELS
from server import charts, charts_roofline
from server.trace_deps import relevant
from server.live import LiveKnowledge
from kb.knowledge import names as N
from kb import answer_in
from kb.engine import answer as engine_answer
from kb.engine.advising.options import compute
from kb.present.quote import build, buy_text, memory_text, rent_text, to_quote
from kb.query.parse import parse

if TYPE_CHECKING:
    from kb.engine.assembly.answer import Answer, Step

bp = Blueprint("pages", __name__)

EXAMPLES = (
    "serve 70B int4 16 users",
    "train 13B qlora on 20GB?",
    "serve llama-3.1-70b awq 32 users 8k context on 2x L40S",
    "fine-tune mistral 7b lora bf16 seq 4096 batch 8 on rtx 4090",
    "full fine-tune 7B on 8x H100 for 20B tokens",
    "infer 7B fp16 on rtx 4000 ada vs rtx 6000 ada",
    "which gpu for 13B lora",
    "mixtral 8x7b q4_k_m on 2x 3090",
)
TABLE_ROWS = 5           # GPUs in the main table; the rest fold away (a phone's screen or two)
EMBED_RULES = (N.WEIGHTS_GB, N.KV_CACHE_GB, N.ACTIVATIONS_GB, N.GRADIENTS_GB, N.OPTIMIZER_GB,
               N.ADAPTERS_GB, N.OVERHEAD_GB, N.TOTAL_GB, N.PER_GPU_GB, N.FITS,
               N.DECODE_TOKENS_PER_S, N.PREFILL_TOKENS_PER_S, N.TRAIN_TOKENS_PER_S)


def live() -> LiveKnowledge:
    return current_app.extensions["kbq"]  # type: ignore[no-any-return]


def page_link(query: str) -> str:
    return "/?" + urlencode({"q": query})


def query_error_view(err: QueryError, query: str) -> dict[str, Any]:
    """The caret message, and the query with the bad word replaced by the suggestion."""
    lines = err.render().splitlines()
    fixed = None
    start, end = err.column - 1, err.column - 1 + max(1, err.width)
    if err.suggestion and 0 <= start < end <= len(query):
        fixed = query[:start] + err.suggestion + query[end:]
    return {"caret": "\n".join(lines[:3]), "message": err.message, "column": err.column,
            "suggestion": err.suggestion, "expected": err.expected,
            "fixed": fixed, "fixed_link": page_link(fixed) if fixed else None}


@dataclass(frozen=True)
class TraceRow:
    """One trace step as the page shows it: the step itself (its rule_id, location and sources
    are fields of their own), whether that rule is a formula (its name then links to /rules), and
    the flowchart node the step was taken at, when that node is in a flow."""
    step: Step
    is_formula: bool
    node_link: str | None


def node_links(kn: Knowledge) -> dict[str, str]:
    """Each flow node as an answer's path names it ("flow id/node id") → its place on /flows."""
    return {f"{f.id}/{n}": f"/flows/{f.id}#n-{n}" for f in kn.flows for n in f.nodes}


def trace_view(steps: list[Step], kn: Knowledge) -> list[TraceRow]:
    links = node_links(kn)
    return [TraceRow(step, step.rule_id in kn.formulas, links.get(step.node)) for step in steps]


def flows_view(answer: Answer, kn: Knowledge) -> list[dict[str, Any]]:
    """Each flow the answer walked: its chart, the steps taken and where it ended. The walked
    verdict shows the answer's own words (the sizing verdict with its figures filled in)."""
    out = []
    for flow in kn.flows:
        nodes, _ = charts.walked(answer.path, flow)
        if not nodes:
            continue
        advice = next((a for a in answer.advice if a["flow"] == flow.id), None)
        ended = answer.verdict if flow.role == "sizing" else advice["conclusion"] if advice else None
        filled = {nodes[-1]: ended} if ended and flow.nodes[nodes[-1]].kind == "verdict" else {}
        steps = []
        for here, there in zip(nodes, [*nodes[1:], None]):
            node = flow.nodes[here]
            edge = next((e for e in node.edges if e.to == there), None)
            steps.append({"id": here, "kind": node.kind,
                          "text": filled.get(here) or charts.node_text(node),
                          "taken": (edge.label or "then") if edge else None})
        out.append({"flow": flow, "steps": steps, "advice": advice,
                    "svg": Markup(charts.flow_chart(flow, answer.path, ident=f"walk-{flow.id}",
                                                    filled=filled))})
    return out


def answer_view(answer: Answer, kn: Knowledge, embed: bool = False) -> dict[str, Any]:
    gpus = answer.gpus
    primary = gpus[0] if gpus else None
    whole = answer.memory["breakdown"]
    shares = charts.per_gpu_parts(whole, primary) if primary else {}
    breakdown = [{"key": k, "label": label, "gb": whole.get(k), N.PER_GPU_GB: shares.get(k)}
                 for k, label in BREAKDOWN_LABELS.items() if whole.get(k)]
    roof = charts_roofline.roofline(answer, ident="roofline", width=640)
    roof_narrow = charts_roofline.roofline(answer, ident="roofline-narrow", width=charts.NARROW)
    trace = trace_view(relevant(answer, kn), kn)
    if embed:
        trace = [s for s in trace if s.step.rule_id in EMBED_RULES]
    q = answer.question
    return {
        N.FITS: bool(primary and primary.fits),
        # a how-many question no count answers: no count meets its target (not "does not fit")
        "no_count": q is not None and q.get("kind") == "how_many_gpus" and not (q.get("answer") or {}).get("found"),
        "training": answer.workload[N.TASK] in kn.query["training_tasks"],
        "gpu_columns": gpu_columns(answer, kn),
        "breakdown": breakdown,
        "memory_svg": Markup(charts.memory_bar(answer, limit=6, width=700)),
        "memory_svg_narrow": Markup(charts.memory_bar(answer, limit=5, ident="memory-narrow",
                                                      width=charts.NARROW)),
        "memory_rows": gpus[:6],
        "roofline_svg": Markup(roof) if roof else None,
        "roofline_svg_narrow": Markup(roof_narrow) if roof_narrow else None,
        "roofline_gpu": charts_roofline.roofline_gpu(answer),
        "gpus_main": gpus[:TABLE_ROWS], "gpus_more": gpus[TABLE_ROWS:],
        "flows": [] if embed else flows_view(answer, kn),
        "trace": trace,
        "link": page_link(answer.query),
        "quote_link": "/quote?" + urlencode({"q": answer.query}),
    }


COLUMNS = {   # field → (heading, kind) for the GPU table, after GPU and fits
    "count": ("count", "count"), "vram_gb": ("VRAM GB", "num"), N.PER_GPU_GB: ("needs GB/GPU", "num"),
    N.HEADROOM_GB: ("spare GB", "num"), N.GPUS_NEEDED: ("fewest by memory", "num"),
    N.TRAIN_TOKENS_PER_S: ("train tok/s", "num"), N.TRAIN_TIME_S: ("time", "duration"),
    N.DECODE_TOKENS_PER_S: ("decode tok/s per user", "num"),
    N.DECODE_TOKENS_PER_S_AGGREGATE: ("decode tok/s in all", "num"),
    N.PREFILL_TOKENS_PER_S: ("prefill tok/s", "num"), N.TTFT_S: ("first token s", "num"),
}
MEMORY = ("count", "vram_gb", N.PER_GPU_GB, N.HEADROOM_GB, N.GPUS_NEEDED)
SPEED = {True: (N.TRAIN_TOKENS_PER_S, N.TRAIN_TIME_S),
         False: (N.DECODE_TOKENS_PER_S, N.DECODE_TOKENS_PER_S_AGGREGATE, N.PREFILL_TOKENS_PER_S, N.TTFT_S)}
FOCUS_FIELD = {"memory": N.PER_GPU_GB, "fit": N.PER_GPU_GB,
               "time": {True: N.TRAIN_TIME_S, False: N.TTFT_S}, "speed": None}


def gpu_columns(answer: Answer, kn: Knowledge) -> list[tuple[str, str, str]]:
    """The GPU table's columns, the figure the question asks about first (so a phone shows
    GPU, fit and that figure before it scrolls): the focus word's figure, else the speed of the
    task, else (nothing timed: it does not fit or the hardware has no speed figures) memory."""
    training = answer.workload[N.TASK] in kn.query["training_tasks"]
    speed = SPEED[training]
    timed = any(getattr(g, speed[0]) is not None for g in answer.gpus)
    fields = [*MEMORY, *speed] if timed else list(MEMORY)
    focus = FOCUS_FIELD.get(answer.workload.get("focus") or "")
    first = focus[training] if isinstance(focus, dict) else focus
    first = first if first in fields else (speed[0] if timed else N.PER_GPU_GB)
    fields.remove(first)
    return [(f, *COLUMNS[f]) for f in (first, *fields)]


def _render(template: str, query: str | None, finish: Callable[[str], str] = str) -> Any:
    """Answer `query` into `template` (the page text then passed through `finish`); 400 with the
    caret message when it cannot be read."""
    ctx: dict[str, Any] = {"q": query or "", "examples": [(e, page_link(e)) for e in EXAMPLES]}
    if query is None or not query.strip():
        return finish(render_template(template, **ctx))
    kn = live().get()                     # one knowledge for the answer and its page
    # a page is given again from the answer cache (server.answer_cache) while the knowledge and
    # the rules banner it shows are the same; its bytes go out as they are kept
    key = (template, query, repr(live().degraded()), live().loaded_at)
    try:
        page = live().cached(kn, key, lambda: finish(_answer_page(template, query, kn, ctx)).encode())
    except QueryError as err:
        return finish(render_template(template, **ctx, error=query_error_view(err, query))), 400
    except KbError as err:
        return finish(render_template(template, **ctx, error={"caret": str(err)})), 400
    return current_app.response_class(page, mimetype="text/html")


def _answer_page(template: str, query: str, kn: Knowledge, ctx: dict[str, Any]) -> str:
    from kb import answered

    # with its options where the GPUs asked about are too small; kn becomes the knowledge it was
    # answered with (with the model of a Hub id the query names)
    found, kn = answered(kn, query)
    if template == QUOTE:
        quoted, asked, wider = to_quote(found, kn, lambda q: answer_in(kn, q))
        return render_template(template, **ctx, quote=build(quoted, kn, asked, wider), link=page_link(query),
                               buy_text=buy_text, rent_text=rent_text, memory_text=memory_text)
    if not template.endswith("embed.html") and found.options is None and needs_change(found):
        found.options = compute(kn, parse(query, kn), found, engine_answer)   # what to change, where it does not fit or is too slow
    view = answer_view(found, kn, embed=template.endswith("embed.html"))
    return render_template(template, **ctx, answer=found, view=view)


def needs_change(answer: Answer) -> bool:
    """Whether the page lists what to change: the first configuration does not fit, or misses
    the speed or time target the question set."""
    from kb.engine.pipeline import fleet_unserved

    row = next((g for g in answer.gpus if g.requested), answer.gpus[0] if answer.gpus else None)
    return row is not None and (not row.fits or row.meets_target is False) and not fleet_unserved(answer)


@bp.get("/")
def index() -> Any:
    return _render("pages/index.html", request.args.get("q"))


QUOTE = "pages/quote.html"


@bp.get("/quote")
def quote() -> Any:
    """A one-page quote (kb.present.quote) to print or send: the recommended configuration with its
    prices and their dates, two alternatives, the assumptions and the sources."""
    query = request.args.get("q")
    if query is None or not query.strip():
        return render_template(QUOTE, q="", error={"caret": "missing ?q=…, e.g. /quote?q=serve+70B+int4+16+users"}), 400
    return _render(QUOTE, query)


@bp.get("/embed")
def embed() -> Any:
    query = request.args.get("q")
    if query is None or not query.strip():
        return new_tab(render_template(
            "pages/embed.html", q="", examples=[],
            error={"caret": "missing ?q=…, e.g. /embed?q=serve+70B+int4+16+users"})), 400
    return _render("pages/embed.html", query, new_tab)


LINK_WITHOUT_TARGET = re.compile(r"<a (?![^>]*\btarget=)")


def new_tab(page: str) -> str:
    """Every link in an embedded answer opens a new tab rather than inside the wiki's iframe,
    unless it names its own target (a suggestion that stays in the frame)."""
    return LINK_WITHOUT_TARGET.sub('<a target="_blank" rel="noopener" ', page)
