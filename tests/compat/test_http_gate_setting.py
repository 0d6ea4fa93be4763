"""ORCHESTRA_HTTP_GATE: a real `orchestra serve` with the connection gate on and off serves a page and a
websocket game either way; the gate's own limits (connections per address, the time to send a request)
apply only when it is on, and uvicorn's bound on a request's head remains when it is off.

Raw sockets against the real server; a second client address is another loopback address (127.0.0.2).
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from orchestra_client import GameClient
from server.config import Settings, from_env
from server.ops.runner import uvicorn_server
from tests.support.e2e import PERF, new_game

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

TIMEOUT = 1.0  # ORCHESTRA_REQUEST_TIMEOUT of the servers below
PER_ADDRESS = 3
HEAD = 16 * 1024


@pytest.fixture(scope="module", params=["on", "off"])
def gate(request: pytest.FixtureRequest, start_module_server: Any) -> tuple[str, Any]:
    """The setting, and a server started with it (a short request deadline, few connections an address)."""
    server = start_module_server(
        http_gate=request.param, request_timeout=TIMEOUT, max_connections_per_address=PER_ADDRESS
    )
    return request.param, server


def open_socket(server: Any, source: str = "127.0.0.2") -> socket.socket:
    parts = urlsplit(server.url)
    assert parts.hostname is not None and parts.port is not None
    return socket.create_connection((parts.hostname, parts.port), timeout=5, source_address=(source, 0))


def read_to_close(sock: socket.socket, seconds: float = 10.0) -> bytes:
    """Everything the server sends until it closes (a reset counts as a close)."""
    sock.settimeout(seconds)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def status(response: bytes) -> int | None:
    """The response's status; None for no response at all."""
    return int(response.split(b" ", 2)[1]) if response.startswith(b"HTTP/1.1 ") else None


HEALTHZ = b"GET /healthz HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n"


def test_a_gate_setting_other_than_on_or_off_stops_the_server_at_boot() -> None:
    with pytest.raises(ValueError, match="http_gate"):
        from_env({"ORCHESTRA_HTTP_GATE": "false"})
    assert from_env({"ORCHESTRA_HTTP_GATE": "off"}).http_gate == "off"


def test_without_the_gate_uvicorns_own_bounds_come_from_the_settings(tmp_path: Path) -> None:
    settings = Settings(
        http_gate="off",
        max_head_bytes=4096,
        request_timeout=2.5,
        max_connections=300,
        data_dir=str(tmp_path),
    )
    config = uvicorn_server(settings).config
    assert config.http == "h11"
    assert config.h11_max_incomplete_event_size == 4096
    assert config.limit_concurrency == 300
    assert config.timeout_keep_alive == 3
    gated = uvicorn_server(Settings(max_connections=300, data_dir=str(tmp_path))).config
    assert isinstance(gated.http, type) and gated.limit_concurrency is None


async def test_the_server_serves_a_page_and_a_websocket_game(gate: tuple[str, Any]) -> None:
    _, server = gate
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        page = await http.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    game_id, (token,) = await new_game(server.url, ["Ada"])
    async with (
        await GameClient.connect(server.url, game_id, token) as ada,
        await GameClient.connect(server.url, game_id) as watcher,
    ):
        answer = await ada.place(token=PERF, space="viola")
        assert answer["type"] == "accepted", answer
        await watcher.wait_for_version(answer["version"])
        assert watcher.envelopes[-1]["event"]["type"] == "ChairClaimed"


@pytest.mark.logs_warnings  # the gate logs its per-address refusal at warning
def test_connections_over_the_per_address_limit_are_refused_only_with_the_gate(gate: tuple[str, Any]) -> None:
    setting, server = gate
    held = [open_socket(server) for _ in range(PER_ADDRESS)]
    try:
        for sock in held:
            sock.sendall(b"GET /healthz HTTP/1.1\r\n")  # a head begun: the connection is held
        one_more = open_socket(server)
        with one_more:
            one_more.sendall(HEALTHZ)
            answer = read_to_close(one_more)
    finally:
        for sock in held:
            sock.close()
    assert status(answer) == (None if setting == "on" else 200)


def test_a_request_not_sent_in_time_is_cut_only_with_the_gate(gate: tuple[str, Any]) -> None:
    setting, server = gate
    with open_socket(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: test\r\n")
        started = time.monotonic()
        if setting == "on":
            assert read_to_close(sock) == b""
            assert time.monotonic() - started >= TIMEOUT * 0.9
            return
        # Off: nothing comes for twice the deadline, and the connection is still served after it.
        sock.settimeout(2 * TIMEOUT)
        with pytest.raises(TimeoutError):
            sock.recv(1)
        sock.sendall(b"connection: close\r\n\r\n")
        assert status(read_to_close(sock)) == 200


@pytest.mark.logs_warnings  # uvicorn logs an invalid request at warning
def test_a_head_over_the_limit_is_refused_either_way(gate: tuple[str, Any]) -> None:
    setting, server = gate
    with open_socket(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: test\r\nx-pad: " + b"a" * (2 * HEAD))
        answer = read_to_close(sock)
    # The gate's own answer (protocol.md), or uvicorn's over h11.
    assert status(answer) == (431 if setting == "on" else 400)
