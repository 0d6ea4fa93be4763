"""Redis Sentinel: the redis+sentinel:// URL form, and a node that follows a failover by itself. A real
primary, its replica and three Sentinels; a game is played on one node and followed on another, the
primary is killed, the Sentinels promote the replica, and the node's commands, the other node's tail
and presence carry on against it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import msgspec
import pytest
import redis

from domain import Place, RepairToken
from server.engine.games import Games
from server.engine.owner import Follower
from server.store import StoreUnavailable
from server.store.redis import RedisEventStore, SentinelUrlError
from server.store.redis.keys import presence_key
from server.store.redis.sentinel import SentinelAddress, parse_sentinel_url
from tests.support.redis import (
    RedisProcess,
    SentinelProcess,
    bounded,
    start_replica,
    start_replicated,
    start_sentinels,
)
from tests.support.waiting import until

SERVICE = "orchestra-primary"
# Sentinels call the primary down after this long without an answer: short, for a quick test.
DOWN_AFTER_MS = 1000
# Down-after, the election and the promotion, with a loaded machine's slack.
FAILOVER_DEADLINE = 30.0
T = TypeVar("T")


def test_the_url_names_sentinels_a_service_a_database_and_the_primarys_credentials() -> None:
    assert parse_sentinel_url("redis+sentinel://s1:26380,s2,10.0.0.3:5000/main/2") == SentinelAddress(
        [("s1", 26380), ("s2", 26379), ("10.0.0.3", 5000)], "main", 2, None, None
    )
    assert parse_sentinel_url("redis+sentinel://app:p%40ss@s1/main") == SentinelAddress(
        [("s1", 26379)], "main", 0, "app", "p@ss"
    )
    assert parse_sentinel_url("redis+sentinel://:secret@s1:1/main").password == "secret"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("redis://s1/main", "not a redis\\+sentinel"),
        ("redis+sentinel://s1:26379", "service_name"),
        ("redis+sentinel://s1:26379/", "service_name"),
        ("redis+sentinel://s1/main/0/extra", "service_name"),
        ("redis+sentinel://s1/main/zero", "not a number"),
        ("redis+sentinel://s1:port/main", "bad Sentinel address"),
        ("redis+sentinel://s1,,s2/main", "without a host"),
    ],
)
def test_a_bad_url_is_refused_in_words(url: str, problem: str) -> None:
    with pytest.raises(SentinelUrlError, match=problem):
        parse_sentinel_url(url)


class _Frames:
    """A follower's outbox that keeps the versions of the envelopes it is sent."""

    def __init__(self) -> None:
        self.versions: list[int] = []
        self.closed_with: int | None = None

    def put(self, data: bytes) -> None:
        frame = msgspec.json.decode(data)
        if frame.get("type") == "events":
            self.versions += [envelope["version"] for envelope in frame["envelopes"]]

    def shut(self, code: int, reason: str) -> None:
        self.closed_with = code


@pytest.fixture(params=["primary", "replica"])
def watched(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[str, RedisProcess, list[RedisProcess], list[SentinelProcess]]]:
    """An acknowledgement level, a primary, its replicas (two at `replica`: one is left to acknowledge
    once the other is promoted) and three Sentinels watching them as SERVICE."""
    ack = str(request.param)
    primary, replica = start_replicated(tmp_path)
    replicas = [replica]
    sentinels: list[SentinelProcess] = []
    try:
        if ack == "replica":
            replicas.append(start_replica(tmp_path / "replica2", primary))
        sentinels = start_sentinels(
            tmp_path, primary, SERVICE, down_after_ms=DOWN_AFTER_MS, replicas=len(replicas)
        )
        yield ack, primary, replicas, sentinels
    finally:
        for node in (*sentinels, *replicas, primary):
            node.stop()


def _primary_port(sentinel: SentinelProcess) -> int:
    with redis.Redis(port=sentinel.port, socket_timeout=1, decode_responses=True) as client:
        _, port = client.sentinel_get_master_addr_by_name(SERVICE)
    return int(port)


async def _when_available(attempt: Callable[[], Awaitable[T]]) -> T:
    """`attempt()`'s result, tried again while the store is unavailable (a failover in progress)."""

    async def tried() -> tuple[T] | None:
        try:
            return (await bounded(attempt(), 10),)
        except StoreUnavailable:
            return None

    found = await until(tried, FAILOVER_DEADLINE, "the store available again after the failover")
    assert found is not None
    return found[0]


def _place(seat: int, id: str) -> Place:
    return Place(seat=seat, id=id, token=RepairToken("winds"), space="oboe")


@pytest.mark.integration
@pytest.mark.logs_warnings
async def test_a_node_follows_a_sentinel_failover_its_commands_tails_and_presence_included(
    watched: tuple[str, RedisProcess, list[RedisProcess], list[SentinelProcess]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    ack, primary, replicas, sentinels = watched
    url = "redis+sentinel://" + ",".join(f"127.0.0.1:{s.port}" for s in sentinels) + f"/{SERVICE}"
    here_store = await bounded(RedisEventStore.from_url(url, ack=ack, ack_timeout_ms=2000))
    there_store = await bounded(RedisEventStore.from_url(url))
    here, there = Games(here_store), Games(there_store)
    try:
        game_id = (await bounded(here.create(["Ada", "Ben", "Cy"]))).game_id
        followed = await bounded(there.get(game_id))
        assert followed is not None
        frames = _Frames()
        followed.follow(Follower(frames))  # type: ignore[arg-type]
        assert (await bounded(here.handle(game_id, _place(0, "before")))).version == 2
        await until(lambda: 2 in frames.versions, 10, "the other node's follower sent version 2")
        await bounded(here_store.write_presence("node-a", {game_id: b"before"}, ttl=30))
        if ack == "primary":
            # Replication is asynchronous: this failover is to lose nothing, so the replicas have it all
            # first (at `replica`, accepted means one has, and the Sentinels promote the most up to date).
            with redis.Redis(port=primary.port, socket_timeout=10) as client:
                assert client.wait(1, 5000) == 1, "the replica did not acknowledge the game's writes"

        primary.kill()
        killed = time.monotonic()
        ports = {replica.port: replica for replica in replicas}
        await until(lambda: _primary_port(sentinels[0]) in ports, FAILOVER_DEADLINE, "a replica promoted")
        promoted = ports[_primary_port(sentinels[0])]

        landed = await _when_available(lambda: here.handle(game_id, _place(1, "after")))
        assert landed.version == 3
        assert time.monotonic() - killed < FAILOVER_DEADLINE
        await until(lambda: 3 in frames.versions, FAILOVER_DEADLINE, "the follower sent version 3")
        assert frames.closed_with is None, "the failover lost nothing: no 4001"

        await _when_available(lambda: here_store.write_presence("node-a", {game_id: b"after"}, ttl=30))
        (presence,) = await _when_available(lambda: there_store.read_presence([game_id]))
        assert presence == {"node-a": b"after"}
        with redis.Redis(port=promoted.port) as client:
            assert client.info("replication")["role"] == "master"
            assert client.hget(presence_key(game_id), "node-a") == b"after"
        assert [r.version for r in await bounded(there_store.read(game_id))] == [1, 2, 3]
        # The other node's tail did lose its primary, and came back on the promoted one.
        assert any(r.getMessage() == "tail interrupted, retrying" for r in caplog.records)
    finally:
        await here.close()
        await there.close()
        await bounded(here_store.close())
        await bounded(there_store.close())
        await asyncio.sleep(0)
