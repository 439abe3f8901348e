"""The verdict of an A vs B of one field ("fp8 vs int4", "vllm vs llama.cpp", "8b vs 70b"):
one clause per side, side by side, then which side wins on what.

In: the sides (Answer.comparison, kb.engine.advising.compare), the kind of question, whether it is
training, what would make the first side fit (kb.engine.verdicts.verdict's options sentence). Out: the
verdict's sentences, which kb.engine.verdicts.verdict.compose (which imports this) fits to its word limit. Every figure is a
side's own (its answer alone), every claim computed from them or ranked in rules/; the leads
it names and its wording are rules/query.yaml `verdict` (faster_ratio, less_memory_fraction,
the sides_* templates).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.figures import num, usd
from kb.knowledge import names as N

if TYPE_CHECKING:
    from collections.abc import Callable

    from kb.engine.assembly.answer_records import Side
    from kb.knowledge.records_rules import Verdict

    Label = Callable[[Side], str]      # how a side is named




def _on(v: Verdict, side: Side) -> str:
    return v["templates"]["sides_on"].format(count=side["count"], gpu=side["gpu"])


def _side_figure(side: Side, kind: str, training: bool) -> tuple[float | None, str]:
    """The figure a side is weighed by, and its unit: the cost when a cost was asked, else the speed."""
    if kind == "cost":
        return (side[N.RUN_COST_USD], "for the run") if training else \
            (side[N.USD_PER_MILLION_TOKENS], "per million tokens")
    return (side[N.TRAIN_TOKENS_PER_S], "training tok/s") if training else \
        (side[N.DECODE_TOKENS_PER_S], "tok/s per user")


def _clause(v: Verdict, side: Side, kind: str, training: bool, on: bool, again: bool, alike: bool,
            label: Label) -> str:
    """A side's fit, memory per GPU and figure; `again`: its unit was said in the clause before;
    `alike`: no side fits and all need the same count (said once, after the clauses)."""
    t = v["templates"]
    where = t["sides_where"].format(on=_on(v, side)) if on else ""
    if not side[N.FITS]:            # the cards that would hold it: here, or once for all sides
        more = side.get(N.GPUS_NEEDED)
        held = t["sides_held"].format(more=more) if more and more != side["count"] and not alike else ""
        return t["sides_no_fit"].format(label=label(side), where=where, per_gpu=num(side[N.PER_GPU_GB]),
                                        usable=num(side.get(N.USABLE_VRAM_GB)), held=held)
    mem = t["sides_memory"].format(per_gpu=num(side[N.PER_GPU_GB]), usable=num(side.get(N.USABLE_VRAM_GB)))
    value, unit = _side_figure(side, kind, training)
    if again:
        unit = unit.removesuffix(" per user")
    fig = "" if value is None else t["sides_figure"].format(
        value=usd(value) if kind == "cost" else num(value), unit=unit)
    return t["sides_fits"].format(label=label(side), where=where, memory=mem, figure=fig)


def sides(v: Verdict, sides: list[Side], kind: str, training: bool, fixes: list[str], label: Label) -> list[str]:
    """One clause per side, side by side, then which side wins on what (only the engine's
    figures, and the rules' quality rank); `v`: query.yaml verdict; `fixes`: what would make the
    first side fit; `label`: how a side is named (its value as a query writes it,
    kb.query.unparse.value_text)."""
    same = len({(s["count"], s["gpu"]) for s in sides}) == 1
    head = v["templates"]["sides_head"].format(on=_on(v, sides[0])) if same else ""
    alike = _alike(sides)
    first = head + "; ".join(_clause(v, s, kind, training, not same, i > 0, alike is not None, label)
                             for i, s in enumerate(sides)) + "."
    return [first, _side_winner(v, sides, kind, training, fixes, label)]


def _alike(sides: list[Side]) -> int | None:
    """The count of cards every side needs by memory, when none fits and they agree."""
    counts = {s.get(N.GPUS_NEEDED) for s in sides if not s[N.FITS]}
    if any(s[N.FITS] for s in sides) or len(counts) != 1:
        return None
    n = counts.pop()
    return n if n and n != sides[0]["count"] else None


def _side_winner(v: Verdict, sides: list[Side], kind: str, training: bool, fixes: list[str],
                 label: Label) -> str:
    t = v["templates"]
    fitting = [s for s in sides if s[N.FITS]]
    if not fitting:
        more = _alike(sides)
        held = t["sides_held_each"].format(more=more) if more is not None else ""
        return (t["sides_none_fit"].format(none="Neither" if len(sides) == 2 else "None", held=held)
                + (f" {fixes[0]}" if fixes else ""))
    if len(fitting) == 1:
        return t["sides_only"].format(label=label(fitting[0]))
    said = _leads(v, fitting, kind, training)   # (the side, what it wins on)
    better = _quality(sides)
    if better is not None:
        said.append((better, t["sides_quality"]))
    if not said:
        return t["sides_even"]
    out: list[tuple[Side, str]] = []            # one clause per side that wins something in a row
    for s, what in said:
        if out and out[-1][0] is s:
            out[-1] = (s, t["sides_both"].format(first=out[-1][1], then=what))
        else:
            out.append((s, what))
    return "; ".join(f"{label(s)} {what}" for s, what in out) + "."


def _leads(v: Verdict, fitting: list[Side], kind: str, training: bool) -> list[tuple[Side, str]]:
    """What the fitting sides win on: speed (or cost) by at least faster_ratio, memory by at
    least less_memory_fraction of the larger side's GB per GPU (query.yaml verdict)."""
    t = v["templates"]
    said: list[tuple[Side, str]] = []
    figured = [(s, x) for s in fitting if (x := _side_figure(s, kind, training)[0])]
    if len(figured) > 1:
        low, high = min(figured, key=lambda x: x[1]), max(figured, key=lambda x: x[1])
        if high[1] >= v["faster_ratio"]["value"] * low[1]:
            ratio = f"{high[1] / low[1]:.1f}×"
            if kind == "cost":
                said.append((low[0], t["sides_cheaper"].format(ratio=ratio, unit=_side_figure(low[0], kind, training)[1])))
            else:
                said.append((high[0], t["sides_faster"].format(verb="trains" if training else "decodes", ratio=ratio)))
    small = min(fitting, key=lambda s: s[N.PER_GPU_GB] or 0.0)
    big = max(fitting, key=lambda s: s[N.PER_GPU_GB] or 0.0)
    gap = (big[N.PER_GPU_GB] or 0.0) - (small[N.PER_GPU_GB] or 0.0)
    if gap >= v["less_memory_fraction"]["value"] * (big[N.PER_GPU_GB] or 0.0):
        said.append((small, t["sides_less_memory"].format(gap=num(gap))))
    return said


def _quality(sides: list[Side]) -> Side | None:
    """Which side keeps more model quality, when the rules rank every side's precision
    (rules/prices.yaml options: quality_rank, 0 no quality cost)."""
    ranks = [s.get("quality_rank") for s in sides]
    if len(sides) != 2 or ranks[0] is None or ranks[1] is None or ranks[0] == ranks[1]:
        return None
    return sides[0] if ranks[0] < ranks[1] else sides[1]
