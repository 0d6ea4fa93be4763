"""Creating games is bounded: a rate per client address (429 rate_limited, Retry-After), a cap on the live
games of the whole store (503 too_many_games, shared by every node); and the list of games is read from
the store's index, never from a private game, with games written before the index indexed at start."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from orchestra_client import GameClient
from server.store.redis.keys import INDEXED_KEY, LISTING_KEY, LIVE_KEY, PUBLIC_KEY
from tests.support.e2e import PERF, end_game, expect_accepted, log_lines, new_game
from tests.support.redis import RedisProcess
from tests.support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def refused(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == {"code", "message"} and body["code"] == code and body["message"]
    return body


# The rate per client address ---------------------------------------------------------------------------


async def test_one_address_creating_games_too_fast_gets_429_with_retry_after(
    start_server: Any, own_redis: RedisProcess
) -> None:
    server = start_server(own_redis.url, create_rate_per_minute=60, create_burst=3)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        for _ in range(3):
            assert (await http.post("/games", json={"players": ["Ada"]})).status_code == 201
        started = time.monotonic()
        answer = await http.post("/games", json={"players": ["Ada"]})
        refused(answer, 429, "rate_limited")
        wait = answer.headers["retry-after"]
        assert wait.isascii() and wait.isdigit() and 1 <= int(wait) <= 60
        assert (await http.get("/games")).status_code == 200  # reads are not limited
        # A refused attempt is not a game: nothing was listed for it.
        assert len((await http.get("/games")).json()) == 3
        await asyncio.sleep(max(0.0, int(wait) - (time.monotonic() - started)) + 0.05)
        assert (await http.post("/games", json={"players": ["Ada"]})).status_code == 201
        metrics = (await http.get("/metrics")).text
    assert 'orchestra_creations_refused_total{code="rate_limited"} 1.0' in metrics


async def test_the_rate_is_per_client_address(start_server: Any, own_redis: RedisProcess) -> None:
    # A Redis of its own: the buckets live there, and outlast the test by up to a minute.
    server = start_server(own_redis.url, create_rate_per_minute=1, create_burst=1)
    first = httpx.AsyncClient(base_url=server.url, timeout=10)
    other = httpx.AsyncClient(
        base_url=server.url, timeout=10, transport=httpx.AsyncHTTPTransport(local_address="127.0.0.2")
    )
    async with first, other:
        assert (await first.post("/games", json={"players": ["Ada"]})).status_code == 201
        refused(await first.post("/games", json={"players": ["Ada"]}), 429, "rate_limited")
        assert (await other.post("/games", json={"players": ["Ada"]})).status_code == 201
        refused(await other.post("/games", json={"players": ["Ada"]}), 429, "rate_limited")


# The cap on live games ---------------------------------------------------------------------------------


async def test_the_cap_on_live_games_holds_across_nodes_and_frees_a_place_when_a_game_ends(
    start_server: Any, own_redis: RedisProcess
) -> None:
    one = start_server(own_redis.url, max_games=3)
    two = start_server(own_redis.url, max_games=3)
    games = [await new_game(one.url, ["Ada"]), await new_game(one.url, ["Ben"], spectators="token")]
    games.append(await new_game(two.url, ["Cy"]))
    for node in (one, two):
        async with httpx.AsyncClient(base_url=node.url, timeout=10) as http:
            refused(await http.post("/games", json={"players": ["Dee"]}), 503, "too_many_games")
    client = aioredis.Redis.from_url(own_redis.url)
    try:
        assert await client.scard(LIVE_KEY) == 3  # the refused ones were taken back: nothing left behind
        assert await client.zcard("orchestra:games") == 3
    finally:
        await client.aclose()
    game_id, tokens = games[1]
    await end_game(two.url, game_id, tokens[0])  # ended on one node, counted on every node
    async with httpx.AsyncClient(base_url=one.url, timeout=10) as http:
        assert (await http.post("/games", json={"players": ["Dee"]})).status_code == 201
        refused(await http.post("/games", json={"players": ["Eve"]}), 503, "too_many_games")
        metrics = (await http.get("/metrics")).text
    assert 'orchestra_creations_refused_total{code="too_many_games"} 2.0' in metrics


# The list of games -------------------------------------------------------------------------------------


async def test_the_list_reads_only_public_games_from_the_index_on_any_node(
    start_server: Any, own_redis: RedisProcess
) -> None:
    one = start_server(own_redis.url)
    two = start_server(own_redis.url)
    first, first_tokens = await new_game(one.url, ["Ada", "Ben"])
    for _ in range(5):
        await new_game(one.url, ["Zoe"], spectators="token")
    second, second_tokens = await new_game(one.url, ["Cy"])
    async with await GameClient.connect(one.url, first, first_tokens[0], reconnect=False) as ada:
        expect_accepted(await ada.place(PERF, "viola"))
    await end_game(one.url, second, second_tokens[0])
    async with httpx.AsyncClient(base_url=two.url, timeout=10) as http:
        listed = (await http.get("/games")).json()
        # Each game also carries its presence (nobody connected now).
        assert [{k: v for k, v in g.items() if k != "presence"} for g in listed] == [
            {"game_id": second, "players": ["Cy"], "version": 2, "ended": True},
            {"game_id": first, "players": ["Ada", "Ben"], "version": 2, "ended": False},
        ]
        assert [g["presence"]["spectators"] for g in listed] == [0, 0]
        assert (await http.get("/games", params={"limit": "1"})).json() == listed[:1]
        # Node two listed every game without loading a single one into memory.
        metrics = (await http.get("/metrics")).text
    assert "orchestra_live_games 0.0" in metrics


async def test_games_written_before_the_index_are_indexed_when_a_node_starts(
    start_server: Any, own_redis: RedisProcess
) -> None:
    old = start_server(own_redis.url)
    public, _ = await new_game(old.url, ["Ada"])
    ended, ended_tokens = await new_game(old.url, ["Ben"])
    private, _ = await new_game(old.url, ["Cy"], spectators="token")
    await end_game(old.url, ended, ended_tokens[0])
    old.stop()
    # What a store written by a version without the index holds: the games list, and no index at all.
    client = aioredis.Redis.from_url(own_redis.url)
    try:
        await client.delete(PUBLIC_KEY, LISTING_KEY, LIVE_KEY, INDEXED_KEY)
        new = start_server(own_redis.url)
        async with httpx.AsyncClient(base_url=new.url, timeout=10) as http:

            async def backfilled() -> list[dict[str, Any]]:
                found: list[dict[str, Any]] = (await http.get("/games")).json()
                return found if len(found) >= 2 else []

            listed = await until(backfilled, 10, "the games backfilled into the listing")
        assert [(g["game_id"], g["ended"]) for g in listed] == [(ended, True), (public, False)]
        assert await client.smembers(LIVE_KEY) == {public.encode(), private.encode()}
        assert await client.scard(INDEXED_KEY) == 3
        assert any(
            line.get("msg") == "games index backfilled" and line.get("count") == 3
            for line in log_lines(new.logs())
        )
    finally:
        await client.aclose()


async def test_the_rate_holds_for_a_client_that_creates_games_on_every_node(
    start_server: Any, own_redis: RedisProcess
) -> None:
    # Each node alone would let this address create its burst of 3; together they let it create 3.
    nodes = [start_server(own_redis.url, create_rate_per_minute=6, create_burst=3) for _ in range(2)]
    answers = []
    for attempt in range(6):
        async with httpx.AsyncClient(base_url=nodes[attempt % 2].url, timeout=10) as http:
            answers.append(await http.post("/games", json={"players": ["Ada"]}))
    assert [answer.status_code for answer in answers] == [201, 201, 201, 429, 429, 429]
    for answer in answers[3:]:
        refused(answer, 429, "rate_limited")
        assert 1 <= int(answer.headers["retry-after"]) <= 10  # a token every 10 s
