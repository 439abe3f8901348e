"""`python bench/soak.py --reload N`: requests answered while `kbq serve --rules DIR` rebuilds a
catalogue N times the shipped one, then the edit reverted."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import tree_rss_kb  # noqa: E402
from server_load import free_port  # noqa: E402
from soak_client import NORMAL, get, pct, start  # noqa: E402


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
    proc = start(port, None, "--rules", str(root))
    try:
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
