"""The server's answer cache (server.answer_cache): an answer given once is given again from
memory while the same knowledge is served, within a byte budget, least recently used first out."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request

from server.answer_cache import AnswerCache


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, body: bytes) -> bytes:
        self.calls += 1
        return body


def test_an_answer_is_computed_once_while_the_knowledge_is_the_same() -> None:
    cache, kn, made = AnswerCache(1000), object(), Counter()
    assert cache.get(kn, "q", lambda: made(b"answer")) == b"answer"
    assert cache.get(kn, "q", lambda: made(b"other")) == b"answer"
    assert made.calls == 1
    assert (cache.hits, cache.misses) == (1, 1)


def test_new_knowledge_empties_the_cache() -> None:
    cache, made = AnswerCache(1000), Counter()
    cache.get(object(), "q", lambda: made(b"old rules"))
    assert cache.get(object(), "q", lambda: made(b"new rules")) == b"new rules"
    assert made.calls == 2
    assert cache.stats()["entries"] == 1


def test_the_byte_budget_drops_the_least_recently_used() -> None:
    cache, kn = AnswerCache(10), object()
    cache.get(kn, "a", lambda: b"aaaa")
    cache.get(kn, "b", lambda: b"bbbb")
    cache.get(kn, "a", lambda: b"xxxx")          # a is now the most recently used
    cache.get(kn, "c", lambda: b"cccc")          # 12 bytes > 10: b goes
    assert cache.stats()["bytes"] == 8
    made = Counter()
    assert cache.get(kn, "a", lambda: made(b"new")) == b"aaaa"
    assert cache.get(kn, "b", lambda: made(b"new")) == b"new"
    assert made.calls == 1


def test_an_answer_larger_than_the_budget_is_given_but_not_kept() -> None:
    cache, kn = AnswerCache(3), object()
    assert cache.get(kn, "q", lambda: b"four") == b"four"
    assert cache.stats()["entries"] == 0


def test_a_zero_budget_keeps_nothing() -> None:
    cache, kn, made = AnswerCache(0), object(), Counter()
    cache.get(kn, "q", lambda: made(b"x"))
    cache.get(kn, "q", lambda: made(b"x"))
    assert made.calls == 2


def _get(base: str, path: str) -> bytes:
    with urllib.request.urlopen(base + path, timeout=30) as r:
        return r.read()


def test_kbq_serve_gives_a_repeated_query_the_same_bytes_from_its_cache(serve) -> None:
    served = serve("--processes", "1")
    path = "/api/answer?q=" + urllib.parse.quote_plus("serve 70B int4 16 users")
    first, second = _get(served.base, path), _get(served.base, path)
    assert first == second
    assert json.loads(first)["query"] == "serve 70B int4 16 users"
    stats = json.loads(_get(served.base, "/api/health"))["answer_cache"]
    assert stats["hits"] >= 1 and stats["entries"] >= 1


def test_kbq_serve_cache_mb_0_turns_it_off(serve) -> None:
    served = serve("--processes", "1", "--cache-mb", "0")
    path = "/api/answer?q=" + urllib.parse.quote_plus("serve 70B int4 16 users")
    _get(served.base, path)
    _get(served.base, path)
    stats = json.loads(_get(served.base, "/api/health"))["answer_cache"]
    assert stats["hits"] == 0 and stats["entries"] == 0
