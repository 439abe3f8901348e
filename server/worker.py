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
  is read into memory or written to disk); a chunked body (its size unknown) is refused with
  413 once it proves longer, and closes the connection after its response, so the rest is never
  drained;
- the responses gunicorn writes itself (a request line or headers over the limit, a malformed
  request) are the API's JSON error shape with the security headers (server.security);
- a request whose client closed its connection before the request was read is dropped unread
  by the app (server.fairness.gone);
- one client address holds at most KBQ_CONNECTIONS_PER_ADDRESS open connections (a proxy named in
  `forwarded_allow_ips`, any number): past it a connection gets 429 and is closed, so one client
  holding idle or silent connections cannot fill `worker_connections` and keep everyone else
  waiting in the kernel's queue;
- SIGINT drains the requests in flight as SIGTERM does, and on either a connection waiting for
  its next request (none has arrived on it) is closed at once, so a stop waits only for the
  requests in flight; the connections waiting in the listening socket's queue are accepted and
  answered before the socket is closed (`run`), instead of being reset.
"""

from __future__ import annotations

import socket
import sys
import time
from functools import partial
from typing import Any

import gevent
from gevent.event import Event
from gevent.pool import Pool
from gevent.server import StreamServer
from gevent.threadpool import ThreadPool
from gunicorn import util
from gunicorn.http.errors import ParseException
from gunicorn.workers.ggevent import GeventWorker

from werkzeug.exceptions import BadRequest, RequestEntityTooLarge

from server import serving
from server.fairness import gone, readable
from server.live import Proxies
from server.server_errors import json_error

SWITCH_SECONDS = 0.001     # how long a thread may hold the interpreter before the event loop's turn
STOP_POLL_SECONDS = 0.1    # how often the worker looks whether it was told to stop


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
    import ctypes

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
        self._open: dict[str, int] = {}      # open connections by client address
        self._per_address = 0                 # the most one address may hold (load_wsgi)
        self._proxies = Proxies()
        super().init_process()

    def init_signals(self) -> None:
        super().init_signals()
        import signal

        from server.application import STOP_SIGNALS

        signal.signal(signal.SIGINT, self.handle_exit)
        # forked with the stop signals blocked (server.application.KbqArbiter.spawn_worker): one
        # that arrived meanwhile is delivered now, to these handlers
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)

    def load_wsgi(self) -> None:
        super().load_wsgi()
        sys.setswitchinterval(SWITCH_SECONDS)
        app = self.wsgi
        self.wsgi = lambda environ, start: app(_guarded(environ), start)
        live = getattr(self.app.wsgi(), "extensions", {}).get("kbq")
        self._gate = live.gate if live is not None else None
        self._proxies = Proxies(self.cfg.forwarded_allow_ips)
        config = getattr(self.app.wsgi(), "config", {})
        self._per_address = int(config.get("KBQ_CONNECTIONS_PER_ADDRESS") or 0)   # 0: no limit
        if live is not None:
            live.proxies = self._proxies
            pool = ThreadPool(live.gate.slots)
            live.gate.use(Event, pool.apply)

    def handle_exit(self, sig: int, frame: Any) -> None:
        super().handle_exit(sig, frame)
        for g in list(self._idle):            # nothing asked on these: close them now
            if not readable(self._sockets.get(g)):
                g.kill(StopIteration, block=False)

    def run(self) -> None:
        """gunicorn's GeventWorker.run (one gevent StreamServer per listening socket, a pool of
        `worker_connections` greenlets, a heartbeat every second), with a stop that takes what
        waits in the listening socket's queue before it closes the socket: a connection the
        kernel accepted, whose request may already be sent, would otherwise be reset when the
        last copy of the socket closes. Then the requests in flight finish, as in gunicorn,
        within `graceful_timeout`. A stop is seen within STOP_POLL_SECONDS, not a second."""
        servers, pools = [], []
        for listener in self.sockets:
            listener.setblocking(True)
            pools.append(Pool(self.worker_connections))
            server = StreamServer(listener, handle=partial(self.handle, listener), spawn=pools[-1])
            if self.cfg.workers > 1:
                server.max_accept = 1           # share the queue with the other workers
            server.start()
            servers.append(server)
        beat = 0.0
        while self.alive:
            if time.monotonic() - beat >= 1.0:
                self.notify()
                beat = time.monotonic()
            gevent.sleep(STOP_POLL_SECONDS)
        for listener, server, pool in zip(self.sockets, servers, pools):
            self._drain(listener, server, pool)
        deadline = time.monotonic() + self.cfg.graceful_timeout
        while any(pool.free_count() != pool.size for pool in pools):
            if time.monotonic() >= deadline:
                self.log.warning("Worker graceful timeout (pid:%s)", self.pid)
                for server in servers:
                    server.stop(timeout=1)
                return
            self.notify()
            gevent.sleep(STOP_POLL_SECONDS)

    def _drain(self, listener: Any, server: StreamServer, pool: Pool) -> None:
        """Stop accepting, hand every connection still in the listening socket's queue to the
        pool, then close the socket (a connection that comes after is refused, not reset)."""
        bound = _Bound(listener.getsockname())
        server.stop_accepting()
        listener.setblocking(False)
        while True:
            try:
                client, addr = listener.accept()
            except OSError:                     # BlockingIOError: the queue is empty
                break
            pool.spawn(self.handle, bound, client, addr)
        server.close()

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
        peer = addr[0] if isinstance(addr, tuple) else ""
        if self._over_limit(peer):
            util.write_nonblock(client, json_error(
                429, "Too Many Requests",
                f"more than {self._per_address} open connections from one address"))
            util.close(client)
            return
        me = gevent.getcurrent()
        self._sockets[me] = client
        try:
            super().handle(listener, client, addr)
        finally:
            self._served.discard(me)
            self._sockets.pop(me, None)
            self._left(peer)

    def _over_limit(self, peer: str) -> bool:
        """Whether `peer` already holds the connections one address may (a proxy named in
        forwarded_allow_ips holds any number); else this connection is counted."""
        if self._per_address and not self._proxies.trusted(peer):
            if self._open.get(peer, 0) >= self._per_address:
                return True
        self._open[peer] = self._open.get(peer, 0) + 1
        return False

    def _left(self, peer: str) -> None:
        count = self._open.get(peer, 0) - 1
        if count > 0:
            self._open[peer] = count
        else:
            self._open.pop(peer, None)

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
    rather than an exception of the server inside the app, and which is refused (413) once it
    proves longer than BODY_BYTES. A chunked body declares no length: werkzeug reads it up to
    the app's limit and stops there without looking further, so the app would parse the first
    64 KiB of a longer body as if it were the whole. Here, a read that reaches the limit looks
    for one byte more."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.read_bytes = inner, 0

    def _read(self, how: str, *args: Any) -> Any:
        try:
            data = getattr(self.inner, how)(*args)
            self.read_bytes += len(data) if how != "readlines" else sum(map(len, data))
            if self.read_bytes > serving.BODY_BYTES or (
                    data and self.read_bytes == serving.BODY_BYTES and self.inner.read(1)):
                raise RequestEntityTooLarge()
            return data
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


class _Bound:
    """A closed listening socket's address, for the connections taken from its queue at a stop
    (gunicorn's handler asks its listener for its address)."""

    def __init__(self, name: Any) -> None:
        self.name = name

    def getsockname(self) -> Any:
        return self.name


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
