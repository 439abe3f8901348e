"""The names a formula reads about a GPU, for one card or as columns over several.

In: GPU entries (gpus.yaml after kb.knowledge.build, or a bare capacity), a precision and the
runtime's GEMM accumulation. Out: `gpu.*`, `gpu_count` and `_compute_precision` per GPU
(gpu_values), or over candidates as kb.expr.parse.Col columns, one value where all agree
(gpu_columns); the key the catalogue's columns depend on (precision_key; kb.knowledge.derived keeps
the catalogue's columns per key).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kb.expr.parse import Col

if TYPE_CHECKING:
    from kb.knowledge.records import GPU, Precision, Runtime

Scope = dict[str, Any]
# the names a precision and the runtime's accumulation change; every other name is the card's own


def runs_on(runtime: Runtime, gpu: GPU) -> bool:
    """The runtime runs on this GPU's platform (a bare capacity runs anywhere)."""
    return gpu.get("vendor") == "any" or gpu["vendor"] in runtime["platforms"]


def _compute_precision(gpu: GPU, precision: Precision,
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


def gpu_values(gpu: GPU, count: int, precision: Precision, accumulate: str = "fp32") -> Scope:
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


def _column(values: Iterable[Any]) -> Any:
    """A Col, or its one value where every element is the same value of the same type."""
    col = Col.of(values)
    first = col[0]
    same = all(v == first and v.__class__ is first.__class__ for v in col)
    return first if same else col


def gpu_columns(candidates: list[tuple[GPU, int]], precision: Precision,
                accumulate: str = "fp32") -> Scope:
    """The GPU names over several candidates: a Col per name, or one value where every
    candidate has the same (then formulas reading only such names are computed once)."""
    rows = [gpu_values(gpu, count, precision, accumulate) for gpu, count in candidates]
    return {name: _column(r[name] for r in rows) for name in rows[0]}


def precision_key(precision: Precision, runtime: Runtime) -> tuple[str, ...]:
    """What the catalogue's columns depend on: the compute precision and its fallbacks, the
    runtime's platforms and its GEMM accumulation."""
    return (precision["compute"], *precision["fallback"], "|", *runtime["platforms"], "|",
            runtime.get("gemm_accumulate", "fp32"))
