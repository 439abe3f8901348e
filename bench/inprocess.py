"""The figures measured inside one process or of `kbq --batch`: the engine's rate, the parse, the
engine floor, answers with their options, memory over many answers, catalogue scaling and the
slowest answers of the generated corpus (bench/slowest.py).
"""

from __future__ import annotations

import copy
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from common import QUERIES, ROOT, env, row, rss_kb


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
        f"{max(per_query):.0f} us)", "-", "retired (was <= 150 us)", None)


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
    evaluation: Any = importlib.import_module("kb.engine.evaluate")
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

    def watched(f: Any, ev: Any) -> Any:
        seen.append((f, ev.scope))
        return evaluate(f, ev)

    evaluation._eval_formula = watched
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
            "-", "retired (was >= 5,000)", None)
    os.unlink(name)


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
    """The slowest answers of the corpus (bench/slowest.py: CPU time, the fastest of two runs, of
    eight for the forty slowest)."""
    print("7. the slowest answers of the corpus", flush=True)
    sys.path.insert(0, str(ROOT / "bench"))
    from slowest import LIMIT_MS, slowest

    times, median, n = slowest()
    worst = times[0][0]
    row(f"slowest answer of {n} (CPU time, best of 2; of 8 for the 40 slowest)", f"{worst:.1f} ms: " + "; ".join(
        f"{q!r} {ms:.1f}" for ms, q in times[:3]), f"median {median:.1f} ms",
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
