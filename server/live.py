"""The knowledge the server answers from, rebuilt when the rule files change.

In: a rules directory (config KBQ_RULES) or nothing (the shipped rules, loaded once).
Out: `LiveKnowledge.get()` → the last Knowledge that validated; `.status()` → when it was
loaded and the errors of the newest files if they do not validate.

With a rules directory, each request may stat the rule files, at most once per
`interval` seconds; when a file was added, removed or changed, the knowledge is rebuilt. New files
that do not validate leave the last good knowledge in place and their errors in `.errors`.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kb.errors import KbError, RuleErrors
from kb.knowledge import Knowledge, build

Fingerprint = tuple[tuple[str, int, int], ...]


class NoKnowledge(Exception):
    """The rule files have never validated, so there is nothing to answer from."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        self.errors = errors
        super().__init__("the rule files do not validate")


def fingerprint(root: Path) -> Fingerprint:
    """Name, mtime and size of every rule file under root: any edit changes it."""
    files = sorted(p for p in root.rglob("*.yaml") if p.is_file())
    out = []
    for p in files:
        try:
            st = p.stat()
        except OSError:           # removed between the listing and the stat
            continue
        out.append((p.relative_to(root).as_posix(), st.st_mtime_ns, st.st_size))
    return tuple(out)


def error_dicts(err: Exception) -> list[dict[str, Any]]:
    if isinstance(err, RuleErrors):
        return [e.to_dict() for e in err.errors]
    if isinstance(err, KbError):
        return [err.to_dict()]
    return [{"message": f"{type(err).__name__}: {err}"}]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class LiveKnowledge:
    def __init__(self, rules_dir: str | Path | None, interval: float = 1.0) -> None:
        self.root = Path(rules_dir).expanduser().resolve() if rules_dir else None
        self.interval = interval
        self.knowledge: Knowledge | None = None
        self.loaded_at: str | None = None
        self.errors: list[dict[str, Any]] = []
        self._seen: Fingerprint | None = None
        self._checked = float("-inf")
        self._lock = threading.Lock()

    def get(self) -> Knowledge:
        """The knowledge to answer from; raises NoKnowledge if the rules never validated."""
        if self.root is None:
            if self.knowledge is None:
                from kb import get_knowledge

                self.knowledge = get_knowledge()
                self.loaded_at = _now()
            return self.knowledge
        if time.monotonic() - self._checked >= self.interval or self.knowledge is None:
            with self._lock:
                if time.monotonic() - self._checked >= self.interval or self.knowledge is None:
                    self._refresh()
        if self.knowledge is None:
            raise NoKnowledge(self.errors)
        return self.knowledge

    def _refresh(self) -> None:
        if self.root is None:
            return
        self._checked = time.monotonic()
        seen = fingerprint(self.root)
        if seen == self._seen:
            return
        self._seen = seen
        try:
            fresh = build(self.root)
        except Exception as err:  # noqa: BLE001 - any failure keeps the last good knowledge
            self.errors = error_dicts(err)
            return
        self._forget_vocabulary(self.knowledge)
        self.knowledge, self.loaded_at, self.errors = fresh, _now(), []

    @staticmethod
    def _forget_vocabulary(old: Knowledge | None) -> None:
        # kb.query caches each Knowledge's vocabulary under id(knowledge); drop the old entry
        # before the old object can be freed, so a new Knowledge never inherits it.
        if old is not None:
            from kb import query

            getattr(query, "_vocab_cache", {}).pop(id(old), None)

    def answer(self, query: str) -> dict[str, Any]:
        """The Answer dict for a query (the `kbq --json` contract); raises KbError."""
        from kb.engine import answer
        from kb.query import parse

        kn = self.get()
        return answer(parse(query, kn), kn, query).to_dict()

    def status(self) -> dict[str, Any]:
        try:
            self.get()
        except NoKnowledge:
            pass
        return {"source": "directory" if self.root else "shipped",
                "loaded_at": self.loaded_at, "errors": self.errors}
