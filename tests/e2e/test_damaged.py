"""A game whose stream holds an envelope the server cannot decode is refused alone; the others are served."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
import redis
from support.e2e import new_game
from support.redis import RedisProcess

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


async def test_a_damaged_stream_answers_unavailable_and_does_not_hide_the_other_games(
    start_server: Any, tmp_path: Any
) -> None:
    own = RedisProcess(tmp_path / "redis").start()  # a Redis of this test alone: it writes a bad stream
    try:
        server = start_server(redis_url=own.url)
        good, _ = await new_game(server.url, ["Ada"])
        damaged = f"bad{uuid.uuid4().hex[:8]}"
        client = redis.Redis.from_url(own.url)
        try:
            client.xadd(f"orchestra:{{{damaged}}}:events", {"e": b'{"not": "an envelope"}'}, id="0-1")
            client.zadd("orchestra:games", {damaged: 10**18})
        finally:
            client.close()
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
            listed = (await http.get("/games")).json()
            assert [g["game_id"] for g in listed] == [good]
            answer = await http.get(f"/games/{damaged}")
            assert answer.status_code == 503 and answer.json()["code"] == "unavailable"
            assert (await http.get(f"/games/{good}")).status_code == 200
        assert "Traceback" not in server.logs()
    finally:
        own.stop()
