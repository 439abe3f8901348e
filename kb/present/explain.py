"""What `kbq --explain` (or --trace) adds to the plain answer: the memory breakdown, the error
bands, the sources' flowcharts, where the sources agree or disagree, every assumption and
warning, and the trace.

In: an Answer (kb.engine.answer). Out: text lines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.figures import BREAKDOWN_LABELS, num

if TYPE_CHECKING:
    from kb.engine.answer import Answer
    from kb.knowledge.records import Value



def _values(values: dict[str, Value]) -> str:
    return ", ".join(f"{k} = {num(v, 4)}" for k, v in values.items())


def _u(unit: str) -> str:
    return "" if unit in ("1", "") else unit


def explained(a: Answer, trace: bool) -> list[str]:
    """The lines --explain adds under the plain answer."""
    out: list[str] = []
    add = out.append
    mem = a.memory
    total = mem["total_gb"] or 0
    add("")
    add("MEMORY")
    for key, label in BREAKDOWN_LABELS.items():
        value = mem["breakdown"][key]
        if value:
            bar = "#" * max(1, round(30 * value / total)) if total else ""
            add(f"  {label:<17}{num(value):>9} GB  {bar}")
    if mem.get("kv_cache_gb_per_user"):
        add(f"  (KV cache per user: {num(mem['kv_cache_gb_per_user'])} GB)")
    if mem.get("per_gpu_breakdown") and (mem.get("gpu_count") or 1) > 1:
        add(f"  (each of {mem['gpu_count']} GPUs holds {num(mem['per_gpu_gb'])} GB under {mem['sharding']})")
    if mem.get("host_ram_gb"):
        add(f"  (CPU memory for what is offloaded: {num(mem['host_ram_gb'])} GB)")
    b = a.bottleneck
    ai = ", ".join(f"{k} {num(v)}" for k, v in (b.get("arithmetic_intensity") or {}).items())
    if b.get("ridge_point") is not None:
        add(f"  arithmetic intensity {ai} FLOP/B vs ridge point {num(b['ridge_point'])}")
    bands = [f"{k} ±{num(v['median_pct'])}% median, p90 {num(v['p90_pct'])}% over {v['n']} "
             + ("measurements of all runtimes" if v["basis"] == "all runtimes" else v["basis"])
             for k, v in a.error_bands.items() if v.get("median_pct") is not None]
    if bands:
        add("  error bands (published measurements): " + "; ".join(bands))
    if a.advice:
        add("")
        add("THE SOURCES' FLOWCHARTS SAY")
        for adv in a.advice:
            add(f"  {adv['title']} [{adv['source']}]: {adv['conclusion']}")
    if a.disagreements:
        add("")
        add("SOURCES DISAGREE")
        for d in a.disagreements:
            on = f" on {d['gpu']}" if d.get("gpu") else ""
            add(f"  {d['source']}{on}: \"{d['claim']}\"")
            if d.get("claimed") is not None:
                add(f"    claims {num(d['claimed'])} {_u(d['unit'])}; kbq computes {num(d['computed'])} "
                    f"{_u(d['unit'])} ({d['formula']})")
            add(f"    why: {d['note']}")
    if a.claims_checked:
        add("")
        add("SOURCES AGREE")
        for d in a.claims_checked:
            on = f" on {d['gpu']}" if d.get("gpu") else ""
            add(f"  {d['source']}{on}: claims {num(d['claimed'])} {d['unit']}, kbq {num(d['computed'])} {d['unit']}")
    add("")
    add("ASSUMPTIONS")
    out.extend(f"  - {x}" for x in a.assumptions or ["none"])
    if a.warnings:
        add("")
        add("WARNINGS")
        out.extend(f"  ! {w}" for w in a.warnings)
    if trace:
        add("")
        add("TRACE    " + " → ".join(a.path))
        for s in a.trace:
            add(f"  [{s.node}] {s.rule}")
            add(f"      {s.formula}")
            if s.values:
                add(f"      with {_values(s.values)}")
            res = num(s.result, 4) if not isinstance(s.result, bool) else str(s.result).lower()
            add(f"      = {res} {s.unit}    source: {s.source}" + (f"    ({s.note})" if s.note else ""))
    return out
