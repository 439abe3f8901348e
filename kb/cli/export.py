"""`kbq export`: wiki pages (Markdown + Mermaid) from the rules, one flow or the knowledge graph.

In: --out DIR, or `flow ID`, or `graph`. Out: files under DIR, or a Mermaid chart on stdout.
"""

from __future__ import annotations

from pathlib import Path

import click

from kb.cli.clicked import option, options, rules_option
from kb.cli.common import knowledge
from kb.cli.declared import RULES, Opt

EXPORT_OPTIONS = (
    Opt("--format", "fmt", metavar="FORMAT", choices=("markdown",), default="markdown", show_default=True,
        help="page format"),
    Opt("--out", "out", metavar="DIR", kind=lambda flag, text: Path(text),
        help="directory to write the pages to (created if missing)"),
    RULES,
)


@click.group("export", invoke_without_command=True,
           help="Write wiki pages (Markdown + Mermaid) from the rules: kbq export --out DIR. "
                "'kbq export flow ID' prints one flow as a Mermaid chart, "
                "'kbq export graph' the knowledge graph.")
@options(*EXPORT_OPTIONS)
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

    pages = markdown_pages(knowledge(rules))
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

    kn = knowledge(rules or ctx.obj)
    ids = [f.id for f in kn.flows]
    if flow_id not in ids:
        hint = nearest(flow_id, ids)
        raise click.UsageError(f"no flow '{flow_id}'" + (f" (did you mean '{hint}'?)" if hint else "")
                               + "; flows: " + ", ".join(ids))
    click.echo(mermaid(kn.flow(flow_id)), nl=False)


@export.command("graph", help="Print the knowledge graph (every formula and flow node, and the "
                              "edges between them) as a Mermaid flowchart; --markdown: the page "
                              "docs/graph.md holds.")
@option(Opt("--markdown", "page", True, help="the Markdown page around the chart"))
@rules_option
@click.pass_context
def export_graph(ctx: click.Context, page: bool, rules: str | None) -> None:
    from kb.present.export_graph import graph_mermaid, graph_page

    kn = knowledge(rules or ctx.obj)
    click.echo(graph_page(kn) if page else graph_mermaid(kn), nl=False)
