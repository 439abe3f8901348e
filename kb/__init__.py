"""kbq: rules-based, traceable GPU sizing answers for LLM training and inference.

    >>> from kb import ask
    >>> ask("serve 70B int4 16 users").verdict

Nothing is loaded at import; the rules are read on first use (see kb.paths).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from kb.version import __version__
from kb.engine.hfconfig import read
from kb.engine.pipeline import respond
from kb.knowledge.derived import with_model
from kb.knowledge.store import LOADED
from kb.query.parse import parse
from kb.query.words import Vocab, stored_vocabulary

if TYPE_CHECKING:
    from pathlib import Path

    from kb.query.workload import Workload

    from kb.engine.answer import Answer
    from kb.knowledge.build import Knowledge

__all__ = ["answer_in", "ask", "cpu_cores", "get_knowledge", "__version__"]


def get_knowledge(rules_dir: str | Path | None = None) -> "Knowledge":
    """The validated knowledge of a rules directory (default: the shipped rules), cached."""
    return LOADED.get(rules_dir, STORED)


def _stored_vocabulary(kn: "Knowledge") -> object:
    return stored_vocabulary(kn)


def _vocabulary_record() -> type:
    return Vocab


# what a saved knowledge snapshot keeps besides the knowledge: the query vocabulary, made by
# kb.query from the knowledge (the knowledge package does not import the query package), and
# the record it is the fields of (part of the snapshot's format)
STORED = {"vocabulary": (_stored_vocabulary, _vocabulary_record)}


def ask(query: str, rules_dir: str | Path | None = None,
        model_config: str | Path | None = None, *, prices: str | Path | None = None,
        sort: str | None = None, options: bool = False) -> "Answer":
    """Answer one query. Raises kb.errors.QueryError for a query it cannot read.
    `model_config`: a Hugging Face config.json for a model that is not in models.yaml. The
    model is added to a view of the knowledge for this answer only (kb.knowledge.derived.with_model).
    `prices`: a price file (rules/prices.yaml schema) used instead of the shipped prices;
    `sort`: value, cost, speed, memory or power; `options`: list what to change so it fits."""
    kn = get_knowledge(rules_dir)
    if prices is not None:
        kn = _priced(kn, prices, rules_dir)
    if model_config is None:
        return answer_in(kn, query, sort=sort, options=options)

    model = read(model_config, kn)
    view = with_model(kn, model)
    w = parse(query, view, model_given=True)
    w.model_id = model["id"]
    w.notes.append(f"model: {model['name']}, read from {model_config}; parameters computed "
                   "from its architecture (arch_params_total)")
    def asked() -> "Workload":
        w0 = parse(query, view, model_given=True)
        w0.model_id = model["id"]
        return w0

    return respond(view, query, w, sort=sort, options=options, asked=asked)


def answer_in(kn: "Knowledge", query: str, *, sort: str | None = None, options: bool = False) -> "Answer":
    """Answer one query with a given knowledge: the path every surface shares (the CLI, a
    batch line, the JSON API). `sort` and `options` as for ask(); a sort the query's own words
    chose gives way to `sort`. Raises kb.errors.QueryError for a query it cannot read."""
    return respond(kn, query, sort=sort, options=options)


def _priced(kn: "Knowledge", prices: str | Path, rules_dir: str | Path | None) -> "Knowledge":
    """The knowledge with another price file (kb.knowledge.prices.with_prices), cached per file."""
    return LOADED.priced(rules_dir, prices, STORED)


def cpu_cores() -> int:
    """The cores this process may run on (the container's share, not the host's count): how
    many worker processes `kbq serve` and `kbq --batch` start by default."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1
