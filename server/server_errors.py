"""The responses the server writes itself, without the app: the API's JSON error shape.

In: a status, its reason phrase and a message. Out: the whole HTTP/1.1 response as bytes,
`{"error": {"message", "column", "suggestion"}}` with the security headers every response of
the app carries (server.security.SERVER_HEADERS) and `Connection: close`.
"""

from __future__ import annotations

import json

from server.security import SERVER_HEADERS


def json_error(status: int, reason: str, message: str) -> bytes:
    text = f"{reason.lower()}: {message}" if message else reason.lower()
    body = json.dumps({"error": {"message": text, "column": None, "suggestion": None}}).encode()
    headers = {"Content-Type": "application/json", "Content-Length": str(len(body)),
               "Connection": "close", **SERVER_HEADERS}
    head = f"HTTP/1.1 {status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return head.encode("latin-1") + b"\r\n" + body
