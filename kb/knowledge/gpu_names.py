"""The names a formula reads about a GPU, for one card or as columns over several.

In: GPU entries (gpus.yaml after kb.knowledge.build, or a bare capacity), a precision and the
runtime's GEMMs (their accumulation, and the formats whose own low-precision GEMMs it runs).
Out: `gpu.*`, `gpu_count`, `gemm_weight_only` and `_compute_precision` per GPU
(gpu_values), or over candidates as kb.expr.parse.Col columns, one value where all agree
(gpu_columns); the key the catalogue's columns depend on (precision_key; kb.knowledge.derived keeps
the catalogue's columns per key).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeAlias

from kb.expr.parse import Col

if TYPE_CHECKING:
    from kb.knowledge.records import GPU, Precision, Runtime

Scope: TypeAlias = "dict[str, Any]"
# the runtime's GEMMs: what FP16 GEMMs accumulate in, and the precision ids whose own
# low-precision GEMMs (W8A8, W4A4) it runs (runtimes.yaml gemm_accumulate and native_gemm)
Gemm = tuple[str, tuple[str, ...]]
FP32_GEMM: Gemm = ("fp32", ())


def gemm_of(runtime: Runtime) -> Gemm:
    """The runtime's GEMMs as gpu_values reads them."""
    return (runtime.get("gemm_accumulate", "fp32"), tuple(runtime.get("native_gemm") or ()))


def gemm_keys(precision: Precision, native: tuple[str, ...]) -> tuple[list[str], bool]:
    """The tensor rates a matmul of this format tries in order, and whether its weights are
    dequantized to the activations' 16 bits for it (weight-only): always for a weight-only
    format (precisions.yaml weight_only), and for a low-precision format under a runtime that
    does not run its GEMMs (its `dequantized` rates)."""
    if precision.get("weight_only"):
        return [precision["compute"], *precision["fallback"]], True
    if precision.get("dequantized") and precision["id"] not in native:
        return list(precision["dequantized"]), True
    return [precision["compute"], *precision["fallback"]], False


def runs_on(runtime: Runtime, gpu: GPU, precision_id: str | None = None) -> bool:
    """The runtime runs on this GPU's platform and architecture (a bare capacity runs anywhere),
    and, given a format, runs that format's kernels there (runtimes.yaml unsupported_formats)."""
    arch = gpu.get("architecture")
    return gpu.get("vendor") == "any" or (
        gpu["vendor"] in runtime["platforms"]
        and arch not in runtime.get("unsupported_architectures", [])
        and (precision_id is None or arch not in format_architectures(runtime, precision_id)))


def format_architectures(runtime: Runtime, precision_id: str) -> list[str]:
    """The architectures whose cards the runtime does not run this format on."""
    return list((runtime.get("unsupported_formats") or {}).get(precision_id, []))


def _compute_precision(gpu: GPU, keys: list[str],
                       accumulate: str = "fp32") -> tuple[str | None, float | None]:
    """The precision and peak rate a GEMM runs at (the first of `keys` the card has); FP16
    GEMMs that accumulate in FP16 (the runtime's gemm_accumulate) take the card's fp16_acc16
    rate where it lists one."""
    for key in keys:
        tensor = gpu.get("tensor_tflops") or {}
        value = gpu.get("fp32_tflops") if key == "fp32" else tensor.get(key)
        if key == "fp16" and accumulate == "fp16" and tensor.get("fp16_acc16"):
            value = tensor["fp16_acc16"]
        if value:
            return key, float(value)
    return None, None


def gpu_values(gpu: GPU, count: int, precision: Precision, gemm: Gemm = FP32_GEMM) -> Scope:
    """The names a formula reads about one GPU (and how many of it)."""
    keys, weight_only = gemm_keys(precision, gemm[1])
    key, tflops = _compute_precision(gpu, keys, gemm[0])
    # a card without the format's own rate falls back to a 16-bit one: weight-only there too
    weight_only = weight_only or key in (precision.get("dequantized") or ())
    return {
        "gpu.id": gpu["id"], "gpu.name": gpu["name"], "gpu.vendor": gpu["vendor"],
        "gpu.vram_gb": gpu["memory_gb"], "gpu.bandwidth_gb_s": gpu["bandwidth_gb_s"],
        "gpu.hbm": str(gpu.get("memory_type", "")).upper().startswith("HBM"),
        "gpu.compute_tflops": tflops, "gpu.tdp_w": gpu.get("tdp_w"),
        "gpu.fp8_tflops": float((gpu.get("tensor_tflops") or {}).get("fp8") or 0),
        "gpu.compute_precision": key or "none", "gemm_weight_only": weight_only,
        "gpu.architecture": gpu.get("architecture") or "",
        "gpu.interconnect_gb_s": (gpu.get("interconnect") or {}).get("gb_s") or 0,
        "gpu.module": str(gpu.get("form_factor", "")).upper().startswith(("SXM", "OAM", "SUPERCHIP", "SH5")),
        "gpu.pcie_generation": gpu.get("pcie_generation") or 0,
        "gpu.price_usd": gpu.get("price_usd"), "gpu.cloud_usd_per_hour": gpu.get("cloud_usd_per_hour"),
        "gpu.server_usd": gpu.get("server_usd"), "gpu.server_gpus": gpu.get("server_gpus") or 0,
        # a rate the vendor does not publish (gpus.yaml tensor_unpublished) is still native math
        "gpu.native_compute": bool(keys) and (key == keys[0] or keys[0] in gpu.get("tensor_unpublished", ())),
        "gpu_count": count, "_compute_precision": key,
    }


def one_or_col(values: Iterable[Any]) -> Any:
    """A Col, or its one value where every element is the same value of the same type."""
    col = Col.of(values)
    first = col[0]
    same = all(v == first and v.__class__ is first.__class__ for v in col)
    return first if same else col


def gpu_columns(candidates: list[tuple[GPU, int]], precision: Precision,
                gemm: Gemm = FP32_GEMM) -> Scope:
    """The GPU names over several candidates: a Col per name, or one value where every
    candidate has the same (then formulas reading only such names are computed once)."""
    rows = [gpu_values(gpu, count, precision, gemm) for gpu, count in candidates]
    return {name: one_or_col(r[name] for r in rows) for name in rows[0]}


def precision_key(precision: Precision, runtime: Runtime) -> tuple[str, ...]:
    """What the catalogue's columns depend on: the rates the format's matmuls try and whether
    they are weight-only under this runtime, the runtime's platforms and its GEMM accumulation."""
    keys, weight_only = gemm_keys(precision, gemm_of(runtime)[1])
    return (*keys, str(weight_only), "|", *runtime["platforms"], "|",
            *runtime.get("unsupported_architectures", []), "|",
            *format_architectures(runtime, precision["id"]), "|",
            runtime.get("gemm_accumulate", "fp32"))
