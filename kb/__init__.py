"""kbq: rules-based, traceable GPU sizing answers for LLM training and inference.

    >>> from kb import ask
    >>> ask("serve 70B int4 16 users").verdict

Nothing is loaded at import; the rules are read on first use (see kb.paths).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from kb.version import __version__

if TYPE_CHECKING:
    from pathlib import Path

    from kb.query.workload import Workload

    from kb.engine.assembly.answer import Answer
    from kb.engine.assembly.answer_records import ModelSource
    from kb.knowledge.build import Knowledge
    from kb.knowledge.records import Model

__all__ = ["answer_in", "answered", "as_typed", "ask", "asked_in", "cpu_cores", "get_knowledge", "__version__"]


def get_knowledge(rules_dir: str | Path | None = None) -> "Knowledge":
    """The validated knowledge of a rules directory (default: the shipped rules), cached."""
    from kb.knowledge.store import LOADED

    return LOADED.get(rules_dir, STORED)


def _stored_vocabulary(kn: "Knowledge") -> object:
    from kb.query.words import stored_vocabulary

    return stored_vocabulary(kn)


def _vocabulary_record() -> type:
    from kb.query.words import Vocab

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
    A query naming a Hub id (org/name) that models.yaml lacks reads that model's config through
    huggingface_hub instead (see answered()).
    `prices`: a price file (rules/prices.yaml schema) used instead of the shipped prices;
    `sort`: value, cost, speed, memory or power; `options`: list what to change so it fits."""
    return asked_in(rules_dir, query, model_config, prices=prices, sort=sort, options=options)[0]


def asked_in(rules_dir: str | Path | None, query: str, model_config: str | Path | None = None, *,
             prices: str | Path | None = None, sort: str | None = None,
             options: bool = False) -> "tuple[Answer, Knowledge]":
    """ask()'s answer and the knowledge it was answered with (a view with the model of
    `model_config` or of the Hub id the query names, else the rules' own)."""
    kn = get_knowledge(rules_dir)
    if prices is not None:
        kn = _priced(kn, prices, rules_dir)
    if model_config is None:
        return answered(kn, query, sort=sort, options=options)

    from kb.engine.resolving.hfconfig import read

    model = read(model_config, kn)
    note = (f"model: {model['name']}, read from {model_config}; parameters computed "
            "from its architecture (arch_params_total)")
    source: "ModelSource" = {
        "kind": "config.json", "model_id": model["id"], "repo_id": None, "revision": None,
        "config_path": str(model_config), "params_from": "shapes",
        "params_total": model["params_total"], "dtypes": None}
    return _answer_with(kn, model, query, note, source, given=True, sort=sort, options=options)


def answer_in(kn: "Knowledge", query: str, *, sort: str | None = None, options: bool = False) -> "Answer":
    """Answer one query with a given knowledge: the path every surface shares (the CLI, a
    batch line, the JSON API). `sort` and `options` as for ask(); a sort the query's own words
    chose gives way to `sort`. Raises kb.errors.QueryError for a query it cannot read."""
    return answered(kn, query, sort=sort, options=options)[0]


def answered(kn: "Knowledge", query: str, *, sort: str | None = None,
             options: bool = False) -> "tuple[Answer, Knowledge]":
    """answer_in()'s answer and the knowledge it was answered with: `kn`, or, when the query
    names a Hugging Face Hub id that models.yaml lacks (kb.errors.HubModelNamed), a view of `kn`
    with that model, read from its config.json through huggingface_hub (kb.query.hub: its cache,
    HF_HOME and HF_HUB_OFFLINE). A model that cannot be read is a QueryError under its id, whose
    message says how to fetch it."""
    from kb.errors import HubModelNamed
    from kb.query.parse import parse

    try:
        w = parse(query, kn)        # read before the engine is imported: a query error needs none of it
        from kb.engine.pipeline import respond

        return respond(kn, query, w, sort=sort, options=options), kn
    except HubModelNamed as named:
        repo_id, column, shown = named.repo_id, named.column, named.query   # the query as one line
    from kb.engine.resolving.hfconfig import from_hub
    from kb.errors import QueryError
    from kb.query import hub

    try:
        got = hub.read(repo_id)
    except hub.HubError as err:          # not cached offline, no such model…: under the id typed
        raise QueryError(shown, column, str(err), width=len(repo_id)) from None
    model, how, said = from_hub(got, kn)
    note = (f"model: {model['name']}, read from its config.json on the Hugging Face Hub at revision "
            f"{got.revision}; {said}")
    source: "ModelSource" = {
        "kind": "hub", "model_id": model["id"], "repo_id": repo_id, "revision": got.revision,
        "config_path": got.config_path, "params_from": how, "params_total": model["params_total"],
        "dtypes": got.tensors}
    return _answer_with(kn, model, query, note, source, sort=sort, options=options)


def _answer_with(kn: "Knowledge", model: "Model", query: str, note: str, source: "ModelSource", *,
                 given: bool = False, sort: str | None, options: bool) -> "tuple[Answer, Knowledge]":
    """The answer with one more model (kb.knowledge.derived.with_model), said in its assumptions
    (`note`) and its model_source; `given`: the model is the query's whatever it names
    (--model-config), else the query names it by its Hub id. The queries of its options and
    comparison name it as the query did, so that each can be asked again."""
    from kb.engine.pipeline import respond
    from kb.errors import HubModelNamed, QueryError
    from kb.knowledge.derived import with_model
    from kb.query.parse import parse

    view = with_model(kn, model)

    def asked() -> "Workload":
        w0 = parse(query, view, model_given=given)
        if given:
            w0.model_id = model["id"]
        return w0

    try:
        w = asked()
        w.notes.append(note)
        a = respond(view, query, w, sort=sort, options=options, asked=asked)
    except HubModelNamed as second:
        raise QueryError(second.query, second.column, f"one model is read from the Hugging Face Hub per "
                         f"query; '{second.repo_id}' is a second", width=len(second.repo_id)) from None
    a.model_source = source
    for item in [*(a.options or []), *(a.comparison or [])]:
        item["query"] = as_typed(item["query"], source)
    return a, view


def as_typed(query: str, source: "ModelSource | None") -> str:
    """A query kbq wrote (kb.query.unparse) for an answer whose model came from the Hub, with
    that model called by its Hub id, as the question named it, rather than by its model id, a word
    only the answer's own knowledge holds: so the query can be asked again. Others unchanged."""
    if source is None or source["repo_id"] is None:
        return query
    import re

    word = re.compile(rf"(?<![\w./-]){re.escape(source['model_id'])}(?![\w./-])")
    return word.sub(source["repo_id"], query)


def _priced(kn: "Knowledge", prices: str | Path, rules_dir: str | Path | None) -> "Knowledge":
    """The knowledge with another price file (kb.knowledge.prices.with_prices), cached per file."""
    from kb.knowledge.store import LOADED

    return LOADED.priced(rules_dir, prices, STORED)


def cpu_cores() -> int:
    """The cores this process may run on (the container's share, not the host's count): how
    many worker processes `kbq serve` and `kbq --batch` start by default."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1
