"""The wiki's prices page and the GPU table's cost column (kbq export).

In: the Knowledge (prices from rules/prices.yaml, sources). Out: Markdown: `prices_page(kn)`,
every GPU's purchase and cloud prices with their kinds, "as of" dates and sources, and the order
the GPU configurations are ranked in; `cost_cell(kn, gpu)`, "what it costs" in the GPU table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.present.export_text import code, page, src_link, table
from kb.knowledge.data import Knowledge
from kb.present.render import md
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.knowledge.records import GPU


def money(v: float | None) -> str:
    return "–" if v is None else f"${v:,.0f}" if v >= 100 else f"${v:,.2f}"


def cost_cell(kn: Knowledge, gpu: GPU) -> str:
    """'$30,000 street; $3.24/h' for the GPU table."""
    p = kn.prices.get(gpu["id"])
    if p is None:
        return "–"
    buy = f"{money(p['purchase_usd'])} {p['purchase_kind']}" if p["purchase_usd"] is not None else "not sold"
    rent = f"; {money(p['cloud_usd_per_hour'])}/h" if p[N.CLOUD_USD_PER_HOUR] is not None else ""
    return buy + rent


def prices_page(kn: Knowledge) -> str:
    """The prices page: one row per GPU with the cloud price an answer uses
    and the spread of the pages behind it, then every cloud price with its own source."""
    as_of = sorted({p["as_of"] for p in kn.prices.values()})
    adv = kn.advice
    rule = adv.get("cloud_price")
    head = ["GPU", "id", "buy (per card)", "kind", "as of", "source",
            f"rent $/GPU-hour ({rule['use'] if rule else 'median'})",
            "lowest-highest", "pages", "pages agree?"]
    rows, listings = [], []
    for gid, g in kn.gpus.items():
        p = kn.prices.get(gid)
        if p is None:
            rows.append([md(g["name"]), code(gid), "–", "", "", "", "–", "", "", ""])
            continue
        n = len(p["cloud"])
        spread = f"{money(p.get('cloud_low'))}-{money(p.get('cloud_high'))}" if n > 1 else ""
        low, high = p["cloud_low"], p["cloud_high"]
        agree = "" if n < 2 or p.get("cloud_disagree") is None else (
            f"no: highest {high / low:.1f}× lowest" if p["cloud_disagree"] and high and low else "yes")
        rows.append([md(g["name"]), code(gid), money(p["purchase_usd"]), p["purchase_kind"], p["purchase_date"],
                     src_link(p["purchase_source"]), money(p[N.CLOUD_USD_PER_HOUR]), spread,
                     str(p.get("cloud_pages") or "") if n else "", agree])
        listings += [[md(g["name"]), md(c["provider"]), money(c["usd_per_hour"]), c["date"], src_link(c["source"])]
                     for c in sorted(p["cloud"], key=lambda c: c["usd_per_hour"])]
    ratio = rule["disagree_ratio"] if rule else None
    body = [f"Prices as of {', '.join(as_of) or 'n/a'}. Purchase prices are per card: list (MSRP), "
            "street (typical new), used, or estimate (kbq's own, where no public price was found; "
            "replace it with a quote through `kbq --prices FILE`). Cloud prices are on demand, per "
            f"GPU-hour, from each price page listed below; an answer uses their {rule['use'] if rule else 'median'}"
            + (f" and says the pages disagree where the highest is {ratio:g}× the lowest or more"
               if ratio else "")
            + " (`advice.cloud_price` in rules/prices.yaml). Override them in a query ('at $2/h', "
            "'budget $5000') or with a file of the same shape.", "",
            *table(head, rows, "llrllrrlrl"), "",
            "## Cloud prices, each source", "",
            "Every on-demand price behind the table above, cheapest first for each GPU.", "",
            *table(["GPU", "provider", "$/GPU-hour", "date", "source"], listings, "llrll"), ""]
    if adv.get("sorts"):
        says = adv.get("says") or {}
        body += ["## How configurations are ranked", "",
                 f"Default order: {code(adv['default_sort'])}. Each key is a formula; the first that differs decides.", ""]
        for name, keys in adv["sorts"].items():
            body.append(f"- {code(name)}: " + ", then ".join(
                f"{code(k['by'])} ({k['order']}: {md(says.get(k['by'], k['by']))})" for k in keys))
    return page("Prices", body)
