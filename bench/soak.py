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
fixed duration, and only 127.0.0.1's port is ever connected to. The clients are in
bench/soak_client.py, the --reload and --fairness runs in bench/soak_reload.py and
bench/soak_fairness.py.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import QUERIES, tree_rss_kb  # noqa: E402
from server_load import free_port  # noqa: E402
from soak_client import BAD, NORMAL, Soak, biggest_file, get, pct, run_part, start  # noqa: E402
from soak_fairness import fairness  # noqa: E402
from soak_reload import reload  # noqa: E402


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
        parts: dict[str, list[tuple[Callable[..., None], tuple[object, ...]]]] = {
            "idle": [(soak.idle, (200,))], "abandon": [(soak.abandon, (1000, 15.0))],
            "bodies": [(soak.big_body, ())] * 6, "flood": [(soak.flood, ())] * 16}
        if "pipelined" not in without:
            parts["pipelined"] = [(soak.pipelined, (400,))]
        results: multiprocessing.Queue[dict[str, int]] = multiprocessing.Queue()
        procs = [multiprocessing.Process(target=run_part, args=(soak, fn, a, results))
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
