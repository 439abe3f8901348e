"""`python bench/soak.py --fairness`: health after 1,000 abandoned pages, and cached answers under
a 16-connection flood of expensive pages."""

from __future__ import annotations

import multiprocessing
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from server_load import free_port  # noqa: E402
from soak_client import NORMAL, Soak, connect, expensive, get, pct, run_part, start  # noqa: E402


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
        def abandon_all() -> None:
            for _ in range(1000):
                _abandon_one(soak)

        burst = threading.Thread(target=abandon_all)
        burst.start()
        stop = time.time() + 5
        while time.time() < stop:
            t = time.perf_counter()
            assert get(port, "/api/health")[0] == 200
            health.append(time.perf_counter() - t)
            time.sleep(0.01)
        burst.join()
        soak.stop = time.time() + seconds
        floods = [multiprocessing.Process(target=run_part, args=(soak, soak.flood, (), multiprocessing.Queue()))
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
