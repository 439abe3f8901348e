"""A waitress server whose own errors speak the API's JSON error shape, with a header deadline.

In: the WSGI app, a listening socket and waitress settings (threads, connection_limit,
channel_timeout, max_request_header_size) plus `header_timeout` seconds.
Out: `create(...)` → a server whose `.run()` serves until SIGTERM/SIGINT.

Waitress answers some requests without calling the app: a request line or headers over the
limit (431), a malformed request or a bad chunk size (400), a body over the limit (413). Those
answers are `{"error": {"message", "column", "suggestion"}}` here, as every other API error is.
Waitress reads requests in its event loop, so a client that sends its headers a line at a time
holds no thread; it would still hold its socket forever, so a request whose headers are not
complete `header_timeout` seconds after its first byte is closed.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask


def error_body(message: str) -> bytes:
    return json.dumps({"error": {"message": message, "column": None, "suggestion": None}}).encode()


class JsonErrorTask(ErrorTask):
    def execute(self) -> None:
        request: Any = self.request         # an HTTPRequestParser; types-waitress says Error
        err = request.error
        message = f"{err.reason.lower()}: {err.body}" if err.body else err.reason.lower()
        body = error_body(message)
        self.status = f"{err.code} {err.reason}"
        headers: list[tuple[str, str]] = self.response_headers    # type: ignore[assignment]
        headers.append(("Content-Type", "application/json"))
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class TimedParser(HTTPRequestParser):
    """A request parser that remembers when its first byte arrived."""

    def __init__(self, adj: Adjustments) -> None:
        super().__init__(adj)
        self.started = time.monotonic()


class Channel(HTTPChannel):
    error_task_class = JsonErrorTask
    parser_class = TimedParser


class Server(TcpWSGIServer):
    channel_class = Channel
    header_timeout = 10.0

    def maintenance(self, now: int) -> None:
        super().maintenance(now)
        cutoff = time.monotonic() - self.header_timeout
        active: dict[int, Any] = self.active_channels       # type: ignore[assignment]
        for channel in list(active.values()):
            request = channel.request
            if request is not None and not request.headers_finished and request.started < cutoff:
                channel.will_close = True


def create(app: Any, sock: socket.socket, header_timeout: float, **settings: Any) -> Server:
    adj = Adjustments(ident="kbq", asyncore_use_poll=True,
                      cleanup_interval=max(1, int(header_timeout // 2)), **settings)
    info = (sock.family, sock.type, sock.proto, sock.getsockname())
    server = Server(app, None, True, sock, adj=adj, bind_socket=False, sockinfo=info)
    server.header_timeout = header_timeout
    return server
