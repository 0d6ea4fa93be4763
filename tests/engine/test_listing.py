"""The list of public games from the store's index, the count of live games, and the backfill of games
written before the index (server.engine.listing, on the in-memory store)."""

from __future__ import annotations

import pytest

from domain.messages import EndGame
from server.engine.games import Games
from server.engine.listing import GameSummary, backfill, listing_of, summaries
from server.store import Listed, TooManyGames
from server.store.memory import MemoryEventStore


async def test_public_games_are_listed_newest_first_with_their_version_and_end() -> None:
    store = MemoryEventStore()
    games = Games(store)
    first = await games.create(["Ada", "Ben"])
    await games.create(["Cy"], spectators="token")
    second = await games.create(["  Dee "])
    await games.handle(second.game_id, EndGame(seat=0, id="end"))
    assert await summaries(store, 10) == [
        GameSummary(second.game_id, ["Dee"], 2, True),
        GameSummary(first.game_id, ["Ada", "Ben"], 1, False),
    ]
    assert await summaries(store, 1) == [GameSummary(second.game_id, ["Dee"], 2, True)]


async def test_a_listed_game_whose_listing_or_newest_envelope_does_not_decode_is_left_out() -> None:
    store = MemoryEventStore()
    games = Games(store)
    kept = await games.create(["Ada"])
    created = await games.create(["Ben"])
    (newest,) = await store.listed(1)
    assert newest.game_id == created.game_id
    broken = [
        Listed("a", b"not json", newest.last),
        Listed("b", newest.listing, newest.last.__class__(1, b"{")),
        Listed("c", newest.listing, newest.last.__class__(1, b'{"event": 7}')),
    ]

    async def listed(limit: int) -> list[Listed]:
        return broken + [g for g in await MemoryEventStore.listed(store, limit) if g.game_id == kept.game_id]

    store.listed = listed  # type: ignore[method-assign]
    assert [s.game_id for s in await summaries(store, 10)] == [kept.game_id]


async def test_an_ended_game_is_live_no_more_and_frees_a_place_under_the_cap() -> None:
    store = MemoryEventStore()
    games = Games(store, max_games=2)
    first = await games.create(["Ada"])
    await games.create(["Ben"], spectators="token")
    with pytest.raises(TooManyGames):
        await games.create(["Cy"])
    assert await store.live_games() == 2
    await games.handle(first.game_id, EndGame(seat=0, id="end"))
    assert await store.live_games() == 1
    await games.create(["Cy"])
    assert len(await store.games()) == 3


async def test_backfill_indexes_the_games_the_index_lacks_as_they_are() -> None:
    store = MemoryEventStore()
    games = Games(store)
    public = await games.create(["Ada"])
    private = await games.create(["Ben"], spectators="token")
    ended = await games.create(["Cy"])
    await games.handle(ended.game_id, EndGame(seat=0, id="end"))
    for created in (public, private, ended):
        store.drop_index(created.game_id)
    assert await summaries(store, 10) == [] and await store.live_games() == 0
    assert await backfill(store) == 3
    assert [s.game_id for s in await summaries(store, 10)] == [ended.game_id, public.game_id]
    assert await store.live_games() == 2
    assert await store.unindexed() == []
    assert await backfill(store) == 0  # nothing left to do


@pytest.mark.logs_warnings
async def test_backfill_skips_what_it_cannot_read_and_leaves_it_unindexed() -> None:
    store = MemoryEventStore()
    await store.create("bad", b"{not an envelope", {})
    await store.create(
        "odd",
        b'{"game_id":"odd","version":1,"at":"t","command_id":null,"seat":null,'
        b'"event":{"type":"GameEnded","ranking":[],"scores":[]}}',
        {},
    )
    for game_id in ("bad", "odd"):
        store.drop_index(game_id)
    assert await backfill(store) == 0
    assert set(await store.unindexed()) == {"bad", "odd"}


def test_a_listing_holds_the_players() -> None:
    assert listing_of(("Ada", "Zoé")) == '{"players":["Ada","Zoé"]}'.encode()
