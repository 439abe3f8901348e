"""What the `kbq export` tests share: the installed console script and an export into a directory,
read back as bytes by relative path, and the rows of a Markdown table."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from kb.paths import rules_dir

RULES = rules_dir()


def kbq(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The installed console script, as a user runs it."""
    return subprocess.run(["kbq", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})}, check=False)


def export(out: Path, *extra: str, env: dict[str, str] | None = None) -> dict[str, bytes]:
    result = kbq("export", "--format", "markdown", "--out", str(out), *extra, env=env)
    assert result.returncode == 0, result.stderr
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file()}


def table_rows(text: str, first_header: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows
