"""Many nodes, one Redis (or a Redis Cluster): any node serves any game, and a node's death loses nothing.

No load balancer: each client picks a node's URL itself. When a node is killed (SIGKILL, no shutdown at
all) its clients resume on another node with `since` = the last version they saw, and every client's
history stays contiguous, without gap or duplicate, and equal to the stream; every acknowledged command
is in the stream exactly once, and an unanswered command re-sent by id on another node is applied once.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec
import pytest
import redis
from redis.crc import key_slot

from domain import Layout
from orchestra_client import ConnectionRefused, GameClient, get_events
from orchestra_client.bots import random_placement, read_layout
from server.engine.signing import Keyring, public_key_from_text
from server.ops.verify import verify
from server.store.redis.keys import auth_key, commands_key, events_key
from tests.support.e2e import new_game
from tests.support.redis import RedisProcess, start_cluster

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

NODES = 3
DEADLINE = 60.0


@dataclass
class Follower:
    """One logical client (a player's seat or a spectator) across the sessions it has had, node by node."""

    token: str | None
    node: int
    sessions: list[GameClient] = field(default_factory=list)

    @property
    def client(self) -> GameClient:
        return self.sessions[-1]

    def history(self) -> list[dict[str, Any]]:
        """Every envelope this client received, over all its sessions, in order of arrival."""
        return [envelope for session in self.sessions for envelope in session.envelopes]

    async def join(self, url: str, game_id: str, node: int) -> None:
        """Connect (again) to `url`, resuming after the last version seen (0 for the first session)."""
        since = self.sessions[-1].version if self.sessions else 0
        self.sessions.append(await GameClient.connect(url, game_id, self.token, since=since, reconnect=False))
        self.node = node

    async def close(self) -> None:
        for session in self.sessions:
            await session.close()


@dataclass
class Table:
    """A game played by three players, each on its own node, with two spectators per node."""

    game_id: str
    layout: Layout
    players: list[Follower]
    spectators: list[Follower]
    rng: random.Random
    acked: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    sent: int = 0

    @property
    def everyone(self) -> list[Follower]:
        return [*self.players, *self.spectators]

    def frame(self, seat: int) -> dict[str, Any]:
        self.sent += 1
        return {**random_placement(self.layout, self.rng), "id": f"s{seat}-{self.sent}"}

    async def place(self, seat: int, frame: dict[str, Any] | None = None) -> dict[str, Any]:
        """One placement by `seat` on its current node; it must be accepted (and is then acknowledged)."""
        token, space, rest = fields_of(frame or self.frame(seat))
        answer = await self.players[seat].client.place(token, space, **rest)
        assert answer["type"] == "accepted", answer
        self.acked.append((seat, answer))
        return answer

    async def round(self) -> None:
        for seat in range(len(self.players)):
            await self.place(seat)

    async def close(self) -> None:
        for follower in self.everyone:
            await follower.close()


async def open_table(urls: list[str], rng: random.Random) -> Table:
    """A three-player game; player i on node i, two spectators on every node, all from version 0."""
    game_id, tokens = await new_game(urls[0], ["Ada", "Ben", "Cy"])
    layout = await read_layout(urls[1], game_id)
    table = Table(game_id, layout, [Follower(t, i % len(urls)) for i, t in enumerate(tokens)], [], rng)
    table.spectators = [Follower(None, i % len(urls)) for i in range(2 * len(urls))]
    for follower in table.everyone:
        await follower.join(urls[follower.node], game_id, follower.node)
    return table


async def kill_mid_game(table: Table, servers: list[Any], victim: int) -> None:
    """Kill node `victim` right after one of its players' commands was acknowledged and while another
    was in flight; its clients resume on the surviving nodes; the in-flight command is re-sent by id."""
    urls = [s.url for s in servers]
    seat = next(i for i, p in enumerate(table.players) if p.node == victim)
    player = table.players[seat]
    await table.place(seat)  # acknowledged, then its node dies
    frame = table.frame(seat)
    token, space, rest = fields_of(frame)
    in_flight = asyncio.create_task(player.client.place(token, space, **rest))
    await asyncio.sleep(0.002)
    await asyncio.to_thread(servers[victim].kill)
    try:
        first: dict[str, Any] | None = await in_flight
    except ConnectionRefused:
        first = None  # unanswered: written or not, the client cannot tell
    survivors = [i for i in range(len(urls)) if i != victim]
    moved = [f for f in table.everyone if f.node == victim]
    assert len(moved) >= 3  # a player and two spectators
    for n, follower in enumerate(moved):
        node = survivors[n % len(survivors)]
        await follower.join(urls[node], table.game_id, node)
    again = await table.place(seat, frame)  # the same id, on another node
    if first is not None and first["type"] == "accepted":
        assert again == first  # the first outcome, not a second placement


async def check_histories(table: Table, url: str) -> None:
    """Every client saw versions 1..V once each, in order, equal to the stream; every acknowledged
    command's envelopes are in the stream exactly once, where its answer said."""
    stream = await get_events(url, table.game_id)
    top = stream[-1]["version"]
    assert [e["version"] for e in stream] == list(range(1, top + 1))
    for follower in table.everyone:
        await follower.client.wait_for_version(top)
        history = follower.history()
        assert [e["version"] for e in history] == list(range(1, top + 1))
        assert history == stream
    written = Counter((e["seat"], e["command_id"]) for e in stream[1:])
    for seat, answer in table.acked:
        assert written[(seat, answer["id"])] == len(answer["events"]) == 1
        assert stream[answer["version"] - 1] == answer["events"][0]
    assert len(table.acked) == len(stream) - 1  # nothing written that nobody acknowledged


async def play_and_kill(servers: list[Any], seed: int, victim: int = 2) -> Table:
    """A whole game over the nodes, with node `victim` killed mid-game; returns the finished table."""
    rng = random.Random(seed)
    table = await open_table([s.url for s in servers], rng)
    try:
        for _ in range(3):
            await table.round()
        await kill_mid_game(table, servers, victim)
        for _ in range(3):
            await table.round()
        ended = await table.players[0].client.end_game(id="the-end")
        assert ended["type"] == "accepted", ended
        table.acked.append((0, ended))
        alive = next(s for i, s in enumerate(servers) if i != victim)
        await check_histories(table, alive.url)
    finally:
        await table.close()
    return table


async def test_three_nodes_one_redis_a_node_killed_mid_game_loses_and_repeats_nothing(
    start_server: Callable[..., Any],
) -> None:
    servers = [start_server() for _ in range(NODES)]
    async with asyncio.timeout(DEADLINE):
        table = await play_and_kill(servers, seed=7)
    assert table.players[2].node != 2 and len(table.players[2].sessions) == 2


async def test_a_command_written_by_a_node_that_died_before_answering_is_answered_once_elsewhere(
    start_server: Callable[..., Any],
) -> None:
    doomed = start_server(crash_after_append=True)  # dies right after its first append
    healthy = start_server()
    async with asyncio.timeout(DEADLINE):
        game_id, tokens = await new_game(healthy.url, ["Ada", "Ben"])
        layout = await read_layout(healthy.url, game_id)
        frame = {**random_placement(layout, random.Random(3)), "id": "lost-answer"}
        token, space, rest = fields_of(frame)
        async with await GameClient.connect(doomed.url, game_id, tokens[1], reconnect=False) as ben:
            with pytest.raises(ConnectionRefused):
                await ben.place(token, space, **rest)
        assert await asyncio.to_thread(doomed.process.wait, 10) == 3
        stream = await get_events(healthy.url, game_id)
        assert [e["command_id"] for e in stream[1:]] == ["lost-answer"]  # written, never answered
        async with await GameClient.connect(healthy.url, game_id, tokens[1], since=1, reconnect=False) as ben:
            answer = await ben.place(token, space, **rest)
            assert answer["type"] == "accepted" and answer["version"] == 2
            assert answer["events"] == stream[1:]
            assert await ben.place(token, space, **rest) == answer
            # The sentinel, a later command's answer: a second copy of version 2 would have come before it.
            stale = await ben.place(token, space, id="sentinel", expected_version=1)
            assert (stale["type"], stale["code"]) == ("rejected", "stale_version")
            assert ben.envelopes == stream[1:]  # version 2 once (the resume's history), no second copy
        assert await get_events(healthy.url, game_id) == stream


@pytest.mark.parametrize("backend", ["redis", "cluster"])
@pytest.mark.logs_warnings  # writers of two nodes at once: some commands are unavailable, retried by id
async def test_players_on_two_nodes_placing_at_once_leave_a_stream_that_verifies(
    start_server: Callable[..., Any], request: pytest.FixtureRequest, backend: str
) -> None:
    """Two players on each of two nodes place as fast as their answers come, all at once: a node appends
    its players' waiting commands in one call while the other node's land in between. The stream verifies
    (every signature, the hash chain, every event decided again by the rules), every accepted command is
    in it once, and both nodes' views are its replay."""
    options = {"redis_url": request.getfixturevalue("cluster")[1]} if backend == "cluster" else {}
    servers = [start_server(**options) for _ in range(2)]
    urls = [server.url for server in servers]
    async with asyncio.timeout(DEADLINE):
        game_id, tokens = await new_game(urls[0], ["Ada", "Ben", "Cy", "Di"])
        layout = await read_layout(urls[0], game_id)
        players = [
            await GameClient.connect(urls[seat // 2], game_id, token, reconnect=False)
            for seat, token in enumerate(tokens)
        ]
        spectators = [
            await GameClient.connect(url, game_id, view=view, reconnect=False)
            for url in urls
            for view in (None, "full")
        ]

        async def play(seat: int, client: GameClient) -> list[dict[str, Any]]:
            rng = random.Random(seat)
            answers = []
            for n in range(60):
                token, space, rest = fields_of({**random_placement(layout, rng), "id": f"p{seat}-{n}"})
                answers.append(await client.place(token, space, **rest))
            return answers

        try:
            answers = [a for each in await asyncio.gather(*map(play, range(4), players)) for a in each]
            accepted = [answer for answer in answers if answer["type"] == "accepted"]
            assert all(answer["type"] in ("accepted", "rejected") for answer in answers)
            async with httpx.AsyncClient(timeout=10) as http:
                lines = (await http.get(f"{urls[1]}/games/{game_id}/events")).content.splitlines()
                listed = [(await http.get(f"{url}/signing-keys")).json()["keys"] for url in urls]
                views = [(await http.get(f"{url}/games/{game_id}")).json() for url in urls]
            keys = Keyring([public_key_from_text(key["public_key"]) for keys in listed for key in keys])
            report = verify(lines, keys=keys)
            assert report.ok, (report.bad_version, report.problem)
            assert len(lines) == 1 + len(accepted) and len(accepted) > 60
            replayed = msgspec.json.decode(msgspec.json.encode(report.view))
            for view in views:
                view.pop("presence")  # who is at the table: no part of the view
                assert view == replayed
            # Every client, on either node, got the stream past its welcome in order and holds its view.
            stream = [msgspec.json.decode(line) for line in lines]
            for client in [*players, *spectators]:
                await client.wait_for_version(len(lines))
                assert client.envelopes == stream[1:]
                assert client.view == replayed
        finally:
            for client in [*players, *spectators]:
                await client.close()


def fields_of(frame: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """A place frame as `GameClient.place`'s arguments: token, space, the other fields."""
    rest = {k: v for k, v in frame.items() if k not in ("token", "space")}
    return frame["token"], frame["space"], rest


# Redis Cluster -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[RedisProcess], str]]:
    """A 3-master Redis Cluster of this module's own (started in a few seconds at most)."""
    nodes, url = start_cluster(tmp_path_factory.mktemp("scale-cluster"))
    try:
        yield nodes, url
    finally:
        for node in nodes:
            node.stop()


def master_of(cluster_url: str, game_id: str) -> str:
    """The master that holds a game's keys, after checking (CLUSTER KEYSLOT) that they share one slot."""
    with redis.RedisCluster.from_url(cluster_url, socket_timeout=5) as client:
        keys = (events_key(game_id), auth_key(game_id), commands_key(game_id))
        slots = {int(client.execute_command("CLUSTER KEYSLOT", key)) for key in keys}
        assert slots == {key_slot(events_key(game_id).encode())}
        node = client.get_node_from_key(events_key(game_id))
        assert node is not None
        return str(node.name)


async def test_three_nodes_on_a_redis_cluster_spread_games_over_masters_and_survive_a_node_kill(
    start_server: Callable[..., Any], cluster: tuple[list[RedisProcess], str]
) -> None:
    _, url = cluster
    servers = [start_server(redis_url=url) for _ in range(NODES)]
    async with asyncio.timeout(DEADLINE), httpx.AsyncClient(timeout=5) as http:
        for server in servers:
            ready = await http.get(f"{server.url}/readyz")
            assert ready.status_code == 200, ready.text
        games = [await new_game(servers[i % NODES].url, ["Ada", "Ben"]) for i in range(9)]
        masters = {game_id: master_of(url, game_id) for game_id, _ in games}
        assert len(set(masters.values())) >= 2
        for i, (game_id, tokens) in enumerate(games):  # the Lua append on every master, from every node
            async with await GameClient.connect(servers[i % NODES].url, game_id, tokens[i % 2]) as player:
                answer = await player.place({"kind": "performance", "era": "classical"}, "viola")
                assert answer["type"] == "accepted" and answer["version"] == 2, answer
        table = await play_and_kill(servers, seed=11, victim=1)
        assert master_of(url, table.game_id)
        alive = servers[0].url
        for game_id, _ in games:
            assert [e["version"] for e in await get_events(alive, game_id)] == [1, 2]
        for server in (servers[0], servers[2]):
            assert (await http.get(f"{server.url}/readyz")).status_code == 200
