"""The wall of this node: every public game that is live and the most recently ended ones, each as a small
summary kept current for the wall feed (`/wall/ws`), at a cost that follows what changes, not what is shown.

The wall runs while anyone watches it: its first subscriber starts it, and it stops a few seconds after
its last one left. A node whose wall nobody watches pays nothing for it: no game is watched, the index is
not polled, and a command's path is what it always was.

Where the games come from:
- At start, the store's index: the newest public games still live, and among the newest listed games the
  most recently ended.
- A public game this node creates is taken at once (`Games.on_listed`); one another node creates is found
  by a poll of the index's newest public ids (twice a second, one small read that touches no stream).
- Each live game shown is held on this node and watched (`LiveGame.watch`): its own appends and, through
  its tail, other nodes' appends (standalone Redis: the game's append notices) mark it changed. Nothing
  else is read for it.
- A reconcile every few seconds takes what the poll cannot see (a game indexed late, an imported one) and
  retires games that were deleted (archived).
- Who is at each table comes from the node's presence (server.engine.presence), read for every game shown
  once a second (in memory for the games this node's clients follow, one store call for the others), as
  presence itself is polled: a node that died says nothing, so its fields' age must be looked at anyway.

The rule: a live game stays on the wall until it ends; the `ended_games` most recently ended games stay
too, and the oldest of them retires when another ends. At most `live_games` live games are shown, the
newest: past that, a new game retires the live game shown longest.

Changes are gathered for `flush_seconds` and sent in one frame, encoded once for every subscriber: of each
game only the fields that changed, and of its chairs only the spaces whose holders changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import deque
from collections.abc import Awaitable, Iterable
from typing import Any

import msgspec

from projections import ChairSpaceView
from server.engine.games import Games
from server.engine.outbox import Outbox
from server.engine.owner import LiveGame
from server.engine.presence import Presence
from server.protocol.frames import Presence as PresenceNow
from server.protocol.frames import SeatPresence
from server.protocol.wall import WallChange, WallChangesFrame, WallFrame, WallGame
from server.store import Listed, StoreError, UnreadableGame

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.1
POLL_SECONDS = 0.5
RECONCILE_SECONDS = 10.0
PRESENCE_SECONDS = 1.0
# How long the wall keeps running once its last subscriber left (a page reloading finds it warm).
LINGER_SECONDS = 5.0
# Newest public ids read by each poll (more, a window four times larger each time, while all are new).
POLL_WINDOW = 16
POLL_WINDOW_MAX = 4096
# Newest listed games among which the ended games shown at start are found.
START_WINDOW = 100
# Games loaded at once (start, poll, reconcile).
LOADS_AT_ONCE = 16

_encode = msgspec.json.Encoder().encode


class _Newest(msgspec.Struct):
    """Of a game's newest envelope, when it was written and its event's tag."""

    at: str
    event: _Tag


class _Tag(msgspec.Struct):
    type: str


_decode_newest = msgspec.json.Decoder(_Newest).decode


def nobody(seats: int) -> PresenceNow:
    """The presence of a table nobody is known to sit at."""
    return PresenceNow([SeatPresence(seat, False) for seat in range(seats)], 0)


def summarize(game: LiveGame, presence: PresenceNow | None = None) -> WallGame:
    """The game as the wall shows it, from its folded view, with its presence (None: nobody's known)."""
    state, view = game.folded.board.game, game.folded.board.view
    assert state.layout is not None  # a loaded game has its GameCreated
    chairs: dict[str, list[int]] = {}
    for space_id, space in view.spaces.items():
        if isinstance(space, ChairSpaceView):
            chairs[space_id] = [] if space.chair is None else [space.chair.seat]
        else:
            chairs[space_id] = [seated.seat for seated in space.chairs]
    prestige = [0] * len(view.players)
    for score in view.scores:
        prestige[score.seat] = score.prestige
    return WallGame(
        game_id=game.game_id,
        players=[player.name for player in view.players],
        layout=state.layout,
        version=view.version,
        ended=view.ended,
        chairs=chairs,
        prestige=prestige,
        presence=presence or nobody(len(view.players)),
    )


def difference(old: WallGame, new: WallGame) -> WallChange | None:
    """What changed from `old` to `new` (the same game), or None when nothing did."""
    fields: dict[str, Any] = {}
    if new.version != old.version:
        fields["version"] = new.version
    if new.ended != old.ended:
        fields["ended"] = new.ended
    chairs = {space: held for space, held in new.chairs.items() if old.chairs.get(space) != held}
    if chairs:
        fields["chairs"] = chairs
    if new.prestige != old.prestige:
        fields["prestige"] = new.prestige
    if new.presence != old.presence:
        fields["presence"] = new.presence
    return WallChange(game_id=new.game_id, **fields) if fields else None


def ended_at(listed: Listed) -> str | None:
    """When a listed game ended (its GameEnded envelope's time), or None while it is live or unreadable."""
    try:
        newest = _decode_newest(listed.last.data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return newest.at if newest.event.type == "GameEnded" else None


class _Tile:
    """A game on the wall: the game while it is live and watched, its summary, and its place in order."""

    __slots__ = ("game", "summary", "order")

    def __init__(self, game: LiveGame | None, summary: WallGame, order: int) -> None:
        self.game, self.summary, self.order = game, summary, order

    def refresh(self) -> None:
        """Its summary again from its game, keeping its presence (an ended game's stays as it was)."""
        if self.game is not None:
            self.summary = summarize(self.game, self.summary.presence)


class Wall:
    """The games on this node's wall and the subscribers of its feed."""

    def __init__(
        self,
        games: Games,
        *,
        presence: Presence | None = None,
        live_games: int = 200,
        ended_games: int = 8,
        flush_seconds: float = FLUSH_SECONDS,
        poll_seconds: float = POLL_SECONDS,
        reconcile_seconds: float = RECONCILE_SECONDS,
        linger_seconds: float = LINGER_SECONDS,
    ) -> None:
        self._games = games
        self._presence = presence
        self.live_limit, self.ended_limit = live_games, ended_games
        self._flush_seconds, self._poll_seconds = flush_seconds, poll_seconds
        self._reconcile_seconds, self._linger_seconds = reconcile_seconds, linger_seconds
        self.subscribers: list[Outbox] = []
        self._joining = 0
        self._running = False
        self._starting: asyncio.Future[None] | None = None
        self._generation = 0  # a stop starts a new one: what a load of the last one finds is dropped
        self._shown: dict[str, _Tile] = {}  # what the wall shows now
        self._sent: dict[str, WallGame] = {}  # what the subscribers hold (shown, as of the last frame)
        self._ended: deque[str] = deque()  # the ended games shown, the earliest ended first
        self._dirty: set[str] = set()
        self._retiring: list[str] = []
        self._loading: set[str] = set()
        self._window: set[str] = set()  # the ids the last poll read
        self._orders = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._stopper: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def running(self) -> bool:
        """Whether the wall runs (someone watches it, or did a moment ago)."""
        return self._running

    def shown(self) -> list[WallGame]:
        """The games on the wall now, in the wall's order (for tests and diagnostics)."""
        return [tile.summary for tile in self._ordered(self._shown)]

    # Subscribers ------------------------------------------------------------------------------------

    async def join(self, outbox: Outbox) -> bytes:
        """Subscribe `outbox` to the wall's changes; the `wall` frame that must reach it first (every game
        it then holds), encoded. The wall starts with its first subscriber.

        Raises: StoreUnavailable (the wall could not start: nothing subscribed).
        """
        if self._stopper is not None:
            self._stopper.cancel()
            self._stopper = None
        if not self._running:
            self._joining += 1
            try:
                if self._starting is None:
                    self._starting = asyncio.ensure_future(self._start())
                    self._starting.add_done_callback(self._started)
                await asyncio.shield(self._starting)
            except BaseException:
                self._joining -= 1
                self._idle()  # a join that failed or was given up leaves no wall running for nobody
                raise
            self._joining -= 1
        # Pending changes go out first, to the others: the new subscriber starts from what they hold.
        self._flush()
        self.subscribers.append(outbox)
        games = [self._sent[tile.summary.game_id] for tile in self._ordered(self._shown)]
        return _encode(WallFrame(games=games, ended_kept=self.ended_limit))

    def leave(self, outbox: Outbox) -> None:
        """Unsubscribe; the wall stops `linger_seconds` after its last subscriber left."""
        with contextlib.suppress(ValueError):
            self.subscribers.remove(outbox)
        self._idle()

    def _idle(self) -> None:
        if self.subscribers or self._joining or self._stopper is not None:
            return
        if self._running:
            self._stopper = asyncio.get_running_loop().call_later(self._linger_seconds, self._stop_if_idle)

    def _stop_if_idle(self) -> None:
        self._stopper = None
        if not self.subscribers and not self._joining:
            self._stop()

    def _started(self, done: asyncio.Future[None]) -> None:
        self._starting = None
        if not done.cancelled():
            done.exception()  # retrieved: every join that awaited it got it

    # Start and stop ---------------------------------------------------------------------------------

    async def _start(self) -> None:
        store = self._games.store
        # The poll's window first: a game listed after it is new to the first poll.
        window = await store.public_ids(POLL_WINDOW)
        live = await store.public_ids(self.live_limit, live=True)
        recent = await store.listed(START_WINDOW) if self.ended_limit else []
        ends = sorted((at, listed.game_id) for listed in recent if (at := ended_at(listed)) is not None)
        ended = [game_id for _, game_id in ends[-self.ended_limit :]] if self.ended_limit else []
        # Oldest first, so that each game shown later is the newer one: live newest first in the wall.
        loaded = await self._load_many([*ended, *reversed(live)])
        present = await self._present(loaded)
        generation = self._generation
        for game in loaded:
            self._show(game, present.get(game.game_id))
        # Nobody holds anything yet: what the wall shows is what the first `wall` frame carries.
        self._dirty.clear()
        self._sent = {game_id: tile.summary for game_id, tile in self._shown.items()}
        self._retiring.clear()
        self._window = set(window)
        self._running = True
        self._games.on_listed = self._listed
        self._spawn(self._poll(generation))
        log.info("wall started", extra={"count": len(self._shown)})
        self._idle()  # every join that started it may have been given up meanwhile

    def _stop(self) -> None:
        """Forget every game and stop watching them: the node pays nothing for the wall any more."""
        self._generation += 1
        self._running = False
        if self._games.on_listed == self._listed:
            self._games.on_listed = None
        for task in self._tasks:
            task.cancel()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for tile in self._shown.values():
            if tile.game is not None:
                tile.game.unwatch()
        self._shown.clear()
        self._sent.clear()
        self._ended.clear()
        self._dirty.clear()
        self._retiring.clear()
        self._window.clear()
        log.info("wall stopped")

    async def close(self) -> None:
        """Stop (the node is shutting down); subscribers are the connections', closed by them."""
        if self._stopper is not None:
            self._stopper.cancel()
            self._stopper = None
        if self._starting is not None:
            self._starting.cancel()
        tasks = list(self._tasks)
        if self._running:
            self._stop()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # Games on and off the wall ----------------------------------------------------------------------

    def _show(self, game: LiveGame, presence: PresenceNow | None) -> None:
        """Put a loaded game on the wall, watched while live (the newest live games win, see above)."""
        game_id = game.game_id
        if game_id in self._shown or game.folded.board.game.spectators != "public":
            return
        summary = summarize(game, presence)
        if summary.ended:
            self._shown[game_id] = _Tile(None, summary, next(self._orders))
            self._ended.append(game_id)
            self._trim_ended()
        else:
            if len(self._shown) - len(self._ended) >= self.live_limit:
                # Full: the newest games win, and the one shown longest makes room.
                ended = set(self._ended)
                live = (t for g, t in self._shown.items() if g not in ended)
                self._retire(min(live, key=lambda t: t.order).summary.game_id)
            self._shown[game_id] = _Tile(game, summary, next(self._orders))
            game.watch(self._changed)
        self._mark(game_id)

    def _retire(self, game_id: str) -> None:
        tile = self._shown.pop(game_id, None)
        if tile is None:
            return
        if tile.game is not None:
            tile.game.unwatch()
        with contextlib.suppress(ValueError):
            self._ended.remove(game_id)
        self._retiring.append(game_id)
        self._mark(game_id)

    def _trim_ended(self) -> None:
        while len(self._ended) > self.ended_limit:
            self._retire(self._ended[0])

    def _ordered(self, tiles: dict[str, _Tile]) -> list[_Tile]:
        """Live games newest first, then the ended ones, most recently ended first."""
        ended = set(self._ended)
        live = sorted((t for g, t in tiles.items() if g not in ended), key=lambda t: -t.order)
        return [*live, *(tiles[g] for g in reversed(self._ended) if g in tiles)]

    # Changes ----------------------------------------------------------------------------------------

    def _changed(self, game: LiveGame) -> None:
        """A shown game folded something new (its watcher: on the game's own path, so only marks it)."""
        self._mark(game.game_id)

    def _mark(self, game_id: str) -> None:
        self._dirty.add(game_id)
        if self._timer is None and self._running:
            self._timer = asyncio.get_running_loop().call_later(self._flush_seconds, self._flush)

    def _flush(self) -> None:
        """Send what changed since the last frame, in one frame encoded once."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._dirty:
            return
        dirty, self._dirty = self._dirty, set()
        for game_id in dirty:
            tile = self._shown.get(game_id)
            if tile is not None and tile.game is not None:
                tile.refresh()
                if tile.summary.ended:
                    tile.game.unwatch()  # nothing follows an end
                    tile.game = None
                    self._ended.append(game_id)
                    self._trim_ended()
        retiring, self._retiring = self._retiring, []
        retired = [g for g in dict.fromkeys(retiring) if g not in self._shown and g in self._sent]
        for game_id in retired:
            del self._sent[game_id]
        added: dict[str, _Tile] = {}
        changed: list[WallChange] = []
        for game_id in dirty:
            tile = self._shown.get(game_id)
            if tile is None:
                continue
            old = self._sent.get(game_id)
            if old is None:
                added[game_id] = tile
            elif (change := difference(old, tile.summary)) is not None:
                changed.append(change)
            self._sent[game_id] = tile.summary
        if not (retired or added or changed):
            return
        frame = _encode(
            WallChangesFrame(
                retired=retired, added=[t.summary for t in self._ordered(added)], changed=changed
            )
        )
        for outbox in self.subscribers:
            outbox.put(frame)

    # Finding games ----------------------------------------------------------------------------------

    def _listed(self, game_id: str) -> None:
        """This node created a public game: on the wall at once."""
        if self._running:
            self._spawn(self._take([game_id]))

    async def _poll(self, generation: int) -> None:
        loop = asyncio.get_running_loop()
        next_reconcile = loop.time() + self._reconcile_seconds
        next_presence = loop.time() + PRESENCE_SECONDS
        while generation == self._generation:
            await asyncio.sleep(self._poll_seconds)
            try:
                await self._discover()
                if loop.time() >= next_presence:
                    next_presence = loop.time() + PRESENCE_SECONDS
                    await self._follow_presence()
                if loop.time() >= next_reconcile:
                    next_reconcile = loop.time() + self._reconcile_seconds
                    await self._reconcile()
            except StoreError as exc:
                self._games.metrics.redis_errors.inc()
                log.warning("wall: the index cannot be read now", extra={"error": str(exc)})
            except Exception:  # a bug here must not stop the wall finding games for good
                log.exception("wall: round failed")

    async def _discover(self) -> None:
        """The public games listed since the last poll: the newest ids the last poll did not read."""
        store, size = self._games.store, POLL_WINDOW
        while True:
            ids = await store.public_ids(size)
            fresh = [game_id for game_id in ids if game_id not in self._window]
            if len(fresh) < len(ids) or len(ids) < size or size >= POLL_WINDOW_MAX:
                break
            size *= 4
        self._window = set(ids)
        if fresh:
            await self._take(reversed(fresh))

    async def _reconcile(self) -> None:
        """Retire the games deleted, and the live ones older than the newest `live_games`; take the newest
        live games the wall lacks."""
        store = self._games.store
        live = await store.public_ids(self.live_limit, live=True)
        indexed = set(live)
        doubtful = [game_id for game_id in self._shown if game_id not in indexed]
        versions = await asyncio.gather(*(store.version(game_id) for game_id in doubtful))
        full = len(live) >= self.live_limit
        for game_id, version in zip(doubtful, versions, strict=True):
            tile = self._shown.get(game_id)
            if version == 0 or (full and tile is not None and tile.game is not None):
                self._retire(game_id)
        await self._take(reversed(live))

    async def _take(self, ids: Iterable[str]) -> None:
        """Load these games and show them (oldest first); a game that cannot be read is left out."""
        wanted = [g for g in ids if g not in self._shown and g not in self._loading]
        if not wanted:
            return
        generation = self._generation
        loaded = await self._load_many(wanted)
        present = await self._present(loaded)
        for game in loaded:
            if generation == self._generation and self._running:
                self._show(game, present.get(game.game_id))

    async def _follow_presence(self) -> None:
        """Who is at each table shown now; a game whose presence changed is marked changed."""
        tiles = list(self._shown.values())
        found = await self._present_of([(t.summary.game_id, len(t.summary.players)) for t in tiles])
        for tile in tiles:
            now = found.get(tile.summary.game_id)
            if now is not None and now != tile.summary.presence and tile.summary.game_id in self._shown:
                tile.summary = msgspec.structs.replace(tile.summary, presence=now)
                self._mark(tile.summary.game_id)

    async def _present(self, games: list[LiveGame]) -> dict[str, PresenceNow]:
        """The presence of each of these games (none when it cannot be read now: nobody's shown)."""
        try:
            return await self._present_of([(g.game_id, len(g.folded.board.game.players)) for g in games])
        except StoreError:
            return {}

    async def _present_of(self, games: list[tuple[str, int]]) -> dict[str, PresenceNow]:
        if self._presence is None or not games:
            return {}
        found = await self._presence.of(games)
        return {game_id: now for (game_id, _), now in zip(games, found, strict=True)}

    async def _load_many(self, ids: list[str]) -> list[LiveGame]:
        """The games of `ids` that load, in their order. Raises: StoreUnavailable."""
        gate = asyncio.Semaphore(LOADS_AT_ONCE)
        self._loading.update(ids)

        async def load(game_id: str) -> LiveGame | None:
            async with gate:
                try:
                    return await self._games.get(game_id)
                except UnreadableGame:
                    return None  # logged by the node; a damaged game stays off the wall

        try:
            found = await asyncio.gather(*(load(game_id) for game_id in ids))
        finally:
            self._loading.difference_update(ids)
        return [game for game in found if game is not None]

    def _spawn(self, work: Awaitable[None]) -> None:
        async def run() -> None:
            try:
                await work
            except StoreError as exc:  # the next poll or reconcile takes the game
                log.warning("wall: a game cannot be read now", extra={"error": str(exc)})
            except Exception:
                log.exception("wall: taking a game failed")

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
