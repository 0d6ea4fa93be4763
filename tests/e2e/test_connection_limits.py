"""`orchestra serve` on its own bounds request heads, the time to send a request, and connections (all,
and per client address, websockets included), counts what it refuses and logs it at most once a minute.

Raw sockets against the real server; a second client address is another loopback address (127.0.0.2,
which Linux routes to the loopback interface like 127.0.0.1).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil
import pytest
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from tests.support.e2e import assert_clean_logs, log_lines
from tests.support.waiting import until_sync

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

TIMEOUT = 0.5
HEAD = 16 * 1024
MIB = 1 << 20


@pytest.fixture(scope="module")
def bounded(start_module_server: Any) -> Any:
    """The default head limit, a short request timeout."""
    return start_module_server(request_timeout=TIMEOUT)


@pytest.fixture(scope="module")
def per_address(start_module_server: Any) -> Any:
    """Three connections per address; requests may take their time (connections stay held)."""
    return start_module_server(max_connections_per_address=3, request_timeout=30)


def address(server: Any) -> tuple[str, int]:
    parts = urlsplit(server.url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    """Sockets a test opens, closed after it."""
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def open_socket(server: Any, opened: list[socket.socket], source: str = "127.0.0.1") -> socket.socket:
    sock = socket.create_connection(address(server), timeout=5, source_address=(source, 0))
    opened.append(sock)
    return sock


def get(path: str, *headers: str) -> bytes:
    return ("\r\n".join([f"GET {path} HTTP/1.1", "host: test", *headers]) + "\r\n\r\n").encode()


def head_of(size: int) -> bytes:
    """GET /healthz with `connection: close`, padded to a head of exactly `size` bytes."""
    bare = get("/healthz", "connection: close", "x-pad: ")
    return get("/healthz", "connection: close", "x-pad: " + "a" * (size - len(bare)))


def read_to_close(sock: socket.socket, seconds: float = 5.0) -> tuple[bytes, float]:
    """Everything the server sends until it closes (a reset counts as a close); and how long that took."""
    started = time.monotonic()
    sock.settimeout(seconds)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received, time.monotonic() - started


def status(response: bytes) -> int:
    match = re.match(rb"HTTP/1\.1 (\d{3}) ", response)
    assert match, response[:200]
    return int(match.group(1))


def healthz(server: Any, opened: list[socket.socket], source: str) -> int:
    sock = open_socket(server, opened, source)
    sock.sendall(get("/healthz", "connection: close"))
    return status(read_to_close(sock)[0])


def metrics(server: Any, opened: list[socket.socket]) -> str:
    sock = open_socket(server, opened, "127.0.0.9")
    sock.sendall(get("/metrics", "connection: close"))
    return read_to_close(sock)[0].decode()


def refused_counts(server: Any, opened: list[socket.socket]) -> dict[str, float]:
    found = re.findall(
        r'^orchestra_connections_refused_total\{reason="(\w+)"\} ([0-9.e+]+)$', metrics(server, opened), re.M
    )
    return {reason: float(value) for reason, value in found}


def gauge(text: str, name: str) -> float:
    match = re.search(rf"^{name} ([0-9.e+]+)$", text, re.M)
    assert match, name
    return float(match.group(1))


def websocket(server: Any, source: str) -> ClientConnection:
    url = server.url.replace("http://", "ws://") + "/games/nosuchgame/ws"
    return ws_connect(url, source_address=(source, 0), open_timeout=5)


def held(server: Any) -> int:
    """How many connections the server still holds open (its side established, or told the client closed
    and not yet closed itself), as the kernel sees them (/proc/net/tcp): a slot comes back once it is 0."""
    port = address(server)[1]
    count = 0
    for row in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = row.split()
        # ESTABLISHED or CLOSE_WAIT: the server's side still open.
        if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] in ("01", "08"):
            count += 1
    return count


def released(server: Any, before: int) -> Any:
    """A condition for `until_sync`: the server holds fewer connections than `before`."""
    return lambda: held(server) < before


def refused_at_once(sock: socket.socket) -> bool:
    received, took = read_to_close(sock, 2.0)
    return received == b"" and took < 1.0


# Heads ---------------------------------------------------------------------------------------------------


def test_a_head_over_16_kib_gets_431_and_a_close_and_one_of_16_kib_is_served(
    bounded: Any, sockets: list[socket.socket]
) -> None:
    over = open_socket(bounded, sockets)
    over.sendall(head_of(17 * 1024))
    response, _ = read_to_close(over)
    assert status(response) == 431
    answer = json.loads(response.split(b"\r\n\r\n", 1)[1])
    assert answer == {"code": "too_large", "message": "a request head may hold 16384 bytes"}
    exact = open_socket(bounded, sockets)
    exact.sendall(head_of(HEAD))
    assert status(read_to_close(exact)[0]) == 200


def test_a_request_that_stalls_is_closed_at_the_deadline(bounded: Any, sockets: list[socket.socket]) -> None:
    started = time.monotonic()
    silent = open_socket(bounded, sockets)
    half = open_socket(bounded, sockets)
    half.sendall(b"GET /healthz HTTP/1.1\r\nhost: te")
    kept = open_socket(bounded, sockets)
    kept.sendall(get("/healthz"))
    until_sync(lambda: kept.recv(65536, socket.MSG_PEEK).startswith(b"HTTP/1.1 200"), what="the first answer")
    kept.sendall(b"GET /healthz HTTP/1.1\r\n")  # a second head on the kept-alive connection, unfinished
    for sock in (silent, half, kept):
        received, _ = read_to_close(sock)
        took = time.monotonic() - started
        assert TIMEOUT * 0.9 <= took < TIMEOUT + 2.5, took
        assert received.count(b"HTTP/1.1 ") == (1 if sock is kept else 0)


def test_ten_100_mib_heads_leave_the_servers_memory_bounded(
    bounded: Any, sockets: list[socket.socket]
) -> None:
    server = psutil.Process(bounded.pid)
    before = refused_counts(bounded, sockets)["head_too_large"]
    rss = [server.memory_info().rss]
    sent = [0] * 10
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            rss.append(server.memory_info().rss)
            time.sleep(0.005)  # a sample every few milliseconds: the peak is what is measured

    def flood(index: int) -> None:
        sock = open_socket(bounded, sockets)
        chunk = b"a" * MIB
        try:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: test\r\nx-huge: ")
            while sent[index] < 100 * MIB:
                sock.sendall(chunk)
                sent[index] += len(chunk)
        except OSError:
            pass  # the server closed it: stop at the first error

    sampler = threading.Thread(target=sample)
    sampler.start()
    floods = [threading.Thread(target=flood, args=(i,)) for i in range(10)]
    for thread in floods:
        thread.start()
    for thread in floods:
        thread.join(60)
    done.set()
    sampler.join()
    growth = (max(rss) - rss[0]) / MIB
    assert growth < 50, f"the server's RSS grew by {growth:.1f} MiB"
    assert max(sent) < 50 * MIB, sent  # each was cut off long before its 100 MiB
    assert refused_counts(bounded, sockets)["head_too_large"] - before == 10
    assert healthz(bounded, sockets, "127.0.0.2") == 200
    assert_clean_logs(bounded.logs())


# Connections ---------------------------------------------------------------------------------------------


@pytest.mark.logs_warnings  # refusals are logged at warning
def test_one_address_over_its_limit_is_refused_at_once_while_another_is_served(
    per_address: Any, sockets: list[socket.socket]
) -> None:
    slots = [open_socket(per_address, sockets) for _ in range(3)]
    slots[0].sendall(b"GET /healthz HTTP/1.1\r\n")  # half a head: held (the timeout is long here)
    fourth = open_socket(per_address, sockets)
    assert refused_at_once(fourth)
    started = time.monotonic()
    assert healthz(per_address, sockets, "127.0.0.2") == 200
    assert time.monotonic() - started < 2
    before = held(per_address)
    slots.pop().close()
    until_sync(released(per_address, before), what="the closed connection let go")
    assert healthz(per_address, sockets, "127.0.0.1") == 200  # its slot came back
    for sock in slots:
        sock.close()


@pytest.mark.logs_warnings  # refusals are logged at warning
def test_websockets_count_against_the_limit_until_they_close(
    per_address: Any, sockets: list[socket.socket]
) -> None:
    with websocket(per_address, "127.0.0.3") as first, websocket(per_address, "127.0.0.3"):
        open_socket(per_address, sockets, "127.0.0.3")
        assert refused_at_once(open_socket(per_address, sockets, "127.0.0.3"))
        before = held(per_address)
        first.close()
        until_sync(released(per_address, before), what="the closed websocket let go")
        assert healthz(per_address, sockets, "127.0.0.3") == 200


def test_open_connections_and_their_limit_are_gauges(per_address: Any, sockets: list[socket.socket]) -> None:
    # The connections of the tests before are closed on the server's side too.
    until_sync(lambda: held(per_address) == 0, what="the earlier tests' connections let go")
    before = metrics(per_address, sockets)
    assert gauge(before, "orchestra_tcp_connections_limit") > 1000
    with websocket(per_address, "127.0.0.8"):
        open_socket(per_address, sockets, "127.0.0.8")
        # Each scrape counts itself: two more, once the raw connection is taken in too.
        expected = gauge(before, "orchestra_tcp_connections") + 2
        until_sync(lambda: gauge(metrics(per_address, sockets), "orchestra_tcp_connections") == expected)


@pytest.mark.logs_warnings  # refusals are logged at warning
def test_the_global_limit_refuses_any_address(start_server: Any, sockets: list[socket.socket]) -> None:
    server = start_server(max_connections=3, max_connections_per_address=0, request_timeout=30)
    with websocket(server, "127.0.0.4"):
        open_socket(server, sockets, "127.0.0.4")
        third = open_socket(server, sockets, "127.0.0.5")
        assert refused_at_once(open_socket(server, sockets, "127.0.0.6"))
        before = held(server)
        third.close()
        until_sync(released(server, before), what="the closed connection let go")
        assert healthz(server, sockets, "127.0.0.6") == 200
        before = held(server)
    until_sync(released(server, before), what="the websocket let go")  # a slot for the scrape
    assert refused_counts(server, sockets)["global"] == 1


@pytest.mark.logs_warnings  # refusals are logged at warning
def test_refusals_are_counted_and_logged_once_a_minute_at_most(
    start_server: Any, sockets: list[socket.socket]
) -> None:
    server = start_server(max_connections_per_address=1, request_timeout=30)
    open_socket(server, sockets, "127.0.0.7")
    for _ in range(25):
        assert refused_at_once(open_socket(server, sockets, "127.0.0.7"))
    counts = refused_counts(server, sockets)
    assert counts["per_address"] == 25 and counts["global"] == 0
    lines = [line for line in log_lines(server.logs()) if line["msg"].startswith("connections refused")]
    assert len(lines) == 1  # the first at once; the other 24 wait for the minute's summary
    assert lines[0]["refused"] == {"per_address": 1} and lines[0]["level"] == "warning"
    server.terminate()  # the refusals since that line are summed up at shutdown
    lines = [line for line in log_lines(server.logs()) if line["msg"].startswith("connections refused")]
    assert [line["refused"] for line in lines] == [{"per_address": 1}, {"per_address": 24}]
    assert lines[1]["peers"] == {"127.0.0.7": 24}


def never_reading(server: Any, opened: list[socket.socket], source: str, requests: int) -> socket.socket:
    """A connection with a 4 KiB receive window that pipelines `requests` GETs and never reads."""
    sock = socket.socket()
    opened.append(sock)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(5)
    sock.bind((source, 0))
    sock.connect(address(server))
    sock.sendall(get("/client/orchestra.js") * requests)
    return sock


@pytest.mark.logs_warnings  # refusals are logged at warning
def test_readers_that_never_read_cannot_hold_the_global_limit_past_the_send_deadline(
    start_server: Any, sockets: list[socket.socket]
) -> None:
    send_timeout = 1.0
    server = start_server(
        max_connections=20, max_connections_per_address=0, request_timeout=30, send_timeout=send_timeout
    )
    # Enough answers on each to fill the kernel's buffers (a few MiB) and then the server's.
    for n in range(20):
        never_reading(server, sockets, f"127.0.0.{10 + n % 4}", 400)
    assert refused_at_once(open_socket(server, sockets, "127.0.0.30"))
    started = time.monotonic()
    until_sync(
        lambda: healthz_or_refused(server, sockets) == 200, send_timeout + 20, "a slot freed", interval=0.2
    )
    assert time.monotonic() - started >= send_timeout * 0.9
    # Each is cut at its own deadline: the rest follow the first within moments.
    until_sync(lambda: refused_counts(server, sockets).get("send_timeout") == 20, 10, "all 20 cut")
    assert_clean_logs(server.logs())


def healthz_or_refused(server: Any, opened: list[socket.socket]) -> int:
    """GET /healthz from a new address: its status, or 0 when the connection is refused."""
    sock = open_socket(server, opened, "127.0.0.31")
    sock.sendall(get("/healthz", "connection: close"))
    received, _ = read_to_close(sock)
    return status(received) if received else 0
