"""A serving volume with no user count ("at 1000 requests per minute", "for 1b tokens a day").

Hand derivations:
- A request rate is a token rate: 1000 requests a minute are 1,440,000 a day; at the default output
  of 256 tokens (query.yaml defaults) that is 368,640,000 tokens a day, 4,267 tokens/s. 10 requests a
  second of 500 output tokens are 432,000,000 tokens a day.
- Little's law: the requests in flight are the arrival rate times each request's time, so U users
  each decoding at r(U) tokens/s make U x r(U) tokens/s. The users a rate needs are the fewest U with
  U x r(U) >= rate; since r falls as U grows, U - 1 users at r(U) make less than the rate.
"""

import math

import pytest
from practitioner_reading import KN

import kb
from kb.engine.assembly.answer import Answer
from kb.errors import QueryError
from kb.query.parse import parse

DAY = 86_400


@pytest.mark.parametrize("q, per_day", [
    ("serve llama 3 8b at 1000 requests per minute", 1000 * 1440 * 256),
    ("serve llama 3.1 70b at 10 rps with 500 token outputs on 2x h100", 10 * DAY * 500),
    ("serve llama 3.1 8b at 3600 requests per hour on an l4", 3600 * 24 * 256),
    ("serve llama 3.1 8b at 2 qps on an l4", 2 * DAY * 256),
])
def test_a_request_rate_reads_as_the_tokens_a_day_its_outputs_make(q: str, per_day: float) -> None:
    w = parse(q, KN)
    assert w.tokens_per_day == pytest.approx(per_day) and w.users is None
    assert any("requests a day" in n for n in w.notes), w.notes


def test_a_request_rate_in_a_training_question_is_an_error_with_a_caret() -> None:
    with pytest.raises(QueryError, match="serving rate"):
        parse("lora llama 3.1 8b at 10 requests per second on 4090", KN)


def served(a: Answer) -> tuple[int, float, float]:
    row = next((g for g in a.gpus if g.requested), a.gpus[0])
    rate = float(a.workload["tokens_per_day"]) / DAY
    return int(a.workload["users"]), float(row.decode_tokens_per_s or 0), rate


@pytest.mark.parametrize("q", ["serve llama 3.1 8b for 100m tokens a day on 1x h100",
                               "serve qwen2.5 7b at 5 requests per second on one l40s"])
def test_the_users_are_the_fewest_whose_decode_meets_the_rate(q: str) -> None:
    # a volume on a card counted is asked of that card (one card named with no count is asked
    # how many of it carry the volume: test_a_volume_on_a_card_with_no_count_asks_how_many)
    a = kb.ask(q)
    users, speed, rate = served(a)
    assert users > 1 and users * speed >= rate and (users - 1) * speed < rate, (users, speed, rate)
    row = next(g for g in a.gpus if g.requested)
    assert row.fits and row.meets_target
    assert any(x.startswith(f"concurrent users: {users},") for x in a.assumptions), a.assumptions


def test_a_card_to_buy_for_a_rate_meets_it() -> None:
    # the users are found on the card ranked first as the search goes, so the pick meets the rate,
    # perhaps with a few users to spare
    a = kb.ask("serve llama 3 8b at 1000 requests per minute")
    users, speed, rate = served(a)
    assert a.gpus[0].fits and a.gpus[0].meets_target and users * speed >= rate


def test_a_requests_context_is_its_prompt_and_output() -> None:
    a = kb.ask("serve llama 3.1 8b for 100m tokens a day on h100")
    d = KN.query["defaults"]
    assert a.workload["context_tokens"] == d["prompt_tokens"] + d["output_tokens"]


@pytest.mark.parametrize("q", ["how many h100 to serve llama 3.1 70b at 20 requests per second",
                               "how many l4 to serve llama 3.1 8b at 50 requests per second"])
def test_a_fleet_for_a_volume_is_copies_of_the_model_that_meet_it(q: str) -> None:
    a = kb.ask(q)
    users, speed, rate = served(a)
    par = a.workload["parallel"]
    row = next(g for g in a.gpus if g.requested)
    assert row.fits and row.meets_target and users * speed >= rate
    assert row.count == par["tp"] * par["pp"] * par["dp"] and par["dp"] > 1   # replicas, not a deeper pipeline
    # one replica fewer cannot hold the users: the answer says memory binds or the target does
    assert a.question is not None and a.question["kind"] == "how_many_gpus"
    assert math.ceil(rate / speed) <= users


def test_a_volume_on_a_card_with_no_count_asks_how_many() -> None:
    q = "serve qwen3-32b at 5m tokens an hour on l40s"
    assert parse(q, KN).question == "how_many_gpus"
    a = kb.ask(q)
    # 5M tokens an hour are 1,389 output tokens a second: the fleet of L40S carries them under load
    assert a.replicas is not None and a.replicas["gpu_id"] == "l40s"
    assert a.replicas["gpus"] * a.replicas["tokens_per_s_per_gpu"] >= 5e6 / 3600
