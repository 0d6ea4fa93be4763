"""The event-store port: what the shell needs from storage, and the errors it may raise.

    StoreError               every failure of the store, translated from the driver at the boundary
    ├── StoreUnavailable     the store cannot be reached or did not answer in time (retry later)
    ├── StoreFull            the store is out of memory and refuses writes (nothing was written)
    ├── ConcurrencyConflict  the stream is not at the expected version (re-read and re-decide)
    │   ├── GameNotFound     append to a game never created (a re-read finds version 0)
    │   └── HistoryChanged   the stream is at the expected version, but its last line is not the one the
    │                        append follows (acknowledged appends were lost: read the game again)
    ├── GameExists           a game with this id was already created
    ├── TooManyGames         the store holds its maximum of live games (nothing was written)
    └── UnreadableGame       a stored envelope does not decode (damaged, or from a newer schema)

The port is one small Protocol per concern, each with its contract suite in tests/store/, run on every
adapter (the memory store, a Redis, a 3-master Redis Cluster):

    EventLog       a game's stream, its credentials and command outcomes    test_contract.py,
                                                                            test_restore_contract.py
    GameIndex      which games exist, are listed, are live                  test_index_contract.py
    PresenceStore  who is connected to each game, per node                  test_presence_contract.py
    RateBuckets    rate buckets shared by the nodes                         test_rate_contract.py
    StoreClock     one clock for every node                                 test_clock_contract.py

`EventStore` is all of them and the connection (`ping`, `close`): what a node runs on. Adapters:
`server.store.memory.MemoryEventStore` and `server.store.redis.RedisEventStore`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import NamedTuple, Protocol

import msgspec


class StoreError(Exception):
    """A failure of the event store."""


class StoreUnavailable(StoreError):
    """The store cannot be reached now."""


class StoreFull(StoreError):
    """The store refuses writes: it is full (Redis at `maxmemory` with `noeviction`). Nothing was written;
    reads still work, and writes work again once an operator makes room (archives games, adds memory)."""


class ConcurrencyConflict(StoreError):
    """The stream's version is not the expected one."""

    def __init__(self, game_id: str, expected: int, actual: int) -> None:
        super().__init__(f"game {game_id!r} is at version {actual}, not {expected}")
        self.game_id, self.expected, self.actual = game_id, expected, actual


class HistoryChanged(ConcurrencyConflict):
    """The stream is at the expected version, but its last line is not the one the append was decided
    after: the store lost acknowledged appends (a Redis failover, a crash before the disk had them) and
    others were written at their versions since. Nothing was written; what the caller folded is no
    longer the game, so it must read the whole game again, not only what follows its version."""

    def __init__(self, game_id: str, expected: int) -> None:
        super().__init__(game_id, expected, expected)
        self.args = (f"game {game_id!r} holds another line at version {expected} than the one held",)


class GameNotFound(ConcurrencyConflict):
    """An append named a game that was never created: games begin only through `create`."""

    def __init__(self, game_id: str, expected: int) -> None:
        super().__init__(game_id, expected, 0)
        self.args = (f"game {game_id!r} was never created",)


class UnreadableGame(StoreError):
    """A game's stream holds an envelope this server cannot decode (damaged, or from a newer schema).

    Not an outage: retrying cannot help until an operator restores the game, so it is reported as
    `damaged_game`, naming the game and the first version that does not decode.
    """

    def __init__(self, game_id: str, version: int, detail: str) -> None:
        super().__init__(f"game {game_id!r}: the envelope at version {version} cannot be read: {detail}")
        self.game_id, self.version, self.detail = game_id, version, detail


class GameExists(StoreError):
    """A game with this id exists already."""


class TooManyGames(StoreError):
    """The store holds its maximum of live games: no game is created until one ends or is archived."""


class GameFenced(StoreError):
    """The game is being archived: it takes no more commands (nothing was written)."""


class Record(msgspec.Struct, frozen=True, gc=False):
    """An envelope as read from the store: its version and its exact stored bytes."""

    version: int
    data: bytes


class Listed(msgspec.Struct, frozen=True):
    """A publicly listed game: its id, the listing it was created with, and its newest record."""

    game_id: str
    listing: bytes
    last: Record


class Appended(msgspec.Struct, frozen=True):
    """Where a command's envelopes landed: versions first..last; `duplicate` when the id was seen."""

    first: int
    last: int
    duplicate: bool = False


class Append(NamedTuple):
    """One append of a batch (`EventLog.append_many`): a game, the version its envelopes follow, them, the
    command key, and the line held at that version (None: not checked)."""

    game_id: str
    expected: int
    envelopes: Sequence[bytes]
    command_key: str
    after: bytes | None = None


class EventLog(Protocol):
    """A game's stream of envelopes: durable, ordered, appended to atomically and once per command, with the
    game's credentials and command outcomes beside it."""

    async def create(
        self,
        game_id: str,
        data: bytes,
        credentials: Mapping[str, str],
        *,
        listing: bytes | None = None,
        max_live: int = 0,
    ) -> None:
        """Write a game's first envelope (version 1) and its credentials together, or nothing; index the
        game as live, and as listed with `listing` when one is given.

        With `max_live` > 0, a store already holding that many live games writes nothing (TooManyGames).
        Raises: GameExists, TooManyGames, StoreFull, StoreUnavailable.
        """

    async def restore(
        self,
        game_id: str,
        envelopes: Sequence[bytes],
        credentials: Mapping[str, str],
        commands: Mapping[str, tuple[int, int]],
        *,
        listing: bytes | None = None,
        live: bool = True,
        created: int | None = None,
        max_live: int = 0,
    ) -> None:
        """Write a whole game at once (an archived game coming back): its envelopes as versions 1..n, its
        credentials and its command records (command key -> its first and last version), all or nothing;
        then index it as `create` does: live when `live`, listed with `listing`, in its place among the
        games by `created` (its creation time in microseconds since the epoch; now when None).

        Raises: GameExists (nothing written), TooManyGames, StoreFull, StoreUnavailable, ValueError (no
        envelopes).
        """

    async def append_many(self, batch: Sequence[Append]) -> list[Appended | StoreError]:
        """Appends (game, expected, envelopes, command key[, after]), in order and in one round trip where
        the store can: the one way to write to a game that exists. Each gets its own result or error.

        Each append writes its envelopes as versions expected+1.. atomically, once per command key (game-
        scoped): a command key seen before gets its first outcome with duplicate=True and writes nothing.
        With `after`, the stored bytes the caller holds at version `expected`, it is written only if the
        stream's bytes there are those (the version alone cannot tell a stream that lost appends and was
        written again at their versions). Its errors: ConcurrencyConflict (GameNotFound for a game never
        created), HistoryChanged, GameFenced, StoreFull, StoreUnavailable.

        A game's appends in a batch are a chain, each decided on the state the ones before it leave, so
        once one of them writes nothing (an error, a repeated key), the game's later ones write nothing
        either and each gets a ConcurrencyConflict with the game's version (GameNotFound for a game never
        created), even one whose expected version the stream happens to be at.
        Raises: ValueError (an append without envelopes; nothing is written).
        """

    async def outcome(self, game_id: str, command_key: str) -> Appended | None:
        """The recorded outcome of an accepted command key (duplicate=True), or None if never accepted.

        Raises: StoreUnavailable.
        """

    async def read(self, game_id: str, after: int = 0, until: int | None = None) -> list[Record]:
        """The records of versions after+1..until (the end when None); [] for an unknown game.

        Raises: StoreUnavailable.
        """

    def tail(self, game_id: str, after: int) -> AsyncGenerator[list[Record], None]:
        """Live batches of records after `after`, in order, without gap or duplicate, until cancelled or
        closed (`aclose()`). The caller's own appends come too: it skips what it holds already.

        Raises: StoreUnavailable (from the iterator).
        """

    async def version(self, game_id: str) -> int:
        """The game's current version; 0 for an unknown game. Raises: StoreUnavailable."""

    async def credentials(self, game_id: str) -> dict[str, str]:
        """The game's credential hashes ({} for an unknown game). Raises: StoreUnavailable."""

    async def delete(self, game_id: str, version: int | None = None) -> None:
        """Remove a game's stream, credentials and command records (archiving), and its index entries;
        with `version`, only if the game is still at that version, in one atomic step.

        Raises: ConcurrencyConflict (the game is not at `version`; nothing was removed), StoreUnavailable.
        """

    async def fence(self, game_id: str) -> int:
        """Stop the game taking appends (each then fails with GameFenced; a repeat of an accepted command
        still gets its outcome); its version, 0 for an unknown game (nothing fenced).

        Raises: StoreUnavailable.
        """

    async def unfence(self, game_id: str) -> None:
        """Let a fenced game take appends again. Raises: StoreUnavailable."""


class GameIndex(Protocol):
    """The index of the games, written with each game's creation and read without touching any stream but
    the listed games' own: every game created, the publicly listed ones (newest first, each with the listing
    bytes it was created with), the live ones (created, neither ended nor deleted: counted for a cap), and
    which games are indexed at all (games written before the index existed are not, until `index` is
    called for them: see server.engine.listing)."""

    async def games(self) -> list[str]:
        """Ids of every game created, oldest first. Raises: StoreUnavailable."""

    async def listed(self, limit: int) -> list[Listed]:
        """The newest `limit` listed games, newest first, each with its newest record; a listed game
        whose stream is gone is left out. No game that is not listed is read. Raises: StoreUnavailable."""

    async def public_ids(self, limit: int, *, live: bool = False) -> list[str]:
        """The ids of the newest `limit` listed games, newest first; with `live`, of the listed games
        still live (neither ended nor deleted). Reads the index alone, no stream. Raises: StoreUnavailable."""

    async def live_games(self) -> int:
        """How many games are live: indexed as live, neither ended nor deleted. Raises: StoreUnavailable."""

    async def ended(self, game_id: str) -> None:
        """The game has ended: it is live no more (idempotent). Raises: StoreUnavailable."""

    async def index(self, game_id: str, *, listing: bytes | None, live: bool) -> None:
        """Index an existing game written before the index was (idempotent): listed with `listing` when
        given, live or not. Raises: StoreFull, StoreUnavailable."""

    async def unindexed(self) -> list[str]:
        """Ids of the games created but not indexed, oldest first (cheap when there are none).

        Raises: StoreUnavailable.
        """


class PresenceStore(Protocol):
    """Beside each game, its presence: who is connected, per node; written and read in bulk, expiring on its
    own, never part of the game's stream."""

    async def write_presence(self, node: str, values: Mapping[str, bytes | None], ttl: float) -> None:
        """Set `node`'s field in the presence of each game of `values` (None: remove it), in one call; a
        game's presence is forgotten whole `ttl` seconds after its last write. Presence is no part of a
        game: nothing else reads or removes it (see server.engine.presence).

        Raises: StoreUnavailable.
        """

    async def read_presence(self, game_ids: Sequence[str]) -> list[dict[str, bytes]]:
        """Every node's field in the presence of each game (in `game_ids`' order; {} for none), in one
        call. Raises: StoreUnavailable."""


class RateBuckets(Protocol):
    """Rate buckets every node on the store shares (games created per client address)."""

    async def take_token(self, bucket: str, per_second: float, burst: int) -> float:
        """Spend a token of the rate bucket `bucket`, shared by every node on this store: it refills at
        `per_second` and holds at most `burst`. 0 when a token was spent, else the seconds until one can
        be (nothing spent). A bucket untouched for as long as it takes to fill is forgotten.

        Raises: StoreUnavailable.
        """


class StoreClock(Protocol):
    """One clock for every node on the store."""

    async def time(self) -> float:
        """The store's clock, in seconds since the epoch: what the nodes date what they share by (presence),
        so that their own clocks need not agree. Raises: StoreUnavailable."""


class EventStore(EventLog, GameIndex, PresenceStore, RateBuckets, StoreClock, Protocol):
    """The whole store a node runs on: each concern's port, and its connection."""

    async def ping(self) -> bool:
        """Whether the store answers now."""

    async def close(self) -> None:
        """Release connections."""
