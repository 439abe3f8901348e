"""Security headers on every response.

In: the app config KBQ_EMBED_ORIGINS (origins allowed to frame /embed). Out: SERVER_HEADERS
(for the responses the server writes without the app) and an after_request hook that sets Content-Security-Policy (no inline script or style, nothing from another host),
X-Content-Type-Options, Referrer-Policy, redirects as paths on this site, and framing rules: no page may be framed except /embed,
which its own origin and the configured origins may frame.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit
from collections.abc import Iterable

from flask import Flask, Response, request

EMBED_PATH = "/embed"
ORIGIN = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?$")
POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
          "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
          "frame-ancestors {ancestors}")


def check_origins(origins: Iterable[str]) -> list[str]:
    """The configured embed origins, each `scheme://host[:port]`; anything else is an error."""
    if isinstance(origins, str):
        raise TypeError("KBQ_EMBED_ORIGINS must be a list of origins, not a string")
    out = []
    for origin in origins:
        if not isinstance(origin, str) or not ORIGIN.match(origin):
            raise ValueError(f"KBQ_EMBED_ORIGINS: {origin!r} is not an origin like https://wiki.example.com")
        out.append(origin)
    return out


def frame_ancestors(path: str, origins: list[str]) -> str:
    if path == EMBED_PATH:
        return " ".join(["'self'", *origins])
    return "'none'"


COMMON = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
          "Cross-Origin-Opener-Policy": "same-origin"}
# what a response of no page carries: the server's own errors (server.server_errors)
SERVER_HEADERS = {"Content-Security-Policy": POLICY.format(ancestors="'none'"), **COMMON,
                  "X-Frame-Options": "DENY"}


def init_app(app: Flask) -> None:
    origins = check_origins(app.config.get("KBQ_EMBED_ORIGINS") or [])
    # the same for every response but /embed: written once, not per request
    common = COMMON
    page = {"Content-Security-Policy": POLICY.format(ancestors=frame_ancestors("/", origins)),
            **common, "X-Frame-Options": "DENY"}
    embed = {"Content-Security-Policy": POLICY.format(ancestors=frame_ancestors(EMBED_PATH, origins)),
             **common}

    @app.after_request
    def headers(response: Response) -> Response:
        response.headers.update(embed if request.path == EMBED_PATH else page)
        location = response.headers.get("Location")
        if location:
            response.headers["Location"] = same_site(location)
        return response


def same_site(location: str) -> str:
    """A redirect as a path on this site: werkzeug writes redirects (a merged '//', a missing
    trailing slash) as absolute URLs built from the request's Host header, which a client may
    forge to send the next request elsewhere."""
    parts = urlsplit(location)
    path = "/" + (parts.path or "/").lstrip("/")     # never '//host', which leaves the site
    return path + (f"?{parts.query}" if parts.query else "")
