"""Where the knowledge lives: the `rules/` and `grammar/` directories.

In: nothing (or the KBQ_RULES / KBQ_GRAMMAR environment variables).
Out: the paths of the rules and grammar directories, from an installed wheel
(`kb/_data/…`) or from a source checkout (the repository root).
"""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _find(name: str, env: str) -> Path:
    override = os.environ.get(env)
    if override:
        return Path(override).expanduser().resolve()
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    return _PACKAGE.parent / name


def rules_dir() -> Path:
    """The directory that holds gpus.yaml, models.yaml, formulas.yaml, flows/…"""
    return _find("rules", "KBQ_RULES")


def grammar_dir() -> Path:
    """The directory that holds query.lark and expr.lark."""
    return _find("grammar", "KBQ_GRAMMAR")
