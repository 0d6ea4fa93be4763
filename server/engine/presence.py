"""Who is at each table: which seats have an open connection and how many spectators watch, on every node.

Presence is no fact of a game: it never enters the stream, an export or a view. Each node counts its own
connections per game (per seat, and spectators) and keeps them in the store beside the game, in a field
of its own (Redis: the hash `orchestra:{<game_id>}:presence`, field = the node's id, value = its counts and
when it wrote them). Once every `interval` (a second) the node's one presence task

1. writes, in one call, its field of each game whose counts changed; every `heartbeat` (5 s) it writes
   those of all its games again, and each write keeps the game's hash for `expiry + heartbeat` more;
2. reads, in one call, every field of the games its connections follow, and leaves out a field written
   more than `expiry` (15 s) ago: a node killed without a word stops counting then.

Polled, not published: a dead node publishes nothing, so its field's age must be looked at anyway, and
one pipelined read a second costs a node one round trip for all its games, alike on a standalone Redis
and on a Cluster (where a publish would reach every node of the cluster). Fields are dated, and their ages
judged, by the store's clock: each node reads it at its first round and at every heartbeat and keeps its
own clock's offset from it, so the nodes' clocks need not agree.

Each connection gets a `presence` frame once it is admitted (behind its welcome), then whenever its game's
presence changes: at most one frame a second per game, the latest state, to each connection whose last
frame differs from it. No store call is ever made on a command's path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import msgspec

from server.protocol.frames import Presence, PresenceFrame, SeatPresence, encode
from server.store import EventStore, StoreError

log = logging.getLogger(__name__)

# Games read (or written) per store call: a node following many games reads them in slices.
CHUNK = 1000


class Sink(Protocol):
    """Where a connection's frames go (its outbox)."""

    def put(self, data: bytes) -> None: ...


class _Field(msgspec.Struct, frozen=True):
    """A node's field of a game's presence: the seats it has a connection of, its spectator connections,
    and when it wrote them (milliseconds since the epoch, by its clock)."""

    at: int
    seats: list[int] = []
    spectators: int = 0


_decode_field = msgspec.json.Decoder(_Field).decode


class Attendee:
    """One connection's place in its game's presence: its seat (None: a spectator), where its frames go,
    and the last presence frame it was sent."""

    __slots__ = ("game_id", "seat", "sink", "sent")

    def __init__(self, game_id: str, seat: int | None, sink: Sink) -> None:
        self.game_id, self.seat, self.sink = game_id, seat, sink
        self.sent: bytes | None = None


class _Table:
    """One game's presence as this node knows it: its own connections, and the other nodes' sum."""

    __slots__ = (
        "game_id",
        "connected",
        "spectators",
        "attendees",
        "remote_seats",
        "remote_spectators",
        "primed",
        "queued",
        "dirty",
        "stored",
        "last_sent",
        "timer",
    )

    def __init__(self, game_id: str, seats: int) -> None:
        self.game_id = game_id
        self.connected = [0] * seats  # this node's connections per seat
        self.spectators = 0  # this node's spectator connections
        self.attendees: set[Attendee] = set()
        self.remote_seats: frozenset[int] = frozenset()  # seats online through another node
        self.remote_spectators = 0
        self.primed = False  # the other nodes' fields have been read once
        self.queued = False  # waiting for that first read
        self.dirty = False  # this node's counts changed since it last wrote them
        self.stored = False  # the store holds a field of this node for the game
        self.last_sent = -1e9  # the loop's time of the last frame sent on a change
        self.timer: asyncio.TimerHandle | None = None

    @property
    def local(self) -> bool:
        """Whether this node has any connection to the game."""
        return self.spectators > 0 or any(self.connected)


def node_name() -> str:
    """A new id for this node's presence: its host, process and a random part (a restarted node is
    another node; what the old one wrote ages out)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class PresenceTracker:
    """This node's side of presence: its connections per game, the other nodes' as last read, the
    frames to send, and the task that writes and reads the store."""

    def __init__(
        self,
        store: EventStore,
        *,
        node: str | None = None,
        heartbeat: float = 5.0,
        expiry: float = 15.0,
        interval: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`heartbeat`, `expiry` and `interval` in seconds; `clock` is this node's wall clock (fields are
        dated by the store's, through this clock's offset from it).

        Raises: ValueError when `expiry` is not longer than `heartbeat` (live nodes would seem to leave).
        """
        if not 0 < heartbeat < expiry or interval <= 0:
            raise ValueError("presence: need 0 < heartbeat < expiry and an interval > 0")
        self.store = store
        self.node = node or node_name()
        self.heartbeat, self.expiry, self.interval = heartbeat, expiry, interval
        self.ttl = expiry + heartbeat
        self._clock = clock
        # The store's clock minus this node's, as last measured (None: not yet).
        self._offset: float | None = None
        self._tables: dict[str, _Table] = {}
        self._task: asyncio.Task[None] | None = None
        # Games joined here for the first time, whose other nodes' fields one task reads, together.
        self._unprimed: list[_Table] = []
        self._priming: asyncio.Task[None] | None = None
        self._failing = False

    @property
    def games(self) -> list[str]:
        """The games this node keeps presence for (for tests and diagnostics)."""
        return list(self._tables)

    # Connections ------------------------------------------------------------------------------------

    def join(self, game_id: str, seats: int, seat: int | None, sink: Sink) -> Attendee:
        """A connection to a game with `seats` seats was admitted, as `seat` (None: a spectator): it gets
        the presence now (once the other nodes' is known), the others the change."""
        table = self._table(game_id, seats)
        attendee = Attendee(game_id, seat, sink)
        table.attendees.add(attendee)
        if seat is None:
            table.spectators += 1
        else:
            table.connected[seat] += 1
        table.dirty = True
        if table.primed:
            self._send(attendee, self._frame(table))
            self._changed(table)
        elif not table.queued:
            table.queued = True
            self._unprimed.append(table)
            if self._priming is None:
                self._priming = asyncio.get_running_loop().create_task(self._prime())
        return attendee

    def leave(self, attendee: Attendee) -> None:
        """The connection closed."""
        table = self._tables.get(attendee.game_id)
        if table is None or attendee not in table.attendees:
            return
        table.attendees.discard(attendee)
        if attendee.seat is None:
            table.spectators -= 1
        else:
            table.connected[attendee.seat] -= 1
        table.dirty = True
        self._changed(table)

    async def of(self, games: Sequence[tuple[str, int]]) -> list[Presence]:
        """The presence now of each game (id, seats): from memory for a game this node follows, else
        read (all in one call). Raises: StoreUnavailable."""
        unknown = [game_id for game_id, _ in games if not self._known(game_id)]
        rows = dict(zip(unknown, await self.store.read_presence(unknown), strict=True)) if unknown else {}
        found: list[Presence] = []
        for game_id, seats in games:
            table = self._tables.get(game_id)
            if game_id in rows:
                online, spectators = self._others(rows[game_id], self._now())
                if table is not None:
                    online |= {seat for seat, count in enumerate(table.connected) if count}
                    spectators += table.spectators
                found.append(_presence(seats, online, spectators))
            else:
                assert table is not None
                found.append(_presence(seats, *self._merged(table)))
        return found

    # The task ---------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start writing and reading the store (once a second)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        """Stop, and remove this node's fields (its connections are gone with it)."""
        for task in (self._task, self._priming):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._priming = None
        for table in self._tables.values():
            if table.timer is not None:
                table.timer.cancel()
        stored = {game_id: None for game_id, table in self._tables.items() if table.stored}
        self._tables.clear()
        try:
            for chunk in _chunks(list(stored)):
                await self.store.write_presence(self.node, dict.fromkeys(chunk), self.ttl)
        except StoreError as exc:
            log.warning("presence not removed: it ages out", extra={"error": str(exc)})

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_beat = loop.time() + self.heartbeat
        while True:
            await asyncio.sleep(self.interval)
            beat = loop.time() >= next_beat
            if beat:
                next_beat = loop.time() + self.heartbeat
            try:
                await self.tick(beat)
            except StoreError as exc:
                if not self._failing:
                    log.warning("presence not shared: store error", extra={"error": str(exc)})
                self._failing = True
                continue
            except Exception:  # a bug here must not stop presence for good
                log.exception("presence: round failed")
                continue
            if self._failing:
                log.info("presence shared again")
                self._failing = False

    async def tick(self, beat: bool = False) -> None:
        """One round: write what changed (with `beat`, every field of this node again), read the other
        nodes' fields of the followed games, and forget the games this node is done with.

        Raises: StoreUnavailable.
        """
        if beat or self._offset is None:
            await self._sync_clock()
        await self._write(beat)
        await self._poll()
        for game_id, table in list(self._tables.items()):
            if not table.attendees and not table.stored and not table.dirty and not table.queued:
                if table.timer is not None:
                    table.timer.cancel()
                del self._tables[game_id]

    async def _sync_clock(self) -> None:
        before = self._clock()
        store = await self.store.time()
        after = self._clock()
        self._offset = store - (before + after) / 2

    def _now(self) -> float:
        """The store's time, by this node's clock and its last measured offset."""
        return self._clock() + (self._offset or 0.0)

    async def _write(self, beat: bool) -> None:
        values: dict[str, bytes | None] = {}
        written: list[_Table] = []
        at = int(self._now() * 1000)
        for table in self._tables.values():
            if not (table.dirty or (beat and table.stored)):
                continue
            table.dirty = False
            if table.local:
                seats = [seat for seat, count in enumerate(table.connected) if count]
                values[table.game_id] = encode(_Field(at, seats, table.spectators))
            elif table.stored:
                values[table.game_id] = None
            else:
                continue
            written.append(table)
        try:
            for chunk in _chunks(list(values)):
                await self.store.write_presence(
                    self.node, {game_id: values[game_id] for game_id in chunk}, self.ttl
                )
        except BaseException:
            for table in written:
                table.dirty = True
            raise
        for table in written:
            table.stored = values[table.game_id] is not None

    async def _poll(self) -> None:
        followed = [game_id for game_id, table in self._tables.items() if table.attendees]
        for chunk in _chunks(followed):
            rows = await self.store.read_presence(chunk)
            now = self._now()
            for game_id, row in zip(chunk, rows, strict=True):
                table = self._tables.get(game_id)
                if table is not None:
                    self._take(table, row, now)

    async def _prime(self) -> None:
        """Read the other nodes' fields of the games this node just began to follow, all in one call (a
        burst of hellos for many games costs one round trip, not one each), then send their connections
        their first frame (from this node's counts alone, should the read fail: the next round reads
        them again)."""
        try:
            while self._unprimed:
                tables, self._unprimed = self._unprimed, []
                try:
                    for start in range(0, len(tables), CHUNK):
                        chunk = tables[start : start + CHUNK]
                        rows = await self.store.read_presence([table.game_id for table in chunk])
                        now = self._now()
                        for table, row in zip(chunk, rows, strict=True):
                            self._take(table, row, now)
                except StoreError:
                    pass
                for table in tables:
                    table.primed, table.queued = True, False
                    frame = self._frame(table)
                    for attendee in table.attendees:
                        if attendee.sent is None:
                            self._send(attendee, frame)
                    self._changed(table)
        finally:
            self._priming = None

    # Frames -----------------------------------------------------------------------------------------

    def _take(self, table: _Table, row: Mapping[str, bytes], now: float) -> None:
        online, spectators = self._others(row, now)
        seats = frozenset(online)
        if (seats, spectators) != (table.remote_seats, table.remote_spectators):
            table.remote_seats, table.remote_spectators = seats, spectators
            if table.primed:
                self._changed(table)

    def _others(self, row: Mapping[str, bytes], now: float) -> tuple[set[int], int]:
        """The seats online and the spectators of the other nodes' fresh fields."""
        online: set[int] = set()
        spectators = 0
        oldest = (now - self.expiry) * 1000
        for node, value in row.items():
            if node == self.node:
                continue  # this node's own counts are its live ones
            try:
                field = _decode_field(value)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            if field.at < oldest:
                continue  # its node stopped writing: gone
            online.update(field.seats)
            spectators += max(0, field.spectators)
        return online, spectators

    def _merged(self, table: _Table) -> tuple[set[int], int]:
        online = {seat for seat, count in enumerate(table.connected) if count} | table.remote_seats
        return online, table.spectators + table.remote_spectators

    def _frame(self, table: _Table) -> bytes:
        presence = _presence(len(table.connected), *self._merged(table))
        return encode(PresenceFrame(presence.seats, presence.spectators))

    def _changed(self, table: _Table) -> None:
        """Send the game's presence to those whose last frame differs: now, or a second after the last
        one sent on a change (what changes meanwhile goes in that one)."""
        if table.timer is not None:
            return
        loop = asyncio.get_running_loop()
        wait = table.last_sent + self.interval - loop.time()
        if wait <= 0:
            self._broadcast(table)
        else:
            table.timer = loop.call_later(wait, self._broadcast_later, table)

    def _broadcast_later(self, table: _Table) -> None:
        table.timer = None
        self._broadcast(table)

    def _broadcast(self, table: _Table) -> None:
        frame = self._frame(table)
        sent = False
        for attendee in table.attendees:
            if attendee.sent is not None and attendee.sent != frame:
                self._send(attendee, frame)
                sent = True
        if sent:
            table.last_sent = asyncio.get_running_loop().time()

    def _send(self, attendee: Attendee, frame: bytes) -> None:
        attendee.sent = frame
        attendee.sink.put(frame)

    def _table(self, game_id: str, seats: int) -> _Table:
        table = self._tables.get(game_id)
        if table is None:
            table = self._tables[game_id] = _Table(game_id, seats)
        return table

    def _known(self, game_id: str) -> bool:
        table = self._tables.get(game_id)
        return table is not None and table.primed and bool(table.attendees)


def _presence(seats: int, online: set[int], spectators: int) -> Presence:
    return Presence([SeatPresence(seat, seat in online) for seat in range(seats)], spectators)


def _chunks(items: list[str]) -> list[list[str]]:
    return [items[start : start + CHUNK] for start in range(0, len(items), CHUNK)]
