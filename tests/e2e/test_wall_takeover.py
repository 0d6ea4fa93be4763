"""A wall strangers cannot take over (issue 39, item 4), against a real server on a Redis of the test's own,
with real websocket clients: a flood of games from a few addresses (named by X-Forwarded-For from the
proxy FORWARDED_ALLOW_IPS trusts) replaces no table being played, each address holds at most its share, a
game without a placement leaves, and the first frame is a bounded page, the rest on demand."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import msgspec
import pytest
import websockets

from orchestra_client import GameClient, WallClient
from tests.support.e2e import PERF, expect_accepted, new_game
from tests.support.redis import RedisProcess

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


async def create_from(http: httpx.AsyncClient, address: str, name: str) -> dict[str, Any]:
    """A public game created by a client at `address` (as the trusted proxy names it)."""
    answer = await http.post("/games", json={"players": [name, "Ben"]}, headers={"x-forwarded-for": address})
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


def live(wall: WallClient) -> set[str]:
    return {game_id for game_id, game in wall.games.items() if not game["ended"]}


async def test_a_flood_from_ten_addresses_replaces_no_table_being_played(
    own_redis: RedisProcess, start_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "127.0.0.1")
    server = start_server(own_redis.url, wall_live_games=20)  # a share of 5%: one game an address
    other = start_server(own_redis.url)  # its games reach the wall through the index poll alone
    players: list[GameClient] = []
    real: list[str] = []
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        for n in range(6):  # six tables, each created from an address of its own and being played
            created = await create_from(http, f"198.51.100.{n + 1}", f"Ada{n}")
            player = await GameClient.connect(server.url, created["game_id"], created["seats"][0]["token"])
            expect_accepted(await player.place(PERF, "viola"))
            players.append(player)
            real.append(created["game_id"])
        try:
            async with await WallClient.connect(server.url, reconnect=False) as wall:
                await wall.wait_until(lambda games: set(real) <= set(games))

                def seated(games: dict[str, Any]) -> bool:
                    return all(games[g]["presence"]["seats"][0]["online"] for g in real)

                await wall.wait_until(seated, 6.0)
                # The finding: 210 games from 10 addresses, as fast as the server takes them.
                flood = await asyncio.gather(
                    *(create_from(http, f"203.0.113.{n % 10 + 1}", "Mallory") for n in range(210))
                )
                by_address: dict[str, set[str]] = {}
                for n, created in enumerate(flood):
                    by_address.setdefault(f"203.0.113.{n % 10 + 1}", set()).add(created["game_id"])

                def one_each(games: dict[str, Any]) -> bool:
                    shown = {game_id for game_id, game in games.items() if not game["ended"]}
                    return set(real) <= shown and all(len(ids & shown) == 1 for ids in by_address.values())

                await wall.wait_until(one_each, 15.0)
                # The sentinel: a game listed by another node, found by the index poll alone. Once it is on
                # the wall, the poll (twice a second) has seen every game of the flood too.
                async with httpx.AsyncClient(base_url=other.url, timeout=30) as elsewhere:
                    sentinel = (await create_from(elsewhere, "192.0.2.77", "Zoe"))["game_id"]
                await wall.wait_until(lambda games: sentinel in games, 5.0)
                shown = live(wall)
                assert set(real) <= shown, "every table being played is still on the wall"
                for address, ids in by_address.items():
                    assert len(ids & shown) <= 1, address  # its share: 5% of 20
                assert len(shown) <= 20 and wall.total == len(wall.games)
                # No frame and no list says who created a game.
                listed = (await http.get("/games")).text
            frames = msgspec.json.encode(wall.received).decode()
            for leak in ("creator", "203.0.113", "198.51.100"):
                assert leak not in frames and leak not in listed
        finally:
            for player in players:
                await player.close()


async def test_a_game_without_a_placement_for_the_idle_time_leaves_the_wall(
    own_redis: RedisProcess, start_server: Any
) -> None:
    server = start_server(own_redis.url, wall_idle_seconds=2)
    idle, _ = await new_game(server.url, ["Ada", "Ben"])
    busy, tokens = await new_game(server.url, ["Cy", "Dan"])
    async with await WallClient.connect(server.url, reconnect=False) as wall:
        assert {idle, busy} <= set(wall.games)
        async with await GameClient.connect(server.url, busy, tokens[0], reconnect=False) as player:
            for space in ("viola", "violin_bc", "clarinet"):
                await asyncio.sleep(0.8)
                expect_accepted(await player.place(PERF, space))
        assert idle not in wall.games and busy in wall.games  # gone after 2 s; the played one stays
        retired = [frame for frame in wall.received[1:] if idle in frame.get("retired", ())]
        assert retired and retired[0]["total"] == 1
        await wall.wait_until(lambda games: busy not in games, 6.0)  # and it too, once left alone


async def test_the_first_frame_is_a_bounded_page_and_more_come_with_wall_more(
    own_redis: RedisProcess, start_server: Any
) -> None:
    server = start_server(own_redis.url, wall_creator_share=1.0, wall_page_games=5)
    created = [(await new_game(server.url, ["Ada", "Ben", "Cy", "Dan"]))[0] for _ in range(40)]
    ws_url = server.url.replace("http://", "ws://") + "/wall/ws"
    async with websockets.connect(ws_url) as raw:
        data = await raw.recv()
        first = msgspec.json.decode(data)
        assert first["type"] == "wall" and first["total"] == 40 and len(first["games"]) == 5
        assert len(data) < 6 * len(msgspec.json.encode(first["games"][0]))  # five games' worth, not forty
        held = {game["game_id"] for game in first["games"]}
        for _ in range(7):
            await raw.send('{"type": "wall_more"}')
            page = msgspec.json.decode(await raw.recv())
            assert page["type"] == "wall_page" and len(page["games"]) == 5 and page["total"] == 40
            assert not held & {game["game_id"] for game in page["games"]}
            held |= {game["game_id"] for game in page["games"]}
        assert held == set(created)
        await raw.send('{"type": "wall_more"}')
        assert msgspec.json.decode(await raw.recv()) == {"type": "wall_page", "games": [], "total": 40}
        # Anything else closes the feed with 1008, saying why.
        await raw.send('{"type": "wall_more", "after": 3}')
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(raw.recv(), 5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
        assert "wall_more" in closed.value.rcvd.reason

    # The Python client: a page, then the rest with more().
    async with await WallClient.connect(server.url, reconnect=False) as wall:
        assert len(wall.games) == 5 and wall.total == 40
        while len(wall.games) < 40:
            before = len(wall.games)

            def grew(games: dict[str, Any], before: int = before) -> bool:
                return len(games) > before

            await wall.more()
            await wall.wait_until(grew)
        assert set(wall.games) == set(created)


async def test_wall_more_faster_than_the_command_rate_closes_the_feed(
    own_redis: RedisProcess, start_server: Any
) -> None:
    server = start_server(own_redis.url, rate_per_second=5, rate_burst=10)
    await new_game(server.url, ["Ada"])
    ws_url = server.url.replace("http://", "ws://") + "/wall/ws"
    async with websockets.connect(ws_url) as raw:
        await raw.recv()
        for _ in range(30):
            await raw.send('{"type": "wall_more"}')
        pages = 0
        with pytest.raises(websockets.ConnectionClosed) as closed:
            while True:
                frame = msgspec.json.decode(await asyncio.wait_for(raw.recv(), 5))
                pages += frame["type"] == "wall_page"
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
        assert 10 <= pages < 30
