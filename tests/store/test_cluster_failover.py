"""A Redis Cluster master fails over to its replica while a game is played and followed: the store
answers unavailable meanwhile, then appends and tails on the promoted replica, losing nothing; and a
failover that does lose an acknowledged append leaves the game one unbroken chain."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import msgspec
import pytest
import redis
import redis.asyncio

from domain import Place, RepairToken
from server.engine.games import Games
from server.engine.owner import Follower
from server.engine.signing import Keyring
from server.ops.verify import verify
from server.protocol.codes import HISTORY_CHANGED
from server.store import StoreError, StoreUnavailable
from server.store.redis import RedisEventStore
from server.store.redis.keys import events_key
from tests.support.appends import append
from tests.support.redis import RedisProcess, bounded, new_id, start_cluster
from tests.support.waiting import until

pytestmark = pytest.mark.integration

MASTERS = 3
# How long a master may be silent before its replica takes over: short, so the test is quick, yet long
# enough that a busy machine (a CI run) does not fail a master over by mistake.
NODE_TIMEOUT_MS = 1500
FAILOVER_DEADLINE = 30.0
T = TypeVar("T")


@pytest.fixture
def replicated_cluster(tmp_path: Path) -> Iterator[list[RedisProcess]]:
    """3 masters, each with a replica (nodes 3, 4, 5 replicate nodes 0, 1, 2)."""
    nodes, _ = start_cluster(tmp_path, MASTERS, replicas=True, node_timeout_ms=NODE_TIMEOUT_MS)
    try:
        yield nodes
    finally:
        for node in nodes:
            node.stop()


def _promoted(replica: RedisProcess) -> bool:
    with redis.Redis(port=replica.port, socket_timeout=1) as client:
        role = client.info("replication").get("role")
        state = client.cluster("INFO").get("cluster_state")
    return bool(role == "master" and state == "ok")


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


async def _append_when_possible(store: RedisEventStore, game_id: str, expected: int, key: str) -> int:
    """Append one event, retrying (with the same key: a repeat changes nothing, and answers where the
    first one landed) while the store is unavailable; the version it landed at."""
    landed = await _when_available(
        lambda: append(store, game_id, expected, [str(expected + 1).encode()], key)
    )
    assert landed.first == landed.last
    return int(landed.last)


async def test_a_master_failover_loses_no_event_and_the_tail_resumes_on_the_promoted_replica(
    replicated_cluster: list[RedisProcess],
) -> None:
    nodes = replicated_cluster
    # The store knows the cluster by its first node, which stays up: the game lives on another master.
    store = await bounded(RedisEventStore.from_url(nodes[0].url, cluster=True))
    try:
        client = store.client
        assert isinstance(client, redis.asyncio.RedisCluster)
        await bounded(client.initialize())

        def master_port(game_id: str) -> int:
            node = client.get_node_from_key(events_key(game_id))
            assert node is not None
            return int(node.port)

        game_id = new_id()
        while master_port(game_id) == nodes[0].port:
            game_id = new_id()
        victim = next(i for i in range(MASTERS) if nodes[i].port == master_port(game_id))
        await bounded(store.create(game_id, b"1", {}))

        seen: list[int] = []
        interruptions = 0

        async def follow() -> None:
            # As a game's owner follows its stream: a failed tail is started again after the last
            # version it delivered.
            nonlocal interruptions
            while True:
                try:
                    async for batch in store.tail(game_id, seen[-1] if seen else 0):
                        seen.extend(record.version for record in batch)
                except StoreError:
                    interruptions += 1
                    await asyncio.sleep(0.1)  # the owner's pause before it follows again

        follower = asyncio.ensure_future(follow())
        try:
            assert await _append_when_possible(store, game_id, 1, "before") == 2
            await until(lambda: seen == [1, 2], what="the tail's first two versions")
            # Replication is asynchronous: what the replica had not received would be lost with its
            # master (docs/operations.md). This failover is to lose nothing: the replica has it all.
            with redis.Redis(port=nodes[victim].port, socket_timeout=10) as master:
                assert master.wait(1, 5000) == 1, "the replica did not acknowledge the game's writes"

            nodes[victim].kill()
            await until(lambda: _promoted(nodes[victim + MASTERS]), FAILOVER_DEADLINE, "the replica promoted")

            assert await _append_when_possible(store, game_id, 2, "after") == 3
            await until(lambda: seen == [1, 2, 3], FAILOVER_DEADLINE, "the tail resumed on the replica")
        finally:
            follower.cancel()
            await asyncio.gather(follower, return_exceptions=True)
        assert interruptions >= 1  # the tail did lose its node, and came back
        assert [r.version for r in await bounded(store.read(game_id))] == [1, 2, 3]
    finally:
        await bounded(store.close())


class _Closable:
    """A follower's outbox that keeps how it was closed."""

    def __init__(self) -> None:
        self.closed_with: int | None = None

    def put(self, data: bytes) -> None:
        pass

    def shut(self, code: int, reason: str) -> None:
        self.closed_with = code


async def _handled(games: Games, game_id: str, command: Place) -> int:
    """The version a command landed at, retried while the store is unavailable."""
    return (await _when_available(lambda: games.handle(game_id, command))).version


@pytest.mark.logs_warnings
async def test_a_failover_that_loses_an_acknowledged_append_leaves_one_unbroken_chain(
    replicated_cluster: list[RedisProcess],
) -> None:
    """A real loss: the master acknowledges an append its replica never gets (cut off just before it)
    and dies. Another node writes another version 3 on the promoted replica. The node that folded the
    lost envelope must not write after it: its next command lands as version 4 on one unbroken chain."""
    nodes = replicated_cluster
    here_store = await bounded(RedisEventStore.from_url(nodes[0].url, cluster=True))
    there_store = await bounded(RedisEventStore.from_url(nodes[0].url, cluster=True))
    here, there = Games(here_store), Games(there_store)
    try:
        client = here_store.client
        assert isinstance(client, redis.asyncio.RedisCluster)
        await bounded(client.initialize())
        # A game on a master other than the node the stores were given, which stays up.
        while True:
            game_id = (await bounded(here.create(["Ada", "Ben", "Cy"]))).game_id
            owner = client.get_node_from_key(events_key(game_id))
            assert owner is not None
            if owner.port != nodes[0].port:
                break
        victim = next(i for i in range(MASTERS) if nodes[i].port == owner.port)
        game = await bounded(here.get(game_id))
        assert game is not None
        outbox = _Closable()
        game.follow(Follower(outbox))  # type: ignore[arg-type]

        assert await _handled(here, game_id, _place(0, "kept")) == 2
        replica = nodes[victim + MASTERS].process
        assert replica is not None
        with redis.Redis(port=nodes[victim].port, socket_timeout=10) as master:
            assert master.wait(1, 5000) == 1
            # The replica, stopped for a moment (well under the node timeout), is cut off and cannot come
            # back before its master acknowledges the append and dies.
            replica.send_signal(signal.SIGSTOP)
            try:
                master.client_kill_filter(_type="replica")
                assert await _handled(here, game_id, _place(1, "lost")) == 3
                nodes[victim].kill()
            finally:
                replica.send_signal(signal.SIGCONT)
        await until(lambda: _promoted(nodes[victim + MASTERS]), FAILOVER_DEADLINE, "the replica promoted")

        async def stream() -> list[bytes]:
            return [record.data for record in await _when_available(lambda: there_store.read(game_id))]

        assert len(await stream()) == 2, "the replica had the append: no loss to test"
        assert await _handled(there, game_id, _place(2, "there")) == 3
        assert game.version == 3  # still the lost envelope
        assert await _handled(here, game_id, _place(2, "after")) == 4

        lines = await stream()
        report = verify(lines, keys=Keyring([here.node.signer.public, there.node.signer.public]))
        assert report.ok and report.envelopes == 4, report.problem
        assert msgspec.json.decode(lines[2])["seat"] == 2  # the other node's version 3
        assert game.view == report.view
        assert outbox.closed_with == HISTORY_CHANGED
    finally:
        await here.close()
        await there.close()
        await bounded(here_store.close())
        await bounded(there_store.close())


def _place(seat: int, id: str) -> Place:
    return Place(seat=seat, id=id, token=RepairToken("winds"), space="oboe")
