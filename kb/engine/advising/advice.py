"""Right-sizing: configurations to judge, their cost, the order they are ranked in, and the pick.

In: the engine's evaluated scope over the candidate GPUs (kb.engine.Evaluated), the Workload
and the Knowledge (sort orders and prices from rules/prices.yaml; cost formulas from
rules/formulas.yaml). Out: candidate configurations (each catalogue GPU at the fewest cards
that hold the job), the sort keys, the cost fields of each GPU row, and the recommendation
(the first row and one runner-up per class). Pure: no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.engine.assembly.answer import GpuRow
from kb.expr.parse import Col, at
from kb.knowledge.data import Knowledge
from kb.query.workload import Workload
from kb.knowledge import names as N

if TYPE_CHECKING:
    from collections.abc import Callable
    from kb.engine.evaluate import Scope
    from kb.knowledge.records import GPU
    from kb.engine.assembly.answer_records import Brief, PricesUsed, Recommendation
    from kb.knowledge.records_rules import Price

# cost figures of a row → formula names (rules/formulas.yaml)
ROW_COST = (N.NEEDS_SERVER_BOARD, N.SERVERS_BOUGHT, N.CLOUD_USD_PER_HOUR, N.CONFIG_PRICE_USD, N.CONFIG_USD_PER_HOUR, N.BREAKEVEN_MONTHS,
            N.MEETS_TARGET, N.WITHIN_BUDGET, N.SUITS_JOB, N.CONFIG_POWER_W, N.ROOMY_FIT)
SERVE_COST = (N.USD_PER_MILLION_TOKENS,)
TRAIN_COST = (N.RUN_HOURS, N.RUN_COST_USD, N.GPU_HOURS)
CLASSES = {"consumer": "consumer/workstation", "workstation": "consumer/workstation",
           "apple": "consumer/workstation", "embedded": "consumer/workstation", "datacenter": "datacenter"}


def cost_formulas(is_training: bool) -> tuple[str, ...]:
    return ROW_COST + (TRAIN_COST if is_training else SERVE_COST)


def sort_name(kn: Knowledge, w: Workload) -> str | None:
    """The order asked for (Workload.sort), else the rules' default; None without advice rules."""
    if not kn.advice:
        return None
    return w.sort if w.sort in kn.advice["sorts"] else kn.advice["default_sort"]


def sort_keys(kn: Knowledge, w: Workload, fallback: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(formula, asc|desc) pairs, best first; renting ranks by hourly cost instead of price."""
    name = sort_name(kn, w)
    if name is None:
        return fallback
    training = w.task in kn.query["training_tasks"]
    skip = set(kn.advice.get("training_only", [])) if not training else (
        set((kn.advice.get("untargeted_training_ignores") or {}).get(name, [])) if w.deadline_hours is None else set())
    spec = (kn.advice.get("budget_sorts") or {}).get(name) if w.budget_usd is not None else None
    keys: list[tuple[str, str]] = [(k["by"], k["order"]) for k in spec or kn.advice["sorts"][name] if k["by"] not in skip]
    if w.rent:
        keys = [(kn.advice["rent_cost_key"] if k == N.CONFIG_PRICE_USD else k, o) for k, o in keys
                if k not in kn.advice.get("rent_ignores", [])]
    return keys


def sort_text(kn: Knowledge, w: Workload) -> str | None:
    """'value (fits, …, then fastest)': the order's name and its keys in the rules' words
    (prices.yaml advice.says), the same keys sort_keys ranks by (renting: the hourly cost)."""
    name = sort_name(kn, w)
    if name is None:
        return None
    says = kn.advice.get("says") or {}
    words = [says.get(k, k) for k, _ in sort_keys(kn, w, [])]
    text = ", then ".join(words) if len(words) < 3 else ", ".join(words[:-1]) + ", then " + words[-1]
    return f"{name} ({text})"


def fewest_needed(rows: list[GpuRow]) -> int:
    """The fewest GPUs any row's GPU needs to hold the job (0 when none can hold it at any count)."""
    return min((r.gpus_needed for r in rows if r.gpus_needed), default=0)


def configurations(kn: Knowledge, needed: object, gpus: list[GPU],
                   valid: Callable[[int], bool] = lambda n: True) -> list[tuple[GPU, int, bool]]:
    """Each catalogue GPU at the fewest cards that hold the job in a valid layout (`valid`: the
    count splits the model the way the runtime can, kb.engine.resolving.layout), one where none or too many do:
    more than the rules' max_gpus_per_config is not one box."""
    most = int(kn.advice.get("max_gpus_per_config", 1))
    out = []
    for i, g in enumerate(gpus):
        n = at(needed, i)
        count = next((c for c in range(int(n), most + 1) if valid(c)), 1) if n and 1 <= n <= most else 1
        out.append((g, count, False))
    return out


def fill_rows(scope: Scope, rows: list[GpuRow], order: list[int], is_training: bool) -> None:
    """Put the cost figures of each candidate on its row (rows are in rank order)."""
    names = cost_formulas(is_training)
    cols = {n: scope.get(n) for n in names}
    for row, i in zip(rows, order):
        vals = {n: (c[i] if c.__class__ is Col else c) for n, c in cols.items()}
        row.price_usd = _num(scope, N.GPU_PRICE_USD, i)
        row.cloud_usd_per_hour = vals[N.CLOUD_USD_PER_HOUR]
        row.config_price_usd = vals[N.CONFIG_PRICE_USD]
        row.servers_bought = int(vals[N.SERVERS_BOUGHT] or 0)
        row.config_usd_per_hour = vals[N.CONFIG_USD_PER_HOUR]
        row.breakeven_months = vals[N.BREAKEVEN_MONTHS]
        row.meets_target = None if vals[N.MEETS_TARGET] is None else bool(vals[N.MEETS_TARGET])
        row.within_budget = None if vals[N.WITHIN_BUDGET] is None else bool(vals[N.WITHIN_BUDGET])
        row.suits_job = None if vals[N.SUITS_JOB] is None else bool(vals[N.SUITS_JOB])
        if not row.fits:            # costs only for configurations that run
            row.breakeven_months = None
        elif is_training:
            row.run_hours = vals[N.RUN_HOURS]
            row.run_cost_usd = vals[N.RUN_COST_USD]
        else:
            row.usd_per_million_tokens = vals[N.USD_PER_MILLION_TOKENS]


def _num(scope: Scope, name: str, i: int) -> float | None:
    v = scope.get(name)
    return v[i] if v.__class__ is Col else v


def recommendation(kn: Knowledge, w: Workload, rows: list[GpuRow], is_training: bool) -> Recommendation | None:
    """The first fitting row, and one runner-up per class (consumer/workstation, datacenter)
    plus the cheapest to rent; None when nothing fits."""
    fitting = ([r for r in rows if r.fits and r.suits_job is not False and r.within_budget is not False]
               or [r for r in rows if r.fits and r.suits_job is not False] or [r for r in rows if r.fits])
    if not fitting:
        return None
    pick = fitting[0]
    runners: dict[str, Brief] = {}
    for r in fitting[1:]:
        cls = CLASSES.get(_segment(kn, r), "datacenter")
        if cls not in runners and not _same_class(kn, pick, cls):
            runners[cls] = _brief(r)
    rentable = [x for x in fitting if x.config_usd_per_hour is not None]
    if rentable:
        runners["cloud"] = _brief(min(rentable, key=lambda x: (not x.meets_target, x.config_usd_per_hour)))
    return {"pick": _brief(pick), "runners_up": runners, "sort": sort_text(kn, w),
            "why": _why(pick, is_training)}


def _same_class(kn: Knowledge, pick: GpuRow, cls: str) -> bool:
    return CLASSES.get(_segment(kn, pick), "datacenter") == cls


def _segment(kn: Knowledge, r: GpuRow) -> str:
    """The row's market segment as text ('None' for a card the catalogue does not list)."""
    gpu = kn.gpus.get(r.id)
    return str(gpu.get("segment") if gpu else None)


def _brief(r: GpuRow) -> Brief:
    return {"gpu": r.name, "gpu_id": r.id, "count": r.count, "price_usd": r.config_price_usd,
            "usd_per_hour": r.config_usd_per_hour, N.MEETS_TARGET: r.meets_target,
            N.HEADROOM_GB: r.headroom_gb}


def _why(r: GpuRow, is_training: bool) -> str:
    speed = (f"{r.train_tokens_per_s:,.0f} training tokens/s" if is_training and r.train_tokens_per_s
             else f"{r.decode_tokens_per_s:.0f} tok/s per user" if r.decode_tokens_per_s else "speed n/a")
    target = {True: "meets the target", False: "misses the target", None: "target not judged"}[r.meets_target]
    return f"holds it with {r.headroom_gb or 0:.1f} GB to spare; {speed}; {target}"


def money(v: float | None) -> str:
    return "n/a" if v is None else f"${v:,.0f}" if v >= 100 else f"${v:,.2f}"


def verdict_text(rec: Recommendation | None) -> str:
    """One sentence: the pick, its price, and the runners-up."""
    if rec is None:
        return ""
    p = rec["pick"]
    text = f"Recommended: {_config(p)} — {rec['why']}."
    others = [f"{cls}: {_config(b)}" for cls, b in rec["runners_up"].items()]
    return text + (" Runners-up — " + "; ".join(others) + "." if others else "")


def _config(b: Brief) -> str:
    hourly = f", {money(b['usd_per_hour'])}/h to rent" if b.get("usd_per_hour") is not None else ""
    return f"{b['count']}× {b['gpu']} ({money(b['price_usd'])}{hourly})"


def prices_used(kn: Knowledge, w: Workload, gpu_ids: list[str]) -> PricesUsed:
    """Which prices the answer used, as of when and from where (for the assumptions)."""
    out: PricesUsed = {"as_of": None, "usd_per_gpu_hour": w.usd_per_gpu_hour,
                           "budget_usd": w.budget_usd, "hours_per_day": w.hours_per_day,
                           "rent": bool(w.rent), "gpus": {}}
    for gid in gpu_ids[:MAX_PRICE_ROWS]:
        p = kn.prices.get(gid)
        if p is None:
            continue
        out["as_of"] = out["as_of"] or p.get("as_of")
        out["gpus"][gid] = {"purchase_usd": p["purchase_usd"], "purchase_kind": p["purchase_kind"],
                            "purchase_date": p["purchase_date"], "purchase_source": p["purchase_source"],
                            N.CLOUD_USD_PER_HOUR: p[N.CLOUD_USD_PER_HOUR], "cloud_rule": p.get("cloud_rule"),
                            "cloud_low": p.get("cloud_low"), "cloud_high": p.get("cloud_high"),
                            "cloud_pages": p.get("cloud_pages"), "cloud_disagree": p.get("cloud_disagree"),
                            "cloud": [f"{c['provider']} ${c['usd_per_hour']:.2f}/h ({c['date']}, {c['source']})"
                                      for c in p["cloud"]], "file": p.get("file")}
    return out


MAX_PRICE_ROWS = 12  # the rows whose prices an answer lists: the rows the page's cost table shows


def cloud_text(p: Price) -> str:
    """'$3.25/GPU-hour, the median of 6 on-demand prices on 5 price pages ($2.49-4.76; they
    disagree: the highest is 1.9× the lowest): Lambda $2.49 (2026, src); …'"""
    listed = "; ".join(f"{c['provider']} {money(c['usd_per_hour'])} ({c['date']}, {c['source']})" for c in p["cloud"])
    n = len(p["cloud"])
    if n == 1:
        return f"{money(p['cloud_usd_per_hour'])}/GPU-hour, the only on-demand price listed: {listed}"
    pages = p.get("cloud_pages") or n
    spread = f"{money(p['cloud_low'])}-{money(p['cloud_high'])}"
    if p.get("cloud_disagree"):
        low, high = p["cloud_low"], p["cloud_high"]
        spread += f"; they disagree: the highest is {high / low:.1f}× the lowest" if low and high else ""
    rule = p.get("cloud_rule") or "median"
    return (f"{money(p['cloud_usd_per_hour'])}/GPU-hour, the {rule} of {n} on-demand prices on {pages} price "
            f"page{'s' if pages != 1 else ''} ({spread}): {listed}")


def price_assumptions(kn: Knowledge, w: Workload, row: GpuRow) -> list[str]:
    """What the assumptions say about prices: the first row's, overrides, utilisation."""
    out = []
    p = kn.prices.get(row.id)
    if p is not None:
        where = p.get("file") or "prices.yaml"
        buy = (f"{money(p['purchase_usd'])} per card ({p['purchase_kind']}, {p['purchase_date']}, "
               f"{p['purchase_source']})" if p["purchase_usd"] is not None else "no purchase price")
        rent = cloud_text(p) if p["cloud"] else "no cloud price listed"
        out.append(f"prices ({where}, as of {p['as_of']}): {row.name} {buy}; rent {rent}")
    if w.usd_per_gpu_hour is not None:
        out.append(f"cloud price: {money(w.usd_per_gpu_hour)} per GPU-hour, as the query set")
    if w.budget_usd is not None:
        out.append(f"budget: {money(w.budget_usd)} for the GPUs")
    if kn.prices:
        hours = w.hours_per_day if w.hours_per_day is not None else kn.constants[N.DEFAULT_HOURS_PER_DAY]["value"]
        out.append(f"buy against rent at {hours:g} h a day" + ("" if w.hours_per_day is not None
                                                                else " (default; 'at 24/7' for round the clock)"))
    return out
