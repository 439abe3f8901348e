"""Which addresses kbq renders as links: http and https only.

In: an address from a rule file (a source's or a measurement's `url`). Out: `web_address(text)`,
the address when it is an http(s) URL naming a host, else None; `problem(text)`, why it is not
(None when it is). The rule files' schema (kb.knowledge.schema_base.WebUrl) refuses any other
address, and every surface that writes a link (the pages, the quote, the wiki export) asks
`web_address` again, so a `javascript:` or `data:` address is never a link, whatever loaded it.
"""

from __future__ import annotations

SCHEMES = ("http", "https")
UNSAFE = frozenset('<>"\\`')


def problem(text: object) -> str | None:
    """Why `text` is not an address kbq links to, or None if it is one."""
    from urllib.parse import urlsplit

    if not isinstance(text, str):
        return "an address is text"
    shown = repr(text[:60])
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 or c in UNSAFE for c in text):
        return f"an address has no spaces, control characters, <, >, \", \\ or `, not {shown}"
    try:
        parts = urlsplit(text)
        host = parts.hostname
    except ValueError:
        return f"{shown} is not a URL"
    if parts.scheme.lower() not in SCHEMES or not text.lower().startswith(("http://", "https://")):
        return f"an address must start with https:// or http://, not {shown}"
    if not host:
        return f"an address must name a host after {parts.scheme}://, not {shown}"
    return None


def web_address(text: object) -> str | None:
    """`text` if it is an http(s) address to link to, else None."""
    return text if isinstance(text, str) and problem(text) is None else None
