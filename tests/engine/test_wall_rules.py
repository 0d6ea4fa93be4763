"""The wall's rules (server.engine.wall), on the in-memory store with a clock of the test's own: tiles chosen
by activity and watchers, a game idle too long leaves and comes back with its next placement, one creator
holds at most its share, and each subscriber holds a bounded page, more on demand, changes of those alone."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any, cast

import msgspec
import pytest

from domain import PerformanceToken, Place
from server.engine import wall as wall_module
from server.engine.games import Games
from server.engine.listing import Listing
from server.engine.wall import Wall
from server.protocol.frames import Presence, SeatPresence
from server.store.memory import MemoryEventStore
from tests.engine.test_wall_engine import FAST, Feed, join, reconciled
from tests.support.waiting import eventually, until

PERF = PerformanceToken("classical")
IDLE = 600.0


class Clock:
    """The time of the test: the wall's seconds and the envelopes' `at`, moved on by hand."""

    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC).timestamp()

    def seconds(self) -> float:
        return self.now

    def text(self) -> str:
        return datetime.fromtimestamp(self.now, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def tick(self, seconds: float = 0.01) -> None:
        self.now += seconds


class Tables:
    """A presence that says who sits at each table: the games of `watched` have seat 0 online."""

    def __init__(self) -> None:
        self.watched: set[str] = set()

    async def of(self, games: Sequence[tuple[str, int]]) -> list[Presence]:
        return [
            Presence([SeatPresence(seat, seat == 0 and g in self.watched) for seat in range(n)], 0)
            for g, n in games
        ]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def games(clock: Clock) -> AsyncIterator[Games]:
    node = Games(MemoryEventStore(), clock=clock.text)
    try:
        yield node
    finally:
        await node.close()


@pytest.fixture(autouse=True)
def _fast_presence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wall_module, "PRESENCE_SECONDS", 0.02)


def new_wall(games: Games, clock: Clock, tables: Tables | None = None, **settings: Any) -> Wall:
    return Wall(
        games, presence=cast(Any, tables), clock=clock.seconds, idle_seconds=IDLE, **{**FAST, **settings}
    )


async def create(games: Games, clock: Clock, creator: str | None, name: str = "Ada") -> str:
    clock.tick()  # each game a moment after the last: activity orders them
    return (await games.create([name, "Ben"], creator=creator)).game_id


async def place(games: Games, clock: Clock, game_id: str, space: str) -> None:
    clock.tick()
    await games.handle(game_id, Place(seat=0, id=f"{game_id}-{space}", token=PERF, space=space))


def live_ids(wall: Wall) -> list[str]:
    return [game.game_id for game in wall.shown() if not game.ended]


async def test_a_flood_from_a_few_addresses_holds_its_share_and_replaces_no_watched_table(
    games: Games, clock: Clock
) -> None:
    tables = Tables()
    real = [await create(games, clock, f"198.51.100.{n}") for n in range(6)]
    tables.watched = set(real[:4])
    wall = new_wall(games, clock, tables, live_games=10, creator_share=0.2)  # two games a creator
    feed, first = await join(wall)
    assert {game["game_id"] for game in first["games"]} == set(real)
    await until(lambda: sum(game.presence.seats[0].online for game in wall.shown()) == 4)
    # The finding, scaled: many games from a few addresses, each newer (more active) than every table.
    flood = {
        address: [await create(games, clock, address, "Mallory") for _ in range(10)] for address in "abc"
    }

    def settled() -> None:
        shown = live_ids(wall)
        assert len(shown) == 10
        assert set(real[:4]) <= set(shown)  # the watched tables stay, however many newer games come
        for address, ids in flood.items():
            assert len(set(ids) & set(shown)) == 2, address  # each creator's share, and no more
        # The unwatched real tables made room: they were the least active.
        assert not set(real[4:]) & set(shown)

    await eventually(settled)
    await reconciled(wall)  # polls and a reconcile later, every new game has had its chance: it holds
    settled()
    assert set(real[4:]) <= {game_id for frame in feed.frames for game_id in frame["retired"]}
    await wall.close()


async def test_a_game_listed_without_a_creator_is_its_own(games: Games, clock: Clock) -> None:
    ids = [await create(games, clock, None) for _ in range(4)]
    wall = new_wall(games, clock, live_games=10, creator_share=0.1)  # one game a creator
    _, first = await join(wall)
    assert {game["game_id"] for game in first["games"]} == set(ids)
    taken = await create(games, clock, "203.0.113.9")
    await create(games, clock, "203.0.113.9")
    await until(lambda: taken in live_ids(wall))
    await reconciled(wall)  # the second has had its chances: taken at creation, by a poll, by a reconcile
    assert set(live_ids(wall)) == {*ids, taken}
    await wall.close()


async def test_a_game_idle_too_long_leaves_and_comes_back_with_its_next_placement(
    games: Games, clock: Clock
) -> None:
    idle = await create(games, clock, "192.0.2.1")
    busy = await create(games, clock, "192.0.2.2")
    wall = new_wall(games, clock)
    feed, _ = await join(wall)
    clock.tick(IDLE - 1)
    await place(games, clock, busy, "viola")
    clock.tick(2)  # the idle game's creation is now more than IDLE ago; the busy game's placement is not
    await until(lambda: idle not in live_ids(wall))
    assert live_ids(wall) == [busy]
    await until(lambda: any(frame["retired"] == [idle] for frame in feed.frames))
    await reconciled(wall)  # a reconcile sees it among the listed games, idle: it stays off
    assert idle not in live_ids(wall)
    await place(games, clock, idle, "viola")
    await until(lambda: idle in live_ids(wall))  # the next reconcile finds it active again
    assert wall.shown()[0].game_id == idle and wall.shown()[0].version == 2
    await wall.close()
    # A wall started afresh shows no idle game either.
    clock.tick(IDLE + 1)
    fresh = new_wall(games, clock)
    _, first = await join(fresh)
    assert first["games"] == [] and first["total"] == 0
    await fresh.close()


async def test_when_every_table_is_watched_a_new_game_waits(games: Games, clock: Clock) -> None:
    tables = Tables()
    ids = [await create(games, clock, f"192.0.2.{n}") for n in range(3)]
    tables.watched = set(ids)
    wall = new_wall(games, clock, tables, live_games=3)
    await join(wall)
    await until(lambda: all(game.presence.seats[0].online for game in wall.shown()))
    newcomer = await create(games, clock, "192.0.2.99")
    await reconciled(wall)  # it has had its chances: at creation, by a poll, by a reconcile
    assert set(live_ids(wall)) == set(ids)
    tables.watched.discard(ids[1])  # its players left: the next newcomer takes its place
    await until(lambda: not wall.shown()[1].presence.seats[0].online)
    await place(games, clock, newcomer, "viola")
    await until(lambda: newcomer in live_ids(wall))
    assert set(live_ids(wall)) == {ids[0], ids[2], newcomer}
    await wall.close()


async def test_the_first_frame_is_a_page_of_the_most_active_and_more_come_on_demand(
    games: Games, clock: Clock
) -> None:
    ids = [await create(games, clock, None) for _ in range(8)]
    for game_id in ids[:2]:
        await place(games, clock, game_id, "viola")  # the oldest two were played last: the most active
    wall = new_wall(games, clock, page_games=3)
    feed, first = await join(wall)
    page = [game["game_id"] for game in first["games"]]
    assert first["total"] == 8 and len(page) == 3
    assert set(ids[:2]) <= set(page) and ids[7] in page
    assert wall.held(feed.outbox) == set(page)

    # A change of a game the subscriber does not hold is not sent to it; one of a game it holds is.
    await place(games, clock, ids[2], "viola")
    await place(games, clock, ids[0], "clarinet")
    frame = await feed.next()
    assert [change["game_id"] for change in frame["changed"]] == [ids[0]] and frame["added"] == []

    wall.more(feed.outbox)
    second = await feed.next()
    assert second["type"] == "wall_page" and second["total"] == 8 and len(second["games"]) == 3
    assert ids[2] in [game["game_id"] for game in second["games"]]  # just played: the most active left
    wall.more(feed.outbox)
    third = await feed.next()
    wall.more(feed.outbox)
    last = await feed.next()
    assert len(third["games"]) == 2 and last == {"type": "wall_page", "games": [], "total": 8}
    held = [g["game_id"] for frame in (first, second, third) for g in frame.get("games", [])]
    assert sorted(held) == sorted(ids) and len(held) == 8  # every game once

    # A game it holds retires: the frame says so, and the total.
    await games.store.delete(ids[5])
    frame = await feed.next()
    assert frame["retired"] == [ids[5]] and frame["total"] == 7
    await wall.close()


async def test_a_subscriber_holding_fewer_than_it_asked_for_is_topped_up_with_the_most_active(
    games: Games, clock: Clock
) -> None:
    ids = [await create(games, clock, None) for _ in range(5)]
    wall = new_wall(games, clock, page_games=2)
    feed, first = await join(wall)
    assert [game["game_id"] for game in first["games"]] == [ids[4], ids[3]]
    await place(games, clock, ids[0], "viola")  # the subscriber does not hold it
    await games.store.delete(ids[4])  # it holds this one: it goes, and the most active it lacks comes
    frame = await feed.next()
    while not frame["retired"]:
        frame = await feed.next()
    assert frame["retired"] == [ids[4]] and [game["game_id"] for game in frame["added"]] == [ids[0]]
    assert frame["added"][0]["version"] == 2
    # A new game, more active than all, does not go to a subscriber holding its page already.
    newest = await create(games, clock, None)
    await until(lambda: newest in live_ids(wall))
    await place(games, clock, ids[3], "viola")  # a change of a game it holds: its frame is the sentinel
    await until(lambda: any(c["game_id"] == ids[3] for frame in feed.frames for c in frame["changed"]))
    assert newest not in wall.held(feed.outbox)
    assert all(newest not in msgspec.json.encode(frame["added"]).decode() for frame in feed.frames)
    await wall.close()


async def test_the_first_frame_stays_small_however_many_games_the_wall_shows(
    games: Games, clock: Clock
) -> None:
    for _ in range(60):
        await create(games, clock, None)
    wall = new_wall(games, clock, page_games=5)
    feed = Feed()
    first = await wall.join(feed.outbox)
    one = len(msgspec.json.encode(msgspec.json.decode(first)["games"][0]))
    assert msgspec.json.decode(first)["total"] == 60
    assert len(first) < 6 * one  # five games and a little more, not sixty
    await wall.close()


async def test_a_listing_keeps_a_keyed_hash_of_the_creator_never_the_address(games: Games) -> None:
    await games.create(["Ada"], creator="203.0.113.7")
    await games.create(["Ben"], creator="203.0.113.7")
    await games.create(["Cy"], creator="2001:db8::/64")
    listed = await games.store.listed(3)
    creators = [msgspec.json.decode(item.listing, type=Listing).creator for item in listed]
    assert creators[1] == creators[2] != creators[0] and all(c and len(c) == 16 for c in creators)
    assert all(b"203.0.113" not in item.listing and b"2001" not in item.listing for item in listed)
    # Another node of the store (the same signing key) hashes the same; one with another key does not.
    same = Games(games.store, signer=games.node.signer)
    other = Games(games.store)
    await same.create(["Dan"], creator="203.0.113.7")
    await other.create(["Eve"], creator="203.0.113.7")
    newest = await games.store.listed(2)
    hashes = [msgspec.json.decode(item.listing, type=Listing).creator for item in newest]
    assert hashes[1] == creators[1] and hashes[0] != creators[1]
