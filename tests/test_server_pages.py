"""The web pages: the knowledge pages (sources, rules, flows), the answer page in order, and query
errors shown on the page, escaped."""

from __future__ import annotations

import re
from html import escape, unescape

import pytest
from server_common import PROBES, QUERY, flow_ids, q

from kb import ask, get_knowledge
from kb.figures import num

# ---------------------------------------------------------------- the knowledge pages

def test_sources_page_anchors_every_source_and_lists_its_claims(client):
    body = unescape(client.get("/sources").get_data(as_text=True))
    kn = get_knowledge()
    for sid, source in kn.sources.items():
        assert f'id="{sid}"' in body and source["title"] in body
    for claim in kn.claims:
        at = body.index(f'id="claim-{claim.id}"')
        assert body.rindex('<article class="source" id="', 0, at) == body.index(f'<article class="source" id="{claim.source}"')
        assert claim.text in body


def test_rules_page_shows_every_formula(client):
    body = unescape(client.get("/rules").get_data(as_text=True))
    for f in get_knowledge().formulas.values():
        block = body[body.index(f'<article class="formula" id="{f.name}"'):]
        block = block[:block.index("</article>")]
        assert f"[{f.unit}]" in block and f.meaning in block
        for case in f.cases:
            assert case.expr.text in block
        for sid in f.sources:
            assert f'href="/sources#{sid}"' in block


@pytest.mark.parametrize("flow_id", flow_ids())
def test_flow_page_lists_every_node_and_condition(client, flow_id):
    flow = get_knowledge().flow(flow_id)
    body = unescape(client.get(f"/flows/{flow_id}").get_data(as_text=True))
    assert body.count("<g><title>") == len(flow.nodes)       # every node drawn
    for node in flow.nodes.values():
        assert f'id="n-{node.id}"' in body
        for edge in node.edges:
            assert (f"when <code>{edge.when.text}</code>" if edge.when else "otherwise") in body


def test_unknown_flow_is_404(client):
    r = client.get("/flows/nope")
    assert r.status_code == 404 and "sizing" in r.get_data(as_text=True)


# ---------------------------------------------------------------- the page

def test_page_shows_the_answer_in_order(client):
    body = client.get(f"/?q={q(QUERY)}").get_data(as_text=True)
    a = ask(QUERY)
    assert unescape(a.verdict) in unescape(body)
    order = [body.index(x) for x in ('class="verdict', 'class="figures key"', 'id="rec-h"',
                                      'id="gpus-h"', 'id="memory-h"', 'id="speed-h"',
                                      'id="assumptions-h"', 'id="worked-h"', '<details class="trace">',
                                      '<details class="flows">', '<details class="claims">')]
    assert order == sorted(order)                # the verdict, what to do, then the figures
    # how it was worked out: the trace, the flowcharts and the sources, each folded (issue 23)
    worked = body[body.index('id="worked-h"'):]
    assert worked.count("<svg") == body.count('class="chart flowchart"') > 0
    assert "<details open" not in body
    assert 'class="verdict fits"' in body                      # green: the first GPU fits
    shown = [s for s in a.trace if f'<a href="/rules#{s.rule_id}">' in body]
    assert shown
    assert 0 < body.count('<div class="lhs">') < len(a.trace)   # only what the figures read
    assert '<details class="trace">' in body                   # folded: closed, no JavaScript
    for step in shown:                   # the rule's place and each of its sources, as fields
        assert f'<p class="meta">{escape(step.location)} · source: ' in body
        for sid in step.sources:
            assert f'href="/sources#{sid}"' in body


def test_page_shows_the_measured_error_of_each_estimate(client):
    a = ask(QUERY).to_dict()
    bands = a.get("error_bands") or {}
    if not bands:
        pytest.skip("the rules carry no error bands")
    body = client.get(f"/?q={q(QUERY)}").get_data(as_text=True)
    for band in bands.values():
        assert f"±{num(band['median_pct'])} % typical, ±{num(band['p90_pct'])} % at p90 (n = {band['n']}" in body


def test_page_marks_a_job_that_does_not_fit(client):
    # 70B at int4 is ~35 GB of weights alone (70e9 × 4 bits); a 24 GB card cannot hold it
    body = client.get("/?q=" + q("serve 70B int4 on rtx 4090")).get_data(as_text=True)
    assert 'class="verdict nofit"' in body
    assert "Does not fit" in body


def test_page_of_a_fleet_no_count_serves(client):
    """A how-many question no count answers is headed as such, not 'it does not fit', and a fleet
    no count serves lists no single-configuration changes (a 2-bit format at one user does not
    serve 50 requests a second): its verdict says how close a replica comes instead."""
    body = client.get("/?q=" + q("how many l40s for deepseek-r1 2000 users 2000 in / 500 out at 66.7 tok/s "
                                 "ttft under 1 s")).get_data(as_text=True)
    assert "Verdict: no count meets the target" in body and "Verdict: it does not fit" not in body
    assert "The fastest a replica serves one user" in body
    assert "What to change so it fits" not in body
    body = client.get("/?q=" + q("serve 70B int4 on rtx 4090")).get_data(as_text=True)
    assert "Verdict: it does not fit" in body and "What to change so it fits" in body


def test_page_has_both_charts_with_text_alternatives(client):
    body = client.get(f"/?q={q(QUERY)}").get_data(as_text=True)
    svgs = re.findall(r"<svg\b.*?</svg>", body, re.DOTALL)
    assert len(svgs) >= 2 + 1                                  # memory, roofline, a flowchart
    for svg in svgs:
        assert 'role="img"' in svg
        labelled = re.search(r'aria-labelledby="([^"]+)"', svg).group(1).split()
        for ident in labelled:
            assert f'id="{ident}"' in svg
        assert re.search(r"<title id=\"[^\"]+\">[^<]+</title>", svg)
    titles = [re.search(r"<title[^>]*>([^<]*)</title>", s).group(1) for s in svgs]
    assert any(t.startswith("Memory per GPU") for t in titles)
    assert any(t.startswith("Roofline of") for t in titles)
    figures = re.findall(r"<figure\b.*?</figure>", body, re.DOTALL)
    assert sum(f.count("<svg") for f in figures) == len(svgs)  # every chart is in a figure
    assert all("<figcaption>" in f for f in figures)           # with its caption
    # the memory bar and the roofline come twice: as wide as a desktop, and at a phone's width
    assert [t.startswith("Memory per GPU") for t in titles].count(True) == 2
    assert [t.startswith("Roofline of") for t in titles].count(True) == 2
    assert "<caption>Memory by part" in body                   # the memory bar's numbers as a table
    assert "<caption>Arithmetic intensity of each phase" in body


def test_page_lists_sources_disagreeing(client):
    # 7B FP16: seed 000's bound is bandwidth ÷ weights at 100%; kbq's estimate is lower, so
    # the answer lists a disagreement with that source's note
    a = ask("infer 7B fp16 on rtx 4000 ada vs rtx 6000 ada").to_dict()
    assert a["disagreements"]
    body = client.get("/?q=" + q(a["query"])).get_data(as_text=True)
    assert "Where they disagree" in body
    for d in a["disagreements"]:
        assert d["note"] in unescape(body)


@pytest.mark.parametrize("query", sorted({c.example_query for c in get_knowledge().claims} | {
    "max users for 70B int4 on h200 at 32k context", "largest model for 24GB int4",
    "how many h100 for 405B fp16", "max context for 8B fp16 on rtx 4090"}))
def test_every_example_query_renders(client, query):
    # each claim's example and each kind of question: the page and the embed draw without error
    for url in ("/?q=", "/embed?q="):
        r = client.get(url + q(query))
        assert r.status_code == 200, (url, query)
        assert 'class="verdict' in r.get_data(as_text=True)


def test_blank_query_shows_the_form(client):
    r = client.get("/?q=+")
    assert r.status_code == 200
    assert 'class="verdict' not in r.get_data(as_text=True)


def test_examples_are_links_that_answer(client):
    body = client.get("/").get_data(as_text=True)
    links = re.findall(r'<li><a href="(/\?q=[^"]+)">', body)
    assert len(links) >= 5
    for link in links:
        assert client.get(unescape(link)).status_code == 200, link


def test_training_page_shows_training_speed(client):
    body = client.get("/?q=" + q("full fine-tune 7B on 8x H100 fsdp for 20B tokens")).get_data(as_text=True)
    assert '<th scope="col" class="num key">train tok/s</th>' in body    # the asked-for figure first
    assert "decode tok/s per user" not in body and "decode per user" not in body


def test_training_that_does_not_fit_shows_memory_not_speed(client):
    # under plain DDP (asked for) every rank holds 7B × 16 bytes of weights, gradients and Adam
    # state (112 GB) — more than an 80 GB H100 — so there is no speed to show, and no inference tiles
    body = client.get("/?q=" + q("full fine-tune 7B on 8x H100 ddp for 20B tokens")).get_data(as_text=True)
    assert 'class="verdict nofit"' in body
    assert '<th scope="col" class="num key">needs GB/GPU</th>' in body
    assert "train tok/s" not in body and "decode per user" not in body and "prefill tok/s" not in body
    assert "No speed figures" in body


def test_capacity_only_gpu_has_no_roofline(client):
    # "20GB" names memory only: no bandwidth, no compute, so nothing to draw
    body = client.get("/?q=" + q("train 13B qlora on 20GB?")).get_data(as_text=True)
    assert "No roofline" in body
    assert "Roofline of" not in body


# ---------------------------------------------------------------- query errors on the page

def test_query_error_shows_caret_and_suggestion(client):
    query = "serve 70B on h10"
    r = client.get("/?q=" + q(query))
    assert r.status_code == 400
    body = r.get_data(as_text=True)
    pre = re.search(r"<pre>(.*?)</pre>", body, re.DOTALL).group(1)
    lines = pre.splitlines()
    column = query.index("h10") + 1                            # 1-based, counted by hand: 14
    assert f"column {column}" in lines[0]
    assert lines[2].index("^") - lines[1].index("s") == column - 1   # the caret under the word
    fixed = "/?q=" + q("serve 70B on h100")
    assert f'href="{fixed}"' in body.replace("&amp;", "&")
    assert client.get(fixed).status_code == 200


def test_overlong_query_is_rejected(client):
    r = client.get("/?q=" + "7B " * 200)
    assert r.status_code == 400
    assert "longer than 500" in r.get_data(as_text=True)


@pytest.mark.parametrize("probe", PROBES)
def test_page_escapes_what_the_user_typed(client, probe):
    r = client.get("/?q=" + q(probe))
    assert r.status_code == 400
    body = r.get_data(as_text=True)
    assert probe not in body
    assert "<img" not in body and "<script" not in body
    assert unescape(re.search(r'<input id="q" name="q" type="search" value="([^"]*)"', body).group(1)) == probe


@pytest.mark.parametrize("probe", PROBES)
def test_embed_escapes_what_the_user_typed(client, probe):
    r = client.get("/embed?q=" + q(probe))
    assert r.status_code == 400
    body = r.get_data(as_text=True)
    assert "<img" not in body and "<script" not in body
    assert unescape(re.search(r"<h1>.*?</a>: (.*?)</h1>", body).group(1)) == probe


@pytest.mark.parametrize("probe", PROBES)
def test_api_error_escapes_what_the_user_typed(client, probe):
    r = client.get("/api/answer?q=" + q(probe))
    assert r.status_code == 400
    raw = r.get_data(as_text=True)
    assert "<" not in raw and ">" not in raw                   # written as \u003c, \u003e
    assert r.get_json()["error"]["query"] == probe             # and decodes to what was sent
