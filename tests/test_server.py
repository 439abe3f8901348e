"""The web surface: pages, JSON API, charts, security headers, live rules, and a real `kbq serve`."""

from __future__ import annotations

import datetime
import decimal
import json
import math
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from html import escape, unescape
from itertools import pairwise

import pytest

from kb import ask, get_knowledge
from kb.knowledge.build import Edge, Flow, Node
from kb.paths import rules_dir
from kb.figures import num
from server import charts, charts_roofline, create_app

QUERY = "serve 70B int4 16 users"
PROBES = ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>']


def q(query: str) -> str:
    return urllib.parse.quote_plus(query)


def flow_ids() -> list[str]:
    return [f.id for f in get_knowledge().flows]


# Every route a person or a script reaches, with what it must contain. A test below fails when
# the app gains a route this list does not cover.
PAGES = [
    ("/", "text/html", "Your question"),
    (f"/?q={q(QUERY)}", "text/html", "Verdict"),
    (f"/embed?q={q(QUERY)}", "text/html", "Verdict"),
    (f"/quote?q={q(QUERY)}", "text/html", "Recommended configuration"),
    ("/gpus", "text/html", "H100"),
    ("/models", "text/html", "Llama"),
    ("/rules", "text/html", "total_gb"),
    ("/flows", "text/html", "/flows/sizing"),
    *[(f"/flows/{fid}", "text/html", 'id="n-') for fid in flow_ids()],
    ("/sources", "text/html", "Claims checked"),
    ("/static/kbq.css", "text/css", "max-width"),
    (f"/api/answer?q={q(QUERY)}", "application/json", '"verdict"'),
    ("/api/gpus", "application/json", '"vram_gb"'),
    ("/api/models", "application/json", '"head_dim"'),
    ("/api/health", "application/json", '"loaded_at"'),
    ("/api/openapi.json", "application/json", '"openapi"'),
]


# ---------------------------------------------------------------- every route

@pytest.mark.parametrize("url, ctype, needle", PAGES)
def test_route(client, url, ctype, needle):
    with client.get(url) as r:              # closes the file behind a static response
        assert r.status_code == 200, r.data[:500]
        assert r.mimetype == ctype
        assert needle in r.get_data(as_text=True)


def test_every_route_is_covered(app):
    tested = {urllib.parse.urlsplit(url).path for url, _, _ in PAGES}
    for rule in app.url_map.iter_rules():
        path = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: {"flow_id": "sizing", "filename": "kbq.css"}[m.group(1)],
                      rule.rule)
        assert path in tested, f"no test fetches {rule.rule}"
    post = {r.rule for r in app.url_map.iter_rules() if "POST" in r.methods}
    assert post == {"/api/answer"}


HTML_PAGES = [url for url, ctype, _ in PAGES if ctype == "text/html"]


@pytest.mark.parametrize("url", HTML_PAGES)
def test_pages_need_no_inline_script_or_style(client, url):
    # the Content-Security-Policy forbids both, so a page that used them would break
    body = client.get(url).get_data(as_text=True)
    assert "<script" not in body
    assert not re.search(r"\sstyle\s*=", body)
    assert not re.search(r"\son[a-z]+\s*=", body)


@pytest.mark.parametrize("url", HTML_PAGES)
def test_nothing_is_loaded_from_another_host(client, url):
    body = client.get(url).get_data(as_text=True)
    loads = re.findall(r'\ssrc="([^"]*)"', body) + re.findall(r'<link\b[^>]*\shref="([^"]*)"', body)
    assert loads
    for target in loads:
        assert target.startswith("/") and not target.startswith("//") or target == "data:,", target


@pytest.mark.parametrize("url", HTML_PAGES)
def test_headings_in_order(client, url):
    levels = [int(h) for h in re.findall(r"<h([1-6])[\s>]", client.get(url).get_data(as_text=True))]
    assert levels and levels[0] == 1 and levels.count(1) == 1
    for before, after in pairwise(levels):
        assert after <= before + 1, f"h{before} followed by h{after} on {url}"


@pytest.mark.parametrize("url", HTML_PAGES)
def test_ids_are_unique(client, url):
    ids = re.findall(r'\sid="([^"]+)"', client.get(url).get_data(as_text=True))
    assert len(ids) == len(set(ids)), sorted(i for i in set(ids) if ids.count(i) > 1)


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


# ---------------------------------------------------------------- /embed

def test_embed_is_a_standalone_fragment(client):
    r = client.get(f"/embed?q={q(QUERY)}")
    body = r.get_data(as_text=True)
    assert r.status_code == 200
    assert 'class="site"' not in body                          # no site header or footer
    assert "Memory per GPU" in body and 'class="data gpus' in body and 'class="trace"' in body
    assert len(re.findall(r"<svg\b", body)) == 2              # the memory bar, wide and narrow


def test_embed_without_query(client):
    assert client.get("/embed").status_code == 400


def csp(response) -> dict[str, str]:
    parts = (d.strip().split(None, 1) for d in response.headers["Content-Security-Policy"].split(";"))
    return {p[0]: p[1] if len(p) > 1 else "" for p in parts if p}


def test_framing(client):
    assert csp(client.get("/"))["frame-ancestors"] == "'none'"
    assert client.get("/").headers["X-Frame-Options"] == "DENY"
    embed = client.get(f"/embed?q={q(QUERY)}")
    assert csp(embed)["frame-ancestors"] == "'self'"
    assert "X-Frame-Options" not in embed.headers


def test_framing_for_configured_origins():
    app = create_app({"KBQ_EMBED_ORIGINS": ["https://wiki.example.com", "http://localhost:8090"]})
    c = app.test_client()
    embed = csp(c.get(f"/embed?q={q(QUERY)}"))
    assert embed["frame-ancestors"] == "'self' https://wiki.example.com http://localhost:8090"
    assert csp(c.get("/gpus"))["frame-ancestors"] == "'none'"


@pytest.mark.parametrize("origins", [["https://x.example; script-src *"], "https://x.example", ["*"]])
def test_bad_embed_origins_are_refused(origins):
    with pytest.raises((ValueError, TypeError)):
        create_app({"KBQ_EMBED_ORIGINS": origins})


# ---------------------------------------------------------------- security headers

HEADER_URLS = [*(url for url, _, _ in PAGES), "/nope", "/api/nope", "/?q=" + q("serve 70B qlroa"),
               "/api/answer"]


@pytest.mark.parametrize("url", HEADER_URLS)
def test_security_headers_on_every_response(client, url):
    with client.get(url) as r:
        headers = r.headers
    csp = headers["Content-Security-Policy"]
    for directive in ("default-src 'self'", "script-src 'self'", "style-src 'self'",
                      "img-src 'self' data:", "base-uri 'none'", "form-action 'self'", "frame-ancestors"):
        assert directive in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "no-referrer"


def test_security_headers_on_error_responses(client):
    for r in (client.post("/api/answer", data="x" * (65 * 1024), content_type="application/json"),
              client.delete("/api/answer")):
        assert r.headers["X-Content-Type-Options"] == "nosniff"
        assert "Content-Security-Policy" in r.headers


def test_debug_is_off_and_internal_errors_say_nothing(app, monkeypatch):
    assert app.debug is False

    def boom(*args, **kwargs):
        raise RuntimeError("secret detail")

    monkeypatch.setattr("kb.engine.answer", boom)
    c = app.test_client()
    page = c.get(f"/?q={q(QUERY)}")
    assert page.status_code == 500
    assert "secret detail" not in page.get_data(as_text=True)
    assert "Traceback" not in page.get_data(as_text=True)
    api = c.get(f"/api/answer?q={q(QUERY)}")
    assert api.status_code == 500
    assert api.get_json() == {"error": {"message": "internal error", "column": None, "suggestion": None}}


# ---------------------------------------------------------------- JSON API

def test_api_answer_is_the_cli_json(client, tmp_path):
    kbq = shutil.which("kbq")
    if kbq is None:
        pytest.skip("the kbq console script is not installed")
    cli = subprocess.run([kbq, "--json", QUERY], capture_output=True, text=True, cwd=tmp_path,
                         timeout=120, check=False)
    assert cli.returncode == 0, cli.stderr
    assert client.get(f"/api/answer?q={q(QUERY)}").get_json() == json.loads(cli.stdout)


def test_api_lists_options_when_the_gpu_asked_about_is_too_small_like_the_cli(client):
    # 70B in 16 bits is about 140 GB of weights alone; an RTX 4090 holds 24 GB
    query = "can I run llama 3 70B on a 4090"
    got = client.get(f"/api/answer?q={q(query)}").get_json()
    assert not got["gpus"][0]["fits"] and got["options"]
    assert got == ask(query).to_dict()


@pytest.mark.parametrize("query", ["serve 70B int4 16 users on rtx 4090", "can I run llama 3 70B on a 4090",
                                   "train llama-2-7b paged on 12GB"])
def test_an_option_without_a_price_says_na_not_na_per_unit(client, query):
    # an option on a card nobody rents has no $/M tok (and a run without a price no cost: QLoRA on
    # a bare 12 GB; a 13B QLoRA on 8 GB has no usable next card since the training stack's
    # supported platforms rank cards, so it no longer serves here):
    # the options table says "n/a", never "n/a/M tok"
    page = client.get(f"/?q={q(query)}").get_data(as_text=True)
    assert "What to change" in page
    assert "n/a/M tok" not in page and "n/a/run" not in page


@pytest.mark.parametrize("query", ["serve 70B int4 16 users", "train 13B qlora on 20GB",
                                   "serve 70B int4 on h100 sxm"])
def test_what_to_change_only_when_it_does_not_fit(client, query):
    """A job that fits (and meets any target) lists no changes on the page (issue 23, item 4)."""
    a = ask(query)
    assert a.gpus[0].fits and a.gpus[0].meets_target is not False
    assert "What to change" not in client.get(f"/?q={q(query)}").get_data(as_text=True)


def test_api_answer_keeps_the_contract_key_order(client):
    got = client.get(f"/api/answer?q={q(QUERY)}").get_data(as_text=True)
    assert list(json.loads(got)) == list(ask(QUERY).to_dict())


def test_api_post_equals_get(client):
    got = client.get(f"/api/answer?q={q(QUERY)}").get_json()
    posted = client.post("/api/answer", json={"q": QUERY})
    assert posted.status_code == 200
    assert posted.get_json() == got


def test_api_answer_validates_against_the_answer_model(client):
    from server.api import answer_model

    answer_model().validate_python(client.get(f"/api/answer?q={q(QUERY)}").get_json())


ERROR_CASES = [
    ("get", "/api/answer", {}, 400, "missing query parameter"),
    ("get", "/api/answer?q=" + q("serve 70B on h10"), {}, 400, "unknown word"),
    ("get", "/api/answer?q=" + "x" * 501, {}, 400, "longer than 500"),
    ("get", "/api/answer?q=", {}, 400, "empty"),
    ("post", "/api/answer", {"data": "{not json", "content_type": "application/json"}, 400, "not valid JSON"),
    ("post", "/api/answer", {"data": "q=serve", "content_type": "application/x-www-form-urlencoded"}, 400,
     "Content-Type: application/json"),
    ("post", "/api/answer", {"json": ["serve 70B"]}, 400, "'q' field"),
    ("post", "/api/answer", {"json": {"query": QUERY}}, 400, "'q' field"),
    ("post", "/api/answer", {"json": {"q": 70}}, 400, "as a string"),
    ("get", "/api/nope", {}, 404, "not found"),
    ("get", "/api", {}, 404, "not found"),
    ("delete", "/api/answer", {}, 405, "not allowed"),
    ("post", "/api/gpus", {"json": {}}, 405, "not allowed"),
    ("post", "/api/answer", {"data": "x" * (64 * 1024 + 1), "content_type": "application/json"}, 413,
     "larger than 64 KiB"),
]


@pytest.mark.parametrize("method, url, kwargs, status, words", ERROR_CASES)
def test_api_errors_have_one_shape(client, method, url, kwargs, status, words):
    r = getattr(client, method)(url, **kwargs)
    assert r.status_code == status
    assert r.mimetype == "application/json"
    body = r.get_json()
    assert set(body) == {"error"}
    assert {"message", "column", "suggestion"} <= set(body["error"])
    assert words.lower() in body["error"]["message"].lower()


def test_api_query_error_has_column_and_suggestion(client):
    query = "serve 70B int4 on h10"
    err = client.get("/api/answer?q=" + q(query)).get_json()["error"]
    assert err["column"] == query.index("h10") + 1             # where the unknown word starts
    assert err["suggestion"].lower() == "h100"
    assert "^^^" in err["text"]


JSON_VALUES = [
    {"text": "<script>&</script>", "é": "→ ≤ 漢"},
    {"nan": float("nan"), "inf": [float("inf"), -float("inf")], "tuple": (1.5, 2)},
    {"beyond_64_bits": 2**70, "nan": float("nan")},        # orjson refuses: the fallback writes it
    {"surrogate": "\ud800<"},                               # orjson refuses
    {1: "an int key", "b": None},                          # orjson refuses
    {"date": datetime.date(2024, 5, 1), "uuid": uuid.UUID(int=5), "decimal": decimal.Decimal("1.25")},
    [1, True, None, 0.1, 1e300, -0.0, "x" * 10],
]


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


@pytest.mark.parametrize("value", JSON_VALUES, ids=range(len(JSON_VALUES)))
def test_api_json_bodies_decode_to_what_the_standard_library_writes(app, value):
    # the bodies are written by orjson (or the standard library where orjson refuses): the same
    # values as json.dumps with Flask's defaults, NaN and infinity as null, and inert as HTML
    with app.app_context():
        body = app.json.response(value).get_data()
        reference = json.loads(json.dumps(value, default=app.json.default))
    assert body.endswith(b"\n")
    assert json.loads(body) == _finite(reference)
    assert not re.search(rb"[<>&]|NaN|Infinity", body)


def test_api_answer_body_is_the_answer_dict(client):
    body = client.get(f"/api/answer?q={q(QUERY)}").get_data()
    assert json.loads(body) == ask(QUERY).to_dict()
    assert not re.search(rb"[<>&]|NaN|Infinity", body)


def test_api_error_with_a_lone_surrogate_is_valid_json(client):
    r = client.post("/api/answer", data='{"q": "serve 70B \\ud800<x"}', content_type="application/json")
    assert r.status_code == 400
    assert b"<" not in r.get_data()
    assert json.loads(r.get_data())["error"]["query"] == "serve 70B \ud800<x"


def test_api_body_just_under_the_limit_is_read(client):
    body = json.dumps({"q": QUERY, "pad": "x" * (60 * 1024)})
    assert client.post("/api/answer", data=body, content_type="application/json").status_code == 200


def test_api_catalogues_match_the_rules(client):
    kn = get_knowledge()
    assert [g["id"] for g in client.get("/api/gpus").get_json()] == list(kn.gpus)
    assert [m["id"] for m in client.get("/api/models").get_json()] == list(kn.models)


def test_api_health(client):
    body = client.get("/api/health").get_json()
    assert body["status"] == "ok"
    assert body["rules"]["errors"] == [] and body["warnings"] == []
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", body["rules"]["loaded_at"])
    assert body["process"] == os.getpid()     # which `kbq serve` process answered


def test_openapi_describes_every_api_route(app, client):
    doc = client.get("/api/openapi.json").get_json()
    assert doc["openapi"].startswith("3.1")
    methods: dict[str, set[str]] = {}
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith("/api/"):
            methods.setdefault(rule.rule, set()).update(m.lower() for m in rule.methods - {"HEAD", "OPTIONS"})
    assert methods == {path: set(ops) for path, ops in doc["paths"].items()}
    schemas = doc["components"]["schemas"]
    assert "Answer" in schemas and "Error" in schemas
    refs = set(re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', json.dumps(doc)))
    assert refs <= set(schemas)
    assert set(schemas["Answer"]["required"]) >= {"query", "verdict", "memory", "gpus", "trace"}


def test_openapi_is_valid():
    validator = pytest.importorskip("openapi_spec_validator")
    from server.api import openapi_document

    validator.validate(openapi_document())


# ---------------------------------------------------------------- charts

def test_roofline_ridge_point_is_peak_over_bandwidth(client):
    # Williams et al. 2009: the ridge point is peak FLOP/s ÷ memory bandwidth (FLOP per byte).
    gpu = next(g for g in client.get("/api/gpus").get_json() if g["id"] == "h100-sxm5")
    ridge = gpu["tensor_tflops"]["fp16"] * 1e12 / (gpu["bandwidth_gb_s"] * 1e9)
    a = ask("infer 7B fp16 on h100 sxm5")
    assert a.bottleneck["ridge_point"] == pytest.approx(ridge, rel=1e-4)
    svg = charts_roofline.roofline(a)
    assert f"ridge point {num(ridge)} FLOP/B" in svg
    for phase, ai in a.bottleneck["arithmetic_intensity"].items():
        assert f"{phase} {num(ai)} FLOP/B: {a.bottleneck[phase]}" in svg


def test_roofline_points_sit_on_the_roof():
    a = ask("infer 7B fp16 on h100 sxm5")
    svg = charts_roofline.roofline(a)
    roof = re.search(r'<polyline points="([^"]+)"', svg).group(1).split()
    (x0, y0), (xr, yr), (_, y1) = [tuple(map(float, p.split(","))) for p in roof]
    assert yr == y1                                            # flat compute ceiling
    for cx, cy in re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)" r="7"', svg):
        cx, cy = float(cx), float(cy)
        if cx <= xr:                                           # on the bandwidth slope
            assert cy == pytest.approx(y0 + (yr - y0) * (cx - x0) / (xr - x0), abs=0.2)
        else:
            assert cy == pytest.approx(yr, abs=0.1)


def test_memory_bar_splits_the_job_over_the_gpus():
    # 7B at bf16 is 7e9 × 2 bytes = 14 GB of weights; fully sharded over 8 GPUs, 1.75 GB each,
    # plus the two whole layers (of 32) a rank gathers to run: 2 × 14 / 32 = 0.875 GB
    a = ask("full fine-tune 7B on 8x H100 with fsdp for 20B tokens")
    row = a.gpus[0]
    parts = charts.per_gpu_parts(a.memory["breakdown"], row)
    assert parts["weights_gb"] == pytest.approx(7e9 * 2 / 1e9 / 8 + 2 * 7e9 * 2 / 1e9 / 32)
    assert sum(parts.values()) == pytest.approx(row.per_gpu_gb, rel=1e-5)


def test_memory_bar_draws_top_gpus_against_their_capacity():
    a = ask(QUERY)
    svg = charts.memory_bar(a)
    rows = a.gpus[:8]
    assert svg.count("GB per GPU of") == len(rows)
    for g in rows:
        assert f"{num(g.per_gpu_gb)} / {num(g.usable_vram_gb)} GB" in svg


def test_flow_chart_marks_the_walked_path():
    a = ask(QUERY)
    kn = get_knowledge()
    for flow in kn.flows:
        nodes = [p.split("/", 1)[1] for p in a.path if p.startswith(flow.id + "/")]
        svg = charts.flow_chart(flow, a.path)
        assert svg.count('stroke="#1d4ed8" stroke-width="2.5"/>') + \
            svg.count('stroke="#1d4ed8" stroke-width="2.5" stroke-dasharray') == len(nodes)
        assert svg.count(f'marker-end="url(#flow-{flow.id}-arrow-on)"') == len(nodes) - 1
        assert svg.count("<g><title>") == len(flow.nodes)


def test_flow_chart_draws_every_flow_edge_downwards():
    """Each node's box in the SVG (its <title> and the top y of its <rect>): every edge of the
    flow goes from a higher box to a lower one, and every node is drawn once."""
    box = re.compile(r'<g><title>(\w+) \((\w+)\): [^<]*</title><rect x="[^"]+" y="([0-9.]+)"')
    for flow in get_knowledge().flows:
        top = {m.group(1): float(m.group(3)) for m in box.finditer(charts.flow_chart(flow))}
        assert sorted(top) == sorted(flow.nodes), flow.id
        for node in flow.nodes.values():
            for e in node.edges:
                assert top[node.id] < top[e.to], (flow.id, node.id, e.to)


def test_charts_escape_text():
    evil = '<script>alert(1)</script>"'
    flow = Flow(id="f", title=evil, role="advice", order=0, source="s", entry="a", where="x",
                ranking=[], nodes={
                    "a": Node("a", "question", evil, (), (Edge("b", None, evil),), None, "x"),
                    "b": Node("b", "verdict", evil, (), (), None, "x")})
    svg = charts.flow_chart(flow, ["f/a", "f/b"])
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    a = ask(QUERY)
    a.gpus[0].name = evil
    a.bottleneck["gpu"] = evil
    for out in (charts.memory_bar(a), charts_roofline.roofline(a)):
        assert "<script>" not in out and "&lt;script&gt;" in out


# ---------------------------------------------------------------- live rules

@pytest.fixture
def rules_copy(tmp_path):
    root = tmp_path / "rules"
    shutil.copytree(rules_dir(), root)
    return root


def _rename_gpu(root, gpu_id, new_name):
    path = root / "gpus.yaml"
    text = path.read_text(encoding="utf-8")
    name = get_knowledge().gpus[gpu_id]["name"]
    start = text.index(f"id: {gpu_id}")
    at = text.index(name, start)
    path.write_text(text[:at] + new_name + text[at + len(name):], encoding="utf-8")


def test_live_rules_rebuild_after_an_edit(rules_copy):
    app = create_app({"KBQ_RULES": str(rules_copy), "KBQ_RELOAD_SECONDS": 0})
    c = app.test_client()
    url = "/api/answer?q=" + q("serve 7B fp16 on rtx 4090")
    assert c.get(url).get_json()["gpus"][0]["name"] == get_knowledge().gpus["rtx-4090"]["name"]
    _rename_gpu(rules_copy, "rtx-4090", "Edited RTX 4090")
    c.get("/api/health")                     # notices the edit; the rebuild runs in the background
    app.extensions["kbq"].settle()
    assert c.get(url).get_json()["gpus"][0]["name"] == "Edited RTX 4090"
    assert "Edited RTX 4090" in c.get("/?q=" + q("serve 7B fp16 on rtx 4090")).get_data(as_text=True)


def test_live_rules_keep_the_last_good_knowledge(rules_copy):
    app = create_app({"KBQ_RULES": str(rules_copy), "KBQ_RELOAD_SECONDS": 0})
    c = app.test_client()
    _rename_gpu(rules_copy, "rtx-4090", "Edited RTX 4090")
    url = "/api/answer?q=" + q("serve 7B fp16 on rtx 4090")
    live = app.extensions["kbq"]
    c.get("/api/health")
    live.settle()
    assert c.get(url).status_code == 200
    path = rules_copy / "formulas.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("expr: model_state_gb + kv_cache_gb",
                                                             "expr: model_state_gbb + kv_cache_gb", 1),
                    encoding="utf-8")
    r = c.get(url)
    live.settle()
    assert r.status_code == 200                                # still answering…
    assert r.get_json()["gpus"][0]["name"] == "Edited RTX 4090"   # …from the last good files
    health = c.get("/api/health").get_json()
    assert health["status"] == "degraded"
    assert any("formulas.yaml" in w and "model_state_gbb" in w for w in health["warnings"])
    assert health["rules"]["errors"][0]["file"].endswith("formulas.yaml")
    page = c.get("/rules").get_data(as_text=True)
    assert "The rule files have errors" in page and "model_state_gbb" in page
    for other in ("/", "/gpus", "/?q=" + q("serve 7B"), "/embed?q=" + q("serve 7B")):   # a banner on every page
        banner = c.get(other).get_data(as_text=True)
        assert "serving the last good knowledge" in banner and "formulas.yaml:" in banner, other
    path.write_text(path.read_text(encoding="utf-8").replace("model_state_gbb", "model_state_gb"),
                    encoding="utf-8")
    c.get("/api/health")
    live.settle()
    health = c.get("/api/health").get_json()
    assert health["warnings"] == [] and health["status"] == "ok"
    assert "serving the last good knowledge" not in c.get("/gpus").get_data(as_text=True)


def test_live_rules_are_checked_at_most_once_per_interval(rules_copy, monkeypatch):
    from server import live

    clock = [1000.0]
    monkeypatch.setattr(live.time, "monotonic", lambda: clock[0])
    app = create_app({"KBQ_RULES": str(rules_copy)})
    c = app.test_client()
    url = "/api/answer?q=" + q("serve 7B fp16 on rtx 4090")
    before = c.get(url).get_json()["gpus"][0]["name"]
    _rename_gpu(rules_copy, "rtx-4090", "Edited RTX 4090")
    clock[0] += 0.5
    assert c.get(url).get_json()["gpus"][0]["name"] == before  # not looked at yet
    clock[0] += 0.6
    c.get(url)
    app.extensions["kbq"].settle()
    assert c.get(url).get_json()["gpus"][0]["name"] == "Edited RTX 4090"


def test_rules_that_never_validated(tmp_path):
    (tmp_path / "gpus.yaml").write_text("gpus: [\n", encoding="utf-8")
    app = create_app({"KBQ_RULES": str(tmp_path), "KBQ_RELOAD_SECONDS": 0})
    c = app.test_client()
    health = c.get("/api/health")
    assert health.status_code == 503 and health.get_json()["status"] == "error"
    r = c.get("/api/answer?q=" + q(QUERY))
    assert r.status_code == 503 and "error" in r.get_json()
    assert c.get("/?q=" + q(QUERY)).status_code == 503


def test_shipped_rules_that_do_not_validate(monkeypatch):
    # a rule error is the server's problem, not the question's: 503 with the error, never a 400
    import kb
    from kb.errors import RuleError, RuleErrors

    def broken(rules_dir=None):
        raise RuleErrors([RuleError("rules/gpus.yaml", 3, 5, "unknown key 'vram'")])

    monkeypatch.setattr(kb, "get_knowledge", broken)
    c = create_app().test_client()
    page = c.get("/?q=" + q(QUERY))
    assert page.status_code == 503
    assert "rules/gpus.yaml:3:5: unknown key &#39;vram&#39;" in page.get_data(as_text=True)
    assert "cannot read that question" not in page.get_data(as_text=True)
    assert c.get("/rules").status_code == 503
    assert c.get("/api/answer?q=" + q(QUERY)).status_code == 503
    health = c.get("/api/health")
    assert health.status_code == 503
    assert health.get_json()["warnings"] == ["rules/gpus.yaml:3:5: unknown key 'vram'"]


# ---------------------------------------------------------------- real HTTP against `kbq serve`

def fetch(url, data=None, headers=None, method=None):
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, dict(err.headers), err.read()


def test_live_page(live_server):
    status, headers, body = fetch(f"{live_server}/?q={q(QUERY)}")
    assert status == 200
    assert headers["Content-Type"].startswith("text/html")
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    text = body.decode()
    assert "Memory per GPU" in text and "Roofline of" in text and 'class="trace"' in text


def test_live_api(live_server):
    status, headers, body = fetch(f"{live_server}/api/answer?q={q(QUERY)}")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert json.loads(body) == ask(QUERY).to_dict()
    status, _, posted = fetch(f"{live_server}/api/answer", data=json.dumps({"q": QUERY}).encode(),
                              headers={"Content-Type": "application/json"})
    assert status == 200 and json.loads(posted) == json.loads(body)


def test_live_errors(live_server):
    status, headers, body = fetch(f"{live_server}/api/answer?q={q('serve 70B on h10')}")
    assert status == 400 and json.loads(body)["error"]["suggestion"] == "h100"
    assert headers["X-Content-Type-Options"] == "nosniff"
    status, _, body = fetch(f"{live_server}/api/nothing-here")
    assert status == 404 and "error" in json.loads(body)
    status, _, body = fetch(f"{live_server}/api/answer", method="PUT", data=b"{}",
                            headers={"Content-Type": "application/json"})
    assert status == 405 and "error" in json.loads(body)
    status, _, body = fetch(f"{live_server}/api/answer", data=b"x" * (70 * 1024),
                            headers={"Content-Type": "application/json"})
    assert status == 413 and "error" in json.loads(body)


FITS_ON_H100 = "serve 70b int4 on h100 sxm"     # 60 GB on an 80 GB card: no options unless asked


def _speed_order(answer):
    """sort=speed: among the rows that fit and suit the job (the cards the runtime supports well
    first), decode speed never rises down the table (the cards without a speed figure last)."""
    speeds = [g["decode_tokens_per_s"] for g in answer["gpus"] if g["fits"] and g["suits_job"] is not False]
    timed = [s for s in speeds if s is not None]
    return len(timed) > 3 and speeds[:len(timed)] == timed and all(a >= b for a, b in pairwise(timed))


def test_live_api_options_and_sort(live_server):
    base = f"{live_server}/api/answer?q={q(FITS_ON_H100)}"
    status, _, plain = fetch(base)
    assert status == 200 and json.loads(plain)["options"] is None
    status, _, body = fetch(base + "&options=1")
    got = json.loads(body)
    assert status == 200 and got["options"], "options=1 lists what to change"
    assert all(o["query"] and "fits" in o for o in got["options"])
    assert got == ask(FITS_ON_H100, options=True).to_dict()          # the same as kbq --options --json
    status, _, body = fetch(f"{live_server}/api/answer?q={q('which gpu for 7b')}&sort=speed")
    speed = json.loads(body)
    assert status == 200 and speed["recommendation"]["sort"].startswith("speed") and _speed_order(speed)
    status, _, body = fetch(f"{live_server}/api/answer?q={q('which gpu for 7b')}")
    assert json.loads(body)["recommendation"]["sort"].startswith("value")
    for order in ("value", "cost", "speed", "memory", "power"):
        status, _, body = fetch(f"{live_server}/api/answer?q={q('which gpu for 7b')}&sort={order}")
        assert status == 200 and json.loads(body)["recommendation"]["sort"].startswith(order)
    status, _, posted = fetch(f"{live_server}/api/answer", method="POST",
                              data=json.dumps({"q": "which gpu for 7b", "sort": "speed", "options": True}).encode(),
                              headers={"Content-Type": "application/json"})
    status2, _, got = fetch(f"{live_server}/api/answer?q={q('which gpu for 7b')}&sort=speed&options=true")
    assert status == status2 == 200 and json.loads(posted) == json.loads(got)
    assert json.loads(posted)["options"] and _speed_order(json.loads(posted))


@pytest.mark.parametrize("query, body, words", [
    ("&sort=cots", None, "'sort' must be one of value, cost, speed, memory, power"),
    ("&options=maybe", None, "'options' must be true or false"),
    ("", {"sort": 3}, "'sort' must be one of"),
    ("", {"options": "perhaps"}, "'options' must be true or false"),
    ("", {"options": 2}, "'options' must be true or false"),
])
def test_live_api_bad_sort_or_options_is_a_json_400(live_server, query, body, words):
    if body is None:
        status, headers, raw = fetch(f"{live_server}/api/answer?q={q(FITS_ON_H100)}{query}")
    else:
        status, headers, raw = fetch(f"{live_server}/api/answer", method="POST",
                                     data=json.dumps({"q": FITS_ON_H100, **body}).encode(),
                                     headers={"Content-Type": "application/json"})
    assert status == 400 and headers["Content-Type"] == "application/json"
    err = json.loads(raw)["error"]
    assert words in err["message"]
    if "cots" in query:
        assert err["suggestion"] == "cost"


def test_openapi_describes_sort_and_options(client):
    doc = client.get("/api/openapi.json").get_json()
    params = {p["name"]: p for p in doc["paths"]["/api/answer"]["get"]["parameters"]}
    assert params["sort"]["schema"]["enum"] == list(get_knowledge().advice["sorts"])
    assert "1" in params["options"]["schema"]["enum"]
    body = doc["paths"]["/api/answer"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["properties"]["options"]["type"] == "boolean"
    assert body["properties"]["sort"]["enum"] == params["sort"]["schema"]["enum"]


def test_live_static_and_health(live_server):
    status, headers, body = fetch(f"{live_server}/static/kbq.css")
    assert status == 200 and headers["Content-Type"].startswith("text/css")
    status, _, body = fetch(f"{live_server}/api/health")
    assert status == 200 and json.loads(body)["status"] == "ok"


@pytest.mark.parametrize("body", ["[" * 5000 + "]" * 5000, '{"q": ' + "[" * 5000 + "]" * 5000 + "}"],
                         ids=["array", "inside-q"])
def test_json_nested_5000_deep_is_a_400_with_a_position(client, body):
    r = client.post("/api/answer", data=body, content_type="application/json")
    # the standard library's decoder raised RecursionError here: HTTP 500
    assert r.status_code == 400
    assert r.get_json()["error"]["message"]


def test_json_refused_by_both_decoders_says_where(client):
    r = client.post("/api/answer", data='{"q": "serve 7B",\n  "x": }', content_type="application/json")
    assert r.status_code == 400
    err = r.get_json()["error"]
    assert err["message"].startswith("the body is not valid JSON: ") and "line 2" in err["message"]
    assert err["column"] == 8


@pytest.mark.parametrize("path", ["/static//x", "/flows//sizing", "/static//kbq.css"])
def test_a_forged_host_does_not_redirect_off_site(client, path):
    r = client.get(path, headers={"Host": "evil.example"})
    location = r.headers.get("Location")
    assert location is None or (location.startswith("/") and not location.startswith("//"))
    assert "evil.example" not in (location or "")


@pytest.mark.parametrize("query", ["serve 70B int4 16 users", "serve llama-3.1-8b fp16 8 users on rtx 4090",
                                   "train 13B qlora on 24GB"])
def test_embed_links_open_a_new_tab(client, query):
    page = client.get(f"/embed?q={q(query)}").get_data(as_text=True)
    links = re.findall(r"<a\b[^>]*>", page)
    assert len(links) > 3
    for link in links:
        assert 'target="_blank"' in link and 'rel="noopener"' in link, link


def test_embed_suggestion_stays_in_the_frame(client):
    page = client.get(f"/embed?q={q('serve 7B fp16 on h10')}").get_data(as_text=True)
    links = re.findall(r"<a\b[^>]*>", page)
    assert any('target="_self"' in link and "/embed?q=" in link for link in links)
    assert all('target="' in link for link in links)


def test_live_rebuild_does_not_hold_requests(rules_copy, monkeypatch):
    import threading

    from server import live as live_module

    app = create_app({"KBQ_RULES": str(rules_copy), "KBQ_RELOAD_SECONDS": 0})
    c = app.test_client()
    url = "/api/answer?q=" + q("serve 7B fp16 on rtx 4090")
    before = c.get(url).get_json()["gpus"][0]["name"]
    release = threading.Event()
    real_build = live_module.build

    def slow_build(root):
        release.wait(30)            # a large edit that takes long to validate
        return real_build(root)

    monkeypatch.setattr(live_module, "build", slow_build)
    _rename_gpu(rules_copy, "rtx-4090", "Edited RTX 4090")
    start = time.monotonic()
    for _ in range(5):              # answered at once, from the last good knowledge
        assert c.get(url).get_json()["gpus"][0]["name"] == before
    assert time.monotonic() - start < 5
    release.set()
    app.extensions["kbq"].settle()
    assert c.get(url).get_json()["gpus"][0]["name"] == "Edited RTX 4090"


def test_a_broken_edit_is_logged_once(rules_copy, caplog):
    app = create_app({"KBQ_RULES": str(rules_copy), "KBQ_RELOAD_SECONDS": 0})
    c = app.test_client()
    c.get("/api/health")
    path = rules_copy / "gpus.yaml"
    path.write_text("gpus: [\n" + path.read_text(encoding="utf-8"), encoding="utf-8")
    with caplog.at_level("ERROR", logger="kbq.rules"):
        for _ in range(5):
            c.get("/api/health")
            app.extensions["kbq"].settle()
    logged = [r for r in caplog.records if "do not validate" in r.getMessage()]
    assert len(logged) == 1 and "gpus.yaml:" in logged[0].getMessage()
