"""Presence on real servers: who is at the table, on every node, and never a fact of the game.

Two `orchestra serve` nodes on one Redis: a player on one and a spectator on the other see each other;
the player's node killed with SIGKILL shows the seat offline on the other node within 20 s (the default
expiry is 15 s). One node: a burst of connections reaches a client as about one presence frame a second;
GET /games/{id} and GET /games carry the same presence; nothing of it reaches the stream or an export.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from typing import Any, cast

import httpx
import jsonschema
import pytest
import redis

from orchestra_client import GameClient, get_presence
from server.protocol import schema
from server.store.redis.keys import events_key, presence_key
from tests.support.e2e import new_game
from tests.support.servers import ServerProcess
from tests.support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

PERF = {"kind": "performance", "era": "classical"}
DEFS = json.loads(schema.document())["$defs"]


def validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator({"$ref": f"#/$defs/{name}", "$defs": DEFS})


def presence(online: list[bool], spectators: int) -> dict[str, Any]:
    return {"seats": [{"seat": s, "online": up} for s, up in enumerate(online)], "spectators": spectators}


async def game_document(url: str, game_id: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        response = await http.get(f"/games/{game_id}")
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body


async def presence_over_http(url: str, game_id: str, wanted: dict[str, Any], within: float = 5) -> Any:
    """GET /games/{id}'s presence once it is `wanted` (or the last one read, after `within` seconds)."""
    found: list[Any] = []

    async def read() -> bool:
        found[:] = [await get_presence(url, game_id)]
        return bool(found[0] == wanted)

    with contextlib.suppress(AssertionError):  # the caller compares what was read last
        await until(read, within)
    return found[0]


async def test_a_player_on_one_node_and_a_spectator_on_another_see_each_other(
    start_server: Callable[..., ServerProcess],
) -> None:
    first, second = start_server(), start_server()
    game_id, tokens = await new_game(first.url, ["Ada", "Ben"])
    async with await GameClient.connect(first.url, game_id, tokens[1], reconnect=False) as ben:
        async with await GameClient.connect(second.url, game_id, reconnect=False) as watcher:
            expected = presence([False, True], 1)
            assert await watcher.wait_for_presence(lambda p: p == expected) == expected
            assert await ben.wait_for_presence(lambda p: p == expected) == expected
            for node in (first, second):
                document = await game_document(node.url, game_id)
                validator("Game").validate(document)
                assert document["presence"] == expected
                async with httpx.AsyncClient(base_url=node.url, timeout=10) as http:
                    listed = (await http.get("/games", params={"limit": 1000})).json()
                assert [g["presence"] for g in listed if g["game_id"] == game_id] == [expected]
            frames = [f for client in (ben, watcher) for f in client.received if f["type"] == "presence"]
            for frame in frames:
                validator("ServerFrame").validate(frame)
        # The spectator left the second node: the first tells its player.
        gone = presence([False, True], 0)
        assert await ben.wait_for_presence(lambda p: p == gone) == gone
    # Gone from both nodes: the first removes its field within a second of its last connection closing.
    assert await presence_over_http(second.url, game_id, presence([False, False], 0)) == presence(
        [False] * 2, 0
    )


async def test_a_killed_nodes_player_shows_offline_on_the_other_node_within_20_seconds(
    start_server: Callable[..., ServerProcess],
) -> None:
    doomed, survivor = start_server(), start_server()
    game_id, tokens = await new_game(survivor.url, ["Ada", "Ben"])
    ada = await GameClient.connect(doomed.url, game_id, tokens[0], reconnect=False)
    async with await GameClient.connect(survivor.url, game_id, reconnect=False) as watcher:
        await watcher.wait_for_presence(lambda p: p["seats"][0]["online"])
        doomed.kill()
        killed = time.monotonic()
        offline = presence([False, False], 1)
        await watcher.wait_for_presence(lambda p: p == offline, timeout=20)
        took = time.monotonic() - killed
        assert took < 20, took
        assert await presence_over_http(survivor.url, game_id, offline) == offline
    await ada.close()


async def test_a_burst_of_50_connections_reaches_a_client_as_about_one_frame_a_second(
    server: ServerProcess,
) -> None:
    game_id, tokens = await new_game(server.url, ["Ada", "Ben"])
    async with await GameClient.connect(server.url, game_id, tokens[0], reconnect=False) as ada:
        await ada.wait_for_presence(lambda p: p == presence([True, False], 0))
        before = sum(1 for f in ada.received if f["type"] == "presence")
        started = time.monotonic()

        async def visit(n: int) -> None:
            token = tokens[1] if n % 2 else None
            async with await GameClient.connect(server.url, game_id, token, reconnect=False):
                await asyncio.sleep(0.05)  # a visit: a moment at the table

        for wave in range(5):
            await asyncio.gather(*(visit(10 * wave + n) for n in range(10)))
        burst = time.monotonic() - started
        final = presence([True, False], 0)
        await ada.wait_for_presence(lambda p: p == final)
        # The sentinel, one more spectator: its frame comes after any still held back by the pace.
        async with await GameClient.connect(server.url, game_id, reconnect=False):
            await ada.wait_for_presence(lambda p: p == presence([True, False], 1))
        elapsed = time.monotonic() - started
        got = sum(1 for f in ada.received if f["type"] == "presence") - before - 1
    assert 1 <= got <= elapsed + 2, (got, burst, elapsed)


async def test_presence_never_enters_the_stream_a_view_or_an_export(
    server: ServerProcess, redis_url: str
) -> None:
    game_id, tokens = await new_game(server.url, ["Ada"])
    async with await GameClient.connect(server.url, game_id, tokens[0], reconnect=False) as ada:
        async with await GameClient.connect(server.url, game_id, reconnect=False):
            await ada.wait_for_presence(lambda p: p == presence([True], 1))
            answer = await ada.place(PERF, "viola")
            assert answer["type"] == "accepted"
            assert "presence" not in ada.welcome["view"] and "presence" not in (ada.view or {})
            async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
                export = (await http.get(f"/games/{game_id}/events", params={"trailer": "true"})).text
                past = (await http.get(f"/games/{game_id}", params={"at": "2"})).json()
            client = redis.Redis.from_url(redis_url)
            try:
                # Written within a second of a change.
                held = await until(lambda: client.hgetall(presence_key(game_id)), 5, "the node's field")
                stored = cast(list[tuple[bytes, dict[bytes, bytes]]], client.xrange(events_key(game_id)))
            finally:
                client.close()
    assert len(held) == 1, "the node's own field, beside the stream"
    assert [v for _, fields in stored for v in fields.values() if b"presence" in v or b"online" in v] == []
    assert "presence" not in export and '"online"' not in export
    assert "presence" not in past
    assert [json.loads(line)["event"]["type"] for line in export.splitlines()[:-1]] == [
        "GameCreated",
        "ChairClaimed",
    ]
