"""Fit the runtimes' efficiencies on the fit half of tests/data/calibration.yaml.

    python bench/calibrate.py          # prints the fitted figures per runtime (paste into rules/runtimes.yaml)

One figure per runtime and quantity (decode bandwidth efficiency, extra loss of dequantizing
kernels, fixed cost per decode step, prefill efficiency, training MFU), fitted by coordinate
descent on the squared log error; never a figure per GPU-and-model pair. The hold-out half
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
    "decode_tokens_per_s": ["decode_bandwidth_efficiency", "quant_kernel_efficiency", "decode_step_overhead_s",
                            "hbm_decode_efficiency"],
    "prefill_tokens_per_s": ["prefill_compute_efficiency", "quant_kernel_efficiency"],
    "train_tokens_per_s": ["training_mfu"],
}
BOUNDS = {"decode_step_overhead_s": (0.0, 0.05), "training_mfu": (0.05, 0.8),
          # DRAM rarely delivers more than ~92% of its peak to any kernel
          "decode_bandwidth_efficiency": (0.05, 0.92)}
PRIMARY = {"decode_tokens_per_s": "decode_bandwidth_efficiency",
           "prefill_tokens_per_s": "prefill_compute_efficiency", "train_tokens_per_s": "training_mfu"}
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
                "train_tokens_per_s": g["train_tokens_per_s"]}[m["kind"]]
        if not pred:
            continue
        total += math.log(pred / measured_value(m)) ** 2
    return total


def runtime_of(kn, m) -> str:
    from kb.engine import resolve
    from kb.query.parse import parse

    return resolve(parse(query_of(m), kn), kn).runtime["id"]


def main() -> int:
    from kb import get_knowledge

    kn = get_knowledge()
    fit = [m for m in measurements() if not held_out(m["id"]) and m["kind"] in PARAMS]
    by_runtime: dict[str, list] = {}
    for m in fit:
        try:
            by_runtime.setdefault(runtime_of(kn, m), []).append(m)
        except Exception:  # a query the rules cannot read is reported by accuracy.py
            continue
    for rt_id, points in sorted(by_runtime.items()):
        rt = kn.runtimes[rt_id]
        if len(points) < MIN_POINTS:
            print(f"{rt_id:14} n={len(points):2}  too few points: keeps its prior")
            continue
        if len(points) >= MIN_POINTS_FOR_ALL:
            names = sorted({p for m in points for p in PARAMS[m["kind"]] if rt.get(p) is not None})
        else:
            names = sorted({PRIMARY[m["kind"]] for m in points if rt.get(PRIMARY[m["kind"]]) is not None})
        best = loss(kn, points)
        for _ in range(4):
            for name in names:
                lo, hi = BOUNDS.get(name, (0.05, 1.0))
                for factor in (1.3, 1.1, 1.03):
                    improved = True
                    while improved:
                        improved = False
                        for f in (factor, 1 / factor):
                            old = rt[name]
                            new = min(hi, max(lo, (old or 0.001) * f))
                            rt[name] = new
                            value = loss(kn, points)
                            if value < best - 1e-9:
                                best, improved = value, True
                                break
                            rt[name] = old
        fitted = ", ".join(f"{n}: {rt[n]:.3g}" for n in names)
        print(f"{rt_id:14} n={len(points):2}  rms log error {math.sqrt(best / len(points)):.3f}  {fitted}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
