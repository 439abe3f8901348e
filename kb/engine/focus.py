"""The figure a question asked for, put first: "how much vram" leads with the memory, "how
fast" with the speed, "how long to train" with the time.

In: an Answer and the sentences of query.yaml `focus_lead` (keyed by focus, with _training or
_inference where the figure differs). Out: the Answer, its verdict led by the asked-for figure
(unchanged when the question asked for none, the figure is unknown, or a speed or time was
asked for a setup that does not fit).
"""

from __future__ import annotations

from kb.engine.answer import Answer
from kb.figures import duration, num


def _figures(a: Answer) -> dict[str, str | None]:
    mem, t = a.memory or {}, a.throughput or {}
    raw: dict[str, float | None] = {
        "per_gpu_gb": mem.get("per_gpu_gb"), "total_gb": mem.get("total_gb"),
        "decode_tokens_per_s": t.get("decode_tokens_per_s"),
        "decode_tokens_per_s_aggregate": t.get("decode_tokens_per_s_aggregate"),
        "ttft_s": t.get("ttft_s"), "train_tokens_per_s": t.get("train_tokens_per_s"),
        "train_tokens": (a.workload or {}).get("train_tokens"),
    }
    out: dict[str, str | None] = {k: (num(v) if v is not None else None) for k, v in raw.items()}
    train_time = t.get("train_time_s")
    out["train_time"] = duration(train_time) if train_time is not None else None
    return out


def lead(a: Answer, templates: dict[str, str]) -> str | None:
    """The sentence that answers the asked-for figure, or None."""
    focus = (a.workload or {}).get("focus")
    if not focus:
        return None
    if focus in ("speed", "time") and a.gpus and not a.gpus[0].fits:
        return None                    # no speed is given for what does not fit
    training = (a.throughput or {}).get("train_tokens_per_s") is not None
    template = templates.get(f"{focus}_{'training' if training else 'inference'}") or templates.get(focus)
    if not template:
        return None
    figures = _figures(a)
    try:
        text = template.format(**figures)
    except (KeyError, IndexError):
        return None
    return None if "None" in text else text


def lead_with_focus(a: Answer, templates: dict[str, str]) -> Answer:
    sentence = lead(a, templates)
    if sentence and not a.verdict.startswith(sentence):
        a.verdict = f"{sentence} {a.verdict}"
    return a
