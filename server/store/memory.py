"""An in-process event store: the port's reference adapter, for tests and single-process runs.

It keeps the same promises as the Redis adapter (atomic batches, expected-version conflicts, game-scoped
command-key idempotency, live tails) so the one contract suite in tests/store/ holds for both.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence

from server.store import (
    Append,
    Appended,
    ConcurrencyConflict,
    GameExists,
    GameFenced,
    GameNotFound,
    HistoryChanged,
    Listed,
    Record,
    StoreError,
    TooManyGames,
)


class _Game:
    __slots__ = ("credentials", "commands", "envelopes", "fenced")

    def __init__(self, first: bytes, credentials: Mapping[str, str]) -> None:
        self.envelopes = [first]
        self.credentials = dict(credentials)
        self.commands: dict[str, Appended] = {}
        self.fenced = False


class MemoryEventStore:
    """Per-game lists of envelopes in this process; lost when the process ends."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        """`clock`: the store's wall clock (`time`), in seconds since the epoch."""
        self._clock = clock
        self._games: dict[str, _Game] = {}
        # The index: listed games with their listings, live games, indexed games; and each game's rank
        # in the order of creation, by which the listed ones are listed (as the Redis adapter scores them).
        self._listed: dict[str, bytes] = {}
        self._rank: dict[str, int] = {}
        self._created = 0
        self._live: set[str] = set()
        self._indexed: set[str] = set()
        # One condition per tailed game: an append wakes that game's tails only.
        self._changed: dict[str, asyncio.Condition] = {}
        # Each game's presence: node -> its value, and when the whole expires (monotonic seconds).
        self._presence: dict[str, tuple[dict[str, bytes], float]] = {}
        # Each rate bucket: when it is full again (monotonic seconds); forgotten once full.
        self._buckets: dict[str, float] = {}

    async def create(
        self,
        game_id: str,
        data: bytes,
        credentials: Mapping[str, str],
        *,
        listing: bytes | None = None,
        max_live: int = 0,
    ) -> None:
        """Write a game's first envelope (version 1) and its credentials together, and index it.

        Raises: GameExists, TooManyGames.
        """
        if game_id in self._games:
            raise GameExists(game_id)
        if max_live > 0 and len(self._live) >= max_live:
            raise TooManyGames(f"the store holds its maximum of {max_live} live games")
        self._games[game_id] = _Game(bytes(data), credentials)
        self._created += 1
        self._rank[game_id] = self._created
        await self.index(game_id, listing=listing, live=True)
        await self._notify(game_id)

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
        """Write a whole game at once, with its credentials and command records, and index it (listed
        after every game held: `created` orders nothing here).

        Raises: GameExists, TooManyGames, ValueError (no envelopes).
        """
        if not envelopes:
            raise ValueError("a game has at least one envelope")
        if game_id in self._games:
            raise GameExists(game_id)
        if live and max_live > 0 and len(self._live) >= max_live:
            raise TooManyGames(f"the store holds its maximum of {max_live} live games")
        game = _Game(bytes(envelopes[0]), credentials)
        game.envelopes.extend(bytes(data) for data in envelopes[1:])
        game.commands = {key: Appended(first, last) for key, (first, last) in commands.items()}
        self._games[game_id] = game
        self._created += 1
        self._rank[game_id] = self._created
        await self.index(game_id, listing=listing, live=live)
        await self._notify(game_id)

    async def append_many(self, batch: Sequence[Append]) -> list[Appended | StoreError]:
        """Appends in order, each with its own result or error; after a game's append that wrote nothing,
        that game's later ones write nothing either (a conflict each: see the port).

        Raises: ValueError (an append without envelopes; nothing is written).
        """
        if not all(item.envelopes for item in batch):
            raise ValueError("append needs at least one envelope")
        results: list[Appended | StoreError] = []
        stopped: set[str] = set()
        written: set[str] = set()
        for game_id, expected, envelopes, command_key, after in batch:
            try:
                if game_id in stopped:
                    game = self._games.get(game_id)
                    if game is None:
                        raise GameNotFound(game_id, expected)
                    raise ConcurrencyConflict(game_id, expected, len(game.envelopes))
                result = self._append(game_id, expected, envelopes, command_key, after)
            except StoreError as exc:
                stopped.add(game_id)
                results.append(exc)
                continue
            if result.duplicate:
                stopped.add(game_id)
            else:
                written.add(game_id)
            results.append(result)
        for game_id in written:
            await self._notify(game_id)
        return results

    def _append(
        self, game_id: str, expected: int, envelopes: Sequence[bytes], command_key: str, after: bytes | None
    ) -> Appended:
        """One append of a batch. Raises: ConcurrencyConflict, GameNotFound, HistoryChanged, GameFenced."""
        game = self._games.get(game_id)
        if game is None:
            raise GameNotFound(game_id, expected)
        seen = game.commands.get(command_key)
        if seen is not None:
            return Appended(seen.first, seen.last, duplicate=True)
        if game.fenced:
            raise GameFenced(f"game {game_id!r} is being archived: it takes no more commands")
        if len(game.envelopes) != expected:
            raise ConcurrencyConflict(game_id, expected, len(game.envelopes))
        if after is not None and expected > 0 and game.envelopes[expected - 1] != after:
            raise HistoryChanged(game_id, expected)
        game.envelopes.extend(bytes(data) for data in envelopes)
        outcome = Appended(expected + 1, len(game.envelopes))
        game.commands[command_key] = outcome
        return outcome

    async def fence(self, game_id: str) -> int:
        """Stop the game taking appends; its version (0: unknown game)."""
        game = self._games.get(game_id)
        if game is None:
            return 0
        game.fenced = True
        return len(game.envelopes)

    async def unfence(self, game_id: str) -> None:
        """Let a fenced game take appends again."""
        game = self._games.get(game_id)
        if game is not None:
            game.fenced = False

    async def outcome(self, game_id: str, command_key: str) -> Appended | None:
        """The recorded outcome of an accepted command key (duplicate=True), or None."""
        game = self._games.get(game_id)
        seen = None if game is None else game.commands.get(command_key)
        return None if seen is None else Appended(seen.first, seen.last, duplicate=True)

    async def read(self, game_id: str, after: int = 0, until: int | None = None) -> list[Record]:
        """The records of versions after+1..until (the end when None); [] for an unknown game."""
        game = self._games.get(game_id)
        if game is None:
            return []
        stop = len(game.envelopes) if until is None else min(until, len(game.envelopes))
        start = max(after, 0)
        return [Record(version, game.envelopes[version - 1]) for version in range(start + 1, stop + 1)]

    async def tail(self, game_id: str, after: int) -> AsyncGenerator[list[Record], None]:
        """Live batches of records after `after`, in order, without gap or duplicate, until cancelled."""
        last = after

        def moved_on() -> bool:
            return self._version(game_id) > last

        changed = self._changed.setdefault(game_id, asyncio.Condition())
        while True:
            async with changed:
                await changed.wait_for(moved_on)
            batch = await self.read(game_id, last)
            last = batch[-1].version
            yield batch

    async def version(self, game_id: str) -> int:
        """The game's current version; 0 for an unknown game."""
        return self._version(game_id)

    async def credentials(self, game_id: str) -> dict[str, str]:
        """The game's credential hashes ({} for an unknown game)."""
        game = self._games.get(game_id)
        return dict(game.credentials) if game else {}

    async def games(self) -> list[str]:
        """Ids of every game created, oldest first (dicts keep insertion order)."""
        return list(self._games)

    async def delete(self, game_id: str, version: int | None = None) -> None:
        """Forget a game (with `version`, only if it is at that version), and its index entries.

        Raises: ConcurrencyConflict.
        """
        if version is not None:
            game = self._games.get(game_id)
            actual = 0 if game is None else len(game.envelopes)
            if actual != version:
                raise ConcurrencyConflict(game_id, version, actual)
        self._games.pop(game_id, None)
        self._changed.pop(game_id, None)
        self._listed.pop(game_id, None)
        self._live.discard(game_id)
        self._indexed.discard(game_id)
        self._rank.pop(game_id, None)

    async def listed(self, limit: int) -> list[Listed]:
        """The newest `limit` listed games, newest first, each with its newest record."""
        found: list[Listed] = []
        for game_id in sorted(self._listed, key=self._rank.__getitem__, reverse=True):
            game = self._games.get(game_id)
            if game is None:
                continue
            last = Record(len(game.envelopes), game.envelopes[-1])
            found.append(Listed(game_id, self._listed[game_id], last))
            if len(found) >= limit:
                break
        return found

    async def public_ids(self, limit: int, *, live: bool = False) -> list[str]:
        """The newest `limit` listed games' ids (with `live`, of those still live), newest first."""
        ids = sorted(self._listed, key=self._rank.__getitem__, reverse=True)
        if live:
            ids = [game_id for game_id in ids if game_id in self._live]
        return ids[:limit]

    async def live_games(self) -> int:
        """How many games are indexed as live."""
        return len(self._live)

    async def ended(self, game_id: str) -> None:
        """The game is live no more."""
        self._live.discard(game_id)

    async def index(self, game_id: str, *, listing: bytes | None, live: bool) -> None:
        """Index a game (listed in its order of creation, however late it is indexed)."""
        if listing is not None and game_id not in self._listed:
            self._listed[game_id] = bytes(listing)
        if live:
            self._live.add(game_id)
        else:
            self._live.discard(game_id)
        self._indexed.add(game_id)

    async def unindexed(self) -> list[str]:
        """Games created but not indexed, oldest first (none, unless `drop_index` made some)."""
        return [game_id for game_id in self._games if game_id not in self._indexed]

    def drop_index(self, game_id: str) -> None:
        """Forget a game's index entries, as a store written before the index has none (for tests)."""
        self._listed.pop(game_id, None)
        self._live.discard(game_id)
        self._indexed.discard(game_id)

    async def write_presence(self, node: str, values: Mapping[str, bytes | None], ttl: float) -> None:
        """Set or remove `node`'s field in each game's presence; a game's presence lasts `ttl` seconds
        from its last write (a removal does not extend it), as a Redis key's expiry would."""
        now = time.monotonic()
        for game_id, value in values.items():
            fields, expires = self._presence.get(game_id, ({}, 0.0))
            if expires <= now:
                fields = {}
            if value is None:
                fields.pop(node, None)
            else:
                fields[node] = bytes(value)
                expires = now + ttl
            if fields:
                self._presence[game_id] = (fields, expires)
            else:
                self._presence.pop(game_id, None)

    async def read_presence(self, game_ids: Sequence[str]) -> list[dict[str, bytes]]:
        """Every node's field in each game's presence ({} once expired)."""
        now = time.monotonic()
        found: list[dict[str, bytes]] = []
        for game_id in game_ids:
            fields, expires = self._presence.get(game_id, ({}, 0.0))
            found.append(dict(fields) if expires > now else {})
        return found

    async def time(self) -> float:
        """The store's clock."""
        return self._clock()

    async def take_token(self, bucket: str, per_second: float, burst: int) -> float:
        """Spend a token of a rate bucket (the Redis adapter's cell rate, on this process's clock)."""
        now = time.monotonic()
        if len(self._buckets) > 10_000:  # full buckets hold nothing worth keeping
            self._buckets = {key: full for key, full in self._buckets.items() if full > now}
        interval = 1.0 / per_second
        after = max(self._buckets.get(bucket, now), now) + interval
        over = after - now - interval * max(1, burst)
        if over > 0:
            return over
        self._buckets[bucket] = after
        return 0.0

    async def ping(self) -> bool:
        """Always True: the store is this process."""
        return True

    async def close(self) -> None:
        """Nothing to release."""

    def _version(self, game_id: str) -> int:
        game = self._games.get(game_id)
        return len(game.envelopes) if game else 0

    async def _notify(self, game_id: str) -> None:
        changed = self._changed.get(game_id)
        if changed is not None:
            async with changed:
                changed.notify_all()
