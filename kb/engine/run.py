"""The engine's entry: Workload + Knowledge → Answer.

In: a Workload (kb.query.parse) and the Knowledge. Out: an Answer (kb.engine.answer).
Steps: resolve the model, precision and defaults (kb.engine.scope, kb.engine.inputs); evaluate every candidate GPU
at once (kb.engine.gpus, kb.engine.evaluate); rank them by the sizing flow's ranking; on the
first GPU's own view, walk each flow (kb.engine.walk); check the sources' claims
(kb.engine.claims); assemble the answer (kb.engine.assemble). A capacity question is solved
first (kb.engine.solve), then answered at its value. Pure: no I/O, no printing.
"""

from __future__ import annotations

from kb.hints import TYPE_CHECKING, cast

from kb.engine import advice as rightsize, cost_batch, per_card, train_choice, unknown
from kb.engine import training as tr
from kb.engine.answer import Answer, GpuRow
from kb.engine.assemble import (ROW_FORMULAS, brief_answer, bottleneck, error_bands,
                                gpu_warnings, memory, rank_order, rows_of, shown_figures, workload_dict)
from kb.engine.claims import check_claims
from kb.engine.evaluate import Evaluated, Scope, evaluate, seed
from kb.engine.gpus import catalogue_columns, layout_columns, layout_of, layouts_of
from kb.engine.inputs import base_scope
from kb.engine.scope import capacity_gpu, question_format, resolve
from kb.knowledge.gpu_names import gemm_of, gpu_columns, runs_on
from kb.engine.walk import Tracer, applies, differs, walk
from kb.expr.parse import Col
from kb.knowledge.data import Knowledge
from kb.figures import num
from kb.query.workload import GpuRequest, Workload

if TYPE_CHECKING:
    from kb.engine import solve
    from kb.knowledge.records import GPU
    from kb.engine.answer_records import Advice, ClaimChecked, Outcome, Question


def answer(w: Workload, kn: Knowledge, query: str = "", *, brief: bool = False) -> Answer:
    """The answer to a workload; a capacity question is solved first, then answered at its value.
    `brief`: only the figures (GPU rows, memory, speed and cost), without the flows' walk, the
    trace, the claims and the advice text: what an option (kb.engine.options) shows of its answer.
    The engine puts what was asked and what answers it on `Answer.question` (its kind, the figure,
    the sizing flow's outcome); the verdict text is composed from that by kb.engine.verdict."""
    question_format(w, kn)
    if w.question in kn.query["solve"]:
        result = _answer_question(w, kn, query, brief)
    else:
        plain = w.copy() if w.budget_usd is not None and w.precision is None and not w.gpus else None
        loaded = w.copy() if cost_batch.applies(w, kn) else None    # before the answer fills w in
        method = w.copy() if train_choice.applies(kn, w) else None
        scale = w.copy() if train_choice.scales_out(kn, w) else None
        result = ranked(w, kn, query, brief)
        if method is not None:
            result = train_choice.chosen(kn, method, result, lambda x: ranked(x, kn, query, brief)) or result
        if scale is not None and (out := train_choice.scaled_out(kn, scale, result, lambda x: answer(x, kn, query, brief=brief))):
            return out
        single = None
        if loaded is not None:
            found = cost_batch.loaded(loaded, kn, result, lambda x: ranked(x, kn, query, brief))
            if found is not None:
                result, single = found
        if plain is not None and "training" not in result.bottleneck:
            result = _budget_precision(plain, kn, query, brief, result) or result
        result.question = _plain_question(w, result, result.question)
        if single is not None:
            result.question["one_user_usd_per_million"] = single
    result.unused_words = list(w.unused_words)
    if brief:
        return result
    from kb.engine.verdict import compose      # the text is composed once, from the data above

    result.verdict = compose(result, kn)
    return result


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
        precision = rule.get("precision")
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


def _answer_question(w: Workload, kn: Knowledge, query: str, brief: bool = False) -> Answer:
    # the searches are imported by the questions that run them, not by every answer's start-up
    from kb.engine import fewest, scaled, solve
    from kb.engine.budget import note, spent
    from kb.engine.probes import Probes
    from kb.engine.single_probe import at_value

    question = w.question or ""
    sized: list[solve.Row] = []         # the catalogue's cards no copy of a training job fits (kb.engine.scaled)
    unsized: list[str] = []
    if w.gpus:
        targets = [(capacity_gpu(g, kn) if g.gpu_id is None else kn.gpus[g.gpu_id], g.count) for g in w.gpus]
    elif question == "how_many_gpus":
        got = resolve(w.copy(), kn)
        targets = [(g, 1) for g in kn.gpus.values() if runs_on(got.runtime, g, got.precision["id"])]
        targets, sized, unsized = scaled.split_off(kn, w, got, targets)
    else:
        targets = [_first_ranked(w, kn)]
    probes = Probes(kn, w, [gpu for gpu, _ in targets],     # what every card's search shares
                    catalogue=question == "how_many_gpus" and not w.gpus and not sized)
    rows: list[solve.Row] = []
    stopped = None
    side_by_side = question == "how_many_gpus" and probes.shared_counts()
    step = solve.cards_at_once(kn) if side_by_side else 1
    if brief and side_by_side:      # an option reads only the card that answers (kb.engine.fewest)
        rows.append(fewest.primary(kn, probes))
    for first in range(0, len(targets) if not rows else 0, step):  # the first cards always, the rest
        if rows and (stopped := spent()) is not None:                   # while the budget lasts
            break
        if side_by_side:
            rows.extend(solve.how_many_rows(kn, w, probes, first, min(first + step, len(targets))))
        else:
            rows.append(solve.solve_row(kn, w, question, targets[first][0], targets[first][1], probes))
    rows += sized
    found = [r for r in rows if r["found"]]
    if w.gpus or not found:
        primary = rows[0]
    elif question == "how_many_gpus":
        primary = min(found, key=lambda r: (r["value"], -(kn.gpus[r["gpu_id"]]["bandwidth_gb_s"] or 0)))
    else:
        primary = max(found, key=lambda r: r["value"])
    spec = kn.query["solve"][question]
    limit, allows = _model_limit(kn, w, question, primary)
    if limit is not None:
        primary = {**primary, "value": float(limit), "binds": "the model's maximum context",
                   "at_upper_bound": False}
    w2 = at_value(w, spec["vary"], primary["value"], kn) if primary["found"] else at_value(w, "users", w.users or 1)
    w2.gpus = [g for g in w2.gpus] or []
    if not w.gpus:
        w2.gpus = [GpuRequest(primary["gpu_id"], int(primary.get("count") or 1))]
        if primary["found"] and spec["vary"] == "gpu_count":
            w2.gpus[0].count = int(primary["value"])
    elif primary["found"] and spec["vary"] == "gpu_count":
        for g, row in zip(w2.gpus, rows + [primary] * (len(w2.gpus) - len(rows)), strict=True):
            g.count = int((row if row["found"] else primary)["value"])     # each card its own count
    known = (probes.scope_at(spec["vary"], primary["value"], targets[0][0], int(primary["value"]) if spec["vary"]
                             == "gpu_count" else targets[0][1], spec.get("holds", "fits"))   # computed by the search
             if brief and primary["found"] and len(targets) == 1 else None)
    result = ranked(w2, kn, query, brief, known)
    facts: Question | dict[str, object] = result.question or {}
    if spec.get("holds") == "serves_at_floor":
        floor = w.speed_floor_tok_s or kn.constants["decode_speed_floor_tok_s"]["value"]
        result.assumptions.append(f"speed floor: every user decodes at {floor:g} tokens/s or more"
                                  + ("" if w.speed_floor_tok_s else " (formulas.yaml decode_speed_floor_tok_s)"))
    q: Question = cast("Question", {
        **facts, "kind": question, "vary": spec["vary"], "unit": spec["unit"],
        "value": primary["value"], "gpu": primary["gpu"], "answer": primary,
        "lower": spec["lower"], "upper": spec["upper"],
        "per_gpu": [{"gpu": r["gpu"], "gpu_id": r["gpu_id"], "value": r["value"]} for r in rows]})
    result.question = q
    if question == "how_many_gpus" and not primary["found"]:
        q["note"] = tr.no_count_note(kn, result.memory).strip() or None
    if question == "largest_model" and primary["found"]:
        q["value_b"] = primary["value"] / kn.billion
        q["next_b"] = (primary.get("next") or 0) / kn.billion
    if question == "how_many_gpus" and primary["found"] and result.gpus:
        q["fewest_by_memory"] = result.gpus[0].gpus_needed
    if limit is not None:
        q["model_max_context"] = limit
        q["memory_allows"] = allows or 0.0
        result.warnings.append(f"memory allows {num(allows, 6)} tokens, but the model's "
                               f"maximum context is {num(limit, 6)}")
    if stopped is not None:
        text = (f"{len(targets) + len(sized) - len(rows)} of the {len(targets) + len(sized)} GPUs were not "
                f"searched: this answer's {stopped.reason()} ran out (the answer is the best of the {len(rows)} searched)")
        note(stopped, text)
        result.warnings.append(text)
    result.warnings += unsized
    result.path.insert(0, f"question/{question}")
    return result


def _model_limit(kn: Knowledge, w: Workload, question: str, row: solve.Row) -> tuple[int | None, float | None]:
    """A max-context answer never exceeds the model's own limit: (that limit, what memory
    allows) when memory allows more, else (None, None)."""
    if question != "max_context" or not row["found"]:
        return None, None

    limit = resolve(w.copy(), kn).model.get("max_context")
    if limit and row["value"] > limit:
        return int(limit), float(row["value"])
    return None, None


def _exact_gpus_needed(kn: Knowledge, w: Workload, rows: list[GpuRow],
                       candidates: list[tuple[GPU, int, bool]], order: list[int],
                       primary: Evaluated) -> None:
    """Rows that do not fit get the fewest GPUs that hold the job by the forward model (the
    even-split formula can be too few when the KV cache is replicated over tensor-parallel ranks)."""
    from kb.engine import solve
    from kb.engine.probes import Probes

    steps = int(kn.constants["gpus_per_node"]["value"]) ** 2
    probes = Probes(kn, w)
    for rank, i in enumerate(order):
        row = rows[rank]
        if row.fits or not row.gpus_needed:
            continue
        found = solve.fewest_gpus(kn, w, candidates[i][0], row.gpus_needed, steps, probes)
        if found is not None:
            row.gpus_needed = found
            if rank == 0:
                primary.scope["gpus_needed"] = found


def _first_ranked(w: Workload, kn: Knowledge) -> tuple[GPU, int]:
    """The first configuration of the sizing flow's ranking for the workload as asked, its card
    and count (a capacity question with no GPU is answered on it)."""
    plain = w.copy()
    plain.question = None
    return kn.gpus[(first := ranked(plain, kn).gpus[0]).id], first.count


def _scaled_gpus_needed(kn: Knowledge, asked: Workload, rows: list[GpuRow],
                        candidates: list[tuple[GPU, int, bool]], order: list[int], primary: Evaluated) -> None:
    """A training job no count holds under the runtime's own data parallel (gpus_needed 0):
    several GPUs run it in the layout people use at that scale (kb.engine.training.resolve_at_scale),
    so the fewest that hold it come from the forward model over the count."""
    from kb.engine import solve

    upper = int(kn.query["solve"]["how_many_gpus"]["upper"])
    for rank, i in enumerate(order):
        row = rows[rank]
        if row.fits or row.gpus_needed != 0 or not row.usable_vram_gb:
            continue
        found = solve.fewest_scanned(kn, asked, candidates[i][0], upper)
        if found is not None:
            row.gpus_needed = found
            if rank == 0:
                primary.scope["gpus_needed"] = found


def ranked(w: Workload, kn: Knowledge, query: str = "", brief: bool = False,
           known: Scope | None = None) -> Answer:
    """The answer on the candidate cards (a plain question's ranking, before answer() may settle on
    another question of it); a ranking also ranks, under the runtime that runs them,
    the cards its default runtime does not (kb.engine.per_card). `known`: a brief answer's
    figures already computed from the same inputs (kb.engine.evaluate.seed)."""
    asked = w.copy() if per_card.applies(w, kn) else None
    result = _ranked(w, kn, query, brief, known=known)
    if asked is None:
        return result
    return per_card.merged(asked, kn, result, lambda x, ids: _ranked(x, kn, query, brief, ids))


def _ranked(w: Workload, kn: Knowledge, query: str = "", brief: bool = False,
            only: frozenset[str] | None = None, known: Scope | None = None) -> Answer:
    at_scale = kn.sharding.get("at_scale") or []
    scalable = (w.gpus and w.sharding is None and not w.offload
                and (w.task == "train" or any(w.task in r["tasks"] for r in at_scale)))
    asked = w.copy() if scalable else None
    r = resolve(w, kn)
    if r.is_training and w.gpus and not (w.tp or w.pp) and tr.is_model_parallel(w, kn):
        from kb.engine.single_probe import choose_split

        req = w.gpus[0]
        choose_split(kn, r, capacity_gpu(req, kn) if req.gpu_id is None else kn.gpus[req.gpu_id],
                           tr.gpu_count(w))
    sizing = next(f for f in kn.flows if f.role == "sizing")

    # every candidate GPU at once: per-GPU names hold one value per candidate (kb.expr.parse.Col)
    if w.gpus:
        candidates = [(capacity_gpu(req, kn) if req.gpu_id is None else kn.gpus[req.gpu_id], req.count, True)
                      for req in w.gpus]
        gpus = gpu_columns([(g, c) for g, c, _ in candidates], r.precision, gemm_of(r.runtime))
    elif w.segments or only:    # the classes of card asked about (or the cards given): judge only those
        candidates = [(g, 1, False) for g in kn.gpus.values()
                      if runs_on(r.runtime, g, r.precision["id"]) and (not w.segments or g.get("segment") in w.segments)
                      and (only is None or g["id"] in only)] or [
            (g, 1, False) for g in kn.gpus.values() if runs_on(r.runtime, g, r.precision["id"])]
        gpus = gpu_columns([(g, 1) for g, _, _ in candidates], r.precision, gemm_of(r.runtime))
    else:
        candidates = [(g, 1, False) for g in kn.gpus.values() if runs_on(r.runtime, g, r.precision["id"])]
        gpus = catalogue_columns(kn, r.precision, r.runtime)
    # a formula is computed when the rows, a flow or a claim first needs it
    layouts = layouts_of(r, kn, candidates)
    gpus = {**gpus, **layout_columns(layouts)}
    base = base_scope(r, kn)
    every = Evaluated({**base, **gpus}, columns=[k for k, v in gpus.items() if v.__class__ is Col])
    rightsizing = not w.gpus and bool(kn.advice)
    if known is not None and brief and not rightsizing:
        seed(kn, every.scope, known, ROW_FORMULAS[r.is_training] + rightsize.cost_formulas(r.is_training))
    # judging each GPU at the fewest cards that hold the job needs only that count at one card
    evaluate(kn, every, ("gpus_needed",) if rightsizing else ROW_FORMULAS[r.is_training])
    if rightsizing:
        candidates = rightsize.configurations(kn, every.scope.get("gpus_needed"), [g for g, _, _ in candidates],
                                              lambda n: layout_of(r, kn, n).canonical)
        layouts = layouts_of(r, kn, candidates)
        counts = Col.of(c for _, c, _ in candidates)   # the same cards, each at its own count
        gpus = {**gpus, "gpu_count": counts if any(c != counts[0] for c in counts) else counts[0],
                **layout_columns(layouts)}
        every = Evaluated({**base, **gpus}, columns=[k for k, v in gpus.items() if v.__class__ is Col])
        evaluate(kn, every, ROW_FORMULAS[r.is_training])
    evaluate(kn, every, rightsize.cost_formulas(r.is_training))
    n = len(candidates)
    order = list(range(n)) if w.gpus else rank_order(rightsize.sort_keys(kn, w, sizing.ranking), every, n)
    rows = rows_of(every, candidates, order)
    rightsize.fill_rows(every.scope, rows, order, r.is_training)
    fits = every.scope.get("fits")
    primary = every.view(order[0])
    if layouts[order[0]].note:
        r.assumptions.append(f"layout: {layouts[order[0]].note}")
    if r.is_training:
        evaluate(kn, primary, ("paged_states_gb", "paged_out"))
        r.assumptions.extend(n for n in (tr.time_note(primary.scope), tr.paged_note(primary.scope)) if n)
    r.workload_parallel = (tr.parallel(w, kn, layouts[order[0]]) if r.is_training
                           else layouts[order[0]].as_dict())
    if w.gpus and not r.is_training and r.runtime.get("multi_gpu") == "tensor_parallel":
        _exact_gpus_needed(kn, w, rows, candidates, order, primary)
    if asked is not None and r.is_training and not brief:
        _scaled_gpus_needed(kn, asked, rows, candidates, order, primary)
    primary.scope["gpu_candidates"] = n
    primary.scope["fitting_gpus"] = sum(map(bool, fits)) if fits.__class__ is Col else n * bool(fits)
    primary.scope["fewest_gpus_needed"] = rightsize.fewest_needed(rows)
    primary.scope["sort_order"] = rightsize.sort_text(kn, w) or "fit, speed and power"
    if brief:
        return brief_answer(kn, r, primary, rows, query)

    tracer = Tracer(kn, primary)
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
                          "focus": w.focus, "total_gb": s.get("total_gb"),
                          "fitting_gpus": s.get("fitting_gpus"), "gpu_candidates": n,
                          "fewest_gpus_needed": s.get("fewest_gpus_needed"),
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
