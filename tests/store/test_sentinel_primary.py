"""Whom a Sentinel client takes for the primary: the address a majority of the Sentinels name, and a Redis
that says it is a primary. A Sentinel not yet told of a failover, or a demoted primary a connection still
reaches, must not get the node's reads or writes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.asyncio.sentinel import MasterNotFoundError
from redis.exceptions import ConnectionError

from server.store.redis.sentinel import PrimaryConnection, QuorumSentinel
from tests.support.redis import RedisProcess, SentinelProcess, bounded, start_replicated, start_sentinels

SERVICE = "orchestra-primary"


async def _close(*managers: QuorumSentinel) -> None:
    for manager in managers:
        for sentinel in manager.sentinels:
            await sentinel.aclose()


@pytest.fixture
def split_sentinels(tmp_path: Path) -> Iterator[tuple[RedisProcess, RedisProcess, list[SentinelProcess]]]:
    """Two primaries each Sentinels take for the service: two Sentinels watch the first, one the second
    (a Sentinel that missed the news)."""
    first = RedisProcess(tmp_path / "first").start()
    second = RedisProcess(tmp_path / "second").start()
    started: list[SentinelProcess] = []
    try:
        started += start_sentinels(tmp_path / "a", first, SERVICE, count=2, replicas=0)
        started += start_sentinels(tmp_path / "b", second, SERVICE, count=1, replicas=0)
        yield first, second, started
    finally:
        for process in [*started, first, second]:
            process.stop()


async def test_the_primary_is_the_one_a_majority_of_the_sentinels_names(
    split_sentinels: tuple[RedisProcess, RedisProcess, list[SentinelProcess]],
) -> None:
    first, second, (a1, a2, b) = split_sentinels
    everyone = QuorumSentinel([("127.0.0.1", s.port) for s in (b, a1, a2)])  # the stray one asked first
    assert await bounded(everyone.discover_master(SERVICE)) == ("127.0.0.1", first.port)
    split = QuorumSentinel([("127.0.0.1", s.port) for s in (b, a1)])
    with pytest.raises(MasterNotFoundError, match="no majority of the 2 Sentinels"):
        await bounded(split.discover_master(SERVICE))
    gone = RedisProcess(Path(a2.directory) / "gone")  # a Sentinel address nothing listens on
    one_down = QuorumSentinel([("127.0.0.1", s.port) for s in (a1, a2)] + [("127.0.0.1", gone.port)])
    try:
        assert await bounded(one_down.discover_master(SERVICE)) == ("127.0.0.1", first.port)
    finally:
        await _close(everyone, split, one_down)


async def test_a_connection_keeps_to_a_redis_that_is_a_primary_and_drops_one_demoted(tmp_path: Path) -> None:
    primary, replica = start_replicated(tmp_path)
    sentinels = start_sentinels(tmp_path, primary, SERVICE, count=3, replicas=1)
    manager = QuorumSentinel([("127.0.0.1", s.port) for s in sentinels])
    client = manager.master_for(SERVICE, connection_class=PrimaryConnection)
    made = []
    try:
        assert await bounded(client.ping())
        pool = client.connection_pool
        refused = pool.make_connection()
        made.append(refused)
        with pytest.raises(ConnectionError, match="is not a primary"):
            await bounded(refused.connect_to(("127.0.0.1", replica.port)))
        kept = pool.make_connection()
        made.append(kept)
        await bounded(kept.connect_to(("127.0.0.1", primary.port)))
        # The primary is demoted under the open connection: its next wait is refused, and it is dropped.
        with redis.Redis(port=replica.port) as promoted, redis.Redis(port=primary.port) as demoted:
            promoted.execute_command("REPLICAOF", "NO", "ONE")
            demoted.execute_command("REPLICAOF", "127.0.0.1", str(replica.port))
        await kept.send_command("WAIT", 1, 10)
        with pytest.raises(ConnectionError, match="a replica now"):
            await bounded(kept.read_response())
        assert not kept.is_connected
    finally:
        for connection in made:
            await connection.disconnect()
        await client.aclose()
        await _close(manager)
        for process in [*sentinels, replica, primary]:
            process.stop()
