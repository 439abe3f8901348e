"""A new `kbq serve` worker answers its first questions when many arrive at once (issue 39): over
real HTTP on 127.0.0.1, ~60 concurrent distinct questions right after a start and right after a
SIGHUP (new workers), each from its own address, each answered, none a 500. A parser published
before its lexer failed 3 starts in 10 this way ("'Parser' object has no attribute 'lex'", or a
question never answered); tests/test_query.py shows the same race between threads in one process."""

from __future__ import annotations

import http.client
import os
import signal
import sys
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import pytest

from test_server_processes import alive, answering_processes

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="several processes need fork (POSIX)")

QUESTIONS = 60
STARTS = 4


def _status(base: str, query: str, client: int) -> tuple[int, str]:
    """One question on a connection of its own (any worker may take it), from loopback address
    127.0.1.<client>, so that the server's one-question-at-a-time-per-address gate lets the
    questions of a burst be answered at once: status and the body's start."""
    url = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=20,
                                      source_address=(f"127.0.1.{client}", 0))
    try:
        conn.request("GET", "/api/answer?q=" + urllib.parse.quote_plus(query))
        r = conn.getresponse()
        return r.status, r.read(300).decode("utf-8", "replace")
    finally:
        conn.close()


def _burst(base: str, round_no: int) -> list[tuple[int, str]]:
    """QUESTIONS distinct questions (no answer cached), all sent at once."""
    queries = [f"serve {7 + i}B int4 {round_no * QUESTIONS + i + 1} users" for i in range(QUESTIONS)]
    with ThreadPoolExecutor(QUESTIONS) as pool:
        return list(pool.map(lambda i: _status(base, queries[i], i + 1), range(QUESTIONS)))


needs_loopback_net = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                        reason="clients from 127.0.1.x need Linux's loopback /8")


@needs_fork
@needs_loopback_net
def test_fresh_workers_answer_a_burst_of_first_questions(serve):
    for start in range(STARTS):
        served = serve("--processes", "2", "--threads", "4")
        results = _burst(served.base, start)
        assert [r for r in results if r[0] >= 500] == [], served.output()
        assert {status for status, _ in results} == {200}, results
        assert "Traceback" not in served.output()
    old = set(answering_processes(served.base, 2))
    served.proc.send_signal(signal.SIGHUP)          # new workers, forked from the same master
    deadline = time.monotonic() + 20
    while any(alive(p) for p in old) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in old)
    results = _burst(served.base, STARTS)
    assert [r for r in results if r[0] >= 500] == [], served.output()
    assert {status for status, _ in results} == {200}, results
