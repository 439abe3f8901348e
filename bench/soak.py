"""Soak: `kbq serve` under a hostile mix for 60 s while a normal client asks every 100 ms.

    python bench/soak.py                 # 60 s, the whole mix
    python bench/soak.py --seconds 15    # a short run
    python bench/soak.py --mix           # the former soak: 64 connections, good and bad queries
    python bench/soak.py --reload 10     # requests while --rules DIR rebuilds a 10x catalogue
    python bench/soak.py --fairness      # health after abandoned pages; cached answers under a flood

The hostile mix, all at once, each from a loopback address of its own (127.0.0.2 …: the server
tells clients apart by address; every connection goes to 127.0.0.1):
- 400 connections that pipeline requests and never read a response;
- 6 connections at a time sending a 1 GB body (a new one when the server refuses one);
- 1,000 expensive pages sent and abandoned at once, again every 15 s;
- 16 connections asking distinct expensive pages (the capacity question with options) in a loop;
- 200 idle connections, reopened when the server closes them.
Meanwhile the normal client (127.0.0.1) asks for an answer other people asked before (cached)
every 100 ms, and a health probe asks /api/health every 100 ms. Passes when every normal
request is answered, its p99 <= 1 s, the server's memory (master and workers) stays <= 1 GB, and
no file over 1 MB appears in the server's temporary directory. Bounded: fixed connections, a
fixed duration, and only 127.0.0.1's port is ever connected to.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import QUERIES, env, tree_rss_kb  # noqa: E402
from server_load import free_port  # noqa: E402

BAD = ["train 13B qlroa on 20GB", "serve 70B 16", "<script>alert(1)</script>", "serve 70B on h10",
       "x" * 600, "serve 70B int4 \u202e\u0000 users", "", "max users for", "'; DROP TABLE gpus; --"]
NORMAL = "/api/answer?q=" + urllib.parse.quote_plus("serve 7B fp16 on rtx 4090")


def start(port: int, temp: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([shutil.which("kbq") or "kbq", "serve", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**env(), "TMPDIR": temp})
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


def _part(soak: Soak, fn: object, args: tuple[object, ...], results: "multiprocessing.Queue[dict[str, int]]") -> None:
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


def hostile(seconds: float, without: list[str]) -> int:
    port = free_port()
    temp = tempfile.mkdtemp(prefix="kbq-soak-")
    proc = start(port, temp)
    soak = Soak(port, seconds)
    normal: list[tuple[float, int]] = []
    health: list[tuple[float, int]] = []
    try:
        for _ in range(4):
            get(port, NORMAL)                    # the normal client's answer, given before
        start_rss = tree_rss_kb(proc.pid)
        # each hostile part in a process of its own, so the normal client's timings are the
        # server's and not the wait for this interpreter's lock behind the hostile threads
        parts = {"idle": [(soak.idle, (200,))], "abandon": [(soak.abandon, (1000, 15.0))],
                 "bodies": [(soak.big_body, ())] * 6, "flood": [(soak.flood, ())] * 16}
        if "pipelined" not in without:
            parts["pipelined"] = [(soak.pipelined, (400,))]
        results: multiprocessing.Queue[dict[str, int]] = multiprocessing.Queue()
        procs = [multiprocessing.Process(target=_part, args=(soak, fn, a, results))
                 for name, fns in parts.items() if name not in without for fn, a in fns]
        for p in procs:
            p.start()
        jobs = [threading.Thread(target=soak.every, args=(NORMAL, "normal requests", normal)),
                threading.Thread(target=soak.every, args=("/api/health", "health probes", health))]
        for job in jobs:
            job.start()
        peak_rss, peak_file, samples = start_rss, 0, []
        while soak.running():
            time.sleep(1)
            rss = tree_rss_kb(proc.pid)
            peak_rss, peak_file = max(peak_rss, rss), max(peak_file, biggest_file(temp))
            samples.append(rss)
        for job in jobs:
            job.join()
        for _ in procs:
            for k, v in results.get(timeout=120).items():
                soak.count(k, v)
        for p in procs:
            p.join(timeout=30)
        lat = [t for t, _ in normal]
        failed = sum(1 for _, status in normal if status != 200)
        hl = [t for t, _ in health]
        print(f"hostile mix for {seconds:.0f} s, on {os.cpu_count()} cores:")
        print("  " + ", ".join(f"{k}: {v}" for k, v in sorted(soak.counts.items())))
        print(f"  normal client: {len(normal)} requests, {failed} not answered 200; latency p50 "
              f"{pct(lat, 0.5) * 1000:.0f} ms, p99 {pct(lat, 0.99) * 1000:.0f} ms, max {max(lat) * 1000:.0f} ms")
        print(f"  /api/health: p50 {pct(hl, 0.5) * 1000:.0f} ms, p99 {pct(hl, 0.99) * 1000:.0f} ms, "
              f"max {max(hl) * 1000:.0f} ms")
        print(f"  server memory: {start_rss / 1024:.0f} MB at start, peak {peak_rss / 1024:.0f} MB "
              f"(every second: {', '.join(f'{s / 1024:.0f}' for s in samples[::10])} …)")
        print(f"  largest temporary file: {peak_file:,} bytes")
        ok = (failed == 0 and pct(lat, 0.99) <= 1.0 and peak_rss <= 1024 * 1024 and peak_file <= 1 << 20)
        print("  PASS" if ok else "  FAIL")
        return 0 if ok else 1
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def mix(seconds: float, connections: int) -> int:
    """The former soak: 64 connections asking good and bad queries; every response as expected."""
    port = free_port()
    proc = start(port, tempfile.gettempdir())
    paths = [("/api/answer?" + urllib.parse.urlencode({"q": q}), want)
             for q, want in [(q, 200) for q in QUERIES] + [(q, 400) for q in BAD]]
    lock, lat, errors = threading.Lock(), [], [0]
    stop = time.time() + seconds

    def client(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        i = k
        while time.time() < stop:
            path, want = paths[i % len(paths)]
            i += 1
            t = time.perf_counter()
            try:
                conn.request("GET", path)
                resp = conn.getresponse()
                good = resp.status == want and (want == 200 or "error" in json.loads(resp.read()))
            except (OSError, http.client.HTTPException, ValueError):
                good = False
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            with lock:
                lat.append(time.perf_counter() - t)
                errors[0] += 0 if good else 1
        conn.close()

    try:
        threads = [threading.Thread(target=client, args=(k,)) for k in range(connections)]
        t0 = time.time()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        dt = time.time() - t0
        print(f"{len(lat)} requests in {dt:.0f} s at {connections} connections: {len(lat) / dt:,.0f}/s, "
              f"errors {errors[0]}, p50 {pct(lat, 0.5) * 1000:.0f} ms, p99 {pct(lat, 0.99) * 1000:.0f} ms")
        return 1 if errors[0] else 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def reload(grow: int) -> int:
    """Requests while `--rules DIR` rebuilds after a large valid edit (the GPU and model
    catalogues `grow` times over), then after the edit is reverted: latency against idle, and
    the server's memory before, with and after."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from kb.paths import rules_dir
    from tests.test_server_reload import _grow

    port, folder = free_port(), tempfile.mkdtemp(prefix="kbq-reload-")
    root = Path(folder) / "rules"
    shutil.copytree(rules_dir(), root)
    originals = {n: (root / n).read_text(encoding="utf-8") for n in ("gpus.yaml", "models.yaml")}
    proc = subprocess.Popen([shutil.which("kbq") or "kbq", "serve", "--port", str(port), "--rules", str(root)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env())
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if get(port, "/api/health")[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)

        def asks(until: Callable[[], bool]) -> list[float]:
            out: list[float] = []
            while not until() and len(out) < 20_000:
                t = time.perf_counter()
                status, _ = get(port, NORMAL)
                out.append(time.perf_counter() - t)
                assert status == 200, status
                time.sleep(0.01)
            return out

        def loaded_after(stamp: str) -> Callable[[], bool]:
            seen: set[int] = set()

            def check() -> bool:
                body = json.loads(get(port, "/api/health")[1])
                if body["rules"]["loaded_at"] > stamp and not body["rules"]["errors"]:
                    seen.add(body["process"])
                return len(seen) >= 2
            return check

        stop = time.time() + 10
        idle = asks(lambda: time.time() > stop)
        stamp = json.loads(get(port, "/api/health")[1])["rules"]["loaded_at"]
        before = tree_rss_kb(proc.pid)
        time.sleep(1.1)
        t0 = time.time()
        _grow(root, grow)
        during = asks(loaded_after(stamp))
        took = time.time() - t0
        grown = tree_rss_kb(proc.pid)
        stamp = json.loads(get(port, "/api/health")[1])["rules"]["loaded_at"]
        time.sleep(1.1)
        for name, text in originals.items():
            (root / name).write_text(text, encoding="utf-8")
        during += asks(loaded_after(stamp))
        time.sleep(1)
        after = tree_rss_kb(proc.pid)
        print(f"live reload of {grow}x the GPU and model catalogues ({took:.1f} s until both workers "
              f"served it), then reverted:")
        print(f"  idle: {len(idle)} requests, p50 {pct(idle, 0.5) * 1000:.1f} ms, p99 {pct(idle, 0.99) * 1000:.1f} ms")
        print(f"  during the rebuilds: {len(during)} requests, p50 {pct(during, 0.5) * 1000:.1f} ms, "
              f"p99 {pct(during, 0.99) * 1000:.1f} ms ({pct(during, 0.99) / pct(idle, 0.99):.1f}x idle)")
        print(f"  server memory: {before / 1024:.0f} MB before, {grown / 1024:.0f} MB with the edit, "
              f"{after / 1024:.0f} MB reverted")
        return 0 if pct(during, 0.99) <= 3 * pct(idle, 0.99) else 1
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


def fairness(seconds: float) -> int:
    """The two fairness figures alone: /api/health right after 1,000 expensive pages are sent and
    abandoned (from 127.0.0.3), and another user's cached answers while 16 connections (from
    127.0.0.2) ask distinct expensive pages."""
    port = free_port()
    proc = start(port, tempfile.gettempdir())
    soak = Soak(port, 1e9)
    try:
        for _ in range(4):
            get(port, NORMAL)
        health: list[float] = []
        burst = threading.Thread(target=lambda: [_abandon_one(soak) for _ in range(1000)])
        burst.start()
        stop = time.time() + 5
        while time.time() < stop:
            t = time.perf_counter()
            assert get(port, "/api/health")[0] == 200
            health.append(time.perf_counter() - t)
            time.sleep(0.01)
        burst.join()
        soak.stop = time.time() + seconds
        floods = [multiprocessing.Process(target=_part, args=(soak, soak.flood, (), multiprocessing.Queue()))
                  for _ in range(16)]
        for p in floods:
            p.start()
        time.sleep(2)
        cached: list[tuple[float, int]] = []
        soak.every(NORMAL, "normal requests", cached)
        for p in floods:
            p.join(timeout=90)
        lat = [t for t, status in cached if status == 200]
        print(f"/api/health while 1,000 abandoned expensive pages arrive: {len(health)} probes, p50 "
              f"{pct(health, 0.5) * 1000:.0f} ms, p99 {pct(health, 0.99) * 1000:.0f} ms, max {max(health) * 1000:.0f} ms")
        print(f"a cached answer while 16 connections flood expensive pages: {len(lat)} of {len(cached)} "
              f"answered, p50 {pct(lat, 0.5) * 1000:.0f} ms, p99 {pct(lat, 0.99) * 1000:.0f} ms")
        return 0 if max(health) <= 0.1 and pct(lat, 0.5) <= 0.02 else 1
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _abandon_one(soak: Soak) -> None:
    s = connect("127.0.0.3", soak.port)
    s.sendall(f"GET {expensive(next(soak.serial))} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    s.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--without", action="append", default=[], metavar="PART",
                    choices=["pipelined", "idle", "abandon", "bodies", "flood"],
                    help="leave a part of the hostile mix out (to see what each costs)")
    ap.add_argument("--reload", type=int, metavar="TIMES", default=0,
                    help="live reload instead: the catalogues TIMES over, then reverted")
    ap.add_argument("--fairness", action="store_true",
                    help="only: health after 1,000 abandoned pages; cached answers under a 16-connection flood")
    ap.add_argument("--mix", action="store_true", help="the former soak: good and bad queries at 64 connections")
    args = ap.parse_args()
    if args.fairness:
        return fairness(min(args.seconds, 20))
    if args.reload:
        return reload(args.reload)
    return mix(args.seconds, 64) if args.mix else hostile(args.seconds, args.without)


if __name__ == "__main__":
    sys.exit(main())
