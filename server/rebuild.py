"""Rebuild edited rules in a child process, so a serving process neither stalls nor grows.

In: a rules directory. Out: `rebuild(root)` → the Knowledge built from it, or RebuildFailed
with the rule errors (the dicts /api/health shows).

Building knowledge from YAML is seconds of CPU and, for a large edit, hundreds of MB at its
peak. Done inside a serving process it would hold the interpreter from the requests (the GIL)
and leave that process at its peak size after the build. Here a child process of lower
priority (nice 10) builds and checks the rules and writes the result as a snapshot's plain
data (kb.knowledge.snapshot.stored, written with marshal: values only, nothing that runs when
read) on its standard output; the serving process reads it and makes the Knowledge from it
(kb.knowledge.snapshot.from_data), a small fraction of the build. When the child exits, all it used goes back to the
system. The child is `python -m server.rebuild ROOT`; exit 0 with the data, 2 with the errors.
"""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kb.errors import KbError, RuleErrors
from kb.knowledge.data import Knowledge
from kb import STORED
from kb.knowledge.build import build
from kb.knowledge.snapshot import from_data, stored

CHILD_SECONDS = 600        # a build that takes longer than this is stopped and reported
NICENESS = 10              # the child yields the cores to the processes answering requests


class RebuildFailed(Exception):
    def __init__(self, errors: list[dict[str, Any]]) -> None:
        self.errors = errors
        super().__init__(errors[0]["message"] if errors else "the rebuild failed")


def rebuild(root: Path, offload: Callable[[Callable[[], Any]], Any] | None = None) -> Knowledge:
    """The knowledge of `root`, built in a child process; the data it sends is made into the
    Knowledge through `offload(fn)` when given (a thread of the server's pool)."""
    try:
        done = subprocess.run([sys.executable, "-m", "server.rebuild", os.fspath(root)],
                              capture_output=True, timeout=CHILD_SECONDS, check=False,
                              env={**os.environ, "KBQ_NO_CACHE": "1"})
    except subprocess.TimeoutExpired:
        raise RebuildFailed([{"message": f"building the rules took over {CHILD_SECONDS} s"}]) from None
    try:
        kind, value = marshal.loads(done.stdout)
    except (ValueError, EOFError, TypeError):
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
        raise RebuildFailed([{"message": f"the rules rebuild exited with {done.returncode}"
                                         + (f": {tail[0]}" if tail else "")}]) from None
    if kind != "knowledge":
        raise RebuildFailed(value)
    def make() -> Knowledge:
        return from_data(value, root)

    return make() if offload is None else offload(make)


def error_dicts(err: Exception) -> list[dict[str, Any]]:
    """Rule errors as the dicts /api/health shows (file, line, column, message…)."""
    if isinstance(err, RuleErrors):
        return [e.to_dict() for e in err.errors]
    if isinstance(err, KbError):
        return [err.to_dict()]
    return [{"message": f"{type(err).__name__}: {err}"}]


def _child(root: str) -> int:
    try:
        os.nice(NICENESS)
    except OSError:
        pass
    try:
        out: tuple[str, Any] = ("knowledge", stored(build(root), STORED))
        code = 0
    except Exception as err:  # noqa: BLE001 - every failure is reported as rule errors
        out, code = ("errors", error_dicts(err)), 2
    sys.stdout.buffer.write(marshal.dumps(out))
    sys.stdout.buffer.flush()
    return code


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))
