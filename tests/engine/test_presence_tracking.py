"""Presence on one node and across nodes (server.engine.presence), on the in-memory store: two
`PresenceTracker` objects sharing one store are two nodes. Rounds are run by hand (`tick`), and the wall
clock that dates each node's field is a test's own, so that a node's silence can be made to last 15 s at
once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

from server.engine.presence import PresenceTracker
from server.protocol.frames import Presence, SeatPresence
from server.store.memory import MemoryEventStore

INTERVAL = 0.2  # the frames' pace in these tests (a second on a server)


class Sink:
    """A connection's outbox: the presence frames it was sent, decoded."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []

    def put(self, data: bytes) -> None:
        self.frames.append(json.loads(data))

    @property
    def last(self) -> dict[str, Any]:
        return self.frames[-1]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def frame(online: list[bool], spectators: int) -> dict[str, Any]:
    seats = [{"seat": seat, "online": up} for seat, up in enumerate(online)]
    return {"type": "presence", "seats": seats, "spectators": spectators}


def node(store: MemoryEventStore, name: str, clock: Clock) -> PresenceTracker:
    return PresenceTracker(store, node=name, interval=INTERVAL, clock=clock)


async def settle() -> None:
    """Let a first read and any frame held back by the pace go out."""
    await asyncio.sleep(INTERVAL * 1.5)


async def test_a_connection_gets_the_presence_after_joining_and_others_get_the_change() -> None:
    clock = Clock()
    store = MemoryEventStore(clock)
    here = node(store, "a", clock)
    ada, watcher = Sink(), Sink()
    here.join("g", 3, 0, ada)
    await settle()
    assert ada.frames == [frame([True, False, False], 0)]
    here.join("g", 3, None, watcher)
    assert watcher.frames == [frame([True, False, False], 1)]  # at once: the game's presence is known
    await settle()
    assert ada.frames[-1] == frame([True, False, False], 1)
    assert len(watcher.frames) == 1, "nothing it has not seen"


async def test_two_nodes_see_each_others_connections_once_each_has_written_and_read() -> None:
    clock = Clock()
    store = MemoryEventStore(clock)
    first, second = node(store, "a", clock), node(store, "b", clock)
    player, spectator = Sink(), Sink()
    joined = first.join("g", 2, 1, player)
    second.join("g", 2, None, spectator)
    await settle()
    await first.tick()
    await second.tick()
    await first.tick()
    await settle()
    assert spectator.last == frame([False, True], 1)
    assert player.last == frame([False, True], 1)
    assert await second.of([("g", 2), ("other", 1)]) == [
        Presence([SeatPresence(0, False), SeatPresence(1, True)], 1),
        Presence([SeatPresence(0, False)], 0),
    ]
    first.leave(joined)
    await first.tick()
    await second.tick()
    await settle()
    assert spectator.last == frame([False, False], 1)


async def test_a_node_that_stops_writing_stops_counting_once_its_field_is_older_than_the_expiry() -> None:
    clock = Clock()
    store = MemoryEventStore(clock)
    dying, living = node(store, "a", clock), node(store, "b", clock)
    dying.join("g", 1, 0, Sink())
    spectator = Sink()
    living.join("g", 1, None, spectator)
    await dying.tick()
    await living.tick()
    await settle()
    assert spectator.last == frame([True], 1)
    clock.now += 14  # the dying node says nothing more: within the expiry, it still counts
    await living.tick(beat=True)
    await settle()
    assert spectator.last == frame([True], 1)
    clock.now += 2
    await living.tick(beat=True)
    await settle()
    assert spectator.last == frame([False], 1)
    # What any other node reads then: the living node's field is fresh (written again every heartbeat).
    assert await node(store, "c", clock).of([("g", 1)]) == [Presence([SeatPresence(0, False)], 1)]


async def test_a_burst_of_joins_and_leaves_reaches_a_connection_as_at_most_one_frame_per_interval() -> None:
    clock = Clock()
    store = MemoryEventStore(clock)
    here = node(store, "a", clock)
    observer = Sink()
    here.join("g", 2, 0, observer)
    await settle()
    started = len(observer.frames)
    loop = asyncio.get_running_loop()
    begin = loop.time()
    for n in range(50):
        joined = here.join("g", 2, None if n % 2 else 1, Sink())
        await asyncio.sleep(0.005)
        here.leave(joined)
    elapsed = loop.time() - begin
    await settle()
    burst = observer.frames[started:]
    assert 1 <= len(burst) <= elapsed / INTERVAL + 2, (len(burst), elapsed)
    assert observer.last == frame([True, False], 0)  # the last frame says how it ended


async def test_closing_a_node_removes_its_fields_and_a_game_left_by_all_is_forgotten() -> None:
    clock = Clock()
    store = MemoryEventStore(clock)
    first = node(store, "a", clock)
    joined = first.join("g", 1, 0, Sink())
    first.join("h", 1, None, Sink())
    await settle()
    await first.tick()
    assert [sorted(row) for row in await store.read_presence(["g", "h"])] == [["a"], ["a"]]
    first.leave(joined)
    await first.tick()
    assert await store.read_presence(["g"]) == [{}]
    assert first.games == ["h"]
    await first.close()
    assert await store.read_presence(["h"]) == [{}]


def test_an_expiry_not_longer_than_the_heartbeat_is_refused() -> None:
    with pytest.raises(ValueError, match="heartbeat < expiry"):
        PresenceTracker(MemoryEventStore(), heartbeat=5, expiry=5)


class Counting(MemoryEventStore):
    """The in-memory store, counting its presence reads."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock)
        self.reads: list[int] = []

    async def read_presence(self, game_ids: Sequence[str]) -> list[dict[str, bytes]]:
        self.reads.append(len(game_ids))
        return await super().read_presence(game_ids)


async def test_connections_to_many_new_games_at_once_cost_one_read_of_their_presence() -> None:
    clock = Clock()
    store = Counting(clock)
    here = node(store, "a", clock)
    sinks = [Sink() for _ in range(300)]
    for n, sink in enumerate(sinks):
        here.join(f"g{n}", 2, n % 2, sink)
    await settle()
    assert store.reads == [300]
    assert all(sink.frames == [frame([n % 2 == 0, n % 2 == 1], 0)] for n, sink in enumerate(sinks))


async def test_nodes_whose_clocks_disagree_date_their_fields_by_the_stores_clock() -> None:
    clock = Clock()
    store = MemoryEventStore(clock)
    # A node 100 s ahead of the store and one 100 s behind: by their own clocks, the one behind would
    # look silent for 200 s to the one ahead, and gone.
    ahead = PresenceTracker(store, node="a", interval=INTERVAL, clock=lambda: clock.now + 100)
    behind = PresenceTracker(store, node="b", interval=INTERVAL, clock=lambda: clock.now - 100)
    sink = Sink()
    behind.join("g", 2, 1, Sink())
    ahead.join("g", 2, 0, sink)
    for presence in (behind, ahead, behind, ahead):
        await presence.tick()
    await settle()
    assert sink.last == frame([True, True], 0)
    clock.now += 16  # the one behind stops writing: once past the expiry by the store's clock, it is gone
    await ahead.tick()
    await settle()
    assert sink.last == frame([True, False], 0)
    for presence in (ahead, behind):
        await presence.close()
