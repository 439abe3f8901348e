"""The knowledge the server answers from, rebuilt when the rule files change.

In: a rules directory (config KBQ_RULES) or nothing (the shipped rules, loaded once).
Out: `LiveKnowledge.get()` → the last Knowledge that validated; `.status()` → when it was
loaded and the errors of the newest files if they do not validate.

With a rules directory, each request may stat the rule files (those the knowledge reads: the
named top-level files and flows/*.yaml, never the rest of the tree), at most once per `interval`
seconds; when one was added, removed or changed, the knowledge is rebuilt in a background
thread while requests go on being answered from the last good knowledge, which the new one
replaces in one assignment. New files that do not validate leave the last good knowledge in
place and their errors in `.errors` (logged once per change). Rules that have never validated
raise NoKnowledge (the server answers 503); the first build is waited for, and retried at most
once per interval.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from kb.knowledge.build import Knowledge, build
from kb.paths import rule_files
from server.answer_cache import AnswerCache
from server.fairness import Gate
from server.rebuild import RebuildFailed, error_dicts

Fingerprint = tuple[tuple[str, int, int], ...]
PAGE_BYTES = 16 * 1024 * 1024     # the knowledge's pages kept per process (the shipped rules' are ~0.7 MB)


class NoKnowledge(Exception):
    """The rule files have never validated, so there is nothing to answer from."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        self.errors = errors
        super().__init__("the rule files do not validate")


log = logging.getLogger("kbq.rules")




def fingerprint(root: Path) -> Fingerprint:
    """Name, mtime and size of every rule file: any edit changes it."""
    files = rule_files(root)
    out = []
    for p in files:
        try:
            st = p.stat()
        except OSError:           # removed between the listing and the stat
            continue
        out.append((p.relative_to(root).as_posix(), st.st_mtime_ns, st.st_size))
    return tuple(out)


class Proxies:
    """The proxies whose X-Forwarded-For is believed (gunicorn's `forwarded_allow_ips`: addresses
    and networks, or '*' for any); none unless configured, so a client cannot name itself."""

    def __init__(self, allowed: list[str] | str = "") -> None:
        import ipaddress

        items = allowed.split(",") if isinstance(allowed, str) else allowed
        items = [i.strip() for i in items if i.strip()]
        self.any = "*" in items
        self.networks = [ipaddress.ip_network(i) for i in items if i != "*"]

    def trusted(self, peer: str) -> bool:
        import ipaddress

        if self.any:
            return True
        if not self.networks:
            return False
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        return any(address in network for network in self.networks)


def client_of(environ: dict[str, Any], proxies: Proxies) -> str:
    """Who asked: the peer's address, or, from a configured proxy, the address the proxy put
    last in X-Forwarded-For (nginx: `proxy_set_header X-Forwarded-For $remote_addr`)."""
    peer = environ.get("REMOTE_ADDR") or ""
    forwarded = environ.get("HTTP_X_FORWARDED_FOR")
    if forwarded and proxies.trusted(peer):
        return forwarded.rsplit(",", 1)[-1].strip()[:64] or peer
    return peer


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class LiveKnowledge:
    def __init__(self, rules_dir: str | Path | None, interval: float = 1.0, cache_bytes: int = 0,
                 gate: Gate | None = None) -> None:
        self.root = Path(rules_dir).expanduser().resolve() if rules_dir else None
        self.interval = interval
        self.knowledge: Knowledge | None = None
        self.loaded_at: str | None = None
        self.errors: list[dict[str, Any]] = []
        self._seen: Fingerprint | None = None
        self._checked = float("-inf")
        self._lock = threading.Lock()
        self.cache = AnswerCache(cache_bytes)      # answers already given (server.answer_cache)
        self.pages = AnswerCache(PAGE_BYTES)       # the knowledge's own pages, built once for it
        self.gate = gate or Gate()                 # who computes next (server.fairness)
        self.proxies = Proxies()                   # whose X-Forwarded-For names the client
        self._builder: threading.Thread | None = None

    def get(self) -> Knowledge:
        """The knowledge to answer from; raises NoKnowledge if the rules never validated.
        A request that arrives while the first load is under way waits for it."""
        kn = self.knowledge
        if kn is not None and self.root is None:
            return kn
        if kn is None or time.monotonic() - self._checked >= self.interval:
            with self._lock:
                due = time.monotonic() - self._checked >= self.interval
                if due or (self.knowledge is None and not self.errors):
                    self._refresh()
        if self.knowledge is None:
            raise NoKnowledge(self.errors)
        return self.knowledge

    def _refresh(self) -> None:
        self._checked = time.monotonic()
        if self.root is None:                 # the shipped rules: load once, retry on failure
            from kb import get_knowledge

            try:
                self.knowledge, self.loaded_at, self.errors = get_knowledge(), _now(), []
            except Exception as err:  # noqa: BLE001 - reported on /api/health and /rules
                self.errors = error_dicts(err)
            return
        if self._builder is not None and self._builder.is_alive():
            return                            # a rebuild is under way; look again after it
        seen = fingerprint(self.root)
        if seen == self._seen:
            return
        self._seen = seen
        if self.knowledge is None:            # nothing to answer from yet: wait for the build
            self._build(self.root)
            return
        self._builder = threading.Thread(target=self._build, args=(self.root, True),
                                         name="kbq-rules-rebuild", daemon=True)
        self._builder.start()

    def _build(self, root: Path, child: bool = False) -> None:
        try:
            if child:
                from server.rebuild import rebuild

                fresh = rebuild(root, self.gate.offload)
            else:
                fresh = build(root)
        except Exception as err:  # noqa: BLE001 - any failure keeps the last good knowledge
            self.errors = err.errors if isinstance(err, RebuildFailed) else error_dicts(err)
            first = self.errors[0]["message"] if self.errors else ""
            log.error("the rule files do not validate (%d error(s); first: %s); serving the "
                      "last good knowledge", len(self.errors), first)
            return
        self.knowledge, self.loaded_at, self.errors = fresh, _now(), []

    def settle(self) -> None:
        """Wait for a rebuild under way (tests, and a server shutting down)."""
        builder = self._builder
        if builder is not None:
            builder.join()

    def answer(self, query: str, kn: Knowledge | None = None, *, sort: str | None = None,
               options: bool = False) -> dict[str, Any]:
        """The Answer dict for a query (the `kbq --json` contract, with `kbq --sort`,
        `--options`), from `kn` or the current knowledge; raises QueryError for a query it
        cannot read."""
        from kb import answer_in

        if kn is None:
            kn = self.get()
        return answer_in(kn, query, sort=sort, options=options).to_dict()

    def answer_bytes(self, query: str, dump: Callable[[Any], bytes], kn: Knowledge, *,
                     sort: str | None = None, options: bool = False) -> bytes:
        """The answer's JSON bytes, from the answer cache while the same knowledge is served."""
        return self.cached(kn, ("api", query, sort, options),
                           lambda: dump(self.answer(query, kn, sort=sort, options=options)))

    def cached(self, kn: Knowledge, key: Hashable, compute: Callable[[], bytes]) -> bytes:
        """The bytes kept for `key` under `kn`, else compute() when the gate lets this request's
        client compute (server.fairness); an answer its time budget cut short is not kept (one its
        probe budget cut is: that cut is the same every time)."""
        from flask import has_request_context, request

        environ = request.environ if has_request_context() else {}
        cut: list[bool] = []

        def gated() -> bytes:
            body, budget = self.gate.run(compute, client_of(environ, self.proxies), environ.get("gunicorn.socket"))
            cut.append(bool(budget and budget.cut))
            return body

        return self.cache.get(kn, key, gated, keep=lambda: not any(cut))

    def page(self, kn: Knowledge, key: Hashable, build: Callable[[], str]) -> bytes:
        """The bytes of a page that shows the knowledge alone (server.browse: /sources, /rules…):
        built once for `kn` and the rules banner it is shown with, on a thread of the pool (a
        300 KB page takes ~40 ms, which would hold the event loop), then given from memory as
        a cached answer is, until the knowledge changes."""
        from contextvars import copy_context

        context = copy_context()              # the request's context (Flask's) goes with the work
        full = (key, self.loaded_at, repr(self.degraded()))
        return self.pages.get(kn, full, lambda: self.gate.offload(lambda: context.run(build).encode()))

    def status(self) -> dict[str, Any]:
        try:
            self.get()
        except NoKnowledge:
            pass
        return {"source": "directory" if self.root else "shipped",
                "loaded_at": self.loaded_at, "errors": self.errors}

    def degraded(self) -> list[dict[str, Any]]:
        """The errors of newer rule files while an older knowledge is served, else []."""
        return self.errors if self.knowledge is not None else []
