"""How `kbq serve` runs the app: several processes, each with threads.

In: host, port, the number of processes and of threads in each, a rules directory or None.
Out: a server on host:port until Ctrl-C or SIGTERM, which stop every process and return.

An answer is CPU work in Python, so one process is bound to one core by the GIL. On POSIX,
gunicorn's pre-fork master runs `processes` gthread workers that accept from one listening
socket. The master builds the app and loads the knowledge before it forks (preload), so every
worker, and any worker started later to replace one that died, answers its first request from
knowledge already in memory. After the fork each process owns its copy: with a rules directory,
each one notices edits and rebuilds on its own (server/live.py). Where gunicorn cannot run
(Windows), waitress serves the app in one process with threads.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable
from typing import Any

from flask import Flask

Ready = Callable[[str, str], None]   # (url, how it serves: processes and threads)


def load_app(rules: str | None) -> Flask:
    """The app with its knowledge loaded, so that no request waits for a build."""
    from server import create_app

    app = create_app({"KBQ_RULES": rules} if rules else None)
    try:
        app.extensions["kbq"].get()
    except Exception:  # noqa: BLE001 - the pages and /api/health show the rule errors
        pass
    return app


def url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def check_port(host: str, port: int) -> None:
    """Raise OSError now if host:port cannot be listened on (gunicorn would retry for 5 s)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    with socket.socket(family, kind, proto) as s:
        if os.name != "nt":     # on Windows the option lets a socket take a port in use
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as the server will
        s.bind(address)


def gunicorn_available() -> bool:
    if not hasattr(os, "fork"):
        return False
    try:
        import gunicorn.app.base  # noqa: F401
    except ImportError:
        return False
    return True


def serve(host: str, port: int, processes: int, threads: int, rules: str | None,
          ready: Ready) -> None:
    """Serve until stopped; `ready` is called as the workers start."""
    app = load_app(rules)
    if gunicorn_available():
        _gunicorn(app, host, port, processes, threads, ready)
        return
    import waitress

    ready(url(host, port), f"1 process x {threads} threads: gunicorn cannot run on this "
                           "platform, so waitress serves in one process")
    waitress.serve(app, host=host, port=port, threads=threads, ident="kbq")


def _gunicorn(app: Flask, host: str, port: int, processes: int, threads: int,
              ready: Ready) -> None:
    from gunicorn.app.base import BaseApplication

    bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def when_ready(arbiter: Any) -> None:     # in the master, before the workers are forked
        bound = arbiter.LISTENERS[0].sock.getsockname()[1] if arbiter.LISTENERS else port
        ready(url(host, bound), f"{processes} process{'es' if processes != 1 else ''} "
                                f"x {threads} thread{'s' if threads != 1 else ''}")

    settings: dict[str, Any] = {
        "bind": [bind],
        "workers": processes,
        "worker_class": "gthread",
        "threads": threads,
        "preload_app": True,
        # Linux: each worker listens on a socket of its own and the kernel spreads new
        # connections evenly over them. With one shared socket, whichever worker wakes first
        # takes a burst of connections, and keep-alive pins them there: 32 connections were
        # split 26/6, 23/9, 8/24 between two workers, and p99 doubled.
        "reuse_port": sys.platform == "linux" and port != 0,
        "keepalive": 5,
        "graceful_timeout": 10,
        # a 500-character query of 4-byte characters is 6,000 characters percent-encoded
        "limit_request_line": 8190,
        "accesslog": None,
        "errorlog": "-",
        "loglevel": "warning",
        "proc_name": "kbq",
        "control_socket_disable": True,   # recent gunicorn opens one in $HOME unless told not to
        "when_ready": when_ready,
    }

    class Application(BaseApplication):  # type: ignore[misc]
        def load_config(self) -> None:
            for key, value in settings.items():
                if key in self.cfg.settings:
                    self.cfg.set(key, value)

        def load(self) -> Flask:
            return app

    Application().run()
