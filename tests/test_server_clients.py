"""Who a client of `kbq serve` is and how many connections it may hold, over real HTTP on
127.0.0.1 against real processes: X-Forwarded-For names the client only from the proxies given
in --forwarded-allow-ips (else one client rotating it escaped the one answer at a time per
address), and one address holds at most --connections-per-address open connections (else one
holding 1,100 silent connections kept every other client waiting ~10 s). Clients that stand for
other people connect from other loopback addresses (127.0.0.2, 127.0.0.3: still this machine)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tests.test_server_limits import _expensive
from tests.test_server_processes import _read_response, get


def _most_waiting_under_rotating_forwarded_for(served, seconds: float = 2.0) -> int:
    """16 connections from one address, each naming another client in X-Forwarded-For, ask
    distinct pages; the most answers /api/health saw waiting for their client's turn."""
    stop = time.monotonic() + seconds
    counter = iter(range(100_000))

    def ask(n: int) -> None:
        while time.monotonic() < stop:
            with socket.create_connection(("127.0.0.1", served.port), timeout=30) as s:
                s.sendall(f"GET {_expensive(next(counter))} HTTP/1.1\r\nHost: x\r\n"
                          f"X-Forwarded-For: 10.9.{n}.{next(counter) % 250}\r\n\r\n".encode())
                _read_response(s)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    most = 0
    try:
        while time.monotonic() < stop:
            status, body = get(served.base, "/api/health")
            most = max(most, body["computing"]["waiting"])
            time.sleep(0.02)
    finally:
        for t in threads:
            t.join()
    return most


def test_x_forwarded_for_names_the_client_only_from_a_configured_proxy(serve):
    # any client on this machine could name itself in X-Forwarded-For, so one rotating it got
    # every answer thread instead of one at a time (the per-address fairness, server.fairness)
    served = serve("--processes", "1", "--threads", "16")
    assert _most_waiting_under_rotating_forwarded_for(served) >= 4    # one client: one at a time
    proxied = serve("--processes", "1", "--threads", "16", "--forwarded-allow-ips", "127.0.0.1")
    assert _most_waiting_under_rotating_forwarded_for(proxied) == 0   # a proxy's 16 clients


def _silent(address: str, port: int, n: int) -> list[socket.socket]:
    conns = []
    for _ in range(n):
        s = socket.socket()
        s.bind((address, 0))
        s.settimeout(5)
        s.connect(("127.0.0.1", port))
        conns.append(s)
    return conns


def _closed_with(s: socket.socket) -> bytes | None:
    """What the server wrote before closing `s`, or None if it keeps it open."""
    s.settimeout(0.05)
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return data


def test_one_address_holding_many_silent_connections_keeps_no_one_waiting(serve):
    # 1,100 silent connections from one address filled the worker's 1,000 connections: everyone
    # else waited in the kernel's queue until they timed out (~10 s)
    import resource

    from server import serving

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = serving.CONNECTIONS + 300
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            pytest.skip(f"needs {want} open files, the limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    served = serve("--processes", "1")
    conns = _silent("127.0.0.2", served.port, serving.CONNECTIONS + 100)
    try:
        time.sleep(0.5)
        start = time.monotonic()
        assert get(served.base, "/api/health")[0] == 200
        assert time.monotonic() - start < 1.0, f"/api/health took {time.monotonic() - start:.1f} s"
        kept = conns[:serving.CONNECTIONS_PER_ADDRESS]
        assert [_closed_with(s) for s in kept] == [None] * len(kept)       # within the limit: open
        refused = _closed_with(conns[-1])
        assert refused is not None and refused.startswith(b"HTTP/1.1 429 "), refused
        assert b"open connections from one address" in refused
        other = _silent("127.0.0.3", served.port, 3)                         # its own allowance
        assert [_closed_with(s) for s in other] == [None] * 3
        for s in other:
            s.close()
    finally:
        for s in conns:
            s.close()


def test_the_connection_limit_is_per_address_and_spares_the_configured_proxies(serve):
    served = serve("--processes", "1", "--connections-per-address", "4",
                   "--forwarded-allow-ips", "127.0.0.2")
    proxy = _silent("127.0.0.2", served.port, 10)
    client = _silent("127.0.0.3", served.port, 10)
    try:
        time.sleep(0.3)
        assert [_closed_with(s) is None for s in proxy] == [True] * 10
        assert [_closed_with(s) is None for s in client] == [True] * 4 + [False] * 6
    finally:
        for s in proxy + client:
            s.close()
