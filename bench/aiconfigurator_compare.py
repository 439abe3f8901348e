"""kbq's capacity answers next to NVIDIA AIConfigurator's `recommend`, on the same questions.

    python bench/aiconfigurator_compare.py            # one row per case, the ratios and the bands
    python bench/aiconfigurator_compare.py --json     # the same as data

AIConfigurator (pip install aiconfigurator; its `cli recommend` finds the fewest GPUs that carry a
concurrency or a request rate within TTFT and TPOT targets, from per-operation measurements of
real silicon) is a comparison, not a source: no constant of rules/ is fitted to it. What it
printed is checked in (bench/aiconfigurator_recommend.yaml: its version, the command and the
figures of its best aggregated and disaggregated configurations), so this comparison reruns
without it installed.

Per case:
- count: kbq's GPUs for the question in kbq's words over AIConfigurator's count (the fewer of its
  aggregated and disaggregated answers, the count its `recommend` reports; and over its aggregated
  count, the layout kbq's headline answer is: every replica prefills and decodes);
- tok/s/GPU: kbq's output tokens per second per GPU under load (rules/formulas.yaml
  serving_tokens_per_s_per_gpu), asked at AIConfigurator's aggregated configuration (its GPUs,
  tensor-parallel size, attention data parallelism and users in flight), over its figure.
The bands are the ones kbq is held to: count within -25%/+34%, tok/s/GPU within -30%/+43%.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

DATA = ROOT / "bench" / "aiconfigurator_recommend.yaml"
COUNT_BAND = (0.75, 1.34)
RATE_BAND = (0.70, 1.43)
SYSTEMS = {"h100_sxm": "h100", "h200_sxm": "h200", "b200_sxm": "b200", "a100_sxm": "a100 sxm 80gb", "l40s": "l40s"}


def cases() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    doc = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    return doc["aiconfigurator"], doc["cases"]


def _load_words(c: dict[str, Any]) -> str:
    if "concurrency" in c:
        return f"{c['concurrency']} users"
    return f"{c['request_rate']:g} requests per second"


def question(c: dict[str, Any]) -> str:
    """The capacity question in kbq's words: the card, the model and format, the load, the lengths
    and the two targets (a per-user speed of 1000 / TPOT ms tokens a second)."""
    speed = 1000.0 / c["tpot_ms"]
    return (f"how many {SYSTEMS[c['system']]} for {c['kbq_model']} {c['kbq_precision']} {_load_words(c)} "
            f"{c['isl']} in / {c['osl']} out at {speed:.3g} tok/s ttft under {c['ttft_ms'] / 1000:g} s")


def at_configuration(c: dict[str, Any]) -> str:
    """AIConfigurator's aggregated configuration asked of kbq: its GPUs, each replica's
    tensor-parallel (or attention data-parallel) width, the users it holds in flight and its KV
    cache's format (FP8 where it printed fp8)."""
    agg = c["agg"]
    width = agg["tp"] * agg["dp"] * agg["pp"]
    users = agg["concurrency_per_replica"] * agg["replicas"]
    dp = " dp attention" if agg["dp"] > 1 else ""
    pp = f" pp {agg['pp']}" if agg["pp"] > 1 else ""
    kv = " fp8 kv cache" if agg.get("kvcache") == "fp8" else ""
    return (f"serve {c['kbq_model']} {c['kbq_precision']}{kv} {users} users {c['isl']} in / {c['osl']} out "
            f"on {agg['gpus']}x {SYSTEMS[c['system']]} tp {agg['tp'] * agg['dp']}{pp}{dp}"
            if width > 0 else "")


def _ask(q: str, kn: Any) -> dict[str, Any] | str:
    from kb import answer_in
    from kb.errors import KbError

    try:
        return answer_in(kn, q).to_dict()
    except KbError as err:
        return str(err).splitlines()[0]


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _within(r: float | None, band: tuple[float, float]) -> bool:
    return r is not None and band[0] <= r <= band[1]


def compare(c: dict[str, Any], kn: Any) -> dict[str, Any]:
    """One case: kbq's count and its rate at AIConfigurator's configuration, with the ratios."""
    q = question(c)
    got = _ask(q, kn)
    reps = got.get("replicas") if isinstance(got, dict) else None
    count = reps["gpus"] if reps else None
    layout = f"{reps['replicas']}x TP{reps['layout']['tp']}" + ("+DPA" if reps["layout"]["dp_attention"] else "") \
        if reps else (got if isinstance(got, str) else "no replicas block")
    aic_best = min(x["gpus"] for x in (c["agg"], c.get("disagg")) if x)
    q2 = at_configuration(c)
    at = _ask(q2, kn)
    rate = at["throughput"].get("serving_tokens_per_s_per_gpu") if isinstance(at, dict) else None
    out = {"id": c["id"], "question": q, "kbq_gpus": count, "kbq_layout": layout,
           "kbq_tokens_per_s_per_gpu": reps.get("tokens_per_s_per_gpu") if reps else None,
           "aic_gpus": aic_best, "aic_agg_gpus": c["agg"]["gpus"], "aic_agg": c["agg"]["parallel"],
           "count_ratio": _ratio(count, aic_best), "count_ratio_agg": _ratio(count, c["agg"]["gpus"]),
           "at_configuration": q2, "kbq_rate_at_aic": rate, "aic_rate": c["agg"]["tokens_s_gpu"],
           "rate_ratio": _ratio(rate, c["agg"]["tokens_s_gpu"])}
    out["count_ok"] = _within(out["count_ratio"], COUNT_BAND)
    out["count_agg_ok"] = _within(out["count_ratio_agg"], COUNT_BAND)
    out["rate_ok"] = _within(out["rate_ratio"], RATE_BAND)
    return out


def as_its_command(c: dict[str, Any], kn: Any) -> bool:
    """The case asked as AIConfigurator's own command line (`command`, read by kbq as written: its
    --backend trtllm is TensorRT-LLM) and at its configuration on TensorRT-LLM: within both bands."""
    got = _ask(c["command"], kn)
    reps = got.get("replicas") if isinstance(got, dict) else None
    at = _ask(at_configuration(c) + " with tensorrt-llm", kn)
    rate = at["throughput"].get("serving_tokens_per_s_per_gpu") if isinstance(at, dict) else None
    best = min(x["gpus"] for x in (c["agg"], c.get("disagg")) if x)
    return (_within(_ratio(reps["gpus"] if reps else None, best), COUNT_BAND)
            and _within(_ratio(rate, c["agg"]["tokens_s_gpu"]), RATE_BAND))


def _f(x: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from kb import get_knowledge

    kn = get_knowledge()
    meta, table = cases()
    rows = [compare(c, kn) for c in table]
    summary = {"cases": len(rows), "answered": sum(r["kbq_gpus"] is not None for r in rows),
               "count_within": sum(r["count_ok"] for r in rows),
               "count_within_vs_agg": sum(r["count_agg_ok"] for r in rows),
               "rate_within": sum(r["rate_ok"] for r in rows),
               "both_within": sum(r["count_ok"] and r["rate_ok"] for r in rows),
               "both_within_as_its_command": sum(as_its_command(c, kn) for c in table)}
    if args.json:
        print(json.dumps({"aiconfigurator": meta, "rows": rows, "summary": summary}, indent=1))
        return 0
    print(f"AIConfigurator {meta['version']} (perf-db {meta['perf_db_version']}, backend {meta['backend']}); "
          f"bands: count {COUNT_BAND[0]:.2f}-{COUNT_BAND[1]:.2f}, tok/s/GPU {RATE_BAND[0]:.2f}-{RATE_BAND[1]:.2f}\n")
    print("| case | kbq GPUs (layout) | AIC GPUs best / agg (agg layout) | count ratio best / agg "
          "| kbq tok/s/GPU at AIC agg | AIC tok/s/GPU | rate ratio | ok |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        ok = "yes" if r["count_ok"] and r["rate_ok"] else "NO"
        print(f"| {r['id']} | {_f(r['kbq_gpus'], '{}')} ({r['kbq_layout']}) | {r['aic_gpus']} / {r['aic_agg_gpus']} "
              f"({r['aic_agg']}) | {_f(r['count_ratio'])} / {_f(r['count_ratio_agg'])} "
              f"| {_f(r['kbq_rate_at_aic'], '{:.0f}')} | {r['aic_rate']:.0f} | {_f(r['rate_ratio'])} | {ok} |")
    print(f"\nanswered {summary['answered']}/{summary['cases']}; count within band {summary['count_within']} "
          f"(against the aggregated count {summary['count_within_vs_agg']}); tok/s/GPU within band "
          f"{summary['rate_within']}; both {summary['both_within']}; asked as its own command line "
          f"(TensorRT-LLM, its backend) both {summary['both_within_as_its_command']}")
    for r in rows:
        print(f"  {r['id']}: {r['question']}\n        at its configuration: {r['at_configuration']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
