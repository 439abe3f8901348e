"""`kbq serve`: the web page and JSON API under the server's own process management.

In: host, port, processes, threads, embed origins, answer cache size, --rules. Out: a running server.
"""

from __future__ import annotations

import click

from kb.cli.clicked import options
from kb.cli.declared import RULES, Opt, amount, integer


def addresses(flag: str, text: str) -> str:
    """Comma-separated IP addresses or networks (gunicorn's forwarded_allow_ips), or '*'."""
    import ipaddress

    for item in filter(None, (part.strip() for part in text.split(","))):
        if item == "*":
            continue
        try:
            ipaddress.ip_network(item)
        except ValueError:
            raise ValueError(f"invalid value for '{flag}': '{item}' is not an IP address or "
                             "network (e.g. 127.0.0.1, 10.0.0.0/8)") from None
    return text

SERVE_OPTIONS = (
    Opt("--host", "host", metavar="HOST", default="127.0.0.1", show_default=True, help="address to listen on"),
    Opt("--port", "port", metavar="PORT", kind=integer(0, 65535), default=8080, show_default=True,
        help="port to listen on"),
    Opt("--processes", "processes", metavar="N", kind=integer(1, 256),
        help="worker processes  [default: one per CPU core]"),
    Opt("--threads", "threads", metavar="N", kind=integer(1, 64), default=2, show_default=True,
        names=("--workers",),
        help="answers computed at once in each process, each on a thread of its own\n"
             "(--workers is its former name)"),
    Opt("--embed-origin", "embed_origins", metavar="ORIGIN", multiple=True,
        help="an origin (https://wiki.example.com) that may frame /embed; repeat for more.\n"
             "Adds to KBQ_EMBED_ORIGINS (space-separated)"),
    Opt("--forwarded-allow-ips", "forwarded_allow_ips", metavar="ADDRESSES", kind=addresses, default="",
        help="proxies (addresses or networks, comma-separated; * for any) whose X-Forwarded-For\n"
             "names the client; by default none: the client is the connection's address"),
    Opt("--connections-per-address", "per_address", metavar="N", kind=integer(1, 1000), default=64,
        show_default=True,
        help="open connections one client address may hold in each process (a proxy named in\n"
             "--forwarded-allow-ips: no limit); past it, 429 and the connection closed"),
    Opt("--cache-mb", "cache_mb", metavar="MB", kind=amount, default=32.0, show_default=True,
        help="answers already given, kept per process to give again while the rules are\n"
             "unchanged (0: none)"),
    RULES,
)


@click.command(help="Run the web page and JSON API under gunicorn: one gevent worker process per "
                    "core, each computing answers on a few threads.")
@options(*SERVE_OPTIONS)
def serve(host: str, port: int, processes: int | None, threads: int, embed_origins: tuple[str, ...] | list[str],
          forwarded_allow_ips: str, per_address: int, cache_mb: float, rules: str | None) -> None:
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
        serving.serve(host, port, processes or cpu_cores(), threads, rules, ready, origins, sock, cache_mb,
                      forwarded_allow_ips, per_address)
    except OSError as err:
        raise click.ClickException(f"cannot serve: {err.strerror or err}") from None


