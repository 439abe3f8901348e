"""`kbq serve` under load: 127.0.0.1 driven by a bounded client (keep-alive connections on
threads): answers/s, p50/p99 latency, errors, the server's memory at start and end
(`python bench/run.py --server`).
"""

from __future__ import annotations

import http.client
import itertools
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from common import QUERIES, env, row, tree_rss_kb


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return int(port)


CACHE_MB = 32      # kbq serve --cache-mb (its default)
CONNECTIONS = 64   # keep-alive clients of the server load


def start_server(port: int) -> subprocess.Popen[bytes]:
    """`kbq serve` on 127.0.0.1:port, returned once it accepts connections (or after 30 s)."""
    proc = subprocess.Popen([shutil.which("kbq") or "kbq", "serve", "--port", str(port), "--cache-mb", str(CACHE_MB)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env())
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.2)
    return proc


def distinct_paths(kn: Any) -> Callable[[int], str]:
    """The i-th query of a stream in which no query repeats: the bench queries in turn, each
    with a context (serving) or sequence length (training) of its own, so every answer is
    computed afresh (no answer cache can serve it)."""
    from kb.query.parse import parse

    training = set(kn.query["training_tasks"])
    kinds = [parse(q, kn).task in training for q in QUERIES]

    def path(i: int) -> str:
        k = i // len(QUERIES)
        q = QUERIES[i % len(QUERIES)].rstrip("?")
        q += f" seq {512 + k}" if kinds[i % len(QUERIES)] else f" {1024 + k} context"
        return "/api/answer?q=" + urllib.parse.quote_plus(q)
    return path


def server(seconds: float, connections: int) -> None:
    """Three loads on one `kbq serve`: the typical mix of the API (the ten bench queries over and
    over: what people ask again is given from the server's answer cache after its first time),
    the same on the page (which always computes the options), then a stream of API queries in
    which no query repeats (every answer computed: the engine-bound figure)."""
    from kb import get_knowledge

    print("4. server", flush=True)
    port = free_port()
    proc = start_server(port)
    try:
        typical = ["/api/answer?q=" + urllib.parse.quote_plus(q) for q in QUERIES]
        for p in typical:  # warm up
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", p)
            c.getresponse().read()
            c.close()
        start_rss = tree_rss_kb(proc.pid)
        load(port, seconds, connections, lambda i: typical[i % len(typical)],
             "typical queries, repeats from the answer cache")
        pages = ["/?q=" + urllib.parse.quote_plus(q) for q in QUERIES]
        for _ in range(4):        # warm up: each page in each process's cache
            load(port, 0.5, 4, lambda i: pages[i % len(pages)], "", report=False)
        load(port, seconds / 2, connections, lambda i: pages[i % len(pages)],
             "the page with its options, typical queries, repeats from the answer cache")
        load(port, seconds / 2, connections, distinct_paths(get_knowledge()), "every query distinct, all computed")
        end_rss = tree_rss_kb(proc.pid)
        from kb import cpu_cores

        bound = cpu_cores() * (CACHE_MB + 20)
        row("server, memory start -> end (all processes)", f"{start_rss / 1024:.0f} -> {end_rss / 1024:.0f} MB", "-",
            f"bounded: grows <= {bound} MB (answer cache {CACHE_MB} MB + 20 MB a process)",
            end_rss - start_rss < bound * 1024)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def load(port: int, seconds: float, connections: int, path: Callable[[int], str], label: str,
         report: bool = True) -> None:
    """`connections` keep-alive clients on threads, each asking path(i) for a shared, rising i."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    counter = itertools.count()
    stop = time.time() + seconds

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while time.time() < stop:
            p = path(next(counter))
            t = time.perf_counter()
            try:
                conn.request("GET", p)
                resp = conn.getresponse()
                resp.read()
                ok = resp.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            with lock:
                latencies.append(time.perf_counter() - t)
                errors[0] += 0 if ok else 1
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(connections)]
    t0 = time.time()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    dt = time.time() - t0
    if not report:
        return
    lat = sorted(latencies)
    p50 = lat[len(lat) // 2] * 1000
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
    rate = len(lat) / dt
    want = 300 if "distinct" in label else 2000
    row(f"server ({label}), answers/s at {connections} connections",
        f"{rate:,.0f} ({len(lat)} in {dt:.0f} s)", "-", f">= {want:,}", rate >= want)
    row(f"server ({label}), latency p50 / p99", f"{p50:.0f} / {p99:.0f} ms", "-", "p99 <= 500 ms", p99 <= 500)
    row(f"server ({label}), errors", str(errors[0]), "-", "0", errors[0] == 0)
