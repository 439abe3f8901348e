"""The capacity searches stop at a budget of probes and say what they did not finish.

"how many gpus for llama-3.1-70b" names no card, so it is searched on every catalogue card the
runtime runs on (kb.engine.run, one row per card, each search several probes). A budget of a
few probes cannot cover dozens of cards: the first card is searched, the rest are not, and the
answer says how many were left. The budget counts probes, not seconds, so the same question
under the same budget gives the same bytes and the server may keep that answer.
"""

from __future__ import annotations

import json
import urllib.parse

from kb import ask
from kb.engine.search.budget import within

QUERY = "how many gpus for llama-3.1-70b"


def _searched(a) -> int:
    return len(a.question["per_gpu"])


def test_without_a_budget_every_card_is_searched():
    a = ask(QUERY)
    assert _searched(a) > 20                    # the catalogue: dozens of cards
    assert not any("were not searched" in w for w in a.warnings)


def test_a_probe_budget_stops_the_search_and_says_so():
    full = _searched(ask(QUERY))
    with within(None, 10) as budget:
        a = ask(QUERY)
    assert budget is not None and budget.stopped and not budget.cut   # the count, not the clock
    assert 1 <= _searched(a) < full
    said = [w for w in a.warnings if "were not searched" in w]
    assert said == [f"{full - _searched(a)} of the {full} GPUs were not searched: this answer's "
                    f"search budget (10 probes of the forward model) ran out "
                    f"(the answer is the best of the {_searched(a)} searched)"]
    assert a.question["value"] is not None or not a.question["answer"]["found"]


def test_the_same_budget_gives_the_same_answer():
    answers = []
    for _ in range(3):
        with within(None, 25):
            answers.append(json.dumps(ask(QUERY).to_dict(), sort_keys=True, default=str))
    assert answers[0] == answers[1] == answers[2]


def test_options_stop_at_the_probe_budget():
    """A capacity question that does not fit searches once more for each change that might make
    it fit (kb.engine.advising.options); with the budget spent by the question's own search, they are not
    tried, and the answer says so. Llama 3.1 405B at fp16 is 810 GB of weights alone (405e9 x 2 B),
    so no context fits on one 24 GB RTX 4090."""
    query = "max context for llama-3.1-405b fp16 on rtx 4090"
    with within(None, 1):
        a = ask(query)
    assert any("kinds of change were not tried" in w and "search budget (1 probes" in w for w in a.warnings)


def test_the_server_keeps_an_answer_its_probe_budget_cut(tmp_path):
    from server import create_app

    app = create_app({"KBQ_SEARCH_PROBES": 10, "KBQ_CACHE_MB": 8})
    client = app.test_client()
    url = "/api/answer?q=" + urllib.parse.quote_plus(QUERY)
    first = client.get(url)
    assert first.status_code == 200
    assert b"were not searched" in first.data
    assert app.extensions["kbq"].cache.stats()["entries"] == 1      # the same every time: kept
    assert client.get(url).data == first.data
