"""Load the knowledge once: rules directory → validated Knowledge.

In: a rules directory (default kb.paths.rules_dir()). Out: Knowledge, or RuleErrors.
This is the one place that reads rules/ for an answer; it goes through the snapshot
(kb.snapshot) so a plain query does not re-validate unchanged YAML.
"""

from __future__ import annotations

from pathlib import Path

from kb.model import Knowledge
from kb.paths import rules_dir
from kb.snapshot import load_or_build


def load_knowledge(root: Path | None = None) -> Knowledge:
    return load_or_build((root if root is not None else rules_dir()).resolve())
