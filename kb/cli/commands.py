"""The kbq subcommands (click): ask, gpus, models, rules, validate, schema, export, serve.

In: argv after `kbq`. Out: listings, validation reports, files; exit 2 on a rule error.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kb.cli.query import QUERY_OPTIONS, QueryArgs, fail, run

if TYPE_CHECKING:
    from kb.knowledge.data import Knowledge


def dump(value: Any) -> str:
    """A listing as JSON: indented, non-ASCII kept, one trailing newline."""
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def _knowledge(rules: str | None) -> Knowledge:
    from kb import get_knowledge
    from kb.errors import KbError

    try:
        return get_knowledge(rules)
    except KbError as err:
        raise click.ClickException(str(err)) from None


rules_option = click.option("--rules", "rules", metavar="DIR", default=None,
                            help="Rule files to use instead of the shipped ones.")


@click.group(help="kbq: GPU sizing answers for LLM work, from rules you can read.")
@click.version_option(package_name="kbq", prog_name="kbq")
def cli() -> None:
    pass


def _query_options(f: Callable[..., None]) -> Callable[..., None]:
    """The options of `kbq "QUERY"` (kb.cli.query.QUERY_OPTIONS, but --batch and --jobs) as click
    options, each under its flag's name (--no-trace → no_trace)."""
    for opt in reversed(QUERY_OPTIONS):
        if opt.batch_only:
            continue
        name = opt.flag[2:].replace("-", "_")
        text = " ".join(opt.help.split())
        if opt.value is not None:
            f = click.option(opt.flag, name, is_flag=True, help=text)(f)
        else:
            f = click.option(opt.flag, name, metavar=opt.metavar, default=None, help=text)(f)
    return f


@cli.command(help="Answer QUERY (the same as kbq \"QUERY\", with the same options).")
@click.argument("query", nargs=-1, required=True)
@_query_options
def ask(query: tuple[str, ...], **given: Any) -> None:
    if not " ".join(query).strip():
        raise click.UsageError("missing QUERY, e.g. kbq ask \"serve 70B int4 16 users\"")
    args = QueryArgs(words=list(query))
    for opt in QUERY_OPTIONS:
        value = given.get(opt.flag[2:].replace("-", "_"))
        if opt.batch_only or value is None or value is False:
            continue
        error = args.set(opt, value)
        if error:
            sys.exit(fail(error))
    code = run(args, "")
    if code:
        sys.exit(code)


@cli.command(help="List the GPU catalogue.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--min-vram", type=float, default=None, metavar="GB",
              help="At least this much memory, read as GiB like a capacity in a query.")
@click.option("--min-bandwidth", type=float, default=None, metavar="GB_S",
              help="At least this memory bandwidth in GB/s.")
@click.option("--vendor", type=click.Choice(["nvidia", "amd", "intel", "apple", "google", "aws"]), default=None)
@click.option("--segment", type=click.Choice(["datacenter", "workstation", "consumer", "apple"]), default=None)
@click.option("--runtime", default=None, metavar="NAME", help="only the GPUs this runtime runs on (runtimes.yaml platforms)")
@click.option("--max-price", type=float, default=None, metavar="USD",
              help="only cards whose purchase price (rules/prices.yaml) is at most USD")
@rules_option
def gpus(as_json: bool, min_vram: float | None, min_bandwidth: float | None, vendor: str | None,
         segment: str | None, runtime: str | None, max_price: float | None, rules: str | None) -> None:
    kn = _knowledge(rules)
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
             _f(g["tensor_tflops"]["fp16"]), _f(g["tensor_tflops"]["fp8"]), _f(g["tensor_tflops"]["fp4"]),
             _f(g["tdp_w"]), f"{g['interconnect']['kind']} {g['interconnect'].get('generation') or ''}".strip(),
             _f(g.get("price_usd")), _f(g.get("cloud_usd_per_hour"))]
            for g in items]
    _table(head, rows)
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


@cli.command(help="List the model architectures (by family, then size). --families groups their ids.")
@click.option("--json", "as_json", is_flag=True, help="Every field of each model, as models.yaml has it.")
@click.option("--family", default=None)
@click.option("--min-params", type=float, default=None, metavar="BILLIONS")
@click.option("--search", default=None, metavar="TEXT", help="Part of an id, name, family or alias.")
@click.option("--moe", is_flag=True, help="Mixture-of-experts models only.")
@click.option("--min-context", default=None, metavar="TOKENS", help="At least this context (32768, 128k, 1M).")
@click.option("--families", "by_family", is_flag=True, help="One line per family with its model ids.")
@rules_option
def models(as_json: bool, family: str | None, min_params: float | None, search: str | None, moe: bool,
           min_context: str | None, by_family: bool, rules: str | None) -> None:
    from kb.present import catalogue
    from kb.errors import KbError

    kn = _knowledge(rules)
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
    _table(head, rows)
    click.echo(f"{len(items)} models")


@cli.command(help="List the formulas with their meaning, unit and sources.")
@click.option("--json", "as_json", is_flag=True)
@rules_option
def rules(as_json: bool, rules: str | None) -> None:  # noqa: F811 - click command name
    kn = _knowledge(rules)
    items = [{"name": f.name, "unit": f.unit, "meaning": f.meaning, "formula": f.text,
              "sources": list(f.sources), "where": f.where} for f in kn.formulas.values()]
    if as_json:
        click.echo(dump(items), nl=False)
        return
    for it in items:
        click.echo(f"{it['name']} [{it['unit']}]  {it['meaning']}")
        click.echo(f"    = {it['formula']}")
        click.echo(f"    sources: {', '.join(it['sources'])}   ({it['where']})")


@cli.command(help="Check rule files: schema, expressions, names, units, flows, sources.")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
def validate(paths: tuple[Path, ...]) -> None:
    from kb.errors import RuleErrors
    from kb.knowledge.build import build
    from kb.paths import rules_dir

    roots = _rule_roots(paths) if paths else [rules_dir()]
    failed = 0
    for root in roots:
        try:
            kn = build(root)
        except RuleErrors as errs:
            failed += len(errs.errors)
            for e in errs.errors:
                click.echo(e.render(), err=True)
            continue
        except Exception as exc:  # a RuleError of a single file
            from kb.errors import KbError

            if not isinstance(exc, KbError):
                raise
            failed += 1
            click.echo(str(exc), err=True)
            continue
        click.echo(f"{root}: ok — {len(kn.gpus)} GPUs, {len(kn.models)} models, "
                   f"{len(kn.precisions)} precisions, {len(kn.formulas)} formulas, "
                   f"{len(kn.flows)} flows, {len(kn.sources)} sources, {len(kn.claims)} claims")
    if failed:
        click.echo(f"{failed} error(s)", err=True)
        sys.exit(2)


def _rule_roots(paths: tuple[Path, ...]) -> list[Path]:
    """A rules directory, or files inside one (the directory holding them is checked)."""
    roots: list[Path] = []
    for p in paths:
        root = p if p.is_dir() else (p.parent.parent if p.parent.name == "flows" else p.parent)
        if root not in roots:
            roots.append(root)
    return roots


def _schema_names() -> list[str]:
    from kb.knowledge.schema import FILES

    return [*FILES, "answer"]


@cli.command(help="Print the JSON Schema of a rule file kind (gpus, models, formulas, flow, …) or of the answer.")
@click.argument("name", type=click.Choice(_schema_names()))
def schema(name: str) -> None:
    if name == "answer":
        from pydantic import TypeAdapter

        from kb.engine.answer import Answer
        from kb.recordtype import as_dataclass

        as_dataclass(Answer)
        click.echo(dump(TypeAdapter(Answer).json_schema()), nl=False)
        return
    from kb.knowledge.schema import json_schema

    click.echo(dump(json_schema(name)), nl=False)


@cli.command(help="Run the web page and JSON API under gunicorn: one gevent worker process per "
                  "core, each computing answers on a few threads.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option("--processes", type=click.IntRange(min=1, max=256), default=None,
              help="Worker processes.  [default: one per CPU core]")
@click.option("--threads", "--workers", "threads", default=2, show_default=True,
              type=click.IntRange(min=1, max=64),
              help="Answers computed at once in each process, each on a thread of its own "
                   "(--workers is its former name).")
@click.option("--embed-origin", "embed_origins", multiple=True, metavar="ORIGIN",
              help="An origin (https://wiki.example.com) that may frame /embed; repeat for more. "
                   "Adds to KBQ_EMBED_ORIGINS (space-separated).")
@click.option("--cache-mb", default=32.0, show_default=True, type=click.FloatRange(min=0),
              help="Answers already given, kept per process to give again while the rules are "
                   "unchanged (0: none).")
@rules_option
def serve(host: str, port: int, processes: int | None, threads: int, embed_origins: tuple[str, ...],
          cache_mb: float, rules: str | None) -> None:
    import os

    from kb import cpu_cores
    from server import serving
    from server.security import check_origins

    def ready(url: str, how: str) -> None:
        click.echo(f"kbq serving on {url}  ({how}; Ctrl-C to stop)")

    origins = [*os.environ.get("KBQ_EMBED_ORIGINS", "").split(), *embed_origins]
    try:
        origins = check_origins(origins)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="'--embed-origin'") from None
    try:
        sock = serving.listen(host, port)
    except OSError as err:
        raise click.ClickException(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
    try:
        serving.serve(host, port, processes or cpu_cores(), threads, rules, ready, origins, sock, cache_mb)
    except OSError as err:
        raise click.ClickException(f"cannot serve: {err.strerror or err}") from None


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _table(head: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, ["-" * w for w in widths], *rows]:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


__all__ = ["cli", "json"]


# ---------------------------------------------------------------- export

@cli.group("export", invoke_without_command=True,
           help="Write wiki pages (Markdown + Mermaid) from the rules: kbq export --out DIR. "
                "'kbq export flow ID' prints one flow as a Mermaid chart, "
                "'kbq export graph' the knowledge graph.")
@click.option("--format", "fmt", type=click.Choice(["markdown"]), default="markdown",
              show_default=True, help="Page format.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              metavar="DIR", help="Directory to write the pages to (created if missing).")
@rules_option
@click.pass_context
def export(ctx: click.Context, fmt: str, out: Path | None, rules: str | None) -> None:
    ctx.obj = rules
    if ctx.invoked_subcommand is not None:
        if out is not None:
            raise click.UsageError(f"--out writes pages; 'export {ctx.invoked_subcommand}' prints to stdout")
        return
    if out is None:
        raise click.UsageError("missing --out DIR (or use 'kbq export flow ID')")
    if out.exists() and not out.is_dir():
        raise click.BadParameter(f"{out} exists and is not a directory", param_hint="--out")
    from kb.present.export import markdown_pages

    pages = markdown_pages(_knowledge(rules))
    try:
        for rel, text in pages.items():
            target = out / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8", newline="\n")
    except OSError as exc:
        raise click.ClickException(f"cannot write {exc.filename or out}: {exc.strerror}") from None
    click.echo(f"wrote {len(pages)} {fmt} pages to {out}")


@export.command("flow", help="Print flow ID as a Mermaid flowchart.")
@click.argument("flow_id", metavar="ID")
@rules_option
@click.pass_context
def export_flow(ctx: click.Context, flow_id: str, rules: str | None) -> None:
    from kb.errors import nearest
    from kb.present.export import mermaid

    kn = _knowledge(rules or ctx.obj)
    ids = [f.id for f in kn.flows]
    if flow_id not in ids:
        hint = nearest(flow_id, ids)
        raise click.UsageError(f"no flow '{flow_id}'" + (f" (did you mean '{hint}'?)" if hint else "")
                               + "; flows: " + ", ".join(ids))
    click.echo(mermaid(kn.flow(flow_id)), nl=False)


@export.command("graph", help="Print the knowledge graph (every formula and flow node, and the "
                              "edges between them) as a Mermaid flowchart; --markdown: the page "
                              "docs/graph.md holds.")
@click.option("--markdown", "page", is_flag=True, help="The Markdown page around the chart.")
@rules_option
@click.pass_context
def export_graph(ctx: click.Context, page: bool, rules: str | None) -> None:
    from kb.present.export_graph import graph_mermaid, graph_page

    kn = _knowledge(rules or ctx.obj)
    click.echo(graph_page(kn) if page else graph_mermaid(kn), nl=False)
