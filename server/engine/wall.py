"""The wall of this node: the most active public games that are live and the most recently ended ones,
each as a small summary kept current for the wall feed (`/wall/ws`), at a cost that follows what changes,
not what is shown, and that no stranger can take over by creating games.

The wall runs while anyone watches it: its first subscriber starts it, and it stops a few seconds after
its last one left. A node whose wall nobody watches pays nothing for it: no game is watched, the index is
not polled, and a command's path is what it always was.

Where the games come from:
- At start, the store's index: among the newest listed games (`SCAN_FACTOR` times the live games shown),
  those live and active (their newest envelope younger than the idle time), the most active first, and the
  most recently ended.
- A public game this node creates is taken at once (`Games.on_listed`); one another node creates is found
  by a poll of the index's newest public ids (twice a second, one small read that touches no stream; the
  newest records of the new ones only when there are new ones).
- Each live game shown is held on this node and watched (`LiveGame.watch`): its own appends and, through
  its tail, other nodes' appends (standalone Redis: the game's append notices) mark it changed. Nothing
  else is read for it.
- A reconcile every few seconds reads the newest listed games again (with their newest records): it takes
  a game that came back to life (a placement after it left the wall idle), one indexed late or imported,
  and retires games that were deleted (archived).
- Who is at each table comes from the node's presence (server.engine.presence), read for every game shown
  once a second (in memory for the games this node's clients follow, one store call for the others), as
  presence itself is polled: a node that died says nothing, so its fields' age must be looked at anyway.

The rules (protocol.md, section 12), so that strangers cannot fill the wall with games nobody plays:
- A tile's activity is the time of its game's newest envelope (a placement, or its creation). A live game
  without one for `idle_seconds` retires, and comes back with its next placement (within a reconcile).
- One creator (the keyed hash of the address bucket it was created from, kept in its listing: never the
  address) holds at most `creator_share` of the live games shown, at least one. A game listed without a
  creator (created before creators were kept) is its own creator.
- At most `live_games` live games are shown: past that, a new game takes the place of the least active game
  that nobody watches (no seat online, no spectator), if it is more active; a watched table is never
  replaced. The `ended_games` most recently ended games stay, and the oldest of them retires when another
  ends.

Each subscriber holds a page of the wall: its first frame carries the `page_games` most active games (and
how many the wall shows); each `wall_more` it sends adds another page. It is sent changes of the games it
holds only, and when it holds fewer than it asked for (a game retired, a new one came) the most active
games it lacks are added to what it holds. Changes are gathered for `flush_seconds` and sent in one frame,
encoded once for every subscriber that holds the same games: of each game only the fields that changed,
and of its chairs only the spaces whose holders changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from typing import Any, NamedTuple

import msgspec

from projections import ChairSpaceView
from server.engine.games import Games
from server.engine.listing import listed_creator
from server.engine.outbox import Outbox
from server.engine.owner import LiveGame
from server.engine.presence import PresenceTracker
from server.protocol.frames import Presence, SeatPresence
from server.protocol.wall import WallChange, WallChangesFrame, WallFrame, WallGame, WallPageFrame
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
# Newest listed games among which the wall finds games to show (at start and at each reconcile): so many
# times the live games it shows, and at least SCAN_MIN.
SCAN_FACTOR = 5
SCAN_MIN = 100
# The defaults of the rules above (ORCHESTRA_WALL_*: server.config).
IDLE_SECONDS = 600.0
CREATOR_SHARE = 0.05
PAGE_GAMES = 24
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


def nobody(seats: int) -> Presence:
    """The presence of a table nobody is known to sit at."""
    return Presence([SeatPresence(seat, False) for seat in range(seats)], 0)


def summarize(game: LiveGame, presence: Presence | None = None) -> WallGame:
    """The game as the wall shows it, from its folded view, with its presence (None: nobody's known)."""
    state, view = game.state, game.view
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
    chairs = {space: holders for space, holders in new.chairs.items() if old.chairs.get(space) != holders}
    if chairs:
        fields["chairs"] = chairs
    if new.prestige != old.prestige:
        fields["prestige"] = new.prestige
    if new.presence != old.presence:
        fields["presence"] = new.presence
    if new.players != old.players:
        fields["players"] = new.players
    return WallChange(game_id=new.game_id, **fields) if fields else None


def _newest(listed: Listed) -> _Newest | None:
    try:
        return _decode_newest(listed.last.data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def ended_at(listed: Listed) -> str | None:
    """When a listed game ended (its GameEnded envelope's time), or None while it is live or unreadable."""
    newest = _newest(listed)
    return newest.at if newest is not None and newest.event.type == "GameEnded" else None


def seconds(at: str) -> float | None:
    """An envelope's time in seconds since the epoch; None when it is not one."""
    try:
        return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def watched(game: WallGame) -> bool:
    """Whether anyone is at the table: a seat online or a spectator."""
    return game.presence.spectators > 0 or any(seat.online for seat in game.presence.seats)


class Candidate(NamedTuple):
    """A live public game the wall may show: its id, its creator's hash, and when it was last active."""

    game_id: str
    creator: str
    active: float


def own_creator(game_id: str) -> str:
    """The creator of a game listed without one: the game itself (it shares no one's share)."""
    return f"game:{game_id}"


def candidates(found: Iterable[Listed]) -> list[Candidate]:
    """The live games among these listed ones, the most recently active first (an unreadable one left out)."""
    live: list[Candidate] = []
    for listed in found:
        newest = _newest(listed)
        if newest is None or newest.event.type == "GameEnded" or (active := seconds(newest.at)) is None:
            continue
        live.append(Candidate(listed.game_id, listed_creator(listed) or own_creator(listed.game_id), active))
    live.sort(key=lambda candidate: -candidate.active)
    return live


class _Tile:
    """A game on the wall: the game while it is live and watched, its summary, its place in order, when it
    was last active, and its creator's hash."""

    __slots__ = ("game", "summary", "order", "active", "creator")

    def __init__(
        self, game: LiveGame | None, summary: WallGame, order: int, active: float, creator: str
    ) -> None:
        self.game, self.summary, self.order = game, summary, order
        self.active, self.creator = active, creator

    def refresh(self) -> None:
        """Its summary and activity again from its game, keeping its presence (an ended game's stay)."""
        if self.game is not None:
            self.summary = summarize(self.game, self.summary.presence)
            self.active = seconds(self.game.last_at) or self.active

    def rank(self) -> tuple[bool, bool, float, int]:
        """Its rank in the pages: live before ended, watched before not, then the most recently active."""
        return (self.game is not None, watched(self.summary), self.active, self.order)


class _Subscriber:
    """A subscriber of the feed: its outbox, the games it holds, and how many it asked to hold."""

    __slots__ = ("outbox", "held", "quota")

    def __init__(self, outbox: Outbox, quota: int) -> None:
        self.outbox, self.held, self.quota = outbox, set[str](), quota


class Wall:
    """The games on this node's wall and the subscribers of its feed."""

    def __init__(
        self,
        games: Games,
        *,
        presence: PresenceTracker | None = None,
        live_games: int = 200,
        ended_games: int = 8,
        idle_seconds: float = IDLE_SECONDS,
        creator_share: float = CREATOR_SHARE,
        page_games: int = PAGE_GAMES,
        flush_seconds: float = FLUSH_SECONDS,
        poll_seconds: float = POLL_SECONDS,
        reconcile_seconds: float = RECONCILE_SECONDS,
        linger_seconds: float = LINGER_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._games = games
        self._presence = presence
        self.live_limit, self.ended_limit = live_games, ended_games
        self.idle_seconds = idle_seconds
        # What one creator may hold of the live games shown (at least one game).
        self.share_limit = max(1, int(creator_share * live_games))
        self.page_games = max(1, page_games)
        self._scan = max(SCAN_MIN, SCAN_FACTOR * live_games)
        self._flush_seconds, self._poll_seconds = flush_seconds, poll_seconds
        self._reconcile_seconds, self._linger_seconds = reconcile_seconds, linger_seconds
        self._clock = clock
        self._subscribers: dict[Outbox, _Subscriber] = {}
        self._joining = 0
        self._running = False
        self._starting: asyncio.Future[None] | None = None
        self._generation = 0  # a stop starts a new one: what a load of the last one finds is dropped
        self._shown: dict[str, _Tile] = {}  # what the wall shows now
        self._sent: dict[str, WallGame] = {}  # each shown game as of the last frame (what holders hold)
        self._total = 0  # how many games the wall showed as of the last frame
        self._ended: deque[str] = deque()  # the ended games shown, the earliest ended first
        self._dirty: set[str] = set()
        self._retiring: list[str] = []
        self._loading: set[str] = set()
        self._window: set[str] = set()  # the ids the last poll read
        self._orders = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._stopper: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # Reconciles run to their end, for tests and diagnostics (as `shown` and `held`).
        self.reconciles = 0

    @property
    def running(self) -> bool:
        """Whether the wall runs (someone watches it, or did a moment ago)."""
        return self._running

    @property
    def subscribers(self) -> list[Outbox]:
        """The outboxes of the feed's subscribers."""
        return list(self._subscribers)

    def shown(self) -> list[WallGame]:
        """The games on the wall now, in the wall's order (for tests and diagnostics)."""
        return [tile.summary for tile in self._ordered(self._shown)]

    def held(self, outbox: Outbox) -> set[str]:
        """The ids of the games a subscriber holds (for tests and diagnostics)."""
        subscriber = self._subscribers.get(outbox)
        return set() if subscriber is None else set(subscriber.held)

    # Subscribers ------------------------------------------------------------------------------------

    async def join(self, outbox: Outbox) -> bytes:
        """Subscribe `outbox` to the wall's changes; the `wall` frame that must reach it first (the first
        page: the games it then holds), encoded. The wall starts with its first subscriber.

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
        subscriber = _Subscriber(outbox, self.page_games)
        self._subscribers[outbox] = subscriber
        games = self._top_up(subscriber, None)
        return _encode(WallFrame(games=games, ended_kept=self.ended_limit, total=len(self._shown)))

    def more(self, outbox: Outbox) -> None:
        """A subscriber asks for another page: its `wall_page` (the next games it does not hold, the most
        active first, at most a page) goes into its outbox, after the changes pending."""
        subscriber = self._subscribers.get(outbox)
        if subscriber is None:
            return
        self._flush()
        subscriber.quota = min(subscriber.quota + self.page_games, self.live_limit + self.ended_limit)
        games = self._top_up(subscriber, None)
        outbox.put(_encode(WallPageFrame(games=games, total=len(self._shown))))

    def leave(self, outbox: Outbox) -> None:
        """Unsubscribe; the wall stops `linger_seconds` after its last subscriber left."""
        self._subscribers.pop(outbox, None)
        self._idle()

    def _top_up(self, subscriber: _Subscriber, ranked: list[_Tile] | None) -> list[WallGame]:
        """The games added to what a subscriber holds, up to what it asked for (the most active it lacks),
        in the wall's order, as of the last frame."""
        room = subscriber.quota - len(subscriber.held)
        if room <= 0:
            return []
        added: dict[str, _Tile] = {}
        for tile in self._ranked() if ranked is None else ranked:
            if len(added) >= room:
                break
            if tile.summary.game_id not in subscriber.held:
                added[tile.summary.game_id] = tile
        subscriber.held.update(added)
        return [self._sent[tile.summary.game_id] for tile in self._ordered(added)]

    def _ranked(self) -> list[_Tile]:
        return sorted(self._shown.values(), key=_Tile.rank, reverse=True)

    def _idle(self) -> None:
        if self._subscribers or self._joining or self._stopper is not None:
            return
        if self._running:
            self._stopper = asyncio.get_running_loop().call_later(self._linger_seconds, self._stop_if_idle)

    def _stop_if_idle(self) -> None:
        self._stopper = None
        if not self._subscribers and not self._joining:
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
        recent = await store.listed(self._scan)
        ends = sorted((at, listed.game_id) for listed in recent if (at := ended_at(listed)) is not None)
        ended = [game_id for _, game_id in ends[-self.ended_limit :]] if self.ended_limit else []
        chosen = self._plan(candidates(recent))
        creators = {candidate.game_id: candidate.creator for candidate in chosen}
        # The least active first, so that each game shown later is the more active: first in the wall.
        loaded = await self._load_many([*ended, *(c.game_id for c in reversed(chosen))])
        present = await self._present(loaded)
        generation = self._generation
        for game in loaded:
            game_id = game.game_id
            self._show(game, present.get(game_id), creators.get(game_id, own_creator(game_id)))
        # Nobody holds anything yet: what the wall shows is what the first `wall` frames carry.
        self._dirty.clear()
        self._sent = {game_id: tile.summary for game_id, tile in self._shown.items()}
        self._total = len(self._shown)
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
        self._total = 0
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

    def _live(self) -> list[_Tile]:
        return [tile for tile in self._shown.values() if tile.game is not None]

    def _plan(self, found: list[Candidate]) -> list[Candidate]:
        """Of these candidates (the most active first), those the rules would show now: active, within
        their creator's share, and with room for them (or a less active tile nobody watches to replace).
        Only these are loaded; `_show` applies the rules again to each once it is."""
        now = self._clock()
        live = self._live()
        counts: dict[str, int] = {}
        for tile in live:
            counts[tile.creator] = counts.get(tile.creator, 0) + 1
        room = self.live_limit - len(live)
        replaceable = sorted(tile.active for tile in live if not watched(tile.summary))
        chosen: list[Candidate] = []
        for candidate in found:
            if candidate.game_id in self._shown or candidate.game_id in self._loading:
                continue
            if (
                now - candidate.active > self.idle_seconds
                or counts.get(candidate.creator, 0) >= self.share_limit
            ):
                continue
            if room > 0:
                room -= 1
            elif replaceable and replaceable[0] < candidate.active:
                replaceable.pop(0)
            else:
                break  # the candidates after it are no more active
            counts[candidate.creator] = counts.get(candidate.creator, 0) + 1
            chosen.append(candidate)
        return chosen

    def _show(self, game: LiveGame, presence: Presence | None, creator: str) -> None:
        """Put a loaded game on the wall, watched while live, if the rules let it (see above)."""
        game_id = game.game_id
        if game_id in self._shown or game.spectators != "public":
            return
        summary = summarize(game, presence)
        now = self._clock()
        active = seconds(game.last_at) or now
        if summary.ended:
            self._shown[game_id] = _Tile(None, summary, next(self._orders), active, creator)
            self._ended.append(game_id)
            self._trim_ended()
        else:
            live = self._live()
            if now - active > self.idle_seconds:
                return
            if sum(1 for tile in live if tile.creator == creator) >= self.share_limit:
                return
            if len(live) >= self.live_limit:
                idle = [tile for tile in live if not watched(tile.summary)]
                least = min(idle, key=lambda tile: (tile.active, tile.order), default=None)
                if least is None or least.active >= active:
                    return  # every table is watched, or more active than this one
                self._retire(least.summary.game_id)
            self._shown[game_id] = _Tile(game, summary, next(self._orders), active, creator)
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

    def _retire_idle(self) -> None:
        """Retire the live games without a placement for `idle_seconds` (they come back with their next)."""
        now = self._clock()
        for tile in self._live():
            if now - tile.active > self.idle_seconds:
                self._retire(tile.summary.game_id)

    def _trim_ended(self) -> None:
        while len(self._ended) > self.ended_limit:
            self._retire(self._ended[0])

    def _ordered(self, tiles: dict[str, _Tile]) -> list[_Tile]:
        """Live games most recently put on the wall first, then the ended ones, most recently ended first."""
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
        """Send what changed since the last frame: to each subscriber, of the games it holds, in one frame
        encoded once for every subscriber holding the same."""
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
        changed: list[WallChange] = []
        for game_id in dirty:
            tile = self._shown.get(game_id)
            if tile is None:
                continue
            old = self._sent.get(game_id)
            if old is not None and (change := difference(old, tile.summary)) is not None:
                changed.append(change)
            self._sent[game_id] = tile.summary
        total, counted = len(self._shown), self._total
        self._total = total
        ranked: list[_Tile] | None = None
        encoded: dict[tuple[tuple[str, ...], ...], bytes] = {}
        for subscriber in self._subscribers.values():
            held = subscriber.held
            gone = [game_id for game_id in retired if game_id in held]
            held.difference_update(gone)
            theirs = [change for change in changed if change.game_id in held]
            added: list[WallGame] = []
            if len(held) < subscriber.quota:
                ranked = self._ranked() if ranked is None else ranked
                added = self._top_up(subscriber, ranked)
            if not (gone or theirs or added or total != counted):
                continue
            key = (tuple(gone), tuple(g.game_id for g in added), tuple(c.game_id for c in theirs))
            frame = encoded.get(key)
            if frame is None:
                frame = encoded[key] = _encode(
                    WallChangesFrame(retired=gone, added=added, changed=theirs, total=total)
                )
            subscriber.outbox.put(frame)

    # Finding games ----------------------------------------------------------------------------------

    def _listed(self, game_id: str, creator: str | None) -> None:
        """This node created a public game: on the wall at once, if the rules let it."""
        if self._running:
            found = Candidate(game_id, creator or own_creator(game_id), self._clock())
            self._spawn(self._take([found]))

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
                    self._retire_idle()
                    await self._follow_presence()
                if loop.time() >= next_reconcile:
                    next_reconcile = loop.time() + self._reconcile_seconds
                    await self._reconcile()
                    self.reconciles += 1
            except StoreError as exc:
                self._games.metrics.redis_errors.inc()
                log.warning("wall: the index cannot be read now", extra={"error": str(exc)})
            except Exception:  # a bug here must not stop the wall finding games for good
                log.exception("wall: round failed")

    async def _discover(self) -> None:
        """The public games listed since the last poll: the newest ids the last poll did not read (and, when
        there are some, the newest records of as many of the newest listed games: their creators)."""
        store, size = self._games.store, POLL_WINDOW
        while True:
            ids = await store.public_ids(size)
            fresh = [game_id for game_id in ids if game_id not in self._window]
            if len(fresh) < len(ids) or len(ids) < size or size >= POLL_WINDOW_MAX:
                break
            size *= 4
        self._window = set(ids)
        if fresh:
            news = set(fresh)
            found = await store.listed(max(ids.index(game_id) for game_id in fresh) + 1)
            await self._take(candidates(listed for listed in found if listed.game_id in news))

    async def _reconcile(self) -> None:
        """Retire the games deleted; take the active live games the wall lacks among the newest listed."""
        store = self._games.store
        recent = await store.listed(self._scan)
        found = {listed.game_id for listed in recent}
        doubtful = [game_id for game_id in self._shown if game_id not in found]
        versions = await asyncio.gather(*(store.version(game_id) for game_id in doubtful))
        for game_id, version in zip(doubtful, versions, strict=True):
            if version == 0:
                self._retire(game_id)
        await self._take(candidates(recent))

    async def _take(self, found: Iterable[Candidate]) -> None:
        """Load the candidates the rules would show (the most active first) and show them; a game that
        cannot be read is left out."""
        chosen = self._plan(list(found))
        if not chosen:
            return
        creators = {candidate.game_id: candidate.creator for candidate in chosen}
        generation = self._generation
        loaded = await self._load_many([candidate.game_id for candidate in reversed(chosen)])
        present = await self._present(loaded)
        for game in loaded:
            if generation == self._generation and self._running:
                self._show(game, present.get(game.game_id), creators[game.game_id])

    async def _follow_presence(self) -> None:
        """Who is at each table shown now; a game whose presence changed is marked changed."""
        tiles = list(self._shown.values())
        found = await self._present_of([(t.summary.game_id, len(t.summary.players)) for t in tiles])
        for tile in tiles:
            now = found.get(tile.summary.game_id)
            if now is not None and now != tile.summary.presence and tile.summary.game_id in self._shown:
                tile.summary = msgspec.structs.replace(tile.summary, presence=now)
                self._mark(tile.summary.game_id)

    async def _present(self, games: list[LiveGame]) -> dict[str, Presence]:
        """The presence of each of these games (none when it cannot be read now: nobody's shown)."""
        try:
            return await self._present_of([(g.game_id, len(g.players)) for g in games])
        except StoreError:
            return {}

    async def _present_of(self, games: list[tuple[str, int]]) -> dict[str, Presence]:
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
