"""Serving capacity as replicas of a layout: traffic and targets in, R copies of a TP × PP split out.

In: a serving Workload that asks how many GPUs (its users set by the query, or by a volume through
kb.engine.resolving.volume), the Knowledge, the card. Out: a Plan — the layout of one replica (tensor-parallel
GPUs inside a node, pipeline stages over whole nodes, data-parallel attention for a mixture of
experts), how many replicas, the users each serves — chosen as the fewest GPUs whose replicas meet
the load and the targets (rules/formulas.yaml `serves_load`: the replica holds its share, each user
decodes at the speed asked for under continuous batching with the prompts counted, the first token
comes within any bound asked); with the same users on separate prefill and decode workers as an
option. The search only evaluates the forward model; every figure of the answer is then the
forward model's on the whole fleet (answered() answers at the plan; kb.engine.pipeline asks it
before the memory search).
"""

from __future__ import annotations

import math

from typing import TYPE_CHECKING, cast
from dataclasses import dataclass
from kb.knowledge import names as N

if TYPE_CHECKING:
    from typing import Any

    from kb.engine.assembly.answer import Answer
    from kb.engine.assembly.answer_records import Disaggregated, Question, Replicas
    from kb.knowledge.data import Knowledge
    from kb.knowledge.records import GPU
    from kb.engine.search.probes import Probes
    from kb.query.workload import Workload

    Kept = dict[tuple[str, int, int, bool], Probes]

HOLDS = N.SERVES_LOAD
CARDS_TRIED = 4     # no card named: the fleets planned, on the cards with the most bandwidth
RATE_STEPS = 6      # a rate asked: Little's steps toward it (then as many stretched ones, for a replica at its saturation)
RATE_NEAR = 0.95    # ...and within this share of the rate each step is stretched by the shortfall


@dataclass(frozen=True, slots=True)
class Plan:
    gpu_id: str
    tp: int
    pp: int
    dp_attention: bool
    replica_gpus: int       # tp × pp
    per_replica: int        # the most users one replica serves within the targets
    replicas: int
    users: int

    @property
    def gpus(self) -> int:
        return self.replicas * self.replica_gpus


def fleet_question(kn: Knowledge, w: Workload) -> bool:
    """A how-many question about serving, on a runtime that splits layers by tensor parallelism:
    answered as replicas of a layout once it has several users (of the layout named, if one is:
    replica_layouts)."""
    return (w.question == "how_many_gpus" and w.task not in kn.query["training_tasks"]
            and (w.runtime is None or kn.runtimes[w.runtime]["multi_gpu"] == "tensor_parallel"))


def applies(kn: Knowledge, w: Workload) -> bool:
    """A fleet question (fleet_question) about serving several users, or a volume (a request rate
    or tokens a day: the users it comes to are found from it, one or many)."""
    return fleet_question(kn, w) and ((w.users or 1) > 1 or w.tokens_per_day is not None)


def layouts(kn: Knowledge, heads: int, dpa: bool) -> list[tuple[int, int, bool]]:
    """The replica layouts tried, smallest first: tensor parallel 1, 2, 4… inside a node (dividing
    the attention heads), then whole nodes as pipeline stages. Where `dpa` (a mixture of
    experts with latent attention) a split of more than one GPU is tried with data-parallel
    attention instead (experts spread over the ranks, each rank the KV cache of its own requests):
    under tensor parallelism every rank would hold and read the whole latent cache (formulas.yaml
    kv_tp_split, kv_replication), so data parallelism holds more users on the same GPUs."""
    node = int(kn.constants[N.GPUS_PER_NODE]["value"])
    most = int(kn.constants[N.MAX_GPU_COUNT]["value"])
    inside = [t for t in range(1, node + 1) if node % t == 0 and heads % t == 0]
    top = inside[-1]
    found = [(t, 1) for t in inside] + [(top, p) for p in range(2, most // top + 1) if top * p % node == 0]
    return [(t, p, dpa and t > 1) for t, p in found]


def replica_layouts(kn: Knowledge, w: Workload, heads: int, dpa: bool) -> list[tuple[int, int, bool]]:
    """The layouts a fleet's replicas are tried in: the one the query names ('tp 4 dp attention',
    'dep4', 'pp 2'), else every one layouts() gives."""
    if w.tp is not None or w.pp is not None:
        return [(w.tp or 1, w.pp or 1, bool(w.dp_attention))]
    return layouts(kn, heads, dpa)


def _trial(w: Workload, tp: int, pp: int, dp_attention: bool) -> Workload:
    """One replica's workload: the layout set, its share of a volume already read as users."""
    trial = w.copy()
    trial.tp, trial.pp, trial.dp_attention = tp, pp, dp_attention or trial.dp_attention
    trial.gpus, trial.tokens_per_day = [], None
    return trial


def _serves(kn: Knowledge, w: Workload, gpu: GPU, tp: int, pp: int, dp_attention: bool,
            holds: str = HOLDS, least: int = 1, kept: Kept | None = None) -> int | None:
    """The most users one replica of tp × pp GPUs serves within the targets (None: not `least`,
    the fewest that keep the fleet within the most GPUs kbq sizes). `kept`: the probes of one
    question's searches by card and layout, shared by its steps toward a rate (a probe sets the
    users it tries, so it is the same whatever users the step asks)."""
    from kb.engine.search.solve import largest_fitting

    probes = _probes(kn, w, gpu, tp, pp, dp_attention, kept)
    most = max(least, int(w.users or 1))
    before = probes.served.get(holds)
    if before is not None:      # a replica serves fewer users the more it takes: an earlier step's
        low, high, got = before  # search answers this one where its bounds hold the answer
        if got is None and least >= low:
            return None
        if got is not None and got < high and least <= got:
            return min(got, most)
    found, _ = largest_fitting(kn, _trial(w, tp, pp, dp_attention), N.USERS, least, most,
                               gpu, tp * pp, holds, probes)
    probes.served[holds] = (least, most, int(found) if found else None)
    return int(found) if found else None


def _probes(kn: Knowledge, w: Workload, gpu: GPU, tp: int, pp: int, dp_attention: bool,
            kept: Kept | None = None) -> Probes:
    """The probes of one replica layout on the card: those a question's searches already made
    (`kept`, by card and layout), else new ones, kept for the next."""
    from kb.engine.search.probes import Probes

    key = (str(gpu["id"]), tp, pp, dp_attention)
    probes = kept.get(key) if kept is not None else None
    if probes is None:
        probes = Probes(kn, _trial(w, tp, pp, dp_attention), [gpu])
        if kept is not None:
            kept[key] = probes
    return probes


def _held_but_missed(kn: Knowledge, w: Workload, gpu: GPU, tp: int, pp: int, dp_attention: bool,
                     users: int, holds: str = HOLDS, kept: Kept | None = None) -> bool:
    """Whether one replica of tp × pp GPUs holds `users` in its memory and still misses the
    targets with them."""
    at = _probes(kn, w, gpu, tp, pp, dp_attention, kept).probe(N.USERS, users, gpu, tp * pp, holds)
    return bool(at.fits_memory) and not at.fits


def binds(kn: Knowledge, w: Workload, gpu: GPU, p: Plan) -> str:
    """What stops a replica taking one more user: memory, the time to first token asked, the
    end-to-end latency asked, or the per-user speed (formulas.yaml serves_load); nothing when one replica holds every user."""
    from kb.engine.search.probes import Probes

    if p.per_replica >= p.users:
        return "one replica holds every user"
    trial = _trial(w, p.tp, p.pp, p.dp_attention)
    probes = Probes(kn, trial, [gpu])
    nxt = p.per_replica + 1
    if not probes.probe(N.USERS, nxt, gpu, p.replica_gpus, N.FITS).fits_memory:
        return "memory"
    if w.ttft_max_s is not None and not probes.probe(N.USERS, nxt, gpu, p.replica_gpus, N.SERVING_TTFT_OK).fits:
        return "time to first token"
    if w.e2e_max_s is not None and not probes.probe(N.USERS, nxt, gpu, p.replica_gpus, N.SERVING_E2E_OK).fits:
        return "end-to-end latency"
    return "per-user speed"


def plan(kn: Knowledge, w: Workload, gpu: GPU, heads: int, dpa: bool, holds: str = HOLDS,
         kept: Kept | None = None) -> Plan | None:
    """The fewest GPUs of this card whose replicas serve every user within the targets; of equal
    counts, the one whose replicas have room for the most users. Stages over more nodes are tried
    while each holds more users a GPU than the last. None when no layout up to the most GPUs kbq
    sizes serves even one user."""
    from kb.engine.search.budget import spent

    users = int(w.users or 1)
    most = int(kn.constants[N.MAX_GPU_COUNT]["value"])
    best: Plan | None = None
    per_gpu = 0.0           # users per GPU of the last layout that served any
    for tp, pp, with_dpa in replica_layouts(kn, w, heads, dpa):
        size = tp * pp
        if (best is not None and size > best.gpus) or spent() is not None:
            break           # no larger replica takes fewer GPUs; or the server's search budget is used up
        least = max(1, math.ceil(users * size / most))
        each = _serves(kn, w, gpu, tp, pp, with_dpa, holds, least, kept)
        if not each:
            if pp > 1 and _held_but_missed(kn, w, gpu, tp, pp, with_dpa, least, holds, kept):
                break       # its memory holds the fewest users a replica must take and they miss the
                # targets: those fewest grow with the stages, so each stage's micro-batch stays
                # as large and more stages only add hops to its tokens and prompts to its queue
            continue
        if pp > 1 and each / size < per_gpu:
            break           # another node a replica holds fewer users a GPU: its weights no longer
            # crowd its cache out, so more stages only add GPUs (and the hops between them)
        per_gpu = each / size
        replicas = math.ceil(users / each)
        if replicas * size > most:
            continue
        p = Plan(gpu["id"], tp, pp, with_dpa, size, each, replicas, users)
        if best is None or (p.gpus, -p.per_replica * p.replicas) < (best.gpus, -best.per_replica * best.replicas):
            best = p
    return best


def users_for_rate(kn: Knowledge, w: Workload, figures: dict[str, Any], push: int = 1) -> int | None:
    """A volume asked (requests or tokens a day): the requests in flight that carry it, when more
    than the plan holds; else None. Little's law at the latency under load just computed: the
    latency grows with the users, so this step stays below the fewest that carry it, and never
    adds a replica too many; within RATE_NEAR of the rate, where it would only creep up on it near
    a replica's saturation, the step is stretched by the shortfall `push` times more."""
    if w.tokens_per_day is None or not w.output_tokens:
        return None
    rate = requests_asked(kn, w)
    got, latency = figures.get(N.SERVING_REQUESTS_PER_S), figures.get(N.SERVING_MEAN_LATENCY_S)
    if not isinstance(got, (int, float)) or not isinstance(latency, (int, float)) or got >= rate * (1 - 1e-9):
        return None
    stretch = (rate / float(got)) ** push if got >= rate * RATE_NEAR else 1.0
    return max(int(w.users or 1) + 1, math.ceil(rate * float(latency) * stretch))


def requests_asked(kn: Knowledge, w: Workload) -> float:
    """The requests a second a volume asks (its tokens a day over each request's output)."""
    return float(w.tokens_per_day or 0) / float(kn.constants[N.SECONDS_PER_DAY]["value"]) / float(w.output_tokens or 1)


def in_flight(kn: Knowledge, w: Workload, figures: dict[str, Any]) -> str:
    """The users a request rate came to, said as Little's law relates them: the requests in flight
    are the requests a second the fleet carries times each request's time under load."""
    from kb.figures import num

    rate = requests_asked(kn, w)
    got, latency = figures.get(N.SERVING_REQUESTS_PER_S), figures.get(N.SERVING_MEAN_LATENCY_S)
    carried = (f", carrying {num(float(got))} requests/s ({num(rate)} asked) at {num(float(latency))} s a request "
               "under load (Little's law: requests in flight = requests/s × each one's time)"
               if isinstance(got, (int, float)) and isinstance(latency, (int, float)) else "")
    return (f"concurrent users: {int(w.users or 1)}, the requests in flight the fleet is sized for{carried}; "
            f"each request's context its prompt and output ({w.context_tokens} tokens)")


def at_plan(w: Workload, p: Plan) -> Workload:
    """The workload answered at the plan: every user on replicas × (tp × pp) GPUs of the card."""
    from kb.query.workload import GpuRequest

    out = w.copy()
    out.question = None
    out.tp, out.pp = p.tp, p.pp
    out.dp_attention = p.dp_attention or out.dp_attention
    out.gpus = [GpuRequest(p.gpu_id, p.gpus)]
    return out


def block(kn: Knowledge, p: Plan, figures: dict[str, Any], binding: str) -> Replicas:
    """The `replicas` block of the answer: the layout, the count and the figures under load (the
    forward model's, on the fleet)."""
    node = int(kn.constants[N.GPUS_PER_NODE]["value"])

    def get(name: str) -> float | None:
        v = figures.get(name)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    per_hour = get(N.CONFIG_USD_PER_HOUR)
    if per_hour is None and get(N.CLOUD_USD_PER_HOUR) is not None:
        per_hour = float(figures[N.CLOUD_USD_PER_HOUR]) * p.gpus
    return {
        "gpu_id": p.gpu_id, "gpus": p.gpus, "replicas": p.replicas,
        "layout": {N.TP: p.tp, N.PP: p.pp, N.DP_ATTENTION: p.dp_attention, "gpus": p.replica_gpus},
        "nodes": math.ceil(p.gpus / node) if p.replica_gpus <= node else p.replicas * math.ceil(p.replica_gpus / node),
        N.USERS: p.users, "users_per_replica": math.ceil(p.users / p.replicas), "most_users_per_replica": p.per_replica,
        "tokens_per_s_per_user": get(N.SERVING_TOKENS_PER_S_PER_USER),
        "tpot_s": get(N.SERVING_TPOT_S),
        N.TTFT_S: get(N.SERVING_TTFT_S),
        "latency_s": get(N.SERVING_LATENCY_S),
        "requests_per_s": get(N.SERVING_REQUESTS_PER_S),
        "output_tokens_per_s": get(N.SERVING_OUTPUT_TOKENS_PER_S),
        "tokens_per_s_per_gpu": get(N.SERVING_TOKENS_PER_S_PER_GPU),
        "prefill_share": get(N.SERVING_PREFILL_SHARE),
        "usd_per_hour": per_hour,
        N.USD_PER_MILLION_TOKENS: get(N.SERVING_USD_PER_MILLION_TOKENS),
        "buy_usd": get(N.CONFIG_PRICE_USD),
        "binds": binding, "disaggregated": None,
    }


def answered(w: Workload, kn: Knowledge, query: str) -> Answer | None:
    """A how-many question about serving many users (applies()): the fewest GPUs as replicas of a
    layout, answered at that plan with its verdict; None when it does not apply or no layout
    serves even one user within the targets (the memory search then answers, and says so).
    `w` is left as it is (the engine fills a workload's defaults in place)."""
    if not applies(kn, w):
        return None
    from kb.engine.run import ranked
    from kb.engine.verdicts.verdict import compose

    heads, dpa = _heads_and_dpa(kn, w)
    kept: Kept = {}
    if w.gpus and w.gpus[0].gpu_id is not None:
        gpu = kn.gpus[w.gpus[0].gpu_id]
        p = plan(kn, w, gpu, heads, dpa, kept=kept)
    else:
        found = _cheapest(kn, w, _cards(kn, w), heads, dpa, kept)
        if found is None:
            return None
        gpu, p = found
    if p is None:
        return None
    result = ranked(at_plan(w, p), kn, query)
    figures = {s.rule_id: s.result for s in result.trace}
    for step in range(2 * RATE_STEPS):      # a rate asked: the requests in flight grow until it is met;
        # past RATE_STEPS a replica at its saturation only creeps up on it: each step stretched twice as far
        more = users_for_rate(kn, w, figures, 1 if step < RATE_STEPS else 2 ** (step - RATE_STEPS + 1))
        if more is None or (again := plan(kn, _with_users(w, more), gpu, heads, dpa, kept=kept)) is None:
            break
        w, p = _with_users(w, more), again
        result = ranked(at_plan(w, p), kn, query)
        figures = {s.rule_id: s.result for s in result.trace}
    if w.tokens_per_day is not None:
        result.assumptions = [s for s in result.assumptions if not s.startswith("concurrent users:")]
        result.assumptions.append(in_flight(kn, w, figures))
    if result.gpus:
        figures.setdefault(N.CLOUD_USD_PER_HOUR, result.gpus[0].cloud_usd_per_hour)
        figures.setdefault(N.CONFIG_PRICE_USD, result.gpus[0].config_price_usd)
    result.replicas = block(kn, p, figures, binds(kn, w, gpu, p))
    result.replicas["disaggregated"] = disaggregated(kn, w, gpu, heads, dpa, p, query, kept)
    spec = kn.query["solve"]["how_many_gpus"]
    result.question = cast("Question", {
        **(result.question or {}), "kind": "how_many_gpus", "vary": N.GPU_COUNT, "unit": spec["unit"],
        "value": p.gpus, "gpu": gpu["name"], "lower": spec["lower"], "upper": spec["upper"],
        "answer": {"gpu": gpu["name"], "gpu_id": gpu["id"], "count": p.gpus, "value": p.gpus,
                   "found": True, "at_upper_bound": False, "binds": result.replicas["binds"]}})
    result.path.insert(0, "question/how_many_gpus")
    result.verdict = compose(result, kn)
    return result


def _heads_and_dpa(kn: Knowledge, w: Workload) -> tuple[int, bool]:
    """The model's attention heads (tensor parallelism divides them) and whether its splits try
    data-parallel attention: it changes the figures only where tensor parallelism would copy a
    latent cache to every rank (formulas.yaml kv_tp_split); elsewhere they are tensor parallelism's."""
    from kb.engine.resolving.scope import resolve_workload

    model = resolve_workload(w.copy(), kn).model
    moe = model.get("moe")
    return int(str(model["attention_heads"])), moe is not None and int(moe["experts"]) > 1 and model.get("attention") == "mla"


def fastest_one_user(kn: Knowledge, w: Workload) -> dict[str, Any] | None:
    """A fleet question on a named card that no count serves within its targets: the fastest a
    replica serves one user under load (its tokens/s and first token, and the layout: the widest
    tensor parallel split in a node that holds the model, else the fewest stages over nodes that
    do; more stages only add hops to a user's tokens). None where it does not apply or no layout
    holds one user."""
    if not fleet_question(kn, w) or ((w.users or 1) <= 1 and w.tokens_per_day is None) \
            or not w.gpus or w.gpus[0].gpu_id is None:
        return None
    from kb.engine.run import ranked

    gpu = kn.gpus[w.gpus[0].gpu_id]
    one = _with_users(w, 1)
    one.tokens_per_day = None
    best: tuple[float, int, int, bool] | None = None
    for tp, pp, with_dpa in replica_layouts(kn, w, *_heads_and_dpa(kn, w)):
        at = _probes(kn, one, gpu, tp, pp, with_dpa).probe(N.USERS, 1, gpu, tp * pp, HOLDS)
        if at.fits_memory and at.speed is not None and (best is None or at.speed > best[0]):
            best = (float(at.speed), tp, pp, with_dpa)
        if at.fits_memory and pp > 1:
            break
    if best is None:
        return None
    _, tp, pp, with_dpa = best
    a = ranked(at_plan(one, Plan(str(gpu["id"]), tp, pp, with_dpa, tp * pp, 1, 1, 1)), kn)
    f = {s.rule_id: s.result for s in a.trace}
    speed, ttft = f.get(N.SERVING_TOKENS_PER_S_PER_USER), f.get(N.SERVING_TTFT_S)
    if not isinstance(speed, (int, float)) or not isinstance(ttft, (int, float)):
        return None
    return {N.TP: tp, N.PP: pp, N.DP_ATTENTION: with_dpa, "tokens_per_s_per_user": float(speed), N.TTFT_S: float(ttft)}


def disaggregated(kn: Knowledge, w: Workload, gpu: GPU, heads: int, dpa: bool, colocated: Plan,
                  query: str, kept: Kept | None = None) -> Disaggregated | None:
    """The same users on decode workers that only decode (each holding its share at the per-user
    speed: formulas.yaml serves_at_floor) and prefill workers of the same layout for the prompts
    (formulas.yaml disagg_*: their number at the request rate, the first token with the KV cache
    moved over the network), as DistServe, Dynamo, llm-d and SGLang's PD mode run it; None when
    no decode layout serves a user or the first token misses the bound asked."""
    from kb.engine.run import ranked

    d = plan(kn, w, gpu, heads, dpa, N.SERVES_AT_FLOOR, kept)
    if d is None:
        return None
    a = ranked(at_plan(w, d), kn, query, brief=False)
    f = {s.rule_id: s.result for s in a.trace}

    def get(name: str) -> float | None:
        v = f.get(name)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    prefill, ttft = get(N.DISAGG_PREFILL_GPUS), get(N.DISAGG_TTFT_S)
    latency = get(N.DISAGG_LATENCY_S)
    if prefill is None or ttft is None or (w.ttft_max_s is not None and ttft > w.ttft_max_s) or (
            w.e2e_max_s is not None and (latency is None or latency > w.e2e_max_s)):
        return None
    total = d.gpus + int(prefill)
    out = get(N.DECODE_TOKENS_PER_S_AGGREGATE)
    return {"gpus": total, "decode_replicas": d.replicas, "decode_gpus": d.gpus, "prefill_gpus": int(prefill),
            "decode_layout": {N.TP: d.tp, N.PP: d.pp, N.DP_ATTENTION: d.dp_attention, "gpus": d.replica_gpus},
            "users_per_decode_replica": math.ceil(d.users / d.replicas),
            "tokens_per_s_per_user": get(N.DECODE_TOKENS_PER_S), N.TTFT_S: ttft,
            "kv_transfer_s": get(N.DISAGG_KV_TRANSFER_S), "requests_per_s": get(N.DISAGG_REQUESTS_PER_S),
            "tokens_per_s_per_gpu": out / total if out is not None else None,
            "fewer_gpus": total < colocated.gpus}


def _cards(kn: Knowledge, w: Workload) -> list[GPU]:
    """No card named: the datacenter cards the runtime runs the format on, with a rented price,
    the CARDS_TRIED with the most bandwidth (the cards a serving fleet is built of)."""
    from kb.engine.resolving.scope import resolve_workload
    from kb.knowledge.gpu_names import runs_on

    got = resolve_workload(w.copy(), kn)
    cards = [g for g in kn.gpus.values() if g["segment"] == "datacenter" and g.get(N.CLOUD_USD_PER_HOUR)
             and runs_on(got.runtime, g, got.precision["id"])]
    return sorted(cards, key=lambda g: -float(g["bandwidth_gb_s"] or 0))[:CARDS_TRIED]


def _cheapest(kn: Knowledge, w: Workload, cards: list[GPU], heads: int, dpa: bool,
              kept: Kept | None = None) -> tuple[GPU, Plan] | None:
    """The card whose fleet costs least an hour to rent (the plan on each)."""
    plans = [(g, p) for g in cards if (p := plan(kn, w, g, heads, dpa, kept=kept)) is not None]
    if not plans:
        return None
    return min(plans, key=lambda gp: float(gp[0][N.CLOUD_USD_PER_HOUR] or 0) * gp[1].gpus)


def _with_users(w: Workload, users: int) -> Workload:
    out = w.copy()
    out.users = users
    return out
