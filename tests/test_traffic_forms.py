"""Traffic as people write it (issue 37): prompt and output lengths as 'N in / M out', a slashed
pair with or without its label and spaces ('2k/500', '2k / 500', 'ISL/OSL 4000/500'), next to users and a request
rate; 'in' and 'out' are lengths only right after a number, so deadlines ('in 24 hours', 'in a
week') read as before. The expected fields are the numbers typed ('2k' of a prompt is 2,048:
query.yaml units.prompt binary_k)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb import get_knowledge
from kb.query.parse import parse
from kb.query.unparse import unparse

KN = get_knowledge()


@pytest.mark.parametrize("q, prompt, output", [
    ("serve llama-3.1-70b 2k in / 500 out 100 users on h100", 2048, 500),
    ("serve llama-3.1-70b 2000 in, 500 out 100 users on h100", 2000, 500),
    ("serve llama-3.1-70b 2k/500 100 users on h100", 2048, 500),
    ("serve llama-3.1-70b 2k / 500 100 users on h100", 2048, 500),      # spaced, no in/out words
    ("serve llama-3.1-70b 4000 /500 100 users on h100", 4000, 500),
    ("serve llama-3.1-70b input 2k output 500 100 users on h100", 2048, 500),
    ("serve llama-3.1-70b in/out 2000/500 100 users on h100", 2000, 500),
    ("serve llama-3.1-70b ISL/OSL 4000/500 100 users on h100", 4000, 500),
    ("serve llama-3.1-70b isl 4000 osl 500 100 users on h100", 4000, 500),
    ("serve llama-3.1-70b 8000 in / 300 out 100 users on h100", 8000, 300),   # 8000 is no RTX 8000 here
])
def test_prompt_and_output_lengths_in_every_form(q: str, prompt: int, output: int) -> None:
    w = parse(q, KN)
    assert (w.prompt_tokens, w.output_tokens, w.users) == (prompt, output, 100)
    assert [g.gpu_id for g in w.gpus] == ["h100-sxm5"]
    back = parse(unparse(w, KN), KN)      # what kbq writes back reads the same
    assert (back.prompt_tokens, back.output_tokens, back.users) == (prompt, output, 100)


def test_lengths_next_to_a_request_rate_and_a_first_token_target() -> None:
    w = parse("how many h100 for llama-3.1-70b 2k in / 500 out 10 requests per second ttft 2 s", KN)
    assert (w.prompt_tokens, w.output_tokens, w.ttft_max_s) == (2048, 500, 2.0)
    # a request rate is kept as the tokens a day its outputs make (kb.query.finish): 10/s × 500
    assert w.tokens_per_day == pytest.approx(10 * 86400 * 500)


@pytest.mark.parametrize("q, hours", [
    ("train llama-3.1-8b in a week", 168.0),
    ("pretrain 7b on 100b tokens in 24 hours", 24.0),
    ("train 7b on 1t tokens in 30 days", 720.0),
    ("how many h100 to train 70b on 1t tokens in 30 days", 720.0),
])
def test_in_before_a_duration_is_still_a_deadline(q: str, hours: float) -> None:
    w = parse(q, KN)
    assert w.deadline_hours == pytest.approx(hours)
    assert w.prompt_tokens is None and w.output_tokens is None


@pytest.mark.parametrize("q", ["serve llama-3.1-8b 24/7", "serve llama-3.1-8b 24 / 7"])
def test_a_slashed_phrase_of_the_vocabulary_is_not_a_pair(q: str) -> None:
    w = parse(q, KN)
    assert w.prompt_tokens is None and w.output_tokens is None


def test_a_spaced_pair_answers_a_capacity_question() -> None:
    """'2k / 500' once stopped at '500' (a number with no unit); it is the prompt and output."""
    w = parse("how many h200 for llama-3.1-70b fp8 500 users 2k / 500 at 20 tok/s ttft under 2 s", KN)
    assert (w.prompt_tokens, w.output_tokens, w.users, w.ttft_max_s) == (2048, 500, 500, 2.0)


@pytest.mark.parametrize("q, e2e, percentile, ttft", [
    ("serve llama-3.1-70b 100 users e2e under 10 s", 10.0, None, None),
    ("serve llama-3.1-70b 100 users end-to-end latency under 8 s", 8.0, None, None),
    ("serve llama-3.1-70b 100 users request latency below 5 s", 5.0, None, None),
    ("serve llama-3.1-70b 100 users p95 e2e 12s", 12.0, 95, None),
    ("serve llama-3.1-70b 100 users ttft 2 s e2e 10 s", 10.0, None, 2.0),
])
def test_an_end_to_end_latency_is_a_target(q: str, e2e: float, percentile: float | None, ttft: float | None) -> None:
    w = parse(q, KN)
    assert (w.e2e_max_s, w.e2e_percentile, w.ttft_max_s, w.deadline_hours) == (e2e, percentile, ttft, None)
    back = parse(unparse(w, KN), KN)
    assert (back.e2e_max_s, back.e2e_percentile, back.ttft_max_s) == (e2e, percentile, ttft)


@pytest.mark.parametrize("q, speed, ttft", [
    ("how many h100 for qwen3-32b 200 users isl 2000 osl 500 tpot 50 ms ttft 1.5 s", 20.0, 1.5),
    ("how many h100 for qwen3-32b 200 users 2k / 500 ttft under 2 s itl 40ms", 25.0, 2.0),
    ("how many h100 for qwen3-32b 200 users 2000 in 500 out time per output token under 50 ms", 20.0, None),
    # two speeds: the stricter one holds ('at 20 tok/s' and 25 ms a token = 40 tok/s)
    ("how many h100 for qwen3-32b 200 users at 20 tok/s tpot 25 ms", 40.0, None),
])
def test_a_time_per_output_token_is_the_per_user_speed(q: str, speed: float, ttft: float | None) -> None:
    """'tpot 50 ms' (as AIConfigurator and the serving benchmarks state it) is a per-user speed of
    1 / 0.05 s = 20 tokens a second; it once fell to the first-token bound or was dropped."""
    w = parse(q, KN)
    assert w.speed_floor_tok_s == pytest.approx(speed)
    assert w.ttft_max_s == ttft
    back = parse(unparse(w, KN), KN)
    assert back.speed_floor_tok_s == pytest.approx(speed)


@pytest.mark.parametrize("q, users, speed, ttft, count_question", [
    ("how many h200 for llama-3.1-70b fp8 concurrency 500 isl 2000 osl 500 ttft <= 2000ms tpot <= 50ms",
     500, 20.0, 2.0, True),
    ("how many h200 for llama-3.1-70b fp8 500 users 2000/500 20 tokens/s/user ttft 2s", 500, 20.0, 2.0, True),
    ("how many h200 to serve llama-3.1-70b fp8 500 users isl 2000 osl 500 with ttft sla of 2 s and 50ms tpot",
     500, 20.0, 2.0, True),
    ("minimum gpus h200 llama-3.1-70b fp8 500 users 2k/500 20 tok/s", 500, 20.0, None, True),
    ("minimum number of h100 gpus for qwen3-32b 200 users 2k/500 tpot 50ms", 200, 20.0, None, True),
])
def test_capacity_questions_as_sizing_tools_state_them(q: str, users: int, speed: float, ttft: float | None,
                                                       count_question: bool) -> None:
    """SLA phrasings of capacity tools (AIConfigurator's TTFT/TPOT, '<=', 'SLA', 'minimum GPUs'):
    each duration goes to its own word, in order, whichever side of it the word stands."""
    w = parse(q, KN)
    assert (w.users, w.speed_floor_tok_s, w.ttft_max_s) == (users, pytest.approx(speed), ttft)
    assert (w.question == "how_many_gpus") is count_question


@pytest.mark.parametrize("q, users, speed, ttft, percentile", [
    # a time per output token written after its duration, not a cost per token
    ("how many h200 for llama-3.1-70b 500 users 2k in 500 out 50 ms per output token", 500, 20.0, None, None),
    ("how many h200 for llama-3.1-70b 500 users 2k in 500 out ttft 2 s and 40 ms per token", 500, 25.0, 2.0, None),
    ("serve llama-3.1-70b on 4x h100 with 20 users at 30 ms a token", 20, 1 / 0.030, None, None),
    # 'number of' asks how many; averages and the median as people write them
    ("number of h100 needed for qwen3-32b, 20 users, avg prompt 800 tokens, avg completion 200 tokens, "
     "p50 ttft 500ms", 20, None, 0.5, 50),
    ("how many h100 for llama-3.1-8b 20 users average input 1500 tokens median ttft 1 s", 20, None, 1.0, 50),
])
def test_latency_targets_and_averages_as_people_write_them(q: str, users: int, speed: float | None,
                                                           ttft: float | None, percentile: float | None) -> None:
    w = parse(q, KN)
    assert w.users == users
    assert w.speed_floor_tok_s == (None if speed is None else pytest.approx(speed))
    assert (w.ttft_max_s, w.ttft_percentile) == (ttft, percentile)
    assert w.focus != "cost"


def test_a_cost_per_token_is_still_a_cost() -> None:
    """'per token' after no duration stays the cost phrase it was ('cost per token for 8b on an
    l4'), and 'what does … cost' asks the cost, not the fit 'does' alone would ask."""
    assert parse("cost per token for llama-3.1-8b on an l4", KN).focus == "cost"
    assert parse("what does llama-3.1-8b cost per 1M output tokens on h100", KN).focus == "cost"


@pytest.mark.parametrize("q, per_day", [
    ("how many h200 for qwen3-235b-a22b 2 million tokens per minute", 2e6 * 1440),
    ("how many h200 for qwen3-235b-a22b 90M tokens per hour", 90e6 * 24),
])
def test_tokens_a_minute_or_an_hour_are_a_daily_volume(q: str, per_day: float) -> None:
    w = parse(q, KN)
    assert w.tokens_per_day == pytest.approx(per_day)
    assert w.question == "how_many_gpus"


@pytest.mark.parametrize("q", [
    "how many 8-gpu h100 servers for llama-3.1-405b 100 users",
    "how many 8-GPU H100 nodes to serve llama-3.1-405b to 100 users",
])
def test_an_eight_gpu_server_named_before_its_card(q: str) -> None:
    """'8-GPU H100 nodes': the node's size before the card, the unit after it; the count asked is
    of GPUs, shown as nodes of eight (query.yaml units.nodes)."""
    w = parse(q, KN)
    assert w.question == "how_many_gpus" and [g.gpu_id for g in w.gpus] == ["h100-sxm5"]


@pytest.mark.parametrize("q, fleet", [
    ("serve gpt-oss-120b to 1000 users on b200, prompt 4000 output 1000, 50 tok/s per user, "
     "time to first token below 2 seconds", True),
    ("20 rps of llama-3.1-8b on a100 80gb, 2000 in 500 out, tpot 30ms, ttft 1s", True),
    ("serve llama-3.1-70b int4 16 users on h100", False),              # no latency target: does it fit
    ("serve llama-3.1-8b 16 users on h100 at 30 tok/s", False),        # a speed alone: of that card
    ("serve llama-3.1-8b on h100 ttft under 1 s", False),              # one user: of that card
    ("serve llama-3.1-8b 16 users on 2x h100 ttft under 1 s", False),  # a count given
])
def test_one_card_named_under_traffic_and_a_latency_target_asks_how_many(q: str, fleet: bool) -> None:
    """A card named with no count, serving a traffic under a first-token or end-to-end target, is a
    fleet question (kb.query.finish traffic_on_cards), said in the notes."""
    w = parse(q, KN)
    assert (w.question == "how_many_gpus") is fleet
    assert any("with no count, serving a traffic" in n for n in w.notes) is fleet


@pytest.mark.parametrize("q, users, prompt, output, speed", [
    ("how many h100 for llama-3.1-70b with 2k token prompts and 500 token responses for 200 users at 20 tok/s",
     200, 2048, 500, 20.0),
    ("how many h100 for llama-3.1-70b, concurrency of 200, 2000 input, 500 output, 20 tokens/sec per user",
     200, 2000, 500, 20.0),
    ("how many h100 for llama-3.1-70b 200 users with 2000-token inputs and 500-token outputs", 200, 2000, 500, None),
    ("how many h100 for llama-3.1-70b 200 concurrent requests each 2000 tokens in and 500 tokens out",
     200, 2000, 500, None),
    ("what's the minimum number of h100 gpus for llama-3.1-70b at 200 users, prompt length 2000, generation length 500",
     200, 2000, 500, None),
    ("how many h100 for llama-3.1-70b serving 1,000 concurrent users at 20 tokens/second with 4k input and 1k output",
     1000, 4096, 1024, 20.0),
])
def test_lengths_and_speeds_in_more_of_the_words_people_use(q: str, users: int, prompt: int, output: int,
                                                            speed: float | None) -> None:
    """'2000-token inputs' (a number joined to its unit by a dash), 'token responses', 'generation
    length', 'concurrency of', 'tokens/second', 'tokens/sec per user' ('per user' there is no cost
    phrase), and 'each 2000 tokens in' (a length, since 'in' follows: no cost phrase either)."""
    w = parse(q, KN)
    assert (w.users, w.prompt_tokens, w.output_tokens) == (users, prompt, output)
    assert w.speed_floor_tok_s == (None if speed is None else pytest.approx(speed))
    assert w.focus != "cost" and w.question == "how_many_gpus"


def test_model_names_and_chat_words_keep_their_dashes_and_meaning() -> None:
    """The dash rule reads only a number standing alone before 'token' or 'user': model names keep
    theirs, and 'chat completion' is no output length."""
    assert parse("serve llama-3.1-8b on 3090 for chat completion", KN).output_tokens is None
    assert parse("serve qwen3-30b-a3b 4 users on h100", KN).model_id == "qwen3-30b-a3b"
    assert parse("what does it cost each 1M tokens for llama-3.1-8b on h100", KN).focus == "cost"


def test_a_fleet_s_output_tokens_a_second_and_approximate_lengths() -> None:
    """'an aggregate throughput of 50000 output tokens per second' is the fleet's volume (kept per
    day, as a request rate is), while 'output tokens per second per user' stays a per-user speed;
    '~2000 tokens' reads as 2000 tokens."""
    w = parse("how many b200 for deepseek-r1 with aggregate throughput of 50000 output tokens per second, 2k/1k", KN)
    assert w.tokens_per_day == pytest.approx(50000 * 86400) and w.question == "how_many_gpus"
    w = parse("how many h100 for llama-3.1-70b at 40 output tokens per second per user 100 users", KN)
    assert (w.speed_floor_tok_s, w.tokens_per_day, w.users) == (40.0, None, 100)
    w = parse("how many h100 for gpt-oss-120b for 250 concurrent users, input ~2000 tokens, output ~800 tokens", KN)
    assert (w.prompt_tokens, w.output_tokens) == (2000, 800)


@pytest.mark.parametrize(("q", "users", "rate", "lengths"), [
    ("how many h200 for llama-3.1-70b 8000/500 tokens 200 concurrent", 200, None, (8000, 500)),
    ("how many h200 for llama-3.1-70b batch of 300 users, 2000 in / 500 out", 300, None, (2000, 500)),
    ("how many h100 for llama-3.1-8b 4000 input tokens and 500 output tokens, arrival rate 2/s", None, 2.0, (4000, 500)),
    ("plan h200 capacity for llama-3.1-70b 120/min, prompt 1000 output 300", None, 2.0, (1000, 300)),
    ("deploy llama-3.1-70b on h200s, how many gpus 100 simultaneous users, prompt 3000 output 200", 100, None, (3000, 200)),
    ("how many h200 for llama-3.1-70b, 50 requests in flight, prompt 3000 output 200", 50, None, (3000, 200)),
])
def test_capacity_phrasings_a_sales_engineer_writes(q: str, users: int | None, rate: float | None,
                                                    lengths: tuple[int, int]) -> None:
    """Concurrency said without 'users' ('200 concurrent', 'batch of 300 users', 'requests in
    flight'), a rate glued to its unit ('2/s', '120/min'), a length pair followed by 'tokens', and
    'how many gpus' or 'plan … capacity' with the count to find: each is a how-many question with
    its traffic read, not a GPU count of 100 or a batch size."""
    w = parse(q, KN)
    assert w.question == "how_many_gpus"
    assert (w.prompt_tokens, w.output_tokens) == lengths
    if users is not None:
        assert w.users == users and w.batch in (None, 1)
    if rate is not None:
        assert w.tokens_per_day == pytest.approx(rate * 86400 * lengths[1])
    assert not w.gpus or w.gpus[0].count in (None, 1)


@pytest.mark.parametrize(("q", "prompt", "output", "speed"), [
    ("estimate the number of h100 needed for llama-3.1-70b, 100 users, 2000:500 tokens, 30ms/token", 2000, 500, 1000 / 30),
    ("sizing: llama-3.1-70b, hgx h200, 100 users, 4000 tok in, 500 tok out, output speed of 25 tok/s per user", 4000, 500, 25),
    ("how many a100-80g for llama-3.1-8b, 8 requests/second, input 1000 tokens, output 200 tokens, 40 ms/token", 1000, 200, 25),
])
def test_more_capacity_phrasings(q: str, prompt: int, output: int, speed: float) -> None:
    """'2000:500' is a length pair like '2000/500'; '30ms/token' a time per output token; 'tok in'
    and 'tok out' lengths (a number before them is no card: 'Quadro RTX 8000' stays a card only
    where no length follows); 'estimate the number of' and 'sizing' ask how many."""
    w = parse(q, KN)
    assert w.question == "how_many_gpus"
    assert (w.prompt_tokens, w.output_tokens) == (prompt, output)
    assert w.speed_floor_tok_s == pytest.approx(speed)


@pytest.mark.parametrize(("q", "ttft", "speed", "users", "rate"), [
    # AIConfigurator's command line: --ttft and --tpot in milliseconds, with no unit
    ("how many h200 for qwen3-32b fp8 --isl 2000 --osl 500 --ttft 2000 --tpot 50 --target-concurrency 500",
     2.0, 20.0, 500, None),
    ("how many h200 for qwen3-32b fp8 --isl 2000 --osl 500 --ttft 2000 --tpot 50 --target-request-rate 20",
     2.0, 20.0, None, 20.0),
    ("recommend h200 for qwen3-32b fp8 isl=2000 osl=500 ttft=2000 tpot=50 concurrency=500", 2.0, 20.0, 500, None),
    # a bare number below the threshold is seconds (query.yaml bare_latency_ms_from)
    ("how many h200 for qwen3-32b fp8 500 users ttft 2 tpot 0.05 2000 in / 500 out", 2.0, 20.0, 500, None),
    ("how many h100 for qwen3-32b fp8 2000 in / 500 out, ttft 1 s, arrival rate 2/s", 1.0, None, None, 2.0),
    ("how many h100 for qwen3-32b fp8 2000 in / 500 out, ttft 1 s, request rate of 5 rps", 1.0, None, None, 5.0),
])
def test_latency_targets_and_rates_as_a_command_line_gives_them(q: str, ttft: float, speed: float | None,
                                                                users: int | None, rate: float | None) -> None:
    w = parse(q, KN)
    assert w.question == "how_many_gpus"
    assert w.ttft_max_s == pytest.approx(ttft)
    assert (w.speed_floor_tok_s is None) if speed is None else w.speed_floor_tok_s == pytest.approx(speed)
    if users is not None:
        assert w.users == users
    if rate is not None:
        assert w.tokens_per_day == pytest.approx(rate * 86400 * 500)


def test_a_number_after_a_time_per_token_that_had_its_duration_is_not_a_latency() -> None:
    """'30ms/token, 1500 RPM': the tpot word followed its own duration, so the next number is the
    rate's (1500 requests a minute), not a second reading of the time per token."""
    w = parse("how many h100 for gpt-oss-120b: ttft 2 s, 30ms/token, 1500 RPM, prompt 8000, output 500", KN)
    assert w.speed_floor_tok_s == pytest.approx(1000 / 30)
    assert w.tokens_per_day == pytest.approx(1500 * 1440 * 500)


@pytest.mark.parametrize(("q", "users", "lengths", "rate"), [
    ("how many h100 for qwen3-32b peak concurrency of 1000; ISL=1000 OSL=1000", 1000, (1000, 1000), None),
    ("how many h200 for qwen3-32b ttft 1 s --target-request-rate 100 --isl 500 --osl 200", None, (500, 200), 100.0),
    ("how many h200 for llama-3.1-70b ttft 2 s, prompts of 500 tokens, answers of 200 tokens, "
     "output speed of 10 tok/s per user, peak concurrency of 5000", 5000, (500, 200), None),
])
def test_a_unit_takes_the_number_its_words_point_to(q: str, users: int | None, lengths: tuple[int, int],
                                                    rate: float | None) -> None:
    """'concurrency of 1000 ISL=1000': a phrase ending in 'of' takes the number after it, so each
    length keeps its own; a request rate with no unit takes its number unless a rate's unit follows
    it ('arrival rate 2/s'); no phrase spans a comma ('200 tokens, output speed' is no 'tokens output')."""
    w = parse(q, KN)
    assert (w.prompt_tokens, w.output_tokens) == lengths
    if users is not None:
        assert w.users == users
    if rate is not None:
        assert w.tokens_per_day == pytest.approx(rate * 86400 * lengths[1])


def test_generated_capacity_phrasings_are_read() -> None:
    """bench/phrasings.py's two styles, 60 questions each: every one is read (a fleet or no count),
    but the 'DAU' (daily active users) it generates on purpose."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    import phrasings
    import yaml

    from kb import ask
    from kb.errors import KbError

    hub = yaml.safe_load((Path(__file__).resolve().parent.parent / "bench" / "aiconfigurator_models.yaml")
                         .read_text(encoding="utf-8"))["models"]
    for style in phrasings.STYLES:
        for q in phrasings.questions(style, 60, 11, list(hub) + phrasings.SHORT):
            try:
                ask(q)
            except KbError as err:
                assert " DAU" in q, (q, str(err).splitlines()[0])


@pytest.mark.parametrize("q, column, width", [
    ("how many h100s to host llama 3.1 8b for 10k daily active users", 41, 22),
    ("how many h100 for llama 8b 10k DAU", 28, 7),
    ("serve qwen3-32b to 50k monthly active users on h200", 20, 24),
])
def test_users_over_a_day_or_a_month_are_refused_at_their_words(q, column, width):
    # query.yaml users_per_period: no source gives the share of a day's users served at once
    from kb.errors import QueryError

    with pytest.raises(QueryError) as err:
        parse(q, KN)
    assert (err.value.column, err.value.width) == (column, width), str(err.value)
    assert "at once" in str(err.value) and err.value.suggestion == "500 concurrent users"
