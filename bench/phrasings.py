"""Capacity questions written the way people write them, generated, and counted by how kbq reads them.

    python bench/phrasings.py                  # 300 questions of each style, seed 11
    python bench/phrasings.py --count 1000 --seed 3
    python bench/phrasings.py --show 20        # the first 20 questions it could not read

Two styles, each a random model (the Hub ids AIConfigurator sizes, bench/aiconfigurator_models.yaml,
or the short names people type), card, load, lengths, first-token bound and per-user speed, the parts
in random order and joined by commas, semicolons or spaces:
- `plain`: 'how many H200s do I need to serve …', '… on H100:', 'size a cluster of …', with loads as
  users, concurrency, requests a second/minute/hour/day or tokens a day, lengths as '2k in / 500 out',
  'ISL 4000 OSL 500', 'input length …', targets as 'TTFT < 500ms', 'p99 ttft', 'TPOT 40 ms', 'tok/s
  per user';
- `engineer`: the same question as a sales engineer or a tool's command line gives it ('Estimate the
  number of …', 'Sizing: …', '--ttft 2000 --tpot 50', '30ms/token', '2000:500 tokens', '4000 tok in',
  '… users at once', 'DAU').

Each question is answered as `kbq --json` answers it, and counted: a fleet (replicas of a layout), no
count (no layout serves it: the fastest a replica serves one user is said), or an error. 'DAU' (daily
active users) is generated on purpose and refused with its reason (query.yaml users_per_period): a
day's users are not a concurrency.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHORT = ["Llama 3.1 70B", "llama3.1-70b", "Llama-3.3-70B-Instruct", "Qwen3 32B FP8", "Qwen3-32B", "DeepSeek R1",
         "deepseek-r1 fp8", "gpt-oss 120b", "gpt-oss-20b", "Llama 3.1 8B", "Qwen3-235B-A22B FP8", "Qwen3 30B A3B",
         "Llama 4 Maverick", "Llama 4 Scout", "Mixtral 8x7B", "Llama 3.1 405B FP8", "DeepSeek V3", "Kimi K2",
         "GLM-4.6", "MiniMax M2", "Qwen2.5 72B", "Mistral Large", "Gemma 3 27B", "Nemotron 70B", "Llama 70B AWQ",
         "70B FP8", "8B model"]
CARDS = {"plain": ["H100", "H200", "B200", "h100 sxm", "H200 SXM", "B200 SXM", "GB200", "B300", "A100", "A100 80GB",
                   "L40S", "H100s", "H200s", "B200s"],
         "engineer": ["H100 80GB", "H100 SXM5", "H200 141GB", "DGX H100", "HGX H200", "HGX B200", "B200",
                      "GB200 NVL72", "MI300X", "MI325X", "H100 PCIe", "A100-80G", "L40S", "H20", "RTX 6000 Ada", "B300"]}
LENGTHS = [(1000, 1000), (2000, 500), (4000, 1000), (8000, 500), (1000, 2000), (4000, 500), (500, 200)]


def _plain(r: random.Random, card: str, model: str, isl: int, osl: int) -> tuple[str, list[str]]:
    users, rate = r.choice([50, 100, 200, 256, 500, 1000, 2000]), r.choice([1, 2, 5, 10, 20, 50])
    ttft, tpot = r.choice([0.5, 1, 2, 3]), r.choice([20, 25, 30, 40, 50, 60])
    start = r.choice([f"how many {card} for {model}", f"how many {card} do I need to serve {model}",
                      f"{model} on {card}:", f"size a cluster of {card} for {model}", f"serve {model} on {card}",
                      f"what's the minimum number of {card} to serve {model}", f"{card} count for {model}",
                      f"how many {card} nodes for {model}", f"fewest {card} for {model}",
                      f"deploy {model} on {card}, how many GPUs", f"plan {card} capacity for {model}"])
    return start, [
        r.choice([f"{users} users", f"{users} concurrent users", f"concurrency {users}", f"{users} concurrent",
                  f"{rate} requests per second", f"{rate} req/s", f"{rate} QPS", f"{rate * 60} requests per minute",
                  f"{rate * 3600} requests per hour", f"arrival rate {rate}/s", f"batch of {users} users",
                  f"{users} simultaneous users", f"{rate * 86400 * osl / 1e6:g}M tokens per day"]),
        r.choice([f"{isl} in / {osl} out", f"ISL {isl} OSL {osl}", f"isl={isl}, osl={osl}",
                  f"input {isl} tokens, output {osl} tokens", f"prompt {isl} output {osl}", f"{isl}/{osl} tokens",
                  f"input length {isl}, output length {osl}", f"{isl} tokens in, {osl} tokens out"]),
        r.choice([f"ttft under {ttft} s", f"TTFT < {int(ttft * 1000)}ms", f"p99 ttft {int(ttft * 1000)} ms",
                  f"first token within {ttft} s", f"TTFT<={ttft}s", f"ttft target {int(ttft * 1000)}ms"]),
        r.choice([f"TPOT {tpot} ms", f"tpot < {tpot}ms", f"{round(1000 / tpot)} tok/s per user", f"ITL {tpot}ms",
                  f"time per output token {tpot} ms", f"at least {round(1000 / tpot)} tokens per second per user"])]


def _engineer(r: random.Random, card: str, model: str, isl: int, osl: int) -> tuple[str, list[str]]:
    users, rate = r.choice([32, 64, 100, 250, 500, 1000, 5000]), r.choice([0.5, 1, 3, 8, 25, 100])
    ttft, tpot = r.choice([0.3, 0.5, 1, 2, 5]), r.choice([10, 20, 30, 50, 100])
    start = r.choice([f"How many {card} GPUs do I need to serve {model} with", f"{model} on {card}:",
                      f"GPU count for {model} on {card},", f"Sizing: {model}, {card},", f"how many {card}s for {model}",
                      f"I want to serve {model} on {card}. How many GPUs for",
                      f"Estimate the number of {card} needed for {model}", f"{card} cluster for {model}"])
    return start, [
        r.choice([f"{users} concurrent users", f"{users} users at once", f"peak concurrency of {users}",
                  f"{users} concurrent sessions", f"{users} active users", f"{rate} req/s", f"{rate} requests/second",
                  f"{int(rate * 3600)} requests/hour", f"throughput of {rate} requests per second",
                  f"{int(rate * 86400)} requests per day", f"{rate * 60:g} RPM", f"--target-concurrency {users}",
                  f"--target-request-rate {rate}", f"{users} DAU"]),
        r.choice([f"ISL={isl} OSL={osl}", f"input: {isl} tokens, output: {osl} tokens",
                  f"{isl}-token prompts and {osl}-token responses", f"prompts of {isl} tokens, answers of {osl} tokens",
                  f"avg prompt {isl} tokens, avg output {osl}", f"{isl} tok in, {osl} tok out", f"{isl}:{osl} tokens",
                  f"--isl {isl} --osl {osl}"]),
        r.choice([f"TTFT ≤ {ttft}s", f"TTFT: {int(ttft * 1000)}ms", f"first-token latency under {ttft} seconds",
                  f"P90 TTFT < {int(ttft * 1000)} ms", f"ttft of {int(ttft * 1000)}ms", f"--ttft {int(ttft * 1000)}"]),
        r.choice([f"ITL ≤ {tpot} ms", f"inter-token latency {tpot}ms", f"{tpot}ms/token", f"decode speed {round(1000 / tpot)} tok/s",
                  f"TPOT: {tpot}ms", f"{round(1000 / tpot)} tps per user", f"--tpot {tpot}",
                  f"output speed of {round(1000 / tpot)} tok/s per user"])]


STYLES = {"plain": _plain, "engineer": _engineer}


def questions(style: str, count: int, seed: int, models: list[str]) -> list[str]:
    r = random.Random(seed)
    out = []
    for _ in range(count):
        isl, osl = r.choice(LENGTHS)
        start, parts = STYLES[style](r, r.choice(CARDS[style]), r.choice(models), isl, osl)
        r.shuffle(parts)
        out.append(start + " " + r.choice([", ", " ", "; ", " and "]).join(parts))
    return out


def main() -> int:
    import yaml

    from kb import ask
    from kb.errors import KbError

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--show", type=int, default=10)
    args = ap.parse_args()
    hub = yaml.safe_load((ROOT / "bench" / "aiconfigurator_models.yaml").read_text(encoding="utf-8"))["models"]
    failed = False
    for style in STYLES:
        counts: Counter[str] = Counter()
        unread: list[tuple[str, str]] = []
        for q in questions(style, args.count, args.seed, list(hub) + SHORT):
            try:
                a = ask(q).to_dict()
            except KbError as err:
                first = str(err).splitlines()[0]
                counts["unread, 'DAU'" if " DAU" in q else "unread"] += 1
                unread.append((q, first))
                continue
            except Exception as exc:     # a crash is a defect
                counts["crashed"] += 1
                unread.append((q, repr(exc)))
                failed = True
                continue
            counts["fleet" if a.get("replicas") else "no count"] += 1
        print(f"{style}: {args.count} questions, seed {args.seed}: "
              + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        for q, why in [u for u in unread if " DAU" not in u[0]][:args.show]:
            print(f"  {q}\n    {why}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
