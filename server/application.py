"""gunicorn's arbiter running the kbq app: gunicorn's documented custom-application interface.

In: the loaded Flask app, gunicorn settings (server.serving.settings) and a function to call once
the arbiter is ready. Out: `.run()` supervises the workers until SIGTERM or SIGINT, then returns
through SystemExit(0) after the requests in flight were finished.

gunicorn stops at once on SIGINT (its "quick shutdown"); `kbq serve` is stopped with Ctrl-C as
often as with SIGTERM, so here SIGINT drains the requests in flight as SIGTERM does. SIGQUIT
keeps its quick shutdown.

A worker is forked with the stop signals (STOP_SIGNALS) blocked, and unblocks them once its own
handlers are in place (server.worker.KbqWorker.init_signals): a stop signal that reaches a
worker while it is still starting waits for those handlers instead of reaching the arbiter's,
which a worker inherits from the fork and which do nothing there (a SIGTERM right after start
was lost: the worker served on until the graceful timeout killed it). A stop that had to kill a
worker after the graceful timeout exits 1.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.arbiter import Arbiter


STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGQUIT}


class KbqArbiter(Arbiter):
    def handle_int(self) -> None:
        """Ctrl-C: the graceful stop of SIGTERM."""
        self.handle_term()

    killed = 0                              # workers a stop had to kill (SIGKILL)

    def kill_workers(self, sig: int) -> None:
        """gunicorn's kill_workers, counting the workers still there when a stop's graceful
        timeout has run out and they are killed."""
        if sig == signal.SIGKILL:
            self.killed += len(self.WORKERS)
        super().kill_workers(sig)

    def halt(self, reason: str | None = None, exit_status: int = 0) -> None:
        """gunicorn's halt, but exit 1 when a worker had to be killed: its requests in flight
        were cut, and a supervisor should hear of it (gunicorn exits 0)."""
        try:
            super().halt(reason, exit_status)
        except SystemExit as stop:
            if self.killed and not stop.code:
                if self.log is not None:
                    self.log.error("%d worker(s) did not stop within the graceful timeout and "
                                   "were killed", self.killed)
                raise SystemExit(1) from None
            raise

    def spawn_worker(self) -> int:
        """gunicorn's spawn_worker, with the stop signals blocked across the fork: in the arbiter
        until the fork returns, in the worker until its handlers are installed."""
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            return super().spawn_worker()
        finally:
            if os.getpid() == self.pid:     # the arbiter (a worker never returns here but to exit)
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


class KbqApplication(BaseApplication):
    def __init__(self, app: Any, options: dict[str, Any], ready: Callable[[], None]) -> None:
        self.application, self.options, self.ready = app, options, ready
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)
        self.cfg.set("when_ready", lambda arbiter: self.ready())

    def load(self) -> Any:
        return self.application

    def run(self) -> None:
        KbqArbiter(self).run()
