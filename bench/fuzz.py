"""The long fuzz run: many generated queries and expressions, counted by outcome.

    python bench/fuzz.py                       # 100,000 queries and 20,000 expressions, seed 0
    python bench/fuzz.py --queries 1000 --expressions 500 --seed 7
    python bench/fuzz.py --json                # the same figures as data

The generators and the properties are those of tests/test_fuzz.py (tests/fuzz_queries.py,
tests/fuzz_exprs.py, tests/fuzz_checks.py), driven by `random.Random`
with a fixed seed instead of hypothesis, so a run is repeatable. A query must give an Answer
(serialisable to JSON) or a QueryError with its column in 1..len(query)+1 and a caret; an
expression must parse to an Expr or raise ExprSyntaxError, and evaluate on random finite floats
to a value or an EvalError. Anything else is counted as a failure and the shortest input of each
kind is printed as a reproducer. Exit code 1 when there is any failure.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import fuzz_checks as fc  # noqa: E402
import fuzz_exprs as fe  # noqa: E402
import fuzz_queries as fq  # noqa: E402


def _pick(r: random.Random, mix: dict[str, int]) -> str:
    names = list(mix)
    return r.choices(names, weights=[mix[n] for n in names])[0]


def _failure_kind(exc: BaseException) -> str:
    if isinstance(exc, AssertionError):
        return f"property broken: {str(exc).splitlines()[0][:80] if str(exc) else 'assertion'}"
    return f"crash: {type(exc).__name__}: {str(exc).splitlines()[0][:80] if str(exc) else ''}"


def run(kind: str, n: int, seed: int, generators: dict[str, Any], mix: dict[str, int],
        check: Any) -> dict[str, Any]:
    r = random.Random(seed)
    outcomes: Counter[str] = Counter()
    by_generator: Counter[str] = Counter()
    failures: dict[str, list[str]] = {}
    slowest = (0.0, "")
    start = time.perf_counter()
    for _ in range(n):
        name = _pick(r, mix)
        text = generators[name](r)
        by_generator[name] += 1
        t0 = time.perf_counter()
        try:
            outcome = check(text, r)
        except Exception as exc:  # counted and reported, never raised
            outcome = _failure_kind(exc)
        if outcome.startswith(("known", "crash", "property")):
            failures.setdefault(outcome, []).append(text)
        dt = time.perf_counter() - t0
        if dt > slowest[0]:
            slowest = (dt, text)
        outcomes[outcome] += 1
    elapsed = time.perf_counter() - start
    return {
        "kind": kind, "count": n, "seed": seed, "seconds": round(elapsed, 2),
        "per_second": round(n / elapsed, 1) if elapsed else None,
        "slowest_s": round(slowest[0], 4), "slowest_input": slowest[1][:120],
        "generators": dict(sorted(by_generator.items())),
        "outcomes": dict(outcomes.most_common()),
        "reproducers": {k: min(v, key=len)[:200] for k, v in failures.items()},
    }


def query_errors_by_message(n: int, seed: int) -> Counter[str]:
    """What the QueryErrors say, the numbers taken out (for the error-kind table)."""
    import re

    from kb import ask
    from kb.errors import QueryError

    r = random.Random(seed)
    kinds: Counter[str] = Counter()
    for _ in range(n):
        text = fq.QUERY_GENERATORS[_pick(r, fq.QUERY_MIX)](r)
        try:
            ask(text)
        except QueryError as err:
            message = re.sub(r"'[^']*'", "'…'", err.message)
            kinds[re.sub(r"\d[\d.e+]*", "N", message)] += 1
        except Exception:
            pass
    return kinds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queries", type=int, default=100_000)
    p.add_argument("--expressions", type=int, default=20_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    reports = [
        run("queries", args.queries, args.seed, fq.QUERY_GENERATORS, fq.QUERY_MIX,
            lambda text, r: fc.check_query(text)),
        run("expressions", args.expressions, args.seed + 1, fe.EXPR_GENERATORS, fe.EXPR_MIX,
            lambda text, r: fc.check_expr(text, lambda: fe.finite_float(r))),
    ]
    messages = query_errors_by_message(min(args.queries, 20_000), args.seed)
    unexpected = [k for rep in reports for k in rep["reproducers"] if not k.startswith("known")]
    if args.json:
        print(json.dumps({"runs": reports, "query_error_messages": dict(messages.most_common()),
                          "unexpected": unexpected}, indent=2, ensure_ascii=True))
        return 1 if unexpected else 0
    for rep in reports:
        print(f"{rep['kind']}: {rep['count']} in {rep['seconds']} s ({rep['per_second']}/s), "
              f"seed {rep['seed']}; slowest {rep['slowest_s']} s")
        print("  generated: " + ", ".join(f"{k} {v}" for k, v in rep["generators"].items()))
        for outcome, count in rep["outcomes"].items():
            print(f"  {count:>7}  {outcome}")
        for outcome, text in rep["reproducers"].items():
            print(f"  reproducer for {outcome}: {text!r}")
    print(f"query error messages (first {sum(messages.values())} QueryErrors of the same stream):")
    for message, count in messages.most_common(15):
        print(f"  {count:>7}  {message}")
    print("unexpected failures: " + (", ".join(unexpected) if unexpected else "none"))
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
