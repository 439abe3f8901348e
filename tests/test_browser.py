"""The page in a real browser: Debian's headless Chromium, driven by Playwright, against `kbq serve`.

Without /usr/bin/chromium these tests skip, except under CI=true, where they fail.
Screenshots go to tests/artifacts/; with KBQ_UPDATE_DOCS=1 the README's docs/screenshot.png is
rewritten too (on purpose, then reviewed like any other diff).
"""

from __future__ import annotations

import os
import urllib.parse
from itertools import pairwise
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "tests" / "artifacts"
QUERY = "serve 70B int4 16 users"


@pytest.fixture(params=[True, False], ids=["js", "no-js"])
def page(request, browser):
    context = browser.new_context(java_script_enabled=request.param, viewport={"width": 1200, "height": 900})
    pg = context.new_page()
    pg.problems = []   # console errors (a CSP violation shows up here) and failed requests
    pg.on("console", lambda m: m.type == "error" and pg.problems.append(m.text))
    pg.on("requestfailed", lambda r: pg.problems.append(f"{r.url}: {r.failure}"))
    yield pg
    context.close()


def ask_in_the_box(page, base: str, query: str) -> None:
    page.goto(base + "/")
    box = page.get_by_label("Your question")
    box.fill(query)
    with page.expect_navigation():
        box.press("Enter")


def test_ask_and_see_the_answer(page, live_server, request):
    ask_in_the_box(page, live_server, QUERY)
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query) == {"q": [QUERY]}
    verdict = page.locator("section.verdict")
    assert verdict.is_visible()
    assert "GB" in verdict.inner_text()
    assert page.locator("ol.trace > li").count() > 10
    assert page.locator("ol.trace a[href^='/sources#']").count() > 10
    # each chart is drawn twice, for a wide screen and for a phone: the wide one shows here
    memory = page.locator("figure.chart .wide svg", has=page.locator("title", has_text="Memory per GPU"))
    roofline = page.locator("figure.chart .wide svg", has=page.locator("title", has_text="Roofline of"))
    assert not page.locator("figure.chart .narrow svg").first.is_visible()
    assert memory.is_visible() and roofline.is_visible()
    assert memory.bounding_box()["width"] > 300 and roofline.bounding_box()["height"] > 200
    assert page.locator("table.gpus tbody tr").first.is_visible()
    assert page.input_value("#q") == QUERY                      # the box keeps the question
    assert page.problems == []
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    name = "answer.png" if "no-js" not in request.node.name else "answer-no-js.png"
    page.screenshot(path=str(ARTIFACTS / name))


def test_a_query_error_in_the_browser(page, live_server):
    ask_in_the_box(page, live_server, "serve 70B on h10")
    assert "^^^" in page.locator(".query-error pre").inner_text()
    with page.expect_navigation():
        page.locator(".query-error").get_by_role("link", name="serve 70B on h100", exact=True).click()
    assert page.locator("section.verdict").is_visible()


def test_typed_script_does_not_run(page, live_server):
    page.goto(live_server + "/?q=" + urllib.parse.quote_plus('"><img src=x onerror=alert(1)>'))
    assert page.locator(".query-error pre").inner_text().count("<img") == 1   # shown as text
    assert page.locator("img").count() == 0


def test_basic_accessibility(browser, live_server):
    context = browser.new_context()
    try:
        pg = context.new_page()
        pg.goto(live_server + "/?q=" + urllib.parse.quote_plus(QUERY))
        label_for = pg.locator("label", has_text="Your question").get_attribute("for")
        assert label_for == "q" and pg.locator("#q").count() == 1
        levels = pg.eval_on_selector_all("h1, h2, h3, h4, h5, h6", "hs => hs.map(h => +h.tagName[1])")
        assert levels[0] == 1 and levels.count(1) == 1
        assert all(b <= a + 1 for a, b in pairwise(levels)), levels
        svgs = pg.eval_on_selector_all("svg", """svgs => svgs.map(s => ({
            title: s.querySelector(':scope > title')?.textContent || '',
            role: s.getAttribute('role'),
            labelled: (s.getAttribute('aria-labelledby') || '').split(' ')
                .every(id => id && document.getElementById(id)),
            alternative: !!s.closest('figure')?.querySelector('figcaption')}))""")
        assert len(svgs) >= 3
        for svg in svgs:
            assert svg["title"] and svg["role"] == "img" and svg["labelled"] and svg["alternative"], svg
        assert pg.eval_on_selector_all("table", "ts => ts.every(t => t.querySelector('caption'))")
        ids = pg.eval_on_selector_all("[id]", "es => es.map(e => e.id)")
        assert len(ids) == len(set(ids))
        assert pg.evaluate("document.documentElement.lang") == "en"
    finally:
        context.close()


def test_full_page_screenshot(browser, live_server):
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    try:
        pg = context.new_page()
        pg.goto(live_server + "/?q=" + urllib.parse.quote_plus(QUERY))
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        png = pg.screenshot(path=str(ARTIFACTS / "screenshot.png"), full_page=True)
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        context.close()
    if os.environ.get("KBQ_UPDATE_DOCS") == "1":
        update_readme_screenshots(browser, live_server)


def update_readme_screenshots(browser, base: str) -> None:
    """The README's two pictures: the first screen of the answer, desktop and phone (the
    verdict is in it, under the question)."""
    (ROOT / "docs").mkdir(exist_ok=True)
    for name, viewport, scale in (("screenshot.png", {"width": 1280, "height": 1200}, 1),
                                  ("screenshot-phone.png", {"width": 390, "height": 844}, 2)):
        context = browser.new_context(viewport=viewport, device_scale_factor=scale)
        try:
            pg = context.new_page()
            pg.goto(base + "/?q=" + urllib.parse.quote_plus(QUERY))
            pg.screenshot(path=str(ROOT / "docs" / name))
        finally:
            context.close()


PHONE = {"width": 390, "height": 844}
PHONE_PAGES = ["/?q=" + urllib.parse.quote_plus("serve llama-3.1-70b fp16 16 users"),
               "/?q=" + urllib.parse.quote_plus("train 13B qlora on 20GB?"),
               "/gpus", "/sources",
               "/?q=" + urllib.parse.quote_plus("serve 70B on h10")]     # a query error
SMALLEST_TEXT_PX = 10


@pytest.mark.parametrize("path", PHONE_PAGES)
def test_phone_has_no_sideways_page_and_readable_charts(browser, live_server, path):
    """At 390 × 844 CSS px (a common phone) nothing makes the page wider than the screen (wide
    tables and charts scroll inside their own box), and chart text renders at 10 px or more."""
    context = browser.new_context(viewport=PHONE)
    try:
        pg = context.new_page()
        pg.goto(live_server + path)
        width, inner = pg.evaluate("[document.documentElement.scrollWidth, innerWidth]")
        assert width <= inner, (path, width, inner)
        sizes = pg.eval_on_selector_all("figure.chart svg text", """ts => ts
            .filter(t => t.getBoundingClientRect().width > 0)
            .map(t => { const s = t.ownerSVGElement, box = s.getBoundingClientRect();
                        const scale = box.width / (s.viewBox.baseVal.width || box.width);
                        return parseFloat(getComputedStyle(t).fontSize) * scale; })""")
        if "?q=" in path and "h10" not in path:
            assert sizes, "an answer page draws charts"
        assert all(s >= SMALLEST_TEXT_PX for s in sizes), (path, min(sizes))
        if "h10" in path:
            box = pg.locator(".query-error").bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= inner
    finally:
        context.close()


def test_phone_gpu_table_leads_with_gpu_fit_and_the_asked_figure(browser, live_server):
    context = browser.new_context(viewport=PHONE)
    try:
        pg = context.new_page()
        pg.goto(live_server + PHONE_PAGES[0])
        heads = pg.locator("table.gpus").first.locator("thead th").all_inner_texts()
        assert heads[1:4] == ["GPU", "fits", "decode tok/s per user"]
        assert pg.locator("table.gpus").first.locator("tbody th.name").first.bounding_box()["x"] < PHONE["width"]
        assert pg.locator("details.trace").get_attribute("open") is None    # the trace starts closed
    finally:
        context.close()


def test_dark_mode_follows_the_system(browser, live_server):
    context = browser.new_context(color_scheme="dark")
    try:
        pg = context.new_page()
        pg.goto(live_server + PHONE_PAGES[0])
        bg = pg.evaluate("getComputedStyle(document.body).backgroundColor")
        channels = [int(x) for x in bg[bg.index("(") + 1:bg.index(")")].split(",")[:3]]
        assert max(channels) < 64, bg                                  # a dark background
    finally:
        context.close()
