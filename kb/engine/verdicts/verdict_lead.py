"""The verdict's pieces that every kind reads: a configuration, its speed, and the figure a
question asked for first (kb.engine.verdicts.verdict composes them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.figures import BREAKDOWN_LABELS, duration, num, usd
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.engine.assembly.answer import Answer, GpuRow


def config(g: GpuRow) -> str:
    return f"{g.count}× {g.name}"


def speed(g: GpuRow, training: bool) -> str | None:
    """'16.8 tok/s per user' or '741 training tok/s'; None where it does not fit or is unknown."""
    if training:
        return f"{num(g.train_tokens_per_s)} training tok/s" if g.train_tokens_per_s else None
    return f"{num(g.decode_tokens_per_s)} tok/s per user" if g.decode_tokens_per_s else None


def rate(g: GpuRow, training: bool) -> str | None:
    """'20.3 tok/s' (per user) or '741 training tok/s', for a line that compares."""
    value = g.train_tokens_per_s if training else g.decode_tokens_per_s
    return f"{num(value)} {'training ' if training else ''}tok/s" if value else None


def training(a: Answer) -> bool:
    return "training" in a.bottleneck


def lead(a: Answer, focus: str | None, g: GpuRow) -> str | None:
    """The figure a question asked for first ("how much vram", "how fast", "how long")."""
    is_training = training(a)
    mem = a.memory
    if focus == "memory" and mem.get(N.TOTAL_GB) is not None:
        per = mem.get(N.PER_GPU_GB)
        each = f" ({num(per)} GB per GPU)" if per is not None and (mem.get(N.GPU_COUNT) or 1) > 1 else ""
        parts = sorted(((float(v), BREAKDOWN_LABELS[k]) for k, v in (mem.get("breakdown") or {}).items()
                        if k in BREAKDOWN_LABELS and isinstance(v, (int, float)) and v > 0), reverse=True)[:2]
        most = ", ".join(f"{label} {num(v)}" for v, label in parts)     # the two largest parts
        return f"Memory: {num(mem['total_gb'])} GB in all{each}" + (f": {most}." if most else ".")
    if not g.fits:
        return None
    t = a.throughput
    if focus == "speed":
        if a.workload.get(N.TASK) == "prefill" and t.get(N.PREFILL_TOKENS_PER_S):
            return (f"Speed: {num(t['prefill_tokens_per_s'])} prompt tokens/s (prefill), first token "
                    f"in {num(t.get('ttft_s'))} s, on {config(g)}.")
        if is_training and t.get(N.TRAIN_TOKENS_PER_S):
            return f"Speed: {num(t['train_tokens_per_s'])} training tokens/s on {config(g)}."
        if t.get(N.DECODE_TOKENS_PER_S):
            return (f"Speed: {num(t['decode_tokens_per_s'])} tokens/s per user "
                    f"({num(t.get('decode_tokens_per_s_aggregate'))} in all) on {config(g)}.")
    if focus == "time":
        if is_training and t.get(N.TRAIN_TIME_S):
            hours = [f"{num(g.run_hours * g.count)} GPU-hours"] if g.run_hours else []
            rent = [f"{usd(g.run_cost_usd)} rented"] if g.run_cost_usd else []
            paid = f" ({', '.join(hours + rent)})" if hours or rent else ""
            return (f"Time: {num(a.workload.get('train_tokens'))} tokens in {duration(t['train_time_s'])} "
                    f"on {config(g)}{paid}.")
        if t.get(N.TTFT_S) is not None:
            return f"Time to first token: {num(t['ttft_s'])} s on {config(g)}."
    return None
