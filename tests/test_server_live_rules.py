"""Live rules: the server rebuilds after an edit to its rules directory, keeps the last good
knowledge, checks at most once per interval and never holds a request while it rebuilds."""

from __future__ import annotations

import time

from server_common import QUERY, q, rename_gpu

from kb import get_knowledge
from server import create_app

# ---------------------------------------------------------------- live rules


def test_live_rules_rebuild_after_an_edit(rules_copy):
    app = create_app({"KBQ_RULES": str(rules_copy), "KBQ_RELOAD_SECONDS": 0})
    c = app.test_client()
    url = "/api/answer?q=" + q("serve 7B fp16 on rtx 4090")
    assert c.get(url).get_json()["gpus"][0]["name"] == get_knowledge().gpus["rtx-4090"]["name"]
    rename_gpu(rules_copy, "rtx-4090", "Edited RTX 4090")
    c.get("/api/health")                     # notices the edit; the rebuild runs in the background
    app.extensions["kbq"].settle()
    assert c.get(url).get_json()["gpus"][0]["name"] == "Edited RTX 4090"
    assert "Edited RTX 4090" in c.get("/?q=" + q("serve 7B fp16 on rtx 4090")).get_data(as_text=True)


def test_live_rules_keep_the_last_good_knowledge(rules_copy):
    app = create_app({"KBQ_RULES": str(rules_copy), "KBQ_RELOAD_SECONDS": 0})
    c = app.test_client()
    rename_gpu(rules_copy, "rtx-4090", "Edited RTX 4090")
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
    rename_gpu(rules_copy, "rtx-4090", "Edited RTX 4090")
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
    rename_gpu(rules_copy, "rtx-4090", "Edited RTX 4090")
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


def test_a_source_address_that_is_not_http_never_becomes_a_link(serve, rules_copy):
    # `kbq validate` took url: "javascript:…" in sources.yaml and /quote rendered it as a link
    import json
    import re

    from server_common import fetch

    served = serve("--processes", "1", "--rules", str(rules_copy))
    _, _, body = fetch(f"{served.base}/api/health")
    before = json.loads(body)["rules"]["loaded_at"]
    time.sleep(1.1)                          # loaded_at has whole seconds
    path = rules_copy / "sources.yaml"
    text = path.read_text(encoding="utf-8")
    path.write_text(re.sub(r"(?m)^(\s+)url: .*$", r'\1url: "javascript:alert(1)"', text), encoding="utf-8")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:      # until the edit is taken or refused
        rules = json.loads(fetch(f"{served.base}/api/health")[2])["rules"]
        if rules["errors"] or rules["loaded_at"] != before:
            break
        time.sleep(0.2)
    assert rules["errors"], "rules with a javascript: address validated"
    assert "must start with https:// or http://" in rules["errors"][0]["message"]
    for page in (f"/quote?q={q(QUERY)}", "/sources"):
        status, _, html = fetch(served.base + page)
        assert status == 200
        links = re.findall(rb'<a [^>]*href="([^"]*)"', html)
        assert [a for a in links if not a.startswith((b"/", b"#", b"https://", b"http://"))] == []
        assert b'<a href="https://' in html       # the last good knowledge's addresses


def test_only_http_addresses_are_links():
    from kb.links import web_address

    assert web_address("https://arxiv.org/abs/2001.08361") == "https://arxiv.org/abs/2001.08361"
    assert web_address("HTTP://example.com") == "HTTP://example.com"
    for bad in ("javascript:alert(1)", "JavaScript:alert(1)", " javascript:alert(1)",
                "data:text/html,<script>", "//evil.example", "/sources", "https://", "https:evil",
                'https://a.example/"><script>', "https://a.example/\nx", None, 3):
        assert web_address(bad) is None, bad
