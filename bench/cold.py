"""The CLI cold start: every command a user starts, in a clean venv holding only `pip install .`
(no system site packages; pip byte-compiles), each run right after `python -I -c pass` of the
same venv; the ratio is the median of those pairs (`python bench/run.py --cold`).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import QUERIES, ROOT, env, row, wall

LIMIT_RATIO = 10.0     # every command within 10x a bare interpreter: perceptually instant


def clean_venv(where: Path) -> Path:
    """A venv that holds only `pip install .` and its dependencies, as a user gets it (no system
    site packages, pip byte-compiles). KBQ_BENCH_WHEELS=DIR installs from a wheel cache
    (pip --no-index --find-links DIR) where the network is slow."""
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    wheels = os.environ.get("KBQ_BENCH_WHEELS")
    source = ["--no-index", "--find-links", wheels] if wheels else []
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *source, str(ROOT)],
                   check=True, env=env(), stdout=subprocess.DEVNULL)
    return venv


def cold_start(n: int) -> None:
    """Each round runs the bare interpreter of the clean venv, then each kbq command, so every
    command has a baseline measured next to it; the ratio is the median of the per-round ratios
    (drift in the machine's load moves both sides of a pair alike)."""
    print("1. CLI cold start (a clean venv holding only `pip install .`)", flush=True)
    where = Path(tempfile.mkdtemp(prefix="kbq-bench-"))
    try:
        venv = clean_venv(where)
        py, kbq = str(venv / "bin" / "python"), str(venv / "bin" / "kbq")
        environ = {**env(), "KBQ_CACHE_DIR": str(where / "cache")}   # its own snapshot, not evicted
        # the first run builds the snapshot; the second, once the installed rule files are a
        # few seconds old, keeps their stats in it (kb.knowledge.snapshot), as any later run of kbq finds it
        subprocess.run([kbq, QUERIES[0]], stdout=subprocess.DEVNULL, env=environ, check=True)
        time.sleep(3)
        subprocess.run([kbq, QUERIES[0]], stdout=subprocess.DEVNULL, env=environ, check=True)
        commands = {"kbq QUERY": [kbq, QUERIES[0]], "kbq --json QUERY": [kbq, "--json", QUERIES[0]],
                    "kbq ask QUERY": [kbq, "ask", QUERIES[0]], "kbq gpus": [kbq, "gpus"],
                    "kbq models": [kbq, "models"], "kbq rules": [kbq, "rules"],
                    "kbq validate --help": [kbq, "validate", "--help"],
                    "kbq (query error)": [kbq, "serve 70B int4 16 users on 2x"]}  # a count with no GPU
        bare = [py, "-I", "-c", "pass"]
        floors: list[float] = []
        times: dict[str, list[float]] = {k: [] for k in commands}
        ratios: dict[str, list[float]] = {k: [] for k in commands}
        for _ in range(n):
            for label, cmd in commands.items():
                floor = wall(bare, environ)
                t = wall(cmd, environ)
                floors.append(floor)
                times[label].append(t)
                ratios[label].append(t / floor)
        floor_ms = statistics.median(floors) * 1000
        for label in commands:
            t_ms, ratio = statistics.median(times[label]) * 1000, statistics.median(ratios[label])
            row(f"cold start, {label}", f"{t_ms:.0f} ms = {ratio:.2f}x (median of {n} paired ratios)",
                f"python -I -c pass {floor_ms:.0f} ms (median, same venv)", f"<= {LIMIT_RATIO:g}x", ratio <= LIMIT_RATIO)
    finally:
        shutil.rmtree(where, ignore_errors=True)
