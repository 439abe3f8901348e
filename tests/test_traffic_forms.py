"""Traffic as people write it (issue 37): prompt and output lengths as 'N in / M out', a slashed
pair with or without its label and spaces ('2k/500', '2k / 500', 'ISL/OSL 4000/500'), next to users and a request
rate; 'in' and 'out' are lengths only right after a number, so deadlines ('in 24 hours', 'in a
week') read as before. The expected fields are the numbers typed ('2k' of a prompt is 2,048:
query.yaml units.prompt binary_k)."""

from __future__ import annotations

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
