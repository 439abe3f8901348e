"""Limits on what enters kbq: long names, and what validation's workload sweep costs.

    python bench/limits.py           # about 20 seconds

1. The vocabulary (kb.query.words.vocabulary) of the shipped knowledge plus one model whose
   family is N characters long, built in this process with the name cap bypassed (the model is
   added as a --model-config view would add it): CPU time (other work on the machine does not
   count) and tracemalloc peak, for N from 1,000 to 300,000. Next to it, the set of every prefix
   of that one name, which is what the vocabulary held before (its size alone, measured up to 10,000 characters and then
   extrapolated as N²/2 bytes, since building it for 100,000 characters takes ~5 GB).
2. The installed `kbq`: `--model-config` with a model_type of 100,000 and 300,000 characters,
   and `kbq validate` of a rules copy with a 100,000-character GPU alias: exit status, CPU
   time and the process's peak resident memory (GNU time, /usr/bin/time).
3. Validation: CPU time of building the shipped knowledge (kb.knowledge.build, what `kbq
   validate` runs), with the workload sweep of kb.engine.flows.sweep and with it left out, first build in a
   fresh process and the best of three after, and `kbq validate`'s own wall and CPU time.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LLAMA = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
         "num_key_value_heads": 8, "vocab_size": 128256, "intermediate_size": 14336,
         "max_position_embeddings": 131072, "model_type": "llama"}


def vocabulary_cost(n: int) -> tuple[float, float]:
    """CPU seconds and peak MB to build the vocabulary with one family name of n characters."""
    from dataclasses import replace

    from kb import get_knowledge
    from kb.query.words import vocabulary

    kn = get_knowledge()
    model = {**next(iter(kn.models.values())), "id": "bench-long", "family": "x" * n, "aliases": []}
    view = replace(kn, models={**kn.models, "bench-long": model})
    tracemalloc.start()
    t = time.process_time()
    vocabulary(view)
    seconds = time.process_time() - t
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return seconds, peak


def prefix_set_mb(n: int) -> float:
    """MB held by the set of every prefix of one n-character name (the former structure)."""
    name = "x" * n
    tracemalloc.start()
    prefixes = {name[:i] for i in range(1, n + 1)}
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    del prefixes
    return peak


def run_kbq(args: list[str], cwd: Path) -> tuple[int, float, float, str]:
    """Exit status, CPU seconds, peak RSS in MB (GNU time's %U, %S and %M: the process's own,
    not the forking parent's, which a child's rusage would count) and the first line of stderr."""
    kbq = shutil.which("kbq") or "kbq"
    p = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", kbq, *args], cwd=cwd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, errors="replace", check=False)
    lines = p.stderr.splitlines()
    user, system, rss = lines[-1].split()
    return p.returncode, float(user) + float(system), int(rss) / 1024, lines[0]


BUILD = """
import sys, time
if sys.argv[1] == "without":
    import kb.engine.flows.sweep
    kb.engine.flows.sweep.check = lambda kn, doc: []
from kb.knowledge.build import build
t = time.process_time(); build(sys.argv[2]); first = time.process_time() - t
later = []
for _ in range(3):
    t = time.process_time(); build(sys.argv[2]); later.append(time.process_time() - t)
print(first, min(later))
"""


def build_cpu(mode: str) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", BUILD, mode, str(ROOT / "rules")], capture_output=True,
                         text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


def main() -> int:
    print("| figure | value |\n|---|---|")
    for n in (1_000, 10_000, 100_000, 300_000):
        seconds, peak = vocabulary_cost(n)
        print(f"| vocabulary with a {n:,}-character name (cap bypassed) | {seconds * 1000:.0f} ms, "
              f"peak {peak:.1f} MB |", flush=True)
    for n in (1_000, 10_000):
        print(f"| before: the set of every prefix of a {n:,}-character name | {prefix_set_mb(n):.1f} MB "
              f"(100,000: ~{100_000 ** 2 / 2 / 1e9:.0f} GB, N²/2 bytes) |", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        for n in (100_000, 300_000):
            (where / "config.json").write_text(json.dumps({**LLAMA, "model_type": "x" * n}))
            code, seconds, rss, err = run_kbq(["--model-config", "config.json", "serve 4 users"], where)
            print(f"| kbq --model-config, model_type of {n:,} characters | exit {code}, CPU "
                  f"{seconds * 1000:.0f} ms, peak RSS {rss:.0f} MB: {err.split(': ', 2)[-1]} |", flush=True)
        rules = where / "rules"
        shutil.copytree(ROOT / "rules", rules)
        gpus = rules / "gpus.yaml"
        text = gpus.read_text(encoding="utf-8")
        gpus.write_text(text.replace("    aliases: [", "    aliases: [" + "x" * 100_000 + ", ", 1),
                        encoding="utf-8")
        code, seconds, rss, err = run_kbq(["validate", str(rules)], where)
        print(f"| kbq validate, a GPU alias of 100,000 characters | exit {code}, CPU {seconds * 1000:.0f} ms, "
              f"peak RSS {rss:.0f} MB: {err.split(': ', 1)[-1][:60]}… |", flush=True)
    from kb.engine.flows.sweep import PER_TASK, workload_queries
    from kb import get_knowledge

    n = len(workload_queries(get_knowledge()))
    for mode in ("without", "with"):
        first, later = build_cpu(mode)
        print(f"| build of the shipped rules, {mode} the sweep ({n} workloads, {PER_TASK} a task) | "
              f"CPU {first * 1000:.0f} ms first, {later * 1000:.0f} ms after |", flush=True)
    t = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "%U %S", shutil.which("kbq") or "kbq", "validate"],
                       capture_output=True, text=True, check=False)
    user, system = map(float, r.stderr.split()[-2:])
    print(f"| kbq validate (shipped rules), exit {r.returncode} | {time.perf_counter() - t:.2f} s wall, "
          f"{user + system:.2f} s CPU |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
