"""The verdict: the answer to what was asked, first, with its figure, within a word limit
(rules/query.yaml verdict.max_words; the wording of several sentences is verdict.templates).

In: an Answer whose engine data is filled in (Answer.question: the kind of question, the figure
found, the sizing flow's outcome; the ranked GPU rows; the recommendation; the options).
Out: one text, composed here and nowhere else, that `Answer.verdict` (the `--json` contract)
carries and every surface shows. By kind:
  fit, compare     the fit on the GPUs named (one line each when several), then what would fit
  A vs B of one field (Answer.comparison: "fp8 vs int4", "vllm vs llama.cpp", "8b vs 70b")
                   one clause per side with its fit, memory per GPU and speed (or cost, when asked),
                   then which side wins on what
  which_gpu        the pick with its price and speed, then at most two alternatives of another kind
  cost             the cost per million tokens (serving) or per run (training) first
  max_users, max_context, largest_model, how_many_gpus, max_batch
                   the number first, then on what, then what binds
The ranking policy is never recited here: the table says it once ("ranked by value: …").
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kb.engine.verdicts.verdict_lead import bought, config, module_lacks, speed
from kb.engine.verdicts.wording import say
from kb.engine.verdicts.verdict_lead import lead as _lead
from kb.engine.verdicts.verdict_lead import rate as _rate
from kb.engine.verdicts.verdict_lead import training as _training
from kb.engine.resolving.scope import FORMAT_DEFAULT, TOKENS_DEFAULT
from kb.engine.verdicts.verdict_count import how_many, target
from kb.engine.verdicts.verdict_fleet import fleet, fleet_sides, fleets_unserved
from kb.engine.verdicts.verdict_room import tight, tight_sentences
from kb.engine.verdicts.verdict_sides import sides
from kb.figures import num, usd
from kb.knowledge import names as N
from kb.engine.advising.options import TARGETS
from kb.query.unparse import value_text

if TYPE_CHECKING:
    from collections.abc import Mapping
    from kb.engine.assembly.answer import Answer, GpuRow
    from kb.engine.assembly.answer_records import Question, Side
    from kb.knowledge.data import Knowledge

SOLVED = ("max_users", "max_context", "largest_model", "how_many_gpus", "max_batch")


def words(text: str) -> int:
    return len(text.split())


def compose(a: Answer, kn: Knowledge) -> str:
    """The verdict of an answer (see the module docstring)."""
    q: Question = a.question or {"kind": "", "vary": None, "unit": None, "value": None, "gpu": None}
    if q.get("unknown"):
        return str(q["unknown"])
    kind = q.get("kind") or ""
    fleets = bool(a.comparison) and any("replicas" in side for side in a.comparison or [])
    if fleets and any(side.get("replicas") for side in a.comparison or []):
        parts = fleet_sides(a, kn)          # fleets of two or more cards for one traffic
    elif a.replicas:
        parts = [fleet(a, kn)]
    elif kind in SOLVED and not (kind == "how_many_gpus" and sum(g.requested for g in a.gpus) > 1):
        parts = _solved(a, q, kn) + (fleets_unserved(a, kn, served_first=False) if fleets else [])
    elif kind in ("compare", "how_many_gpus"):      # how many of each of two cards: side by side
        parts = _compare(a, kn)
    elif a.comparison and len(a.comparison) > 1:
        formats = {s.get(N.PRECISION) for s in a.comparison}

        def label(s: Side) -> str:
            # runtimes compared each at its users' format: the format is part of the side's name
            at = f" at {s.get(N.PRECISION)}" if len(formats) > 1 and s["field"] != N.PRECISION else ""
            return value_text(kn, s["field"], s["value"]) + at
        parts = sides(kn.query["verdict"], a.comparison, str(q.get("kind") or ""), _training(a),
                      _fixes(a, kn, 1, label(a.comparison[0])), label)   # the options change the first side
    elif kind == "which_gpu" or not any(g.requested for g in a.gpus):
        parts = _which(a, q, kn)
    elif kind == "cost":
        parts = _cost(a, q, kn) or _fit(a, q, kn)
    else:
        parts = _fit(a, q, kn)
    return fitted([p for p in parts if p], kn)


SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z]|\d+× )")      # a sentence may open with a configuration


def fitted(parts: list[str], kn: Knowledge) -> str:
    """The sentences in order, leaving out the last ones while the text is over the word limit
    (query.yaml verdict.max_words; the first, the answer itself, always stays)."""
    most = kn.query["verdict"]["max_words"]["value"]
    sentences = [x for p in parts for x in SENTENCE.split(p) if x]
    while len(sentences) > 1 and words(" ".join(sentences)) > most:
        sentences = sentences[:-1]
    return " ".join(sentences)


# ---------------------------------------------------------------- pieces

def _borderline(a: Answer, g: GpuRow, kn: Knowledge) -> str | None:
    """A fit whose headroom is inside the memory estimate's p90 error band."""
    band = a.error_bands.get(N.TOTAL_GB)
    pct = band.get("p90_pct") if band else None
    if g.fits and g.offload_gb:                                          # formulas.yaml offload_gb
        return say(kn, "offloaded", gb=num(g.offload_gb))
    if g.fits and g.headroom_gb is not None and g.headroom_gb < 0:
        return say(kn, "offloaded", gb=num(-g.headroom_gb))
    if not g.fits or pct is None or g.per_gpu_gb is None or g.headroom_gb is None:
        return None
    if g.headroom_gb >= g.per_gpu_gb * pct / 100:
        return None
    return kn.query["verdict"]["templates"]["borderline"].format(spare=num(g.headroom_gb), pct=num(pct))


def _fixes(a: Answer, kn: Knowledge, most: int | None = None, what_fits: str = "it") -> list[str]:
    """The options that would hold the job (at most query.yaml verdict.most_fixes, or `most`), with
    their figure, a sentence each (the GPU named only when it is not the one asked about);
    `what_fits`: what the first one names."""
    if most is None:
        most = int(kn.query["verdict"]["most_fixes"]["value"])
    asked_target = _target_asked(a)         # a default time floor is no target: a fix that fits is one
    found = [o for o in a.options or [] if o[N.FITS]
             and (o.get(N.MEETS_TARGET) is not False or not asked_target)][:most]
    asked = next((g.id for g in a.gpus if g.requested), None)
    out = []
    for i, o in enumerate(found):
        on = f"{o['count']}×" + ("" if o["gpu_id"] == asked else f" {o['gpu']}")
        what = f"{o['change_only']} on {on}"
        t = kn.query["verdict"]["templates"]
        out.append(t["fix_first"].format(change=what, what=what_fits, per_gpu=num(o[N.PER_GPU_GB])) if i == 0
                   else t["fix_more"].format(change=what))
    return out


# ---------------------------------------------------------------- fit, compare, cost

def _fit(a: Answer, q: Question, kn: Knowledge) -> list[str]:
    g = next((x for x in a.gpus if x.requested), a.gpus[0] if a.gpus else None)
    if g is None:
        return [str(q.get("outcome_text") or "")]
    focus = q.get("focus")
    if focus is None and _training(a) and not any(s.startswith(TOKENS_DEFAULT) for s in a.assumptions):
        focus = "time"          # 'pretrain 7b on 1t tokens on 256 h100': the tokens named ask how long
    lead = _lead(kn, a, focus, g)
    text = str(q.get("outcome_text") or "")
    timed = focus == "time" and _training(a) and a.throughput.get(N.TRAIN_TIME_S)    # lead_time_training
    if lead and timed and g.fits and g.per_gpu_gb is not None:
        lead, text = say(kn, "lead_time_fits", lead=lead[:-1], per_gpu=num(g.per_gpu_gb),
                         usable=num(g.usable_vram_gb)), ""
    parts: list[str | None] = [lead, text] if lead else [text]
    if g.fits:
        s = speed(kn, g, _training(a))
        parts += [_borderline(a, g, kn), say(kn, "speed_line", speed=s) if s and not lead else None]
        if g.meets_target is False and _target_asked(a):    # a default horizon is no target asked
            parts.append(kn.query["verdict"]["templates"]["misses_target"])
            parts += _fixes(a, kn)
    else:           # the refusal's first sentence, then what would fit, then the rest of why
        first, *why = SENTENCE.split(text)
        fixes = _fixes(a, kn)
        if q.get("outcome") in ("replicas_verdict", "too_small_verdict") and (
                not fixes or g.count > 1):      # why no count holds it: for several cards asked, or no fix
            parts = [lead, first, *why[:1], *fixes, *why[1:]]
        else:
            parts = [lead, first, *fixes, *why]
    return [p for p in parts if p]


def _target_asked(a: Answer) -> bool:
    """The query set a speed, time to first token, volume or deadline target."""
    return any(a.workload.get(k) is not None for k in TARGETS)


def _cost(a: Answer, q: Question, kn: Knowledge) -> list[str] | None:
    g = next((x for x in a.gpus if x.requested), a.gpus[0] if a.gpus else None)
    if g is None or not g.fits:
        return None
    users = a.workload.get(N.USERS) or 1
    if _training(a):
        if g.run_cost_usd is None:
            return None
        first = say(kn, "cost_run", cost=usd(g.run_cost_usd), config=config(kn, g), hours=num(g.run_hours),
                    per_hour=usd(g.config_usd_per_hour))
    else:
        if g.usd_per_million_tokens is None:
            return None
        single = q.get("one_user_usd_per_million")
        values = {"cost": usd(g.usd_per_million_tokens), "config": config(kn, g), "users": users,
                  "users_word": say(kn, "word_users" if users != 1 else "word_user"),
                  "per_hour": usd(g.config_usd_per_hour)}
        first = (say(kn, "cost_tokens_most", **values, one_user=usd(single)) if single is not None
                 else say(kn, "cost_tokens", **values))
        hours = a.workload.get("hours_per_day")
        if isinstance(hours, (int, float)) and g.config_usd_per_hour:     # the hours a day were asked
            month = g.config_usd_per_hour * hours * float(kn.constants[N.DAYS_PER_MONTH]["value"])
            first += say(kn, "cost_month", hours=num(hours), cost=usd(month))
    buy = (say(kn, "cost_buy_payback", price=bought(kn, g), months=num(g.breakeven_months))
           if g.breakeven_months else say(kn, "cost_buy", price=bought(kn, g)))
    return [x for x in (first, buy if g.config_price_usd else None, str(q.get("outcome_text") or "")) if x]


def _compare(a: Answer, kn: Knowledge) -> list[str]:
    training = _training(a)
    asked = [g for g in a.gpus if g.requested]
    lines = []
    rent = a.workload.get("rent") is True           # a rented comparison is priced by the hour

    def price(g: GpuRow) -> str | None:
        if rent and training and g.run_cost_usd:
            return say(kn, "price_run", cost=usd(g.run_cost_usd), per_hour=usd(g.config_usd_per_hour))
        if rent:
            return say(kn, "price_hour", per_hour=usd(g.config_usd_per_hour)) if g.config_usd_per_hour else None
        return bought(kn, g)
    for g in asked:
        if g.fits:
            memory = say(kn, "compare_memory_tight" if _borderline(a, g, kn) else "compare_memory",
                         per_gpu=num(g.per_gpu_gb), usable=num(g.usable_vram_gb))
            figures = [memory, _rate(kn, g, training), price(g)]
            lines.append(say(kn, "compare_line", config=config(kn, g), figures=", ".join(x for x in figures if x)))
        else:
            lines.append(say(kn, "compare_no_fit", config=config(kn, g), per_gpu=num(g.per_gpu_gb),
                             usable=num(g.usable_vram_gb)))
    return [*lines, _winner(kn, asked, training, rent)]


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:.0f}%"


def _winner(kn: Knowledge, asked: list[GpuRow], training: bool, rent: bool = False) -> str:
    t = kn.query["verdict"]["templates"]
    fitting = [g for g in asked if g.fits]
    if not fitting:
        return t["compare_none"]
    if len(fitting) == 1:
        return t["compare_only"].format(config=config(kn, fitting[0]))

    def rate(g: GpuRow) -> float:
        return (g.train_tokens_per_s if training else g.decode_tokens_per_s) or 0.0
    fast, slow = max(fitting, key=rate), min(fitting, key=rate)

    def cost(g: GpuRow) -> float | None:        # rented: a training run's cost, else the hour's
        return (g.run_cost_usd if training else g.config_usd_per_hour) if rent else g.config_price_usd
    priced = [g for g in fitting if cost(g)]
    cheap = min(priced, key=lambda g: cost(g) or 0.0) if priced else None
    said = []
    ratio = f"{rate(fast) / rate(slow):.1f}" if rate(fast) > rate(slow) > 0 else ""
    both = cheap is fast and len(priced) > 1    # the faster one costs less too
    if ratio and ratio != "1.0":
        said.append(t["compare_faster_cheaper" if both else "compare_faster"].format(config=config(kn, fast), ratio=ratio))
    elif ratio:
        said.append(t["compare_same_speed"].format(pct=_pct(rate(fast) / rate(slow))))
    if cheap is not None and cheap is not fast:
        said.append(t["compare_cheaper"].format(config=config(kn, cheap)))
    return " ".join(said) or t["compare_tie"]


# ---------------------------------------------------------------- which GPU

def _which(a: Answer, q: Question, kn: Knowledge) -> list[str]:
    fitting = [g for g in a.gpus if g.fits]
    if not fitting:
        return _none_fit(a, q, kn)
    training = _training(a)
    pick = fitting[0]
    sort = (a.workload.get("sort") or "")
    s = speed(kn, pick, training)
    figures = ", ".join(x for x in (_price(kn, a, pick), s) if x)
    first = say(kn, {"cost": "which_cheapest", "speed": "which_fastest"}.get(sort, "which_pick"),
                config=config(kn, pick), said=(_format_said(kn, a) or _runtime_said(kn, q, pick)) + module_lacks(kn, pick),
                figures=say(kn, "which_figures", figures=figures) if figures else "")
    focus = q.get("focus")
    lead = _lead(kn, a, focus, pick) if focus in ("memory", "speed", "time") and focus != sort else None
    cost = None
    if q.get("focus") == "cost" and not training and pick.usd_per_million_tokens is not None:
        cost = say(kn, "which_cost", cost=usd(pick.usd_per_million_tokens))
    roomy = tight_sentences(kn, a, pick, fitting, lambda g: _price(kn, a, g))
    alts = _alternatives(a, pick, training, kn)
    return [x for x in (lead, first, *roomy, cost, *alts) if x]


def _format_said(kn: Knowledge, a: Answer) -> str:
    """' at q4_k_m under llama.cpp' when the format is the default the question's kind takes
    (kb.engine.resolving.scope.question_format), which the assumptions explain; '' otherwise."""

    precision = a.workload.get(N.PRECISION)
    if not any(s.startswith(f"precision: {precision}, {FORMAT_DEFAULT}") for s in a.assumptions):
        return ""
    return say(kn, "said_format", precision=precision, runtime=a.workload.get('runtime'))


def _runtime_said(kn: Knowledge, q: Question, g: GpuRow, pick: GpuRow | None = None) -> str:
    """' under llama.cpp at q4_0' for a ranking whose cards run under different runtimes
    (kb.engine.advising.per_card): the pick's, and an alternative's where it differs from the pick's."""
    per_card = q.get("per_card") or {}
    said = per_card.get(g.id)
    if not said or (pick is not None and per_card.get(pick.id) == said):
        return ""
    return say(kn, "said_runtime", runtime=said)


def _price(kn: Knowledge, a: Answer, g: GpuRow) -> str | None:
    """What a configuration costs as the question counts it: per hour when renting, else to buy."""
    if a.workload.get("rent") and g.config_usd_per_hour is not None:
        return say(kn, "price_hour", per_hour=usd(g.config_usd_per_hour))
    return bought(kn, g)


def _none_fit(a: Answer, q: Question, kn: Knowledge) -> list[str]:
    """No configuration of one box holds it: the need, and the GPU that needs the fewest cards
    by memory (the table's 'fewest by memory'), when any count holds it."""
    needing = [g for g in a.gpus if g.gpus_needed]
    if q.get("outcome") != "none_fit_verdict" or not needing:
        return [str(q.get("outcome_text") or "")]
    g = min(needing, key=lambda x: x.gpus_needed or 0)
    t = kn.query["verdict"]["templates"]
    return [t["none_fit"].format(total=num(a.memory.get(N.TOTAL_GB))),
            t["none_fit_fewest"].format(count=g.gpus_needed, gpu=g.name)]


def _alternatives(a: Answer, pick: GpuRow, training: bool, kn: Knowledge) -> list[str]:
    """Alternatives that differ from the pick in kind: faster, cheaper, to rent (at most
    query.yaml verdict.most_alternatives)."""
    def rate(g: GpuRow) -> float:
        return (g.train_tokens_per_s if training else g.decode_tokens_per_s) or 0.0
    suited = [g for g in a.gpus if g.fits and g is not pick and g.meets_target is not False
              and (g.suits_job is not False or pick.suits_job is False)]
    # a purchase budget asked holds for what to buy instead; renting is priced by the hour
    fitting = [g for g in suited if g.within_budget is not False or pick.within_budget is False]
    out: list[str] = []
    faster = [g for g in fitting if rate(g) > rate(pick)]
    q = a.question or {"kind": "", "vary": None, "unit": None, "value": None, "gpu": None}
    if faster:
        g = faster[0]
        out.append(say(kn, "alt_faster", config=config(kn, g), said=_runtime_said(kn, q, g, pick) + module_lacks(kn, g),
                       price=_price(kn, a, g), speed=speed(kn, g, training)))
    rent = bool(a.workload.get("rent"))

    def cost(g: GpuRow) -> float | None:        # rented: a training run's cost, else the hour's
        return (g.run_cost_usd if training else g.config_usd_per_hour) if rent else g.config_price_usd
    mine = cost(pick)
    cheaper = [g for g in fitting if (c := cost(g)) and mine and c < mine]
    if cheaper:
        g = min(cheaper, key=lambda x: cost(x) or 0.0)
        out.append(say(kn, "alt_cheaper_tight" if tight(kn, g) else "alt_cheaper", config=config(kn, g),
                       said=_runtime_said(kn, q, g, pick) + module_lacks(kn, g), price=_price(kn, a, g),
                       speed=speed(kn, g, training)))
    rentable = [g for g in [pick, *suited] if g.config_usd_per_hour is not None]
    if rentable and not rent:
        g = min(rentable, key=lambda x: x.config_usd_per_hour or 0.0)
        if g is not pick:
            out.append(say(kn, "alt_rent", config=config(kn, g), per_hour=usd(g.config_usd_per_hour)))
    return out[:int(kn.query["verdict"]["most_alternatives"]["value"])]


# ---------------------------------------------------------------- solved questions

def _no_count(kn: Knowledge, q: Question, row: Mapping[str, object]) -> list[str]:
    """No count of the card up to the search's top holds the load: what the flow said of it
    (how many memory alone needs, beyond what kbq sizes), else the range searched and the need."""
    if q.get("outcome_text"):
        return [str(q.get("outcome_text")), str(q.get("note") or "")]
    need = q.get(N.FEWEST_GPUS_NEEDED)
    mem = say(kn, "no_count_memory", fewest=need) if need else ""
    return [say(kn, "no_count", gpu=row.get('gpu') or q.get('gpu'), upper=num(q.get('upper')), memory=mem),
            str(q.get("note") or "")]


def _fastest_one_user(kn: Knowledge, q: Question) -> str:
    """A fleet no count serves: the fastest one replica serves one user (kb.engine.search.replicas
    fastest_one_user), as a sentence; '' where none was found."""
    f = q.get("fastest_one_user")
    if not isinstance(f, dict):
        return ""
    from kb.engine.verdicts.verdict_fleet import layout_text

    return " " + say(kn, "solved_no_count_fastest", speed=num(f["tokens_per_s_per_user"]), ttft=num(f[N.TTFT_S]),
                     layout=layout_text(kn, f[N.TP], f[N.PP], f[N.DP_ATTENTION]))


def _solved(a: Answer, q: Question, kn: Knowledge) -> list[str]:
    t = kn.query["verdict"]["templates"]
    row = q.get("answer") or {}
    kind = q["kind"]
    unit = q.get("unit") or ""
    on = say(kn, "config", count=row.get('count', 1), gpu=row.get('gpu') or q.get('gpu'))
    if not row.get("found"):
        if row.get("floor_binding"):
            return [t["solved_floor_at_lower"].format(on=on, lower=num(q.get('lower')), unit=unit,
                                                      speed=num(row.get('speed_at_lower')),
                                                      floor=num(row.get('speed_floor')))]
        if kind == "how_many_gpus" and (asked := target(kn.query["verdict"], a)):
            need = q.get(N.FEWEST_GPUS_NEEDED)
            mem = t["solved_memory_alone"].format(fewest=need) if need else ""
            fastest = _fastest_one_user(kn, q)     # before memory alone: the verdict keeps its first sentences
            return [t["solved_no_count"].format(gpu=row.get('gpu') or q.get('gpu'), upper=num(q.get('upper')),
                                                target=asked, memory="") + fastest + mem, str(q.get("note") or "")]
        if kind == "how_many_gpus":
            return _no_count(kn, q, row)
        return [t["solved_no_fit"].format(on=on, lower=num(q.get('lower')), unit=unit), str(q.get("note") or "")]
    value = row["value"]
    if kind == "how_many_gpus":
        g = a.gpus[0] if a.gpus else None
        time = _lead(kn, a, "time", g) if g is not None and _training(a) and a.workload.get("deadline_hours") else None
        timed = time is not None and bool(a.throughput.get(N.TRAIN_TIME_S))     # lead_time_training
        return how_many(kn.query["verdict"], a, q, row, time or (speed(kn, g, _training(a)) if g is not None and g.fits else None),
                        timed)
    if kind == "largest_model" and (best := q.get("best_models")) and t.get("solved_best_model"):
        first = t["solved_best_model"].format(model=best[0]["name"], precision=best[0]["precision"], on=on,
                                              gb=num(best[0]["per_gpu_gb"]), speed=num(best[0]["decode_tokens_per_s"]),
                                              size=num(q.get('value_b')))
        nxt = f"{num(q.get('next_b'))}B"
    elif kind == "largest_model":
        first = t["solved_largest_model"].format(size=num(q.get('value_b')), precision=a.workload.get(N.PRECISION), on=on)
        nxt = f"{num(q.get('next_b'))}B"
    elif kind == "max_context" and q.get("model_max_context"):
        return [t["solved_model_max_context"].format(value=num(value, 6), on=on),
                t["solved_memory_allows"].format(value=num(q.get('memory_allows'), 6))]
    elif kind == "max_context":
        first = t["solved_max_context"].format(value=num(value, 6), on=on)
        nxt = num(row.get("next"), 6)
    elif kind == "max_users":
        each = t["solved_each_at"].format(speed=num(row.get('speed_at_value'))) if row.get("speed_at_value") else ""
        first = t["solved_max_users"].format(value=num(value, 6), on=on, each=each)
        nxt = num(row.get("next"), 6)
    else:
        first = t["solved_value"].format(value=num(value, 6), unit=unit, on=on)
        nxt = num(row.get("next"), 6)
    if row.get("floor_binding"):
        why = t["solved_floor_binds"].format(next=nxt, speed=num(row.get('speed_at_next')),
                                             floor=num(row.get('speed_floor')))
    elif row.get("binds"):
        why = t["solved_binds"].format(what=str(row['binds']).capitalize(), next=nxt,
                                       per_gpu=num(row.get('per_gpu_gb_at_next')), usable=num(row.get('usable_gb')))
    else:
        why = ""
    stop = t["solved_stops"].format(upper=num(q.get('upper')), unit=unit) if row.get("at_upper_bound") else ""
    return [first, why, stop]

