"""kbq's speed and memory figures, each next to its baseline and target, in one run.

    python bench/run.py            # the full run (about 3 minutes)
    python bench/run.py --quick    # shorter loops, for a smoke check
    python bench/run.py --cold     # only: the CLI cold start in a clean venv
    python bench/run.py --million  # only: the engine's resident memory over 1,000,000 answers
    python bench/run.py --server   # only: the server under load (64 connections, 30 s a load)

1. CLI cold start: a clean venv holding only `pip install .` (no system site packages; pip
   byte-compiles), wall time of `kbq QUERY`, `kbq --json QUERY` and a query error, each run
   right after `python -I -c pass` of the same venv; the ratio is the median of those pairs.
2. Engine in process: answers per second on one core (CPU time of this process) over typical
   queries (parse, walk, every candidate GPU), then with Answer.to_dict too; memory growth over
   many answers.
3. `kbq --batch`: answers per second, JSON Lines out, with the default worker processes and with one.
4. Server: `kbq serve` on 127.0.0.1 driven by a bounded client (64 keep-alive connections on threads):
   answers/s, p50/p99 latency, errors, server memory at start and end.
5. Catalogue scaling: answer time with 10x the GPUs and models (generated, not shipped).
6. The slowest answers of the generated corpus (bench/slowest.py), in CPU time: each <= 100 ms.

The parts live in cold.py (1), inprocess.py (2, 3, 5, 6 and --million), server_load.py (4) and
common.py (the bench queries, the table of figures, the subprocess environment).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cold import cold_start  # noqa: E402
from common import print_table  # noqa: E402
from inprocess import batch, engine, million, scaling, slowest_answers  # noqa: E402
from server_load import CONNECTIONS, server  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--million", action="store_true",
                    help="only the engine's resident memory over 1,000,000 answers (about 10 minutes)")
    ap.add_argument("--cold", action="store_true", help="only the CLI cold start")
    ap.add_argument("--slowest", action="store_true", help="only the slowest answers of the corpus")
    ap.add_argument("--server", action="store_true", help="only the server under load (64 connections)")
    args = ap.parse_args()
    q = args.quick
    print(f"kbq benchmark — {time.strftime('%Y-%m-%d')} — {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    if args.server:
        server(10 if q else 30, CONNECTIONS)
        print_table()
        return 0
    if args.million:
        million(1_000_000)
        print_table()
        return 0
    if args.slowest:
        slowest_answers()
        print_table()
        return 0
    cold_start(5 if q else 21)
    if args.cold:
        print_table()
        return 0
    engine(3 if q else 10, 2000 if q else 20000)
    batch(1000 if q else 10000)
    server(10 if q else 60, CONNECTIONS)
    scaling(1 if q else 3)
    slowest_answers()
    print_table()
    return 0


if __name__ == "__main__":
    sys.exit(main())
