"""`orchestra serve` takes a client's address from X-Forwarded-For only when the connection comes from a
proxy FORWARDED_ALLOW_IPS names: by default the header is ignored (the creation limit and the access
log's `peer` use the connection's own address), even from 127.0.0.1."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.e2e import log_lines
from tests.support.redis import RedisProcess

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

FORGED = [f"203.0.113.{n}" for n in range(1, 6)]


async def create(server: Any, forwarded: list[str], source: str = "127.0.0.1") -> list[int]:
    """POST /games once per forwarded address, from `source`: the statuses."""
    transport = httpx.AsyncHTTPTransport(local_address=source)
    async with httpx.AsyncClient(base_url=server.url, timeout=10, transport=transport) as http:
        return [
            (
                await http.post("/games", json={"players": ["Ada"]}, headers={"x-forwarded-for": address})
            ).status_code
            for address in forwarded
        ]


def peers(server: Any) -> list[str]:
    """The `peer` of each POST /games in the access log, in order."""
    return [
        line["peer"]
        for line in log_lines(server.logs())
        if line.get("msg") == "request" and line.get("method") == "POST"
    ]


async def test_a_forged_x_forwarded_for_is_ignored_by_default(
    start_server: Any, own_redis: RedisProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)
    server = start_server(own_redis.url, create_rate_per_minute=1, create_burst=2)
    # One address, whatever the header says: its burst of 2, then refused.
    assert await create(server, FORGED) == [201, 201, 429, 429, 429]
    assert peers(server) == ["127.0.0.1"] * 5


async def test_forwarded_allow_ips_trusts_the_header_from_the_proxies_it_names(
    start_server: Any, own_redis: RedisProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "127.0.0.1")
    server = start_server(own_redis.url, create_rate_per_minute=1, create_burst=2)
    # Through the trusted proxy each client has a bucket of its own.
    assert await create(server, FORGED) == [201] * 5
    # From an address it does not name, the header is ignored.
    assert await create(server, FORGED[:3], source="127.0.0.2") == [201, 201, 429]
    assert peers(server) == FORGED + ["127.0.0.2"] * 3
