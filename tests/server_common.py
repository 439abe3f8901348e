"""What the web surface's tests share: the query they ask, hostile inputs, the route table, and
a plain HTTP fetch against a running `kbq serve`."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from kb import get_knowledge

QUERY = "serve 70B int4 16 users"
PROBES = ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>']


def q(query: str) -> str:
    return urllib.parse.quote_plus(query)


def flow_ids() -> list[str]:
    return [f.id for f in get_knowledge().flows]


# Every route a person or a script reaches, with what it must contain. tests/test_server_routes.py
# fails when the app gains a route this list does not cover.
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
    ("/health", "application/json", '"loaded_at"'),
    ("/api/openapi.json", "application/json", '"openapi"'),
]

HTML_PAGES = [url for url, ctype, _ in PAGES if ctype == "text/html"]


def fetch(url: str, data: bytes | None = None, headers: dict[str, str] | None = None,
          method: str | None = None) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, dict(err.headers), err.read()


def rename_gpu(root: Path, gpu_id: str, new_name: str) -> None:
    """Rename one GPU in a copy of the rules (a live-rules edit)."""
    path = root / "gpus.yaml"
    text = path.read_text(encoding="utf-8")
    name = get_knowledge().gpus[gpu_id]["name"]
    start = text.index(f"id: {gpu_id}")
    at = text.index(name, start)
    path.write_text(text[:at] + new_name + text[at + len(name):], encoding="utf-8")
