"""A model from --model-config is an overlay on the shared knowledge, never a change to it.

The server answers queries on threads that share one Knowledge; a config.json model must be
seen by its own answer only.
"""

from __future__ import annotations

import threading
from pathlib import Path

from kb import ask, get_knowledge
from kb.knowledge.derived import with_model
from kb.query.words import vocab_of
from kb.engine.resolving.hfconfig import read

CONFIG = Path(__file__).parent / "data" / "llama-3.1-8b-config.json"
WITH_CONFIG = "serve int4 16 users on rtx 4090"
PLAIN = "largest model for 24GB int4"          # reads every model of the knowledge


def test_with_model_leaves_the_knowledge_as_it_was() -> None:
    kn = get_knowledge()
    before = dict(kn.models)
    model = read(CONFIG, kn)
    view = with_model(kn, model)
    assert view.models[model["id"]] is model and model["id"] not in kn.models
    assert kn.models == before and view.gpus is kn.gpus
    assert vocab_of(view) is not vocab_of(kn)
    assert ("model", model["id"]) in vocab_of(view).table.values()
    assert ("model", model["id"]) not in vocab_of(kn).table.values()
    assert view.derived.gpu_columns is kn.derived.gpu_columns      # not read from the models


def test_a_config_model_is_never_visible_to_other_threads() -> None:
    kn = get_knowledge()
    model_id = read(CONFIG, kn)["id"]
    expected = ask(WITH_CONFIG, model_config=CONFIG).to_json()
    plain = ask(PLAIN).to_json()
    seen: list[str] = []
    wrong: list[str] = []
    done = threading.Event()

    def watch() -> None:                     # polls the shared models while the others answer
        while not done.is_set():
            if model_id in kn.models:
                seen.append(model_id)

    def with_config() -> None:
        for _ in range(6):
            if ask(WITH_CONFIG, model_config=CONFIG).to_json() != expected:
                wrong.append(WITH_CONFIG)

    def without() -> None:
        for _ in range(6):
            try:
                if ask(PLAIN).to_json() != plain:
                    wrong.append(PLAIN)
            except RuntimeError as exc:         # a dict changed size while a query read it
                wrong.append(f"{PLAIN}: {exc}")

    workers = [threading.Thread(target=f) for f in (with_config, with_config, without)]
    watcher = threading.Thread(target=watch)
    watcher.start()
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    done.set()
    watcher.join()
    assert not seen, f"the shared knowledge held {model_id} while a config answer ran"
    assert not wrong
    assert model_id not in kn.models
