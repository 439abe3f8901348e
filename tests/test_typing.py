"""The library stays typed: mypy (strict, as pyproject.toml sets it) finds nothing in kb/ and
server/, and reads every library from its own hints or stubs.
"""

from __future__ import annotations

from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent


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
