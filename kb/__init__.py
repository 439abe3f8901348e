"""kbq: rules-based, traceable GPU sizing answers for LLM training and inference.

    >>> from kb import ask
    >>> ask("serve 70B int4 16 users").verdict

Nothing is loaded at import; the rules are read on first use (see kb.paths).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kb.version import __version__

if TYPE_CHECKING:
    from kb.answer import Answer
    from kb.knowledge import Knowledge

__all__ = ["ask", "cpu_cores", "get_knowledge", "__version__"]


def get_knowledge(rules_dir: str | Path | None = None) -> "Knowledge":
    """The validated knowledge of a rules directory (default: the shipped rules), cached."""
    from kb.store import LOADED

    return LOADED.get(rules_dir)


def ask(query: str, rules_dir: str | Path | None = None,
        model_config: str | Path | None = None) -> "Answer":
    """Answer one query. Raises kb.errors.QueryError for a query it cannot read.
    `model_config`: a Hugging Face config.json for a model that is not in models.yaml. The
    model is added to a view of the knowledge for this answer only (Knowledge.with_model)."""
    from kb.engine import answer
    from kb.query import parse

    kn = get_knowledge(rules_dir)
    if model_config is None:
        return answer(parse(query, kn), kn, query)
    from kb.hfconfig import read

    model = read(model_config, kn)
    view = kn.with_model(model)
    w = parse(query, view, model_given=True)
    w.model_id = model["id"]
    w.notes.append(f"model: {model['name']}, read from {model_config}; parameters computed "
                   "from its architecture (arch_params_total)")
    return answer(w, view, query)


def cpu_cores() -> int:
    """The cores this process may run on (the container's share, not the host's count): how
    many worker processes `kbq serve` and `kbq --batch` start by default."""
    import os

    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1
