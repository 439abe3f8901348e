"""A bounded cache of answers already given, per server process.

In: a key (the route's own: the query text and what was asked with it), the knowledge the
answer was computed from, and a function that computes the answer's bytes. Out: those bytes,
computed once while they stay in the cache.

An answer is a pure function of its query and the knowledge: the engine reads nothing else
(no clock, no randomness, no request headers). So the bytes of an answer given once can be given
again for as long as the same knowledge is served. When the knowledge changes (a rules edit under
`--rules`, swapped in by server.live) the cache is emptied before anything else is read from it.
What a key holds is capped by bytes (`kbq serve --cache-mb`); the least recently used answers go
first. Query errors are not kept: they are cheap, and the room is for answers.

`hits` and `misses` are exposed on /api/health, so a load test can say how much the cache served.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable


class AnswerCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(0, int(max_bytes))
        self.hits = 0
        self.misses = 0
        self._bytes = 0
        self._owner: object | None = None     # the knowledge the entries were computed from
        self._entries: OrderedDict[Hashable, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, knowledge: object, key: Hashable, compute: Callable[[], bytes],
            keep: Callable[[], bool] = lambda: True) -> bytes:
        """The cached bytes for `key` under `knowledge`, else compute() (stored when it fits and
        keep() says so after it)."""
        if self.max_bytes == 0:
            return compute()
        with self._lock:
            if self._owner is not knowledge:
                self._clear(knowledge)
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return found
            self.misses += 1
        body = compute()              # outside the lock: other threads keep answering
        with self._lock:
            if (self._owner is knowledge and len(body) <= self.max_bytes and key not in self._entries
                    and keep()):
                self._entries[key] = body
                self._bytes += len(body)
                while self._bytes > self.max_bytes:
                    _, old = self._entries.popitem(last=False)
                    self._bytes -= len(old)
        return body

    def _clear(self, knowledge: object) -> None:
        self._entries.clear()
        self._bytes = 0
        self._owner = knowledge

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"entries": len(self._entries), "bytes": self._bytes, "max_bytes": self.max_bytes,
                    "hits": self.hits, "misses": self.misses}
