"""`kbq gpus`, `kbq models` and `kbq rules`: the catalogue and the formulas, as text or JSON.

In: the command's options and --rules. Out: a listing on stdout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from kb.cli.common import AMOUNT, dump, figure, knowledge, rules_option, table

if TYPE_CHECKING:
    from kb.knowledge.data import Knowledge


@click.command(help="List the GPU catalogue.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--min-vram", type=AMOUNT, default=None, metavar="GB",
              help="At least this much memory, read as GiB like a capacity in a query.")
@click.option("--min-bandwidth", type=AMOUNT, default=None, metavar="GB_S",
              help="At least this memory bandwidth in GB/s.")
@click.option("--vendor", type=click.Choice(["nvidia", "amd", "intel", "apple", "google", "aws"]), default=None)
@click.option("--segment", type=click.Choice(["datacenter", "workstation", "consumer", "apple"]), default=None)
@click.option("--runtime", default=None, metavar="NAME", help="only the GPUs this runtime runs on (runtimes.yaml platforms)")
@click.option("--max-price", type=AMOUNT, default=None, metavar="USD",
              help="only cards whose purchase price (rules/prices.yaml) is at most USD")
@rules_option
def gpus(as_json: bool, min_vram: float | None, min_bandwidth: float | None, vendor: str | None,
         segment: str | None, runtime: str | None, max_price: float | None, rules: str | None) -> None:
    kn = knowledge(rules)
    platforms = _runtime_platforms(kn, runtime)
    items = [g for g in kn.gpus.values()
             if (min_vram is None or (g["memory_gib"] or 0) >= min_vram)
             and (min_bandwidth is None or (g["bandwidth_gb_s"] or 0) >= min_bandwidth)
             and (vendor is None or g["vendor"] == vendor)
             and (segment is None or g["segment"] == segment)
             and (platforms is None or g["vendor"] in platforms)
             and (max_price is None or ((price := g.get("price_usd")) is not None and price <= max_price))]
    if as_json:
        click.echo(dump(items), nl=False)
        return
    head = ["id", "name", "memory GB", "GB/s", "FP16 TFLOPS", "FP8", "FP4", "TDP W", "link", "buy $", "rent $/h"]
    rows = [[g["id"], g["name"], f"{g['memory_gb']:.1f}", f"{g['bandwidth_gb_s']:g}",
             figure(g["tensor_tflops"]["fp16"]), figure(g["tensor_tflops"]["fp8"]), figure(g["tensor_tflops"]["fp4"]),
             figure(g["tdp_w"]), f"{g['interconnect']['kind']} {g['interconnect'].get('generation') or ''}".strip(),
             figure(g.get("price_usd")), figure(g.get("cloud_usd_per_hour"))]
            for g in items]
    table(head, rows)
    click.echo(f"{len(items)} GPUs; memory in decimal GB from each card's bytes; tensor TFLOPS are dense "
               "(no sparsity), FP16/BF16 with FP32 accumulate; '-' = not native")


def _runtime_platforms(kn: Knowledge, name: str | None) -> list[str] | None:
    """The platforms of a runtime named by id or alias; a usage error (exit 2) names the choices."""
    if name is None:
        return None
    from kb.knowledge.data import norm

    rid = kn.runtime_alias.get(norm(name))
    rt = kn.runtimes.get(name) or (kn.runtimes.get(rid) if rid else None)
    if rt is None:
        raise click.UsageError(f"unknown runtime '{name}'; one of: {', '.join(sorted(kn.runtimes))}")
    return list(rt["platforms"])


@click.command(help="List the model architectures (by family, then size). --families groups their ids.")
@click.option("--json", "as_json", is_flag=True, help="Every field of each model, as models.yaml has it.")
@click.option("--family", default=None)
@click.option("--min-params", type=AMOUNT, default=None, metavar="BILLIONS")
@click.option("--search", default=None, metavar="TEXT", help="Part of an id, name, family or alias.")
@click.option("--moe", is_flag=True, help="Mixture-of-experts models only.")
@click.option("--min-context", default=None, metavar="TOKENS", help="At least this context (32768, 128k, 1M).")
@click.option("--families", "by_family", is_flag=True, help="One line per family with its model ids.")
@rules_option
def models(as_json: bool, family: str | None, min_params: float | None, search: str | None, moe: bool,
           min_context: str | None, by_family: bool, rules: str | None) -> None:
    from kb.present import catalogue
    from kb.errors import KbError

    kn = knowledge(rules)
    try:
        tokens = None if min_context is None else catalogue.context_tokens(min_context)
    except KbError as exc:
        raise click.UsageError(str(exc)) from None
    items = catalogue.select(kn, family, min_params, search, moe, tokens)
    if by_family:
        groups = catalogue.families(items)
        if as_json:
            click.echo(dump(groups), nl=False)
            return
        for name, ids in groups.items():
            click.echo(f"{name} ({len(ids)}): {', '.join(ids)}")
        click.echo(f"{len(groups)} families, {len(items)} models")
        return
    if as_json:
        click.echo(dump(items), nl=False)
        return
    head = ["id", "params B", "active B", "layers", "hidden", "heads", "kv", "head_dim", "attention", "context", "native"]
    rows = [[m["id"], f"{m['params_total'] / kn.billion:g}", f"{m['params_active'] / kn.billion:g}", str(m["layers"]),
             str(m["hidden_size"]), str(m["attention_heads"]), str(m["kv_heads"]), str(m["head_dim"]),
             catalogue.layout(m), str(m["max_context"]), m.get("native_precision") or "-"] for m in items]
    table(head, rows)
    click.echo(f"{len(items)} models")


@click.command(help="List the formulas with their meaning, unit and sources.")
@click.option("--json", "as_json", is_flag=True)
@rules_option
def rules(as_json: bool, rules: str | None) -> None:  # noqa: F811 - click command name
    kn = knowledge(rules)
    items = [{"name": f.name, "unit": f.unit, "meaning": f.meaning, "formula": f.text,
              "sources": list(f.sources), "where": f.where} for f in kn.formulas.values()]
    if as_json:
        click.echo(dump(items), nl=False)
        return
    for it in items:
        click.echo(f"{it['name']} [{it['unit']}]  {it['meaning']}")
        click.echo(f"    = {it['formula']}")
        click.echo(f"    sources: {', '.join(it['sources'])}   ({it['where']})")


