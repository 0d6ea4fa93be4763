"""The Redis adapter on a real 3-master Redis Cluster (the contract suite runs there too, as `cluster`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio
from redis.crc import key_slot

from server.store import Appended, ConcurrencyConflict
from server.store.redis import RedisEventStore
from server.store.redis.keys import auth_key, commands_key, events_key
from tests.support.appends import append
from tests.support.redis import bounded, new_id

pytestmark = pytest.mark.integration


@pytest.fixture
async def cluster_store(cluster_url: str) -> AsyncIterator[RedisEventStore]:
    store = await bounded(RedisEventStore.from_url(cluster_url))
    try:
        yield store
    finally:
        await bounded(store.close())


async def test_from_url_detects_cluster_mode(cluster_store: RedisEventStore) -> None:
    assert isinstance(cluster_store.client, redis.asyncio.RedisCluster)


def test_a_games_keys_share_one_slot() -> None:
    for game_id in (new_id() for _ in range(50)):
        slots = {key_slot(key(game_id).encode()) for key in (events_key, auth_key, commands_key)}
        assert len(slots) == 1


async def test_games_spread_over_several_nodes_and_each_lives_on_its_own_node(
    cluster_store: RedisEventStore,
) -> None:
    client = cluster_store.client
    assert isinstance(client, redis.asyncio.RedisCluster)
    owners = set()
    for game_id in (new_id() for _ in range(30)):
        await bounded(cluster_store.create(game_id, b"1", {"seat:0": "h"}))
        node = client.get_node_from_key(events_key(game_id))
        assert node is not None, f"no node holds {game_id}'s key"
        owners.add(node.name)
        direct = redis.asyncio.Redis(host=node.host, port=int(node.port))
        try:
            assert await bounded(direct.exists(events_key(game_id), auth_key(game_id))) == 2
        finally:
            await direct.aclose()
    assert len(owners) == 3


async def test_the_lua_append_is_atomic_and_idempotent_in_cluster_mode(
    cluster_store: RedisEventStore,
) -> None:
    game_id = new_id()
    await bounded(cluster_store.create(game_id, b"1", {}))
    assert await bounded(append(cluster_store, game_id, 1, [b"2", b"3"], "k")) == Appended(2, 3)
    assert await bounded(append(cluster_store, game_id, 1, [b"2", b"3"], "k")) == Appended(
        2, 3, duplicate=True
    )
    with pytest.raises(ConcurrencyConflict):
        await bounded(append(cluster_store, game_id, 1, [b"x"], "other"))
    assert [r.version for r in await bounded(cluster_store.read(game_id))] == [1, 2, 3]


async def _getkeys_calls(client: redis.asyncio.RedisCluster) -> int:
    """How many COMMAND GETKEYS the cluster's nodes have answered since they started."""
    total = 0
    for node in client.get_nodes():
        direct = redis.asyncio.Redis(host=node.host, port=int(node.port))
        try:
            stats = await bounded(direct.info("commandstats"))
        finally:
            await direct.aclose()
        total += int(stats.get("cmdstat_command|getkeys", {}).get("calls", 0))
    return total


async def test_tails_read_from_the_node_holding_the_game_without_asking_where_its_key_goes(
    cluster_store: RedisEventStore,
) -> None:
    # redis-py would ask a node (COMMAND GETKEYS) where each XREAD goes: two more round trips a read,
    # and every tail of the node hanging on that one Cluster node.
    client = cluster_store.client
    assert isinstance(client, redis.asyncio.RedisCluster)
    games = [new_id() for _ in range(12)]
    for game_id in games:
        await bounded(cluster_store.create(game_id, b"1", {}))
    owners = {getattr(client.get_node_from_key(events_key(game_id)), "name", None) for game_id in games}
    assert len(owners) > 1  # the tails read from several nodes
    before = await _getkeys_calls(client)

    async def follow(game_id: str) -> list[int]:
        versions: list[int] = []
        async for batch in cluster_store.tail(game_id, 0):
            versions += [record.version for record in batch]
            if versions[-1] >= 3:
                return versions
        raise AssertionError("the tail ended")

    tails = [asyncio.ensure_future(follow(game_id)) for game_id in games]
    for game_id in games:
        await bounded(append(cluster_store, game_id, 1, [b"2"], "a"))
        await bounded(append(cluster_store, game_id, 2, [b"3"], "b"))
    assert await bounded(asyncio.gather(*tails)) == [[1, 2, 3]] * len(games)
    assert await _getkeys_calls(client) == before
