"""`kbq gpus`, `kbq models` and `kbq rules`: the catalogue and the formulas, as text or JSON.

In: the command's options (declared here, made click options by kb.cli.clicked) and --rules.
Out: a listing on stdout; a bad option or value is `Error: …`, exit 2.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from kb.cli.clicked import command
from kb.cli.common import dump, echo, figure, knowledge, table
from kb.cli.declared import RULES, Command, Opt, UsageError, Values, amount
from kb.knowledge.kinds import SEGMENTS, VENDORS

if TYPE_CHECKING:
    from kb.knowledge.data import Knowledge

GPU_OPTIONS = (
    Opt("--json", "as_json", True, help="every field of each card, as JSON"),
    Opt("--min-vram", "min_vram", metavar="GB", kind=amount,
        help="at least this much memory, read as GiB like a capacity in a query"),
    Opt("--min-bandwidth", "min_bandwidth", metavar="GB_S", kind=amount,
        help="at least this memory bandwidth in GB/s"),
    Opt("--vendor", "vendor", metavar="NAME", choices=VENDORS,
        help="only this vendor's cards"),
    Opt("--segment", "segment", metavar="NAME", choices=SEGMENTS,
        help="only this market segment"),
    Opt("--runtime", "runtime", metavar="NAME", help="only the GPUs this runtime runs on (runtimes.yaml platforms)"),
    Opt("--max-price", "max_price", metavar="USD", kind=amount,
        help="only cards whose purchase price (rules/prices.yaml) is at most USD"),
    RULES,
)


def _gpus(o: Values, words: list[str]) -> int:
    as_json, min_vram, min_bandwidth, vendor, segment, max_price = (
        o["as_json"], o["min_vram"], o["min_bandwidth"], o["vendor"], o["segment"], o["max_price"])
    kn = knowledge(o["rules"])
    runtime = o["runtime"]
    platforms = _runtime_platforms(kn, runtime)
    items = [g for g in kn.gpus.values()
             if (min_vram is None or (g["memory_gib"] or 0) >= min_vram)
             and (min_bandwidth is None or (g["bandwidth_gb_s"] or 0) >= min_bandwidth)
             and (vendor is None or g["vendor"] == vendor)
             and (segment is None or g["segment"] == segment)
             and (platforms is None or g["vendor"] in platforms)
             and (max_price is None or ((price := g.get("price_usd")) is not None and price <= max_price))]
    if as_json:
        sys.stdout.write(dump(items))
        return 0
    head = ["id", "name", "memory GB", "GB/s", "FP16 TFLOPS", "FP8", "FP4", "TDP W", "link", "buy $", "rent $/h"]
    rows = [[g["id"], g["name"], f"{g['memory_gb']:.1f}", f"{g['bandwidth_gb_s']:g}",
             figure(g["tensor_tflops"]["fp16"]), figure(g["tensor_tflops"]["fp8"]), figure(g["tensor_tflops"]["fp4"]),
             figure(g["tdp_w"]), f"{g['interconnect']['kind']} {g['interconnect'].get('generation') or ''}".strip(),
             figure(g.get("price_usd")), figure(g.get("cloud_usd_per_hour"))]
            for g in items]
    table(head, rows)
    echo(f"{len(items)} GPUs; memory in decimal GB from each card's bytes; tensor TFLOPS are dense "
         "(no sparsity), FP16/BF16 with FP32 accumulate; '-' = not native")
    return 0


gpus = command(Command("gpus", "List the GPU catalogue.", GPU_OPTIONS, _gpus))


def _runtime_platforms(kn: Knowledge, name: str | None) -> list[str] | None:
    """The platforms of a runtime named by id or alias; a usage error (exit 2) names the choices."""
    if name is None:
        return None
    from kb.knowledge.data import norm

    rid = kn.runtime_alias.get(norm(name))
    rt = kn.runtimes.get(name) or (kn.runtimes.get(rid) if rid else None)
    if rt is None:
        raise UsageError(f"unknown runtime '{name}'; one of: {', '.join(sorted(kn.runtimes))}")
    return list(rt["platforms"])


MODEL_OPTIONS = (
    Opt("--json", "as_json", True, help="every field of each model, as models.yaml has it"),
    Opt("--family", "family", metavar="NAME", help="only this family's models"),
    Opt("--min-params", "min_params", metavar="BILLIONS", kind=amount,
        help="at least this many parameters, in billions"),
    Opt("--search", "search", metavar="TEXT", help="part of an id, name, family or alias"),
    Opt("--moe", "moe", True, help="mixture-of-experts models only"),
    Opt("--min-context", "min_context", metavar="TOKENS", help="at least this context (32768, 128k, 1M)"),
    Opt("--families", "by_family", True, help="one line per family with its model ids"),
    RULES,
)


def _models(o: Values, words: list[str]) -> int:
    as_json, family, min_params, search, moe, min_context, by_family = (
        o["as_json"], o["family"], o["min_params"], o["search"], o["moe"], o["min_context"], o["by_family"])
    from kb.present import catalogue

    kn = knowledge(o["rules"])
    tokens = None if min_context is None else catalogue.context_tokens(min_context)
    items = catalogue.select(kn, family, min_params, search, moe, tokens)
    if by_family:
        groups = catalogue.families(items)
        if as_json:
            sys.stdout.write(dump(groups))
            return 0
        for name, ids in groups.items():
            echo(f"{name} ({len(ids)}): {', '.join(ids)}")
        echo(f"{len(groups)} families, {len(items)} models")
        return 0
    if as_json:
        sys.stdout.write(dump(items))
        return 0
    head = ["id", "params B", "active B", "layers", "hidden", "heads", "kv", "head_dim", "attention", "context", "native"]
    rows = [[m["id"], f"{m['params_total'] / kn.billion:g}", f"{m['params_active'] / kn.billion:g}", str(m["layers"]),
             str(m["hidden_size"]), str(m["attention_heads"]), str(m["kv_heads"]), str(m["head_dim"]),
             catalogue.layout(m), str(m["max_context"]), m.get("native_precision") or "-"] for m in items]
    table(head, rows)
    echo(f"{len(items)} models")
    return 0


models = command(Command("models", "List the model architectures (by family, then size). --families groups "
                         "their ids.", MODEL_OPTIONS, _models))


def _rules(o: Values, words: list[str]) -> int:
    kn = knowledge(o["rules"])
    items = [{"name": f.name, "unit": f.unit, "meaning": f.meaning, "formula": f.text,
              "sources": list(f.sources), "where": f.where} for f in kn.formulas.values()]
    if o["as_json"]:
        sys.stdout.write(dump(items))
        return 0
    for it in items:
        echo(f"{it['name']} [{it['unit']}]  {it['meaning']}")
        echo(f"    = {it['formula']}")
        echo(f"    sources: {', '.join(it['sources'])}   ({it['where']})")
    return 0


rules = command(Command("rules", "List the formulas with their meaning, unit and sources.",
                        (Opt("--json", "as_json", True, help="each formula as JSON"), RULES), _rules))
