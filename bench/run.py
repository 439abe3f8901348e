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
6. The slowest answers of the generated corpus (bench/slowest.py), in CPU time: each <= 20 ms.
"""

from __future__ import annotations

import argparse
import copy
import http.client
import itertools
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
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


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.pop("PYTHONDONTWRITEBYTECODE", None)
    return e


def median_time(cmd: list[str], n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env(), check=False)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def wall(cmd: list[str], environ: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environ, check=False)
    return time.perf_counter() - t


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
                f"python -I -c pass {floor_ms:.0f} ms (median, same venv)", "<= 4.5x", ratio <= 4.5)
    finally:
        shutil.rmtree(where, ignore_errors=True)


def engine(seconds: float, million: int) -> None:
    print("2. engine in process", flush=True)
    from kb import get_knowledge
    from kb.engine import answer
    from kb.query.parse import parse

    kn = get_knowledge()
    for q in QUERIES:
        answer(parse(q, kn), kn, q).to_dict()
    parse_time(kn, 300 if seconds < 5 else 2000)

    def rate(serialise: bool) -> float:
        n, t0 = 0, time.process_time()
        while time.process_time() - t0 < seconds:
            for q in QUERIES:
                a = answer(parse(q, kn), kn, q)
                if serialise:
                    a.to_dict()
                n += 1
        return n / (time.process_time() - t0)

    r = rate(False)
    row("engine, answers/s (one core: parse, walk, every GPU)", f"{r:,.0f} ({1e6 / r:.0f} us each)", "-",
        "retired (was >= 10,000)", None)
    r = rate(True)
    row("engine + Answer.to_dict, answers/s (one core)", f"{r:,.0f} ({1e6 / r:.0f} us each)", "-",
        "retired (was >= 10,000)", None)
    floor(seconds / 2)
    with_options(seconds / 2)
    tracemalloc.start()
    for i in range(200):
        q = QUERIES[i % len(QUERIES)]
        answer(parse(q, kn), kn, q).to_dict()
    base, _ = tracemalloc.get_traced_memory()
    for i in range(million):
        q = QUERIES[i % len(QUERIES)]
        answer(parse(q, kn), kn, q).to_dict()
    after, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    row(f"engine, memory growth over {million:,} answers", f"{(after - base) / 1e6:+.2f} MB",
        f"{base / 1e6:.1f} MB after warm-up", "flat (< 1 MB)", after - base < 1e6)


def parse_time(kn: Any, repeats: int) -> None:
    """The parse of a query alone (kb.query.parse.parse: lexer, the LALR parse of lark's tables, the words resolved
    into a Workload), each query's median over `repeats` calls after the warm-up, then the
    median over the queries. Nothing is cached between calls."""
    from kb.query.parse import parse

    per_query = []
    for q in QUERIES:
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            parse(q, kn)
            times.append(time.perf_counter() - t)
        per_query.append(statistics.median(times) * 1e6)
    med = statistics.median(per_query)
    row("parse of a query, median over the bench queries", f"{med:.0f} us (each {min(per_query):.0f} to "
        f"{max(per_query):.0f} us)", "-", "<= 150 us", med <= 150)


OPTION_QUERIES = ["can I run llama 3 70B on a 4090", "7b on 8gb", "full fine-tune 13b on rtx 4090",
                  "serve 70b int4 16 users on l40s"]


def with_options(seconds: float) -> None:
    """The in-process cost of an answer with its options (what to change so it fits): each
    option is one more engine run, so this is what the page pays where it shows them."""
    from kb import ask

    for q in OPTION_QUERIES:
        ask(q, options=True)
    n, count, t0 = 0, 0, time.process_time()
    while time.process_time() - t0 < seconds:
        for q in OPTION_QUERIES:
            count += len(ask(q, options=True).options or [])
            n += 1
    r = n / (time.process_time() - t0)
    row("answer + options, answers/s (one core)", f"{r:,.0f} ({1e6 / r:.0f} us each, "
        f"{count / max(n, 1):.1f} options)", "-", "-", None)


def floor(seconds: float) -> None:
    """What the engine target leaves no room for, measured on the same ten queries: lark's
    LALR parse alone (the query grammar must stay a lark LALR grammar), and the formulas an
    answer evaluates, each case it tries run through its compiled closure with nothing around
    it (no trace, no claims, no rows, no ranking)."""
    import kb.engine as engine
    import importlib

    # the module, not the function kb.engine re-exports under the same name
    evaluation = importlib.import_module("kb.engine.evaluate")
    from kb import get_knowledge
    from kb.expr.parse import Col
    from kb.query.parse import _lex, parse

    kn = get_knowledge()

    def per_answer(fn: Any) -> float:
        n, t0 = 0, time.process_time()
        while time.process_time() - t0 < seconds:
            fn()
            n += len(QUERIES)
        return (time.process_time() - t0) / n * 1e6

    parse_us = per_answer(lambda: [_lex(q) for q in QUERIES])    # lexer + the LALR parse of lark's tables
    seen: list[tuple[Any, Any]] = []
    evaluate = evaluation._eval_formula
    evaluation._eval_formula = lambda f, ev: (seen.append((f, ev.scope)), evaluate(f, ev))[1]
    try:
        for q in QUERIES:
            engine.answer(parse(q, kn), kn, q)
    finally:
        evaluation._eval_formula = evaluate
    calls: list[tuple[Any, Any]] = []           # (closure, the scope it ran on) as the engine ran them
    for f, scope in seen:
        for case in f.cases:
            if case.when is not None:
                calls.append((case.when.fn, scope))
                holds = case.when.fn(scope)
                if holds.__class__ is not Col and not holds:
                    continue
            calls.append((case.expr.fn, scope))
            break

    def run_closures() -> None:
        for fn, scope in calls:
            try:
                fn(scope)
            except Exception:
                pass

    closures_us = per_answer(run_closures)
    row("engine floor: the LALR parse alone (lark's tables) + the formulas' closures alone (no trace, claims, rows)",
        f"{parse_us:.0f} + {closures_us:.0f} = {parse_us + closures_us:.0f} us an answer "
        f"({len(calls) / len(QUERIES):.0f} closures)", "-", "retired (was <= 100 us, 10,000/s)", None)


def batch(lines: int) -> None:
    print("3. kbq --batch", flush=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        for i in range(lines):
            f.write(QUERIES[i % len(QUERIES)] + "\n")
        name = f.name
    for label, extra in ((f"{os.cpu_count()} processes (default)", []), ("--jobs 1", ["--jobs", "1"])):
        t = time.perf_counter()
        out = subprocess.run([shutil.which("kbq") or "kbq", "--batch", name, *extra], capture_output=True,
                             env=env())
        dt = time.perf_counter() - t
        got = len(out.stdout.splitlines())
        row(f"kbq --batch, answers/s, {label}", f"{got / dt:,.0f} ({got} lines in {dt:.1f} s, JSON Lines out)",
            "-", ">= 5,000", got / dt >= 5000)
    os.unlink(name)


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
    want = 400 if "distinct" in label else 2000
    row(f"server ({label}), answers/s at {connections} connections",
        f"{rate:,.0f} ({len(lat)} in {dt:.0f} s)", "-", f">= {want:,}", rate >= want)
    row(f"server ({label}), latency p50 / p99", f"{p50:.0f} / {p99:.0f} ms", "-", "p99 <= 500 ms", p99 <= 500)
    row(f"server ({label}), errors", str(errors[0]), "-", "0", errors[0] == 0)


def scaling(repeats: int) -> None:
    print("5. catalogue scaling", flush=True)
    import yaml

    from kb.engine import answer
    from kb.knowledge.build import build
    from kb.paths import rules_dir
    from kb.query.parse import parse

    def timed(kn: object) -> float:
        best = []
        for _ in range(repeats):
            t = time.perf_counter()
            for q in QUERIES:
                answer(parse(q, kn), kn, q)  # type: ignore[arg-type]
            best.append(time.perf_counter() - t)
        return min(best) / len(QUERIES)

    base = build(rules_dir())
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "rules"
        shutil.copytree(rules_dir(), big)
        for name, key in (("gpus.yaml", "gpus"), ("models.yaml", "models")):
            data = yaml.safe_load((big / name).read_text())
            extra = []
            for k in range(1, 10):
                for item in data[key]:
                    clone = copy.deepcopy(item)
                    clone["id"] = f"{item['id']}-x{k}"
                    clone["aliases"] = []
                    clone["name"] = f"{item['name']} x{k}"
                    extra.append(clone)
            data[key] += extra
            (big / name).write_text(yaml.safe_dump(data, sort_keys=False))
        kn10 = build(big)
        t1, t10 = timed(base), timed(kn10)
        ratio = t10 / t1
        row(f"scaling, {len(base.gpus)} → {len(kn10.gpus)} GPUs, {len(base.models)} → {len(kn10.models)} models",
            f"{t1 * 1000:.1f} → {t10 * 1000:.1f} ms per answer ({ratio:.1f}x)", "10x catalogue",
            "<= linear (<= 10x)", ratio <= 10.5)


def slowest_answers() -> None:
    """The slowest answers of the corpus (bench/slowest.py: CPU time, the fastest of two runs)."""
    print("7. the slowest answers of the corpus", flush=True)
    sys.path.insert(0, str(ROOT / "bench"))
    from slowest import LIMIT_MS, corpus, timings

    queries = corpus()
    times = timings(queries, 2)
    worst = times[0][0]
    row(f"slowest answer of {len(queries)} (CPU time, best of 2)", f"{worst:.1f} ms: " + "; ".join(
        f"{q!r} {ms:.1f}" for ms, q in times[:3]), f"median {statistics.median(t for t, _ in times):.1f} ms",
        f"<= {LIMIT_MS:g} ms", worst <= LIMIT_MS)


def million(n: int) -> None:
    """Resident memory of one process over n answers (no tracemalloc: it would double the time)."""
    print(f"6. engine memory over {n:,} answers", flush=True)
    from kb import get_knowledge
    from kb.engine import answer
    from kb.query.parse import parse

    kn = get_knowledge()
    for q in QUERIES * 20:
        answer(parse(q, kn), kn, q).to_dict()
    start = rss_kb(os.getpid())
    samples = []
    t0 = time.perf_counter()
    for i in range(n):
        q = QUERIES[i % len(QUERIES)]
        answer(parse(q, kn), kn, q).to_dict()
        if (i + 1) % (n // 10) == 0:
            samples.append(rss_kb(os.getpid()))
    dt = time.perf_counter() - t0
    row(f"engine, resident memory over {n:,} answers", f"{start / 1024:.1f} -> {samples[-1] / 1024:.1f} MB "
        f"(every tenth: {', '.join(f'{x / 1024:.1f}' for x in samples)}; {dt:.0f} s)", "after 200 answers",
        "flat", samples[-1] - start < 1024)


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
        print("\n| figure | value | baseline | target | met |\n|---|---|---|---|---|")
        for r in ROWS:
            print("| " + " | ".join(r) + " |")
        return 0
    if args.million:
        million(1_000_000)
        print("\n| figure | value | baseline | target | met |\n|---|---|---|---|---|")
        for r in ROWS:
            print("| " + " | ".join(r) + " |")
        return 0
    if args.slowest:
        slowest_answers()
        print("\n| figure | value | baseline | target | met |\n|---|---|---|---|---|")
        for r in ROWS:
            print("| " + " | ".join(r) + " |")
        return 0
    cold_start(5 if q else 21)
    if args.cold:
        print("\n| figure | value | baseline | target | met |\n|---|---|---|---|---|")
        for r in ROWS:
            print("| " + " | ".join(r) + " |")
        return 0
    engine(3 if q else 10, 2000 if q else 20000)
    batch(1000 if q else 10000)
    server(10 if q else 60, CONNECTIONS)
    scaling(1 if q else 3)
    slowest_answers()
    print("\n| figure | value | baseline | target | met |\n|---|---|---|---|---|")
    for r in ROWS:
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
