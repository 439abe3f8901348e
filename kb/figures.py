"""Figures for people: a number or a duration as the answer shows it (3 significant digits,
thousands separated, n/a for a figure that is not there). Every surface and the engine's
figure text use these, so one figure reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

Value: TypeAlias = "float | int | str | bool | None"      # one scalar of a record or a scope

# the parts of an answer's memory (Answer.memory["breakdown"]) as every surface names them
BREAKDOWN_LABELS = {
    "weights_gb": "weights", "kv_cache_gb": "KV cache", "activations_gb": "activations",
    "gradients_gb": "gradients", "optimizer_gb": "optimizer", "adapters_gb": "adapters",
    "overhead_gb": "runtime overhead", "other_models_gb": "other models",
}


def num(value: Value | Sequence[Value], digits: int = 3) -> str:
    """A figure for people: 3 significant digits, thousands separated; n/a for None."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if not isinstance(value, (int, float)):         # a range: low–high
        return "–".join(num(v, digits) for v in value)
    v = float(value)
    if v == 0:
        return "0"
    if abs(v) >= 1e15 or abs(v) < 1e-3:
        return f"{v:.{digits}g}"
    if abs(v) >= 10 ** digits:
        return f"{v:,.0f}"
    text = f"{v:.{digits}g}"            # 999.7 rounds to 1e+03: written 1,000 like the rest
    return f"{float(text):,}".rstrip("0").rstrip(".")


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    s = float(seconds)
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if s >= size * 2:
            return f"{num(s / size)} {unit}"
    return f"{num(s)} s"


def usd(v: float | None) -> str:
    """A dollar amount as every verdict shows it: whole dollars from $100, cents below."""
    return "n/a" if v is None else f"${v:,.0f}" if v >= 100 else f"${v:,.2f}"


def servers_needed(count: int) -> str:
    """How the key figures and the quote name the servers modules are bought in: 'the server it
    needs', 'the 2 servers they need'; '' for cards (formulas.yaml servers_bought)."""
    return "" if not count else "the server it needs" if count == 1 else f"the {count} servers they need"
