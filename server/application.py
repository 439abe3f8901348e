"""gunicorn's arbiter running the kbq app: gunicorn's documented custom-application interface.

In: the loaded Flask app, gunicorn settings (server.serving.settings) and a function to call once
the arbiter is ready. Out: `.run()` supervises the workers until SIGTERM or SIGINT, then returns
through SystemExit(0) after the requests in flight were finished.

gunicorn stops at once on SIGINT (its "quick shutdown"); `kbq serve` is stopped with Ctrl-C as
often as with SIGTERM, so here SIGINT drains the requests in flight as SIGTERM does. SIGQUIT
keeps its quick shutdown.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.arbiter import Arbiter


class KbqArbiter(Arbiter):
    def handle_int(self) -> None:
        """Ctrl-C: the graceful stop of SIGTERM."""
        self.handle_term()


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
