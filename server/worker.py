"""The worker process of `kbq serve`: gunicorn's gevent worker with kbq's limits.

In: what gunicorn gives a worker (the listening socket, the settings of server.serving, the
preloaded app). Out: a process that serves HTTP/1.1 until its arbiter stops it.

What it adds to gunicorn's GeventWorker:
- answers are computed on a pool of `KBQ_ANSWER_SLOTS` real threads (server.fairness), so the
  event loop goes on accepting, reading requests and answering /api/health, static files and
  cached answers while an answer is computed;
- each connection's kernel buffers are asked to be SOCKET_BUFFER_BYTES, and a response the
  client does not read for SEND_SECONDS closes the connection: a client that pipelines requests
  and never reads the responses holds one response and those buffers, and no further request
  of it is read meanwhile;
- a body declared larger than BODY_BYTES is refused with 413 before any of it is read (nothing
  is read into memory or written to disk), and a chunked body (its size unknown) closes the
  connection after its response, so the rest is never drained;
- the responses gunicorn writes itself (a request line or headers over the limit, a malformed
  request) are the API's JSON error shape with the security headers (server.security);
- a request whose client closed its connection before the request was read is dropped unread
  by the app (server.fairness.gone);
- SIGINT drains the requests in flight as SIGTERM does, and on either a connection waiting for
  its next request (none has arrived on it) is closed at once, so a stop waits only for the
  requests in flight.
"""

from __future__ import annotations

import ctypes
import signal
import socket
import sys
from typing import Any

import gevent
from gevent.event import Event
from gevent.threadpool import ThreadPool
from gunicorn import util
from gunicorn.http.errors import ParseException
from gunicorn.workers.ggevent import GeventWorker

from werkzeug.exceptions import BadRequest

from server import serving
from server.fairness import gone, readable
from server.server_errors import json_error

SWITCH_SECONDS = 0.001     # how long a thread may hold the interpreter before the event loop's turn


def write_error(sock: socket.socket, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn's own error responses, as the API's JSON error shape with the security headers."""
    util.write_nonblock(sock, json_error(status_int, reason, mesg))


M_ARENA_MAX = -8           # mallopt's parameter number for the most malloc arenas (glibc malloc.h)


def one_malloc_arena() -> None:
    """One malloc arena for the whole process. glibc gives each thread that allocates its own
    arena (up to 8 a core) and keeps what is freed in it for that arena's reuse, so the answer
    threads each hold their own high-water of freed memory: measured under bench/run.py's
    distinct load, a worker grew by 64 MB with a 32 MB answer cache, and by 37 MB with one arena
    (bench/README.md). The interpreter lock already lets one thread allocate at a time, so one
    arena costs no concurrency. Without glibc (no mallopt) nothing changes."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(M_ARENA_MAX, 1)


class KbqWorker(GeventWorker):
    wsgi: Any                               # the app, as gunicorn's Worker.load_wsgi sets it

    def init_process(self) -> None:
        util.write_error = write_error      # gunicorn's error writer, in this process only
        one_malloc_arena()
        self._idle: set[Any] = set()     # connections waiting for a next request
        self._served: set[Any] = set()   # connections that had a response
        self._sockets: dict[Any, Any] = {}   # each connection's socket
        super().init_process()

    def init_signals(self) -> None:
        super().init_signals()

        signal.signal(signal.SIGINT, self.handle_exit)

    def load_wsgi(self) -> None:
        super().load_wsgi()
        sys.setswitchinterval(SWITCH_SECONDS)
        app = self.wsgi
        self.wsgi = lambda environ, start: app(_guarded(environ), start)
        live = getattr(self.app.wsgi(), "extensions", {}).get("kbq")
        self._gate = live.gate if live is not None else None
        if live is not None:
            pool = ThreadPool(live.gate.slots)
            live.gate.use(Event, pool.apply)

    def handle_exit(self, sig: int, frame: Any) -> None:
        super().handle_exit(sig, frame)
        for g in list(self._idle):            # nothing asked on these: close them now
            if not readable(self._sockets.get(g)):
                g.kill(StopIteration, block=False)

    def timeout_ctx(self) -> Any:
        # a connection that had a response and waits for another may be closed on a stop (a
        # client retries a request that a closing keep-alive connection did not take); one that
        # has asked nothing yet is waited for, as its request may be on its way
        return _Waiting(self._idle if gevent.getcurrent() in self._served else set(),
                        self.cfg.keepalive)

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        try:
            client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, serving.SOCKET_BUFFER_BYTES)
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, serving.SOCKET_BUFFER_BYTES)
        except OSError:
            pass
        if gone(client):                      # connected, asked and left before it was read
            self._dropped()
            util.close(client)
            return
        me = gevent.getcurrent()
        self._sockets[me] = client
        try:
            super().handle(listener, client, addr)
        finally:
            self._served.discard(me)
            self._sockets.pop(me, None)

    def _dropped(self) -> None:
        if self._gate is not None:
            self._gate.dropped += 1

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> bool:
        length = _declared_length(req.headers)
        if length is not None and length > serving.BODY_BYTES:
            util.write_nonblock(sock, json_error(
                413, "Content Too Large",
                f"the request body is larger than {serving.BODY_BYTES // 1024} KiB"))
            util.close_graceful(sock)
            raise StopIteration()
        if gone(sock):                        # asked and left: nothing is done for it
            self._dropped()
            raise StopIteration()
        if any(name == "TRANSFER-ENCODING" for name, _ in req.headers):
            req.must_close = True             # its unread rest is not drained for a next request
        sock.settimeout(serving.SEND_SECONDS)
        self._served.add(gevent.getcurrent())
        try:
            super().handle_request(listener_name, req, sock, addr)
            return True
        except TimeoutError:                  # the client read nothing for SEND_SECONDS
            raise StopIteration() from None


def _guarded(environ: dict[str, Any]) -> dict[str, Any]:
    environ["wsgi.input"] = _Body(environ["wsgi.input"])
    return environ


class _Body:
    """The request body, whose malformed framing (a bad chunk size) is the client's error, 400,
    rather than an exception of the server inside the app."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def _read(self, how: str, *args: Any) -> Any:
        try:
            return getattr(self.inner, how)(*args)
        except ParseException as err:
            raise BadRequest(f"the request body is malformed: {err}") from None

    def read(self, *args: Any) -> bytes:
        return self._read("read", *args)  # type: ignore[no-any-return]

    def readline(self, *args: Any) -> bytes:
        return self._read("readline", *args)  # type: ignore[no-any-return]

    def readlines(self, *args: Any) -> list[bytes]:
        return self._read("readlines", *args)  # type: ignore[no-any-return]

    def __iter__(self) -> Any:
        return iter(self.readline, b"")


def _declared_length(headers: list[tuple[str, str]]) -> int | None:
    for name, value in headers:
        if name == "CONTENT-LENGTH":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class _Waiting:
    """The wait for a connection's next request: at most `seconds`, and known to the worker,
    which closes the connection at once when it is told to stop."""

    def __init__(self, idle: set[Any], seconds: float) -> None:
        self.idle, self.timeout = idle, gevent.Timeout(seconds, False)  # type: ignore[arg-type]  # False: end quietly (gevent's documented form)

    def __enter__(self) -> None:
        self.me = gevent.getcurrent()
        self.idle.add(self.me)
        self.timeout.__enter__()

    def __exit__(self, *exc: Any) -> bool | None:
        self.idle.discard(self.me)
        return self.timeout.__exit__(*exc)
