"""Long names: the query vocabulary's cost grows with the names' length, and a name past the cap
is refused before it costs anything.

    python bench/names.py            # about 20 seconds

1. The vocabulary (kb.query_words.vocabulary) of the shipped knowledge plus one model whose
   family is N characters long, built in this process with the name cap bypassed (the model is
   added as a --model-config view would add it): wall time and tracemalloc peak, for N from
   1,000 to 300,000. Next to it, the set of every prefix of that one name, which is what the
   vocabulary held before (its size alone, measured up to 10,000 characters and then
   extrapolated as N²/2 bytes, since building it for 100,000 characters takes ~5 GB).
2. The installed `kbq`: `--model-config` with a model_type of 100,000 and 300,000 characters,
   and `kbq validate` of a rules copy with a 100,000-character GPU alias: exit status, wall
   time and the process's peak resident memory (GNU time, /usr/bin/time).
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
    """Seconds and peak MB to build the vocabulary with one family name of n characters."""
    from kb import get_knowledge
    from kb.query_words import vocabulary
    from kb.record import replace

    kn = get_knowledge()
    model = {**next(iter(kn.models.values())), "id": "bench-long", "family": "x" * n, "aliases": []}
    view = replace(kn, models={**kn.models, "bench-long": model})
    tracemalloc.start()
    t = time.perf_counter()
    vocabulary(view)
    seconds = time.perf_counter() - t
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
    """Exit status, wall seconds, peak RSS in MB (GNU time's %M: the process's own, not the
    forking parent's, which a child's rusage would count) and the first line of stderr."""
    kbq = shutil.which("kbq") or "kbq"
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", kbq, *args], cwd=cwd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, errors="replace", check=False)
    seconds = time.perf_counter() - t
    lines = p.stderr.splitlines()
    return p.returncode, seconds, int(lines[-1]) / 1024, lines[0]


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
            print(f"| kbq --model-config, model_type of {n:,} characters | exit {code} in "
                  f"{seconds * 1000:.0f} ms, peak RSS {rss:.0f} MB: {err.split(': ', 2)[-1]} |", flush=True)
        rules = where / "rules"
        shutil.copytree(ROOT / "rules", rules)
        gpus = rules / "gpus.yaml"
        text = gpus.read_text(encoding="utf-8")
        gpus.write_text(text.replace("    aliases: [", "    aliases: [" + "x" * 100_000 + ", ", 1),
                        encoding="utf-8")
        code, seconds, rss, err = run_kbq(["validate", str(rules)], where)
        print(f"| kbq validate, a GPU alias of 100,000 characters | exit {code} in {seconds * 1000:.0f} ms, "
              f"peak RSS {rss:.0f} MB: {err.split(': ', 1)[-1][:60]}… |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
