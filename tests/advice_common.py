"""What the right-sizing tests share (tests/test_advice*.py): the knowledge with another price
file, an answer to a workload with fields set by hand."""

from pathlib import Path

from kb import get_knowledge
from kb.engine import answer
from kb.knowledge.prices import with_prices
from kb.query.parse import parse

KN = get_knowledge()


def priced(tmp_path: Path, body: str) -> object:
    path = tmp_path / "prices.yaml"
    path.write_text('as_of: "2026-11"\nprices:\n' + body, encoding="utf-8")
    return with_prices(KN, path)


def run(kn, query: str, **fields):
    w = parse(query, kn)
    for k, v in fields.items():
        setattr(w, k, v)
    return answer(w, kn, query)


# one H100 with a purchase price and two cloud listings (2.0 and 4.0 $/h), for sums by hand
PRICE_H100 = """  - gpu: h100-sxm5
    purchase_usd: 20000
    purchase_kind: list
    purchase_date: "2026-10"
    purchase_source: quote-1
    cloud:
      - {usd_per_hour: 2.0, provider: A, date: "2026-10", source: quote-1}
      - {usd_per_hour: 4.0, provider: B, date: "2026-10", source: quote-1}
"""

# an advice section of prices.yaml with one sort order of its own
ADVICE = """advice:
  cloud_price: {use: median, disagree_ratio: 1.5, source: quote-1}
  default_sort: value
  sorts:
    value:
      - {by: fits, order: desc}
      - {by: config_power_w, order: asc}
  rent_cost_key: config_usd_per_hour
  says: {fits: holds the job, config_power_w: fewest watts, config_usd_per_hour: cheapest hour}
  max_gpus_per_config: 8
  source: quote-1
"""
