"""The library stays typed: few `Any` in kb/, and mypy (strict, as pyproject.toml sets it)
finds nothing in kb/ and server/.

`Any` switches the type checker off for a value; the engine's records and the answer's parts
have TypedDicts (kb.knowledge.records, kb.knowledge.records_rules, kb.engine.answer_records) so that most code does
without it.
"""

from __future__ import annotations

import re
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
MAX_ANY = 90        # occurrences of the word Any in kb/, comments included


def any_count(root: Path = ROOT) -> dict[str, int]:
    out: dict[str, int] = {}
    for path in sorted((root / "kb").rglob("*.py")):
        n = len(re.findall(r"\bAny\b", path.read_text(encoding="utf-8")))
        if n:
            out[str(path.relative_to(root))] = n
    return out


def test_any_is_rare_in_kb() -> None:
    counts = any_count()
    worst = sorted(counts.items(), key=lambda kv: -kv[1])[:8]
    assert sum(counts.values()) <= MAX_ANY, f"{sum(counts.values())} Any in kb/ (most in {worst})"


def test_the_count_sees_an_any(tmp_path: Path) -> None:
    """any_count, the function the limit above runs, counts the word in every module of a tree
    (nested packages too), not parts of other words (Anything, AnyStr)."""
    (tmp_path / "kb" / "sub").mkdir(parents=True)
    (tmp_path / "kb" / "a.py").write_text("from typing import Any\nx: dict[str, Any] = {}  # Anything\n")
    (tmp_path / "kb" / "sub" / "b.py").write_text("y: AnyStr\nz: Any\n")
    (tmp_path / "kb" / "c.py").write_text("no typing here\n")
    assert any_count(tmp_path) == {"kb/a.py": 2, "kb/sub/b.py": 1}


def test_mypy_reads_every_library_typed() -> None:
    """No ignore_missing_imports: a library without type hints (PyYAML, networkx, gunicorn, gevent) is
    read from its stub package (the test extras), not taken as Any."""
    import tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert conf["strict"] is True and "ignore_missing_imports" not in conf
    for override in conf.get("overrides", []):
        assert "ignore_missing_imports" not in override, override


def test_mypy_strict_is_clean() -> None:
    from mypy import api
    stdout, stderr, status = api.run(["--config-file", str(ROOT / "pyproject.toml"),
                                      "--cache-dir", str(ROOT / ".mypy_cache"),
                                      str(ROOT / "kb"), str(ROOT / "server")])
    assert status == 0, stdout + stderr
