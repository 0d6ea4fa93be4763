"""The wall of a node (server.engine.wall), on the in-memory store: what its frames carry, when games come
and go, and that a wall nobody watches leaves every game as it was (no watcher, no tail, no hook)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pytest

from domain import PerformanceToken, Place, RepairToken
from domain.messages import EndGame, TakeSeat
from server.clock import utc_text
from server.engine.games import Games
from server.engine.outbox import Outbox
from server.engine.wall import Wall
from server.store.memory import MemoryEventStore
from tests.support.waiting import until

PERF = PerformanceToken("classical")
FAST: dict[str, Any] = {
    "flush_seconds": 0.01,
    "poll_seconds": 0.02,
    "reconcile_seconds": 0.05,
    "linger_seconds": 0.05,
}


class Feed:
    """A subscriber of the wall: every frame it was sent, decoded."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []
        self.outbox = Outbox(self._send, self._close, limit=1000)
        self.outbox.start()

    async def _send(self, data: bytes) -> None:
        self.frames.append(msgspec.json.decode(data))

    async def _close(self, code: int, reason: str) -> None:
        raise AssertionError(f"closed: {code} {reason}")

    async def next(self, timeout: float = 2.0) -> dict[str, Any]:
        """The next frame sent after those already looked at."""
        seen = len(self.frames)
        await until(lambda: len(self.frames) > seen, timeout, f"frame {seen + 1}")
        return self.frames[seen]


async def reconciled(wall: Wall) -> None:
    """Return once a reconcile begun after the call has run to its end (the one under way may have begun
    before it): the polls before it have run too, and what it would take or retire, it has."""
    begun = wall.reconciles
    await until(lambda: wall.reconciles >= begun + 2, what="a reconcile begun after the change")


def ticking() -> Callable[[], str]:
    """The envelopes' time, each a millisecond at least after the last: games made within one millisecond
    (the in-memory store is that fast) still differ in activity, which orders the wall."""
    last = 0

    def now() -> str:
        nonlocal last
        last = max(time.time_ns() // 1_000_000, last + 1)
        return utc_text(last)

    return now


@pytest.fixture
async def games() -> AsyncIterator[Games]:
    node = Games(MemoryEventStore(), clock=ticking())
    try:
        yield node
    finally:
        await node.close()


async def join(wall: Wall) -> tuple[Feed, dict[str, Any]]:
    feed = Feed()
    first = msgspec.json.decode(await wall.join(feed.outbox))
    return feed, first


async def place(games: Games, game_id: str, seat: int, space: str, token: Any = PERF) -> None:
    await games.handle(game_id, Place(seat=seat, id=f"{seat}-{space}-{id(token)}", token=token, space=space))


async def test_a_change_carries_the_space_whose_chair_changed_hands_and_nothing_that_did_not(
    games: Games,
) -> None:
    game_id = (await games.create(["Ada", "Ben"])).game_id
    wall = Wall(games, **FAST)
    feed, first = await join(wall)
    [shown] = first["games"]
    assert shown["chairs"]["viola"] == [] and shown["prestige"] == [0, 0] and shown["version"] == 1
    await place(games, game_id, 0, "viola")
    frame = await feed.next()
    assert frame == {
        "type": "wall_changes",
        "retired": [],
        "added": [],
        "changed": [{"game_id": game_id, "version": 2, "chairs": {"viola": [0]}, "prestige": [3, 0]}],
        "total": 1,
    }
    await place(games, game_id, 1, "viola", RepairToken("strings"))  # below the line: the chair stays
    assert (await feed.next())["changed"] == [{"game_id": game_id, "version": 3}]
    await wall.close()


async def test_an_open_seat_taken_changes_the_games_players_whole(games: Games) -> None:
    game_id = (await games.create(["Ada", None])).game_id
    wall = Wall(games, **FAST)
    feed, first = await join(wall)
    assert first["games"][0]["players"] == ["Ada", None]
    await games.handle(game_id, TakeSeat(seat=1, id="sit-down", name="Ben"))
    assert (await feed.next())["changed"] == [{"game_id": game_id, "version": 2, "players": ["Ada", "Ben"]}]
    await wall.close()


async def test_changes_within_a_flush_go_out_as_one_change_of_the_last_state(games: Games) -> None:
    game_id = (await games.create(["Ada", "Ben"])).game_id
    wall = Wall(games, **{**FAST, "flush_seconds": 0.3})
    feed, _ = await join(wall)
    await place(games, game_id, 0, "viola")
    await place(games, game_id, 1, "violin_bc")
    await place(games, game_id, 1, "clarinet")
    frame = await feed.next()
    chairs = {"viola": [0], "violin_bc": [1], "clarinet": [1]}
    assert frame["changed"] == [{"game_id": game_id, "version": 4, "chairs": chairs, "prestige": [3, 6]}]
    # A later change is the sentinel: its frame comes next, with nothing of the first three before it.
    await place(games, game_id, 0, "violin_cr")
    [later] = (await feed.next())["changed"]
    assert later["version"] == 5 and later["chairs"] == {"violin_cr": [0]}
    assert len(feed.frames) == 2
    await wall.close()


async def test_private_games_never_appear_and_new_public_ones_go_first(games: Games) -> None:
    older = (await games.create(["Ada"])).game_id
    wall = Wall(games, **FAST)
    feed, first = await join(wall)
    assert [g["game_id"] for g in first["games"]] == [older]
    hidden = (await games.create(["Cy"], spectators="token")).game_id
    await place(games, hidden, 0, "viola")
    newer = (await games.create(["Ben"])).game_id
    frame = await feed.next()
    assert [g["game_id"] for g in frame["added"]] == [newer]
    assert [g.game_id for g in wall.shown()] == [newer, older]
    await reconciled(wall)  # the polls and a reconcile since it was created and played: still nothing of it
    assert [g.game_id for g in wall.shown()] == [newer, older]
    await place(games, newer, 0, "viola")  # its frame is the sentinel: any of the private game came before
    await until(lambda: any(c["game_id"] == newer for f in feed.frames[1:] for c in f["changed"]))
    assert hidden not in msgspec.json.encode(feed.frames).decode()
    await wall.close()


async def test_ended_games_retire_once_ended_kept_more_have_ended(games: Games) -> None:
    first_id, second_id = (await games.create(["Ada"])).game_id, (await games.create(["Ben"])).game_id
    wall = Wall(games, ended_games=1, **FAST)
    feed, _ = await join(wall)
    await games.handle(first_id, EndGame(seat=0, id="end"))
    assert (await feed.next())["changed"] == [{"game_id": first_id, "version": 2, "ended": True}]
    await games.handle(second_id, EndGame(seat=0, id="end"))
    frame = await feed.next()
    assert frame["retired"] == [first_id]
    assert frame["changed"] == [{"game_id": second_id, "version": 2, "ended": True}]
    assert [g.game_id for g in wall.shown()] == [second_id]
    await wall.close()

    # Keeping none: a game leaves the wall in the frame in which it ends.
    third = (await games.create(["Cy"])).game_id
    wall = Wall(games, ended_games=0, **FAST)
    feed, first = await join(wall)
    assert [g["game_id"] for g in first["games"]] == [third]
    await games.handle(third, EndGame(seat=0, id="end"))
    assert await feed.next() == {
        "type": "wall_changes",
        "retired": [third],
        "added": [],
        "changed": [],
        "total": 0,
    }
    await wall.close()


async def test_past_its_live_games_a_new_game_retires_the_one_shown_longest(games: Games) -> None:
    ids = [(await games.create([name])).game_id for name in ("Ada", "Ben")]
    wall = Wall(games, live_games=2, **FAST)
    feed, first = await join(wall)
    assert [g["game_id"] for g in first["games"]] == ids[::-1]
    third = (await games.create(["Cy"])).game_id
    frame = await feed.next()
    assert frame["retired"] == [ids[0]] and [g["game_id"] for g in frame["added"]] == [third]
    await wall.close()


async def test_a_deleted_game_retires_at_the_next_reconcile(games: Games) -> None:
    game_id = (await games.create(["Ada"])).game_id
    wall = Wall(games, **FAST)
    feed, _ = await join(wall)
    await games.store.delete(game_id)
    assert (await feed.next())["retired"] == [game_id]
    await wall.close()


async def test_a_wall_nobody_watches_stops_and_leaves_every_game_unwatched(games: Games) -> None:
    game_id = (await games.create(["Ada", "Ben"])).game_id
    wall = Wall(games, **FAST)
    feed, _ = await join(wall)
    game = games.loaded(game_id)
    assert game is not None and game.watcher is not None and game.tail_alive and games.on_listed is not None
    wall.leave(feed.outbox)
    assert wall.running  # it lingers a moment: a page reloading finds it warm
    await until(lambda: not wall.running, what="the wall stopped after its linger")
    assert game.watcher is None and game._tail_task is None and not game.busy
    assert games.on_listed is None
    # The command path is the plain one again: the placement reaches no wall.
    await place(games, game_id, 0, "viola")
    assert game.watcher is None and not wall.running
    # A new subscriber starts it again, from the store (and first sends what changes were pending: none).
    again, first = await join(wall)
    assert [g["version"] for g in first["games"]] == [2]
    assert feed.frames == []
    wall.leave(again.outbox)
    await wall.close()


async def test_a_subscriber_joining_gets_what_the_others_hold_after_pending_changes(games: Games) -> None:
    game_id = (await games.create(["Ada", "Ben"])).game_id
    wall = Wall(games, **{**FAST, "flush_seconds": 5.0})
    early, _ = await join(wall)
    await place(games, game_id, 0, "viola")
    late, first = await join(wall)  # the pending change goes out to the others first
    assert (await early.next())["changed"][0]["version"] == 2
    assert first["games"][0]["version"] == 2 and first["games"][0]["chairs"]["viola"] == [0]
    await wall.close()


async def test_a_subscriber_too_slow_to_read_is_closed_with_1013_and_the_others_keep_their_feed(
    games: Games,
) -> None:
    game_id = (await games.create(["Ada", "Ben"])).game_id
    wall = Wall(games, **FAST)
    feed, _ = await join(wall)
    closed: list[tuple[int, str]] = []
    taken = asyncio.Event()

    async def never_read(data: bytes) -> None:
        taken.set()
        await asyncio.Event().wait()

    async def close(code: int, reason: str) -> None:
        closed.append((code, reason))

    # One frame in flight that never completes, then a queue of 2.
    stuck = Outbox(never_read, close, limit=2)
    stuck.start()
    await wall.join(stuck)
    tokens = [RepairToken("strings") for _ in range(4)]  # alive together: each command gets its own id
    for number, token in enumerate(tokens):
        await place(games, game_id, 1, "viola", token)
        assert (await feed.next())["changed"][0]["version"] == 2 + number
        if number == 0:
            await asyncio.wait_for(taken.wait(), 2)  # the stuck writer holds its first frame: 2 more fit
    await until(lambda: closed, what="the stuck subscriber closed")
    assert closed == [(1013, "too slow to read")]
    await place(games, game_id, 0, "clarinet")
    assert (await feed.next())["changed"][0]["version"] == 6
    await wall.close()
