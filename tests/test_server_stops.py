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
    # already sent: each was reset (16 of 16 clients connecting at the moment of the stop).
    # Here the queue is filled for certain: the workers are paused (SIGSTOP) while 16 clients
    # connect (the kernel completes their handshakes) and send their requests, the stop comes,
    # and only then do the workers go on. (A connection whose handshake completes in the instant
    # between a worker's last accept and its close is still reset: the kernel offers no way to
    # stop completing handshakes on a socket that stays open, so that instant is not tested.)
    served = serve("--processes", processes)
    workers = list(answering_processes(served.base, int(processes)))
    assert len(workers) == int(processes)
    clients = []
    for pid in workers:
        os.kill(pid, signal.SIGSTOP)
    try:
        for _ in range(16):
            s = socket.create_connection(("127.0.0.1", served.port), timeout=30)
            s.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            clients.append(s)
        served.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)                  # the arbiter closes its copy and signals the workers
    finally:
        for pid in workers:
            os.kill(pid, signal.SIGCONT)
    try:
        statuses = [_read_response(s) for s in clients]
    finally:
        for s in clients:
            s.close()
    assert statuses == [200] * 16
    assert served.proc.wait(timeout=30) == 0
    assert wait_gone(workers) == []
    with pytest.raises(ConnectionRefusedError):   # after the stop: refused, not reset
        socket.create_connection(("127.0.0.1", served.port), timeout=5).close()


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
