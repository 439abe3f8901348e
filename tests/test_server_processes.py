"""`kbq serve` as several processes, over real HTTP on 127.0.0.1: every worker answers, each
reloads edited rules on its own, and SIGTERM or Ctrl-C stops them all without a traceback."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

from kb import ask, get_knowledge
from kb.paths import rules_dir

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="gunicorn needs fork (POSIX)")

QUERY = "serve 70B int4 16 users"
GPU_QUERY = "serve 7B fp16 on rtx 4090"


def get(base: str, path: str) -> tuple[int, dict]:
    """One request on a connection of its own, so the kernel may hand it to any worker."""
    url = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, json.loads(r.read())
    finally:
        conn.close()


def answering_processes(base: str, want: int, seconds: float = 20) -> dict[int, dict]:
    """The /api/health body of each process that answers, until `want` of them have."""
    seen: dict[int, dict] = {}
    deadline = time.monotonic() + seconds
    while len(seen) < want and time.monotonic() < deadline:
        status, body = get(base, "/api/health")
        assert status == 200
        seen[body["process"]] = body
    return seen


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def wait_gone(pids, seconds: float = 15) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


@needs_fork
def test_two_processes_both_answer(serve):
    served = serve("--processes", "2", "--threads", "2")
    assert served.output().startswith(
        f"kbq serving on {served.base}/  (2 processes x 2 threads; Ctrl-C to stop)")
    workers = answering_processes(served.base, 2)
    assert len(workers) == 2, f"only {list(workers)} answered"
    assert served.proc.pid not in workers          # the master only supervises
    expected = ask(QUERY).to_dict()
    for _ in range(6):   # answers, whichever process takes the connection
        status, body = get(served.base, "/api/answer?q=" + urllib.parse.quote_plus(QUERY))
        assert status == 200 and body == expected


@needs_fork
def test_sigterm_stops_every_process(serve):
    served = serve("--processes", "2", "--threads", "2")
    workers = list(answering_processes(served.base, 2))
    served.proc.send_signal(signal.SIGTERM)
    assert served.proc.wait(timeout=20) == 0
    assert wait_gone(workers) == []
    assert "Traceback" not in served.output()


@needs_fork
def test_ctrl_c_stops_every_process(serve):
    # a terminal's Ctrl-C sends SIGINT to the whole foreground process group
    served = serve("--processes", "2", "--threads", "2", start_new_session=True)
    workers = list(answering_processes(served.base, 2))
    os.killpg(served.proc.pid, signal.SIGINT)
    assert served.proc.wait(timeout=20) == 0
    assert wait_gone(workers) == []
    assert "Traceback" not in served.output()


@needs_fork
def test_each_process_reloads_edited_rules(serve, tmp_path):
    root = tmp_path / "rules"
    shutil.copytree(rules_dir(), root)
    served = serve("--processes", "2", "--threads", "2", "--rules", str(root))
    before = answering_processes(served.base, 2)
    assert len(before) == 2
    url = "/api/answer?q=" + urllib.parse.quote_plus(GPU_QUERY)
    name = get_knowledge().gpus["rtx-4090"]["name"]
    assert get(served.base, url)[1]["gpus"][0]["name"] == name

    time.sleep(1.1)        # loaded_at has whole seconds: the reload must show a later one
    path = root / "gpus.yaml"
    text = path.read_text(encoding="utf-8")
    at = text.index(name, text.index("id: rtx-4090"))
    path.write_text(text[:at] + "Edited RTX 4090" + text[at + len(name):], encoding="utf-8")

    reloaded: set[int] = set()
    deadline = time.monotonic() + 30
    while reloaded != set(before) and time.monotonic() < deadline:
        _, body = get(served.base, "/api/health")
        if body["rules"]["loaded_at"] != before[body["process"]]["rules"]["loaded_at"]:
            assert body["rules"]["errors"] == []
            reloaded.add(body["process"])
        time.sleep(0.05)
    assert reloaded == set(before), "not every process reloaded the edited rules"
    for _ in range(6):
        assert get(served.base, url)[1]["gpus"][0]["name"] == "Edited RTX 4090"


@needs_fork
def test_workers_is_the_former_name_of_threads(serve):
    served = serve("--processes", "1", "--workers", "3")
    assert "(1 process x 3 threads; Ctrl-C to stop)" in served.output()


def _serve_on(port: int, cwd: Path) -> subprocess.CompletedProcess[str]:
    kbq = shutil.which("kbq")
    command = [kbq] if kbq else [sys.executable, "-m", "kb.cli"]
    return subprocess.run([*command, "serve", "--host", "127.0.0.1", "--port", str(port)],
                          capture_output=True, text=True, cwd=cwd, timeout=60, check=False)


def test_a_port_in_use_is_a_clear_error(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = _serve_on(port, tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith(f"Error: cannot listen on 127.0.0.1:{port}: ")
    assert "Traceback" not in r.stderr


@needs_fork
def test_a_second_kbq_serve_on_the_same_port_is_refused(serve, tmp_path):
    # the workers' sockets share their port with each other (SO_REUSEPORT), never with a stranger
    served = serve("--processes", "2")
    r = _serve_on(served.port, tmp_path)
    assert r.returncode == 2 and "cannot listen on" in r.stderr
    assert get(served.base, "/api/health")[0] == 200


def test_without_gunicorn_waitress_serves_in_one_process(monkeypatch):
    import waitress

    from server import serving

    said, served = [], {}
    monkeypatch.setattr(serving, "gunicorn_available", lambda: False)
    monkeypatch.setattr(waitress, "serve", lambda app, **kw: served.update(kw, app=app))
    serving.serve("127.0.0.1", 8080, 4, 6, None, lambda url, how: said.append((url, how)))
    assert said == [("http://127.0.0.1:8080/", "1 process x 6 threads: gunicorn cannot run on "
                                               "this platform, so waitress serves in one process")]
    assert served["threads"] == 6 and served["port"] == 8080
    assert served["app"].extensions["kbq"].knowledge is not None      # loaded before serving
