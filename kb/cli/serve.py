"""`kbq serve`: the web page and JSON API under the server's own process management.

In: host, port, processes, threads, embed origins, answer cache size, --rules. Out: a running server.
"""

from __future__ import annotations

import click

from kb.cli.common import AMOUNT, rules_option


@click.command(help="Run the web page and JSON API under gunicorn: one gevent worker process per "
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
@click.option("--cache-mb", default=32.0, show_default=True, type=AMOUNT, metavar="MB",
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


