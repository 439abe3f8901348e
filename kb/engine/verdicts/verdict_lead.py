"""The verdict's pieces that every kind reads: a configuration, its speed, and the figure a
question asked for first (kb.engine.verdicts.verdict composes them; the wording is
rules/query.yaml verdict.templates config, speed_*, rate_*, lead_*)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.engine.verdicts.wording import say
from kb.figures import BREAKDOWN_LABELS, duration, num, usd
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.engine.assembly.answer import Answer, GpuRow
    from kb.knowledge.data import Knowledge


def config(kn: Knowledge, g: GpuRow) -> str:
    return say(kn, "config", count=g.count, gpu=g.name)


def bought(kn: Knowledge, g: GpuRow) -> str | None:
    """What a configuration costs to buy: '$3,200', and for modules 'with the server it needs'
    (their price, formulas.yaml config_price_usd, counts the servers they are bought in)."""
    if not g.config_price_usd:
        return None
    price = usd(g.config_price_usd)
    if g.servers_bought == 1:
        return say(kn, "price_server", price=price)
    return say(kn, "price_servers", price=price, count=g.servers_bought) if g.servers_bought else price


def module_lacks(kn: Knowledge, g: GpuRow) -> str:
    """', an SXM2 module without BF16 or FP8 tensor cores' for a module proposed whose
    tensor cores have no rate in a format current kernels use (query.yaml verdict.module_formats)."""
    gpu = kn.gpus.get(g.id)
    if gpu is None or not g.servers_bought:
        return ""
    rates = gpu.get("tensor_tflops") or {}
    missing = [f.upper() for f in kn.query["verdict"].get("module_formats") or [] if not rates.get(f)]
    if not missing:
        return ""
    return say(kn, "module_lacks", form=str(gpu.get("form_factor") or ""), formats=" or ".join(missing))


def speed(kn: Knowledge, g: GpuRow, training: bool) -> str | None:
    """'16.8 tok/s per user' or '741 training tok/s'; None where it does not fit or is unknown."""
    if training:
        return say(kn, "speed_training", value=num(g.train_tokens_per_s)) if g.train_tokens_per_s else None
    return say(kn, "speed_decode", value=num(g.decode_tokens_per_s)) if g.decode_tokens_per_s else None


def rate(kn: Knowledge, g: GpuRow, training: bool) -> str | None:
    """'20.3 tok/s' (per user) or '741 training tok/s', for a line that compares."""
    value = g.train_tokens_per_s if training else g.decode_tokens_per_s
    return say(kn, "rate_training" if training else "rate_decode", value=num(value)) if value else None


def training(a: Answer) -> bool:
    return "training" in a.bottleneck


def _memory(kn: Knowledge, a: Answer) -> str:
    """'Memory: 41.2 GB in all (20.6 GB per GPU): weights 35.1, KV cache 4.2.' (the largest parts,
    as many as query.yaml verdict.memory_parts_named)."""
    mem = a.memory
    per = mem.get(N.PER_GPU_GB)
    each = (say(kn, "lead_memory_each", per_gpu=num(per))
            if per is not None and (mem.get(N.GPU_COUNT) or 1) > 1 else "")
    parts = sorted(((float(v), BREAKDOWN_LABELS[k]) for k, v in (mem.get("breakdown") or {}).items()
                    if k in BREAKDOWN_LABELS and isinstance(v, (int, float)) and v > 0),
                   reverse=True)[:int(kn.query["verdict"]["memory_parts_named"]["value"])]
    most = ", ".join(say(kn, "lead_memory_part", label=label, value=num(v)) for v, label in parts)
    return say(kn, "lead_memory", total=num(mem['total_gb']), each=each,
               parts=say(kn, "lead_memory_parts", parts=most) if most else "")


def lead(kn: Knowledge, a: Answer, focus: str | None, g: GpuRow) -> str | None:
    """The figure a question asked for first ("how much vram", "how fast", "how long")."""
    is_training = training(a)
    if focus == "memory" and a.memory.get(N.TOTAL_GB) is not None:
        return _memory(kn, a)
    if not g.fits:
        return None
    t, on = a.throughput, config(kn, g)
    if focus == "speed":
        if a.workload.get(N.TASK) == "prefill" and t.get(N.PREFILL_TOKENS_PER_S):
            return say(kn, "lead_speed_prefill", prefill=num(t['prefill_tokens_per_s']),
                       ttft=num(t.get('ttft_s')), config=on)
        if is_training and t.get(N.TRAIN_TOKENS_PER_S):
            return say(kn, "lead_speed_training", tokens=num(t['train_tokens_per_s']), config=on)
        if t.get(N.DECODE_TOKENS_PER_S):
            return say(kn, "lead_speed_decode", per_user=num(t['decode_tokens_per_s']),
                       aggregate=num(t.get('decode_tokens_per_s_aggregate')), config=on)
    if focus == "time":
        if is_training and t.get(N.TRAIN_TIME_S):
            hours = [say(kn, "lead_time_gpu_hours", hours=num(g.run_hours * g.count))] if g.run_hours else []
            rent = [say(kn, "lead_time_rented", cost=usd(g.run_cost_usd))] if g.run_cost_usd else []
            paid = say(kn, "lead_time_paid", items=", ".join(hours + rent)) if hours or rent else ""
            return say(kn, "lead_time_training", tokens=num(a.workload.get('train_tokens')),
                       duration=duration(t['train_time_s']), config=on, paid=paid)
        if t.get(N.TTFT_S) is not None:
            return say(kn, "lead_ttft", ttft=num(t['ttft_s']), config=on)
    return None
