"""Answer → text for a terminal, or Markdown for a wiki.

In: an Answer (kb.engine.answer). Out: a string. The verdict comes first, then memory,
throughput, bottleneck, the GPU table, the sources' flowcharts, disagreements, assumptions,
warnings and the trace.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kb.figures import duration, num

if TYPE_CHECKING:
    from kb.engine.answer import Answer, GpuRow
    from kb.knowledge.records import Value

BREAKDOWN_LABELS = {
    "weights_gb": "weights", "kv_cache_gb": "KV cache", "activations_gb": "activations",
    "gradients_gb": "gradients", "optimizer_gb": "optimizer", "adapters_gb": "adapters",
    "overhead_gb": "runtime overhead", "other_models_gb": "other models",
}


def _gpu_table(a: Answer, limit: int | None) -> tuple[list[str], list[list[str]], int]:
    training = "training" in a.bottleneck
    head = ["#", "GPU", "n", "VRAM GB", "needs GB/GPU", "fits", "headroom GB", "min GPUs"]
    head += ["train tok/s", "time"] if training else ["decode tok/s", "aggregate", "prefill tok/s"]
    rows = []
    gpus = a.gpus if limit is None else a.gpus[:limit]
    for g in gpus:
        row = [str(g.rank), g.name, str(g.count), num(g.vram_gb), num(g.per_gpu_gb),
               "yes" if g.fits else "NO", num(g.headroom_gb), num(g.gpus_needed)]
        if training:
            row += [num(g.train_tokens_per_s), duration(g.train_time_s)]
        else:
            row += [num(g.decode_tokens_per_s), num(g.decode_tokens_per_s_aggregate),
                    num(g.prefill_tokens_per_s)]
        row += cost_cells(g, training)
        rows.append(row)
    head += COST_HEAD_TRAIN if training else COST_HEAD_SERVE
    return head, rows, len(a.gpus) - len(gpus)


COST_HEAD_SERVE = ["buy $", "rent $/h", "$/M tok", "break-even mo"]
COST_HEAD_TRAIN = ["buy $", "rent $/h", "run $", "break-even mo"]


def cost_cells(g: GpuRow, training: bool) -> list[str]:
    """What a row costs: to buy (every card), to rent per hour, per million output tokens or
    per training run, and the months of renting that cost as much as buying."""
    per = g.run_cost_usd if training else g.usd_per_million_tokens
    return [_money(g.config_price_usd), _money(g.config_usd_per_hour), _money(per),
            num(g.breakeven_months)]


def _money(v: float | None) -> str:
    return "n/a" if v is None else f"{v:,.0f}" if v >= 100 else f"{v:,.2f}"


def ranked_by(a: Answer) -> str:
    rec = a.recommendation
    return f"ranked by {rec['sort']}" if rec and rec["sort"] else "ranked by fit, then speed, then power"


def options_lines(a: Answer) -> list[str]:
    """The computed alternatives, one line each (text and Markdown)."""
    out = []
    for o in a.options or []:
        speed = o.get("decode_tokens_per_s") or o.get("train_tokens_per_s")
        cost = o.get("usd_per_million_tokens") if "usd_per_million_tokens" in o else o.get("run_cost_usd")
        out.append(f"{o['change']}: {'fits' if o['fits'] else 'does not fit'} on {o['count']}× {o['gpu']} "
                   f"({num(o['per_gpu_gb'])} GB per GPU), {num(speed)} tok/s, "
                   f"{'$' + _money(cost) if cost is not None else 'cost n/a'} "
                   f"{'per M tokens' if 'usd_per_million_tokens' in o else 'per run'} — kbq \"{o['query']}\"")
    return out


def comparison_lines(a: Answer) -> list[str]:
    """One line per side of a comparison: the value, fit, memory, speed or cost, its query."""
    out = []
    for side in a.comparison or []:
        fit = "fits" if side["fits"] else "does not fit"
        speed = (f"{num(side['train_tokens_per_s'])} training tokens/s" if side["train_tokens_per_s"] is not None
                 else f"{num(side['decode_tokens_per_s'])} tokens/s per user")
        out.append(f"{side['value']}: {fit} on {side['count']}× {side['gpu']}, {num(side['per_gpu_gb'])} GB per GPU "
                   f"({num(side['total_gb'])} GB in all), {speed} — {side['query']}")
    return out


def _columns(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(r: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 1 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
    return [line(head), line(["-" * w for w in widths]), *[line(r) for r in rows]]


def _values(values: dict[str, Value]) -> str:
    return ", ".join(f"{k} = {num(v, 4)}" for k, v in values.items())


def text(a: Answer, limit: int | None = 12, trace: bool = True) -> str:
    out: list[str] = []
    add = out.append
    add(a.query)
    add("=" * min(78, max(len(a.query), 10)))
    add(f"VERDICT  {a.verdict}")
    add("")
    if a.comparison:
        add("COMPARED side by side (each side alone: kbq \"<query>\")")
        out.extend(f"  - {line}" for line in comparison_lines(a))
        add("")
    mem = a.memory
    add(f"MEMORY   {num(mem['total_gb'])} GB in all (GB = 10^9 bytes){_band(a, 'total_gb')}")
    total = mem["total_gb"] or 0
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
    t = a.throughput
    b = a.bottleneck
    add("")
    add(f"SPEED    on {mem['gpu_count']}× {b['gpu']}")
    if b.get("ridge_point") is None:
        add("  needs a GPU model (bandwidth and TFLOPS); a memory size alone answers only the fit")
    elif "training" in b:
        add(f"  training  {num(t['train_tokens_per_s'])} tokens/s{_band(a, 'train_tokens_per_s')}; "
            f"{num(a.workload['train_tokens'])} tokens in {duration(t['train_time_s'])}")
    else:
        add(f"  decode    {num(t['decode_tokens_per_s'])} tokens/s per user{_band(a, 'decode_tokens_per_s')}, "
            f"{num(t['decode_tokens_per_s_aggregate'])} tokens/s in all{_band(a, 'decode_tokens_per_s_aggregate')}")
        add(f"  prefill   {num(t['prefill_tokens_per_s'])} tokens/s{_band(a, 'prefill_tokens_per_s')}; "
            f"time to first token {num(t['ttft_s'])} s")
    phases = [f"{p} {b[p]}" for p in ("decode", "prefill", "training") if b.get(p)]
    ai = ", ".join(f"{k} {num(v)}" for k, v in (b.get("arithmetic_intensity") or {}).items())
    if b.get("ridge_point") is not None:
        add(f"  bound     {'; '.join(phases)} (arithmetic intensity {ai} FLOP/B vs ridge point {num(b['ridge_point'])})")
    add("")
    head, rows, more = _gpu_table(a, limit)
    add("GPUS     " + ("as asked" if any(g.requested for g in a.gpus) else ranked_by(a)))
    out.extend("  " + line for line in _columns(head, rows))
    if more:
        add(f"  … {more} more (kbq --all, or --json)")
    if a.options:
        add("")
        add("OPTIONS  what to change so it fits (least change first)")
        out.extend(f"  - {line}" for line in options_lines(a))
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
            add(f"    claims {num(d['claimed'])} {_u(d['unit'])}; kbq computes {num(d['computed'])} {_u(d['unit'])} ({d['formula']})")
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
    return "\n".join(out) + "\n"


# Markdown punctuation to escape; an underscore inside a word (weights_gb) is left alone.
# python-markdown (MkDocs) takes a backslash only before \ ` * _ { } [ ] ( ) # + - . ! and
# shows it before anything else, so the rest are written as character references, which
# GitHub, MkDocs and python-markdown all read the same (a reference never splits a table cell).
_MD_SPECIAL = r"([\\`*\[\]<>|~$&]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))"   # compiled on first use
_MD_REFERENCES = {"<": "&lt;", ">": "&gt;", "|": "&#124;", "~": "&#126;", "$": "&#36;", "&": "&amp;"}


def _md_escape(m: re.Match[str]) -> str:
    char = m.group(1)
    return _MD_REFERENCES.get(char) or "\\" + char


def md(text: object) -> str:
    """Plain text for a Markdown line or table cell: one line, punctuation escaped."""
    return re.sub(_MD_SPECIAL, _md_escape, " ".join(str(text).split()))


def markdown(a: Answer, limit: int | None = 12) -> str:
    out: list[str] = []
    add = out.append
    add(f"### `{a.query}`")
    add("")
    add(f"**{md(a.verdict)}**")
    add("")
    mem = a.memory
    add(f"**Memory:** {num(mem['total_gb'])} GB in all (GB = 10⁹ bytes)")
    add("")
    add("| part | GB |")
    add("|---|---:|")
    for key, label in BREAKDOWN_LABELS.items():
        if mem["breakdown"][key]:
            add(f"| {label} | {num(mem['breakdown'][key])} |")
    if mem.get("host_ram_gb"):
        add("")
        add(f"CPU memory for what is offloaded: {num(mem['host_ram_gb'])} GB.")
    t, b = a.throughput, a.bottleneck
    add("")
    if b.get("ridge_point") is None:
        add("**Speed** needs a GPU model; a memory size alone answers only the fit.")
    elif "training" in b:
        add(f"**Speed** on {mem['gpu_count']}× {md(b['gpu'])}: {num(t['train_tokens_per_s'])} training tokens/s, "
            f"{duration(t['train_time_s'])} for {num(a.workload['train_tokens'])} tokens.")
    else:
        add(f"**Speed** on {mem['gpu_count']}× {md(b['gpu'])}: decode {num(t['decode_tokens_per_s'])} tokens/s per user "
            f"({num(t['decode_tokens_per_s_aggregate'])} in all), prefill {num(t['prefill_tokens_per_s'])} tokens/s, "
            f"time to first token {num(t['ttft_s'])} s.")
    phases = ", ".join(f"{p}: {b[p]}" for p in ("decode", "prefill", "training") if b.get(p))
    add(f"**Bottleneck:** {phases}; ridge point {num(b['ridge_point'])} FLOP/B.")
    add("")
    head, rows, more = _gpu_table(a, limit)
    add("| " + " | ".join(head) + " |")
    add("|" + "---|" * len(head))
    for r in rows:
        add("| " + " | ".join(md(c) for c in r) + " |")
    if more:
        add(f"\n… and {more} more GPUs.")
    if not any(g.requested for g in a.gpus):
        add(f"\nGPUs {ranked_by(a)}.")
    if a.options:
        add("")
        add("**What to change so it fits** (least change first)")
        add("")
        out.extend(f"- {line}" for line in options_lines(a))
    if a.disagreements:
        add("")
        add("**Where the sources disagree**")
        add("")
        for d in a.disagreements:
            on = f" ({d['gpu']})" if d.get("gpu") else ""
            on = f" ({md(d['gpu'])})" if d.get("gpu") else ""
            add(f"- *{md(d['source'])}*{on}: “{md(d['claim'])}” — claims {num(d['claimed'])} {d['unit']}, "
                f"kbq computes {num(d['computed'])} {d['unit']}. {md(d['note'])}")
    add("")
    add("**Assumptions:** " + "; ".join(md(x) for x in a.assumptions or ["none"]))
    if a.warnings:
        add("")
        add("**Warnings:** " + "; ".join(md(x) for x in a.warnings))
    add("")
    add("<details><summary>Trace</summary>")
    add("")
    add("| node | rule | formula | values | result | source |")
    add("|---|---|---|---|---|---|")
    for s in a.trace:
        cells = [md(s.node), md(s.rule), "`" + str(s.formula).replace("|", "\\|") + "`",
                 md(_values(s.values)), md(f"{num(s.result, 4)} {s.unit}"), md(s.source)]
        add("| " + " | ".join(cells) + " |")
    add("")
    add("</details>")
    return "\n".join(out) + "\n"


def _u(unit: str) -> str:
    return "" if unit in ("1", "") else unit


def _band(a: Answer, figure: str) -> str:
    """' (±6.4% median, 19 llama.cpp measurements)' from the answer's error bands."""
    band = a.error_bands.get(figure)
    if not band:
        return ""
    who = band["basis"].replace(" measurements", "")
    return (f" (±{num(band['median_pct'])}% median, p90 {num(band['p90_pct'])}% over {band['n']} "
            f"{'published' if who == 'all runtimes' else who} measurements)")
