"""The event log of the store port, one contract for every adapter (memory, Redis, Redis Cluster): a game's
stream, appended to atomically and once per command, read and tailed; its credentials; deletes and fences."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from server.store import (
    Append,
    Appended,
    ConcurrencyConflict,
    EventLog,
    EventStore,
    GameExists,
    GameFenced,
    GameNotFound,
    HistoryChanged,
    Record,
)
from tests.support.appends import append
from tests.support.redis import bounded, new_id

CREDENTIALS = {"seat:0": "hash-a", "seat:1": "hash-b", "watch": "hash-w"}


def env(n: int) -> bytes:
    return b'{"n":%d,"pad":"' % n + b"x" * 40 + b'"}'


async def game(store: EventLog, events: int = 1) -> str:
    """A created game at version `events`."""
    game_id = new_id()
    await bounded(store.create(game_id, env(1), CREDENTIALS))
    if events > 1:
        await bounded(append(store, game_id, 1, [env(n) for n in range(2, events + 1)], "setup"))
    return game_id


def records(*versions: int) -> list[Record]:
    return [Record(v, env(v)) for v in versions]


async def test_a_created_game_reads_back_its_first_envelope_as_version_1(store: EventLog) -> None:
    game_id = await game(store)
    assert await bounded(store.read(game_id)) == records(1)
    assert await bounded(store.version(game_id)) == 1


async def test_creating_a_game_twice_raises_game_exists_and_changes_nothing(store: EventLog) -> None:
    game_id = await game(store)
    with pytest.raises(GameExists):
        await bounded(store.create(game_id, b"other", {"seat:0": "other"}))
    assert await bounded(store.read(game_id)) == records(1)
    assert await bounded(store.credentials(game_id)) == CREDENTIALS


async def test_appends_get_contiguous_versions(store: EventLog) -> None:
    game_id = await game(store)
    assert await bounded(append(store, game_id, 1, [env(2)], "a")) == Appended(2, 2)
    assert await bounded(append(store, game_id, 2, [env(3), env(4), env(5)], "b")) == Appended(3, 5)
    assert await bounded(store.read(game_id)) == records(1, 2, 3, 4, 5)
    assert await bounded(store.version(game_id)) == 5


async def test_a_stale_expected_version_conflicts_and_writes_nothing(store: EventLog) -> None:
    game_id = await game(store, 3)
    with pytest.raises(ConcurrencyConflict) as caught:
        await bounded(append(store, game_id, 2, [env(3)], "stale"))
    assert (caught.value.game_id, caught.value.expected, caught.value.actual) == (game_id, 2, 3)
    assert await bounded(store.read(game_id)) == records(1, 2, 3)


async def test_an_expected_version_ahead_of_the_game_conflicts_too(store: EventLog) -> None:
    game_id = await game(store)
    with pytest.raises(ConcurrencyConflict) as caught:
        await bounded(append(store, game_id, 5, [env(6)], "ahead"))
    assert caught.value.actual == 1
    assert await bounded(store.version(game_id)) == 1


async def test_a_conflicting_batch_leaves_no_partial_write(store: EventLog) -> None:
    game_id = await game(store, 2)
    with pytest.raises(ConcurrencyConflict):
        await bounded(append(store, game_id, 1, [env(2), env(3), env(4)], "batch"))
    assert await bounded(store.read(game_id)) == records(1, 2)
    # The refused command key was not recorded: the same key may succeed once it is right.
    assert await bounded(append(store, game_id, 2, [env(3), env(4)], "batch")) == Appended(3, 4)


async def test_racing_appends_at_one_version_let_exactly_one_through(store: EventLog) -> None:
    game_id = await game(store)
    outcomes = await bounded(
        asyncio.gather(
            *(append(store, game_id, 1, [env(2)], f"race-{i}") for i in range(10)), return_exceptions=True
        )
    )
    assert sum(isinstance(o, Appended) for o in outcomes) == 1
    assert sum(isinstance(o, ConcurrencyConflict) for o in outcomes) == 9
    assert await bounded(store.version(game_id)) == 2


async def test_a_repeated_command_key_returns_its_first_outcome_and_writes_nothing(store: EventLog) -> None:
    game_id = await game(store)
    first = await bounded(append(store, game_id, 1, [env(2), env(3)], "cmd-1"))
    again = await bounded(append(store, game_id, 1, [env(2), env(3)], "cmd-1"))
    assert first == Appended(2, 3) and again == Appended(2, 3, duplicate=True)
    assert await bounded(store.read(game_id)) == records(1, 2, 3)


async def test_a_repeat_is_recognised_even_after_the_game_moved_on(store: EventLog) -> None:
    game_id = await game(store)
    await bounded(append(store, game_id, 1, [env(2)], "cmd-1"))
    await bounded(append(store, game_id, 2, [env(3)], "cmd-2"))
    assert await bounded(append(store, game_id, 1, [env(2)], "cmd-1")) == Appended(2, 2, duplicate=True)
    assert await bounded(append(store, game_id, 3, [b"different"], "cmd-1")) == Appended(2, 2, duplicate=True)
    assert await bounded(store.version(game_id)) == 3


async def test_command_keys_are_scoped_to_their_game(store: EventLog) -> None:
    one, other = await game(store), await game(store)
    await bounded(append(store, one, 1, [env(2)], "shared-key"))
    assert await bounded(append(store, other, 1, [env(2)], "shared-key")) == Appended(2, 2)
    assert await bounded(store.read(other)) == records(1, 2)


@pytest.mark.parametrize("expected", [pytest.param(0, id="at-zero"), pytest.param(1, id="at-one")])
async def test_appending_to_a_game_never_created_is_refused(store: EventLog, expected: int) -> None:
    game_id = new_id()
    with pytest.raises(GameNotFound) as caught:
        await bounded(append(store, game_id, expected, [env(1)], "sneaky"))
    assert isinstance(caught.value, ConcurrencyConflict) and caught.value.actual == 0
    assert await bounded(store.read(game_id)) == []
    assert await bounded(store.version(game_id)) == 0


async def test_an_empty_batch_is_a_programming_error(store: EventLog) -> None:
    game_id = await game(store)
    with pytest.raises(ValueError):
        await bounded(append(store, game_id, 1, [], "empty"))


@pytest.mark.parametrize(
    ("after", "until", "expected"),
    [
        pytest.param(0, None, [1, 2, 3, 4, 5], id="everything"),
        pytest.param(2, None, [3, 4, 5], id="after-only"),
        pytest.param(0, 3, [1, 2, 3], id="until-only"),
        pytest.param(1, 4, [2, 3, 4], id="a-window"),
        pytest.param(5, None, [], id="after-the-end"),
        pytest.param(3, 3, [], id="empty-window"),
        pytest.param(3, 9, [4, 5], id="until-past-the-end"),
    ],
)
async def test_read_selects_versions_after_until(
    store: EventLog, after: int, until: int | None, expected: list[int]
) -> None:
    game_id = await game(store, 5)
    assert await bounded(store.read(game_id, after, until)) == records(*expected)


async def test_a_long_game_reads_back_whole_and_in_order(store: EventLog) -> None:
    game_id = await game(store)
    for start in range(2, 2502, 500):
        await bounded(
            append(store, game_id, start - 1, [env(n) for n in range(start, start + 500)], f"c{start}")
        )
    assert await bounded(store.read(game_id), 10) == records(*range(1, 2502))
    assert await bounded(store.read(game_id, 999, 2001), 10) == records(*range(1000, 2002))


async def test_an_unknown_game_reads_as_empty(store: EventLog) -> None:
    game_id = new_id()
    assert await bounded(store.read(game_id)) == []
    assert await bounded(store.version(game_id)) == 0
    assert await bounded(store.credentials(game_id)) == {}


async def test_credentials_are_stored_beside_the_stream_not_in_it(store: EventLog) -> None:
    game_id = await game(store)
    assert await bounded(store.credentials(game_id)) == CREDENTIALS
    assert all(b"hash-a" not in record.data for record in await bounded(store.read(game_id)))


async def test_a_deleted_game_is_gone_with_its_credentials_and_command_records(store: EventStore) -> None:
    game_id, other = await game(store, 3), await game(store, 2)
    await bounded(store.delete(game_id))
    assert await bounded(store.read(game_id)) == []
    assert await bounded(store.version(game_id)) == 0
    assert await bounded(store.credentials(game_id)) == {}
    assert await bounded(store.outcome(game_id, "setup")) is None
    assert game_id not in await bounded(store.games())
    assert await bounded(store.read(other)) == records(1, 2), "another game is untouched"
    with pytest.raises(GameNotFound):
        await bounded(append(store, game_id, 3, [env(4)], "after-delete"))


async def test_a_fenced_game_takes_no_append_until_unfenced(store: EventLog) -> None:
    game_id, other = await game(store, 2), await game(store)
    await bounded(append(store, game_id, 2, [env(3)], "before"))
    assert await bounded(store.fence(game_id)) == 3
    with pytest.raises(GameFenced):
        await bounded(append(store, game_id, 3, [env(4)], "after"))
    results = await bounded(
        store.append_many([Append(game_id, 3, [env(4)], "many"), Append(other, 1, [env(2)], "o")])
    )
    assert isinstance(results[0], GameFenced) and results[1] == Appended(2, 2)
    # A repeat of a command accepted before the fence still gets its outcome.
    assert await bounded(append(store, game_id, 2, [env(3)], "before")) == Appended(3, 3, duplicate=True)
    assert await bounded(store.version(game_id)) == 3
    await bounded(store.unfence(game_id))
    assert await bounded(append(store, game_id, 3, [env(4)], "after")) == Appended(4, 4)


async def test_fencing_an_unknown_game_answers_0_and_creates_nothing(store: EventLog) -> None:
    game_id = new_id()
    assert await bounded(store.fence(game_id)) == 0
    assert await bounded(store.version(game_id)) == 0
    await bounded(store.create(game_id, env(1), CREDENTIALS))
    assert await bounded(append(store, game_id, 1, [env(2)], "a")) == Appended(2, 2)


async def test_a_delete_at_a_version_deletes_nothing_when_the_game_moved_on(store: EventLog) -> None:
    game_id = await game(store, 2)
    with pytest.raises(ConcurrencyConflict) as moved:
        await bounded(store.delete(game_id, 1))
    assert moved.value.actual == 2
    assert await bounded(store.read(game_id)) == records(1, 2)
    assert await bounded(store.credentials(game_id)) == CREDENTIALS
    await bounded(store.delete(game_id, 2))
    assert await bounded(store.read(game_id)) == []
    assert await bounded(store.credentials(game_id)) == {}


async def test_append_many_runs_each_append_in_order_with_its_own_outcome(store: EventLog) -> None:
    one, two = await game(store), await game(store, 2)
    results = await bounded(
        store.append_many(
            [
                Append(one, 1, [env(2)], "a"),
                Append(two, 2, [env(3), env(4)], "b"),
                Append(one, 2, [env(3)], "c"),  # sees the first one's write: versions chain within the round
                Append(one, 2, [env(9)], "d"),  # now stale: a conflict, and nothing written
                Append(two, 4, [env(9)], "b"),  # a repeated key: its first outcome, nothing written
                Append(new_id(), 0, [env(1)], "e"),  # never created
            ]
        )
    )
    assert results[:3] == [Appended(2, 2), Appended(3, 4), Appended(3, 3)]
    assert isinstance(results[3], ConcurrencyConflict) and results[3].actual == 3
    assert results[4] == Appended(3, 4, duplicate=True)
    assert isinstance(results[5], GameNotFound)
    assert await bounded(store.read(one)) == records(1, 2, 3)
    assert await bounded(store.read(two)) == records(1, 2, 3, 4)


async def test_append_many_writes_none_of_a_games_appends_after_one_of_them_was_not_written(
    store: EventLog,
) -> None:
    """A game's appends in one batch are a chain: each was decided on the state the ones before it leave.
    Once one is not written (a conflict, a repeated key), none after it of that game is, even where its
    expected version happens to be the stream's (another writer appended exactly as many events): each
    gets a conflict with the game's version. Other games' appends go on."""
    one, two = await game(store, 2), await game(store)
    await bounded(append(store, one, 2, [env(3)], "elsewhere"))  # another writer, meanwhile
    results = await bounded(
        store.append_many(
            [
                Append(one, 2, [env(3)], "a"),  # a conflict: the game is at 3
                Append(two, 1, [env(2)], "x"),  # another game: written
                Append(one, 3, [env(4)], "b"),  # decided on "a"'s event: not written, though 3 matches
                Append(one, 4, [env(5)], "c"),
            ]
        )
    )
    assert isinstance(results[0], ConcurrencyConflict) and results[0].actual == 3
    assert results[1] == Appended(2, 2)
    for skipped in results[2:]:
        assert isinstance(skipped, ConcurrencyConflict) and skipped.actual == 3
    assert await bounded(store.read(one)) == records(1, 2, 3)
    assert await bounded(store.outcome(one, "b")) is None
    # A repeated key: its events were not written now, so what follows it was decided on sand too.
    await bounded(append(store, one, 3, [env(4)], "d"))
    await bounded(append(store, one, 4, [env(5)], "elsewhere-2"))
    results = await bounded(store.append_many([Append(one, 3, [env(4)], "d"), Append(one, 5, [env(6)], "e")]))
    assert results[0] == Appended(4, 4, duplicate=True)
    assert isinstance(results[1], ConcurrencyConflict) and results[1].actual == 5
    assert await bounded(store.version(one)) == 5


async def test_an_append_after_the_line_the_stream_holds_at_its_version_lands(store: EventLog) -> None:
    game_id = await game(store, 2)
    assert await bounded(append(store, game_id, 2, [env(3)], "a", after=env(2))) == Appended(3, 3)
    assert await bounded(store.read(game_id)) == records(1, 2, 3)


async def test_an_append_after_another_line_than_the_streams_is_refused_and_writes_nothing(
    store: EventLog,
) -> None:
    """The version matches, but the line there is not the one the caller folded: the store lost the
    caller's line and another was written at its version. The version alone cannot tell."""
    game_id = await game(store, 2)
    with pytest.raises(HistoryChanged) as caught:
        await bounded(append(store, game_id, 2, [env(3)], "a", after=b'{"lost":2}'))
    assert isinstance(caught.value, ConcurrencyConflict)
    assert (caught.value.game_id, caught.value.expected, caught.value.actual) == (game_id, 2, 2)
    assert await bounded(store.read(game_id)) == records(1, 2)
    assert await bounded(store.outcome(game_id, "a")) is None
    # The version is checked first: a stale version is a plain conflict, whatever the line.
    with pytest.raises(ConcurrencyConflict) as stale:
        await bounded(append(store, game_id, 1, [env(2)], "b", after=b'{"lost":1}'))
    assert not isinstance(stale.value, HistoryChanged) and stale.value.actual == 2


async def test_append_many_checks_each_appends_line_and_stops_the_games_chain_at_a_changed_one(
    store: EventLog,
) -> None:
    one, two = await game(store, 2), await game(store)
    results = await bounded(
        store.append_many(
            [
                Append(one, 2, [env(3)], "a", after=b'{"lost":2}'),  # another line at 2: refused
                Append(two, 1, [env(2)], "x", after=env(1)),  # another game, the right line: written
                Append(one, 3, [env(4)], "b", after=env(3)),  # decided after "a": not written
                Append(two, 2, [env(3)], "y", after=env(2)),  # chained on "x": written
            ]
        )
    )
    assert isinstance(results[0], HistoryChanged)
    assert results[1] == Appended(2, 2) and results[3] == Appended(3, 3)
    assert isinstance(results[2], ConcurrencyConflict) and results[2].actual == 2
    assert await bounded(store.read(one)) == records(1, 2)
    assert await bounded(store.read(two)) == records(1, 2, 3)


async def test_ping_answers_true(store: EventStore) -> None:
    assert await bounded(store.ping()) is True


@contextlib.asynccontextmanager
async def tailing(store: EventLog, game_id: str, after: int) -> AsyncIterator[asyncio.Queue[list[Record]]]:
    """Run a tail in a task that feeds a queue; cancel and close it on exit."""
    batches: asyncio.Queue[list[Record]] = asyncio.Queue()

    async def pump() -> None:
        async with contextlib.aclosing(store.tail(game_id, after)) as tail:
            async for batch in tail:
                batches.put_nowait(batch)

    task = asyncio.create_task(pump())
    try:
        yield batches
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await bounded(task)


async def collect(batches: asyncio.Queue[list[Record]], until_version: int) -> list[Record]:
    got: list[Record] = []
    while not got or got[-1].version < until_version:
        got += await bounded(batches.get(), 3)
    return got


async def test_tail_delivers_existing_then_live_events_in_order_without_gap_or_duplicate(
    store: EventLog,
) -> None:
    game_id = await game(store, 3)
    async with tailing(store, game_id, 0) as batches:
        assert await collect(batches, 3) == records(1, 2, 3)
        await bounded(append(store, game_id, 3, [env(4), env(5)], "live-1"))
        for version in range(6, 16):
            await bounded(append(store, game_id, version - 1, [env(version)], f"live-{version}"))
        assert await collect(batches, 15) == records(*range(4, 16))
        assert batches.empty()


async def test_tail_starts_after_the_given_version(store: EventLog) -> None:
    game_id = await game(store, 4)
    async with tailing(store, game_id, 2) as batches:
        assert await collect(batches, 4) == records(3, 4)


async def test_tail_waits_for_a_game_that_does_not_exist_yet(store: EventLog) -> None:
    game_id = new_id()
    async with tailing(store, game_id, 0) as batches:
        await asyncio.sleep(0.05)
        await bounded(store.create(game_id, env(1), {}))
        assert await collect(batches, 1) == records(1)


async def test_a_newly_tailed_game_gets_events_promptly_while_other_tails_block(store: EventLog) -> None:
    quiet = [await game(store) for _ in range(5)]
    async with contextlib.AsyncExitStack() as stack:
        for game_id in quiet:
            await stack.enter_async_context(tailing(store, game_id, 1))
        await asyncio.sleep(0.1)  # the quiet tails are now blocked reading
        busy = await game(store)
        fresh = await stack.enter_async_context(tailing(store, busy, 1))
        await asyncio.sleep(0.05)
        await bounded(append(store, busy, 1, [env(2)], "now"))
        # Far below the 5 s block of the other tails: they do not hold this game up.
        assert await bounded(fresh.get(), 1.0) == records(2)
