"""Where the knowledge lives: the `rules/` and `grammar/` directories.

In: nothing (or the KBQ_RULES / KBQ_GRAMMAR environment variables).
Out: the paths of the rules and grammar directories, from an installed wheel
(`kb/_data/…`) or from a source checkout (the repository root), as strings (`rules_root`,
`rule_file_names`) or as Paths (`rules_dir`, `rule_files`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

_PACKAGE = os.path.dirname(os.path.realpath(__file__))


def _find(name: str, env: str) -> str:
    override = os.environ.get(env)
    if override:
        return os.path.realpath(os.path.expanduser(override))
    for candidate in (os.path.join(_PACKAGE, "_data", name), os.path.join(os.path.dirname(_PACKAGE), name)):
        if os.path.isdir(candidate):
            return candidate
    return os.path.join(os.path.dirname(_PACKAGE), name)


def rules_root() -> str:
    """The directory that holds gpus.yaml, models.yaml, formulas.yaml, flows/…"""
    return _find("rules", "KBQ_RULES")


def grammar_root() -> str:
    """The directory that holds query.lark and expr.lark."""
    return _find("grammar", "KBQ_GRAMMAR")


def rules_dir() -> Path:
    """rules_root() as a Path."""
    from pathlib import Path            # pathlib (with urllib.parse) is off a plain query's path

    return Path(rules_root())


def grammar_dir() -> Path:
    """grammar_root() as a Path."""
    from pathlib import Path

    return Path(grammar_root())


MAX_FILE_BYTES = 4_000_000      # a rule file, a config.json, a batch line: read no more than this
# A name, wherever it enters: an id, name, alias or family in the rules, a word of query.yaml, a
# formula's name, a config.json's model_type, _name_or_path or architectures, a word of a query.
# The longest shipped is 59 characters; a Hugging Face repository id is at most 96 + 1 + 96.
MAX_NAME_CHARS = 200

# The rule files the knowledge is built from: no other file under a rules directory is read.
REQUIRED_RULE_FILES = ("sources", "precisions", "gpus", "models", "formulas", "query", "runtimes")
OPTIONAL_RULE_FILES = ("error_bands", "prices")


def _names(directory: str, suffix: str) -> list[str]:
    """The entries of `directory` whose name ends with `suffix` (as a `*suffix` glob), sorted."""
    try:
        return sorted(os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(suffix))
    except OSError:
        return []


def rule_file_names(root: str) -> list[str]:
    """The rule files of `root` that exist: the named top-level files (REQUIRED_RULE_FILES,
    OPTIONAL_RULE_FILES) and flows/*.yaml. Never a walk of the tree, so `--rules /` or a stray
    YAML file beside the rules costs nothing."""
    found = [p for name in REQUIRED_RULE_FILES + OPTIONAL_RULE_FILES
             if os.path.isfile(p := os.path.join(root, f"{name}.yaml"))]
    return found + [p for p in _names(os.path.join(root, "flows"), ".yaml") if os.path.isfile(p)]


def rule_files(root: Path) -> list[Path]:
    """rule_file_names(root) as Paths."""
    from pathlib import Path

    return [Path(p) for p in rule_file_names(os.fspath(root))]


def grammar_file_names() -> list[str]:
    """The grammars, grammar/*.lark."""
    return _names(grammar_root(), ".lark")


def cache_dir() -> str | None:
    """Where kbq keeps what it computes once (the knowledge snapshot): $KBQ_CACHE_DIR, else
    $XDG_CACHE_HOME/kbq, else ~/.cache/kbq; None when KBQ_NO_CACHE is set."""
    if os.environ.get("KBQ_NO_CACHE"):
        return None
    base = os.environ.get("KBQ_CACHE_DIR")
    if base:
        return base
    xdg = os.environ.get("XDG_CACHE_HOME")
    return os.path.join(xdg if xdg else os.path.join(os.path.expanduser("~"), ".cache"), "kbq")
