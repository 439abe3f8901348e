"""How `kbq serve` runs the app: one waitress process per core, sharing one listening socket.

In: host, port, the number of processes and of threads in each, a rules directory or None.
Out: a server on host:port until Ctrl-C or SIGTERM, which stop every process and return.

An answer is CPU work in Python, so one process is bound to one core by the GIL. The parent
binds the socket (a port it cannot have is an error before anything is printed), builds the app
and loads the knowledge, then forks `processes` children that accept from that socket, so every
child answers its first request from knowledge already in memory; a child that dies is
replaced. Each child is a waitress server: its event loop reads whole requests, however slowly
they arrive, before a thread runs the app, so a slow or idle client costs a socket and never a
thread. A request whose headers are not complete after HEADER_SECONDS, and a connection idle
for IDLE_SECONDS, are closed. Errors that waitress answers itself (a request line or headers
over the limit, a bad chunk size) are the API's JSON error shape. Where fork is missing
(Windows), waitress serves in one process.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from flask import Flask

Ready = Callable[[str, str], None]   # (url, how it serves: processes and threads)

HEADER_SECONDS = 10       # a request line and headers must arrive within this
IDLE_SECONDS = 30         # a keep-alive connection with nothing to do is closed after this
CONNECTIONS = 4000        # open connections per process (each costs a socket and ~10 kB)
MAX_HEADER_BYTES = 16 * 1024   # a 500-character query of 4-byte characters is 6,000 encoded


def load_app(rules: str | None, embed_origins: list[str] | None = None, cache_mb: float = 0) -> Flask:
    """The app with its knowledge loaded, so that no request waits for a build."""
    from server import create_app

    config: dict[str, Any] = {"KBQ_CACHE_MB": cache_mb}
    if rules:
        config["KBQ_RULES"] = rules
    if embed_origins:
        config["KBQ_EMBED_ORIGINS"] = embed_origins
    app = create_app(config)
    try:
        app.extensions["kbq"].get()
    except Exception:  # noqa: BLE001 - the pages and /api/health show the rule errors
        pass
    return app


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
        if os.name != "nt":     # on Windows the option lets a socket take a port in use
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def check_port(host: str, port: int) -> None:
    """Raise OSError now if host:port cannot be listened on."""
    listen(host, port).close()


def serve(host: str, port: int, processes: int, threads: int, rules: str | None,
          ready: Ready, embed_origins: list[str] | None = None,
          sock: socket.socket | None = None, cache_mb: float = 0) -> None:
    """Serve until stopped; `ready` is called once the socket listens."""
    sock = sock or listen(host, port)
    app = load_app(rules, embed_origins, cache_mb)
    bound = url(host, sock.getsockname()[1])
    plural = f"{'es' if processes != 1 else ''} x {threads} thread{'s' if threads != 1 else ''}"
    if not hasattr(os, "fork"):
        ready(bound, f"1 process x {threads} threads: this platform cannot fork, so one "
                     "process serves")
        _run(app, sock, threads)
        return
    ready(bound, f"{processes} process{plural}")
    Supervisor(app, sock, processes, threads).run()


def _run(app: Flask, sock: socket.socket, threads: int) -> None:
    """One waitress server on `sock` until SIGTERM or SIGINT."""
    import logging

    from server.waitress_json import create

    # waitress warns on every request that waits for a thread; under load that is every one
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    server = create(app, sock, threads=threads, connection_limit=CONNECTIONS,
                    channel_timeout=IDLE_SECONDS, header_timeout=HEADER_SECONDS,
                    max_request_header_size=MAX_HEADER_BYTES)
    try:
        server.run()
    except (KeyboardInterrupt, SystemExit):
        pass


class Supervisor:
    """The parent: forks the children, replaces one that dies, stops them all on a signal."""

    def __init__(self, app: Flask, sock: socket.socket, processes: int, threads: int) -> None:
        self.app, self.sock, self.processes, self.threads = app, sock, processes, threads
        self.children: set[int] = set()
        self.stopping = False

    def spawn(self) -> None:
        pid = os.fork()
        if pid == 0:                       # the child
            signal.signal(signal.SIGTERM, _exit_quietly)
            signal.signal(signal.SIGINT, _exit_quietly)
            code = 0
            try:
                _run(self.app, self.sock, self.threads)
            except BaseException:  # noqa: BLE001 - the parent replaces a child that fails
                import traceback

                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        self.children.add(pid)

    def stop(self, *_: Any) -> None:
        self.stopping = True

    def run(self) -> None:
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        for _ in range(self.processes):
            self.spawn()
        while not self.stopping:
            self.reap(replace=True)
            time.sleep(0.2)
        for pid in self.children:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while self.children and time.monotonic() < deadline:
            self.reap(replace=False)
            time.sleep(0.05)
        for pid in self.children:
            _signal(pid, signal.SIGKILL)
        self.sock.close()

    def reap(self, replace: bool) -> None:
        for pid in list(self.children):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                self.children.discard(pid)
                if replace and not self.stopping:
                    print(f"kbq: process {pid} stopped; starting another", file=sys.stderr)
                    self.spawn()


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _exit_quietly(*_: Any) -> None:
    raise SystemExit(0)
