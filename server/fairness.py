"""Who computes next: admission of the answers that must be computed, per server process.

In: the work of one answer (a function giving its bytes), the address of the client that asked
and its connection. Out: the bytes, computed when both a slot of this process and a slot of that
client are free, on a thread of their own (so the process keeps reading requests and answering
/api/health, static files and cached answers meanwhile); or ClientGone, without computing, when
the client closed its connection before its turn came.

Only answers not already in the answer cache come here (server.answer_cache): whatever is
cheap never waits behind them. Limits, per process:
- `slots` answers are computed at once (`kbq serve --threads`);
- one address has at most `per_client` of them computing; its further questions wait their turn
  in order, so a client that opens many connections gets no more than one that opens one;
- each computation runs under a work budget (kb.engine.search.budget, probes of the capacity searches,
  counted: the same question stops at the same place, so its answer may be kept) and a time
  budget (CPU seconds, the guard for the rest): the costliest searches stop when either is spent
  and the answer says what they did not finish.

Outside a server (the Flask test client, a script) the work runs on the calling thread. The
server's worker (server.worker) installs a pool of threads and gevent's semaphores after it
forks, with `use(...)`.
"""

from __future__ import annotations

import _socket
import select
import socket
import threading
from collections import deque
from collections.abc import Callable
from contextvars import copy_context
from typing import Any, TypeVar

from werkzeug.exceptions import HTTPException

from kb.engine.search.budget import Budget, within

T = TypeVar("T")
POLL_SECONDS = 0.25        # how often a waiting request looks whether its client is still there


class ClientGone(HTTPException):
    """The client closed its connection before its answer was started; nothing was computed."""

    code = 499
    description = "the client closed the connection before its answer was started"


_poll = getattr(select, "poll", None)          # taken before an event loop replaces it
RDHUP = getattr(select, "POLLRDHUP", 0)           # Linux: the peer shut its side, data or not


def gone(sock: Any) -> bool:
    """Whether the peer of a connected socket has closed it: on Linux, its end of stream has
    arrived even if a request before it is still unread; elsewhere, an end of stream is the next
    thing to read. The connection was reset: gone too. A pipelined request waiting to be read is
    not a close. Never blocks."""
    if sock is None:
        return False
    try:
        fd = sock.fileno()
    except OSError:
        return True
    if fd < 0:
        return True
    if _poll is not None and RDHUP:
        poller = _poll()
        poller.register(fd, select.POLLIN | RDHUP)
        events = poller.poll(0)
        return bool(events and events[0][1] & (RDHUP | select.POLLHUP | select.POLLERR))
    probe = _socket.socket(fileno=fd)        # the C socket: no event loop's wrapper, no blocking
    try:
        return probe.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        probe.detach()


def readable(sock: Any) -> bool:
    """Whether bytes (a request) wait to be read on a connected socket. Never blocks."""
    if _poll is None:
        return False
    try:
        fd = sock.fileno()
    except OSError:
        return False
    poller = _poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


def _raised_in_caller(offload: Callable[[Callable[[], Any]], Any]) -> Callable[[Callable[[], Any]], Any]:
    """`offload`, with the work's exception handed back as a value and raised by the caller."""

    def run(fn: Callable[[], T]) -> T:
        def caught() -> tuple[bool, Any]:
            try:
                return True, fn()
            except Exception as err:  # noqa: BLE001 - raised again below, in the caller
                return False, err

        ok, value = offload(caught)
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    return run


class Gate:
    def __init__(self, slots: int = 2, per_client: int = 1, budget_s: float | None = None,
                 probes: int | None = None) -> None:
        self.slots, self.per_client, self.budget_s = max(1, slots), max(1, per_client), budget_s
        self.probes = probes
        self._event: Callable[[], Any] = threading.Event
        self._offload: Callable[[Callable[[], Any]], Any] | None = None
        self._lock = threading.Lock()
        self._running = 0
        self._clients: dict[str, list[Any]] = {}   # address → [answers computing, its waiting turns]
        self.computed = 0
        self.dropped = 0

    def use(self, event: Callable[[], Any], offload: Callable[[Callable[[], Any]], Any]) -> None:
        """Wait on `event()` objects (gevent's, in a worker) and run the work through `offload(fn)`
        (a pool of threads). An exception of the work (a query the parser cannot read is one) is
        raised again in the caller, never left to the pool: gevent's pool prints the traceback
        of an exception it sees, ~3 KB on stderr for every unreadable query."""
        self._event, self._offload = event, _raised_in_caller(offload)

    def run(self, work: Callable[[], T], client: str = "", sock: Any = None) -> tuple[T, Budget | None]:
        """work() once this client's turn has come; its result and the budget it ran under."""
        self._enter(client, sock)
        try:
            if gone(sock):
                raise ClientGone()
            self.computed += 1
            return self._compute(work)
        except ClientGone:
            self.dropped += 1
            raise
        finally:
            self._leave(client)

    def _enter(self, client: str, sock: Any) -> None:
        """Take a slot: at once if one is free and the client is under its limit, else in turn.
        Turns go round the clients (the one served longest ago first), each client's in order."""
        with self._lock:
            entry = self._clients.setdefault(client, [0, deque()])
            if self._running < self.slots and entry[0] < self.per_client and not entry[1]:
                self._take(client, entry)
                return
            turn = self._event()
            entry[1].append(turn)
        while not turn.wait(POLL_SECONDS):
            if gone(sock):
                with self._lock:
                    if not turn.is_set():          # not given meanwhile: give it up
                        entry[1].remove(turn)
                        self._forget(client, entry)
                        self.dropped += 1
                        raise ClientGone()
                break

    def _take(self, client: str, entry: list[Any]) -> None:
        self._running += 1
        entry[0] += 1
        self._clients[client] = self._clients.pop(client)     # to the end of the round

    def _leave(self, client: str) -> None:
        with self._lock:
            self._running -= 1
            entry = self._clients[client]
            entry[0] -= 1
            self._forget(client, entry)
            for name, other in list(self._clients.items()):   # the round, from the longest waiting
                if self._running >= self.slots:
                    break
                if other[1] and other[0] < self.per_client:
                    self._take(name, other)
                    other[1].popleft().set()

    def _forget(self, client: str, entry: list[Any]) -> None:
        if entry[0] == 0 and not entry[1]:
            self._clients.pop(client, None)

    def waiting(self) -> int:
        return sum(len(e[1]) for e in self._clients.values())

    def _compute(self, work: Callable[[], T]) -> tuple[T, Budget | None]:
        def budgeted() -> tuple[T, Budget | None]:
            with within(self.budget_s, self.probes) as budget:
                return work(), budget

        if self._offload is None:
            return budgeted()
        context = copy_context()          # the request's context (Flask's) goes with the work
        return self._offload(lambda: context.run(budgeted))  # type: ignore[no-any-return]

    def offload(self, fn: Callable[[], T]) -> T:
        """fn() on the pool's thread when the server installed one, else here."""
        return fn() if self._offload is None else self._offload(fn)

    def stats(self) -> dict[str, int]:
        return {"slots": self.slots, "per_client": self.per_client, "computed": self.computed,
                "dropped": self.dropped, "waiting": self.waiting()}
