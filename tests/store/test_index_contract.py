"""The games index of the event-store port, one contract for every adapter: listed games newest first with
their newest record, live games counted and capped, and games written before the index indexed later."""

from __future__ import annotations

import pytest

from server.store import EventStore, GameExists, Record, TooManyGames
from server.store.memory import MemoryEventStore
from server.store.redis import RedisEventStore
from server.store.redis.keys import INDEXED_KEY, LISTING_KEY, LIVE_KEY, PUBLIC_KEY
from tests.support.appends import append
from tests.support.redis import bounded, new_id

CREDENTIALS = {"seat:0": "hash-a"}


def env(n: int) -> bytes:
    return b'{"n":%d}' % n


async def made(store: EventStore, listing: bytes | None = None, events: int = 1) -> str:
    game_id = new_id()
    await bounded(store.create(game_id, env(1), CREDENTIALS, listing=listing))
    if events > 1:
        await bounded(append(store, game_id, 1, [env(n) for n in range(2, events + 1)], "setup"))
    return game_id


async def drop_index(store: EventStore, game_id: str) -> None:
    """Make `game_id` look written before the index existed: in the games list, in no part of the index."""
    if isinstance(store, MemoryEventStore):
        store.drop_index(game_id)
        return
    assert isinstance(store, RedisEventStore)
    client = store.client
    await bounded(client.zrem(PUBLIC_KEY, game_id))
    await bounded(client.hdel(LISTING_KEY, game_id))
    await bounded(client.srem(LIVE_KEY, game_id))
    await bounded(client.srem(INDEXED_KEY, game_id))


async def test_listed_games_come_newest_first_with_their_listing_and_newest_record(store: EventStore) -> None:
    first = await made(store, b'{"players":["Ada"]}')
    second = await made(store, b'{"players":["Ben"]}', events=3)
    found = await bounded(store.listed(2))
    assert [(g.game_id, g.listing, g.last) for g in found] == [
        (second, b'{"players":["Ben"]}', Record(3, env(3))),
        (first, b'{"players":["Ada"]}', Record(1, env(1))),
    ]
    await bounded(append(store, first, 1, [env(2)], "later"))
    assert (await bounded(store.listed(2)))[1].last == Record(2, env(2))


async def test_a_game_created_without_a_listing_is_never_listed(store: EventStore) -> None:
    listed = await made(store, b"{}")
    hidden = await made(store)
    ids = [g.game_id for g in await bounded(store.listed(1000))]
    assert listed in ids and hidden not in ids
    assert hidden in await bounded(store.games())


async def test_listed_returns_at_most_limit_games(store: EventStore) -> None:
    for _ in range(3):
        await made(store, b"{}")
    assert len(await bounded(store.listed(2))) == 2
    assert len(await bounded(store.listed(1))) == 1


async def test_live_games_counts_created_games_until_they_end_or_are_deleted(store: EventStore) -> None:
    before = await bounded(store.live_games())
    ending, deleted, private = await made(store, b"{}"), await made(store, b"{}"), await made(store)
    assert await bounded(store.live_games()) == before + 3
    await bounded(store.ended(ending))
    await bounded(store.ended(ending))  # idempotent
    assert await bounded(store.live_games()) == before + 2
    await bounded(store.delete(deleted))
    assert await bounded(store.live_games()) == before + 1
    assert deleted not in [g.game_id for g in await bounded(store.listed(1000))]
    assert deleted not in await bounded(store.games())
    await bounded(store.delete(ending))  # an ended game's delete changes no count
    assert await bounded(store.live_games()) == before + 1
    await bounded(store.ended(private))
    assert await bounded(store.live_games()) == before


async def test_a_store_at_its_cap_of_live_games_creates_nothing_until_one_ends(store: EventStore) -> None:
    cap = await bounded(store.live_games()) + 1
    first = new_id()
    await bounded(store.create(first, env(1), CREDENTIALS, listing=b"{}", max_live=cap))
    refused = new_id()
    with pytest.raises(TooManyGames):
        await bounded(store.create(refused, env(1), CREDENTIALS, listing=b"{}", max_live=cap))
    assert await bounded(store.read(refused)) == []
    assert await bounded(store.credentials(refused)) == {}
    assert refused not in await bounded(store.games())
    assert refused not in [g.game_id for g in await bounded(store.listed(1000))]
    assert await bounded(store.live_games()) == cap
    with pytest.raises(GameExists):  # an existing id is that, whatever the count
        await bounded(store.create(first, env(1), CREDENTIALS, max_live=cap))
    await bounded(store.ended(first))
    await bounded(store.create(refused, env(1), CREDENTIALS, max_live=cap))
    assert await bounded(store.read(refused)) == [Record(1, env(1))]


async def test_a_game_written_before_the_index_is_unindexed_until_indexed(store: EventStore) -> None:
    game_id = await made(store, b'{"players":["Ada"]}', events=2)
    before = await bounded(store.live_games())
    await drop_index(store, game_id)
    assert game_id in await bounded(store.unindexed())
    assert game_id not in [g.game_id for g in await bounded(store.listed(1000))]
    assert await bounded(store.live_games()) == before - 1
    await bounded(store.index(game_id, listing=b'{"players":["Ada"]}', live=True))
    await bounded(store.index(game_id, listing=b'{"players":["Ada"]}', live=True))  # idempotent
    assert game_id not in await bounded(store.unindexed())
    listed = {g.game_id: g for g in await bounded(store.listed(1000))}
    assert listed[game_id].listing == b'{"players":["Ada"]}' and listed[game_id].last.version == 2
    assert await bounded(store.live_games()) == before
    assert game_id in await bounded(store.games())


async def test_an_ended_private_game_indexed_later_is_neither_listed_nor_live(store: EventStore) -> None:
    game_id = await made(store)
    before = await bounded(store.live_games())
    await drop_index(store, game_id)
    await bounded(store.index(game_id, listing=None, live=False))
    assert game_id not in await bounded(store.unindexed())
    assert game_id not in [g.game_id for g in await bounded(store.listed(1000))]
    assert await bounded(store.live_games()) == before - 1


async def test_nothing_is_unindexed_in_a_store_written_with_the_index(store: EventStore) -> None:
    game_id = await made(store)
    assert game_id not in await bounded(store.unindexed())


async def test_public_ids_are_the_listed_games_newest_first_and_with_live_those_still_live(
    store: EventStore,
) -> None:
    first, private, ending, last = (
        await made(store, b"{}"),
        await made(store),
        await made(store, b"{}"),
        await made(store, b"{}"),
    )
    newest = await bounded(store.public_ids(3))
    assert newest == [last, ending, first]  # the private game is never among them
    assert await bounded(store.public_ids(1)) == [last]
    await bounded(store.ended(ending))
    live = await bounded(store.public_ids(1000, live=True))
    assert live.index(last) < live.index(first) and ending not in live and private not in live
    assert await bounded(store.public_ids(2, live=True)) == [last, first]
    await bounded(store.delete(last))
    assert last not in await bounded(store.public_ids(1000, live=True))
    assert await bounded(store.public_ids(2)) == [ending, first]


async def test_games_lists_created_games_oldest_first(store: EventStore) -> None:
    created = [await made(store) for _ in range(3)]
    listed = await bounded(store.games())
    assert [game_id for game_id in listed if game_id in created] == created
