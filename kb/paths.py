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


MAX_FILE_BYTES = 4_000_000      # a rule file, a config.json, a batch line: read no more than this

# The rule files the knowledge is built from: no other file under a rules directory is read.
REQUIRED_RULE_FILES = ("sources", "precisions", "gpus", "models", "formulas", "query", "runtimes")
OPTIONAL_RULE_FILES = ("error_bands", "prices")


def rule_files(root: Path) -> list[Path]:
    """The rule files of `root` that exist: the named top-level files (REQUIRED_RULE_FILES,
    OPTIONAL_RULE_FILES) and flows/*.yaml. Never a walk of the tree, so `--rules /` or a stray
    YAML file beside the rules costs nothing."""
    found = [p for name in REQUIRED_RULE_FILES + OPTIONAL_RULE_FILES
             if (p := root / f"{name}.yaml").is_file()]
    flows = root / "flows"
    if flows.is_dir():
        found += sorted(p for p in flows.glob("*.yaml") if p.is_file())
    return found
