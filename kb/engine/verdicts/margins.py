"""Honest figures around the fit: no speed for what cannot run, borderline margins, GPU counts.

In: the rows of an answer (kb.engine.assembly.answer.GpuRow), its throughput dict, the memory error band
(rules/error_bands.yaml through kb.engine.error_bands). Out: the same objects, changed in place, plus the warnings and assumptions to add:
- a GPU row that does not fit keeps no decode/prefill/training speed; the answer's own speed, when
  its GPU does not fit, moves to a warning labelled "if it fitted";
- a fit whose headroom is inside the memory estimate's error band is called borderline, with the band;
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from kb.engine.assembly.answer import GpuRow
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.engine.assembly.answer_records import ErrorBand, Throughput

    Speed = Literal["decode_tokens_per_s", "decode_tokens_per_s_aggregate", "prefill_tokens_per_s",
                    "ttft_s", "train_tokens_per_s", "train_time_s"]

SPEEDS: tuple[Speed, ...] = (N.DECODE_TOKENS_PER_S, N.DECODE_TOKENS_PER_S_AGGREGATE,
                             N.PREFILL_TOKENS_PER_S, N.TTFT_S, N.TRAIN_TOKENS_PER_S, N.TRAIN_TIME_S)


def withhold_speeds(rows: list[GpuRow], throughput: Throughput, primary_fits: bool) -> list[str]:
    """Blank the speeds of setups that do not fit; say what the answer's own would be if it fitted."""
    for row in rows:
        if not row.fits:
            for name in SPEEDS:
                setattr(row, name, None)
    if primary_fits:
        return []
    shown = {k: v for k, v in throughput.items() if v is not None}
    if not shown:
        return []
    for key in SPEEDS:
        throughput[key] = None
    parts = []
    if N.DECODE_TOKENS_PER_S in shown:
        parts.append(f"decode {shown['decode_tokens_per_s']:.3g} tokens/s per user")
    if N.TRAIN_TOKENS_PER_S in shown:
        parts.append(f"training {shown['train_tokens_per_s']:.3g} tokens/s")
    if N.PREFILL_TOKENS_PER_S in shown:
        parts.append(f"prefill {shown['prefill_tokens_per_s']:.3g} tokens/s")
    return ["it does not fit, so no speed is shown; if it fitted: " + ", ".join(parts)] if parts else []


def borderline(per_gpu_gb: float | None, headroom_gb: float | None, fits: bool,
               band: ErrorBand | None) -> str | None:
    """A sentence when a fit's headroom is smaller than the memory estimate's p90 error."""
    if not fits or per_gpu_gb is None or headroom_gb is None or not band:
        return None
    if headroom_gb < 0:         # fits with weights offloaded to the host's memory (formulas.yaml offload_gb)
        return (f"{-headroom_gb:.1f} GB per GPU does not fit VRAM and is kept in the host's memory; "
                "decode reads it at the host memory's bandwidth (formulas.yaml offload_step_s).")
    pct = band.get("p90_pct")
    if pct is None or headroom_gb >= per_gpu_gb * pct / 100:
        return None
    return (f"Borderline: {headroom_gb:.1f} GB to spare is within the memory estimate's error band "
            f"(p90 ±{pct:g}% = {per_gpu_gb * pct / 100:.1f} GB per GPU over {band.get('n')} "
            "published measurements); it may not fit in practice.")
