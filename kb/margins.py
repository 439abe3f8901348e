"""Honest figures around the fit: no speed for what cannot run, borderline margins, GPU counts.

In: the rows of an answer (kb.answer.GpuRow), its throughput dict, the memory error band
(rules/error_bands.yaml through kb.engine.error_bands) and, for counts, the Knowledge and the
Workload. Out: the same objects, changed in place, plus the warnings and assumptions to add:
- a GPU row that does not fit keeps no decode/prefill/training speed; the answer's own speed, when
  its GPU does not fit, moves to a warning labelled "if it fitted";
- a fit whose headroom is inside the memory estimate's error band is called borderline, with the band;
- the fewest GPUs that hold an inference job are found by the forward model itself where the
  per-GPU memory is not an even split (replicated KV under tensor parallelism, pipeline stages).
"""

from __future__ import annotations

from typing import Any

from kb.answer import GpuRow
from kb.model import Knowledge
from kb.workload import Workload

SPEEDS = ("decode_tokens_per_s", "decode_tokens_per_s_aggregate", "prefill_tokens_per_s", "ttft_s",
          "train_tokens_per_s", "train_time_s")


def withhold_speeds(rows: list[GpuRow], throughput: dict[str, Any], primary_fits: bool) -> list[str]:
    """Blank the speeds of setups that do not fit; say what the answer's own would be if it fitted."""
    for row in rows:
        if not row.fits:
            for name in SPEEDS:
                setattr(row, name, None)
    if primary_fits:
        return []
    shown = {k: v for k, v in throughput.items() if v is not None}
    for name in shown:
        throughput[name] = None
    if not shown:
        return []
    parts = []
    if "decode_tokens_per_s" in shown:
        parts.append(f"decode {shown['decode_tokens_per_s']:.3g} tokens/s per user")
    if "train_tokens_per_s" in shown:
        parts.append(f"training {shown['train_tokens_per_s']:.3g} tokens/s")
    if "prefill_tokens_per_s" in shown:
        parts.append(f"prefill {shown['prefill_tokens_per_s']:.3g} tokens/s")
    return ["it does not fit, so no speed is shown; if it fitted: " + ", ".join(parts)] if parts else []


def borderline(per_gpu_gb: float | None, headroom_gb: float | None, fits: bool,
               band: dict[str, Any] | None) -> str | None:
    """A sentence when a fit's headroom is smaller than the memory estimate's p90 error."""
    if not fits or per_gpu_gb is None or headroom_gb is None or not band:
        return None
    pct = band.get("p90_pct")
    if pct is None or headroom_gb >= per_gpu_gb * pct / 100:
        return None
    return (f"Borderline: {headroom_gb:.1f} GB to spare is within the memory estimate's error band "
            f"(p90 ±{pct:g}% = {per_gpu_gb * pct / 100:.1f} GB per GPU over {band.get('n')} "
            "published measurements); it may not fit in practice.")


def fewest_gpus(kn: Knowledge, w: Workload, gpu: dict[str, Any], lower: int, steps: int) -> int | None:
    """The fewest GPUs of this kind that hold the job, from `lower` (the count if memory split
    evenly, which no layout beats) up: replicated KV can need more."""
    from kb.solve import probe

    for n in range(max(1, lower), max(1, lower) + steps):
        if probe(kn, w, "gpu_count", n, gpu, n).fits:
            return n
    return None
