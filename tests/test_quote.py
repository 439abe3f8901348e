"""The quote (kb.present.quote): `kbq --quote "…"` (Markdown) and `/quote?q=…` (HTML) from one Quote.

Reference values come from the rule files themselves (rules/prices.yaml read here with
yaml.safe_load, not through kb), and from the Answer the quote is built from.
"""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.parse
from html import unescape
from pathlib import Path

import pytest
import yaml

from kb import answer_in, get_knowledge
from kb.present.quote import build, markdown, to_quote
from advice_common import PRICE_H100

ROOT = Path(__file__).resolve().parent.parent
PRICES = {p["gpu"]: p for p in yaml.safe_load((ROOT / "rules" / "prices.yaml").read_text())["prices"]}
FITS = ["serve 70B int4 16 users", "train 13B qlora on 20GB?", "which gpu for 13B lora",
        "serve 7B fp16 on rtx 4090", "max users for 70B int4 on h200 at 32k context"]
# "full fine-tune 70B on 8x H100": even fully sharded (FSDP / ZeRO-3), mixed-precision AdamW keeps
# at least 2 B (BF16 weight) + 2 B (gradient) + 8 B (two FP32 moments) = 12 B per parameter
# (16 B with an FP32 master copy; Rajbhandari et al. 2020, "ZeRO", section 3.1), so
# 70e9 x 12 B = 840 GB over 8 cards = 105 GB per card > the H100's 80 GB, before any activation.
NO_FIT = ["serve 70B fp16 on rtx 4090", "full fine-tune 70B on 8x H100 for 20B tokens",
          "serve llama-3.1-70b awq 32 users 8k context on 2x L40S"]


def quoted(query: str):
    kn = get_knowledge()
    a, asked, wider = to_quote(answer_in(kn, query), kn, lambda q: answer_in(kn, q))
    return a, asked, build(a, kn, asked, wider)


@pytest.mark.parametrize("query", FITS)
def test_quote_recommends_the_answers_pick_with_its_dated_prices(query):
    a, asked, q = quoted(query)
    assert asked is None and q.change is None and q.query == query
    rec = a.recommendation
    c = q.recommended
    assert c is not None and c.fits
    if rec:
        assert (c.gpu_id, c.count) == (rec["pick"]["gpu_id"], rec["pick"]["count"])
    row = next(g for g in a.gpus if g.id == c.gpu_id and g.count == c.count)
    assert c.buy_usd == row.config_price_usd and c.rent_usd_per_hour == row.config_usd_per_hour
    entry = PRICES.get(c.gpu_id)
    if entry is not None:                    # the kind and date of the price, as prices.yaml says
        assert (c.buy_kind, c.buy_date) == (entry.get("purchase_kind"), str(entry.get("purchase_date")))
        assert [(r.provider, r.usd_per_hour, r.date) for r in c.rent] == [
            (x["provider"], x["usd_per_hour"], str(x["date"])) for x in entry.get("cloud") or []]
    assert len(q.alternatives) <= 2
    assert all(x.fits and x.gpu_id != c.gpu_id for x in q.alternatives)
    assert len({x.gpu_id for x in q.alternatives}) == len(q.alternatives)
    assert q.assumptions == a.assumptions[:len(q.assumptions)] and q.sources


def test_quote_of_a_question_with_runners_up_lists_two_alternatives():
    _, _, q = quoted("serve 70B int4 16 users")
    assert len(q.alternatives) == 2


def test_quote_of_a_named_gpu_offers_the_cards_picked_with_no_gpu_named():
    """A question on one named card has no other card in its answer: the alternatives are the
    pick and a runner-up of the same question with no GPU named."""
    kn = get_knowledge()
    _, _, q = quoted("serve 7B fp16 on rtx 4090")
    wider = answer_in(kn, "serve 7B fp16")
    assert len(q.alternatives) == 2
    assert q.alternatives[0].gpu_id == wider.recommendation["pick"]["gpu_id"]
    assert q.alternatives[0].role == "the pick with no GPU named"
    assert all(a.gpu_id != "rtx-4090" for a in q.alternatives)


@pytest.mark.parametrize("query", NO_FIT)
def test_quote_of_a_job_that_does_not_fit_quotes_the_first_change_that_does(query):
    kn = get_knowledge()
    asked = answer_in(kn, query)
    assert not any(g.fits for g in asked.gpus)
    a, original, q = quoted(query)
    assert original is not None and original.query == query
    first = next(o for o in original.options if o["fits"])
    assert q.change == first["change"] and q.quoted_query == first["query"] == a.query
    assert q.query == query and q.verdict == asked.verdict
    assert q.recommended is not None and q.recommended.fits


def test_quote_of_a_fleet_no_count_serves_quotes_it_as_asked():
    """A fleet no count serves (GLM-5.2 FP8 on H200 at 50 requests/s and 100 tok/s a user, above the
    fastest its widest replica decodes for one user) is quoted
    as asked, with its verdict (how close a replica comes), not as some one configuration's change
    (2-bit GGUF weights on 2x H200 at one user serve no such fleet)."""
    query = "how many h200 for glm-5.2 fp8 50 requests per second 2000 in / 500 out at 100 tok/s ttft under 2 s"
    a, original, q = quoted(query)
    assert original is None and a.query == query and q.change is None
    assert "The fastest a replica serves one user" in q.verdict and q.recommended is None


@pytest.mark.parametrize("query", FITS[:2] + NO_FIT[:1])
def test_markdown_quote_has_every_part(query):
    a, _, q = quoted(query)
    text = markdown(q)
    for heading in ("# Quote: ", "## Recommended configuration", "## Assumptions", "## Sources"):
        assert heading in text
    c = q.recommended
    assert f"**{c.count}× {c.gpu}**" in text
    if c.buy_usd is not None:
        assert f"${c.buy_usd:,.0f}" in text and (c.buy_date or "") in text
    for s in q.sources:
        assert s.id.replace("_", "\\_") in text
    assert len(text.splitlines()) <= 60          # one page


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kb.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_cli_quote_prints_the_markdown_quote():
    result = cli("--quote", "serve 70B int4 16 users")
    assert result.returncode == 0, result.stderr
    _, _, q = quoted("serve 70B int4 16 users")
    assert result.stdout == markdown(q)


def test_cli_quote_of_an_unreadable_question_exits_2():
    result = cli("--quote", "serve 70B on h10")
    assert result.returncode == 2 and "h100" in result.stderr and result.stdout == ""


def test_quote_option_is_in_help_and_readme():
    assert "--quote" in cli("--help").stdout
    assert "--quote" in (ROOT / "README.md").read_text().split("## CLI reference", 1)[1]


def test_quote_page_shows_the_same_quote(client):
    query = "serve 70B int4 16 users"
    body = unescape(client.get("/quote?q=" + urllib.parse.quote_plus(query)).get_data(as_text=True))
    _, _, q = quoted(query)
    assert q.verdict in body and f"{q.recommended.count}× {q.recommended.gpu}" in body
    for alt in q.alternatives:
        assert alt.gpu in body
    for s in q.sources:
        assert s.title in body
    assert 'href="/?q=serve+70B+int4+16+users"' in body        # back to the full answer
    assert re.search(r'<link rel="stylesheet" href="/static/quote.css">', body)


def test_answer_page_links_to_its_quote(client):
    body = client.get("/?q=" + urllib.parse.quote_plus("train 13B qlora on 20GB?")).get_data(as_text=True)
    assert 'href="/quote?q=train+13B+qlora+on+20GB%3F"' in body


def test_quote_page_errors_are_400(client):
    assert client.get("/quote").status_code == 400
    r = client.get("/quote?q=" + urllib.parse.quote_plus("serve 70B on h10"))
    assert r.status_code == 400 and "^^^" in r.get_data(as_text=True)


PRICE_FILE = 'as_of: "2026-11"\nprices:\n' + PRICE_H100     # advice_common: one H100, two cloud listings


def test_cli_quote_with_a_price_file_quotes_its_prices(tmp_path):
    """`kbq --quote --prices FILE`: the buy price, its kind and date, and the hourly price are the
    file's (the median of its two pages, $3.00), said to come from that file."""
    (tmp_path / "p.yaml").write_text(PRICE_FILE, encoding="utf-8")
    result = cli("--quote", "--prices", str(tmp_path / "p.yaml"), "serve 70b int4 on h100 sxm")
    assert result.returncode == 0, result.stderr
    rec = result.stdout.split("## Recommended configuration", 1)[1].split("##", 1)[0]
    assert "**1× NVIDIA H100 SXM5 80GB**" in rec
    # a module is bought in a server: the file's $20,000 and an 8-GPU HGX server's $77,000 beyond
    # its GPUs (Thinkmate's $317,000 HGX H100 quote less 8 × $30,000)
    assert "- Buy: $97,000: the GPUs $20,000 (list, 2026-10), the server it needs $77,000" in rec
    assert "- Rent: $3.00/h (from " in rec and "p.yaml" in rec
