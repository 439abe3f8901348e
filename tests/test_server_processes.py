"""`kbq serve` under gunicorn's arbiter, over real HTTP on 127.0.0.1 with real processes: every
worker answers, each reloads edited rules on its own; SIGTERM and Ctrl-C finish the requests in
flight and stop every process; SIGHUP replaces the workers without closing the port; workers
whose parent is killed exit and free the port. Limits per connection: server/test_server_limits."""

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

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="several processes need fork (POSIX)")

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
        f"kbq serving on {served.base}/  (2 processes x 2 answer threads, gunicorn with gevent; "
        "Ctrl-C to stop)")
    workers = answering_processes(served.base, 2)
    assert len(workers) == 2, f"only {list(workers)} answered"
    assert served.proc.pid not in workers          # the master only supervises
    expected = ask(QUERY).to_dict()
    for _ in range(6):   # answers, whichever process takes the connection
        status, body = get(served.base, "/api/answer?q=" + urllib.parse.quote_plus(QUERY))
        assert status == 200 and body == expected


def port_is_free(port: int) -> bool:
    """Whether a new server could listen on the port now (as `kbq serve` binds it)."""
    from server import serving

    try:
        serving.listen("127.0.0.1", port).close()
    except OSError:
        return False
    return True


def wait_port_free(port: int, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if port_is_free(port):
            return True
        time.sleep(0.1)
    return False


def _in_flight(served, n: int = 6) -> tuple[list[socket.socket], list[str]]:
    """n keep-alive connections, each already accepted (one /api/health answered on it), then each
    sent a page that must be computed (each query distinct, so no cache has it)."""
    conns, paths = [], []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", served.port), timeout=30)
        s.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n")
        _read_response(s)
        conns.append(s)
        paths.append("/?q=" + urllib.parse.quote_plus(f"max users for llama-3.1-8b at {4096 + i} context"))
    for s, path in zip(conns, paths):
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    time.sleep(0.3)           # read by the workers: in flight
    return conns, paths


def _read_response(s: socket.socket) -> int:
    """The status of one HTTP/1.1 response read whole from `s` (Content-Length framed)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a response")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed inside a response")
        body += chunk
    return int(head.split()[1])


@needs_fork
@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C"])
def test_a_stop_finishes_the_requests_in_flight(serve, how):
    # the former supervisor killed its workers at once: 32 of a 16-connection run failed
    served = serve("--processes", "2", "--threads", "2", start_new_session=True)
    workers = list(answering_processes(served.base, 2))
    conns, _ = _in_flight(served)
    if how == "SIGTERM":
        served.proc.send_signal(signal.SIGTERM)
    else:                     # a terminal's Ctrl-C: SIGINT to the whole foreground process group
        os.killpg(served.proc.pid, signal.SIGINT)
    try:
        statuses = [_read_response(s) for s in conns]
    finally:
        for s in conns:
            s.close()
    assert statuses == [200] * len(conns)
    assert served.proc.wait(timeout=30) == 0
    assert wait_gone(workers) == []
    assert port_is_free(served.port)
    assert "Traceback" not in served.output()


@needs_fork
def test_sighup_replaces_the_workers_without_closing_the_port(serve):
    served = serve("--processes", "2", "--threads", "2")
    old = set(answering_processes(served.base, 2))
    served.proc.send_signal(signal.SIGHUP)
    seen: set[int] = set()
    deadline = time.monotonic() + 20
    while not (seen - old and len(seen - old) >= 2 and not any(alive(p) for p in old)) \
            and time.monotonic() < deadline:
        status, body = get(served.base, "/api/health")     # every one answered, none refused
        assert status == 200
        seen.add(body["process"])
        time.sleep(0.02)
    assert len(seen - old) >= 2, f"no new workers answered: {seen}"
    assert wait_gone(old) == []
    assert served.proc.poll() is None          # the same master goes on


@needs_fork
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGUSR1])
def test_workers_never_outlive_their_parent(serve, sig):
    # the former supervisor's workers were orphaned by SIGKILL, SIGHUP or SIGUSR1 to the parent
    # and kept the port, so a restart failed with "Address already in use"
    served = serve("--processes", "2", "--threads", "2")
    workers = list(answering_processes(served.base, 2))
    served.proc.send_signal(sig)
    if sig == signal.SIGKILL:
        served.proc.wait(timeout=10)
        assert wait_gone(workers) == []
        assert wait_port_free(served.port)
    else:                                      # gunicorn: reopen the log files, go on serving
        time.sleep(1)
        assert served.proc.poll() is None
        assert get(served.base, "/api/health")[0] == 200


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
    assert "(1 process x 3 answer threads, gunicorn with gevent; Ctrl-C to stop)" in served.output()


def _serve_on(port: int, cwd: Path) -> subprocess.CompletedProcess[str]:
    kbq = shutil.which("kbq")
    command = [kbq] if kbq else [sys.executable, "-m", "kb.cli.main"]
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
    # the workers share the parent's socket; a stranger cannot bind the port
    served = serve("--processes", "2")
    r = _serve_on(served.port, tmp_path)
    assert r.returncode == 2 and "cannot listen on" in r.stderr
    assert get(served.base, "/api/health")[0] == 200


def test_a_port_out_of_range_is_refused_before_serving(tmp_path):
    r = _serve_on(99999, tmp_path)
    assert r.returncode == 2
    assert "serving on" not in r.stdout and "Traceback" not in r.stderr
    assert "99999 is not in the range 0<=x<=65535" in r.stderr


def _timed_answer(base: str) -> float:
    start = time.monotonic()
    status, body = get(base, "/api/answer?q=" + urllib.parse.quote_plus(GPU_QUERY))
    assert status == 200 and body["gpus"]
    return time.monotonic() - start


@needs_fork
def test_idle_and_slow_clients_cost_a_socket_not_a_worker(serve):
    # 200 connections that send nothing, 16 that send one header line every 2 s: with a
    # thread per connection (gthread) no normal request was answered while they stayed
    # (from 8 other loopback addresses, 25 and 2 each: one address may hold 64 per process)
    served = serve("--processes", "2", "--threads", "2")
    host, port = "127.0.0.1", served.port

    def connect(i: int) -> socket.socket:
        s = socket.socket()
        s.bind((f"127.0.1.{i % 8 + 1}", 0))
        s.connect((host, port))
        return s

    idle = [connect(i) for i in range(200)]
    slow = [connect(i) for i in range(16)]
    try:
        for s in slow:
            s.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\n")
        worst = 0.0
        for round_ in range(3):
            for s in slow:
                s.sendall(b"X-Slow-%d: 1\r\n" % round_)
            worst = max([worst, *(_timed_answer(served.base) for _ in range(5))])
            time.sleep(2)
        assert worst < 1.0, f"a normal request took {worst:.2f} s"
    finally:
        for s in idle + slow:
            s.close()


@needs_fork
def test_a_request_whose_headers_never_end_is_closed(serve, monkeypatch):
    served = serve("--processes", "1")
    from server import serving

    with socket.create_connection(("127.0.0.1", served.port)) as s:
        s.sendall(b"GET /api/health HTTP/1.1\r\n")
        s.settimeout(serving.HEADER_SECONDS + 15)
        start = time.monotonic()
        while True:           # one line a second, never the blank line that ends the headers
            try:
                s.sendall(b"X-Drip: 1\r\n")
            except OSError:
                break
            s.settimeout(1)
            try:
                if s.recv(1) == b"":
                    break
            except TimeoutError:
                pass
            except ConnectionResetError:      # closed with our unread header lines in its buffer
                break
            assert time.monotonic() - start < serving.HEADER_SECONDS + 15, "never closed"
    assert time.monotonic() - start >= serving.HEADER_SECONDS - 1


def test_a_ten_thousand_character_query_is_a_json_400(client):
    r = client.get("/api/answer?q=" + "a" * 10_000)
    assert r.status_code == 400
    assert "longer than" in r.get_json()["error"]["message"]


@needs_fork
def test_embed_origin_option_lets_that_origin_frame_embed(serve):
    served = serve("--processes", "1", "--embed-origin", "https://wiki.example.com")
    url = urllib.parse.urlsplit(served.base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        conn.request("GET", "/embed?q=serve+7B")
        policy = conn.getresponse().getheader("Content-Security-Policy")
    finally:
        conn.close()
    assert "frame-ancestors 'self' https://wiki.example.com" in policy


def test_an_embed_origin_that_is_not_an_origin_is_refused(tmp_path):
    kbq = shutil.which("kbq")
    command = [kbq] if kbq else [sys.executable, "-m", "kb.cli.main"]
    r = subprocess.run([*command, "serve", "--port", "0", "--embed-origin", "wiki.example.com/x"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False)
    assert r.returncode == 2 and "is not an origin" in r.stderr and "Traceback" not in r.stderr


def test_kbq_installs_what_its_server_worker_imports():
    """`kbq serve` runs gunicorn's gevent worker, whose module imports `packaging`; gunicorn
    declares that only under its `gevent` extra. The distributions kbq's requirements bring in
    (extras followed, markers of this platform) must hold every one the worker imports: a clean
    `pip install .` once lacked `packaging` and `kbq serve` stopped at start, while the test
    extras (pytest needs packaging) hid it."""
    from importlib.metadata import PackageNotFoundError, requires
    from packaging.requirements import Requirement

    done: set[tuple[str, frozenset[str]]] = set()
    todo = [("kbq", frozenset[str]())]
    while todo:
        item = todo.pop()
        if item in done:
            continue
        done.add(item)
        name, extras = item
        try:
            reqs = requires(name) or []
        except PackageNotFoundError:
            continue
        envs = [{"extra": e} for e in extras] or [{"extra": ""}]
        for req in map(Requirement, reqs):
            if req.marker is None or any(req.marker.evaluate(e) for e in envs):
                todo.append((req.name.lower().replace("_", "-"), frozenset(req.extras)))
    seen = {name for name, _ in done}
    if sys.platform != "win32":
        assert {"gunicorn", "gevent", "packaging"} <= seen, sorted(seen)

