"""The web surface's routes: every one answers, pages load nothing inline or from another host,
/embed and its framing, security headers on every response, redirects that stay on site."""

from __future__ import annotations

import re
import urllib.error
import urllib.parse
import urllib.request
from itertools import pairwise

import pytest
from server_common import HTML_PAGES, PAGES, QUERY, q

from server import create_app

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

    monkeypatch.setattr("kb.engine.pipeline.answer", boom)     # where the page's question is answered
    c = app.test_client()
    page = c.get(f"/?q={q(QUERY)}")
    assert page.status_code == 500
    assert "secret detail" not in page.get_data(as_text=True)
    assert "Traceback" not in page.get_data(as_text=True)
    api = c.get(f"/api/answer?q={q(QUERY)}")
    assert api.status_code == 500
    assert api.get_json() == {"error": {"message": "internal error", "column": None, "suggestion": None}}


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
