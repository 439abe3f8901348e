"""What every part of kbq's benchmark shares: the ten bench queries, the table of figures each
part adds a row to, the environment its subprocesses run in, wall time and resident memory.

Each part is a module of its own (cold.py: the CLI cold start; inprocess.py: the engine, --batch,
scaling, memory, the slowest answers; server_load.py: `kbq serve` under load); run.py runs them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

QUERIES = [
    "serve 70B int4 16 users", "train 13B qlora on 20GB?", "full fine-tune 7B",
    "serve llama-3.1-70b awq 32 users 8k context on 2x L40S",
    "fine-tune mistral 7b lora bf16 seq 4096 batch 8 on rtx 4090",
    "infer 7B fp16 on rtx 4000 ada vs rtx 6000 ada", "which gpu for 13B lora",
    "mixtral 8x7b q4_k_m on 2x 3090", "infer llama-3-8b q4_k_m on rtx 4090 with llama.cpp",
    "qlora llama-3.1-8b seq 2048 batch 2 with torchtune on rtx 4090",
]
ROWS: list[tuple[str, str, str, str, str]] = []


def row(name: str, value: str, baseline: str, target: str, met: bool | None) -> None:
    ROWS.append((name, value, baseline, target, "-" if met is None else ("yes" if met else "NO")))
    print(f"  {name}: {value}   (baseline {baseline}; target {target})", flush=True)


def print_table() -> None:
    """The rows so far as the Markdown table bench/README.md quotes."""
    print("\n| figure | value | baseline | target | met |\n|---|---|---|---|---|")
    for r in ROWS:
        print("| " + " | ".join(r) + " |")


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.pop("PYTHONDONTWRITEBYTECODE", None)
    return e


def wall(cmd: list[str], environ: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environ, check=False)
    return time.perf_counter() - t


def tree_rss_kb(pid: int) -> int:
    """Resident memory of a process and its children (the server's master and its workers)."""
    total = rss_kb(pid)
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    return total + sum(tree_rss_kb(int(c)) for c in children)


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0
