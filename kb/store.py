"""Load the knowledge once: rules directory → validated Knowledge.

In: a rules directory (default kb.paths.rules_dir()). Out: Knowledge, or RuleErrors.
This is the one place that reads rules/ for an answer.
"""

from __future__ import annotations

from pathlib import Path

from kb.knowledge import Knowledge, build
from kb.paths import rules_dir


def load_knowledge(root: Path | None = None) -> Knowledge:
    return build(root if root is not None else rules_dir())
