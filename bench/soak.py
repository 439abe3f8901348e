"""Load and soak: `kbq serve` on 127.0.0.1 under 64 connections, good and bad queries mixed.

    python bench/soak.py                 # 60 s at 64 connections
    python bench/soak.py --seconds 10    # a short run

Every response must be the expected one: 200 for a good query, 400 with the JSON error shape
for a bad one. Anything else (5xx, a dropped connection, a 400 for a good query) is an error.
Prints answers/s, p50/p99 latency, error count and the server's memory every 10 s.
The client is bounded (fixed connections, fixed duration) and only talks to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import QUERIES, free_port, start_server, tree_rss_kb  # noqa: E402

BAD = ["train 13B qlroa on 20GB", "serve 70B 16", "<script>alert(1)</script>", "serve 70B on h10",
       "x" * 600, "serve 70B int4 \u202e\u0000 users", "", "max users for", "'; DROP TABLE gpus; --"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--connections", type=int, default=64)
    args = ap.parse_args()
    port = free_port()
    proc = start_server(port)
    mix = [(q, 200) for q in QUERIES] + [(q, 400) for q in BAD]
    paths = [("/api/answer?" + urllib.parse.urlencode({"q": q}), want) for q, want in mix]
    try:
        lock = threading.Lock()
        lat: list[float] = []
        counts = {"ok": 0, "expected_400": 0, "errors": 0}
        kinds: dict[str, int] = {}
        samples: list[tuple[float, int]] = [(0.0, tree_rss_kb(proc.pid))]
        stop = time.time() + args.seconds
        t0 = time.time()

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
                    body = resp.read()
                    good = resp.status == want and (want == 200 or "error" in json.loads(body))
                    why = f"status {resp.status} for {path[:40]}"
                except (OSError, http.client.HTTPException, ValueError) as exc:
                    good = False
                    why = type(exc).__name__
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                with lock:
                    lat.append(time.perf_counter() - t)
                    counts["errors" if not good else ("ok" if want == 200 else "expected_400")] += 1
                    if not good:
                        kinds[why] = kinds.get(why, 0) + 1
            conn.close()

        threads = [threading.Thread(target=client, args=(k,)) for k in range(args.connections)]
        for th in threads:
            th.start()
        while any(th.is_alive() for th in threads):
            time.sleep(min(10, max(0.1, stop - time.time())))
            samples.append((time.time() - t0, tree_rss_kb(proc.pid)))
        for th in threads:
            th.join()
        dt = time.time() - t0
        s = sorted(lat)
        print(f"{len(s)} requests in {dt:.0f} s at {args.connections} connections: {len(s) / dt:,.0f}/s")
        print(f"  200 answers {counts['ok']}, expected 400s {counts['expected_400']}, errors {counts['errors']}")
        if kinds:
            print("  errors by kind: " + ", ".join(f"{k}: {v}" for k, v in sorted(kinds.items())))
        print(f"  latency p50 {s[len(s) // 2] * 1000:.0f} ms, p99 {s[int(len(s) * 0.99)] * 1000:.0f} ms")
        print("  server memory (MB): " + ", ".join(f"{t:.0f}s {kb / 1024:.0f}" for t, kb in samples))
        return 1 if counts["errors"] else 0
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
