"""How `kbq serve` runs the app: gunicorn's arbiter supervising gevent workers.

In: host, port, the number of worker processes and of answer threads in each, a rules
directory or None. Out: a server on host:port until SIGTERM or Ctrl-C (SIGINT), which drain
the requests in flight and return (exit 0).

The process management is gunicorn's (its arbiter, driven here through its documented custom
application interface, BaseApplication): the parent binds the port (a port it cannot have is an
error before anything is printed), loads the app and the knowledge once (preload_app), and forks
the workers, so every worker answers its first request from knowledge already in memory. The
arbiter replaces a worker that dies or stops reporting, reloads the workers on SIGHUP without
closing the port (new workers first, then the old ones finish what they hold), stops
gracefully on SIGTERM and SIGINT (stop accepting, finish requests in flight within
GRACEFUL_SECONDS, exit 0), and a worker whose parent is gone exits within a second, so the port
is free after any stop. The worker class (server.worker) is gunicorn's gevent worker: an event
loop holds every connection, so a slow or idle client costs a socket, never a thread; answers
are computed on a small pool of threads beside it (server.fairness). Every limit is below.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any

from flask import Flask

from server import create_app
from server.application import KbqApplication

Ready = Callable[[str, str], None]   # (url, how it serves: processes and threads)

# ---- limits (each is stated in the README's serving section)
HEADER_SECONDS = 10        # a request line and headers must arrive within this; also the idle keep-alive
SEND_SECONDS = 30          # a response the client does not read for this long closes its connection
GRACEFUL_SECONDS = 10      # on SIGTERM/SIGINT/SIGHUP, requests in flight get this long to finish
WORKER_SILENT_SECONDS = 30  # a worker whose event loop does not report for this long is replaced
CONNECTIONS = 1000         # open connections per worker process (bench/soak.py: ~700 held add ~70 MB)
CONNECTIONS_PER_ADDRESS = 64   # of which one client address may hold (a proxy named in
                           # --forwarded-allow-ips: no limit); past it: 429 and closed
BACKLOG = 2048             # connections the kernel holds before a worker accepts them
REQUEST_LINE_BYTES = 8190  # gunicorn's maximum; a 500-character query of 4-byte characters is 6,000
HEADER_FIELDS = 50         # header fields in a request
HEADER_FIELD_BYTES = 8190  # one header field
BODY_BYTES = 64 * 1024     # a request body (the app's MAX_CONTENT_LENGTH): refused before it is read
SOCKET_BUFFER_BYTES = 64 * 1024   # kernel send/receive buffer asked for each connection
ANSWER_BUDGET_S = 1.0      # CPU seconds for an answer's costliest searches (kb.engine.search.budget)
SEARCH_PROBES = 5000       # probes an answer's capacity searches may make (kb.engine.search.budget; the
                           # generated corpus's most is 2,390: how many GPUs over the catalogue)
CLIENT_SLOTS = 1           # answers one address may have computing at once, per worker


def load_app(rules: str | None, embed_origins: list[str] | None = None, cache_mb: float = 0,
             threads: int = 2, per_address: int = CONNECTIONS_PER_ADDRESS) -> Flask:
    """The app with its knowledge loaded, so that no request waits for a build."""
    config: dict[str, Any] = {"KBQ_CACHE_MB": cache_mb, "KBQ_ANSWER_SLOTS": threads,
                              "KBQ_CONNECTIONS_PER_ADDRESS": per_address,
                              "KBQ_CLIENT_SLOTS": CLIENT_SLOTS, "KBQ_ANSWER_BUDGET_S": ANSWER_BUDGET_S,
                              "KBQ_SEARCH_PROBES": SEARCH_PROBES,
                              "MAX_CONTENT_LENGTH": BODY_BYTES}
    if rules:
        config["KBQ_RULES"] = rules
    if embed_origins:
        config["KBQ_EMBED_ORIGINS"] = embed_origins
    from kb.query.parse import parser

    app = create_app(config)
    try:
        kn = app.extensions["kbq"].get()
    except Exception:  # noqa: BLE001 - the pages and /api/health show the rule errors
        return app
    parser()        # the query grammar's parser, made before the workers fork: none builds it
    _warm(kn)
    warm(app, [*BUILT_PAGES, *(f"/flows/{f.id}" for f in kn.flows)])
    return app


BUILT_PAGES = ("/sources", "/rules", "/gpus", "/models", "/flows")


def warm(app: Flask, paths: list[str]) -> None:
    """Ask the app once for each page of the knowledge, plain and gzipped, before the workers
    are forked: each is built once (server.browse), compressed once (server.compress), and every
    worker starts with them in memory."""
    client = app.test_client()
    for path in paths:
        for accept in ("identity", "gzip"):
            client.get(path, headers={"Accept-Encoding": accept}).close()


# answered once before the workers fork (_warm)
WARM_QUERY = "serve 7B int4 16 users on h100"


def _warm(kn: Any) -> None:
    """Answer one question before the workers fork, so that the modules an answer imports on
    first use are imported once, here, and every worker inherits them: a worker's first
    questions, answered at once on its pool of threads, would otherwise import them
    concurrently beside gevent's event loop, which left some of them unanswered (issue 39)."""
    from kb import answer_in
    from kb.errors import KbError

    try:
        answer_in(kn, WARM_QUERY)
    except KbError:                 # rules that cannot answer it still serve their pages
        pass


def url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port; OSError (with strerror) if it cannot be had."""
    if not 0 <= port <= 65535:
        raise OSError(0, f"port {port} is not between 0 and 65535")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as err:
        raise OSError(0, f"unknown host ({err.strerror})") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def settings(fd: int, processes: int, forwarded_allow_ips: str = "") -> dict[str, Any]:
    """gunicorn's settings for `kbq serve` (its names, https://docs.gunicorn.org/en/stable/settings.html),
    listening on the socket whose descriptor is fd.
    `forwarded_allow_ips`: the proxies whose forwarding headers are believed, by gunicorn (the
    scheme) and by kbq (X-Forwarded-For names the client, server.fairness); none by default, not
    gunicorn's default of 127.0.0.1 (any program on the machine could then pose as any client)."""
    return {
        "bind": [f"fd://{fd}"],
        "workers": processes,
        "worker_class": "server.worker.KbqWorker",
        "worker_connections": CONNECTIONS,
        "backlog": BACKLOG,
        "keepalive": HEADER_SECONDS,
        "timeout": WORKER_SILENT_SECONDS,
        "graceful_timeout": GRACEFUL_SECONDS,
        "limit_request_line": REQUEST_LINE_BYTES,
        "limit_request_fields": HEADER_FIELDS,
        "limit_request_field_size": HEADER_FIELD_BYTES,
        "forwarded_allow_ips": forwarded_allow_ips,
        "preload_app": True,
        "proc_name": "kbq",
        "loglevel": "warning",
        "errorlog": "-",
        "accesslog": None,
        "control_socket_disable": True,
    }


def serve(host: str, port: int, processes: int, threads: int, rules: str | None,
          ready: Ready, embed_origins: list[str] | None = None,
          sock: socket.socket | None = None, cache_mb: float = 0,
          forwarded_allow_ips: str = "", per_address: int = CONNECTIONS_PER_ADDRESS) -> None:
    """Serve until stopped; `ready` is called once the workers are being started."""
    if os.name == "nt":
        raise OSError(0, "kbq serve runs on POSIX systems (Linux, macOS); gunicorn does not run on Windows")

    sock = sock or listen(host, port)
    sock.set_inheritable(True)
    app = load_app(rules, embed_origins, cache_mb, threads, per_address)
    bound = url(host, sock.getsockname()[1])
    how = (f"{processes} process{'es' if processes != 1 else ''} x {threads} answer "
           f"thread{'s' if threads != 1 else ''}, gunicorn with gevent")
    # gunicorn takes the descriptor over: it makes a socket of its own from it and closes this
    # number. The socket here lets go of it, or its finalizer would close whatever reuses the
    # number later (in a worker, on Python 3.13, the event loop's epoll descriptor at exit).
    fd = sock.detach()
    KbqApplication(app, settings(fd, processes, forwarded_allow_ips), lambda: ready(bound, how)).run()

