"""Model listing for `kbq models`: filters, a stable order and a family grouping.

In: the loaded Knowledge and the options of the command. Out: the selected model entries
(every field, as models.yaml has them) in a stable order, and families with their models.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from kb.errors import KbError
from kb.knowledge.data import Knowledge, norm

if TYPE_CHECKING:
    from kb.knowledge.records import Model

_CONTEXT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([km]?)\s*$", re.IGNORECASE)
_SCALE = {"": 1, "k": 1024, "m": 1024 * 1024}


def context_tokens(text: str) -> int:
    """'32768', '32k' or '1M' → tokens (k = 1024, as model contexts are counted)."""
    m = _CONTEXT.match(text) if text.isascii() else None
    tokens = float(m.group(1)) * _SCALE[m.group(2).lower()] if m else math.nan
    if not math.isfinite(tokens):       # a number too long for a float is not a count either
        shown = text if len(text) <= 40 else text[:40] + "…"
        raise KbError(f"--min-context: '{shown}' is not a token count (try 32768, 128k or 1M)")
    return int(tokens)


def _order(m: Model) -> tuple[str, float, str]:
    return (m["family"], m["params_total"], m["id"])


def matches(m: Model, text: str) -> bool:
    """Case- and separator-insensitive substring of the id, name, family or an alias."""
    key = norm(text)
    return any(key in norm(s) for s in [m["id"], m["name"], m["family"], *m.get("aliases", [])])


def select(kn: Knowledge, family: str | None = None, min_params: float | None = None,
           search: str | None = None, moe: bool = False, min_context: int | None = None) -> list[Model]:
    """The models every given filter keeps, by family, then size, then id."""
    items = [m for m in kn.models.values()
             if (family is None or m["family"] == family.lower())
             and (min_params is None or m["params_total"] >= min_params * kn.billion)
             and (search is None or matches(m, search))
             and (not moe or m.get("moe"))
             and (min_context is None or m["max_context"] >= min_context)]
    return sorted(items, key=_order)


def families(items: list[Model]) -> dict[str, list[str]]:
    """family → model ids, families in name order (items are already in a stable order)."""
    out: dict[str, list[str]] = {}
    for m in items:
        out.setdefault(m["family"], []).append(m["id"])
    return dict(sorted(out.items()))


def layout(m: Model) -> str:
    """Attention layout in a few letters: gqa+swa1024, gqa+chunk8192, gqa+mamba2, mla+moe …"""
    text: str = m["attention"]
    if window := m.get("sliding_window"):
        text += ("+chunk" if m.get("local_attention") == "chunked" else "+swa") + str(window)
    if recurrent := m.get("recurrent"):
        text += "+" + recurrent["kind"]
    if m.get("moe"):
        text += "+moe"
    return text
