"""ORCHESTRA_ACK on a real primary and replica: `replica` accepts what a replica has, answers unavailable
within its timeout what no replica took (written on the primary all the same), and the command's retry
gets its first outcome, on a standalone Redis and per shard on a Cluster; `replica_fsync` is refused, in
words, by a Redis before 7.2."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio

from domain import Place, RepairToken
from server.engine.games import Games
from server.store import Append, Appended, StoreUnavailable
from server.store.redis import AckLevelRefused, RedisEventStore
from server.store.redis.keys import events_key
from tests.support.appends import append
from tests.support.redis import (
    RedisProcess,
    bounded,
    new_id,
    start_cluster,
    start_replicated,
    stream_entries,
)

pytestmark = pytest.mark.integration

ACK_TIMEOUT_MS = 300
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[RedisProcess, RedisProcess]]:
    """A primary and its replica, in sync."""
    primary, replica = start_replicated(tmp_path)
    try:
        yield primary, replica
    finally:
        for node in (replica, primary):
            if node.process is not None:
                node.process.send_signal(signal.SIGCONT)
            node.stop()


def _paused(node: RedisProcess) -> None:
    assert node.process is not None
    node.process.send_signal(signal.SIGSTOP)


def _resumed(node: RedisProcess) -> None:
    assert node.process is not None
    node.process.send_signal(signal.SIGCONT)


def _place(seat: int, id: str) -> Place:
    return Place(seat=seat, id=id, token=RepairToken("winds"), space="oboe")


async def test_replica_level_accepts_what_the_replica_holds(pair: tuple[RedisProcess, RedisProcess]) -> None:
    primary, replica = pair
    store = await bounded(RedisEventStore.from_url(primary.url, ack="replica", ack_timeout_ms=ACK_TIMEOUT_MS))
    try:
        game_id = new_id()
        await bounded(store.create(game_id, b"1", {}))
        landed = await bounded(append(store, game_id, 1, [b"2", b"3"], "k1"))
        assert (landed.first, landed.last, landed.duplicate) == (2, 3, False)
        # Accepted means the replica had it when the answer came: no wait needed to read it there.
        with redis.Redis(port=replica.port) as client:
            assert [entry_id for entry_id, _ in stream_entries(client, events_key(game_id))] == [
                b"0-1",
                b"0-2",
                b"0-3",
            ]
    finally:
        await bounded(store.close())


async def test_a_script_redis_forgot_is_sent_whole_and_still_waited_for(
    pair: tuple[RedisProcess, RedisProcess],
) -> None:
    primary, replica = pair
    store = await bounded(RedisEventStore.from_url(primary.url, ack="replica", ack_timeout_ms=ACK_TIMEOUT_MS))
    try:
        game_id = new_id()
        await bounded(store.create(game_id, b"1", {}))
        with redis.Redis(port=primary.port) as client:
            client.script_flush()
        assert (await bounded(append(store, game_id, 1, [b"2"], "k1"))).last == 2
        _paused(replica)
        try:
            with redis.Redis(port=primary.port) as client:
                client.script_flush()
            # EVALSHA answered NOSCRIPT, then EVAL wrote: the wait that follows it still finds no replica.
            with pytest.raises(StoreUnavailable, match="no replica"):
                await bounded(append(store, game_id, 2, [b"3"], "k2"))
        finally:
            _resumed(replica)
    finally:
        await bounded(store.close())


async def test_an_append_no_replica_took_is_unavailable_and_its_retry_gets_the_first_outcome(
    pair: tuple[RedisProcess, RedisProcess],
) -> None:
    primary, replica = pair
    store = await bounded(RedisEventStore.from_url(primary.url, ack="replica", ack_timeout_ms=ACK_TIMEOUT_MS))
    try:
        game_id = new_id()
        await bounded(store.create(game_id, b"1", {}))
        _paused(replica)
        try:
            started = time.monotonic()
            with pytest.raises(StoreUnavailable, match="no replica"):
                await bounded(append(store, game_id, 1, [b"2"], "k1"))
            # Within the timeout (and the machine's slack), not the command timeout.
            assert time.monotonic() - started < ACK_TIMEOUT_MS / 1000 + 1.5
            # It was written on the primary all the same.
            with redis.Redis(port=primary.port) as client:
                assert len(stream_entries(client, events_key(game_id))) == 2
            # A retry that only repeats is not accepted either while no replica takes the round.
            with pytest.raises(StoreUnavailable):
                await bounded(append(store, game_id, 1, [b"2"], "k1"))
            # Nor is a new game.
            with pytest.raises(StoreUnavailable, match="no replica had the new game"):
                await bounded(store.create(new_id(), b"1", {}))
        finally:
            _resumed(replica)
        retried = await bounded(append(store, game_id, 1, [b"2"], "k1"), 10)
        assert (retried.first, retried.last, retried.duplicate) == (2, 2, True)
        assert [record.data for record in await bounded(store.read(game_id))] == [b"1", b"2"]
    finally:
        await bounded(store.close())


async def test_a_game_command_no_replica_took_answers_unavailable_and_its_retry_the_first_outcome(
    pair: tuple[RedisProcess, RedisProcess],
) -> None:
    """Through the engine, as the websocket route submits commands: the owner's round waits once."""
    primary, replica = pair
    store = await bounded(RedisEventStore.from_url(primary.url, ack="replica", ack_timeout_ms=ACK_TIMEOUT_MS))
    games = Games(store)
    try:
        game_id = (await bounded(games.create(["Ada", "Ben", "Cy"]))).game_id
        assert (await bounded(games.handle(game_id, _place(0, "first")))).version == 2
        _paused(replica)
        try:
            with pytest.raises(StoreUnavailable):
                await bounded(games.handle(game_id, _place(1, "second")), 10)
        finally:
            _resumed(replica)
        outcome = await bounded(games.handle(game_id, _place(1, "second")), 10)
        assert outcome.version == 3
        assert len(await bounded(store.read(game_id))) == 3
        # The game goes on from what the stream holds.
        assert (await bounded(games.handle(game_id, _place(2, "third")), 10)).version == 4
    finally:
        await games.close()
        await bounded(store.close())


async def test_replica_fsync_is_refused_by_a_redis_before_7_2(
    pair: tuple[RedisProcess, RedisProcess],
) -> None:
    primary, _ = pair
    with redis.Redis(port=primary.port) as client:
        version = str(client.info("server")["redis_version"])
    if tuple(int(part) for part in version.split(".")[:2]) >= (7, 2):
        pytest.fail(f"this machine's redis-server is {version}: the refusal needs one before 7.2")
    refusal = rf"WAITAOF, Redis 7\.2 or later; this Redis is {re.escape(version)}"
    with pytest.raises(AckLevelRefused, match=refusal):
        await bounded(RedisEventStore.from_url(primary.url, ack="replica_fsync"))


async def test_an_unknown_level_is_refused(pair: tuple[RedisProcess, RedisProcess]) -> None:
    with pytest.raises(AckLevelRefused, match="unknown acknowledgement level 'disk'"):
        await bounded(RedisEventStore.from_url(pair[0].url, ack="disk"))


async def test_on_a_cluster_each_shard_waits_for_its_replica(tmp_path: Path) -> None:
    """A 3-master Cluster with a replica each: a round's appends on a master whose replica is stopped
    answer unavailable (a retry too), those of other masters are accepted, and the retry gets the first
    outcome once the replica is back."""
    nodes, url = start_cluster(tmp_path, 3, replicas=True, node_timeout_ms=60_000)
    store = await bounded(
        RedisEventStore.from_url(url, cluster=True, ack="replica", ack_timeout_ms=ACK_TIMEOUT_MS), 15
    )
    try:
        client = store.client
        assert isinstance(client, redis.asyncio.RedisCluster)
        await bounded(client.initialize())

        def master_of(game_id: str) -> int:
            node = client.get_node_from_key(events_key(game_id))
            assert node is not None
            return next(i for i in range(3) if nodes[i].port == int(node.port))

        games = [new_id() for _ in range(12)]
        for game_id in games:
            await bounded(store.create(game_id, b"1", {}))
        stopped = master_of(games[0])
        elsewhere = next(g for g in games if master_of(g) != stopped)
        results = await bounded(
            store.append_many([Append(g, 1, [b"2"], "k1") for g in (games[0], elsewhere)])
        )
        assert [(r.first, r.duplicate) for r in results if isinstance(r, Appended)] == [
            (2, False),
            (2, False),
        ]

        _paused(nodes[stopped + 3])
        try:
            here, there = await bounded(
                store.append_many([Append(games[0], 2, [b"3"], "k2"), Append(elsewhere, 2, [b"3"], "k2")])
            )
            assert isinstance(here, StoreUnavailable) and "no replica" in str(here)
            assert isinstance(there, Appended) and there.last == 3
            # A round of the repeat only is not accepted either (its mark, not its append, is waited for).
            (again,) = await bounded(store.append_many([Append(games[0], 2, [b"3"], "k2")]))
            assert isinstance(again, StoreUnavailable)
        finally:
            _resumed(nodes[stopped + 3])
        (retried,) = await bounded(store.append_many([Append(games[0], 2, [b"3"], "k2")]), 10)
        assert isinstance(retried, Appended) and (retried.first, retried.duplicate) == (3, True)
    finally:
        await bounded(store.close())
        for node in nodes:
            if node.process is not None:
                node.process.send_signal(signal.SIGCONT)
            node.stop()


async def _serve(tmp_path: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    """`orchestra serve` with these settings only, run to its end."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRA_")}
    env.update({"ORCHESTRA_DATA_DIR": str(tmp_path / "var"), **settings})
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "server.ops.cli", "serve", "--port", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_a_node_refuses_to_start_at_a_level_its_redis_cannot_give(
    pair: tuple[RedisProcess, RedisProcess], tmp_path: Path
) -> None:
    primary, _ = pair
    done = await _serve(tmp_path, ORCHESTRA_REDIS_URL=primary.url, ORCHESTRA_ACK="replica_fsync")
    assert done.returncode != 0
    assert "ORCHESTRA_ACK=replica_fsync needs WAITAOF, Redis 7.2 or later" in done.stdout + done.stderr
    done = await _serve(tmp_path, ORCHESTRA_ACK="replica")
    assert done.returncode != 0
    assert "ORCHESTRA_ACK=replica needs a Redis with a replica" in done.stdout + done.stderr
