"""gzip for the larger responses, when the client accepts it.

In: each response of the app and its request's Accept-Encoding. Out: the response with its body
gzip-compressed (Content-Encoding: gzip) when the client accepts gzip and the body is text of
at least MIN_BYTES; every response of a compressible type says `Vary: Accept-Encoding`.

The pages are large and compress well (/sources is ~300 KB of HTML, ~55 KB gzipped; an answer's
JSON ~140 KB, ~25 KB). Compression runs on the event loop, so a body compressed once is kept,
by its digest, in a bounded store owned by the app (`Gzipped`): a cached answer or a built page
asked again is compressed once, not per request. Only the standard library's gzip: brotli would
need a library kbq does not otherwise depend on.
"""

from __future__ import annotations

import gzip
import hashlib

from flask import Flask, Response, request

from server.answer_cache import AnswerCache

MIN_BYTES = 1024            # below this, the headers cost more than gzip saves
LEVEL = 6                   # zlib's default: /sources in ~5 ms once, then kept
KEPT_BYTES = 8 * 1024 * 1024   # compressed bodies kept per process
TYPES = frozenset({"text/html", "application/json", "text/css", "image/svg+xml", "text/plain",
                   "text/javascript", "application/javascript"})


class Gzipped:
    """Compressed bodies by the digest of what they compress, in a bounded store (the answer
    cache's: least recently used first out)."""

    def __init__(self, max_bytes: int = KEPT_BYTES) -> None:
        self._kept = AnswerCache(max_bytes)

    def get(self, body: bytes) -> bytes:
        key = hashlib.blake2b(body, digest_size=16).digest()
        return self._kept.get(None, key, lambda: gzip.compress(body, LEVEL, mtime=0))


def init_app(app: Flask) -> None:
    kept = Gzipped()

    @app.after_request
    def compress(response: Response) -> Response:
        if response.mimetype not in TYPES or response.direct_passthrough or response.is_streamed:
            return response
        response.vary.add("Accept-Encoding")
        if ("Content-Encoding" in response.headers or response.status_code in (204, 206, 304)
                or not request.accept_encodings["gzip"]):
            return response
        body = response.get_data()
        if len(body) < MIN_BYTES:
            return response
        response.set_data(kept.get(body))
        response.headers["Content-Encoding"] = "gzip"
        return response
