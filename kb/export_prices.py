"""The wiki's prices page and the GPU table's cost column (kbq export).

In: the Knowledge (prices from rules/prices.yaml, sources). Out: Markdown: `prices_page(kn)`,
every GPU's purchase and cloud prices with their kinds, "as of" dates and sources, and the order
the GPU configurations are ranked in; `cost_cell(kn, gpu)`, "what it costs" in the GPU table.
"""

from __future__ import annotations

from typing import Any

from kb.model import Knowledge


def money(v: float | None) -> str:
    return "–" if v is None else f"${v:,.0f}" if v >= 100 else f"${v:,.2f}"


def cost_cell(kn: Knowledge, gpu: dict[str, Any]) -> str:
    """'$30,000 street; $3.24/h' for the GPU table."""
    p = kn.prices.get(gpu["id"])
    if p is None:
        return "–"
    buy = f"{money(p['purchase_usd'])} {p['purchase_kind']}" if p["purchase_usd"] is not None else "not sold"
    rent = f"; {money(p['cloud_usd_per_hour'])}/h" if p["cloud_usd_per_hour"] is not None else ""
    return buy + rent


def prices_page(kn: Knowledge, md: Any, code: Any, src_link: Any, table: Any, page: Any) -> str:
    """The prices page; the formatting helpers are kb.export's (passed in, not imported, to keep
    this module free of an import cycle)."""
    as_of = sorted({p["as_of"] for p in kn.prices.values()})
    head = ["GPU", "id", "buy (per card)", "kind", "as of", "source", "rent $/GPU-hour (median)", "cloud prices"]
    rows = []
    for gid, g in kn.gpus.items():
        p = kn.prices.get(gid)
        if p is None:
            rows.append([md(g["name"]), code(gid), "–", "", "", "", "–", ""])
            continue
        cloud = "; ".join(f"{md(c['provider'])} {money(c['usd_per_hour'])} ({c['date']}, {src_link(c['source'])})"
                          for c in p["cloud"])
        rows.append([md(g["name"]), code(gid), money(p["purchase_usd"]), p["purchase_kind"],
                     p["purchase_date"], src_link(p["purchase_source"]), money(p["cloud_usd_per_hour"]), cloud])
    body = [f"Prices as of {', '.join(as_of) or 'n/a'}. Purchase prices are per card: list (MSRP), "
            "street (typical new), used, or estimate (kbq's own, where no public price was found; "
            "replace it with a quote through `kbq --prices FILE`). Cloud prices are on demand, per "
            "GPU-hour; an answer uses their median. Override them in a query ('at $2/h', "
            "'budget $5000') or with a file of the same shape.", "",
            *table(head, rows, "llrllrrl"), ""]
    adv = kn.advice or {}
    if adv.get("sorts"):
        body += ["## How configurations are ranked", "",
                 f"Default order: {code(adv['default_sort'])}. Each key is a formula; the first that differs decides.", ""]
        for name, keys in adv["sorts"].items():
            body.append(f"- {code(name)}: " + ", then ".join(f"{code(k['by'])} ({k['order']})" for k in keys))
    return page("Prices", body)
