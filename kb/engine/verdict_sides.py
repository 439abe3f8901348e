"""The verdict of an A vs B of one field ("fp8 vs int4", "vllm vs llama.cpp", "8b vs 70b"):
one clause per side, side by side, then which side wins on what.

In: the sides (Answer.comparison, kb.engine.compare), the kind of question, whether it is
training, what would make the first side fit (kb.engine.verdict's options sentence). Out: the
verdict's sentences, which kb.engine.verdict.compose (which imports this) fits to its word limit. Every figure is a
side's own (its answer alone), every claim computed from them or ranked in rules/.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.figures import num, usd

if TYPE_CHECKING:
    from collections.abc import Callable

    from kb.engine.answer_records import Side

    Label = Callable[[Side], str]      # how a side is named




def _on(side: Side) -> str:
    return f"{side['count']}× {side['gpu']}"


def _side_figure(side: Side, kind: str, training: bool) -> tuple[float | None, str]:
    """The figure a side is weighed by, and its unit: the cost when a cost was asked, else the speed."""
    if kind == "cost":
        return (side["run_cost_usd"], "for the run") if training else \
            (side["usd_per_million_tokens"], "per million tokens")
    return (side["train_tokens_per_s"], "training tok/s") if training else \
        (side["decode_tokens_per_s"], "tok/s per user")


def _clause(side: Side, kind: str, training: bool, on: bool, again: bool, alike: bool, label: Label) -> str:
    """A side's fit, memory per GPU and figure; `again`: its unit was said in the clause before;
    `alike`: no side fits and all need the same count (said once, after the clauses)."""
    where = f" on {_on(side)}" if on else ""
    if not side["fits"]:            # the cards that would hold it: here, or once for all sides
        more = side.get("gpus_needed")
        held = f", {more}× would hold it" if more and more != side["count"] and not alike else ""
        return (f"{label(side)} does not fit{where}: {num(side['per_gpu_gb'])} GB per GPU "
                f"({num(side.get('usable_vram_gb'))} usable){held}")
    mem = f"{num(side['per_gpu_gb'])} of {num(side.get('usable_vram_gb'))} GB per GPU"
    value, unit = _side_figure(side, kind, training)
    if again:
        unit = unit.removesuffix(" per user")
    fig = "" if value is None else f", {usd(value) if kind == 'cost' else num(value)} {unit}"
    return f"{label(side)} fits{where}: {mem}{fig}"


def sides(sides: list[Side], kind: str, training: bool, fixes: list[str], label: Label) -> list[str]:
    """One clause per side, side by side, then which side wins on what (only the engine's
    figures, and the rules' quality rank); `fixes`: what would make the first side fit; `label`:
    how a side is named (its value as a query writes it, kb.query.unparse.value_text)."""
    same = len({(s["count"], s["gpu"]) for s in sides}) == 1
    head = f"On {_on(sides[0])}, " if same else ""
    alike = _alike(sides)
    first = head + "; ".join(_clause(s, kind, training, not same, i > 0, alike is not None, label)
                             for i, s in enumerate(sides)) + "."
    return [first, _side_winner(sides, kind, training, fixes, label)]


def _alike(sides: list[Side]) -> int | None:
    """The count of cards every side needs by memory, when none fits and they agree."""
    counts = {s.get("gpus_needed") for s in sides if not s["fits"]}
    if any(s["fits"] for s in sides) or len(counts) != 1:
        return None
    n = counts.pop()
    return n if n and n != sides[0]["count"] else None


def _side_winner(sides: list[Side], kind: str, training: bool, fixes: list[str], label: Label) -> str:
    fitting = [s for s in sides if s["fits"]]
    if not fitting:
        more = _alike(sides)
        held = f"; {more}× would hold each" if more is not None else ""
        return (f"{'Neither' if len(sides) == 2 else 'None'} fits{held}." + (f" {fixes[0]}" if fixes else ""))
    if len(fitting) == 1:
        return f"Only {label(fitting[0])} fits."
    said: list[tuple[Side, str]] = []          # (the side, what it wins on)
    figured = [(s, v) for s in fitting if (v := _side_figure(s, kind, training)[0])]
    if len(figured) > 1:
        low, high = min(figured, key=lambda x: x[1]), max(figured, key=lambda x: x[1])
        if high[1] >= 1.05 * low[1]:
            ratio = f"{high[1] / low[1]:.1f}×"
            if kind == "cost":
                said.append((low[0], f"costs {ratio} less {_side_figure(low[0], kind, training)[1]}"))
            else:
                said.append((high[0], f"{'trains' if training else 'decodes'} {ratio} faster"))
    small = min(fitting, key=lambda s: s["per_gpu_gb"] or 0.0)
    big = max(fitting, key=lambda s: s["per_gpu_gb"] or 0.0)
    gap = (big["per_gpu_gb"] or 0.0) - (small["per_gpu_gb"] or 0.0)
    if gap >= 0.05 * (big["per_gpu_gb"] or 0.0):
        said.append((small, f"needs {num(gap)} GB less"))
    better = _quality(sides)
    if better is not None:
        said.append((better, "keeps more model quality"))
    if not said:
        return "They are even on memory and speed."
    out: list[tuple[Side, str]] = []            # one clause per side that wins something in a row
    for s, what in said:
        if out and out[-1][0] is s:
            out[-1] = (s, f"{out[-1][1]} and {what}")
        else:
            out.append((s, what))
    return "; ".join(f"{label(s)} {what}" for s, what in out) + "."


def _quality(sides: list[Side]) -> Side | None:
    """Which side keeps more model quality, when the rules rank every side's precision
    (rules/prices.yaml options: quality_rank, 0 no quality cost)."""
    ranks = [s.get("quality_rank") for s in sides]
    if len(sides) != 2 or ranks[0] is None or ranks[1] is None or ranks[0] == ranks[1]:
        return None
    return sides[0] if ranks[0] < ranks[1] else sides[1]
