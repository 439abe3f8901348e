"""Answer → text for a terminal, or Markdown for a wiki.

In: an Answer (kb.engine.assembly.answer). Out: a string. The verdict comes first, then memory,
throughput, bottleneck, the GPU table, the sources' flowcharts, disagreements, assumptions,
warnings and the trace.
"""

from __future__ import annotations

import re
import textwrap
from typing import TYPE_CHECKING

from kb.figures import duration, num, servers_needed
from kb.figures import BREAKDOWN_LABELS as BREAKDOWN_LABELS  # re-exported for the server
from kb.present.explain import _values, explained
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.engine.assembly.answer import Answer, GpuRow
    from kb.engine.assembly.answer_records import Question, ReplicaLayout, Side



def _gpu_table(a: Answer, limit: int | None) -> tuple[list[str], list[list[str]], int]:
    training = "training" in a.bottleneck
    head = ["#", "GPU", "n", "VRAM GB", "needs GB/GPU", N.FITS, "headroom GB", "fewest by memory"]
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
    """The ranking policy, said once under the table: 'ranked by value: fits, …, then fastest'."""
    rec = a.recommendation
    if not rec or not rec["sort"]:
        return "ranked by fit, then speed, then power"
    name, _, keys = rec["sort"].partition(" (")
    return f"ranked by {name}: {keys.rstrip(')')}" if keys else f"ranked by {name}"


def gpu_table(a: Answer, limit: int | None) -> tuple[list[str], list[list[str]], int]:
    """The plain answer's table: few, narrow columns (the GPU, its count, the memory it needs
    of what it has, the fit, the speed, the cost where it runs); `limit` rows, None for all."""
    training = "training" in a.bottleneck
    gpus = a.gpus if limit is None else a.gpus[:limit]
    short = any(not g.fits for g in gpus)
    head = ["#", "GPU", "n", "GB/GPU", "of GB", N.FITS] + (["fewest by memory"] if short else [])
    head += ["train tok/s", "time", "buy $", "rent $/h", "run $"] if training else \
        ["tok/s/user", "buy $", "rent $/h", "$/M tok"]
    rows = []
    for g in gpus:
        row = [str(g.rank), g.name, str(g.count), num(g.per_gpu_gb), num(g.usable_vram_gb),
               "yes" if g.fits else "NO"]
        if short:
            row.append("" if g.fits else num(g.gpus_needed) if g.gpus_needed else "none")
        run = g.fits
        if training:
            row += [num(g.train_tokens_per_s) if run else "", duration(g.train_time_s) if run else ""]
        else:
            row.append(num(g.decode_tokens_per_s) if run else "")
        per = g.run_cost_usd if training else g.usd_per_million_tokens
        row += [_money(g.config_price_usd), _money(g.config_usd_per_hour), _money(per) if run else ""]
        rows.append(row)
    return head, rows, len(a.gpus) - len(gpus)


def options_lines(a: Answer) -> list[str]:
    """The computed alternatives, one line each (text and Markdown)."""
    out = []
    for o in a.options or []:
        speed = o.get(N.DECODE_TOKENS_PER_S) or o.get(N.TRAIN_TOKENS_PER_S)
        cost = o.get(N.USD_PER_MILLION_TOKENS) if N.USD_PER_MILLION_TOKENS in o else o.get(N.RUN_COST_USD)
        out.append(f"{o['change']}: {'fits' if o['fits'] else 'does not fit'} on {o['count']}× {o['gpu']} "
                   f"({num(o['per_gpu_gb'])} GB per GPU), {num(speed)} tok/s, "
                   f"{'$' + _money(cost) if cost is not None else 'cost n/a'} "
                   f"{'per M tokens' if 'usd_per_million_tokens' in o else 'per run'} — kbq \"{o['query']}\"")
    return out


def comparison_lines(a: Answer) -> list[str]:
    """One line per side of a comparison: the value, fit, memory, speed or cost, its query."""
    out = []
    for side in a.comparison or []:
        if "replicas" in side:                  # fleets compared (kb.engine.advising.fleets)
            out.append(_fleet_side(side))
            continue
        fit = N.FITS if side[N.FITS] else "does not fit"
        speed = (f"{num(side['train_tokens_per_s'])} training tokens/s" if side[N.TRAIN_TOKENS_PER_S] is not None
                 else f"{num(side['decode_tokens_per_s'])} tokens/s per user")
        out.append(f"{side['value']}: {fit} on {side['count']}× {side['gpu']}, {num(side['per_gpu_gb'])} GB per GPU "
                   f"({num(side['total_gb'])} GB in all), {speed} — {side['query']}")
    return out


def _fleet_side(side: Side) -> str:
    """One card's fleet: its GPUs as replicas of a layout, its figures under load and its query."""
    r = side.get("replicas")
    if not r:
        return f"{side['value']}: no count of {side['gpu']} meets the targets — {side['query']}"
    layout = layout_text(r["layout"])
    cost = f", ${_money(r['usd_per_hour'])}/h" if r.get("usd_per_hour") is not None else ""
    return (f"{side['value']}: {r['gpus']}× {side['gpu']} as {r['replicas']} × {layout}, "
            f"{num(r['tokens_per_s_per_user'])} tokens/s per user, {num(r['tokens_per_s_per_gpu'])} per GPU"
            f"{cost} — {side['query']}")


def _columns(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(r: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 1 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
    return [line(head), line(["-" * w for w in widths]), *[line(r) for r in rows]]


TOP_ROWS = 5          # GPU rows the plain text answer shows (--all: every row)
TEXT_WIDTH = 100     # the assumptions' short list wraps here
SHORT_ITEM = 60      # and each of its items is cut to this many characters


def text(a: Answer, limit: int | None = TOP_ROWS, trace: bool = True, explain: bool = False) -> str:
    """The plain answer, at most 45 lines: the verdict, the key figures, the top rows, what
    would fit, the assumptions as one short list, and how to see more. `explain` adds the
    memory breakdown, the sources' flowcharts, where they agree or disagree, every assumption
    and warning, and (with `trace`) the trace; `limit` None shows every GPU row."""
    out: list[str] = [a.query, "=" * min(78, max(len(a.query), 10)), f"VERDICT  {a.verdict}", ""]
    if a.unused_words:
        out[-1:] = [unused_line(a), ""]
    if a.comparison:
        out += ["COMPARED side by side (each side alone: kbq \"<query>\")"]
        out += [f"  - {line}" for line in comparison_lines(a)] + [""]
    out += key_figures(a)
    out.append("")
    head, rows, more = gpu_table(a, limit)
    out.append("GPUS")
    out += ["  " + line for line in _columns(head, rows)]
    asked = any(g.requested for g in a.gpus)
    out.append(f"  {'as asked' if asked else ranked_by(a)}" + (f"; {more} more rows (--all)" if more else ""))
    if a.options:
        out += ["", options_heading(a)]
        out += [f"  - {line}" for line in options_lines(a)[: None if explain else 3]]
    if explain:
        out += explained(a, trace)
    else:
        out += ["", "ASSUMPTIONS"] + ["  " + line for line in _wrap(_short_list(a.assumptions))]
        if a.warnings:
            out += ["WARNINGS"] + [f"  ! {w}" for w in a.warnings[:2]]
        out += ["", "More: --explain (trace, sources, every assumption), --all (every GPU), --json."]
    return "\n".join(out) + "\n"


def key_figures(a: Answer) -> list[str]:
    """Memory, speed and cost of the answer's own configuration, each section's error band said once."""
    mem, t, b = a.memory, a.throughput, a.bottleneck
    on = f"{mem.get('gpu_count') or 1}× {b.get('gpu') or mem.get('gpu')}"
    out = [f"KEY FIGURES  on {on}; GB = 10^9 bytes"]
    per = mem.get(N.PER_GPU_GB)
    each = f", {num(per)} GB per GPU" if per is not None and (mem.get(N.GPU_COUNT) or 1) > 1 else ""
    parts = ", ".join(f"{label} {num(mem['breakdown'][k])}" for k, label in BREAKDOWN_LABELS.items()
                      if mem["breakdown"].get(k))
    out.append(f"  memory   {num(mem['total_gb'])} GB in all{each}{_typical(a, 'total_gb')}: {parts}")
    if mem.get(N.HOST_RAM_GB):      # ZeRO-3 / FSDP CPU offload: the host's memory it needs beside the GPUs'
        out.append(f"  host     {num(mem['host_ram_gb'])} GB of CPU memory for what is offloaded")
    out += _asked(a)
    training = "training" in b
    g = _own_row(a)
    if training and t.get(N.TRAIN_TOKENS_PER_S) is not None:
        hours = f", {num(g.run_hours * g.count)} GPU-hours" if g is not None and g.fits and g.run_hours else ""
        out.append(f"  speed    {num(t['train_tokens_per_s'])} training tokens/s{_typical(a, 'train_tokens_per_s')}; "
                   f"{num(a.workload.get('train_tokens'))} tokens in {duration(t.get('train_time_s'))}{hours}")
    elif not training and t.get(N.DECODE_TOKENS_PER_S) is not None:
        out.append(f"  speed    {'decode alone, no prompts arriving: ' if a.replicas else ''}"
                   f"{num(t['decode_tokens_per_s'])} tokens/s per user, "
                   f"{num(t.get('decode_tokens_per_s_aggregate'))} in all{_typical(a, 'decode_tokens_per_s')}; "
                   f"first token in {num(t.get('ttft_s'))} s")
    elif b.get(N.RIDGE_POINT) is None:
        out.append("  speed    needs a GPU model (bandwidth, TFLOPS); a memory size answers only the fit")
    out += fleet_lines(a)
    phases = "; ".join(f"{p} {b[p]}" for p in ("decode", "prefill", "training") if b.get(p))
    if phases:
        out.append(f"  bound    {phases}")
    if g is not None and g.fits:
        servers = f" with {servers_needed(g.servers_bought)}" if g.servers_bought else ""
        # a fleet's tokens are priced at its rate under load (the replicas block), not decode alone
        per_million = (a.replicas["usd_per_million_tokens"] if a.replicas else None) or g.usd_per_million_tokens
        cost = [f"{_usd(g.config_price_usd)} to buy{servers}" if g.config_price_usd else "",
                f"{_usd(g.config_usd_per_hour)}/h to rent" if g.config_usd_per_hour else "",
                (f"{_usd(g.run_cost_usd)} a run" if training else f"{_usd(per_million)} per million tokens"
                 + (" under load" if a.replicas else ""))
                if (g.run_cost_usd if training else per_million) is not None else "",
                f"break-even after {num(g.breakeven_months)} months of renting" if g.breakeven_months else ""]
        if any(cost):
            out.append("  cost     " + ", ".join(c for c in cost if c))
    return out


def layout_text(lay: ReplicaLayout) -> str:
    """A replica's layout as the answers write it: 'TP8 × PP2 + DP attention'."""
    return (f"TP{lay['tp']}" + (f" × PP{lay['pp']}" if lay[N.PP] > 1 else "")
            + (" + DP attention" if lay[N.DP_ATTENTION] else ""))


def fleet_lines(a: Answer) -> list[str]:
    """A serving fleet (Answer.replicas): its layout and its figures under load, prompts counted."""
    r = a.replicas
    if not r:
        return []
    lay = r["layout"]
    split = layout_text(lay)
    return [f"  fleet    {r['replicas']} replica{'s' if r['replicas'] != 1 else ''} of {split} ({lay['gpus']} GPU"
            f"{'s' if lay['gpus'] != 1 else ''} each), {r['nodes']} node{'s' if r['nodes'] != 1 else ''}; "
            f"{r['users_per_replica']} user{'s' if r['users_per_replica'] != 1 else ''} per replica (at most {r['most_users_per_replica']}); limit: {r['binds']}",
            f"  load     {num(r['tokens_per_s_per_user'])} tok/s per user, first token in {num(r['ttft_s'])} s, "
            f"{num(r['latency_s'])} s a request, {num(r['requests_per_s'])} requests/s, "
            f"{num(r['tokens_per_s_per_gpu'])} tok/s per GPU; prompts take {num(100 * (r['prefill_share'] or 0))}% "
            "of the GPU time (continuous batching)"] + (
            [f"  disagg   prompts on {d['prefill_gpus']} GPUs, decode on {d['decode_replicas']} × {d['decode_layout']['gpus']} "
             f"GPUs: {d['gpus']} in all ({'fewer' if d['fewer_gpus'] else 'no fewer'}), first token in {num(d['ttft_s'])} s"]
            if (d := r.get("disaggregated")) else [])


def _asked(a: Answer) -> list[str]:
    """The figure a capacity question asked for, as the verdict states it."""
    q: Question | None = a.question
    row = q.get("answer") if q is not None else None
    if q is None or not row or not row.get("found"):
        return []
    kind, on = q.get("kind"), f"on {row.get('count', 1)}× {row.get('gpu')}"
    if kind == "how_many_gpus":
        by_mem = q.get("fewest_by_memory")
        return [f"  GPUs     {q['value']} in a valid layout" + (f"; {by_mem} by memory alone" if by_mem else "")]
    if kind == "largest_model":
        return [f"  answer   about {num(q.get('value_b'))}B parameters {on}", *_best_models(q)]
    allows = f" (the model's limit; memory allows {num(q.get('memory_allows'), 6)})" if q.get("model_max_context") else ""
    return [f"  answer   {num(q.get('value'), 6)} {q.get('unit')} {on}{allows}"]


def _best_models(q: Question) -> list[str]:
    """The ranked models that fit ('the best model I can run'), one line each, best first."""
    best = q.get("best_models")
    if best is None:
        return []
    if not best:
        return ["  models   none of the ranked models fits"]
    return [f"  {'models' if i == 0 else '':<8} {i + 1}. {m['name']} at {m['precision']}: {num(m['per_gpu_gb'])} GB per GPU "
            f"of {num(m['usable_gb'])}, {num(m['decode_tokens_per_s'])} tok/s (score {num(m['score'])})"
            for i, m in enumerate(best)]


def _own_row(a: Answer) -> GpuRow | None:
    return next((g for g in a.gpus if g.requested), a.gpus[0] if a.gpus else None)


def _usd(v: float | None) -> str:
    return "n/a" if v is None else f"${v:,.0f}" if v >= 100 else f"${v:,.2f}"


def _typical(a: Answer, figure: str) -> str:
    """' (±4.3% typical)': the median error of this kind of figure, said once per section."""
    band = a.error_bands.get(figure)
    return f" (±{num(band['median_pct'], 2)}% typical)" if band and band.get("median_pct") is not None else ""


def options_heading(a: Answer) -> str:
    """'WHAT WOULD FIT' when the job does not fit or misses its target; else the options were
    asked for, and they are only other configurations."""
    g = _own_row(a)
    if g is not None and g.fits and g.meets_target is not False:
        return "OTHER CONFIGURATIONS  (asked for with --options)"
    return "WHAT WOULD FIT  (least change first)"


def _short_list(items: list[str]) -> str:
    """Each assumption's first clause, in one list: 'runtime: vLLM; prompt: 1024 tokens; …'."""
    short = [textwrap.shorten(re.sub(r"\s*\([^()]*\)", "", x).split("; ")[0], SHORT_ITEM, placeholder=" …")
             for x in items]
    return "; ".join(dict.fromkeys(short)) or "none"


def _wrap(line: str) -> list[str]:
    return textwrap.wrap(line, TEXT_WIDTH) or [line]


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


def unused_line(a: Answer) -> str:
    """The words of the query the answer did not use: "not used: 'please', 'vulkan'"."""
    return "not used: " + ", ".join(f"'{w}'" for w in a.unused_words)

def _markdown_speed(a: Answer) -> str:
    """The Markdown answer's speed line: training or inference, or why there is none."""
    t, b, mem = a.throughput, a.bottleneck, a.memory
    if b.get(N.RIDGE_POINT) is None:
        return "**Speed** needs a GPU model; a memory size alone answers only the fit."
    if "training" in b:
        return (f"**Speed** on {mem['gpu_count']}× {md(b['gpu'])}: {num(t['train_tokens_per_s'])} training tokens/s, "
                f"{duration(t['train_time_s'])} for {num(a.workload['train_tokens'])} tokens.")
    return (f"**Speed** on {mem['gpu_count']}× {md(b['gpu'])}: decode {num(t['decode_tokens_per_s'])} tokens/s per user "
            f"({num(t['decode_tokens_per_s_aggregate'])} in all), prefill {num(t['prefill_tokens_per_s'])} tokens/s, "
            f"time to first token {num(t['ttft_s'])} s.")



def markdown(a: Answer, limit: int | None = 12) -> str:
    out: list[str] = []
    add = out.append
    add(f"### `{a.query}`")
    add("")
    add(f"**{md(a.verdict)}**")
    if a.unused_words:
        add("")
        add(f"*{md(unused_line(a))}*")
    add("")
    mem = a.memory
    add(f"**Memory:** {num(mem['total_gb'])} GB in all (GB = 10⁹ bytes)")
    add("")
    add("| part | GB |")
    add("|---|---:|")
    for key, label in BREAKDOWN_LABELS.items():
        if mem["breakdown"][key]:
            add(f"| {label} | {num(mem['breakdown'][key])} |")
    if mem.get(N.HOST_RAM_GB):
        add("")
        add(f"CPU memory for what is offloaded: {num(mem['host_ram_gb'])} GB.")
    b = a.bottleneck
    add("")
    add(_markdown_speed(a))
    for line in fleet_lines(a):
        add("")
        add(f"**{line.split()[0].capitalize()}:** {md(line.split(None, 1)[1])}")
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
        what = options_heading(a).startswith("WHAT")
        add("**What would fit** (least change first)" if what else "**Other configurations**")
        add("")
        out.extend(f"- {line}" for line in options_lines(a))
    if a.disagreements:
        add("")
        add("**Where the sources disagree**")
        add("")
        for d in a.disagreements:
            on = f" ({md(d['gpu'])})" if d.get("gpu") else ""
            figures = (f"claims {num(d['claimed'])} {d['unit']}, kbq computes {num(d['computed'])} {d['unit']}. "
                       if d.get("claimed") is not None else "")
            add(f"- *{md(d['source'])}*{on}: “{md(d['claim'])}” — {figures}{md(d['note'])}")
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


def _band(a: Answer, figure: str) -> str:
    """' (±6.4% median, 19 llama.cpp measurements)' from the answer's error bands."""
    band = a.error_bands.get(figure)
    if not band:
        return ""
    who = band["basis"].replace(" measurements", "")
    return (f" (±{num(band['median_pct'])}% median, p90 {num(band['p90_pct'])}% over {band['n']} "
            f"{'published' if who == 'all runtimes' else who} measurements)")
