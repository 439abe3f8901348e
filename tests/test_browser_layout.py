"""The page phone first, the printed quote and the wiki's flowcharts, measured in a real browser
(issue 23): Debian's headless Chromium driven by Playwright against `kbq serve` on 127.0.0.1.

Without /usr/bin/chromium these tests skip, except under CI=true, where they fail (the
`browser` fixture of conftest). The flowchart test renders each exported Mermaid chart with
Mermaid itself (its npm package, mermaid.min.js, fetched once into tests/artifacts/ with
`npm pack`) and measures the drawn SVG: its natural width is its viewBox width.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
import urllib.parse
from pathlib import Path

import pytest
from conftest import unavailable

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}
LIMITS = {"phone": 7000, "desktop": 4000}       # page height, CSS px (issue 23, item 5)
VERDICT_TOP_PX = 450                             # the verdict's top on the phone: its first screen
SMALLEST_SVG_TEXT_PX = 9
KINDS = {                                        # question kind → a question of that kind
    "fit": "train 13B qlora on 20GB?",
    "which gpu": "which gpu for 13B lora",
    "cost": "cost of serving 70B int4 32 users on 2x L40S",
    "max users": "max users for 70B int4 on h200 at 32k context",
    "A vs B": "infer 7B fp16 on rtx 4000 ada vs rtx 6000 ada",
    "does not fit": "serve 70B fp16 on rtx 4090",
    "training": "full fine-tune 7B on 8x H100 for 20B tokens",
    "how many": "how many h100 for deepseek v3",
    "serve": "serve 70B int4 16 users",
}
MEASURE = """() => {
  const v = document.querySelector('section.verdict');
  const svgText = [...document.querySelectorAll('svg text')]
    .filter(t => t.getBoundingClientRect().width > 0)          // drawn (not folded or hidden)
    .map(t => { const s = t.ownerSVGElement, box = s.getBoundingClientRect();
                const scale = box.width / (s.viewBox.baseVal.width || box.width);
                return parseFloat(getComputedStyle(t).fontSize) * scale; });
  return {verdictTop: v ? v.getBoundingClientRect().top + scrollY : null,
          height: document.scrollingElement.scrollHeight,
          scrollWidth: document.scrollingElement.scrollWidth, innerWidth: innerWidth,
          svgText: svgText, openDetails: document.querySelectorAll('details[open]').length};
}"""


def _link(query: str, path: str = "/") -> str:
    return path + "?" + urllib.parse.urlencode({"q": query})


@pytest.fixture(scope="module")
def pages(browser, live_server):
    """Each kind's answer page at each size, measured once: {(kind, size): measures}; every
    request the page made is recorded, to check that none went to another host."""
    out = {}
    for size, viewport in (("phone", PHONE), ("desktop", DESKTOP)):
        context = browser.new_context(viewport=viewport)
        try:
            pg = context.new_page()
            for kind, query in KINDS.items():
                requests: list = []

                def seen(request, requests=requests) -> None:
                    requests.append(request)

                pg.on("request", seen)
                pg.goto(live_server + _link(query))
                got = pg.evaluate(MEASURE)
                pg.remove_listener("request", seen)
                got["hosts"] = {urllib.parse.urlsplit(r.url).netloc for r in requests
                                if not r.url.startswith(("data:", "about:"))}
                if size == "phone":
                    got["table"] = _first_gpu_row(pg)
                    if kind == "serve":
                        pg.screenshot(path=str(_artifact("phone-first-screen.png")))
                elif kind == "serve":
                    pg.screenshot(path=str(_artifact("desktop-full.png")), full_page=True)
                out[kind, size] = got
        finally:
            context.close()
    return out


def _artifact(name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name


def _first_gpu_row(pg) -> dict[str, object]:
    """Where the first GPU row's name, fit and asked-for figure are drawn, and that figure's label."""
    row = pg.locator("table.gpus tbody tr").first
    boxes = {part: row.locator(sel).first.bounding_box()
             for part, sel in (("gpu", "th.name"), ("fits", "td.flag"), ("figure", "td.key"))}
    label = pg.locator("table.gpus thead th.key").first.inner_text()
    return {"boxes": boxes, "label": label, "shown": row.locator("td.key").first.get_attribute("data-label")}


SIZES = [(kind, size) for kind in KINDS for size in ("phone", "desktop")]


@pytest.mark.parametrize("kind, size", SIZES, ids=[f"{k}-{s}" for k, s in SIZES])
def test_answer_page_fits_the_screen(pages, kind, size):
    got = pages[kind, size]
    assert got["verdictTop"] is not None, "an answer page has a verdict"
    if size == "phone":
        assert got["verdictTop"] <= VERDICT_TOP_PX, (kind, got["verdictTop"])
    assert got["height"] <= LIMITS[size], (kind, size, got["height"])
    assert got["scrollWidth"] <= got["innerWidth"], (kind, size, got["scrollWidth"])
    assert got["svgText"], "the memory chart at least is drawn"
    assert min(got["svgText"]) >= SMALLEST_SVG_TEXT_PX, (kind, size, min(got["svgText"]))
    assert got["openDetails"] == 0                   # the trace, flowcharts, sources start folded
    assert got["hosts"] and all(h.startswith("127.0.0.1:") for h in got["hosts"]), got["hosts"]


@pytest.mark.parametrize("kind", list(KINDS))
def test_phone_table_shows_gpu_fit_and_the_asked_figure(pages, kind):
    """On a phone a GPU row stacks: its name, whether it fits and the asked-for figure (the
    table's key column, with its heading as its label) are all on the screen's width."""
    table = pages[kind, "phone"]["table"]
    for part, box in table["boxes"].items():
        assert box is not None and box["width"] > 0, part
        assert 0 <= box["x"] and box["x"] + box["width"] <= PHONE["width"], (kind, part, box)
    assert table["shown"] == table["label"]


def test_examples_fold_away_once_a_question_is_asked(browser, live_server):
    context = browser.new_context(viewport=PHONE)
    try:
        pg = context.new_page()
        pg.goto(live_server + "/")
        assert pg.locator("nav.examples").is_visible()           # a first visit shows them
        pg.goto(live_server + _link(KINDS["fit"]))
        assert not pg.locator("nav.examples").is_visible()       # folded under "Examples and help"
        pg.locator("details.help > summary").click()
        assert pg.locator("nav.examples").is_visible()
    finally:
        context.close()


# ---------------------------------------------------------------- the printed quote

PAGE_COUNT = re.compile(rb"/Type\s*/Pages\b[^>]*?/Count\s+(\d+)|/Count\s+(\d+)[^>]*?/Type\s*/Pages\b")


def _pages_in(pdf: bytes) -> int:
    counts = {int(a or b) for a, b in PAGE_COUNT.findall(pdf)}
    leaves = len(re.findall(rb"/Type\s*/Page\b(?!s)", pdf))
    assert counts and max(counts) == leaves, (counts, leaves)
    return leaves


@pytest.mark.parametrize("kind", ["serve", "fit", "which gpu", "does not fit", "training", "how many"])
def test_quote_prints_on_one_page(browser, live_server, kind):
    """/quote in print emulation is one A4 page and one Letter page (the page's own print CSS)."""
    context = browser.new_context()
    try:
        pg = context.new_page()
        r = pg.goto(live_server + _link(KINDS[kind], "/quote"))
        assert r.status == 200
        assert pg.locator("h2", has_text="Recommended configuration").count() == 1
        pg.emulate_media(media="print")
        for paper in ("A4", "Letter"):
            pdf = pg.pdf(format=paper)
            assert _pages_in(pdf) == 1, (kind, paper)
            if kind == "serve" and paper == "Letter":
                _artifact("quote-letter.pdf").write_bytes(pdf)
    finally:
        context.close()


# ---------------------------------------------------------------- the wiki's flowcharts

MERMAID = "mermaid@11.17.2"      # the version MkDocs Material's current releases load
WIDEST_PX = 1200                 # at natural size; wider, MkDocs Material shrinks its text below 10 px


@pytest.fixture(scope="module")
def mermaid_js() -> Path:
    """mermaid.min.js from the npm registry's package, fetched once (npm checks its integrity)."""
    target = ARTIFACTS / "mermaid" / MERMAID / "mermaid.min.js"
    if target.exists():
        return target
    npm = shutil.which("npm")
    if npm is None:
        unavailable("npm is missing: apt-get install npm (to fetch Mermaid for the flowchart test)")
    folder = target.parent
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([npm, "pack", MERMAID, "--pack-destination", str(folder)],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        unavailable(f"npm pack {MERMAID} failed: {done.stderr[-400:]}")
    tarball = next(folder.glob("mermaid-*.tgz"))
    with tarfile.open(tarball) as tar:
        member = tar.getmember("package/dist/mermaid.min.js")
        source = tar.extractfile(member)
        assert source is not None
        partial = target.with_suffix(".part")
        partial.write_bytes(source.read())
    partial.replace(target)                  # whole, or not there at all
    tarball.unlink()
    return target


def test_exported_flowcharts_are_narrow_enough_to_read(browser, mermaid_js):
    """Each Mermaid chart of the exported wiki, drawn by Mermaid in Chromium, is at most
    WIDEST_PX wide at natural size (issue 23, item 7)."""
    from kb import get_knowledge
    from kb.present.export import markdown_pages

    charts = [(path, chart) for path, text in markdown_pages(get_knowledge()).items()
              for chart in re.findall(r"```mermaid\n(.*?)```", text, re.S)]
    assert len(charts) >= 4
    context = browser.new_context()
    try:
        pg = context.new_page()
        pg.set_content("<!doctype html><html><body></body></html>")
        pg.add_script_tag(path=str(mermaid_js))
        pg.evaluate("mermaid.initialize({startOnLoad: false})")
        for i, (path, chart) in enumerate(charts):
            width = pg.evaluate("""async ([id, text]) => {
                const {svg} = await mermaid.render(id, text);
                const box = document.createElement('div'); box.innerHTML = svg;
                document.body.appendChild(box);
                return box.querySelector('svg').viewBox.baseVal.width; }""", [f"chart{i}", chart])
            assert 0 < width <= WIDEST_PX, (path, i, width)
    finally:
        context.close()
