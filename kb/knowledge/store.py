"""Load the knowledge once: rules directory → validated Knowledge.

In: a rules directory (default kb.paths.rules_dir()). Out: Knowledge, or RuleErrors; and
LOADED, the process's knowledge per rules directory, each loaded on first use.
This is the one place that reads rules/ for an answer; it goes through the snapshot
(kb.knowledge.snapshot) so a plain query does not re-validate unchanged YAML.
"""

from __future__ import annotations

import os
from _thread import allocate_lock       # threading.Lock, without importing threading
from typing import TYPE_CHECKING

from kb.knowledge.data import Knowledge
from kb.paths import rules_root
from kb.knowledge.snapshot import load_or_build

if TYPE_CHECKING:
    from pathlib import Path

    from kb.knowledge.snapshot import Stored


def load_knowledge(root: str | Path | None = None, stored: Stored | None = None) -> Knowledge:
    return load_or_build(os.path.realpath(root if root is not None else rules_root()), stored)


class KnowledgeCache:
    """Knowledge per rules directory, each loaded once. Loading is serialised by a lock, so
    threads asking at once share one load; a Knowledge is never changed after it is built."""

    def __init__(self) -> None:
        self._loaded: dict[str, Knowledge] = {}
        self._lock = allocate_lock()

    def get(self, root: str | Path | None = None, stored: Stored | None = None) -> Knowledge:
        """`stored`: what a saved snapshot keeps of the later stages' tables (load_or_build)."""
        key = str(root) if root is not None else ""
        found = self._loaded.get(key)
        if found is None:
            with self._lock:
                found = self._loaded.get(key)
                if found is None:
                    found = self._loaded[key] = load_knowledge(root, stored)
        return found

    def priced(self, root: str | Path | None, prices: str | Path, stored: Stored | None = None) -> Knowledge:
        """The knowledge of `root` with another price file (kb.knowledge.prices.with_prices), built once
        per file."""
        from pathlib import Path           # a price file given: pathlib is off a plain query's path

        from kb.knowledge.prices import with_prices

        key = f"{root or ''}\0prices:{prices}"
        found = self._loaded.get(key)
        if found is None:
            base = self.get(root, stored)
            with self._lock:
                found = self._loaded.get(key)
                if found is None:
                    found = self._loaded[key] = with_prices(base, Path(prices))
        return found

    def clear(self) -> None:
        """Forget every loaded knowledge (the next get loads again)."""
        with self._lock:
            self._loaded.clear()


LOADED = KnowledgeCache()
