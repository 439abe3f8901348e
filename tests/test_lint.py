"""kb/ and server/ pass ruff as pyproject.toml configures it: pyflakes, pycodestyle, bugbear, and
a McCabe complexity of at most 15 a function (C901). Complexity, not length, is what is capped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_kb_and_server_are_clean() -> None:
    r = ruff("kb", "server")
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_function_over_the_complexity_limit_is_reported(tmp_path: Path) -> None:
    """The check above can fail: a function of 16 ifs (complexity 17), checked with the project's own
    settings, is reported as C901."""
    body = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(16))
    (tmp_path / "branchy.py").write_text(f"def branchy(x: int) -> int:\n{body}\n    return -1\n")
    r = ruff("--config", str(ROOT / "pyproject.toml"), str(tmp_path / "branchy.py"))
    assert r.returncode == 1 and "C901" in r.stdout and "(17 > 15)" in r.stdout, r.stdout
