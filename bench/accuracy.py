"""How close kbq's figures come to published measurements, next to the simple rules.

    python bench/accuracy.py            # table per kind: median / p90 / worst absolute % error
    python bench/accuracy.py --points   # every point with its prediction
    python bench/accuracy.py --json     # the same as data (used by the tests and the README)

The measurements are tests/data/calibration.yaml. The hold-out half (see `held_out`: a
split stratified by kind, runtime and memory technology) is never used by bench/calibrate.py and
is reported separately. A point marked `superseded_by` (a runtime release measured again, much
faster, on the same hardware and architecture) is printed with its error but counted in no row.
Simple rules, as other calculators use them: decode = weights ÷ bandwidth at 100%, 80% and a flat
55%; prefill = peak TFLOPS ÷ 2·N; inference memory = 1.2 × weights; training memory = 16 bytes
per parameter.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

GIB = 1.073741824  # GB per GiB
DATA = ROOT / "tests" / "data" / "calibration.yaml"
KINDS = ("decode_tokens_per_s", "aggregate_tokens_per_s", "prefill_tokens_per_s",
         "inference_memory", "training_memory", "train_tokens_per_s")


def _stratum(m: dict[str, Any]) -> tuple[str, str, str]:
    setup = m.get("setup") or {}
    gpu = str(setup.get("gpu") or "").lower()
    memory = "hbm" if re.search(r"a100|h100|h200|b200|mi\d|gaudi", gpu) else "other"
    return (m["kind"], str(setup.get("runtime") or ""), memory)


_HOLDOUT: set[str] | None = None


def held_out(point_id: str) -> bool:
    """Half the points, never used for fitting: within each stratum (kind, runtime, HBM or not),
    points are ordered by a hash of their id and every second one is held out."""
    global _HOLDOUT
    if _HOLDOUT is None:
        strata: dict[tuple[str, str, str], list[str]] = {}
        for m in measurements():
            strata.setdefault(_stratum(m), []).append(m["id"])
        _HOLDOUT = set()
        for ids in strata.values():
            ids.sort(key=lambda i: hashlib.sha256(i.encode()).hexdigest())
            _HOLDOUT.update(ids[1::2])
    return point_id in _HOLDOUT


def measurements() -> list[dict[str, Any]]:
    return yaml.safe_load(DATA.read_text(encoding="utf-8"))["measurements"]


def measured_value(m: dict[str, Any]) -> float:
    return float(m["value"]) * (GIB if m["unit"] == "GiB" else 1.0)


def _runtime_word(text: str) -> str:
    """The words of a source's runtime name that the rules know ('NVIDIA NIM' → 'nim')."""
    from kb import get_knowledge
    from kb.knowledge.build import norm

    aliases = get_knowledge().runtime_alias
    plain = text.split("(")[0].strip()
    words = plain.split()
    for cand in [text, plain, *[" ".join(words[i:]) for i in range(len(words))], *words]:
        if norm(cand) in aliases:
            return cand
    return words[0] if words else text


def query_of(m: dict[str, Any]) -> str:
    """The measurement's query, plus the prompt and output lengths its setup states."""
    q = m["query"]
    setup = m.get("setup") or {}
    words = q.lower().split()
    runtime = str(setup.get("runtime") or "").lower()
    if runtime and " with " not in f" {q} " and " using " not in f" {q} ":
        q += f" with {_runtime_word(runtime)}"
        words = q.lower().split()
    prompt, output, context = setup.get("prompt_tokens"), setup.get("output_tokens"), setup.get("context")
    ckpt = setup.get("gradient_checkpointing")
    if m["kind"] == "training_memory" and ckpt is False and "checkpointing" not in words:
        q += " no checkpointing"
    if m["kind"] in ("decode_tokens_per_s", "aggregate_tokens_per_s"):
        if prompt and "prompt" not in words and "tokens" not in words:
            q += f" prompt {int(prompt)}"
        if output and "output" not in words:
            q += f" output {int(output)}"
        if not context and "context" not in words and (prompt or output):
            q += f" context {int((prompt or 0) + (output or 0))}"
    return q


def predict(m: dict[str, Any], kn: Any) -> tuple[float | None, dict[str, float], str | None]:
    """kbq's figure and the simple rules' figures for one measurement."""
    from kb.engine import answer
    from kb.errors import KbError
    from kb.query.parse import parse

    q = query_of(m)
    try:
        a = answer(parse(q, kn), kn, q).to_dict()
    except KbError as err:
        return None, {}, str(err).splitlines()[0]
    g = a["gpus"][0]
    kind = m["kind"]
    _TAGS[m["id"]] = _tags(kind, a)
    value = {
        "decode_tokens_per_s": g["decode_tokens_per_s"],
        "aggregate_tokens_per_s": g["decode_tokens_per_s_aggregate"],
        "prefill_tokens_per_s": g["prefill_tokens_per_s"],
        "inference_memory": g["per_gpu_gb"],
        "training_memory": g["per_gpu_gb"],
        "train_tokens_per_s": g["train_tokens_per_s"],
    }[kind]
    if value is None and not g["fits"] and kind in SPEED_FORMULA:
        value = speed_if_it_fitted(q, kn, SPEED_FORMULA[kind])
    if kind == "aggregate_tokens_per_s":
        value = served_under_load(a, value, whole_run=m.get("timed") == "whole_run")
    return value, simple_rules(kind, a, kn), None


def served_under_load(a: dict[str, Any], decode_only: float | None, whole_run: bool = False) -> float | None:
    """A throughput measured at a concurrency of N users with stated prompts (each user sends its
    next request when the last one ends) counts the prompts' prefill in its time, as kbq's
    continuous-batching figures do (rules/formulas.yaml serving_requests_per_s × output tokens).
    A static batch (`batch N`) benchmark that times its whole run (the measurement's `timed:
    whole_run`: TensorRT-LLM's and LMDeploy's static throughput tables) counts the batch's prompts
    at kbq's prefill rate before its outputs; other static batches and prompt-less users keep the
    decode-only aggregate.
    In: the answer as data, its decode-only aggregate, whether the benchmark timed its whole run.
    Out: the figure to compare."""
    w = a["workload"]
    if not w.get("prompt_tokens") or not w.get("output_tokens") or decode_only is None:
        return decode_only
    got = {s["rule_id"]: s["result"] for s in a.get("trace") or []}
    if w["batch"] > 1:
        if not whole_run:
            return decode_only
        prefill = got.get("prefill_tokens_per_s")
        if not isinstance(prefill, (int, float)) or prefill <= 0:
            return decode_only
        b, p, o = float(w["batch"]), float(w["prompt_tokens"]), float(w["output_tokens"])
        return b * o / (b * p / prefill + b * o / decode_only)
    if w["users"] <= 1:
        return decode_only
    rate = got.get("serving_requests_per_s")
    return rate * float(w["output_tokens"]) if isinstance(rate, (int, float)) and rate > 0 else decode_only


# A setup kbq judges too big shows no speed; the measurement shows it ran, so its speed is still
# compared (the memory miss is the memory band's business).
SPEED_FORMULA = {"decode_tokens_per_s": "decode_tokens_per_s",
                 "aggregate_tokens_per_s": "decode_tokens_per_s_aggregate",
                 "prefill_tokens_per_s": "prefill_tokens_per_s", "train_tokens_per_s": "train_tokens_per_s"}


def speed_if_it_fitted(q: str, kn: Any, name: str) -> float | None:
    from kb.engine import Evaluated, base_scope, evaluate, gpu_scope, layout_of, resolve_workload
    from kb.query.parse import parse

    w = parse(q, kn)
    r = resolve_workload(w, kn)
    req = w.gpus[0] if w.gpus else None
    if req is None or req.gpu_id is None:
        return None
    ev = Evaluated(gpu_scope(base_scope(r, kn), kn.gpus[req.gpu_id], req.count, r.precision,
                             layout_of(r, kn, req.count)))
    evaluate(kn, ev, [name])
    value = ev.scope.get(name)
    return float(value) if value is not None else None


_TAGS: dict[str, list[str]] = {}
# groups printed beside the kinds: decode of mixture-of-experts models, decode with more than one
# sequence in flight, and every decode figure together (the figure the decode band is judged on)
GROUPS = {"moe decode": lambda p: "moe" in p["tags"],
          "batched serving": lambda p: "batched" in p["tags"],
          "all decode": lambda p: p["kind"] in ("decode_tokens_per_s", "aggregate_tokens_per_s"),
          "multi-GPU training memory": lambda p: p["group"] == "training_memory multi-GPU"}


def _tags(kind: str, a: dict[str, Any]) -> list[str]:
    """What a decode point exercises: a MoE model, a batch of users."""
    w = a["workload"]
    if kind not in ("decode_tokens_per_s", "aggregate_tokens_per_s"):
        return []
    tags = ["moe"] if w["active_params"] < w["params"] else []
    return tags + (["batched"] if (w["users"] or 1) * (w["batch"] or 1) > 1 else [])


def simple_rules(kind: str, a: dict[str, Any], kn: Any) -> dict[str, float]:
    w = a["workload"]
    g = a["gpus"][0]
    gpu = kn.gpus.get(g["id"], {})
    prec = kn.precisions[w["precision"]]
    weights_gb = w["params"] * prec["bits_per_weight"] / 8 / 1e9
    count = g["count"]
    bw = (gpu.get("bandwidth_gb_s") or 0) * count
    if kind in ("decode_tokens_per_s", "aggregate_tokens_per_s"):
        users = w["users"] * w["batch"] if kind == "aggregate_tokens_per_s" else 1
        return {f"weights/bandwidth@{int(e * 100)}%": bw * e / weights_gb * users for e in (1.0, 0.8, 0.55)}
    if kind == "prefill_tokens_per_s":
        tflops = (gpu.get("tensor_tflops") or {}).get("fp16") or 0
        return {"peak TFLOPS / 2N": tflops * 1e12 * count / (2 * w["active_params"])}
    if kind == "inference_memory":
        return {"1.2 x weights": 1.2 * weights_gb / count}
    if kind == "training_memory":
        return {"16 B/param": 16 * w["params"] / 1e9 / count}
    return {}


def point_group(m: dict[str, Any]) -> str:
    """The row a point is printed in: its kind, with multi-GPU training memory on its own row."""
    count = (m.get("setup") or {}).get("gpu_count") or 1
    if m["kind"] == "training_memory" and count > 1:
        return "training_memory multi-GPU"
    return str(m["kind"])


def ape(pred: float, true: float) -> float:
    return abs(pred - true) / true * 100


def summary(errors: list[float]) -> dict[str, float]:
    s = sorted(errors)
    p90 = s[min(len(s) - 1, int(round(0.9 * (len(s) - 1))))]
    return {"n": len(s), "median": statistics.median(s), "p90": p90, "worst": s[-1]}


def evaluate(kn: Any, subset: str = "all") -> dict[str, Any]:
    points, skipped, superseded = [], [], []
    for m in measurements():
        if subset == "fit" and held_out(m["id"]) or subset == "holdout" and not held_out(m["id"]):
            continue
        pred, rules, err = predict(m, kn)
        if pred is None:
            skipped.append({"id": m["id"], "query": m["query"], "reason": err or "no figure"})
            continue
        true = measured_value(m)
        if m.get("superseded_by"):
            superseded.append({"id": m["id"], "query": query_of(m), "measured": true, "kbq": pred,
                               "kbq_ape": ape(pred, true), "superseded_by": m["superseded_by"],
                               "why": m.get("superseded_why", "")})
            continue
        points.append({"id": m["id"], "kind": m["kind"], "group": point_group(m), "query": query_of(m),
                       "measured": true,
                       "kbq": pred, "kbq_ape": ape(pred, true), "held_out": held_out(m["id"]),
                       "rules": {k: {"value": v, "ape": ape(v, true)} for k, v in rules.items()},
                       "source": m["source"]["url"], "tags": _TAGS.get(m["id"], [])})
    table: dict[str, Any] = {}
    for kind in KINDS:
        pts = [p for p in points if p["kind"] == kind]
        if not pts:
            continue
        row = {"kbq": summary([p["kbq_ape"] for p in pts])}
        for rule in pts[0]["rules"]:
            row[rule] = summary([p["rules"][rule]["ape"] for p in pts if rule in p["rules"]])
        table[kind] = row
    for group, member in GROUPS.items():
        pts = [p for p in points if member(p)]
        if pts:
            row = {"kbq": summary([p["kbq_ape"] for p in pts])}
            for rule in pts[0]["rules"]:
                row[rule] = summary([p["rules"][rule]["ape"] for p in pts if rule in p["rules"]])
            table[group] = row
    return {"table": table, "points": points, "skipped": skipped, "superseded": superseded}


def print_table(result: dict[str, Any], title: str) -> None:
    print(f"\n{title}")
    print(f"{'kind':26} {'model':24} {'n':>3} {'median %':>9} {'p90 %':>8} {'worst %':>8}")
    for kind, row in result["table"].items():
        for name, s in row.items():
            print(f"{kind:26} {name:24} {s['n']:>3} {s['median']:>9.1f} {s['p90']:>8.1f} {s['worst']:>8.1f}")
            kind = ""


BANDS = ROOT / "rules" / "error_bands.yaml"


def write_bands(result: dict[str, Any]) -> None:
    """rules/error_bands.yaml: per kind (and per runtime with 3+ points) the errors every answer
    quotes next to its figures, with the measurements behind them."""
    from kb import get_knowledge

    kn = get_knowledge()
    lines = ["# yaml-language-server: $schema=schema/error_bands.schema.json",
             "# Generated by `python bench/accuracy.py --write` from tests/data/calibration.yaml;",
             "# do not edit by hand. Absolute percentage errors of kbq's figures against published",
             "# measurements; every answer quotes the band for the figures it shows.",
             "source: kbq-calibration", "kinds:"]
    for kind in KINDS:
        pts = [p for p in result["points"] if p["kind"] == kind]
        if not pts:
            continue
        s = summary([p["kbq_ape"] for p in pts])
        lines.append(f"  {kind}:")
        lines.append(f"    n: {s['n']}")
        lines.append(f"    median_pct: {s['median']:.1f}")
        lines.append(f"    p90_pct: {s['p90']:.1f}")
        lines.append(f"    worst_pct: {s['worst']:.1f}")
        by_rt: dict[str, list[float]] = {}
        for p in pts:
            by_rt.setdefault(runtime_id(p["query"], kn), []).append(p["kbq_ape"])
        rts = {rt: v for rt, v in sorted(by_rt.items()) if len(v) >= 3}
        if rts:
            lines.append("    by_runtime:")
            for rt, v in rts.items():
                r = summary(v)
                lines.append(f"      {rt}: {{n: {r['n']}, median_pct: {r['median']:.1f}, p90_pct: {r['p90']:.1f}}}")
        lines.append("    measurements:")
        for p in sorted(pts, key=lambda p: p["id"]):
            lines.append(f"      - {{id: {p['id']}, runtime: {runtime_id(p['query'], kn)}, url: \"{p['source']}\"}}")
    BANDS.write_text("\n".join(lines) + "\n", encoding="utf-8")


def runtime_id(query: str, kn: Any) -> str:
    from kb.engine import resolve_workload
    from kb.query.parse import parse

    return resolve_workload(parse(query, kn), kn).runtime["id"]


SERVING_LOAD = ROOT / "tests" / "data" / "serving_load.yaml"


def serving_under_load(kn: Any) -> dict[str, Any]:
    """kbq's figures under continuous batching (rules/formulas.yaml serving_*) against published
    measurements at a stated concurrency and input/output length (tests/data/serving_load.yaml):
    time per output token, output tokens/s over all requests (requests/s × output length, Little's
    law) and time to first token."""
    import yaml

    from kb import ask

    data = yaml.safe_load(SERVING_LOAD.read_text(encoding="utf-8"))
    points = []
    for m in data["points"]:
        a = ask(m["query"]).to_dict()
        got = {s["rule_id"]: s["result"] for s in a["trace"]}
        out = float(a["workload"]["output_tokens"])
        pairs = {"tpot_s": (got["serving_tpot_s"], m["itl_s"]),
                 "output_tokens_per_s": (got["serving_requests_per_s"] * out, m["output_tokens_per_s"]),
                 "ttft_s": (got["serving_ttft_s"], m["ttft_s"])}
        points.append({"id": m["id"], "query": m["query"], "source": m["url"],
                       "figures": {k: {"kbq": v, "measured": t, "ape": ape(v, t)} for k, (v, t) in pairs.items()}})
    table = {k: summary([p["figures"][k]["ape"] for p in points]) for k in ("tpot_s", "output_tokens_per_s", "ttft_s")}
    for m in data.get("max_load") or []:
        a = ask(m["query"]).to_dict()
        got = {s["rule_id"]: s["result"] for s in a["trace"]}
        v, t = got["serving_output_tokens_per_s"] / m["gpus"], m["tokens_per_s_per_gpu"]
        points.append({"id": m["id"], "query": m["query"], "source": m["url"],
                       "figures": {"max_load_tokens_per_s_per_gpu": {"kbq": v, "measured": t, "ape": ape(v, t)}}})
    loaded = [p["figures"]["max_load_tokens_per_s_per_gpu"]["ape"] for p in points
              if "max_load_tokens_per_s_per_gpu" in p["figures"]]
    if loaded:
        table["max_load_tokens_per_s_per_gpu"] = summary(loaded)
    return {"table": table, "points": points}


def print_serving(result: dict[str, Any]) -> None:
    print("\nServing under load (continuous batching, prompts counted; absolute percentage error)")
    print(f"{'figure':30} {'n':>3} {'median %':>9} {'p90 %':>8} {'worst %':>8}")
    for name, s in result["table"].items():
        print(f"{name:30} {s['n']:>3} {s['median']:>9.1f} {s['p90']:>8.1f} {s['worst']:>8.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--points", action="store_true")
    ap.add_argument("--write", action="store_true", help="write rules/error_bands.yaml")
    args = ap.parse_args()
    from kb import get_knowledge

    kn = get_knowledge()
    results: dict[str, Any] = {s: evaluate(kn, s) for s in ("all", "fit", "holdout")}
    results["serving_under_load"] = serving_under_load(kn)
    if args.write:
        write_bands(results["all"])
        print(f"wrote {BANDS.relative_to(ROOT)}")
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    print_table(results["all"], "All measurements (absolute percentage error)")
    print_table(results["holdout"], "Hold-out half (never used for fitting)")
    print_serving(results["serving_under_load"])
    if results["all"]["skipped"]:
        print("\nSkipped (the query does not parse or gives no figure):")
        for s in results["all"]["skipped"]:
            print(f"  {s['id']}: {s['reason']}")
    if results["all"]["superseded"]:
        print("\nSuperseded (a later release measured on the same hardware; in no row):")
        for p in results["all"]["superseded"]:
            print(f"  {p['measured']:>9.1f} kbq {p['kbq']:>9.1f} ({p['kbq_ape']:5.1f}%)  {p['query']}")
    if args.points:
        print("\nPoints:")
        for p in results["all"]["points"]:
            print(f"  {p['kind'][:16]:16} {p['measured']:>9.1f} kbq {p['kbq']:>9.1f} ({p['kbq_ape']:5.1f}%)  {p['query']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
