"""Fleets of two or more cards for one traffic, side by side (kb.engine.advising.fleets): each card
sized as its own fleet, the cheaper to rent an hour first, the same on the CLI's JSON."""

from __future__ import annotations

import json
import subprocess

import pytest

import kb
from kb import get_knowledge
from kb.query.parse import parse

KN = get_knowledge()
TRAFFIC = "llama 3.1 70b fp8 500 users at 20 tok/s 2k in / 500 out ttft under 2 s"


def _alone(card: str) -> dict:
    """The card's own fleet, asked of it alone: the independent figure each side must equal."""
    r = kb.ask(f"how many {card} for {TRAFFIC}").replicas
    assert r is not None
    return r


@pytest.mark.parametrize("q", [f"how many h200 or b200 for {TRAFFIC}",
                               f"{TRAFFIC}: h200 or b200?",
                               f"how many h200 vs b200 for {TRAFFIC}"])
def test_each_card_is_its_own_fleet_and_the_cheaper_leads(q):
    assert parse(q, KN).question == "how_many_gpus"
    a = kb.ask(q)
    sides = {s["value"]: s for s in a.comparison or []}
    assert set(sides) == {"h200-sxm", "b200-sxm"}
    for card, gpu_id in (("h200", "h200-sxm"), ("b200", "b200-sxm")):
        alone, side = _alone(card), sides[gpu_id]["replicas"]
        assert side is not None and (side["gpus"], side["replicas"], side["layout"]) == \
            (alone["gpus"], alone["replicas"], alone["layout"])
        assert sides[gpu_id]["count"] == alone["gpus"]
    cheaper = min(sides.values(), key=lambda s: s["replicas"]["usd_per_hour"])
    assert a.replicas == cheaper["replicas"]                   # the answer is the cheaper fleet's
    assert a.verdict.startswith(f"{cheaper['gpu']} costs ")
    dearer = max(sides.values(), key=lambda s: s["replicas"]["usd_per_hour"])
    saved = 1 - cheaper["replicas"]["usd_per_hour"] / dearer["replicas"]["usd_per_hour"]
    assert f"{saved * 100:.0f}% less an hour" in a.verdict


def test_a_card_no_count_of_serves_is_said():
    # an L4 holds a 70B model only split over many, and a replica that large cannot reach 30 tok/s
    # a user with 2k prompts in under a second; four TP4 replicas of H100 do
    a = kb.ask("how many h100 or l4 for llama 3.1 70b fp8 500 users at 30 tok/s 2k in / 500 out ttft under 1 s")
    sides = {s["value"]: s for s in a.comparison or []}
    assert sides["l4"]["replicas"] is None and sides["l4"]["fits"] is False
    assert a.replicas == sides["h100-sxm5"]["replicas"] == _alone_as("h100", "30 tok/s 2k in / 500 out ttft under 1 s")
    assert a.verdict.endswith("No count of NVIDIA L4 24GB meets the targets.")


def _alone_as(card: str, rest: str) -> dict:
    return kb.ask(f"how many {card} for llama 3.1 70b fp8 500 users at {rest}").replicas


def test_the_cli_json_holds_every_side_with_its_plan():
    r = subprocess.run(["kbq", "--json", f"how many h200 or b200 for {TRAFFIC}"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["replicas"]["gpu_id"] in ("h200-sxm", "b200-sxm")
    assert [s["value"] for s in d["comparison"]] == ["h200-sxm", "b200-sxm"]
    assert all(s["replicas"]["gpus"] == s["count"] for s in d["comparison"])


def test_the_page_shows_each_fleet(client):
    from urllib.parse import quote

    html = client.get(f"/?q={quote(f'how many h200 or b200 for {TRAFFIC}')}").get_data(as_text=True)
    table = html[html.index("Fleets compared"):html.index("</table>", html.index("Fleets compared"))]
    for card in ("h200", "b200"):
        r = _alone(card)
        assert f"<td class=\"num\">{r['gpus']}</td><td>{r['replicas']} × TP{r['layout']['tp']}" in table


def test_at_most_the_rules_number_of_fleets_are_compared_and_the_rest_are_named():
    most = KN.query["fleets_compared"]["most"]
    cards = ["l40s", "h100", "h200", "b200", "mi300x"][:most + 1]
    a = kb.ask(f"how many {' or '.join(cards)} for llama 3.1 70b 500 users at 20 tok/s")
    assert len(a.comparison) == most
    assert any(x.startswith(f"fleets compared: the first {most} cards named") for x in a.assumptions)
