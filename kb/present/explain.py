"""What `kbq --explain` (or --trace) adds to the plain answer: the memory breakdown, the error
bands, the sources' flowcharts, where the sources agree or disagree, every assumption and
warning, and the trace.

In: an Answer (kb.engine.assembly.answer). Out: text lines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.figures import BREAKDOWN_LABELS, num
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.engine.assembly.answer import Answer
    from kb.knowledge.records import Value



def _values(values: dict[str, Value]) -> str:
    return ", ".join(f"{k} = {num(v, 4)}" for k, v in values.items())


def _u(unit: str) -> str:
    return "" if unit in ("1", "") else unit


def explained(a: Answer, trace: bool) -> list[str]:
    """The lines --explain adds under the plain answer: its sections in order."""
    out = _memory(a) + _sources(a)
    out += ["", "ASSUMPTIONS", *(f"  - {x}" for x in a.assumptions or ["none"])]
    if a.warnings:
        out += ["", "WARNINGS", *(f"  ! {w}" for w in a.warnings)]
    return out + (_trace(a) if trace else [])


def _memory(a: Answer) -> list[str]:
    """The memory breakdown as bars, what each GPU and the CPU hold, the arithmetic intensity
    against the ridge point, and the error bands."""
    out = ["", "MEMORY"]
    mem = a.memory
    total = mem[N.TOTAL_GB] or 0
    for key, label in BREAKDOWN_LABELS.items():
        value = mem["breakdown"][key]
        if value:
            bar = "#" * max(1, round(30 * value / total)) if total else ""
            out.append(f"  {label:<17}{num(value):>9} GB  {bar}")
    if mem.get(N.KV_CACHE_GB_PER_USER):
        out.append(f"  (KV cache per user: {num(mem['kv_cache_gb_per_user'])} GB)")
    if mem.get("per_gpu_breakdown") and (mem.get(N.GPU_COUNT) or 1) > 1:
        out.append(f"  (each of {mem['gpu_count']} GPUs holds {num(mem['per_gpu_gb'])} GB under {mem['sharding']})")
    if mem.get(N.HOST_RAM_GB):
        out.append(f"  (CPU memory for what is offloaded: {num(mem['host_ram_gb'])} GB)")
    b = a.bottleneck
    ai = ", ".join(f"{k} {num(v)}" for k, v in (b.get("arithmetic_intensity") or {}).items())
    if b.get(N.RIDGE_POINT) is not None:
        out.append(f"  arithmetic intensity {ai} FLOP/B vs ridge point {num(b['ridge_point'])}")
    bands = [f"{k} ±{num(v['median_pct'])}% median, p90 {num(v['p90_pct'])}% over {v['n']} "
             + ("measurements of all runtimes" if v["basis"] == "all runtimes" else v["basis"])
             for k, v in a.error_bands.items() if v.get("median_pct") is not None]
    if bands:
        out.append("  error bands (published measurements): " + "; ".join(bands))
    return out


def _sources(a: Answer) -> list[str]:
    """What the sources' flowcharts say, and where the sources disagree and agree with kbq."""
    out: list[str] = []
    if a.advice:
        out += ["", "THE SOURCES' FLOWCHARTS SAY"]
        out += [f"  {adv['title']} [{adv['source']}]: {adv['conclusion']}" for adv in a.advice]
    if a.disagreements:
        out += ["", "SOURCES DISAGREE"]
        for d in a.disagreements:
            on = f" on {d['gpu']}" if d.get("gpu") else ""
            out.append(f"  {d['source']}{on}: \"{d['claim']}\"")
            if d.get("claimed") is not None:
                out.append(f"    claims {num(d['claimed'])} {_u(d['unit'])}; kbq computes {num(d['computed'])} "
                           f"{_u(d['unit'])} ({d['formula']})")
            out.append(f"    why: {d['note']}")
    if a.claims_checked:
        out += ["", "SOURCES AGREE"]
        for d in a.claims_checked:
            on = f" on {d['gpu']}" if d.get("gpu") else ""
            out.append(f"  {d['source']}{on}: claims {num(d['claimed'])} {d['unit']}, kbq {num(d['computed'])} {d['unit']}")
    return out


def _trace(a: Answer) -> list[str]:
    """The path walked, then each step: its rule, formula, values and result with its source."""
    out = ["", "TRACE    " + " → ".join(a.path)]
    for s in a.trace:
        out.append(f"  [{s.node}] {s.rule}")
        out.append(f"      {s.formula}")
        if s.values:
            out.append(f"      with {_values(s.values)}")
        res = num(s.result, 4) if not isinstance(s.result, bool) else str(s.result).lower()
        out.append(f"      = {res} {s.unit}    source: {s.source}" + (f"    ({s.note})" if s.note else ""))
    return out
