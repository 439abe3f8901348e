"""The clients of bench/soak.py: a `kbq serve` started for a run, plain requests and raw
connections from a loopback address of their own, and Soak, the hostile parts (pipelined, idle,
abandoned, huge bodies, a flood of expensive pages) and the normal client, each counted."""

from __future__ import annotations

import http.client
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import QUERIES, env  # noqa: E402

BAD = ["train 13B qlroa on 20GB", "serve 70B 16", "<script>alert(1)</script>", "serve 70B on h10",
       "x" * 600, "serve 70B int4 \u202e\u0000 users", "", "max users for", "'; DROP TABLE gpus; --"]
NORMAL = "/api/answer?q=" + urllib.parse.quote_plus("serve 7B fp16 on rtx 4090")


def start(port: int, temp: str | None = None, *args: str) -> subprocess.Popen[bytes]:
    """`kbq serve` on `port` (with `args`; TMPDIR `temp` if given), once /api/health answers."""
    proc = subprocess.Popen([shutil.which("kbq") or "kbq", "serve", "--port", str(port), *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**env(), **({"TMPDIR": temp} if temp else {})})
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if get(port, "/api/health")[0] == 200:
                break
        except OSError:
            time.sleep(0.2)
    return proc


def get(port: int, path: str, timeout: float = 30) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def connect(source: str, port: int, timeout: float = 10) -> socket.socket:
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    return s


def expensive(i: int) -> str:
    return "/?q=" + urllib.parse.quote_plus(f"max users for llama-3.1-8b at {1024 + i} context")


class Soak:
    def __init__(self, port: int, seconds: float) -> None:
        self.port, self.stop = port, time.time() + seconds
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()
        self.held: list[socket.socket] = []
        self.serial = iter(range(10_000_000))

    def count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + n

    def running(self) -> bool:
        return time.time() < self.stop

    def pipelined(self, n: int) -> None:
        request = f"GET /api/answer?q={urllib.parse.quote_plus(QUERIES[0])} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        for _ in range(n):
            try:
                s = connect("127.0.0.4", self.port)
                s.setblocking(False)
                for _ in range(300):
                    s.send(request)
            except BlockingIOError:
                pass
            except OSError:
                self.count("pipelined refused")
                continue
            self.held.append(s)
            self.count("pipelined connections")
        while self.running():
            time.sleep(0.5)
        for s in self.held:
            s.close()

    def idle(self, n: int) -> None:
        conns: list[socket.socket] = []
        while self.running():
            conns = [s for s in conns if not _closed(s)]
            while len(conns) < n and self.running():
                try:
                    conns.append(connect("127.0.0.6", self.port))
                    self.count("idle connections")
                except OSError:
                    self.count("idle refused")
                    break
            time.sleep(1)
        for s in conns:
            s.close()

    def big_body(self) -> None:
        head = (b"POST /api/answer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1000000000\r\n\r\n")
        chunk = b"x" * 65536
        while self.running():
            try:
                s = connect("127.0.0.5", self.port)
                s.sendall(head)
                s.settimeout(0.2)
                reply = b""
                for _ in range(16384):             # at most 1 GB
                    if not self.running():
                        break
                    try:
                        s.sendall(chunk)
                    except TimeoutError:
                        pass
                    try:
                        got = s.recv(4096)
                        if not got:
                            break
                        reply += got
                    except TimeoutError:
                        pass
                self.count("1 GB bodies refused 413" if reply.startswith(b"HTTP/1.1 413") else "1 GB bodies other")
                s.close()
            except OSError:
                self.count("1 GB bodies closed")

    def abandon(self, n: int, every: float) -> None:
        while self.running():
            t = time.time()
            for _ in range(n):
                try:
                    s = connect("127.0.0.3", self.port)
                    s.sendall(f"GET {expensive(next(self.serial))} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                    s.close()
                    self.count("abandoned pages")
                except OSError:
                    self.count("abandoned refused")
            time.sleep(max(0.0, every - (time.time() - t)))

    def flood(self) -> None:
        while self.running():
            try:
                status, _ = get(self.port, expensive(next(self.serial)), timeout=60)
                self.count(f"flood {status}")
            except OSError:
                self.count("flood errors")

    def every(self, path: str, name: str, out: list[tuple[float, int]]) -> None:
        while self.running():
            t = time.perf_counter()
            try:
                status = get(self.port, path, timeout=30)[0]
            except OSError:
                status = 0
            out.append((time.perf_counter() - t, status))
            time.sleep(max(0.0, 0.1 - (time.perf_counter() - t)))
        self.count(name, len(out))


def run_part(soak: Soak, fn: object, args: tuple[object, ...], results: "multiprocessing.Queue[dict[str, int]]") -> None:
    getattr(soak, fn.__name__)(*args)  # type: ignore[attr-defined]
    results.put(soak.counts)


def _closed(s: socket.socket) -> bool:
    try:
        s.setblocking(False)
        return s.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))] if s else float("nan")


def biggest_file(folder: str) -> int:
    sizes = [0]
    for root, _, files in os.walk(folder):
        for f in files:
            try:
                sizes.append(os.path.getsize(os.path.join(root, f)))
            except OSError:
                pass
    return max(sizes)
