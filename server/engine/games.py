"""The games this node serves: created here, loaded once on first use, forgotten when idle.

Each game is loaded in the task that first asks for it (a connection's, a request's): a cold load or a
history read never sits on a path another game waits on, and callers asking for the same game while it
loads share one read.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence

import msgspec

from domain import CreateGame, Game, GameCreated, UnknownGame, decide
from projections import View, project
from server import auth
from server.clock import utc_now
from server.engine.envelope import seal
from server.engine.folded import SPACES_CACHE_BYTES, FoldedGame, GapError, decode_all
from server.engine.listing import creator_key, creator_of, listing_of
from server.engine.owner import Command, LiveGame, Node, Outcome
from server.engine.signing import Signer
from server.metrics import Metrics
from server.protocol import envelope
from server.store import EventStore, Record, StoreUnavailable, UnreadableGame

log = logging.getLogger(__name__)


class SeatToken(msgspec.Struct, frozen=True):
    """A seat of a new game and its secret token (shown once); `name` None for an open seat."""

    seat: int
    name: str | None
    token: str


class Created(msgspec.Struct, frozen=True, omit_defaults=True):
    """The answer to creating a game: its seats' tokens, the host's and a private game's watch token."""

    game_id: str
    version: int
    seats: list[SeatToken]
    host_token: str
    watch_token: str | None = None


class Games:
    """The live games of this node, most recently used last."""

    def __init__(
        self,
        store: EventStore,
        *,
        metrics: Metrics | None = None,
        max_placements: int = 1000,
        retries: int = 20,
        command_timeout: float = 2.0,
        clock: Callable[[], str] = utc_now,
        max_live_games: int = 10_000,
        view_cache_bytes: int = SPACES_CACHE_BYTES,
        signer: Signer | None = None,
        max_games: int = 0,
    ) -> None:
        """`signer` signs every envelope this node writes; without one, a key of its own is made (tests
        and benchmarks: no verifier knows it unless given `self.node.signer`). `max_games` caps the live
        games of the whole store (0: no cap)."""
        self.store = store
        self.metrics = metrics or Metrics()
        self.max_placements = max_placements
        self.max_live_games = max_live_games
        self.max_games = max_games
        self.view_cache_bytes = view_cache_bytes
        self.node = Node(
            store,
            clock,
            self.metrics,
            signer or Signer.generate(),
            retries=retries,
            command_timeout=command_timeout,
        )
        self._games: OrderedDict[str, LiveGame] = OrderedDict()
        self._loading: dict[str, asyncio.Future[LiveGame | None]] = {}
        # Told the id and creator's hash of each public game this node creates (the wall, while anyone
        # watches it).
        self.on_listed: Callable[[str, str | None], None] | None = None
        # Creators' address buckets are kept hashed with a key every node of the store shares.
        self._creator_key = creator_key(self.node.signer.private_text().encode())

    def __len__(self) -> int:
        return len(self._games)

    async def create(
        self,
        players: Sequence[str | None],
        layout: str = "standard",
        spectators: str = "public",
        *,
        creator: str | None = None,
        open_table: bool = False,
    ) -> Created:
        """Create a game with fresh seat tokens (open seats' too), a host token, and a watch token for a
        private game; a public game is listed (server.engine.listing), with a keyed hash of `creator` (its
        creator's address bucket) when given; `open_table` lists it as an open table.

        Raises: Rejected (bad players or layout), TooManyGames (the store holds `max_games` live games),
        StoreFull, StoreUnavailable.
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
                "open": open_table,
            },
            CreateGame,
        )
        [created] = decide(Game(), command)
        assert isinstance(created, GameCreated)  # what decide answers a CreateGame with
        tokens = [auth.new_token() for _ in players]
        credentials = {auth.seat_key(seat): auth.digest(token) for seat, token in enumerate(tokens)}
        host = auth.new_token()
        credentials[auth.HOST] = auth.digest(host)
        watch = auth.new_token() if spectators == "token" else None
        if watch is not None:
            credentials[auth.WATCH] = auth.digest(watch)
        await self.write_new(created, credentials, creator=creator)
        # The names as the game keeps them (trimmed, NFC: domain.names), not as they were sent.
        names = created.players
        seats = [
            SeatToken(seat, name, token) for seat, (name, token) in enumerate(zip(names, tokens, strict=True))
        ]
        return Created(game_id=game_id, version=1, seats=seats, host_token=host, watch_token=watch)

    async def write_new(
        self, created: GameCreated, credentials: dict[str, str], *, creator: str | None = None
    ) -> None:
        """Write a new game's first event with its credential hashes; list it when public.

        Raises: GameExists, TooManyGames, StoreFull, StoreUnavailable.
        """
        game_id = created.game_id
        command_id = f"create:{auth.new_token()[:16]}"
        node = self.node
        _, bodies, _ = seal(
            game_id, 0, envelope.GENESIS, node.clock(), command_id, None, [created], node.signer.key_id
        )
        data = await node.notary.sign(bodies)
        hashed = None if creator is None else creator_of(creator, self._creator_key)
        public = created.spectators == "public"
        listing = listing_of(created.players, hashed, open_table=created.open) if public else None
        await self.store.create(game_id, data[0], credentials, listing=listing, max_live=self.max_games)
        log.info("game created", extra={"game_id": game_id, "version": 1, "count": len(created.players)})
        if listing is not None and self.on_listed is not None:
            self.on_listed(game_id, hashed)

    def loaded(self, game_id: str) -> LiveGame | None:
        """The game if this node holds it (now its most recently used), without a read; else None."""
        game = self._games.get(game_id)
        if game is not None:
            self._games.move_to_end(game_id)
        return game

    async def get(self, game_id: str, *, refresh: bool = False) -> LiveGame | None:
        """The game, loaded on first use; None for an unknown (or archived) game.

        With `refresh`, a game already held first folds in what the stream holds past it (one read), so
        the answer is as current as the store. Raises: StoreUnavailable, UnreadableGame.
        """
        try:
            game = self.loaded(game_id)
            if game is not None and game.damage is not None:
                self._forget(game_id)  # read it again: an operator may have restored it
                game = None
            if game is None:
                return await self._load(game_id)
            if refresh and not await game.refresh():
                self._forget(game_id)
                return None
            return game
        except UnreadableGame as exc:
            self.node.damaged(exc)
            raise

    async def _load(self, game_id: str) -> LiveGame | None:
        loading = self._loading.get(game_id)
        if loading is not None:
            return await asyncio.shield(loading)
        future: asyncio.Future[LiveGame | None] = asyncio.get_running_loop().create_future()
        self._loading[game_id] = future
        try:
            folded = FoldedGame(game_id, self.view_cache_bytes)
            records = await self.store.read(game_id)
            try:
                folded.fold(records)
            except GapError:  # pragma: no cover - one read from the start cannot skip a version
                raise StoreUnavailable(f"game {game_id}: stream read out of order") from None
            game = None if folded.version == 0 else LiveGame(folded, self.node)
            if game is not None:
                self._games[game_id] = game
                self._evict()
            future.set_result(game)
            return game
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a load nobody else awaited is no error
            raise
        finally:
            del self._loading[game_id]

    def _evict(self) -> None:
        """Forget the least recently used idle games beyond the cap (they reload from the stream on use)."""
        excess = len(self._games) - self.max_live_games
        if excess <= 0:
            return
        for game_id in list(self._games)[:excess]:
            if not self._games[game_id].busy:
                del self._games[game_id]

    def _forget(self, game_id: str) -> None:
        game = self._games.pop(game_id, None)
        if game is not None:
            asyncio.get_running_loop().create_task(game.close())

    async def handle(self, game_id: str, command: Command) -> Outcome:
        """Submit a command to its game and wait for its outcome (for tools and tests; the websocket
        route submits and lets the reply come back on its own).

        Raises: Rejected (UnknownGame for an unknown game), StoreError.
        """
        game = await self.get(game_id)
        if game is None:
            raise UnknownGame("no such game")
        answered: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()

        def reply(result: Outcome | Exception) -> None:
            if answered.done():  # the caller was cancelled while it waited: nobody to tell
                return
            if isinstance(result, Outcome):
                answered.set_result(result)
            else:
                answered.set_exception(result)

        game.submit(command, reply)
        return await answered

    async def history(self, game_id: str, after: int = 0, until: int | None = None) -> list[Record]:
        """Stored records after+1..until. Raises: StoreUnavailable."""
        return await self.store.read(game_id, after, until)

    async def view_at(self, game_id: str, version: int) -> View:
        """The view as it was after event `version`. Raises: StoreUnavailable, UnreadableGame."""
        records = await self.store.read(game_id, 0, version)
        try:
            return project([item.event for item in decode_all(game_id, records)]).view
        except UnreadableGame as exc:
            self.node.damaged(exc)
            raise

    @property
    def running(self) -> bool:
        """Whether every followed game's tail runs (for readiness)."""
        return all(game.tail_alive for game in self._games.values())

    async def close(self) -> None:
        """Stop every game's tail and worker; commands still waiting are answered unavailable."""
        games = list(self._games.values())
        self._games.clear()
        await asyncio.gather(*(game.close() for game in games))
