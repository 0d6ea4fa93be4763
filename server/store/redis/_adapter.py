"""The event store on Redis Streams: standalone Redis 6.2+ / Valkey, or Redis Cluster.

Writes are one Lua script each (see `server.store.redis._scripts`), so a batch is never partly written. Every
redis-py exception is translated here into the port's `StoreError` family; the shell never sees one.
Every call is bounded in time (by `asyncio.timeout`, or on the store's own pipelined lines by a timer; see
`server.store.redis.line`), so a hung Redis yields `StoreUnavailable`, never a hang.
Tails use a second client with its own large pool: a blocked XREAD per tailed game never starves
commands, and one XREAD per game (not one over many streams) works across Cluster slots.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncGenerator, Coroutine, Mapping, Sequence
from types import TracebackType
from typing import Any, cast

from redis import exceptions as rx
from redis.asyncio import BlockingConnectionPool, ConnectionPool, Redis, RedisCluster
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.commands.core import AsyncScript

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
    StoreFull,
    StoreUnavailable,
    TooManyGames,
)
from server.store.redis._notify import Notifier
from server.store.redis._scripts import (
    APPEND_MANY,
    CREATE,
    DELETE_AT,
    FENCE,
    INDEX,
    LISTED,
    PUBLIC_IDS,
    READ_PRESENCE,
    RESTORE,
    STORE_TIME,
    TAKE_TOKEN,
    UNINDEX,
    WRITE_PRESENCE,
)
from server.store.redis.keys import (
    FENCE_FIELD,
    FIELD,
    GAMES_KEY,
    INDEX_KEYS,
    INDEXED_KEY,
    LISTING_KEY,
    LIVE_KEY,
    PUBLIC_KEY,
    acked_key,
    appended_channel,
    auth_key,
    commands_key,
    events_key,
    presence_key,
    rate_key,
)
from server.store.redis.line import ScriptLine, retrieved
from server.store.redis.sentinel import is_sentinel_url, parse_sentinel_url, sentinel_client

Client = Redis | RedisCluster
# A stream reply as redis-py parses it (responses are never decoded: envelopes stay bytes).
_Entries = list[tuple[bytes, list[bytes]]]

COMMAND_TIMEOUT = 2.0
BLOCK_MS = 5_000
READ_CHUNK = 1_000
# The first slice of a read of unknown length (a game's load, a tail's catch-up) goes over the reads line,
# and so does a whole read known to be no longer: a game of up to this many events loads in one pipelined
# call. What is longer continues on a pooled connection of its own, so that it never holds up another
# game's read on the line.
LINE_READ = 256
# Tails hold one connection each while blocked; size their pool for many concurrently tailed games.
TAIL_CONNECTIONS = 10_000
# Command connections: calls beyond this many at once wait for a free connection (within the command
# timeout) instead of failing, so a burst of hellos is slower, never refused.
POOL_SIZE = 128

# Errors that mean "not now" rather than "wrong": the caller may retry later.
_UNAVAILABLE: tuple[type[BaseException], ...] = (
    rx.ConnectionError,  # includes BusyLoadingError (LOADING), MaxConnectionsError, auth failures
    rx.TimeoutError,
    rx.ClusterError,  # includes ClusterDownError, MasterDownError
    rx.RedisClusterException,  # includes SlotNotCoveredError
    rx.TryAgainError,
    rx.ReadOnlyError,  # a failover demoted the node we wrote to
    OSError,
)
# What Redis answers a write when it is at `maxmemory` with `noeviction`: an OOM error reply (redis-py's
# OutOfMemoryError), which Redis 6.2 wraps in an ERR when a Lua script's write meets it.
_FULL = "OOM command not allowed"


_DRIVER_ERRORS: tuple[type[BaseException], ...] = (*_UNAVAILABLE, rx.RedisError)

# What `accepted` waits for (ORCHESTRA_ACK): the append script's reply; a replica's copy too (WAIT); a
# replica's copy on its disk too (WAITAOF, Redis 7.2 and later).
ACK_LEVELS = ("primary", "replica", "replica_fsync")
ACK_TIMEOUT_MS = 500
# Published before each round's wait: a round of repeats only writes nothing, yet its first outcome must
# be on a replica before it is answered; a publish is replicated, after the first write in the stream.
ACK_CHANNEL = "orchestra:acked"
# How long the mark a Cluster shard's round writes for it (in the slot of one of its games) lives.
ACK_MARK_MS = 60_000


class AckLevelRefused(ValueError):
    """The acknowledgement level cannot be had from this Redis (the node does not start)."""


class _boundary:  # noqa: N801 - used as `async with _boundary(...)`, like the function it replaced
    """Bound a call in time and translate driver errors into the port's errors, here and nowhere else.

    The bound is `asyncio.timeout`, not redis-py's socket timeout: that one wraps every write in
    `asyncio.wait_for`, a task per command. A call cut short leaves its connection closed by redis-py,
    so no reply can ever be read by the wrong caller. A class, not a generator-based context manager:
    it runs on every store call but the line's appends, and a generator costs a frame and two
    resumptions more.
    """

    __slots__ = ("_timeout", "_game_id", "_expected", "_bound")

    def __init__(self, timeout: float, game_id: str = "", expected: int = 0) -> None:
        self._timeout, self._game_id, self._expected = timeout, game_id, expected
        self._bound = asyncio.timeout(timeout)

    async def __aenter__(self) -> None:
        await self._bound.__aenter__()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None:
        try:
            await self._bound.__aexit__(kind, exc, trace)
        except TimeoutError as timed_out:
            raise StoreUnavailable(f"redis: no answer within {self._timeout} s") from timed_out
        if isinstance(exc, _DRIVER_ERRORS):
            raise _translate(exc, self._game_id, self._expected) from exc


def _translate(exc: BaseException, game_id: str = "", expected: int = 0) -> StoreError:
    """The port's error for a driver error (raised, or returned inside a pipeline's replies)."""
    message = str(exc)
    if isinstance(exc, rx.OutOfMemoryError) or (isinstance(exc, rx.ResponseError) and _FULL in message):
        return StoreFull(f"redis: full (maxmemory reached, writes refused): {message}")
    if isinstance(exc, _UNAVAILABLE):
        return StoreUnavailable(f"redis: {exc}")
    if isinstance(exc, rx.ResponseError):
        if message.startswith("CONFLICT "):
            return ConcurrencyConflict(game_id, expected, int(message.split()[1]))
        if message.startswith("CHANGED"):
            return HistoryChanged(game_id, expected)
        if message.startswith("NOGAME"):
            return GameNotFound(game_id, expected)
        if message.startswith("EXISTS"):
            return GameExists(game_id)
        if message.startswith("FENCED"):
            return GameFenced(f"game {game_id!r} is being archived: it takes no more commands")
        if message.startswith("TOOMANY"):
            return TooManyGames("the store holds its maximum of live games")
    return StoreError(f"redis: {message}")


async def _finished(read: Coroutine[Any, Any, list[Record]]) -> list[Record]:
    """The records of `read`, which runs to its end even when the caller is cancelled meanwhile.

    A tail is cancelled whenever its game loses its last follower, often while its read is in flight
    (a client that connects and leaves at once). redis-py closes a connection whose reply it stopped
    reading, and the pool would then open and set up a new one for the next call. The read is bounded
    by the command timeout, so what it leaves running ends soon.
    """
    task = asyncio.ensure_future(read)
    task.add_done_callback(retrieved)
    return await asyncio.shield(task)


def _digest(last_bytes: bytes | None) -> str:
    """What the append script compares with the bytes at the expected version ('' skips the check)."""
    return "" if last_bytes is None else hashlib.sha1(last_bytes, usedforsecurity=False).hexdigest()


def _version_of(entry_id: bytes) -> int:
    # Entry ids are always 0-<version>, so the version is everything after "0-".
    return int(entry_id[2:])


def _records(entries: _Entries) -> list[Record]:
    return [Record(_version_of(entry_id), _data_of(fields)) for entry_id, fields in entries]


def _data_of(fields: list[bytes]) -> bytes:
    """The envelope of a stream entry's flat field list (the scripts write it as the only field)."""
    if fields[0] == FIELD:
        return fields[1]
    return dict(zip(fields[::2], fields[1::2], strict=True))[FIELD]


def _as_sent(response: Any, **kwargs: Any) -> Any:
    return response


# The stream reads whose replies the store's clients leave as Redis sent them: entries as [id, [field,
# value]] lists, not turned into a dict per entry by redis-py (most of the CPU of reading a long history).
RAW_READS = ("XRANGE", "XREVRANGE", "XREAD")


class RedisEventStore:
    """One Redis stream per game; appends are atomic Lua compare-and-XADD scripts."""

    def __init__(
        self,
        client: Client,
        tail_client: Client,
        *,
        block_ms: int = BLOCK_MS,
        timeout: float = COMMAND_TIMEOUT,
        line: ScriptLine | None = None,
        reads: ScriptLine | None = None,
        ack: str = "primary",
        ack_timeout_ms: int = ACK_TIMEOUT_MS,
    ) -> None:
        """Use `client` for commands and `tail_client` (its own pool) for blocking reads. On a standalone
        Redis (see server.store.redis.line), scripts (appends, creates, the index, presence) go over `line`
        and short reads and lookups over `reads`, when given: two lines, so that no read ever holds up an
        append. Without them, everything goes over `client`.

        A blocking read that gets no answer within `block_ms` plus `timeout` counts as unavailable.
        With `ack` above "primary", each round of appends waits up to `ack_timeout_ms` for a replica.
        """
        if ack not in ACK_LEVELS:
            raise AckLevelRefused(f"unknown acknowledgement level {ack!r}: one of {', '.join(ACK_LEVELS)}")
        if ack_timeout_ms < 1:
            raise AckLevelRefused("the acknowledgement timeout is at least 1 ms")
        self._ack = ack
        self._ack_wait: tuple[str | int, ...] | None = {
            "primary": None,
            "replica": ("WAIT", 1, ack_timeout_ms),
            "replica_fsync": ("WAITAOF", 1, 1, ack_timeout_ms),
        }[ack]
        self._ack_timeout = ack_timeout_ms / 1000
        # A Cluster's rounds above "primary" go straight to each shard's primary (_append_acked_on_shards).
        self._shards: dict[str, Redis] = {}
        self._client = client
        self._line = line
        self._reads = reads
        self._tail_client = tail_client
        self._block_ms = block_ms
        self._timeout = timeout
        self._tail_deadline = block_ms / 1000 + timeout
        # redis-py's Script: EVALSHA, and SCRIPT LOAD (on every primary in Cluster) then retry on NOSCRIPT.
        self._create = client.register_script(CREATE)
        self._restore = client.register_script(RESTORE)
        self._append_many = client.register_script(APPEND_MANY)
        self._index = client.register_script(INDEX)
        self._unindex = client.register_script(UNINDEX)
        self._listed = client.register_script(LISTED)
        self._public_ids = client.register_script(PUBLIC_IDS)
        self._fence = client.register_script(FENCE)
        self._delete_at = client.register_script(DELETE_AT)
        self._take_token = client.register_script(TAKE_TOKEN)
        self._store_time = client.register_script(STORE_TIME)
        self._write_presence = client.register_script(WRITE_PRESENCE)
        self._read_presence = client.register_script(READ_PRESENCE)
        self._cluster = isinstance(client, RedisCluster)
        self._db = (
            0
            if isinstance(client, RedisCluster)
            else int(client.connection_pool.connection_kwargs.get("db") or 0)
        )
        # On a standalone Redis tails wait for append notices (see server.store.redis._notify), on a Cluster
        # they block on XREAD.
        self._notifier = (
            None
            if isinstance(tail_client, RedisCluster)
            else Notifier(tail_client, timeout=timeout, heartbeat=block_ms / 1000)
        )

    @classmethod
    async def from_url(
        cls,
        url: str,
        cluster: bool | None = None,
        *,
        timeout: float = COMMAND_TIMEOUT,
        block_ms: int = BLOCK_MS,
        pool_size: int = POOL_SIZE,
        ack: str = "primary",
        ack_timeout_ms: int = ACK_TIMEOUT_MS,
    ) -> RedisEventStore:
        """Connect to redis://, rediss:// or unix:// `url`, or through Sentinels to the primary a
        redis+sentinel:// `url` names (server.store.redis.sentinel); Cluster mode is detected when
        `cluster` is None.

        At most `pool_size` command calls (per Cluster node) run at once; the others wait for a connection.
        `ack` is what an append waits for (ACK_LEVELS), `ack_timeout_ms` how long.

        Raises: StoreUnavailable when detection cannot reach Redis; AckLevelRefused when this Redis cannot
        give `ack` (WAITAOF before Redis 7.2, or without AOF);
        SentinelUrlError.
        """
        if is_sentinel_url(url):
            address = parse_sentinel_url(url)
            store = cls(
                sentinel_client(address, timeout, max_connections=max(pool_size, TAIL_CONNECTIONS)),
                sentinel_client(address, timeout, max_connections=TAIL_CONNECTIONS),
                block_ms=block_ms,
                timeout=timeout,
                ack=ack,
                ack_timeout_ms=ack_timeout_ms,
            )
            for command in RAW_READS:
                store.client.set_response_callback(command, _as_sent)
                store._tail_client.set_response_callback(command, _as_sent)
            return await store._checked_ack()
        if cluster is None:
            cluster = await _is_cluster(url, timeout)
        line = None if cluster else ScriptLine.for_url(url, timeout)
        reads = None if line is None else ScriptLine.for_url(url, timeout)
        # Neither client has a socket timeout: `_boundary` bounds every call instead (see there). Without
        # one, redis-py also writes without asyncio.wait_for, which on Python 3.11 can swallow a
        # cancellation (cpython gh-86296) and hold a cancelled tail for a whole BLOCK.
        store = cls(
            _connect(url, cluster, timeout, max_connections=pool_size, wait=True),
            _connect(url, cluster, timeout, max_connections=TAIL_CONNECTIONS),
            block_ms=block_ms,
            timeout=timeout,
            line=line,
            reads=reads,
            ack=ack,
            ack_timeout_ms=ack_timeout_ms,
        )
        return await store._checked_ack()

    async def _checked_ack(self) -> RedisEventStore:
        """This store, once its Redis is known to give its acknowledgement level (closed, and
        AckLevelRefused raised, when not)."""
        try:
            if self._ack == "replica_fsync":
                version = await self.server_version()
                if _version_tuple(version) < (7, 2):
                    raise AckLevelRefused(
                        f"ORCHESTRA_ACK=replica_fsync needs WAITAOF, Redis 7.2 or later; this Redis is "
                        f"{version}: use 'replica', or upgrade Redis"
                    )
                async with _boundary(self._timeout):
                    persistence = await self._client.info("persistence")
                if not int(persistence.get("aof_enabled", 0)):
                    raise AckLevelRefused(
                        "ORCHESTRA_ACK=replica_fsync needs the primary's append-only file (appendonly yes)"
                    )
        except BaseException:
            await self.close()
            raise
        return self

    @property
    def client(self) -> Client:
        """The command client (for diagnostics and tests); its XRANGE, XREVRANGE and XREAD replies come as
        Redis sent them (RAW_READS)."""
        return self._client

    async def create(
        self,
        game_id: str,
        data: bytes,
        credentials: Mapping[str, str],
        *,
        listing: bytes | None = None,
        max_live: int = 0,
    ) -> None:
        """Write a game's first envelope (version 1) and its credentials together, then index it (live,
        and listed with `listing` when given), or nothing.

        The index is written after, in a second call (one script: see `INDEX`): it lives outside the
        game's slot, so no script can write both. A crash between the two leaves a playable game missing
        from `games()` and the index. With `max_live` > 0, the index refuses a game past that many live
        ones, and the game is taken back. Above the "primary" ack level the index write is followed by the
        wait (not on a Cluster): a game no replica took answers StoreUnavailable (it was made on the
        primary all the same).
        Raises: GameExists, TooManyGames, StoreFull, StoreUnavailable.
        """
        pairs = [item for field, value in credentials.items() for item in (field, value)]
        keys = self._game_keys(game_id, auth_key(game_id))
        seconds, micros = await self._script(self._create, keys, [data, *pairs], game_id)
        try:
            await self._write_index(
                game_id, f"{int(seconds)}{int(micros):06d}", listing, True, max_live, acked=True
            )
        except (StoreFull, TooManyGames):
            # Redis filled up between the two calls, or the cap is reached: take the game back (a delete
            # needs no memory), so a refused create leaves nothing behind.
            with contextlib.suppress(StoreError):
                async with _boundary(self._timeout, game_id):
                    await self._client.delete(events_key(game_id), auth_key(game_id))
            raise

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
        """Write a whole game, its credentials and command records in one script (its keys share a slot),
        then index it in a second call, as `create` does (a refused index takes the game back).

        Raises: GameExists, TooManyGames, StoreFull, StoreUnavailable, ValueError (no envelopes).
        """
        if not envelopes:
            raise ValueError("a game has at least one envelope")
        args: list[bytes | str | int] = [len(envelopes), *envelopes, len(credentials)]
        args += [item for field, value in credentials.items() for item in (field, value)]
        args += [item for key, (first, last) in commands.items() for item in (key, f"{first} {last}")]
        # A long game's script runs longer than a command's: bound it by its size too.
        timeout = self._timeout + len(envelopes) / 10_000
        async with _boundary(timeout, game_id):
            await self._restore(
                keys=self._game_keys(game_id, auth_key(game_id), commands_key(game_id)), args=args
            )
        score = "" if created is None else str(created)
        try:
            await self._write_index(game_id, score, listing, live, max_live)
        except (StoreFull, TooManyGames):
            with contextlib.suppress(StoreError):
                async with _boundary(self._timeout, game_id):
                    await self._client.delete(events_key(game_id), auth_key(game_id), commands_key(game_id))
            raise

    async def append_many(self, batch: Sequence[Append]) -> list[Appended | StoreError]:
        """Appends (game, expected, envelopes, command key[, after]) in one round trip, all by one script
        (`APPEND_MANY`), each atomic and run in order with its own result or error; a connection failure
        answers every one with StoreUnavailable.

        On a standalone Redis the whole batch is one call. On a Cluster each game's appends are one call
        (its keys share a slot; another game's may live on another node), pipelined: redis-py sends each
        to its slot's node.
        Raises: ValueError (an append without envelopes; nothing is written).
        """
        if not batch:
            return []
        if not self._cluster:
            every = list(range(len(batch)))
            keys, args = self._append_many_call(batch, every, 3)
            try:
                if self._ack_wait is None:
                    replies = await self._script(self._append_many, keys, args)
                else:
                    replies, copies = await self._script_acked(self._append_many, keys, args)
            except StoreError as exc:
                return [exc for _ in batch]
            answers = self._results(batch, every, replies)
            if self._ack_wait is not None and copies < 1:
                # Written on the primary, maybe: a retry with the same key gets the first outcome.
                missed = StoreUnavailable(f"redis: no replica had the append within {self._ack_timeout} s")
                return [missed if isinstance(answer, Appended) else answer for answer in answers]
            return answers
        by_game: dict[str, list[int]] = {}
        for index, item in enumerate(batch):
            by_game.setdefault(item.game_id, []).append(index)
        if self._ack_wait is not None:
            return await self._append_acked_on_shards(batch, list(by_game.values()))
        calls = [self._append_many_call(batch, indexes, 2) for indexes in by_game.values()]
        pipe = self._client.pipeline(transaction=False)
        for keys, args in calls:
            # EVAL, not EVALSHA: Redis caches the compiled script by its hash anyway, and a pipeline then
            # never meets NOSCRIPT after a Redis restart.
            pipe.eval(APPEND_MANY, len(keys), *keys, *args)
        try:
            async with _boundary(self._timeout):
                replies = await pipe.execute(raise_on_error=False)
        except StoreError as exc:
            return [exc for _ in batch]
        # Back in the batch's order (every index is some game's).
        results: dict[int, Appended | StoreError] = {}
        for indexes, reply in zip(by_game.values(), replies, strict=True):
            if isinstance(reply, BaseException):
                for index in indexes:
                    results[index] = _translate(reply, batch[index].game_id, batch[index].expected)
            else:
                results.update(zip(indexes, self._results(batch, indexes, reply), strict=True))
        return [results[index] for index in range(len(batch))]

    async def _append_acked_on_shards(
        self, batch: Sequence[Append], games: list[list[int]]
    ) -> list[Appended | StoreError]:
        """A Cluster's round above the "primary" level: each shard's appends, a replicated write and the
        wait on one connection to its primary (a Cluster client's pipeline cannot aim a WAIT at a node),
        the shards at once; a shard's appends no replica took answer StoreUnavailable."""
        client = cast(RedisCluster, self._client)
        try:
            async with _boundary(self._timeout):
                await client.initialize()
        except StoreError as exc:
            return [exc for _ in batch]
        shards: dict[str, list[list[int]]] = {}
        nodes: dict[str, ClusterNode] = {}
        for indexes in games:
            node = client.get_node_from_key(events_key(batch[indexes[0]].game_id))
            if node is None:
                unknown = StoreUnavailable("redis: no Cluster node holds the game's slot now")
                return [unknown for _ in batch]
            nodes[node.name] = node
            shards.setdefault(node.name, []).append(indexes)
        results: dict[int, Appended | StoreError] = {}
        outcomes = await asyncio.gather(
            *(self._append_acked_on_shard(batch, nodes[name], shard) for name, shard in shards.items())
        )
        for outcome in outcomes:
            results.update(outcome)
        return [results[index] for index in range(len(batch))]

    async def _append_acked_on_shard(
        self, batch: Sequence[Append], node: ClusterNode, games: list[list[int]]
    ) -> dict[int, Appended | StoreError]:
        assert self._ack_wait is not None
        every = [index for indexes in games for index in indexes]
        pipe = self._shard(node).pipeline(transaction=False)
        for indexes in games:
            keys, args = self._append_many_call(batch, indexes, 2)
            pipe.eval(APPEND_MANY, len(keys), *keys, *args)
        # A round of repeats writes nothing: this write, replicated after their first writes, is what the
        # wait waits for (a Cluster does not replicate a publish).
        pipe.set(acked_key(batch[games[0][0]].game_id), 1, px=ACK_MARK_MS)
        pipe.execute_command(*self._ack_wait)
        first_game = batch[games[0][0]].game_id
        try:
            async with _boundary(self._timeout + self._ack_timeout):
                *replies, _, waited = await pipe.execute(raise_on_error=False)
        except StoreError as exc:
            await self._relearn(first_game)
            return dict.fromkeys(every, exc)
        found: dict[int, Appended | StoreError] = {}
        for indexes, reply in zip(games, replies, strict=True):
            if isinstance(reply, BaseException):
                if isinstance(reply, rx.AskError):  # MovedError too: the slot is elsewhere now
                    await self._relearn(batch[indexes[0]].game_id)
                    reply = rx.TryAgainError(str(reply))
                for index in indexes:
                    found[index] = _translate(reply, batch[index].game_id, batch[index].expected)
            else:
                found.update(zip(indexes, self._results(batch, indexes, reply), strict=True))
        copies = 0 if isinstance(waited, BaseException) else _copies(waited)
        if copies < 1:
            missed = StoreUnavailable(f"redis: no replica had the append within {self._ack_timeout} s")
            return {i: missed if isinstance(answer, Appended) else answer for i, answer in found.items()}
        return found

    async def _relearn(self, game_id: str) -> None:
        """Let the Cluster client find where the game's slot is now (a failover moved it, or its node is
        gone): a read of its key through it, which follows MOVED and marks a lost node's view stale."""
        with contextlib.suppress(StoreError):
            async with _boundary(self._timeout, game_id):
                await self._client.exists(events_key(game_id))

    def _shard(self, node: ClusterNode) -> Redis:
        """A plain client of one Cluster primary (made once per node)."""
        shard = self._shards.get(node.name)
        if shard is None:
            options = dict(node.connection_kwargs)
            pool = ConnectionPool(
                connection_class=node.connection_class, max_connections=POOL_SIZE, **options
            )
            shard = self._shards[node.name] = Redis.from_pool(pool)
        return shard

    def _append_many_call(
        self, batch: Sequence[Append], indexes: list[int], stride: int
    ) -> tuple[list[str], list[bytes | str | int]]:
        """The keys and arguments of APPEND_MANY for the appends of `batch` at `indexes`."""
        keys: list[str] = []
        args: list[bytes | str | int] = [stride]
        for index in indexes:
            game_id, expected, envelopes, command_key, after = batch[index]
            if not envelopes:
                raise ValueError("append needs at least one envelope")
            keys += [events_key(game_id), commands_key(game_id)]
            if stride == 3:
                keys.append(appended_channel(game_id, self._db))
            args += [expected, command_key, _digest(after), len(envelopes), *envelopes]
        return keys, args

    @staticmethod
    def _results(batch: Sequence[Append], indexes: list[int], replies: Any) -> list[Appended | StoreError]:
        results: list[Appended | StoreError] = []
        for index, reply in zip(indexes, replies, strict=True):
            game_id, expected = batch[index].game_id, batch[index].expected
            if int(reply[0]) < 0:
                message = reply[1].decode() if isinstance(reply[1], bytes) else str(reply[1])
                results.append(_translate(rx.ResponseError(message), game_id, expected))
            else:
                results.append(Appended(int(reply[0]), int(reply[1]), bool(reply[2])))
        return results

    async def _script(
        self,
        script: AsyncScript,
        keys: Sequence[str],
        args: Sequence[bytes | str | int],
        game_id: str = "",
        expected: int = 0,
    ) -> Any:
        """Run a script over the line when there is one (which bounds its own calls with a timer, cheaper
        than `_boundary`'s context manager), else over the client; errors are the port's."""
        if self._line is None:
            async with _boundary(self._timeout, game_id, expected):
                return await script(keys=keys, args=args)
        try:
            # The scripts are registered from the str sources of server.store.redis._scripts.
            source = cast(str, script.script)
            return await self._line.script(script.sha, source, keys, args, self._timeout)
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, game_id, expected) from exc

    async def _script_acked(
        self, script: AsyncScript, keys: Sequence[str], args: Sequence[bytes | str | int], game_id: str = ""
    ) -> tuple[Any, int]:
        """`script`'s reply, then the publish and the wait of the ack level on the same connection; and how
        many replicas have the writes of the connection so far (errors the port's)."""
        assert self._ack_wait is not None
        then = [("PUBLISH", ACK_CHANNEL, 0), self._ack_wait]
        timeout = self._timeout + self._ack_timeout
        try:
            if self._line is not None:
                source = cast(str, script.script)
                replies, (_, waited) = await self._line.script_then(
                    script.sha, source, keys, args, then, timeout
                )
            else:
                # A pipeline sends its commands on one connection.
                pipe = cast(Redis, self._client).pipeline(transaction=False)
                pipe.eval(cast(str, script.script), len(keys), *keys, *args)
                for command in then:
                    pipe.execute_command(*command)
                async with _boundary(timeout):
                    replies, _, waited = await pipe.execute(raise_on_error=False)
            for reply in (replies, waited):
                if isinstance(reply, BaseException):
                    raise reply
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, game_id) from exc
        return replies, _copies(waited)

    async def outcome(self, game_id: str, command_key: str) -> Appended | None:
        """The recorded outcome of an accepted command key (duplicate=True), or None.

        Raises: StoreUnavailable.
        """
        seen = cast(bytes | None, await self._lookup(("HGET", commands_key(game_id), command_key), game_id))
        if seen is None:
            return None
        first, last = seen.split()
        return Appended(int(first), int(last), duplicate=True)

    async def read(self, game_id: str, after: int = 0, until: int | None = None) -> list[Record]:
        """The records of versions after+1..until (the end when None); [] for an unknown game.

        Raises: StoreUnavailable.
        """
        key, stop = events_key(game_id), "+" if until is None else f"0-{until}"
        records: list[Record] = []
        short = self._reads is not None and (until is None or until - after <= LINE_READ)
        # Chunked, so one long game never makes one huge reply that blocks Redis and the client.
        while until is None or after < until:
            if short:
                count = LINE_READ
                entries = cast(
                    _Entries,
                    await self._lookup(("XRANGE", key, f"(0-{after}", stop, "COUNT", count), game_id),
                )
                short = False
            else:
                count = READ_CHUNK
                async with _boundary(self._timeout, game_id):
                    entries = cast(_Entries, await self._client.xrange(key, f"(0-{after}", stop, count=count))
            records += _records(entries)
            if len(entries) < count:
                break
            after = records[-1].version
        return records

    async def _lookup(self, command: tuple[str | int, ...], game_id: str) -> Any:
        """A read (or a write whose repeat changes nothing) over the reads line when there is one, else
        over the client; its errors the port's. Replies come as Redis sent them but for HGETALL's, which
        the client turns into a dict (see `_hash`)."""
        if self._reads is None:
            async with _boundary(self._timeout, game_id):
                return await self._client.execute_command(*command)
        try:
            return await self._reads.command(command, self._timeout)
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, game_id) from exc

    def _game_keys(self, game_id: str, *others: str) -> list[str]:
        # The notice channel rides along as a key on a standalone Redis (scripts publish on it).
        keys = [events_key(game_id), *others]
        if not self._cluster:
            keys.append(appended_channel(game_id, self._db))
        return keys

    async def tail(self, game_id: str, after: int) -> AsyncGenerator[list[Record], None]:
        """Live batches of records after `after`, in order, without gap or duplicate, until cancelled.

        Raises: StoreUnavailable (from the iterator; resume with a new tail after the last version).
        """
        if self._notifier is not None:
            # Closing this tail closes the notified one at once (its subscription with it), not whenever
            # the garbage collector finalizes it.
            async with contextlib.aclosing(self._notified(game_id, after, self._notifier)) as live:
                async for batch in live:
                    yield batch
            return
        key = events_key(game_id)
        while True:
            # Always from the last delivered id, never `$`: `$` would skip what arrived in between.
            async with _boundary(self._tail_deadline, game_id):
                reply = await self._blocking_read(key, after)
            if not reply:
                continue
            batch = _records(_entries_of(reply))
            after = batch[-1].version
            yield batch

    async def _blocking_read(self, key: str, after: int) -> Any:
        """XREAD of `key` after version `after`, blocking up to the block time, on the Cluster node holding
        it (only a Cluster's tails read so: a standalone Redis's wait for notices)."""
        client = cast(RedisCluster, self._tail_client)
        command = ("XREAD", "COUNT", READ_CHUNK, "BLOCK", self._block_ms, "STREAMS", key, f"0-{after}")
        # XREAD's keys follow its options, so redis-py would ask a node where they go (COMMAND GETKEYS,
        # twice a call, always the same node) before each read: two more round trips a read, and every
        # tail hanging on that one node. The key's slot says where it goes. After a failure the client
        # marks its view of the cluster stale; initialize() renews it then (else it does nothing), so
        # a tail that retries reads from the node now holding the key.
        await client.initialize()
        return await client.execute_command(*command, target_nodes=client.get_node_from_key(key))

    async def _notified(
        self, game_id: str, after: int, notifier: Notifier
    ) -> AsyncGenerator[list[Record], None]:
        # Subscribed (and confirmed) before the first read: every later append is in a notice.
        watch = await notifier.watch(appended_channel(game_id, self._db).encode())
        try:
            last = after
            latest: int | None = None  # None: the first read, of what came before the subscription
            while True:
                # A notice of a version delivered already (a read took several appends at once) reads
                # nothing.
                if latest is None or latest > last:
                    batch = await _finished(self.read(game_id, last))
                    if batch:
                        last = batch[-1].version
                        yield batch
                latest = await watch.wait()
        finally:
            watch.close()

    async def version(self, game_id: str) -> int:
        """The game's current version; 0 for an unknown game. Raises: StoreUnavailable."""
        top = cast(
            _Entries, await self._lookup(("XREVRANGE", events_key(game_id), "+", "-", "COUNT", 1), game_id)
        )
        return _version_of(top[0][0]) if top else 0

    async def credentials(self, game_id: str) -> dict[str, str]:
        """The game's credential hashes ({} for an unknown game). Raises: StoreUnavailable."""
        raw = _hash(await self._lookup(("HGETALL", auth_key(game_id)), game_id))
        return {field.decode(): value.decode() for field, value in raw.items()}

    async def games(self) -> list[str]:
        """Ids of every game created, oldest first. Raises: StoreUnavailable."""
        async with _boundary(self._timeout):
            ids = cast(list[bytes], await self._client.zrange(GAMES_KEY, 0, -1))
        return [game_id.decode() for game_id in ids]

    async def delete(self, game_id: str, version: int | None = None) -> None:
        """Remove a game's keys (one call: they share a slot; with `version`, only if the game is still
        at it), then its entries in the index (one script).

        Raises: ConcurrencyConflict (not at `version`: nothing removed), StoreUnavailable.
        """
        keys = [events_key(game_id), auth_key(game_id), commands_key(game_id)]
        async with _boundary(self._timeout, game_id, version or 0):
            if version is None:
                await self._client.delete(*keys)
            else:
                await self._delete_at(keys=keys, args=[version])
            await self._unindex(keys=INDEX_KEYS, args=[game_id])

    async def fence(self, game_id: str) -> int:
        """Stop the game taking appends; its version (0: unknown game, nothing fenced).

        Raises: StoreUnavailable.
        """
        async with _boundary(self._timeout, game_id):
            return int(await self._fence(keys=[events_key(game_id), commands_key(game_id)]))

    async def unfence(self, game_id: str) -> None:
        """Let a fenced game take appends again. Raises: StoreUnavailable."""
        async with _boundary(self._timeout, game_id):
            await self._client.hdel(commands_key(game_id), FENCE_FIELD)

    async def server_version(self) -> str:
        """The version of the Redis behind the store (INFO server; of a Cluster, its first node's).

        Raises: StoreUnavailable.
        """
        async with _boundary(self._timeout):
            info = await self._client.info("server")
        # A Cluster may answer per node: {node: {field: value}}.
        for section in (info, *(v for v in info.values() if isinstance(v, dict))):
            if "redis_version" in section:
                return str(section["redis_version"])
        return "unknown"

    async def _write_index(
        self,
        game_id: str,
        score: str,
        listing: bytes | None,
        live: bool,
        max_live: int = 0,
        acked: bool = False,
    ) -> None:
        args: list[str | bytes | int] = [game_id, score, "1" if live else "0", max_live]
        if listing is not None:
            args.append(listing)
        # On a Cluster the index lives on a shard of its own: a new game is not waited for there.
        if not acked or self._ack_wait is None or self._cluster:
            await self._script(self._index, INDEX_KEYS, args, game_id)
            return
        # The index is written after the game, so a replica that has it has the game too.
        _, copies = await self._script_acked(self._index, INDEX_KEYS, args, game_id)
        if copies < 1:
            raise StoreUnavailable(f"redis: no replica had the new game within {self._ack_timeout} s")

    async def listed(self, limit: int) -> list[Listed]:
        """The newest `limit` listed games, newest first, with their newest records: one script for the
        ids and listings, then one pipelined read of each listed stream's top entry.

        Raises: StoreUnavailable.
        """
        async with _boundary(self._timeout):
            ids, listings = await self._listed(keys=[PUBLIC_KEY, LISTING_KEY], args=[limit])
        if not ids:
            return []
        pipe = self._client.pipeline(transaction=False)
        for game_id in ids:
            pipe.xrevrange(events_key(game_id.decode()), "+", "-", count=1)
        async with _boundary(self._timeout):
            tops = await pipe.execute()
        found: list[Listed] = []
        for game_id, listing, top in zip(ids, listings, tops, strict=True):
            if top and listing is not None:  # a stream gone (archived meanwhile): not listed
                newest = _records(top)[0]
                found.append(Listed(game_id.decode(), listing, newest))
        return found

    async def public_ids(self, limit: int, *, live: bool = False) -> list[str]:
        """The newest `limit` listed games' ids (with `live`, of those still live), newest first: one
        script on the index. Raises: StoreUnavailable."""
        async with _boundary(self._timeout):
            ids = await self._public_ids(keys=[PUBLIC_KEY, LIVE_KEY], args=[limit, "1" if live else "0"])
        return [game_id.decode() for game_id in ids]

    async def live_games(self) -> int:
        """How many games are indexed as live. Raises: StoreUnavailable."""
        async with _boundary(self._timeout):
            return int(await self._client.scard(LIVE_KEY))

    async def ended(self, game_id: str) -> None:
        """The game is live no more. Raises: StoreUnavailable."""
        await self._lookup(("SREM", LIVE_KEY, game_id), game_id)

    async def index(self, game_id: str, *, listing: bytes | None, live: bool) -> None:
        """Index an existing game, scored by its creation in orchestra:games (now, if it is not there).

        Raises: StoreFull, StoreUnavailable.
        """
        await self._write_index(game_id, "", listing, live)

    async def unindexed(self) -> list[str]:
        """Games in orchestra:games but not indexed, oldest first: two counts when there are none, else
        a walk of orchestra:games a chunk at a time. Raises: StoreUnavailable."""
        async with _boundary(self._timeout):
            pipe = self._client.pipeline(transaction=False)
            pipe.zcard(GAMES_KEY)
            pipe.scard(INDEXED_KEY)
            total, indexed = await pipe.execute()
        if int(indexed) >= int(total):
            return []
        missing: list[str] = []
        start = 0
        while True:
            async with _boundary(self._timeout):
                ids = cast(list[bytes], await self._client.zrange(GAMES_KEY, start, start + READ_CHUNK - 1))
                if not ids:
                    break
                known = await self._client.smismember(INDEXED_KEY, ids)
            missing += [game_id.decode() for game_id, member in zip(ids, known, strict=True) if not member]
            start += READ_CHUNK
        return missing

    async def write_presence(self, node: str, values: Mapping[str, bytes | None], ttl: float) -> None:
        """Set (HSET, then PEXPIRE the hash) or remove (HDEL) `node`'s field in each game's presence hash:
        one script call on a standalone Redis (a pipeline of a command per key costs the client several
        times the CPU), one pipelined call on a Cluster. Raises: StoreUnavailable."""
        if not values:
            return
        if not self._cluster:
            keys = [presence_key(game_id) for game_id in values]
            args: list[str | int | bytes] = [node, max(1, int(ttl * 1000))]
            args += [value or b"" for value in values.values()]
            await self._script(self._write_presence, keys, args)
            return
        pipe = self._client.pipeline(transaction=False)
        for game_id, value in values.items():
            key = presence_key(game_id)
            if value is None:
                pipe.hdel(key, node)
            else:
                pipe.hset(key, node, value)
                pipe.pexpire(key, max(1, int(ttl * 1000)))
        async with _boundary(self._timeout):
            await pipe.execute()

    async def read_presence(self, game_ids: Sequence[str]) -> list[dict[str, bytes]]:
        """HGETALL of each game's presence hash: one script call on a standalone Redis, one pipelined call
        on a Cluster. Raises: StoreUnavailable."""
        if not game_ids:
            return []
        if not self._cluster:
            keys = [presence_key(game_id) for game_id in game_ids]
            flat = cast(list[list[bytes]], await self._script(self._read_presence, keys, []))
            return [{pairs[i].decode(): pairs[i + 1] for i in range(0, len(pairs), 2)} for pairs in flat]
        pipe = self._client.pipeline(transaction=False)
        for game_id in game_ids:
            pipe.hgetall(presence_key(game_id))
        async with _boundary(self._timeout):
            replies = cast(list[dict[bytes, bytes]], await pipe.execute())
        return [{field.decode(): value for field, value in reply.items()} for reply in replies]

    async def time(self) -> float:
        """Redis's clock (on a Cluster, that of the node holding `orchestra:games`, for every node).
        Raises: StoreUnavailable."""
        async with _boundary(self._timeout):
            seconds, micros = await self._store_time(keys=[GAMES_KEY])
        return int(seconds) + int(micros) / 1e6

    async def take_token(self, bucket: str, per_second: float, burst: int) -> float:
        """Spend a token of a rate bucket shared by every node (one script, on Redis's clock): 0, or the
        seconds until a token can be spent. Raises: StoreUnavailable."""
        async with _boundary(self._timeout):
            wait = await self._take_token(keys=[rate_key(bucket)], args=[1000.0 / per_second, max(1, burst)])
        return float(wait) / 1000.0

    async def ping(self) -> bool:
        """Whether the store answers now."""
        try:
            async with _boundary(self._timeout):
                await self._client.ping()
        except StoreError:
            return False
        return True

    async def close(self) -> None:
        """Release the connection pools and lines."""
        for shard in self._shards.values():
            await shard.aclose()
        if self._notifier is not None:
            await self._notifier.close()
        for line in (self._line, self._reads):
            if line is not None:
                await line.close()
        for client in (self._tail_client, self._client):
            if isinstance(client, RedisCluster):
                # A Cluster client closes its connections only while its view of the cluster is current:
                # one a failure marked stale (a failover) is renewed first, or they would stay open. When
                # that fails, redis-py closes them itself.
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(self._timeout):
                        await client.initialize()
            await client.aclose()
            manager = getattr(getattr(client, "connection_pool", None), "sentinel_manager", None)
            if manager is not None:  # the Sentinels' own connections (server.store.redis.sentinel)
                await manager.aclose()


def _copies(waited: Any) -> int:
    """The replicas that have the writes: WAIT answers their number, WAITAOF [local fsyncs, replicas]."""
    return int(waited[1]) if isinstance(waited, list) else int(waited)


def _version_tuple(text: str) -> tuple[int, ...]:
    """(7, 0, 15) of "7.0.15"; () of what is no version."""
    try:
        return tuple(int(part) for part in text.split("."))
    except ValueError:
        return ()


def _hash(reply: Any) -> dict[bytes, bytes]:
    """A hash's fields and values: HGETALL's reply as Redis sent it (a flat list), or as redis-py's client
    gives it (a dict)."""
    if isinstance(reply, dict):
        return cast(dict[bytes, bytes], reply)
    return dict(zip(reply[::2], reply[1::2], strict=True))


def _entries_of(reply: Any) -> _Entries:
    # As sent (RAW_READS): RESP2 gives [[key, entries]]; RESP3 gives {key: entries}.
    if isinstance(reply, dict):
        return cast(_Entries, next(iter(reply.values())))
    return cast(_Entries, reply[0][1])


def _connect(
    url: str, cluster: bool, connect_timeout: float, max_connections: int, wait: bool = False
) -> Client:
    """A client with at most `max_connections` connections (per node); with `wait`, a call past them
    waits up to `connect_timeout` for one to be free, else it fails at once."""
    # One quick retry covers a pooled connection that a Redis restart closed; more would turn an
    # outage into a hang instead of a prompt StoreUnavailable.
    options: dict[str, Any] = {
        "socket_timeout": None,
        "socket_connect_timeout": connect_timeout,
        "retry": Retry(ExponentialBackoff(cap=0.1, base=0.01), 1),
    }
    client: Client
    if cluster:
        # A Cluster node's pool has no waiting form: it is sized generously instead.
        client = RedisCluster.from_url(url, max_connections=max(max_connections, 1_000), **options)
    elif wait:
        pool = BlockingConnectionPool.from_url(
            url, max_connections=max_connections, timeout=connect_timeout, **options
        )
        client = Redis.from_pool(pool)
    else:
        client = Redis.from_url(url, max_connections=max_connections, **options)
    for command in RAW_READS:
        client.set_response_callback(command, _as_sent)
    return client


async def _is_cluster(url: str, timeout: float) -> bool:
    if url.startswith("unix://"):
        return False
    probe = _connect(url, False, timeout, max_connections=1)
    try:
        async with _boundary(timeout):
            info = await probe.info("cluster")
    finally:
        await probe.aclose()
    return bool(info.get("cluster_enabled"))
