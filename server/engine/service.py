"""The command service: load a game, decide, append with the expected version, retry on conflict.

Each node keeps every game it serves folded in memory (a LiveGame) and catches up from the stream when
another node got there first: a conflict re-reads and re-decides on fresh state (safe: `decide` is pure),
so two nodes sharing one Redis never lose or duplicate a command.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence

import msgspec

from domain import CreateGame, Game, decide
from domain.messages import EndGame, Event, Place
from projections import View, project
from server import auth
from server.clock import utc_now
from server.engine import envelope
from server.engine.committer import Answer, Committer, Outcome
from server.engine.envelope import Envelope, Record
from server.engine.live import SPACES_CACHE_BYTES, GapError, Listener, LiveGame
from server.store import Appended, EventStore, StoreUnavailable, UnreadableGame

log = logging.getLogger(__name__)


class Seat(msgspec.Struct, frozen=True):
    """A seat of a new game and its secret token (shown once)."""

    seat: int
    name: str
    token: str


class Created(msgspec.Struct, frozen=True, omit_defaults=True):
    """The answer to creating a game."""

    game_id: str
    version: int
    seats: list[Seat]
    watch_token: str | None = None


class GameService:
    """Decides commands against the cached state of each game and appends them to the store."""

    def __init__(
        self,
        store: EventStore,
        *,
        max_placements: int = 1000,
        retries: int = 20,
        clock: Callable[[], str] = utc_now,
        failpoint: str | None = None,
        max_live_games: int = 10_000,
        view_cache_bytes: int = SPACES_CACHE_BYTES,
    ) -> None:
        self.store = store
        self.max_placements = max_placements
        self.retries = retries
        self.clock = clock
        self.failpoint = failpoint
        self.max_live_games = max_live_games
        self.view_cache_bytes = view_cache_bytes
        # Most recently used last; a game someone follows on this node is never evicted (see `pinned`).
        self.games: OrderedDict[str, LiveGame] = OrderedDict()
        self.pinned: Callable[[str], bool] = lambda game_id: False
        self.listeners: list[Listener] = []
        self.committer = Committer(self)

    async def create(
        self, players: Sequence[str], layout: str = "standard", spectators: str = "public"
    ) -> Created:
        """Create a game with fresh seat tokens (and a watch token for a private game).

        Raises: Rejected (bad players or layout), StoreUnavailable.
        """
        game_id = auth.new_game_id()
        command = msgspec.convert(
            {
                "type": "create_game",
                "game_id": game_id,
                "players": list(players),
                "layout": layout,
                "spectators": spectators,
                "max_placements": self.max_placements,
            },
            CreateGame,
        )
        (event,) = decide(Game(), command)
        tokens = [auth.new_token() for _ in players]
        credentials = {auth.seat_key(seat): auth.digest(token) for seat, token in enumerate(tokens)}
        watch = auth.new_token() if spectators == "token" else None
        if watch is not None:
            credentials[auth.WATCH] = auth.digest(watch)
        _, data, _ = self.envelopes(
            game_id, 0, envelope.GENESIS, f"create:{auth.new_token()[:16]}", None, [event]
        )
        await self.store.create(game_id, data[0], credentials)
        log.info("game created", extra={"game_id": game_id, "version": 1, "count": len(players)})
        seats = [
            Seat(seat, name, token) for seat, (name, token) in enumerate(zip(players, tokens, strict=True))
        ]
        return Created(game_id=game_id, version=1, seats=seats, watch_token=watch)

    async def live(self, game_id: str, *, refresh: bool = False) -> LiveGame | None:
        """The game as this node holds it, loaded on first use; None for an unknown game.

        With `refresh`, first catch up with the stream (one read), so the answer is as current as the
        store. Raises: StoreUnavailable.
        """
        game = self.held(game_id)
        if game is None:
            game = LiveGame(game_id, self.view_cache_bytes)
            await self.catch_up(game)
            if game.version == 0:
                return None
            game = self.games.setdefault(game_id, game)
            game.listeners = self.listeners
            self._evict()
        elif refresh and not await self.catch_up(game):
            # The stream is gone (the game was archived): forget it here too.
            del self.games[game_id]
            return None
        return game

    def held(self, game_id: str) -> LiveGame | None:
        """The game if this node holds it (now its most recently used), without a read; else None."""
        game = self.games.get(game_id)
        if game is not None:
            self.games.move_to_end(game_id)
        return game

    def _evict(self) -> None:
        """Forget the least recently used games beyond the cap (they reload from the stream on use)."""
        excess = len(self.games) - self.max_live_games
        for game_id in list(self.games)[: max(0, excess)]:
            if not self.pinned(game_id) and game_id not in self.committer.busy:
                del self.games[game_id]

    def handle(
        self, game_id: str, command: Place | EndGame, answer: Answer | None = None
    ) -> asyncio.Future[Outcome]:
        """Decide and append one command, or give the first outcome of its id (group-committed).

        The future (not a coroutine: one object less per command) gets the Outcome, or Rejected /
        StoreUnavailable; `answer`, when given, gets the Outcome first (see `Committer.submit`).
        """
        return self.committer.submit(game_id, command, answer)

    async def history(self, game_id: str, after: int = 0, until: int | None = None) -> list[Record]:
        """Stored records after+1..until. Raises: StoreUnavailable."""
        return await self.store.read(game_id, after, until)

    async def view_at(self, game_id: str, version: int) -> View:
        """The view as it was after event `version`. Raises: StoreUnavailable."""
        records = await self.store.read(game_id, 0, version)
        return project([envelope.decode(r.data).event for r in records]).view

    async def replay(self, game_id: str, prior: Appended) -> Outcome:
        """The answer an accepted command got, read back from the store. Raises: StoreUnavailable."""
        records = await self.store.read(game_id, prior.first - 1, prior.last)
        return Outcome(prior.last, [r.data for r in records])

    async def catch_up(self, game: LiveGame) -> bool:
        """Fold in what the stream holds past this node's version; False when the stream is gone."""
        # Reading from the last known version itself (not after it) tells a quiet game from a deleted one.
        after = max(0, game.version - 1)
        records = await self.store.read(game.game_id, after)
        try:
            game.ingest(records)
        except GapError:  # pragma: no cover - a read after our own version cannot skip one
            raise StoreUnavailable(f"game {game.game_id}: stream read out of order") from None
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise UnreadableGame(f"game {game.game_id}: an envelope does not decode: {exc}") from None
        return bool(records) or game.version == 0

    def envelopes(
        self, game_id: str, version: int, head: str, command_id: str, seat: int | None, events: list[Event]
    ) -> tuple[list[Envelope], list[bytes], str]:
        """The events' envelopes, chained from `head`: as values, encoded, and the new chain head."""
        at = self.clock()
        items: list[Envelope] = []
        data: list[bytes] = []
        for offset, event in enumerate(events, start=1):
            item = Envelope(
                game_id=game_id,
                version=version + offset,
                at=at,
                command_id=command_id,
                seat=seat,
                event=event,
                prev=head,
            )
            encoded = envelope.encode(item)
            head = envelope.chain_hash(encoded)
            items.append(item)
            data.append(encoded)
        return items, data, head
