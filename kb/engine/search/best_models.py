"""'The best model I can run on X': the ranked catalogue models that fit, each sized.

In: a largest_model question's workload, the knowledge, the ranking function and the query, and its answer. Out: the
question's `best_models` (the first query.yaml best_models.count models of the ranking for the use
asked that fit the answer's cards, each with its memory per GPU and decode speed) and the ranking
said in the assumptions, when the query asks in one of best_models.words; else nothing.

Each candidate is sized as a plain fits question on the same cards, at the same format and
runtime, so its figures agree with asking for that model by name.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from kb.knowledge import names as N
from kb.query.workload import GpuRequest

if TYPE_CHECKING:
    from kb.engine.assembly.answer import Answer
    from collections.abc import Callable

    from kb.knowledge.data import Knowledge
    from kb.query.workload import Workload

    Rank = Callable[[Workload, Knowledge, str, bool], Answer]
    from kb.knowledge.records_rules import BestModels, Ranking


def _says(text: str, phrases: list[str]) -> bool:
    """Whether `text` holds one of `phrases` as whole words."""
    return any(re.search(rf"(?<![\w-]){re.escape(p)}(?![\w-])", text) for p in phrases)


def asked(spec: BestModels | None, query: str) -> bool:
    """Whether the query asks for the best models in query.yaml best_models.words."""
    return spec is not None and _says(" ".join(query.lower().split()), spec["words"])


def ranking_for(spec: BestModels, query: str) -> tuple[str, Ranking, str | None]:
    """The use the query asks for (best_models.uses; 'general' if none), its ranking, and a note
    when that use has no ranking of its own and the general one answers it."""
    text = " ".join(query.lower().split())
    use = next((u for u, words in spec["uses"].items() if _says(text, words)), "general")
    by_use = {r["use"]: r for r in spec["rankings"]}
    if use in by_use:
        return use, by_use[use], None
    general = by_use.get("general", spec["rankings"][0])
    return use, general, (f"no sourced {use} ranking of the catalogue's models: the {general['use']} "
                          f"ranking names the models, ranked for {general['use']} use, not for {use}")


def _sized(base: Workload, kn: Knowledge, rank: Rank, result: Answer, model_id: str) -> dict[str, Any] | None:
    """The model asked as a plain fits question on the answer's cards; its row, if it fits and
    decodes at least at the speed asked (else formulas.yaml decode_speed_floor_tok_s)."""
    w = base.copy()
    w.question, w.model_id, w.params, w.size_unnamed = None, model_id, None, False
    w.gpus = [GpuRequest(g["gpu_id"], int(g["count"]), g.get("capacity_gb")) for g in result.workload["gpus"]]
    got = rank(w, kn, "", True)
    row = next((g for g in got.gpus if g.requested), got.gpus[0] if got.gpus else None)
    if row is None or not row.fits:
        return None
    floor = base.speed_floor_tok_s or float(kn.constants[N.DECODE_SPEED_FLOOR_TOK_S]["value"])
    if row.decode_tokens_per_s is not None and row.decode_tokens_per_s < floor:
        return None         # it loads, but too slow to use (below reading speed, or the speed asked)
    return {"model": model_id, "name": kn.models[model_id]["name"],
            "precision": got.workload.get("precision"), "gpu": row.name, "count": row.count,
            "per_gpu_gb": row.per_gpu_gb, "usable_gb": row.usable_vram_gb,
            "decode_tokens_per_s": row.decode_tokens_per_s}


def add(base: Workload, kn: Knowledge, rank: Rank, query: str, result: Answer) -> None:
    """The best models that fit, on the answer's question (`best_models`, `best_models_use`,
    `best_models_ranking`), and the ranking in its assumptions; only when the query asks."""
    spec = kn.query.get("best_models")
    if spec is None or result.question is None or not asked(spec, query):
        return
    use, ranking, note = ranking_for(spec, query)
    found: list[dict[str, Any]] = []
    for ranked in ranking["models"]:
        if len(found) >= spec["count"]:
            break
        if (row := _sized(base, kn, rank, result, ranked["model"])) is not None:
            found.append({**row, "score": ranked["score"]})
    q: Any = result.question
    q["best_models"], q["best_models_use"] = found, use
    q["best_models_ranking"] = {"use": ranking["use"], "text": ranking["text"], "source": ranking["source"]}
    result.assumptions.append(f"best models: ranked by {ranking['text']} [{ranking['source']}], the first "
                              f"{spec['count']} that fit, each sized like a fits question at this format")
    if note:
        result.assumptions.append(note)
    if not found:
        result.warnings.append(f"none of the {len(ranking['models'])} models the {ranking['use']} ranking "
                               "names fits here; the size below is the largest that fits")
