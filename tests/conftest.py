"""Shared fixtures: the Flask app and its test client, and a real `kbq serve` on 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from server import create_app


@pytest.fixture
def app():
    return create_app()


@pytest.fixture
def client(app):
    return app.test_client()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve_command(port: int) -> list[str]:
    kbq = shutil.which("kbq")
    base = [kbq] if kbq else [sys.executable, "-m", "kb.cli"]
    return [*base, "serve", "--host", "127.0.0.1", "--port", str(port)]


@pytest.fixture(scope="session")
def live_server() -> Iterator[str]:
    """The installed `kbq serve` on a free port; yields its base URL, stops it afterwards."""
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "serve.log"
        with open(log_path, "w+b") as log:
            proc = subprocess.Popen(_serve_command(port), stdout=log, stderr=subprocess.STDOUT,
                                    cwd=tmp, env={**os.environ, "PYTHONUNBUFFERED": "1"})
            try:
                _wait_until_up(base, proc, log_path)
                yield base
            finally:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)


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
