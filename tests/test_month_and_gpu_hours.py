"""A month of renting, and GPU-hours asked with a card's name ('h100 hours').

- A month: query.yaml reads 'per month', 'monthly' as a rented cost around the clock; the month is
  formulas.yaml days_per_month (365.25 / 12 = 30.44 days), so 2x H100 at $6.49/h is
  6.49 x 24 x 30.44 = $4,741 a month.
- 'how many h100 hours': the hours counted are GPU-hours, not a count of GPUs; a training job with
  its tokens named leads with the time, the GPU-hours and the rented cost.
"""

import re

import pytest
from practitioner_reading import KN

import kb
from kb.query.parse import parse


@pytest.mark.parametrize("q", ["monthly cost to serve llama 3.1 70b on 2x h100",
                               "rent 4x h100 to serve llama 3.1 70b for 100 users how much per month",
                               "how much per month to run llama 3.1 8b on an l4"])
def test_a_month_of_renting_is_read_and_priced_around_the_clock(q: str) -> None:
    w = parse(q, KN)
    assert (w.focus, w.rent, w.hours_per_day) == ("cost", True, 24.0)
    a = kb.ask(q)
    row = next(g for g in a.gpus if g.requested)
    month = (row.config_usd_per_hour or 0) * 24 * 30.44
    said = re.search(r"Rented 24 h a day: \$([\d,]+) a month", a.verdict)
    assert said, a.verdict
    assert float(said.group(1).replace(",", "")) == pytest.approx(month, rel=0.002)


def test_the_hand_figure_for_two_h100s() -> None:
    a = kb.ask("monthly cost to serve llama 3.1 70b on 2x h100")
    row = next(g for g in a.gpus if g.requested)
    assert row.config_usd_per_hour == pytest.approx(6.49, abs=0.005)   # prices.yaml's median H100 price, x2
    assert "$4,741 a month" in a.verdict, a.verdict


@pytest.mark.parametrize("q", ["how many h100 hours to pretrain a 1b model on 20b tokens",
                               "how many gpu hours to fine tune llama 3.1 8b lora on 1b tokens on a100"])
def test_gpu_hours_asked_with_a_card_are_the_time_not_a_count(q: str) -> None:
    w = parse(q, KN)
    assert w.question is None and w.focus == "time" and len(w.gpus) == 1 and w.gpus[0].count == 1
    a = kb.ask(q)
    row = next(g for g in a.gpus if g.requested)
    assert a.verdict.startswith("Time:"), a.verdict
    hours = re.search(r"\(([\d,.]+) GPU-hours", a.verdict)
    assert hours and float(hours.group(1).replace(",", "")) == pytest.approx((row.run_hours or 0) * row.count, rel=0.01)


def test_a_deadline_in_hours_is_still_a_deadline() -> None:
    assert parse("full fine tune 8b on 10b tokens in 48 hours", KN).deadline_hours == 48.0
