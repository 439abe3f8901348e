"""A quote for a customer: Answer → the data of a one-page summary, and that summary as Markdown.

In: an Answer (its verdict, GPU rows, recommendation, prices used, options, assumptions, trace)
and the Knowledge (price entries, source titles and addresses). Out: `build(answer, kn)` → a
Quote: the question, the recommended configuration with what it costs to buy and to rent and
as of when, at most two alternatives, the assumptions and the sources behind the figures;
`markdown(quote)` → the Quote as Markdown (`kbq --quote "…"`). The web page `/quote?q=…`
renders the same Quote with server/templates/pages/quote.html. Every figure is the Answer's;
nothing here computes one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kb.figures import duration, num, servers_needed
from kb.links import web_address
from kb.knowledge import names as N
from kb.engine import answer as engine_answer
from kb.engine.advising.options import compute
from kb.errors import KbError
from kb.query.parse import parse
from kb.query.unparse import unparse

if TYPE_CHECKING:
    from collections.abc import Callable

    from kb.engine.assembly.answer import Answer, GpuRow
    from kb.knowledge.data import Knowledge

ALTERNATIVES = 2        # alternatives a quote lists beside the recommended configuration
ASSUMPTIONS = 6         # assumptions listed; the rest are on the full answer (one printed page)
SOURCES = 6             # sources listed (the prices' first); the rest are on the full answer
FIGURE_RULES = (N.WEIGHTS_GB, N.KV_CACHE_GB, N.TOTAL_GB, N.PER_GPU_GB, N.DECODE_TOKENS_PER_S,
                N.PREFILL_TOKENS_PER_S, N.TRAIN_TOKENS_PER_S, N.USD_PER_MILLION_TOKENS, N.RUN_COST_USD)


@dataclass(slots=True)
class Rent:
    provider: str
    usd_per_hour: float
    date: str
    source: str


@dataclass(slots=True)
class Config:
    """One configuration as a quote shows it; prices are for every card of it."""
    role: str                       # "recommended", or why it is an alternative
    gpu: str
    gpu_id: str
    count: int
    fits: bool
    per_gpu_gb: float | None
    usable_gb: float | None
    speed: str                      # the speed figure with its unit, or "n/a"
    cost: str                       # $ per million tokens or $ per run, or "n/a"
    buy_usd: float | None           # the cards, or the modules with the servers they are bought in
    servers: int                    # those servers (0 for cards)
    cards_usd: float | None         # the cards or modules alone
    buy_kind: str | None            # list, street, used, estimate (rules/prices.yaml)
    buy_date: str | None
    buy_source: str | None
    rent_usd_per_hour: float | None
    rent: list[Rent] = field(default_factory=list)     # the price pages the hourly price comes from
    price_file: str | None = None   # the price file the prices come from, when not prices.yaml


@dataclass(slots=True)
class QuotedSource:
    id: str
    title: str
    publisher: str
    date: str
    url: str | None


@dataclass(slots=True)
class Quote:
    query: str                      # the question asked
    verdict: str                    # its answer's verdict
    change: str | None              # the change quoted, when the job as asked fits nothing
    quoted_query: str               # the question the configurations answer (with the change)
    prices_as_of: str | None
    recommended: Config | None
    alternatives: list[Config]
    changes: list[str]              # what would make it fit, when nothing asked for does
    assumptions: list[str]
    more_assumptions: int
    sources: list[QuotedSource]
    more_sources: int
    units: str
    fleet: list[str] = field(default_factory=list)     # serving many users: the replicas and their load


def _money(v: float | None) -> str:
    return "n/a" if v is None else f"${v:,.0f}" if v >= 100 else f"${v:,.2f}"


def _config(answer: Answer, kn: Knowledge, row: GpuRow, role: str) -> Config:
    training = "training" in answer.bottleneck
    used = (answer.prices.get("gpus") or {}).get(row.id)
    entry = kn.prices.get(row.id)
    question_rate = answer.prices.get("usd_per_gpu_hour") is not None
    price_file = used["file"] if used else None
    rent = [] if question_rate or price_file or entry is None else [
        Rent(str(c["provider"]), float(c["usd_per_hour"]), str(c["date"]), str(c["source"]))
        for c in entry.get("cloud") or []]
    if training:
        speed = f"{num(row.train_tokens_per_s)} tokens/s training" if row.train_tokens_per_s else "n/a"
        if row.train_time_s is not None:
            speed += f", {duration(row.train_time_s)} for the run"
        cost = f"{_money(row.run_cost_usd)} per run" if row.fits and row.run_cost_usd is not None else "n/a"
    elif (fleet := answer.replicas) and fleet.get("gpu_id") == row.id and role == "recommended":
        # a fleet: the speed and the price of its tokens under load, prompts counted
        speed = f"{num(fleet['tokens_per_s_per_user'])} tokens/s per user under load"
        cost = (f"{_money(fleet['usd_per_million_tokens'])} per million tokens under load"
                if fleet.get("usd_per_million_tokens") is not None else "n/a")
    else:
        speed = (f"{num(row.decode_tokens_per_s)} tokens/s per user"
                 if row.decode_tokens_per_s is not None else "n/a")
        cost = (f"{_money(row.usd_per_million_tokens)} per million tokens"
                if row.fits and row.usd_per_million_tokens is not None else "n/a")
    return Config(role=role, gpu=row.name, gpu_id=row.id, count=row.count, fits=row.fits,
                  per_gpu_gb=row.per_gpu_gb, usable_gb=row.usable_vram_gb, speed=speed, cost=cost,
                  buy_usd=row.config_price_usd, servers=row.servers_bought,
                  cards_usd=row.price_usd * row.count if row.price_usd is not None else None,
                  buy_kind=used["purchase_kind"] if used else None,
                  buy_date=used["purchase_date"] if used else None,
                  buy_source=used["purchase_source"] if used else None,
                  rent_usd_per_hour=row.config_usd_per_hour, rent=rent, price_file=price_file)


def _row(answer: Answer, gpu_id: str, count: int) -> GpuRow | None:
    return next((g for g in answer.gpus if g.id == gpu_id and g.count == count), None) or \
        next((g for g in answer.gpus if g.id == gpu_id), None)


def _configs(answer: Answer, kn: Knowledge, wider: Answer | None = None) -> tuple[Config | None, list[Config]]:
    """The recommended configuration (the answer's pick, else the first that fits) and up to
    ALTERNATIVES others: the recommendation's runners-up, then the next rows that fit, then
    (where the question named its GPUs) the cards `wider`, the same question with no GPU named,
    ranks first."""
    rec = answer.recommendation
    pick = _row(answer, rec["pick"]["gpu_id"], rec["pick"]["count"]) if rec else None
    pick = pick or next((g for g in answer.gpus if g.fits), None)
    if pick is None:
        return None, []
    others: list[tuple[Answer, GpuRow, str]] = []
    for role, brief in (rec["runners_up"] if rec else {}).items():
        row = _row(answer, brief["gpu_id"], brief["count"])
        if row is not None and row.id != pick.id:
            others.append((answer, row, f"{role} alternative"))
    rows = [(answer, r, f"ranked #{r.rank}" if r.rank else "also fits") for r in answer.gpus]
    if wider is not None:
        wrec = wider.recommendation
        picks = [("the pick", wrec["pick"]), *wrec["runners_up"].items()] if wrec else []
        for role, brief in picks:
            row = _row(wider, brief["gpu_id"], brief["count"])
            if row is not None:
                rows.append((wider, row, f"{role} with no GPU named"))
        rows += [(wider, r, f"#{r.rank} with no GPU named") for r in wider.gpus]
    for source, row, role in rows:
        if row.fits and row.id != pick.id and all(row.id != o.id for _, o, _ in others):
            others.append((source, row, role))
    return (_config(answer, kn, pick, "recommended"),
            [_config(a, kn, r, role) for a, r, role in others[:ALTERNATIVES]])


def _sources(answer: Answer, kn: Knowledge, configs: list[Config]) -> tuple[list[QuotedSource], int]:
    """The sources of the prices quoted and of the steps behind the key figures, each once."""
    ids: list[str] = []
    for c in configs:
        ids += [c.buy_source] if c.buy_source else []
        ids += [r.source for r in c.rent]
    for step in answer.trace:
        if step.rule_id in FIGURE_RULES:
            ids += step.sources
    out = []
    for sid in dict.fromkeys(ids):
        s = kn.sources.get(sid)
        if s is not None:
            out.append(QuotedSource(sid, str(s["title"]), str(s.get("publisher") or ""), str(s.get("date") or ""),
                              web_address(s.get("url"))))
    return out[:SOURCES], max(0, len(out) - SOURCES)


def to_quote(answer: Answer, kn: Knowledge,
             ask: Callable[[str], Answer]) -> tuple[Answer, Answer | None, Answer | None]:
    """The answers a quote is built from: (the one quoted, the one asked when that differs, a
    wider one). The one quoted is `answer` when a configuration in it fits; else the first change
    that fits (kb.engine.advising.options; computed here when the answer has none), asked again with `ask`,
    but for a fleet no count serves (kb.engine.pipeline.fleet_unserved), which is quoted as asked.
    Where it names GPUs and holds fewer than ALTERNATIVES other cards that fit, the wider one is
    the same question with no GPU named (asked with `ask`), for the alternatives; else None."""
    from kb.engine.pipeline import fleet_unserved

    asked = None
    if fleet_unserved(answer):          # a fleet no count serves: no one configuration's change answers it
        return answer, None, None
    if not any(g.fits for g in answer.gpus):
        if answer.options is None:
            answer.options = compute(kn, parse(answer.query, kn), answer, engine_answer)
        first = next((o for o in answer.options if o[N.FITS]), None)
        if first is None:
            return answer, None, None
        answer, asked = ask(first["query"]), answer
    wider = None
    if len({g.id for g in answer.gpus if g.fits}) <= ALTERNATIVES:
        try:                                # the same Workload with no GPU named, as query text
            w = parse(answer.query, kn)
        except KbError:
            w = None
        if w is not None and (w.gpus or w.gpu_count is not None):
            w.gpus, w.gpu_count = [], None
            wider = ask(unparse(w, kn))
    return answer, asked, wider


def build(answer: Answer, kn: Knowledge, asked: Answer | None = None, wider: Answer | None = None) -> Quote:
    """The quote's data: the configurations from `answer` (and `wider`, see to_quote); when
    `answer` answers a change to the question, the question and verdict from `asked`, and the
    other changes that fit from its options."""
    first = asked or answer
    recommended, alternatives = _configs(answer, kn, wider)
    options = [o for o in (first.options or []) if o[N.FITS]]
    change = next((o["change"] for o in options if o["query"] == answer.query), None)
    changes = [f"{o['change']}: {o['count']}× {o['gpu']}, {num(o['per_gpu_gb'])} GB per GPU"
               for o in options if o["query"] != answer.query][:ALTERNATIVES] if asked or not recommended else []
    configs = [c for c in (recommended, *alternatives) if c is not None]
    sources, more = _sources(answer, kn, configs)
    return Quote(query=first.query, verdict=first.verdict, change=change, quoted_query=answer.query,
                 prices_as_of=answer.prices.get("as_of"), recommended=recommended,
                 alternatives=alternatives, changes=changes,
                 assumptions=answer.assumptions[:ASSUMPTIONS],
                 more_assumptions=max(0, len(answer.assumptions) - ASSUMPTIONS),
                 sources=sources, more_sources=more, units=answer.units, fleet=_fleet(answer))


def _fleet(answer: Answer) -> list[str]:
    """The fleet's layout and figures under load, as the text answer states them (kb.present.render)."""
    from kb.present.render import fleet_lines

    return [line.strip().split(None, 1)[0].capitalize() + ": " + line.strip().split(None, 1)[1]
            for line in fleet_lines(answer)]


# ---------------------------------------------------------------- Markdown

_SPECIAL = re.compile(r"([\\`*_\[\]<>|])")


def _md(text: object) -> str:
    """Plain text for a Markdown line or cell, readable as it is in an e-mail: one line, only the
    characters that would change the layout escaped (a dollar sign stays a dollar sign)."""
    return _SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def buy_text(c: Config) -> str:
    if c.buy_usd is None:
        return "no purchase price"
    when = ", ".join(x for x in (c.buy_kind, c.buy_date) if x)
    if c.servers and c.cards_usd is not None:       # modules: the GPUs' price, and the servers'
        return (f"{_money(c.buy_usd)}: the GPUs {_money(c.cards_usd)}" + (f" ({when})" if when else "")
                + f", {servers_needed(c.servers)} {_money(c.buy_usd - c.cards_usd)}")
    return f"{_money(c.buy_usd)}" + (f" ({when})" if when else "")


def rent_text(c: Config) -> str:
    """The hourly price of the configuration, with the price pages it comes from: how many,
    their range per GPU-hour and their dates."""
    if c.rent_usd_per_hour is None:
        return "not rented"
    head = f"{_money(c.rent_usd_per_hour)}/h"
    if c.price_file:
        return head + f" (from {c.price_file})"
    if not c.rent:
        return head + " (the rate the question set)"
    rates = sorted(r.usd_per_hour for r in c.rent)
    dates = sorted(r.date for r in c.rent)
    spread = _money(rates[0]) if rates[0] == rates[-1] else f"{_money(rates[0])}–{_money(rates[-1])}"
    when = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
    pages = f"{len(c.rent)} price page{'s' if len(c.rent) != 1 else ''}"
    return f"{head} ({pages}, {spread} per GPU-hour, dated {when})"


def memory_text(c: Config) -> str:
    return f"{num(c.per_gpu_gb)} of {num(c.usable_gb)} GB per GPU"


def markdown(q: Quote) -> str:
    out = [f"# Quote: {_md(q.query)}", "", f"**{_md(q.verdict)}**", ""]
    if q.change:
        out += [f"As asked it does not fit; quoted with this change: {_md(q.change)} "
                f"(the question {_md(q.quoted_query)}).", ""]
    if q.recommended is None:
        out += ["No configuration holds this job as asked.", ""]
    else:
        c = q.recommended
        out += ["## Recommended configuration", "",
                f"**{c.count}× {_md(c.gpu)}**", "",
                f"- Memory: {memory_text(c)}",
                f"- Speed: {_md(c.speed)}",
                f"- Running cost: {_md(c.cost)}",
                f"- Buy: {_md(buy_text(c))}",
                f"- Rent: {_md(rent_text(c))}"] + [f"- {_md(x)}" for x in q.fleet] + [""]
    if q.changes:
        out += ["Other changes that would fit:", ""] + [f"- {_md(c)}" for c in q.changes] + [""]
    if q.alternatives:
        out += ["## Alternatives", ""]
        for a in q.alternatives:
            out.append(f"- **{_md(a.role[:1].upper() + a.role[1:])}: {a.count}× {_md(a.gpu)}**: {memory_text(a)}; {_md(a.speed)}; "
                       f"running cost {_md(a.cost)}; buy {_md(buy_text(a))}; rent {_md(rent_text(a))}")
        out.append("")
    out += ["## Assumptions", ""] + [f"- {_md(x)}" for x in q.assumptions]
    if q.more_assumptions:
        out.append(f"- and {q.more_assumptions} more in the full answer")
    out += ["", f"Prices as of {q.prices_as_of or 'n/a'}; prices move, so check them before you order. {_md(q.units)}.",
            "", "## Sources", ""]
    for s in q.sources:
        title = f"[{_md(s.title)}]({s.url})" if s.url else _md(s.title)
        out.append(f"- {', '.join(x for x in (title, _md(s.publisher), _md(s.date)) if x)} ({_md(s.id)})")
    if q.more_sources:
        out.append(f"- and {q.more_sources} more in the full answer")
    out += ["", f"Computed by kbq from rules you can read: ask kbq “{_md(q.query)}” for the full answer, "
            "with every step and source."]
    return "\n".join(out).rstrip() + "\n"
