"""The presence part of the store port, one contract for every adapter (memory, Redis, Redis Cluster): each
node's field per game, written and read in bulk, removed one node at a time, and forgotten whole once not
written for its time to live."""

from __future__ import annotations

import asyncio

from server.store import PresenceStore
from tests.support.redis import bounded, new_id


async def test_each_nodes_field_reads_back_per_game_in_the_order_asked(store: PresenceStore) -> None:
    first, second, never = new_id(), new_id(), new_id()
    await bounded(store.write_presence("node-a", {first: b"a1", second: b"a2"}, 30))
    await bounded(store.write_presence("node-b", {second: b"b2"}, 30))
    rows = await bounded(store.read_presence([second, never, first]))
    assert rows == [{"node-a": b"a2", "node-b": b"b2"}, {}, {"node-a": b"a1"}]
    assert await bounded(store.read_presence([])) == []


async def test_a_write_replaces_the_nodes_field_and_none_removes_it_alone(store: PresenceStore) -> None:
    game_id = new_id()
    await bounded(store.write_presence("node-a", {game_id: b"old"}, 30))
    await bounded(store.write_presence("node-b", {game_id: b"theirs"}, 30))
    await bounded(store.write_presence("node-a", {game_id: b"new"}, 30))
    assert await bounded(store.read_presence([game_id])) == [{"node-a": b"new", "node-b": b"theirs"}]
    await bounded(store.write_presence("node-a", {game_id: None}, 30))
    assert await bounded(store.read_presence([game_id])) == [{"node-b": b"theirs"}]
    await bounded(store.write_presence("node-b", {game_id: None, new_id(): None}, 30))
    assert await bounded(store.read_presence([game_id])) == [{}]


async def test_a_games_presence_is_forgotten_whole_once_not_written_for_its_ttl(store: PresenceStore) -> None:
    kept, dropped = new_id(), new_id()
    await bounded(store.write_presence("node-a", {kept: b"a", dropped: b"a"}, 0.4))
    await bounded(store.write_presence("node-b", {dropped: b"b"}, 0.4))
    await asyncio.sleep(0.25)
    # A write pushes its game's expiry away; a removal of a field does not.
    await bounded(store.write_presence("node-b", {kept: b"b"}, 0.4))
    await bounded(store.write_presence("node-a", {dropped: None}, 0.4))
    await asyncio.sleep(0.25)
    assert await bounded(store.read_presence([kept, dropped])) == [{"node-a": b"a", "node-b": b"b"}, {}]
    await asyncio.sleep(0.3)
    assert await bounded(store.read_presence([kept, dropped])) == [{}, {}]


async def test_many_games_are_written_and_read_back_together(store: PresenceStore) -> None:
    games = [new_id() for _ in range(200)]
    await bounded(store.write_presence("node-a", {g: g.encode() for g in games}, 30))
    rows = await bounded(store.read_presence(games))
    assert rows == [{"node-a": g.encode()} for g in games]
