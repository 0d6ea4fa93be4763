"""A game whose stream holds an envelope the server cannot decode is reported as damaged, naming the game
and the version, on every way in; it is logged and counted; the other games are served as usual."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import uuid
from typing import Any

import httpx
import pytest
import redis

from orchestra_client import ConnectionRefused, GameClient
from tests.support.e2e import PERF, STRINGS, expect_accepted, log_lines, new_game
from tests.support.logs import logged
from tests.support.redis import stream_entries

# Every test damages a stream: the server logs each damaged game it meets at error.
pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.logs_warnings]

DAMAGED_CLOSE = 1011
DAMAGED = "damaged game: a stored envelope cannot be read"  # what the server logs, at error


def _damage(url: str, game_id: str, version: int) -> None:
    """Append an envelope that does not decode at `version`, as whoever can write to Redis could."""
    client = redis.Redis.from_url(url)
    try:
        client.xadd(f"orchestra:{{{game_id}}}:events", {"e": b'{"not": "an envelope"}'}, id=f"0-{version}")
        client.zadd("orchestra:games", {game_id: 10**18}, nx=True)
    finally:
        client.close()


def _damaged_reads(metrics: str) -> float:
    found = re.search(r"^orchestra_damaged_reads_total (\S+)$", metrics, re.MULTILINE)
    assert found is not None, "orchestra_damaged_reads_total is not exported"
    return float(found.group(1))


async def test_a_damaged_game_is_reported_with_its_version_everywhere_and_alone(
    start_server: Any, own_redis: Any
) -> None:
    server = start_server(redis_url=own_redis.url)
    good, good_tokens = await new_game(server.url, ["Ada"])
    hurt, hurt_tokens = await new_game(server.url, ["Ben"])
    async with await GameClient.connect(server.url, hurt, hurt_tokens[0], reconnect=False) as ben:
        expect_accepted(await ben.place(PERF, "viola"))
    _damage(own_redis.url, hurt, 3)

    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        before = _damaged_reads((await http.get("/metrics")).text)
        for path in (f"/games/{hurt}", f"/games/{hurt}/events", f"/games/{hurt}?at=1"):
            answer = await http.get(path)
            assert answer.status_code == 500, path
            body = answer.json()
            assert (body["code"], body["game_id"], body["version"]) == ("damaged_game", hurt, 3), path
            assert hurt in body["message"] and "version 3" in body["message"]
        # The other games are served, listed and playable as usual.
        assert (await http.get(f"/games/{good}")).status_code == 200
        assert good in [g["game_id"] for g in (await http.get("/games")).json()]
        after = _damaged_reads((await http.get("/metrics")).text)
    assert after >= before + 3

    # A websocket hello gets the same code and a close that tells clients not to come back.
    with pytest.raises(ConnectionRefused) as refused:
        await GameClient.connect(server.url, hurt)
    assert refused.value.code == DAMAGED_CLOSE
    assert refused.value.frame is not None and refused.value.frame["code"] == "damaged_game"
    assert "version 3" in refused.value.frame["message"]
    async with await GameClient.connect(server.url, good, good_tokens[0], reconnect=False) as ada:
        expect_accepted(await ada.place(PERF, "viola"))

    # Logged at error level, naming the game and the version, once however often it is read.
    damaged = [line for line in log_lines(server.logs()) if line.get("level") == "error"]
    assert [(line["game_id"], line["version"]) for line in damaged] == [(hurt, 3)]
    assert "Traceback" not in server.logs()

    # Once an operator restores the stream (here: its good envelopes written back), the game is served
    # again, without a restart.
    client = redis.Redis.from_url(own_redis.url)
    key = f"orchestra:{{{hurt}}}:events"
    try:
        good_entries = stream_entries(client, key, "0-1", "0-2")
        client.delete(key)
        for entry_id, fields in good_entries:
            client.xadd(key, fields, id=entry_id)
    finally:
        client.close()
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        answer = await http.get(f"/games/{hurt}")
        assert answer.status_code == 200 and answer.json()["version"] == 2
    async with await GameClient.connect(server.url, hurt, hurt_tokens[0], reconnect=False) as ben:
        expect_accepted(await ben.place(STRINGS, "cello"))


async def test_a_followed_game_damaged_under_its_clients_refuses_its_next_command_as_damaged(
    start_server: Any, own_redis: Any
) -> None:
    server = start_server(redis_url=own_redis.url)
    game_id, tokens = await new_game(server.url, ["Ada", "Ben"])
    async with (
        await GameClient.connect(server.url, game_id, tokens[0], reconnect=False) as ada,
        await GameClient.connect(server.url, game_id, tokens[1], reconnect=False) as ben,
    ):
        expect_accepted(await ada.place(PERF, "viola"))
        _damage(own_redis.url, game_id, 3)
        # The command loses the race for version 3 and the catch-up read finds the damage.
        answer = await ben.place(STRINGS, "cello")
        assert (answer["type"], answer["code"]) == ("rejected", "damaged_game")
        assert "version 3" in answer["message"]
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        assert _damaged_reads((await http.get("/metrics")).text) >= 1
    assert logged(server.logs(), DAMAGED, game_id=game_id, version=3)


async def test_a_game_whose_first_envelope_is_damaged_is_not_listed_and_reports_version_1(
    start_server: Any, own_redis: Any
) -> None:
    server = start_server(redis_url=own_redis.url)
    good, _ = await new_game(server.url, ["Ada"])
    damaged = f"bad{uuid.uuid4().hex[:8]}"
    _damage(own_redis.url, damaged, 1)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        assert [g["game_id"] for g in (await http.get("/games")).json()] == [good]
        answer = await http.get(f"/games/{damaged}")
        assert answer.status_code == 500
        assert (answer.json()["code"], answer.json()["version"]) == ("damaged_game", 1)
    assert logged(server.logs(), DAMAGED, game_id=damaged, version=1)


async def test_orchestra_verify_names_the_damaged_version(start_server: Any, own_redis: Any) -> None:
    server = start_server(redis_url=own_redis.url)
    game_id, tokens = await new_game(server.url, ["Ada"])
    async with await GameClient.connect(server.url, game_id, tokens[0], reconnect=False) as ada:
        expect_accepted(await ada.place(PERF, "viola"))
    _damage(own_redis.url, game_id, 3)
    checked = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "server.ops.cli", "verify", game_id, "--server", server.url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert f"game {game_id}: INVALID at version 3" in checked.stdout
    assert logged(server.logs(), DAMAGED, game_id=game_id, version=3)
