"""Wiki export: Knowledge → Markdown pages with Mermaid flowcharts.

In: a validated Knowledge (kb.knowledge.build). Out: `markdown_pages(kn)` → {relative path: text}
(index.md, gpus.md, gpus-full.md, models.md, precisions.md, runtimes.md, formulas.md, sources.md,
flows/<id>.md), and
`mermaid(flow)` → one flowchart. The CLI writes the pages (`kbq export`); nothing here does I/O.

Deterministic: the same rules give the same bytes (items in file order, sets sorted, no
timestamps). Worked examples and claim checks come from the engine answering fixed example
queries, so every figure on a page is computed from the rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, cast

from kb.present.export_flows import flow_page, mermaid, mermaid_ids, mermaid_text, shown_text
from kb.present.export_formulas import Run, example_queries, formulas_page, run_examples
from kb.present.export_prices import cost_cell, prices_page
from kb.present.export_text import anchor, code, math, number, page, src_link, table, with_unit
from kb.knowledge.data import Claim, Knowledge
from kb.expr.nodes_base import literal
from kb.figures import num
from kb.links import web_address
from kb.present.render import md

if TYPE_CHECKING:
    from kb.knowledge.records import Model, Runtime

# The names other modules and the tests read from here; each lives in its own module.
__all__ = ["markdown_pages", "mermaid", "mermaid_ids", "mermaid_text", "shown_text", "math",
           "number", "with_unit", "literal", "md", "code", "table"]

# ---------------------------------------------------------------- pages

def markdown_pages(kn: Knowledge) -> dict[str, str]:
    """Every wiki page, by relative path."""
    runs = run_examples(kn, example_queries(kn))
    pages = {
        "index.md": index_page(kn),
        "gpus.md": gpus_page(kn),
        "gpus-full.md": gpus_full_page(kn),
        "models.md": models_page(kn),
        "precisions.md": precisions_page(kn),
        "runtimes.md": runtimes_page(kn),
        "formulas.md": formulas_page(kn, list(runs.values())),
        "sources.md": sources_page(kn, runs),
    }
    if kn.prices:
        pages["prices.md"] = prices_page(kn)
    for flow in kn.flows:
        pages[f"flows/{flow.id}.md"] = flow_page(kn, flow)
    return dict(sorted(pages.items()))



def index_page(kn: Knowledge) -> str:
    body = [
        "kbq answers GPU sizing questions for LLM training and inference from these rules.",
        "Units: GB = 10⁹ bytes (decimal); GPU memory as marketed; TFLOPS dense (no sparsity).",
        "",
        f"- [GPUs](gpus.md): {len(kn.gpus)} GPUs, the figures people compare "
        "([every figure](gpus-full.md))",
        f"- [Models](models.md): {len(kn.models)} model architectures",
        f"- [Precisions](precisions.md): {len(kn.precisions)} number formats",
        f"- [Runtimes](runtimes.md): {len(kn.runtimes)} serving and training runtimes",
        (f"- [Formulas](formulas.md): {len(kn.formulas)} formulas, {len(kn.inputs)} inputs, "
        f"{len(kn.constants)} constants"),
        f"- [Sources and claims](sources.md): {len(kn.sources)} sources, {len(kn.claims)} claims",
        *([f"- [Prices](prices.md): what {len(kn.prices)} GPUs cost to buy and rent"] if kn.prices else []),
        "- Flows:",
        *(f"  - [{md(f.title)}](flows/{f.id}.md) ({code(f.id)}, {f.role})" for f in kn.flows),
    ]
    return page("kbq rules", body)


def _dash(value: float | None) -> str:
    return "–" if value is None else number(value)


def gpus_page(kn: Knowledge) -> str:
    """The GPUs with the figures people compare first: name, VRAM, bandwidth, FP16 and FP8
    tensor TFLOPS, power and price; every other figure is on gpus-full.md."""
    head = ["GPU", "memory GB", "GB/s", "FP16 TFLOPS", "FP8 TFLOPS", "TDP W",
            *(["buy; rent"] if kn.prices else [])]
    rows = [[f"[{md(g['name'])}](gpus-full.md#gpu-{g['id']})", num(g["memory_gb"]),
             number(g["bandwidth_gb_s"]), _dash(g["tensor_tflops"]["fp16"]),
             _dash(g["tensor_tflops"]["fp8"]), _dash(g["tdp_w"]),
             *([cost_cell(kn, g)] if kn.prices else [])] for g in kn.gpus.values()]
    body = [(f"{len(kn.gpus)} accelerators, with the figures people compare. Tensor TFLOPS are "
             "dense (vendors' sparse figures halved), FP16 with FP32 accumulate; – means no native "
             "tensor support. Memory GB is the capacity in decimal GB (10^9 bytes), as every answer "
             "shows it; the name keeps the vendor's label. Every figure, its source and the "
             "GPU's aliases: [the full table](gpus-full.md)."
             + (" Prices: [prices](prices.md)." if kn.prices else "")), "",
            *table(head, rows, "lrrrrrl")]
    return page("GPUs", body)


def gpus_full_page(kn: Knowledge) -> str:
    precisions = ("tf32", "fp16", "bf16", "fp8", "int8", "int4", "fp4")
    head = ["GPU", "id", "vendor", "segment", "architecture", "year", "memory GB", "memory",
            "GB/s", "FP32", *(p.upper() for p in precisions), "TDP W", "interconnect", "ECC",
            "form factor", *(["what it costs"] if kn.prices else []), "source"]
    rows = []
    for g in kn.gpus.values():
        link = g["interconnect"]
        inter = " ".join(str(x) for x in (link["kind"], link.get("generation")) if x)
        inter += f", {number(link['gb_s'])} GB/s" if link.get("gb_s") else ""
        rows.append([md(g["name"]), code(g["id"]), g["vendor"], g["segment"],
                     md(g["architecture"]), str(g["release_year"]), num(g["memory_gb"]),
                     md(g["memory_type"]), number(g["bandwidth_gb_s"]), _dash(g["fp32_tflops"]),
                     *(_dash(g["tensor_tflops"][p]) for p in precisions), _dash(g["tdp_w"]),
                     md(inter), "yes" if g["ecc"] else "no", md(g["form_factor"]),
                     *([cost_cell(kn, g)] if kn.prices else []), src_link(g["source"])])
    body = [(f"{len(kn.gpus)} accelerators. Tensor TFLOPS are dense (vendors' sparse figures halved), "
             "FP16/BF16 with FP32 accumulate (as PyTorch/cuBLAS run them); – means the precision "
             "has no native tensor support. Memory GB is the capacity in bytes (memory_bytes) in "
             "decimal GB (10^9 bytes), the unit of every answer; the name keeps the vendor's label."), "",
            *table(head, rows, "lllllrrlrrrrrrrrrr"), "", "## Aliases, per-figure sources and notes", ""]
    for g in kn.gpus.values():
        parts = [f"aliases: {', '.join(code(a) for a in g['aliases'])}" if g["aliases"] else ""]
        parts += [f"{md(k)} from {src_link(v)}" for k, v in sorted(g["field_sources"].items())]
        parts += [md(g["notes"])] if g.get("notes") else []
        body.append(f"- {anchor('gpu-' + g['id'])}**{md(g['name'])}** ({code(g['id'])}): "
                    + "; ".join(p for p in parts if p))
    return page("GPUs: every figure", body)


def models_page(kn: Knowledge) -> str:
    head = ["model", "id", "family", "params B", "active B", "layers", "hidden", "FFN", "heads",
            "KV heads", "head dim", "vocab", "context", "attention", "source"]
    rows = []
    for m in kn.models.values():
        extra = [f"sliding window {m['sliding_window']}"] if m.get("sliding_window") else []
        extra += [f"MoE {moe['experts_per_token']} of {moe['experts']}"] if (moe := m.get("moe")) else []
        extra += [f"MLA rank {mla['kv_lora_rank']}"] if (mla := m.get("mla")) else []
        rows.append([md(m["name"]), code(m["id"]), md(m["family"]),
                     number(m["params_total"] / kn.billion), number(m["params_active"] / kn.billion),
                     *(str(v) for v in (m["layers"], m["hidden_size"], m["intermediate_size"],
                                        m["attention_heads"], m["kv_heads"], m["head_dim"],
                                        m["vocab_size"], m["max_context"])),
                     md(", ".join([m["attention"], *extra])), src_link(m["source"])])
    refs = ", ".join(code(r) for r in kn.bare_size_refs)
    body = [("A bare size with no model name (\"13B\") stands for the reference architecture "
            f"nearest in size, one of {refs}; the answer says which it used."), "",
            *table(head, rows, "lllrrrrrrrrrrl"), "", "## Aliases and notes", ""]
    body += _aliases_and_notes(kn.models.values())
    return page("Models", body)


def precisions_page(kn: Knowledge) -> str:
    head = ["precision", "id", "kind", "bits per weight", "bytes per param", "tensor math",
            "fallback", "aliases", "source", "notes"]
    rows = [[md(p["name"]), code(p["id"]), p["kind"], number(p["bits_per_weight"]),
             number(p["bits_per_weight"] / 8), p["compute"], ", ".join(p["fallback"]) or "–",
             ", ".join(code(a) for a in p["aliases"]) or "–", src_link(p["source"]),
             md(p.get("notes") or "")] for p in kn.precisions.values()]
    body = [("Bytes per parameter = bits per weight ÷ 8, scales and zero points included. "
            "When a GPU lacks the tensor math natively, the fallbacks are tried in order."), "",
            *table(head, rows, "lllrr")]
    return page("Precisions", body)


_RUNTIME_COLUMNS = ("name", "id", "kind", "multi_gpu", "platforms", "aliases", "source", "notes")


def runtimes_page(kn: Knowledge) -> str:
    head = ["runtime", "id", "kind", "multi-GPU", "runs on", "settings", "source"]
    rows = []
    for r in kn.runtimes.values():
        settings = ", ".join(f"{md(k)} = {md(v) if isinstance(v, str) else number(cast('float', v))}"
                             for k, v in r.items()
                             if k not in _RUNTIME_COLUMNS and v is not None and not isinstance(v, (list, dict)))
        well = r.get("well_supported") or {}
        settings += "".join(f", well supported for {md(task)} on {md(', '.join(vendors))}"
                            for task, vendors in well.items())
        rows.append([md(r["name"]), code(r["id"]), md(r["kind"]), md(r["multi_gpu"]),
                     md(", ".join(r["platforms"])), settings,
                     src_link(r["source"])])
    defaults = ", ".join(f"{md(k)}: {code(v)}" for k, v in kn.runtime_defaults.items()
                         if k != "source")
    body = [f"Serving and training software; a query may name one. Defaults: {defaults}.", "",
            *table(head, rows), "", "## Aliases and notes", ""]
    body += _aliases_and_notes(kn.runtimes.values())
    recipes = [f"- **{md(r['name'])}**: {md(x['text'])} ({src_link(x['source'])})"
               for r in kn.runtimes.values() for x in r.get("recipes") or []]
    if recipes:
        body += ["", "## Recipes (defaults a query can override)", "", *recipes]
    return page("Runtimes", body)


def _aliases_and_notes(entries: Iterable[Model | Runtime]) -> list[str]:
    """A list item for each entry (a model, a runtime) that has aliases or notes."""
    out = []
    for e in entries:
        parts = [f"aliases: {', '.join(code(a) for a in e['aliases'])}" if e["aliases"] else "",
                 md(e["notes"]) if e.get("notes") else ""]
        if any(parts):
            out.append(f"- **{md(e['name'])}** ({code(e['id'])}): " + "; ".join(p for p in parts if p))
    return out



# ---------------------------------------------------------------- sources.md

def sources_page(kn: Knowledge, runs: dict[str, Run]) -> str:
    cited = _citations(kn)
    claims: dict[str, list[Claim]] = {}
    for c in kn.claims:
        claims.setdefault(c.source, []).append(c)
    body = [("Every source the rules cite. A claim is a figure a source states that the engine "
            "checks: it is computed with the claim's expression on the answer to its example "
            "query."), ""]
    for sid, s in kn.sources.items():
        body += [anchor("src-" + sid), f"## {md(s['title'])}", ""]
        facts = [f"id {code(sid)}", s["kind"]]
        facts += [md(s[k]) for k in ("publisher", "date") if s.get(k)]
        facts += [f"<{s['url']}>"] if web_address(s.get("url")) else []
        body += ["; ".join(facts) + ".", ""]
        if s.get("notes"):
            body += [md(s["notes"]), ""]
        if cited.get(sid):
            body += ["Cited by: " + ", ".join(cited[sid]) + ".", ""]
        for c in claims.get(sid, []):
            body += claim_lines(c, runs.get(c.example_query))
    return page("Sources and claims", body)


def claim_lines(c: Claim, run: Run | None) -> list[str]:
    if isinstance(c.value, (tuple, list)):
        claimed = with_unit(f"{number(c.value[0])}–{number(c.value[1])}", md(c.unit))
    else:
        claimed = with_unit(number(c.value), md(c.unit)) + f" (±{number(c.tolerance * 100)} %)"
    out = [f"{anchor('claim-' + c.id)}**Claim {code(c.id)}**: “{md(c.text)}”", "",
           (f"- claims {claimed}; computed as {code(math(c.computed.ast))} "
           f"when {code(math(c.applies_when.ast))} ({code(c.where)})"),
           f"- checked on {code('kbq ' + chr(34) + c.example_query + chr(34))}: "
           + _claim_result(c, run), f"- why: {md(c.note)}", ""]
    return out


def _claim_result(c: Claim, run: Run | None) -> str:
    if run is None:
        return "**the example query cannot be answered with these rules**"
    entries = [e for e in [*run.answer.claims_checked, *run.answer.disagreements]
               if e["id"] == c.id]
    if not entries:
        return "**the claim does not apply to its example query**"
    e = entries[0]
    on = f" on {md(e['gpu'])}" if e.get("gpu") else ""
    diff = e.get("difference_pct")
    pct = f", {'+' if diff > 0 else ''}{number(round(diff, 1))} %" if diff is not None else ""
    verdict = "agrees" if e["agrees"] else "differs"
    return f"kbq computes {with_unit(number(e['computed']), md(c.unit))}{on}: {verdict}{pct}"


def _citations(kn: Knowledge) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}

    def cite(sid: str, text: str) -> None:
        if text not in out.setdefault(sid, []):
            out[sid].append(text)

    for g in kn.gpus.values():
        for sid in [g["source"], *g["field_sources"].values()]:
            cite(sid, f"GPU {code(g['id'])}")
    for m in kn.models.values():
        cite(m["source"], f"model {code(m['id'])}")
    for p in kn.precisions.values():
        cite(p["source"], f"precision {code(p['id'])}")
    for r in kn.runtimes.values():
        cite(r["source"], f"runtime {code(r['id'])}")
    if kn.runtime_defaults.get("source"):
        cite(kn.runtime_defaults["source"], "the runtime defaults")
    for n, c in kn.constants.items():
        cite(c["source"], f"constant [{md(n)}](formulas.md#n-{n})")
    for f in kn.formulas.values():
        for sid in f.sources:
            cite(sid, f"formula [{md(f.name)}](formulas.md#f-{f.name})")
    for flow in kn.flows:
        cite(flow.source, f"flow [{md(flow.id)}](flows/{flow.id}.md)")
    cite(kn.defaults["source"], "the query defaults")
    return out
