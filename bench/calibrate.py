"""Fit the runtimes' efficiencies on the fit half of tests/data/calibration.yaml.

    python bench/calibrate.py          # prints the fitted figures per runtime (paste into rules/runtimes.yaml)
    python bench/calibrate.py --groups "moe decode,prefill"   # fit only these groups, the rest as in the rules
    python bench/calibrate.py --groups "moe decode" --params mla_layer_kernel_s   # one figure, the others held

One figure per runtime and quantity (decode bandwidth efficiency, extra loss of dequantizing
kernels, fixed cost per decode step and its Apple-GPU figure, the MoE layer's fixed and
per-expert cost, prefill efficiency and its Apple-GPU figure, training MFU), fitted by coordinate descent on the squared
log error; never a figure per GPU-and-model pair. Each group of points fits its own figures: a
dense model's decode (on Apple GPUs apart), a mixture-of-experts decode (the MoE costs, with the decode figures held),
prefill on NVIDIA/AMD cards, prefill on Apple GPUs, training. The hold-out half
(bench/accuracy.py held_out) is left out of the fit so the README can show errors on unseen points.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from accuracy import held_out, measured_value, measurements, query_of  # noqa: E402

PARAMS = {
    "decode": ["decode_bandwidth_efficiency", "quant_kernel_efficiency", "decode_step_overhead_s",
               "hbm_decode_efficiency"],
    "moe decode": ["moe_layer_kernel_s", "fallback_moe_layer_kernel_s", "moe_expert_kernel_s", "mla_layer_kernel_s"],
    "prefill": ["prefill_compute_efficiency"],    # quant_kernel_efficiency is the decode group's
    "apple prefill": ["apple_prefill_compute_efficiency"],
    "apple decode": ["apple_decode_step_overhead_s"],
    "training": ["training_mfu"],
}
BOUNDS = {"decode_step_overhead_s": (0.0, 0.05), "apple_decode_step_overhead_s": (0.0, 0.05), "training_mfu": (0.05, 0.8),
          "moe_layer_kernel_s": (0.0, 1e-3), "fallback_moe_layer_kernel_s": (0.0, 1e-3), "moe_expert_kernel_s": (0.0, 1e-3),
          "mla_layer_kernel_s": (0.0, 1e-3),
          # DRAM rarely delivers more than ~92% of its peak to any kernel
          "decode_bandwidth_efficiency": (0.05, 0.92)}
START = {"moe_layer_kernel_s": 1e-5, "moe_expert_kernel_s": 1e-6, "mla_layer_kernel_s": 1e-5}   # where a figure at 0 starts
PRIMARY = {"decode": "decode_bandwidth_efficiency", "moe decode": "moe_layer_kernel_s",
           "prefill": "prefill_compute_efficiency", "apple prefill": "apple_prefill_compute_efficiency",
           "apple decode": "apple_decode_step_overhead_s", "training": "training_mfu"}
KINDS = {"decode_tokens_per_s": "decode", "aggregate_tokens_per_s": "decode",
         "prefill_tokens_per_s": "prefill", "train_tokens_per_s": "training"}
ORDER = ["decode", "apple decode", "moe decode", "prefill", "apple prefill", "training"]
MIN_POINTS_FOR_ALL = 4   # with fewer points only one figure per kind is fitted
MIN_POINTS = 2           # a runtime with a single fit point keeps its documented prior


def loss(kn, points) -> float:
    from kb.engine import answer
    from kb.query.parse import parse

    total = 0.0
    for m in points:
        q = query_of(m)
        a = answer(parse(q, kn), kn, q).to_dict()
        g = a["gpus"][0]
        pred = {"decode_tokens_per_s": g["decode_tokens_per_s"], "prefill_tokens_per_s": g["prefill_tokens_per_s"],
                "aggregate_tokens_per_s": g["decode_tokens_per_s_aggregate"],
                "train_tokens_per_s": g["train_tokens_per_s"]}[m["kind"]]
        if not pred:
            continue
        total += math.log(pred / measured_value(m)) ** 2
    return total


def group_of(kn, m) -> tuple[str, str]:
    """The runtime a point measures and the group of figures it fits."""
    from kb.engine import resolve_workload
    from kb.query.parse import parse

    w = parse(query_of(m), kn)
    r = resolve_workload(w, kn)
    group = KINDS[m["kind"]]
    gpu = kn.gpus.get(w.gpus[0].gpu_id) if w.gpus and w.gpus[0].gpu_id else None
    if group == "decode" and r.model.get("moe"):
        group = "moe decode"
    elif m["kind"] == "aggregate_tokens_per_s":
        group = "batched"       # a dense model's batched serving is not fitted (the scheduler's share)
    if group in ("prefill", "decode") and gpu and gpu["vendor"] == "apple":
        group = f"apple {group}"
    return r.runtime["id"], group


def main() -> int:
    import argparse

    from kb import get_knowledge

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", default=",".join(ORDER), help="comma-separated groups to fit (default: all)")
    ap.add_argument("--params", default="", help="comma-separated figures to fit, the others of the group "
                    "held at their rules value (default: the group's, as many as its points allow)")
    args = ap.parse_args()
    groups = [g.strip() for g in args.groups.split(",")]
    only = [p.strip() for p in args.params.split(",") if p.strip()]
    kn = get_knowledge()
    by_group: dict[tuple[str, str], list] = {}
    for m in measurements():
        if held_out(m["id"]) or m.get("superseded_by") or m["kind"] not in KINDS:
            continue
        try:
            key = group_of(kn, m)
        except Exception:  # a query the rules cannot read is reported by accuracy.py
            continue
        if key[1] in PARAMS and key[1] in groups:
            by_group.setdefault(key, []).append(m)
    for (rt_id, group), points in sorted(by_group.items(), key=lambda kv: (kv[0][0], ORDER.index(kv[0][1]))):
        rt = kn.runtimes[rt_id]
        label = f"{rt_id:14} {group:13} n={len(points):2}"
        if len(points) < MIN_POINTS:
            print(f"{label}  too few points: keeps its prior")
            continue
        fitted = fit(kn, rt, group, points, only)
        print(f"{label}  rms log error {math.sqrt(loss(kn, points) / len(points)):.3f}  {fitted}")
    return 0


def fit(kn, rt, group: str, points, only: list[str] | None = None) -> str:
    """Coordinate descent on the group's figures of one runtime (the runtime's entry is changed in place)."""
    if only:
        names = [p for p in PARAMS[group] if p in only]
    elif len(points) >= MIN_POINTS_FOR_ALL:
        names = [p for p in PARAMS[group] if rt.get(p) is not None]
    else:
        names = [PRIMARY[group]]
    best = loss(kn, points)
    for _ in range(4):
        for name in names:
            lo, hi = BOUNDS.get(name, (0.05, 1.0))
            for factor in (1.3, 1.1, 1.03):
                improved = True
                while improved:
                    improved = False
                    for f in (factor, 1 / factor):
                        old = rt.get(name)
                        new = min(hi, max(lo, (old or START.get(name, 0.001)) * f))
                        rt[name] = new
                        value = loss(kn, points)
                        if value < best - 1e-9:
                            best, improved = value, True
                            break
                        rt[name] = old
    return ", ".join(f"{n}: {rt[n]:.3g}" if rt.get(n) is not None else f"{n}: -" for n in names)

if __name__ == "__main__":
    sys.exit(main())
