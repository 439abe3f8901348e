"""The candidate GPUs as scope names: one GPU, or every candidate at once as columns.

In: GPU entries (gpus.yaml, or a bare capacity), the resolved precision and runtime, and a
parallel layout per GPU count (kb.layout). Out: the `gpu.*`, `gpu_count`, `tp`, `pp` and `dp`
names a formula reads, per GPU or as kb.expr.Col columns over the candidates (one value where
every candidate has the same).
"""

from __future__ import annotations

from typing import Any

from kb import training as tr
from kb.engine.evaluate import Scope
from kb.engine.scope import Resolved, runs_on
from kb.expr import Col
from kb.layout import Layout, choose, scope_values
from kb.model import Knowledge


def _compute_precision(gpu: dict[str, Any], precision: dict[str, Any],
                       accumulate: str = "fp32") -> tuple[str | None, float | None]:
    """The precision and peak rate a GEMM runs at; FP16 GEMMs that accumulate in FP16 (the
    runtime's gemm_accumulate) take the card's fp16_acc16 rate where it lists one."""
    for key in [precision["compute"], *precision["fallback"]]:
        tensor = gpu.get("tensor_tflops") or {}
        value = gpu.get("fp32_tflops") if key == "fp32" else tensor.get(key)
        if key == "fp16" and accumulate == "fp16" and tensor.get("fp16_acc16"):
            value = tensor["fp16_acc16"]
        if value:
            return key, float(value)
    return None, None


def gpu_values(gpu: dict[str, Any], count: int, precision: dict[str, Any], accumulate: str = "fp32") -> Scope:
    """The names a formula reads about one GPU (and how many of it)."""
    key, tflops = _compute_precision(gpu, precision, accumulate)
    return {
        "gpu.id": gpu["id"], "gpu.name": gpu["name"], "gpu.vendor": gpu["vendor"],
        "gpu.vram_gb": gpu["memory_gb"], "gpu.bandwidth_gb_s": gpu["bandwidth_gb_s"],
        "gpu.hbm": str(gpu.get("memory_type", "")).upper().startswith("HBM"),
        "gpu.compute_tflops": tflops, "gpu.tdp_w": gpu.get("tdp_w"),
        "gpu.interconnect_gb_s": (gpu.get("interconnect") or {}).get("gb_s") or 0,
        "gpu.module": str(gpu.get("form_factor", "")).upper().startswith(("SXM", "OAM", "SUPERCHIP", "SH5")),
        "gpu.price_usd": gpu.get("price_usd"), "gpu.cloud_usd_per_hour": gpu.get("cloud_usd_per_hour"),
        "gpu_count": count, "_compute_precision": key,
    }


def gpu_scope(base: Scope, gpu: dict[str, Any], count: int, precision: dict[str, Any],
              layout: Layout | None = None) -> Scope:
    """The scope of one GPU (and the parallel layout of `count` of them)."""
    scope = dict(base)
    scope.update(gpu_values(gpu, count, precision, base.get("_gemm_accumulate", "fp32")))
    scope.update(scope_values(layout or Layout(count, 1, 1, True, None)))
    return scope


def layout_of(r: Resolved, kn: Knowledge, count: int) -> Layout:
    """The parallel layout of `count` GPUs for this job (kb.layout); training keeps its split."""
    if r.is_training:
        return tr.layout(count)
    w = r.workload
    return choose(count, int(r.model["attention_heads"]), r.runtime.get("multi_gpu") == "tensor_parallel",
                  int(kn.constants["gpus_per_node"]["value"]), w.tp, w.pp)


def layouts_of(r: Resolved, kn: Knowledge, candidates: list[tuple[dict[str, Any], int, bool]]) -> list[Layout]:
    """layout_of each candidate's count (a layout depends on the count, not on the card)."""
    by_count: dict[int, Layout] = {}
    out = []
    for _, count, _ in candidates:
        found = by_count.get(count)
        if found is None:
            found = by_count[count] = layout_of(r, kn, count)
        out.append(found)
    return out


def layout_columns(layouts: list[Layout]) -> Scope:
    """tp, pp and dp over the candidates: one value when all agree, else a Col."""
    out: Scope = {}
    for name in ("tp", "pp", "dp"):
        col = Col.of(getattr(x, name) for x in layouts)
        out[name] = col[0] if all(v == col[0] for v in col) else col
    return out


def gpu_columns(candidates: list[tuple[dict[str, Any], int]], precision: dict[str, Any],
                accumulate: str = "fp32") -> Scope:
    """The GPU names over several candidates: a Col per name, or one value where every
    candidate has the same (then formulas reading only such names are computed once)."""
    rows = [gpu_values(gpu, count, precision, accumulate) for gpu, count in candidates]
    out: Scope = {}
    for name in rows[0]:
        col = Col.of(r[name] for r in rows)
        first = col[0]
        same = all(v == first and v.__class__ is first.__class__ for v in col)
        out[name] = first if same else col
    return out


def catalogue_columns(kn: Knowledge, precision: dict[str, Any], runtime: dict[str, Any]) -> Scope:
    """gpu_columns of the catalogue GPUs the runtime runs on, once per compute precision and
    platform list (derived from rules)."""
    acc = runtime.get("gemm_accumulate", "fp32")
    key = "gpu_columns:" + ",".join([precision["compute"], *precision["fallback"], *runtime["platforms"], acc])
    cols = kn.cache.get(key)
    if cols is None:
        cols = kn.cache[key] = gpu_columns([(g, 1) for g in kn.gpus.values() if runs_on(runtime, g)],
                                           precision, acc)
    return cols
