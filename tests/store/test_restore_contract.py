"""`restore` of the event-store port, one contract for every adapter: a whole game written at once (an
archived game coming back) with its credentials and command records, or nothing; indexed as `create`
indexes a game (listed with a listing, counted live only when live, capped)."""

from __future__ import annotations

import asyncio

import pytest

from server.store import Appended, EventStore, GameExists, Record, TooManyGames
from server.store.redis import RedisEventStore
from tests.support.appends import append
from tests.support.redis import bounded, new_id

CREDENTIALS = {"seat:0": "hash-a", "seat:1": "hash-b", "watch": "hash-w"}


def env(n: int) -> bytes:
    return b'{"n":%d,"pad":"' % n + b"x" * 40 + b'"}'


def stream(count: int) -> list[bytes]:
    return [env(n) for n in range(1, count + 1)]


async def test_a_restored_game_reads_back_whole_with_its_credentials_and_command_records(
    store: EventStore,
) -> None:
    game_id = new_id()
    commands = {"0:a": (2, 2), "1:b": (3, 4)}
    await bounded(store.restore(game_id, stream(4), CREDENTIALS, commands, listing=b"{}", live=True))
    assert await bounded(store.read(game_id)) == [Record(n, env(n)) for n in range(1, 5)]
    assert await bounded(store.version(game_id)) == 4
    assert await bounded(store.credentials(game_id)) == CREDENTIALS
    # A repeat of a command the archived game accepted gets its first outcome, and writes nothing.
    assert await bounded(store.outcome(game_id, "1:b")) == Appended(3, 4, duplicate=True)
    assert await bounded(append(store, game_id, 4, [env(9)], "0:a")) == Appended(2, 2, duplicate=True)
    assert await bounded(append(store, game_id, 4, [env(5)], "0:new")) == Appended(5, 5)
    assert game_id in await bounded(store.games())
    assert game_id in [g.game_id for g in await bounded(store.listed(1000))]


async def test_a_restored_game_is_counted_live_only_when_live_and_listed_only_with_a_listing(
    store: EventStore,
) -> None:
    before = await bounded(store.live_games())
    ended, playing = new_id(), new_id()
    await bounded(store.restore(ended, stream(2), {}, {}, live=False))
    assert await bounded(store.live_games()) == before
    await bounded(store.restore(playing, stream(2), {}, {}, listing=b"{}", live=True))
    assert await bounded(store.live_games()) == before + 1
    listed = [g.game_id for g in await bounded(store.listed(1000))]
    assert playing in listed and ended not in listed
    assert ended in await bounded(store.games()) and await bounded(store.unindexed()) == []


async def test_restoring_over_an_existing_game_raises_game_exists_and_changes_nothing(
    store: EventStore,
) -> None:
    game_id = new_id()
    await bounded(store.create(game_id, env(1), CREDENTIALS))
    with pytest.raises(GameExists):
        await bounded(store.restore(game_id, [b"other", b"more"], {"seat:0": "x"}, {"0:x": (2, 2)}))
    assert await bounded(store.read(game_id)) == [Record(1, env(1))]
    assert await bounded(store.credentials(game_id)) == CREDENTIALS
    assert await bounded(store.outcome(game_id, "0:x")) is None


async def test_a_store_at_its_cap_restores_no_live_game_but_an_ended_one(store: EventStore) -> None:
    await bounded(store.create(new_id(), env(1), {}))  # at least one live game: a cap of 0 is none
    cap = await bounded(store.live_games())
    refused, ended = new_id(), new_id()
    with pytest.raises(TooManyGames):
        await bounded(
            store.restore(refused, stream(3), CREDENTIALS, {"0:a": (2, 3)}, listing=b"{}", max_live=cap)
        )
    assert await bounded(store.read(refused)) == []
    assert await bounded(store.credentials(refused)) == {}
    assert await bounded(store.outcome(refused, "0:a")) is None
    assert refused not in await bounded(store.games())
    await bounded(store.restore(ended, stream(3), CREDENTIALS, {}, live=False, max_live=cap))
    assert await bounded(store.version(ended)) == 3


async def test_a_long_game_with_many_commands_restores_whole(store: EventStore) -> None:
    game_id = new_id()
    commands = {f"{n % 4}:c{n}": (n, n) for n in range(2, 2501)}  # more values than one unpack returns
    await bounded(store.restore(game_id, stream(2500), CREDENTIALS, commands), 20)
    assert await bounded(store.version(game_id)) == 2500
    assert await bounded(store.outcome(game_id, "0:c2500")) == Appended(2500, 2500, duplicate=True)
    assert await bounded(store.outcome(game_id, "2:c2")) == Appended(2, 2, duplicate=True)
    assert await bounded(store.credentials(game_id)) == CREDENTIALS


async def test_a_game_with_no_envelope_is_a_programming_error(store: EventStore) -> None:
    with pytest.raises(ValueError):
        await store.restore(new_id(), [], {}, {})


async def test_a_tail_waiting_for_a_game_gets_it_once_restored(store: EventStore) -> None:
    game_id = new_id()
    got: asyncio.Queue[list[Record]] = asyncio.Queue()

    async def pump() -> None:
        async for batch in store.tail(game_id, 0):
            got.put_nowait(batch)

    task = asyncio.create_task(pump())
    try:
        await asyncio.sleep(0.05)
        await bounded(store.restore(game_id, stream(3), {}, {}))
        records: list[Record] = []
        while len(records) < 3:
            records += await bounded(got.get(), 7)
        assert records == [Record(n, env(n)) for n in range(1, 4)]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.mark.integration
async def test_a_restored_game_takes_its_place_among_the_listed_games_by_its_creation_time(
    redis_url: str,
) -> None:
    # Redis scores the games by their creation time (the memory store lists them as they were written).
    store = await bounded(RedisEventStore.from_url(redis_url))
    try:
        newer = new_id()
        await bounded(store.create(newer, env(1), {}, listing=b"{}"))
        older = new_id()
        await bounded(store.restore(older, stream(2), {}, {}, listing=b"{}", created=1_500_000_000_000_000))
        listed = [g.game_id for g in await bounded(store.listed(100_000))]
        assert listed.index(newer) < listed.index(older)
    finally:
        await bounded(store.close())
