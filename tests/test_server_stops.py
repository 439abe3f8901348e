"""Stopping `kbq serve`, over real HTTP on 127.0.0.1 with real processes: a stop that arrives
while the workers are still starting is not lost; the connections waiting to be accepted when
a stop comes are answered, not reset; a stop that has to kill a worker says so in its exit
status. (The requests in flight on SIGTERM and Ctrl-C: tests/test_server_processes.py.)"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from tests.test_server_processes import (_read_response, alive, answering_processes, needs_fork,
                                         wait_gone, wait_port_free)


@needs_fork
def test_a_stop_while_the_workers_start_is_not_lost(tmp_path):
    # a SIGTERM that reached a worker before its signal handlers were installed went to the
    # arbiter's handlers it inherited from the fork, and was lost: the worker answered on until
    # the graceful timeout (10 s) killed it, mid-response
    from server import serving

    kbq = shutil.which("kbq")
    assert kbq, "the kbq console script is not installed (pip install -e .)"
    for _ in range(3):
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            port = free.getsockname()[1]
        proc = subprocess.Popen([kbq, "serve", "--host", "127.0.0.1", "--port", str(port),
                                 "--processes", "2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                cwd=tmp_path, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            assert proc.stdout.readline().startswith(b"kbq serving on")   # the workers are forking
            start = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
            took = time.monotonic() - start
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
        assert took < serving.GRACEFUL_SECONDS / 2, f"stopped after {took:.1f} s"
        assert wait_port_free(port)


@needs_fork
@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_stop_answers_the_connections_waiting_to_be_accepted(serve, processes):
    # a stop closed the listening socket with connections in its queue, whose requests were
    # already sent: each was reset (16 of 16 clients connecting at the moment of the stop)
    import collections
    import threading

    served = serve("--processes", processes)
    outcomes: collections.Counter[str] = collections.Counter()
    done = threading.Event()

    def ask() -> None:
        while not done.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", served.port), timeout=15)
            except ConnectionRefusedError:        # the socket is closed: nothing was sent
                outcomes["refused"] += 1
                time.sleep(0.01)
                continue
            try:
                s.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                outcomes["answered" if _read_response(s) == 200 else "other"] += 1
            except OSError as err:                # reset, or closed before a response
                outcomes[type(err).__name__] += 1
            finally:
                s.close()

    threads = [threading.Thread(target=ask) for _ in range(16)]
    for t in threads:
        t.start()
    try:
        time.sleep(1)
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(timeout=30) == 0
        time.sleep(0.2)
    finally:
        done.set()
        for t in threads:
            t.join()
    assert outcomes["answered"] > 0 and outcomes["refused"] > 0, outcomes
    assert set(outcomes) == {"answered", "refused"}, outcomes


@needs_fork
def test_a_stop_that_has_to_kill_a_worker_exits_1(serve):
    # gunicorn killed a worker that did not stop within the graceful timeout and exited 0
    from server import serving

    served = serve("--processes", "1")
    (worker,) = answering_processes(served.base, 1)
    os.kill(worker, signal.SIGSTOP)              # a worker that can no longer stop by itself
    try:
        start = time.monotonic()
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(timeout=serving.GRACEFUL_SECONDS + 20) == 1
        assert time.monotonic() - start >= serving.GRACEFUL_SECONDS - 1
    finally:
        if alive(worker):
            os.kill(worker, signal.SIGKILL)
    assert wait_gone([worker]) == []
    assert "did not stop within the graceful timeout and were killed" in served.output()
