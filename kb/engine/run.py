"""The engine's entry: Workload + Knowledge → Answer.

In: a Workload (kb.query.parse) and the Knowledge. Out: an Answer (kb.engine.assembly.answer).
Steps: resolve the model, precision and defaults (kb.engine.resolving.scope, kb.engine.resolving.inputs); evaluate every candidate GPU
at once (kb.engine.resolving.gpus, kb.engine.evaluate); rank them by the sizing flow's ranking; on the
first GPU's own view, walk each flow (kb.engine.flows.walk); check the sources' claims
(kb.engine.flows.claims); assemble the answer (kb.engine.assembly.assemble). A capacity question is answered by
its kind's strategy (kb.engine.search.capacity: searched, then answered at its value); any other by the
ranking and the stages of PLAIN_STAGES that apply to it. Pure: no I/O, no printing.
"""

from __future__ import annotations

from collections.abc import Callable

from typing import TYPE_CHECKING, cast

from kb.engine.advising import advice as rightsize

from kb.engine.search import capacity

from kb.engine.resolving import cost_batch

from kb.engine.advising import per_card

from kb.engine.advising import train_choice

from kb.engine.verdicts import unknown

from kb.engine.search import solve
from kb.engine.resolving import training as tr
from kb.engine.assembly.answer import Answer, GpuRow
from kb.engine.assembly.assemble import (ROW_FORMULAS, brief_answer, bottleneck, error_bands,
                                gpu_warnings, memory, rank_order, rows_of, shown_figures, workload_dict)
from kb.engine.flows.claims import check_claims
from kb.engine.evaluate import Evaluated, Scope, evaluate
from kb.engine.resolving.gpus import catalogue_columns, layout_columns, layout_of, layouts_of
from kb.engine.resolving.inputs import base_scope
from kb.engine.resolving.layout import Layout
from kb.engine.resolving.scope import Resolved, capacity_gpu, fleet_kv, question_format, resolve_workload
from kb.engine.search.probes import Probes
from kb.engine.search.single_probe import choose_split
from kb.engine.verdicts.verdict import compose
from kb.engine.verdicts.wording import layout_note, say
from kb.engine.resolving.speculative import spec_note
from kb.knowledge.gpu_names import gemm_of, gpu_columns, runs_on
from kb.engine.flows.walk import Tracer, applies, differs, walk
from kb.expr.parse import Col
from kb.knowledge.data import Knowledge
from kb.query.workload import Workload
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.knowledge.records import GPU
    from kb.engine.assembly.answer_records import Advice, ClaimChecked, Outcome, Question


def answer(w: Workload, kn: Knowledge, query: str = "", *, brief: bool = False, unserved: bool = False) -> Answer:
    """The answer to a workload; a capacity question is solved first, then answered at its value.
    `brief`: only the figures (GPU rows, memory, speed and cost), without the flows' walk, the
    trace, the claims and the advice text: what an option (kb.engine.advising.options) shows of its answer.
    `unserved`: a how-many question about a fleet no replica layout serves (kb.engine.pipeline), which
    no one configuration answers either.
    The engine puts what was asked and what answers it on `Answer.question` (its kind, the figure,
    the sizing flow's outcome); the verdict text is composed from that by kb.engine.verdicts.verdict."""
    question_format(w, kn)
    fleet_kv(w, kn)
    if w.question in kn.query["solve"]:
        result = capacity.answer(kn, w, ranked, query, brief, unserved)
    else:
        result, final = _plain(w, kn, query, brief)
        if final:
            result.unused_words = list(w.unused_words)
            return result
    result.unused_words = list(w.unused_words)
    if brief:
        return result
    result.verdict = compose(result, kn)
    return result


class _Plain:
    """A question without a search being answered (the fit on the cards named, several
    compared, which GPU, its cost, a training job's time): the ranking of the workload, then each
    stage of PLAIN_STAGES that applies to the workload as asked, in turn."""

    def __init__(self, kn: Knowledge, query: str, brief: bool) -> None:
        self.kn, self.query, self.brief = kn, query, brief
        self.single: float | None = None    # one user's cost per million tokens (_cost_batch)
        self.final = False                  # the answer is another question's, whole (_scale_out)

    def rank(self, w: Workload) -> Answer:
        return ranked(w, self.kn, self.query, self.brief)


def _method(p: _Plain, asked: Workload, result: Answer) -> Answer | None:
    """The training method an expert would choose for the cards (kb.engine.advising.train_choice)."""
    return train_choice.chosen(p.kn, asked, result, p.rank)


def _scale_out(p: _Plain, asked: Workload, result: Answer) -> Answer | None:
    """A training job no card holds, answered on the cards people scale out to."""
    out = train_choice.scaled_out(p.kn, asked, result, lambda x: answer(x, p.kn, p.query, brief=p.brief))
    p.final = bool(out)
    return out


def _cost_batch(p: _Plain, asked: Workload, result: Answer) -> Answer | None:
    """A cost question at the batch that loads the cards (kb.engine.resolving.cost_batch)."""
    found = cost_batch.loaded(asked, p.kn, result, p.rank)
    if found is None:
        return None
    out, p.single = found
    return out


def _budget(p: _Plain, asked: Workload, result: Answer) -> Answer | None:
    """An inference ranking with a budget and no precision named: the format to buy for."""
    return None if "training" in result.bottleneck else _budget_precision(asked, p.kn, p.query, p.brief, result)


# the stages of a plain answer, in order: whether one applies (read from the workload as asked,
# before the ranking fills it in), and what it makes of the answer so far (None: leaves it)
PLAIN_STAGES: tuple[tuple[Callable[[Knowledge, Workload], bool],
                          Callable[[_Plain, Workload, Answer], Answer | None]], ...] = (
    (train_choice.applies, _method),
    (train_choice.scales_out, _scale_out),
    (lambda kn, w: cost_batch.applies(w, kn), _cost_batch),
    (lambda kn, w: w.budget_usd is not None and w.precision is None and not w.gpus, _budget),
)


def _plain(w: Workload, kn: Knowledge, query: str, brief: bool) -> tuple[Answer, bool]:
    """The answer to a question without a search, and whether it is final (no verdict to add)."""
    p = _Plain(kn, query, brief)
    stages = [(run, w.copy()) for applies, run in PLAIN_STAGES if applies(kn, w)]
    result = p.rank(w)
    for run, asked in stages:
        result = run(p, asked, result) or result
        if p.final:
            return result, True
    result.question = _plain_question(w, result, result.question)
    if p.single is not None:
        result.question["one_user_usd_per_million"] = p.single
    return result, False


def _plain_question(w: Workload, a: Answer, facts: Question | None) -> Question:
    """What a question without a solve asks: the fit on the GPUs named (one configuration, or
    several compared), which GPU (none named), or its cost; the figure it leads with."""
    asked = [g for g in a.gpus if g.requested]
    kind = ("which_gpu" if not asked else "compare" if len(asked) > 1 else "fit")
    if w.focus == "cost" and len(asked) < 2 and w.question != "which_gpu":
        kind = "cost"
    first = a.gpus[0] if a.gpus else None
    q: Question = cast("Question", {**(facts or {}), "kind": kind, "vary": None, "unit": None,
                                    "value": first.name if kind == "which_gpu" and first else None,
                                    "gpu": first.name if first else None})
    if kind == "which_gpu":
        q["ranking"] = [g.id for g in a.gpus if g.fits]
    return q


def _budget_precision(w: Workload, kn: Knowledge, query: str, brief: bool, plain: Answer) -> Answer | None:
    """A ranking with a budget and no precision named: the weight format an expert would buy for,
    the default or one of the rules' precision options (prices.yaml advice options): the one
    whose best configuration within the budget meets the target (the speed floor), then takes the
    fewest cards, then the least quality cost; said in the assumptions. None when the default is that format."""
    first = next((r for r in plain.gpus if r.fits and r.within_budget), None)
    found: list[tuple[bool, int, int, Answer, str]] = [
        (not (first and first.meets_target), first.count if first else 1 << 30, 0, plain, "")]
    for rule in kn.advice.get("options") or []:
        precision = rule.get(N.PRECISION)
        if not precision or "inference" not in rule["tasks"]:
            continue
        trial = w.copy()
        trial.precision = precision
        a = ranked(trial, kn, query, brief)
        best = next((r for r in a.gpus if r.fits and r.within_budget), None)
        if best is not None:
            said = (f"precision: {precision}, for the budget of ${w.budget_usd:,.0f}: {rule['change']} holds it on "
                    f"{best.count}× {best.name}, fewer cards than the default precision needs within the budget "
                    f"(quality: {rule['quality']}) [{rule['source']}]")
            found.append((not best.meets_target, best.count, int(rule["quality_rank"]), a, said))
    _, _, _, a, said = min(found, key=lambda f: (f[0], f[1], f[2]))   # meets the speed floor first
    if a is plain:
        return None
    a.assumptions.append(said)
    return a


def _exact_gpus_needed(kn: Knowledge, w: Workload, rows: list[GpuRow],
                       candidates: list[tuple[GPU, int, bool]], order: list[int],
                       primary: Evaluated) -> None:
    """Rows that do not fit get the fewest GPUs that hold the job by the forward model (the
    even-split formula can be too few when the KV cache is replicated over tensor-parallel ranks)."""
    from kb.engine.search import solve

    steps = int(kn.constants[N.GPUS_PER_NODE]["value"]) ** 2
    probes = Probes(kn, w)
    for rank, i in enumerate(order):
        row = rows[rank]
        if row.fits or not row.gpus_needed:
            continue
        found = solve.fewest_gpus(kn, w, candidates[i][0], row.gpus_needed, steps, probes)
        if found is not None:
            row.gpus_needed = found
            if rank == 0:
                primary.scope[N.GPUS_NEEDED] = found


def _scaled_gpus_needed(kn: Knowledge, asked: Workload, rows: list[GpuRow],
                        candidates: list[tuple[GPU, int, bool]], order: list[int], primary: Evaluated) -> None:
    """A training job no count holds under the runtime's own data parallel (gpus_needed 0):
    several GPUs run it in the layout people use at that scale (kb.engine.resolving.training.resolve_at_scale),
    so the fewest that hold it come from the forward model over the count."""
    upper = int(kn.query["solve"]["how_many_gpus"]["upper"])
    for rank, i in enumerate(order):
        row = rows[rank]
        if row.fits or row.gpus_needed != 0 or not row.usable_vram_gb:
            continue
        found = solve.fewest_scanned(kn, asked, candidates[i][0], upper)
        if found is not None:
            row.gpus_needed = found
            if rank == 0:
                primary.scope[N.GPUS_NEEDED] = found


def ranked(w: Workload, kn: Knowledge, query: str = "", brief: bool = False) -> Answer:
    """The answer on the candidate cards (a plain question's ranking, before answer() may settle on
    another question of it); a ranking also ranks, under the runtime that runs them,
    the cards its default runtime does not (kb.engine.advising.per_card)."""
    asked = w.copy() if per_card.applies(w, kn) else None
    result = _ranked(w, kn, query, brief)
    if asked is None:
        return result
    return per_card.merged(asked, kn, result, lambda x, ids: _ranked(x, kn, query, brief, ids))


def _ranked(w: Workload, kn: Knowledge, query: str = "", brief: bool = False,
            only: frozenset[str] | None = None) -> Answer:
    """The ranking's stages: the workload resolved, every candidate evaluated at once, the rows
    ranked and the first one's figures; then, but for a brief answer, the flows walked and the
    answer assembled with its trace, claims and advice."""
    at_scale = kn.sharding.get("at_scale") or []
    scalable = (w.gpus and w.sharding is None and not w.offload
                and (w.task == "train" or any(w.task in r["tasks"] for r in at_scale)))
    asked = w.copy() if scalable else None
    r = _resolved(w, kn)
    candidates, every, layouts = _evaluated(w, kn, r, *_candidates(w, kn, r, only))
    n = len(candidates)
    sizing = next(f for f in kn.flows if f.role == "sizing")
    order = list(range(n)) if w.gpus else rank_order(rightsize.sort_keys(kn, w, sizing.ranking), every, n)
    rows = rows_of(every, candidates, order)
    rightsize.fill_rows(every.scope, rows, order, r.is_training)
    primary = every.view(order[0])
    _first_figures(w, kn, r, layouts[order[0]], primary)
    if w.gpus and not r.is_training and r.runtime.get("multi_gpu") == "tensor_parallel":
        _exact_gpus_needed(kn, w, rows, candidates, order, primary)
    if asked is not None and r.is_training and not brief:
        _scaled_gpus_needed(kn, asked, rows, candidates, order, primary)
    fits = every.scope.get(N.FITS)
    primary.scope[N.GPU_CANDIDATES] = n
    primary.scope[N.FITTING_GPUS] = sum(map(bool, fits)) if fits.__class__ is Col else n * bool(fits)
    primary.scope[N.FEWEST_GPUS_NEEDED] = rightsize.fewest_needed(rows)
    primary.scope[N.SORT_ORDER] = rightsize.sort_text(kn, w) or "fit, speed and power"
    if brief:
        return brief_answer(kn, r, primary, rows, query)
    return _whole(w, kn, query, r, (candidates, every, order, rows), primary)


def _resolved(w: Workload, kn: Knowledge) -> Resolved:
    """The workload resolved; a model-parallel training stack on the cards named with no split
    asked gets the split chosen for its first card (kb.engine.search.single_probe.choose_split)."""
    r = resolve_workload(w, kn)
    if r.is_training and w.gpus and not (w.tp or w.pp) and tr.is_model_parallel(w, kn):
        req = w.gpus[0]
        choose_split(kn, r, capacity_gpu(req, kn) if req.gpu_id is None else kn.gpus[req.gpu_id],
                     tr.gpu_count(w))
    return r


def _candidates(w: Workload, kn: Knowledge, r: Resolved,
                only: frozenset[str] | None) -> tuple[list[tuple[GPU, int, bool]], Scope]:
    """The candidate configurations (card, count, named) and their cards' names as columns: the
    cards named; the classes of card asked about (or the cards given), where the runtime runs
    them; else every catalogue card the runtime runs on."""
    if w.gpus:
        candidates = [(capacity_gpu(req, kn) if req.gpu_id is None else kn.gpus[req.gpu_id], req.count, True)
                      for req in w.gpus]
        return candidates, gpu_columns([(g, c) for g, c, _ in candidates], r.precision, gemm_of(r.runtime))
    runs = [g for g in kn.gpus.values() if runs_on(r.runtime, g, r.precision["id"])]
    if w.segments or only:
        candidates = [(g, 1, False) for g in runs if (not w.segments or g.get("segment") in w.segments)
                      and (only is None or g["id"] in only)] or [(g, 1, False) for g in runs]
        return candidates, gpu_columns([(g, 1) for g, _, _ in candidates], r.precision, gemm_of(r.runtime))
    return [(g, 1, False) for g in runs], catalogue_columns(kn, r.precision, r.runtime)


def _evaluated(w: Workload, kn: Knowledge, r: Resolved, candidates: list[tuple[GPU, int, bool]],
               gpus: Scope) -> tuple[list[tuple[GPU, int, bool]], Evaluated, list[Layout]]:
    """Every candidate evaluated at once (per-GPU names hold one value per candidate,
    kb.expr.parse.Col) for its row and cost. A ranking over the catalogue first finds each card's
    fewest GPUs that hold the job and judges the card at that count (kb.engine.advising.advice)."""
    layouts = layouts_of(r, kn, candidates)
    gpus = {**gpus, **layout_columns(layouts)}
    base = base_scope(r, kn)
    every = Evaluated({**base, **gpus}, columns=[k for k, v in gpus.items() if v.__class__ is Col])
    rightsizing = not w.gpus and bool(kn.advice)
    # judging each GPU at the fewest cards that hold the job needs only that count at one card
    evaluate(kn, every, (N.GPUS_NEEDED,) if rightsizing else ROW_FORMULAS[r.is_training])
    if rightsizing:
        candidates = rightsize.configurations(kn, every.scope.get(N.GPUS_NEEDED), [g for g, _, _ in candidates],
                                              lambda n: layout_of(r, kn, n).canonical)
        layouts = layouts_of(r, kn, candidates)
        counts = Col.of(c for _, c, _ in candidates)   # the same cards, each at its own count
        gpus = {**gpus, N.GPU_COUNT: counts if any(c != counts[0] for c in counts) else counts[0],
                **layout_columns(layouts)}
        every = Evaluated({**base, **gpus}, columns=[k for k, v in gpus.items() if v.__class__ is Col])
        evaluate(kn, every, ROW_FORMULAS[r.is_training])
    evaluate(kn, every, rightsize.cost_formulas(r.is_training))
    return candidates, every, layouts


def _first_figures(w: Workload, kn: Knowledge, r: Resolved, layout: Layout, primary: Evaluated) -> None:
    """What the first row's layout and a training job's time and paged states add to the
    assumptions, and the parallel layout the workload reports."""
    if layout.note:
        r.assumptions.append(say(kn, "assumption_layout", note=layout_note(kn, layout.note)))
    if w.spec_method and not r.is_training:
        evaluate(kn, primary, (N.SPEC_SPEEDUP, N.DRAFT_GB, N.SPEC_EXPECTED_TOKENS))
        r.assumptions.append(spec_note(w, kn, primary.scope))
    if r.is_training:
        evaluate(kn, primary, (N.PAGED_STATES_GB, N.PAGED_OUT))
        r.assumptions.extend(n for n in (tr.time_note(primary.scope), tr.paged_note(primary.scope)) if n)
    r.workload_parallel = tr.parallel(w, kn, layout) if r.is_training else layout.as_dict()


def _walked(kn: Knowledge, primary: Evaluated,
            tracer: Tracer) -> tuple[list[str], Outcome, list[Advice], list[ClaimChecked]]:
    """Each flow that bears on the question walked on the first row's view: the path, the sizing
    flow's outcome, the other flows' advice and where that advice differs from kbq's answer."""
    path: list[str] = []
    outcome: Outcome = {"outcome": None, "outcome_text": None, "unknown": None}
    advice: list[Advice] = []
    seeds: list[ClaimChecked] = []
    for flow in kn.flows:
        if flow.applies is not None and not applies(kn, flow, primary):
            continue                        # a flowchart that does not bear on this question
        flow_path, text = walk(flow, kn, primary, tracer)
        path.extend(flow_path)
        if flow.role == "sizing":
            outcome = {"outcome": flow_path[-1].split("/", 1)[1], "outcome_text": text,
                       "unknown": unknown.sizing_verdict(kn, flow, flow_path, primary.scope, primary.errors)}
        else:
            advice.append({"flow": flow.id, "title": flow.title, "source": flow.source,
                           "conclusion": text, "node": flow_path[-1]})
            seeds += differs(kn, flow, flow.nodes[flow_path[-1].split("/", 1)[1]], text, primary)
    return path, outcome, advice, seeds


def _whole(w: Workload, kn: Knowledge, query: str, r: Resolved,
           ranking: tuple[list[tuple[GPU, int, bool]], Evaluated, list[int], list[GpuRow]],
           primary: Evaluated) -> Answer:
    """The whole answer: the flows walked, the figures shown traced, the warnings, the claims
    checked, the recommendation and the prices."""
    candidates, every, order, rows = ranking
    tracer = Tracer(kn, primary)
    path, outcome, advice, seeds = _walked(kn, primary, tracer)
    shown, throughput, withheld = shown_figures(kn, r, primary, rows)
    for name in shown:
        tracer.formula("answer", name)
    warnings = list(r.warnings) + gpu_warnings(every, candidates, r) + [
        f"{name} could not be computed: {msg}" for name, msg in primary.errors.items()]
    disagreements, agreements = check_claims(kn, every, primary, order)
    disagreements += seeds
    s = primary.scope
    bands = error_bands(kn, r)
    warnings += withheld
    rec = rightsize.recommendation(kn, w, rows, r.is_training) if not w.gpus else None
    r.assumptions.extend(rightsize.price_assumptions(kn, w, rows[0]))
    question: Question = {"kind": "", "vary": None, "unit": None, "value": None, "gpu": None,
                          "focus": w.focus, N.TOTAL_GB: s.get(N.TOTAL_GB),
                          N.FITTING_GPUS: s.get(N.FITTING_GPUS), N.GPU_CANDIDATES: len(candidates),
                          N.FEWEST_GPUS_NEEDED: s.get(N.FEWEST_GPUS_NEEDED),
                          "outcome": outcome["outcome"], "outcome_text": outcome["outcome_text"],
                          "unknown": outcome["unknown"]}
    return Answer(
        query=query, workload=workload_dict(r), assumptions=r.assumptions,
        memory=memory(s, r),
        throughput=throughput,
        bottleneck=bottleneck(s, r),
        gpus=rows, verdict="", path=path, trace=tracer.steps, question=question,
        disagreements=disagreements, warnings=warnings, advice=advice,
        claims_checked=agreements, error_bands=bands, recommendation=rec,
        prices=rightsize.prices_used(kn, w, [row.id for row in rows]))
