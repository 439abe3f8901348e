"""Honest figures around the fit: no speed for what cannot run.

In: the Knowledge (the wording: rules/query.yaml verdict.templates withheld*), the rows of an
answer (kb.engine.assembly.answer.GpuRow) and its throughput dict. Out: the same objects, changed
in place, plus the warning to add: a GPU row that does not fit keeps no decode/prefill/training
speed; the answer's own speed, when its GPU does not fit, moves to a warning labelled "if it
fitted"."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from kb.engine.assembly.answer import GpuRow
from kb.engine.verdicts.wording import say
from kb.knowledge import names as N

if TYPE_CHECKING:
    from kb.engine.assembly.answer_records import Throughput
    from kb.knowledge.data import Knowledge

    Speed = Literal["decode_tokens_per_s", "decode_tokens_per_s_aggregate", "prefill_tokens_per_s",
                    "ttft_s", "train_tokens_per_s", "train_time_s"]

SPEEDS: tuple[Speed, ...] = (N.DECODE_TOKENS_PER_S, N.DECODE_TOKENS_PER_S_AGGREGATE,
                             N.PREFILL_TOKENS_PER_S, N.TTFT_S, N.TRAIN_TOKENS_PER_S, N.TRAIN_TIME_S)


def withhold_speeds(kn: Knowledge, rows: list[GpuRow], throughput: Throughput, primary_fits: bool) -> list[str]:
    """Blank the speeds of setups that do not fit; say what the answer's own would be if it fitted."""
    for row in rows:
        if not row.fits:
            for name in SPEEDS:
                setattr(row, name, None)
    if primary_fits:
        return []
    shown = {k: v for k, v in throughput.items() if v is not None}
    if not shown:
        return []
    for key in SPEEDS:
        throughput[key] = None
    parts = []
    if N.DECODE_TOKENS_PER_S in shown:
        parts.append(say(kn, "withheld_decode", value=f"{shown['decode_tokens_per_s']:.3g}"))
    if N.TRAIN_TOKENS_PER_S in shown:
        parts.append(say(kn, "withheld_training", value=f"{shown['train_tokens_per_s']:.3g}"))
    if N.PREFILL_TOKENS_PER_S in shown:
        parts.append(say(kn, "withheld_prefill", value=f"{shown['prefill_tokens_per_s']:.3g}"))
    return [say(kn, "withheld", speeds=", ".join(parts))] if parts else []
