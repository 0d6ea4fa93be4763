"""The wall feed (`/wall/ws`) against real servers on a Redis of the test's own: one `wall` frame, then
frames that carry only what changed; a new game appears, an ended one retires once `ended_kept` more have
ended, a private game never appears, and a game played on another node reaches the wall through the store."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import jsonschema
import msgspec
import pytest
import websockets

from orchestra_client import GameClient, WallClient, get_presence, get_view
from server.protocol import schema
from tests.support.e2e import PERF, STRINGS, end_game, expect_accepted, new_game
from tests.support.redis import RedisProcess
from tests.support.waiting import until
from tests.support.wall import FOLLOWED, followed, wall_of

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

CHANGE_FIELDS = {"game_id", "version", "ended", "chairs", "prestige", "presence"}


SCHEMA: dict[str, Any] = msgspec.json.decode(schema.document())
WALL_FEED = jsonschema.Draft202012Validator({"$ref": "#/$defs/WallFeedFrame", "$defs": SCHEMA["$defs"]})


def validate(frame: dict[str, Any]) -> None:
    """The frame is one of the wall feed's in the published schema, and no game or change carries a field
    the schema does not name, nor a null."""
    WALL_FEED.validate(frame)
    defs = SCHEMA["$defs"]
    games = frame["added"] if frame["type"] == "wall_changes" else frame["games"]
    assert all(set(game) == set(defs["WallGame"]["properties"]) for game in games)
    for change in frame.get("changed", ()):
        assert set(change) <= set(defs["WallChange"]["properties"]) and None not in change.values()


async def next_changes(wall: WallClient) -> dict[str, Any]:
    """The next frame that changes more than presence (players connecting to play come and go at their own
    pace, a second at most behind), with presence left out of its changes."""
    while True:
        frame = await wall.next_frame()
        validate(frame)
        changed = [{k: v for k, v in c.items() if k != "presence"} for c in frame["changed"]]
        changed = [change for change in changed if set(change) != {"game_id"}]
        if changed or frame["added"] or frame["retired"]:
            return {**frame, "changed": changed}


def stopped(log: str) -> bool:
    """Whether these lines of a server's log (JSON) say its wall stopped."""
    return any('"msg":"wall stopped"' in line for line in log.splitlines())


async def matches_the_server(url: str, wall: WallClient, game_id: str) -> None:
    """The wall's game equals what GET /games/{id} says, once the wall has caught up with it."""
    expected = wall_of(await get_view(url, game_id))
    await wall.wait_until(lambda games: game_id in games and followed(games[game_id]) == expected, 5.0)


async def play(url: str, game_id: str, token: str, token_placed: dict[str, str], space: str) -> int:
    async with await GameClient.connect(url, game_id, token, reconnect=False) as player:
        answer = expect_accepted(await player.place(token_placed, space))
        version: int = answer["version"]
        return version


async def test_the_feed_sends_the_wall_then_only_what_changed_and_never_a_private_game(
    own_redis: RedisProcess, start_server: Any
) -> None:
    server = start_server(own_redis.url)
    before, before_tokens = await new_game(server.url, ["Ada", "Ben"])  # live before the wall starts
    async with await WallClient.connect(server.url, reconnect=False) as wall:
        first = wall.received[0]
        validate(first)
        assert first["type"] == "wall" and first["ended_kept"] == 8
        assert list(wall.games) == [before]
        assert followed(wall.games[before]) == wall_of(await get_view(server.url, before))
        assert [space["id"] for space in wall.games[before]["layout"]["spaces"]] == list(
            wall.games[before]["chairs"]
        )

        hidden, hidden_tokens = await new_game(server.url, ["Cy", "Dan"], spectators="token")
        game_id, tokens = await new_game(server.url, ["Ada", "Ben", "Cy"])
        frame = await next_changes(wall)
        assert frame["type"] == "wall_changes" and frame["retired"] == [] and frame["changed"] == []
        assert [game["game_id"] for game in frame["added"]] == [game_id]
        assert list(wall.games) == [game_id, before]  # a new game goes first
        await matches_the_server(server.url, wall, game_id)

        # A placement: its version, the one space whose chair changed hands, the prestige; nothing else.
        await play(server.url, game_id, tokens[0], PERF, "viola")
        frame = await next_changes(wall)
        assert frame["added"] == [] and frame["retired"] == []
        [change] = frame["changed"]
        assert change == {"game_id": game_id, "version": 2, "chairs": {"viola": [0]}, "prestige": [3, 0, 0]}
        await matches_the_server(server.url, wall, game_id)

        # Below the line: the chair stays with Ada, so only the version changes.
        await play(server.url, game_id, tokens[1], STRINGS, "viola")
        [change] = (await next_changes(wall))["changed"]
        assert change == {"game_id": game_id, "version": 3}
        await matches_the_server(server.url, wall, game_id)

        # Ben steals the chair: that space alone, and both seats' prestige.
        await play(server.url, game_id, tokens[1], PERF, "viola")
        [change] = (await next_changes(wall))["changed"]
        assert change == {"game_id": game_id, "version": 4, "chairs": {"viola": [1]}, "prestige": [0, 3, 0]}
        await matches_the_server(server.url, wall, game_id)
        assert len(msgspec.json.encode(change)) < 120  # a change's size follows the change, not the game

        # The private game is played and ended: nothing of it ever reaches the wall.
        await play(server.url, hidden, hidden_tokens[0], PERF, "viola")
        await end_game(server.url, hidden, hidden_tokens[0])
        await play(server.url, before, before_tokens[0], PERF, "clarinet")
        frame = await next_changes(wall)
        assert [change["game_id"] for change in frame["changed"]] == [before]
        assert all(hidden not in msgspec.json.encode(f).decode() for f in wall.received)
        assert set(wall.games) == {game_id, before}
        for frame in wall.received[1:]:
            assert all(set(change) <= CHANGE_FIELDS for change in frame["changed"])


async def test_an_ended_game_stays_until_ended_kept_more_have_ended_then_retires(
    own_redis: RedisProcess, start_server: Any
) -> None:
    server = start_server(own_redis.url, wall_ended_games=1)
    first, first_tokens = await new_game(server.url, ["Ada", "Ben"])
    second, second_tokens = await new_game(server.url, ["Cy", "Dan"])
    logged = len(server.logs())
    async with await WallClient.connect(server.url, reconnect=False) as wall:
        assert list(wall.games) == [second, first] and wall.ended_kept == 1
        await end_game(server.url, first, first_tokens[0])
        frame = await next_changes(wall)
        assert frame["changed"] == [{"game_id": first, "version": 2, "ended": True}]
        assert frame["retired"] == []
        assert list(wall.games) == [second, first]  # live games first, then the ended ones
        await matches_the_server(server.url, wall, first)

        await end_game(server.url, second, second_tokens[0])
        frame = await next_changes(wall)
        # The second ended: it stays (the most recently ended), and the first retires.
        assert frame["retired"] == [first]
        assert frame["changed"] == [{"game_id": second, "version": 2, "ended": True}]
        assert list(wall.games) == [second]

    # A wall started afresh shows the most recently ended game too, after the live ones.
    third, _ = await new_game(server.url, ["Eve"])
    # The first wall lingers a few seconds after its last subscriber, then stops: its log says when.
    await until(lambda: stopped(server.logs()[logged:]), 15.0, "the wall stopped", interval=0.1)
    async with await WallClient.connect(server.url, reconnect=False) as wall:
        assert list(wall.games) == [third, second]
        assert wall.games[second]["ended"] is True


async def test_a_game_created_and_played_on_another_node_reaches_the_wall(
    own_redis: RedisProcess, start_server: Any
) -> None:
    watched, other = start_server(own_redis.url), start_server(own_redis.url)
    async with await WallClient.connect(watched.url, reconnect=False) as wall:
        game_id, tokens = await new_game(other.url, ["Ada", "Ben"])
        await wall.wait_until(lambda games: game_id in games, 3.0)  # the index poll: twice a second
        for seat, (placed, space) in enumerate([(PERF, "viola"), (PERF, "viola"), (STRINGS, "cello")]):
            version = await play(other.url, game_id, tokens[seat % 2], placed, space)
            started = asyncio.get_running_loop().time()

            def reached(games: dict[str, Any], version: int = version) -> bool:
                return bool(games[game_id]["version"] == version)

            await wall.wait_until(reached, 2.0)
            assert asyncio.get_running_loop().time() - started < 1.0
            await matches_the_server(other.url, wall, game_id)
        await end_game(other.url, game_id, tokens[0])
        await wall.wait_until(lambda games: games[game_id]["ended"], 2.0)
        await matches_the_server(other.url, wall, game_id)


async def test_the_feed_takes_no_frames_and_a_new_subscriber_starts_from_what_the_others_hold(
    own_redis: RedisProcess, start_server: Any
) -> None:
    server = start_server(own_redis.url)
    game_id, tokens = await new_game(server.url, ["Ada", "Ben"])
    async with await WallClient.connect(server.url, reconnect=False) as wall:
        await play(server.url, game_id, tokens[0], PERF, "viola")
        async with await WallClient.connect(server.url, reconnect=False) as late:
            await matches_the_server(server.url, late, game_id)
            await wall.wait_until(lambda games: followed(games[game_id]) == followed(late.games[game_id]))
        ws_url = server.url.replace("http://", "ws://") + "/wall/ws"
        async with websockets.connect(ws_url) as raw:
            assert msgspec.json.decode(await raw.recv())["type"] == "wall"
            await raw.send('{"type": "hello"}')
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(raw.recv(), 5)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
        async with httpx.AsyncClient(base_url=server.url) as http:
            metrics = (await http.get("/metrics")).text
        assert 'orchestra_connections{role="wall"} 1.0' in metrics
    assert set(FOLLOWED) < set(SCHEMA["$defs"]["WallGame"]["properties"])


async def test_the_wall_shows_who_is_at_each_table_as_get_games_id_does(
    own_redis: RedisProcess, start_server: Any
) -> None:
    """Presence on the wall: players and spectators connected to another node, seen through the store."""
    watched, other = start_server(own_redis.url), start_server(own_redis.url)
    game_id, tokens = await new_game(other.url, ["Ada", "Ben"])
    nobody = {"seats": [{"seat": 0, "online": False}, {"seat": 1, "online": False}], "spectators": 0}
    async with await WallClient.connect(watched.url, reconnect=False) as wall:
        assert wall.games[game_id]["presence"] == nobody
        ben = await GameClient.connect(other.url, game_id, tokens[1], reconnect=False)
        spectator = await GameClient.connect(other.url, game_id, reconnect=False)
        seated = {"seats": [{"seat": 0, "online": False}, {"seat": 1, "online": True}], "spectators": 1}
        await wall.wait_until(lambda games: games[game_id]["presence"] == seated, 6.0)
        assert await get_presence(watched.url, game_id) == seated
        presence_only = [c for f in wall.received[1:] for c in f["changed"] if c["game_id"] == game_id]
        assert presence_only and all(set(change) == {"game_id", "presence"} for change in presence_only)
        await ben.close()
        await spectator.close()
        await wall.wait_until(lambda games: games[game_id]["presence"] == nobody, 6.0)
