"""Prices: rules/prices.yaml → what each GPU costs to buy and to rent, and how to sort by it.

In: the validated prices file (kb.knowledge.schema.PricesFile) and the GPU catalogue. Out: the catalogue
with `price_usd` and `cloud_usd_per_hour` on every GPU that has them (the per-GPU names
`gpu.price_usd`, `gpu.cloud_usd_per_hour` of rules/formulas.yaml), `Knowledge.prices` (each
GPU's entry with its dates and sources, for the assumptions and the wiki page) and the sort
orders. `with_prices(kn, path)` answers `kbq --prices FILE`: the same knowledge with another
price list, checked the same way. Pure but for reading that one file.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

from kb.errors import RuleError, RuleErrors, nearest
from kb.knowledge.loader import Doc, load, validate
from kb.knowledge.data import Knowledge
from kb.knowledge.derived import derive

if TYPE_CHECKING:
    from kb.knowledge.loader import Path_
    from kb.knowledge.records import GPU
    from kb.knowledge.records_rules import PriceAdvice, CloudRule, Price
    from kb.knowledge.schema import AdviceSchema, PricesFile

NeedSource = Callable[[Doc, "Path_", str], None]


def check(doc: Doc, pfile: PricesFile, gpus: dict[str, GPU], formulas: set[str],
          need_source: NeedSource, add: Callable[[RuleError], None]) -> None:
    """Every GPU id known and priced once, every source known, every sort key a formula or
    an input (`formulas`: the names of both)."""
    seen: dict[str, int] = {}
    for i, p in enumerate(pfile.prices):
        if p.gpu not in gpus:
            add(doc.error(("prices", i, "gpu"), f"unknown gpu '{p.gpu}'", nearest(p.gpu, gpus)))
        elif p.gpu in seen:
            add(doc.error(("prices", i, "gpu"), f"gpu '{p.gpu}' is priced twice (first at entry {seen[p.gpu] + 1})"))
        seen.setdefault(p.gpu, i)
        need_source(doc, ("prices", i, "purchase_source"), p.purchase_source)
        if p.server is not None:
            need_source(doc, ("prices", i, "server", "source"), p.server.source)
        for j, c in enumerate(p.cloud):
            need_source(doc, ("prices", i, "cloud", j, "source"), c.source)
    if pfile.advice is not None:
        _check_advice(doc, pfile.advice, formulas, need_source, add)


def _check_advice(doc: Doc, advice: AdviceSchema, formulas: set[str], need_source: NeedSource,
                  add: Callable[[RuleError], None]) -> None:
    """prices.yaml advice: its sources known; every sort key, worded key and cost key a formula or
    an input, each sort key and the cost key with words in advice.says."""
    need_source(doc, ("advice", "source"), advice.source)
    need_source(doc, ("advice", "cloud_price", "source"), advice.cloud_price.source)
    for j, o in enumerate(advice.options):
        need_source(doc, ("advice", "options", j, "source"), o.source)
    says = advice.says
    for sort, keys in [*advice.sorts.items(), *advice.budget_sorts.items()]:
        for j, k in enumerate(keys):
            if k.by not in formulas:
                add(doc.error(("advice", "sorts", sort, j, "by"), f"unknown name '{k.by}'",
                              nearest(k.by, formulas)))
            elif k.by not in says:
                add(doc.error(("advice", "sorts", sort, j, "by"),
                              f"'{k.by}' has no words in advice.says (how an answer names this key)"))
    for name in says:
        if name not in formulas:
            add(doc.error(("advice", "says", name), f"unknown name '{name}'", nearest(name, formulas)))
    for key, names in (("rent_ignores", advice.rent_ignores), ("training_only", advice.training_only)):
        for j, name in enumerate(names):
            if name not in formulas:
                add(doc.error(("advice", key, j), f"unknown name '{name}'", nearest(name, formulas)))
    if advice.rent_cost_key not in formulas:
        add(doc.error(("advice", "rent_cost_key"), f"unknown formula '{advice.rent_cost_key}'",
                      nearest(advice.rent_cost_key, formulas)))
    elif advice.rent_cost_key not in says:
        add(doc.error(("advice", "rent_cost_key"),
                      f"'{advice.rent_cost_key}' has no words in advice.says (how an answer names this key)"))


PICK: dict[str, Callable[[list[float]], float]] = {"median": statistics.median, "lowest": min, "highest": max}


def table(pfile: PricesFile, rule: CloudRule | None = None) -> dict[str, Price]:
    """gpu id → its price entry, plus the cloud price the answer uses and the spread behind it.
    The rule (prices.yaml advice.cloud_price, or `rule` for a price file without advice) picks
    the price from the on-demand prices listed: the median, the lowest or the highest; the
    lowest and highest, how many price pages, and whether they disagree (highest / lowest at
    or above the rule's ratio) go with it. Without a rule: the median, disagreement not judged."""
    if rule is None and pfile.advice is not None:
        rule = cast("CloudRule", pfile.advice.cloud_price.model_dump())
    use = rule["use"] if rule else "median"
    out: dict[str, Price] = {}
    for p in pfile.prices:
        entry = cast("Price", p.model_dump())
        hourly = [c.usd_per_hour for c in p.cloud]
        low, high = (min(hourly), max(hourly)) if hourly else (None, None)
        entry["cloud_usd_per_hour"] = PICK[use](hourly) if hourly else None
        entry["cloud_rule"] = use
        entry["cloud_low"], entry["cloud_high"] = low, high
        entry["cloud_pages"] = len({c.source for c in p.cloud})
        entry["cloud_disagree"] = (None if rule is None or len(hourly) < 2 or not low
                                   else bool(max(hourly) / low >= rule["disagree_ratio"]))
        entry["as_of"] = pfile.as_of
        out[p.gpu] = entry
    return out


# the keys kbq adds to a record after validation, with their types, declared here once: the
# typed dicts (kb.knowledge.views) and tests/test_records.py read them from here
GPU_PRICE_KEYS: dict[str, str] = {"price_usd": "float | None", "cloud_usd_per_hour": "float | None",  # merge
                                   "server_usd": "float | None", "server_gpus": "int | None"}
PRICE_KEYS: dict[str, str] = {      # table, and `file` from with_prices
    "cloud_usd_per_hour": "float | None", "cloud_rule": "str", "cloud_low": "float | None",
    "cloud_high": "float | None", "cloud_pages": "int", "cloud_disagree": "bool | None", "as_of": "str",
    "file": "str | None"}


def merge(gpus: dict[str, GPU], prices: dict[str, Price]) -> dict[str, GPU]:
    """The catalogue with each GPU's purchase and cloud price (None where it has none)."""
    out: dict[str, GPU] = {}
    for gid, g in gpus.items():
        p = prices.get(gid)
        server = p.get("server") if p else None
        out[gid] = {**g, "price_usd": p["purchase_usd"] if p else None,
                    "cloud_usd_per_hour": p["cloud_usd_per_hour"] if p else None,
                    "server_usd": server["usd_beyond_gpus"] if server else None,
                    "server_gpus": server["gpus"] if server else None}
    return out


def advice_table(pfile: PricesFile | None) -> PriceAdvice:
    return cast("PriceAdvice", pfile.advice.model_dump() if pfile is not None and pfile.advice is not None else {})


def with_prices(kn: Knowledge, path: Path) -> Knowledge:
    """The knowledge with the prices of another file (same schema). Raises RuleErrors.
    The file may cite sources the rules do not know (a quote of one's own)."""
    from kb.knowledge.schema import PricesFile

    doc = load(Path(path), None)
    if doc.data is None:
        raise RuleErrors([RuleError(doc.display, 1, 1, "file is empty")])
    pfile, problems = validate(doc, PricesFile)
    errors: list[RuleError] = list(problems)
    if pfile is not None:
        check(doc, pfile, kn.gpus, set(kn.formulas) | set(kn.inputs), lambda *_: None, errors.append)
    if errors or pfile is None:
        raise RuleErrors(errors)
    advice = advice_table(pfile) or kn.advice
    own = table(pfile, advice.get("cloud_price"))
    prices = {**kn.prices, **own}
    for entry in prices.values():
        entry.setdefault("file", None)
    for gid in own:
        prices[gid]["file"] = doc.display

    return derive(replace(kn, gpus=merge(kn.gpus, prices), prices=prices, advice=advice))
