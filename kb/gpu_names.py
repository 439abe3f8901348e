"""The names a formula reads about a GPU, for one card or as columns over several.

In: GPU entries (gpus.yaml after kb.knowledge, or a bare capacity), a precision and the
runtime's GEMM accumulation. Out: `gpu.*`, `gpu_count` and `_compute_precision` per GPU
(gpu_values), or over candidates as kb.expr.Col columns, one value where all agree
(gpu_columns); the catalogue's columns for every precision key the rules can ask for
(catalogue_tables, built once with the knowledge, kb.derived).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kb.expr import Col

Scope = dict[str, Any]
# the names a precision and the runtime's accumulation change; every other name is the card's own
COMPUTE_NAMES = ("gpu.compute_tflops", "_compute_precision")


def runs_on(runtime: dict[str, Any], gpu: dict[str, Any]) -> bool:
    """The runtime runs on this GPU's platform (a bare capacity runs anywhere)."""
    return gpu.get("vendor") == "any" or gpu["vendor"] in runtime["platforms"]


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


def _column(values: Iterable[Any]) -> Any:
    """A Col, or its one value where every element is the same value of the same type."""
    col = Col.of(values)
    first = col[0]
    same = all(v == first and v.__class__ is first.__class__ for v in col)
    return first if same else col


def gpu_columns(candidates: list[tuple[dict[str, Any], int]], precision: dict[str, Any],
                accumulate: str = "fp32") -> Scope:
    """The GPU names over several candidates: a Col per name, or one value where every
    candidate has the same (then formulas reading only such names are computed once)."""
    rows = [gpu_values(gpu, count, precision, accumulate) for gpu, count in candidates]
    return {name: _column(r[name] for r in rows) for name in rows[0]}


def precision_key(precision: dict[str, Any], runtime: dict[str, Any]) -> tuple[str, ...]:
    """What the catalogue's columns depend on: the compute precision and its fallbacks, the
    runtime's platforms and its GEMM accumulation."""
    return (precision["compute"], *precision["fallback"], "|", *runtime["platforms"], "|",
            runtime.get("gemm_accumulate", "fp32"))


def catalogue_tables(gpus: dict[str, dict[str, Any]], precisions: dict[str, dict[str, Any]],
                     runtimes: dict[str, dict[str, Any]]) -> dict[tuple[str, ...], Scope]:
    """gpu_columns of the catalogue GPUs each runtime runs on (one card each), for every
    precision and runtime: the card's own names once per platform list, the compute names once
    per precision key. Equal to gpu_columns on the same cards, name for name and in order."""
    cards = list(gpus.values())
    if not cards:
        return {}
    names = list(gpu_values(cards[0], 1, next(iter(precisions.values())), "fp32")) if precisions else []
    own: dict[tuple[str, ...], tuple[list[int], Scope]] = {}
    rows: list[Scope] = []
    rates: dict[tuple[str, ...], list[tuple[str | None, float | None]]] = {}
    out: dict[tuple[str, ...], Scope] = {}
    for precision in precisions.values():
        for runtime in runtimes.values():
            key = precision_key(precision, runtime)
            if key in out:
                continue
            platforms = tuple(runtime["platforms"])
            if platforms not in own:
                idx = [i for i, g in enumerate(cards) if runs_on(runtime, g)]
                if not rows:
                    rows = [gpu_values(g, 1, precision, "fp32") for g in cards]
                own[platforms] = (idx, {n: _column(rows[i][n] for i in idx)
                                        for n in names if n not in COMPUTE_NAMES} if idx else {})
            idx, fixed = own[platforms]
            if not idx:
                continue
            acc = runtime.get("gemm_accumulate", "fp32")
            chain = (*key[:key.index("|")], acc)
            every = rates.get(chain)
            if every is None:
                every = rates[chain] = [_compute_precision(g, precision, acc) for g in cards]
            computed = [every[i] for i in idx]
            per = {"_compute_precision": _column(c[0] for c in computed),
                   "gpu.compute_tflops": _column(c[1] for c in computed)}
            out[key] = {n: per[n] if n in per else fixed[n] for n in names}
    return out
