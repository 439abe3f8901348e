"""Shared fixtures: the Flask app and its test client, and a real `kbq serve` on 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from server import create_app

if TYPE_CHECKING:
    from kb.knowledge.build import Knowledge

# The suite never reaches the Hugging Face Hub: a query naming a Hub id the catalogue lacks reads
# the local cache only (tests/test_hub_model.py fills one; a test that means otherwise says so).
# Set before anything imports huggingface_hub, which reads it once; kbq's child processes inherit it.
os.environ["HF_HUB_OFFLINE"] = "1"


@pytest.fixture
def app():
    return create_app()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture(scope="module")
def kn() -> Knowledge:
    """The shipped rules, built (the `kbq export` tests)."""
    from kb.knowledge.build import build
    from kb.paths import rules_dir

    return build(rules_dir())


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The wiki `kbq export --format markdown` writes: relative path → text."""
    from export_common import export

    files = export(tmp_path_factory.mktemp("wiki"))
    return {k: v.decode("utf-8") for k, v in files.items()}


@pytest.fixture
def rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the shipped rules in tmp_path/rules; the working directory is tmp_path and
    the knowledge snapshot cache goes there too (tests/test_rules_harm*.py)."""
    from kb.paths import rules_dir

    root = tmp_path / "rules"
    shutil.copytree(rules_dir(), root)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KBQ_CACHE_DIR", str(tmp_path / "cache"))
    return root


@pytest.fixture
def rules_copy(tmp_path: Path) -> Path:
    """A copy of the shipped rules to edit (live-rules tests)."""
    from kb.paths import rules_dir

    root = tmp_path / "rules"
    shutil.copytree(rules_dir(), root)
    return root


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def kbq_installed() -> None:
    """Suites that run the installed console script fail, never skip, without it."""
    if shutil.which("kbq") is None:
        pytest.fail("the kbq console script is not installed (pip install -e .)")


def _serve_command(port: int, *args: str) -> list[str]:
    kbq = shutil.which("kbq")
    if kbq is None:
        pytest.fail("the kbq console script is not installed (pip install -e .)")
    return [kbq, "serve", "--host", "127.0.0.1", "--port", str(port), *args]


class Served:
    """A `kbq serve` child process: its base URL, its process, and what it printed."""

    def __init__(self, args: tuple[str, ...], tmp: Path, **popen: object) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp / "serve.log"
        self._log = open(self.log_path, "w+b")   # closed in stop()
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **popen.pop("env", {})}  # type: ignore[dict-item]
        self.proc = subprocess.Popen(_serve_command(self.port, *args), stdout=self._log,
                                     stderr=subprocess.STDOUT, cwd=tmp, env=env, **popen)
        try:
            _wait_until_up(self.base, self.proc, self.log_path)
        except BaseException:
            self.stop()
            raise

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._log.close()


@pytest.fixture(scope="session")
def live_server() -> Iterator[str]:
    """The installed `kbq serve` on a free port; yields its base URL, stops it afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        served = Served((), Path(tmp))
        try:
            yield served.base
        finally:
            served.stop()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    """Start `kbq serve ARGS…` on a free port (each call its own); all are stopped afterwards."""
    started: list[Served] = []

    def start(*args: str, **popen: object) -> Served:
        folder = tmp_path / f"serve{len(started)}"
        folder.mkdir()
        started.append(Served(args, folder, **popen))
        return started[-1]

    yield start
    for served in started:
        served.stop()


def _wait_until_up(base: str, proc: subprocess.Popen, log_path: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"kbq serve exited with {proc.returncode}:\n{log_path.read_text()}")
        try:
            with urllib.request.urlopen(base + "/api/health", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.1)
    pytest.fail(f"kbq serve did not answer within {timeout} s:\n{log_path.read_text()}")


# ---------------------------------------------------------------- a real browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def unavailable(reason: str) -> None:
    """Skip a browser test for want of a tool, but fail under CI=true, where they must run."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: browser tests must run)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser():
    """Debian's headless Chromium through Playwright (no browser download), one per session."""
    if not Path(CHROMIUM).exists():
        unavailable(f"{CHROMIUM} is missing: apt-get install chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()
