"""The event store an operator command works on: a Redis by URL, or the embedded one of a data dir.

With a data dir, the command uses the running server's Redis (through the 0600 `redis.url` it writes
there), or, when no server runs on that data dir, starts the embedded Redis on it for the command's
duration. So `orchestra archive` and `orchestra import` work with the server running or stopped.

A server that starts on the data dir meanwhile (restarted by its supervisor after a crash) is not kept
out: it asks for the directory (server.ops.embedded_redis), and the command lets the games at hand finish,
stops its Redis, releases the directory, and goes on through the server's Redis once it is up. Each unit
of work holds a `lease` on the store, so the hand-over happens between units, never inside one.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from server.ops.embedded_redis import URL_NAME, DataDirLocked, EmbeddedRedis
from server.store import StoreUnavailable
from server.store.redis import RedisEventStore

# How long a command that handed its data dir over waits for the server's Redis before taking the
# directory back (a server that failed to start).
SERVER_WAIT = 60.0
_POLL_SECONDS = 0.1


class LocalStoreError(Exception):
    """The store cannot be opened (said why)."""


def _say(text: str) -> None:
    print(f"orchestra: {text}", file=sys.stderr, flush=True)


class LocalStore:
    """The store of one operator command, which may change hands (from its own Redis to a server's)."""

    def __init__(
        self,
        redis_url: str | None,
        data_dir: Path,
        *,
        server_wait: float = SERVER_WAIT,
        say: Callable[[str], None] = _say,
    ) -> None:
        """The store at `redis_url`, else the embedded Redis of `data_dir`; `say` tells of a hand-over."""
        self._url, self._data_dir = redis_url, data_dir
        self._server_wait, self._say = server_wait, say
        self._store: RedisEventStore | None = None
        self._embedded: EmbeddedRedis | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._leases = 0
        self._handing_over = False
        self._lost: str | None = None  # why the store was lost in a hand-over
        self._changed = asyncio.Condition()
        self.handovers = 0

    async def open(self) -> None:
        """Connect. Raises: LocalStoreError, StoreUnavailable, EmbeddedRedisError."""
        self._store = await (self._connect(self._url) if self._url is not None else self._open_local())

    async def close(self) -> None:
        """Disconnect, and stop the embedded Redis if this command started it."""
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
            self._watcher = None
        if self._store is not None:
            await self._store.close()
            self._store = None
        if self._embedded is not None:
            await self._embedded.stop()
            self._embedded = None

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[RedisEventStore]:
        """The store for one unit of work (a game): no hand-over happens until the unit is done."""
        async with self._changed:
            await self._changed.wait_for(lambda: not self._handing_over)
            if self._lost is not None:
                raise StoreUnavailable(self._lost)
            self._leases += 1
        try:
            assert self._store is not None, "open() first"
            yield self._store
        finally:
            async with self._changed:
                self._leases -= 1
                self._changed.notify_all()

    async def _open_local(self) -> RedisEventStore:
        embedded = EmbeddedRedis(self._data_dir, tool=True)
        try:
            url = await embedded.start()
        except DataDirLocked:  # a server (or another command) runs on this data dir: use its Redis
            return await self._connect(self._running_url())
        self._embedded = embedded
        try:
            store = await self._connect(url)
        except BaseException:
            await embedded.stop()
            self._embedded = None
            raise
        self._watcher = asyncio.create_task(self._watch(embedded), name="data-dir-handover")
        return store

    def _running_url(self) -> str:
        try:  # 0600: readable by the server's user only
            return (self._data_dir / URL_NAME).read_text().strip()
        except OSError as exc:
            raise LocalStoreError(f"cannot read the running server's {URL_NAME}: {exc}") from None

    async def _connect(self, url: str) -> RedisEventStore:
        return await RedisEventStore.from_url(url)

    async def _watch(self, embedded: EmbeddedRedis) -> None:
        while not embedded.handover_wanted:
            await asyncio.sleep(_POLL_SECONDS)
        async with self._changed:
            self._handing_over = True
            await self._changed.wait_for(lambda: self._leases == 0)
        self._say(f"a server is starting on {self._data_dir}: handing the data dir over to it")
        assert self._store is not None
        await self._store.close()
        self._store = None
        await embedded.stop()  # its AOF flushed, then the lock released: the server takes it
        self._embedded = None
        self.handovers += 1
        try:
            self._store = await self._server_store()
        except Exception as exc:  # no store at all now: every later unit fails, saying why
            self._lost = f"the store was lost handing the data dir over: {exc}"
        async with self._changed:
            self._handing_over = False
            self._changed.notify_all()

    async def _server_store(self) -> RedisEventStore:
        """The store of the server that took the data dir over, once it is up; the directory taken back
        when no server comes up in time."""
        deadline = time.monotonic() + self._server_wait
        while time.monotonic() < deadline:
            await asyncio.sleep(_POLL_SECONDS)
            try:
                url = (self._data_dir / URL_NAME).read_text().strip()
            except FileNotFoundError:
                continue  # written by the server once its Redis answers
            with contextlib.suppress(StoreUnavailable):
                store = await self._connect(url)
                self._say("going on through the server's Redis")
                return store
        self._say(f"no server came up on {self._data_dir} in {self._server_wait:.0f} s: taking it back")
        return await self._open_local()


@asynccontextmanager
async def opened(redis_url: str | None, data_dir: Path) -> AsyncIterator[LocalStore]:
    """The store at `redis_url`, else the embedded Redis of `data_dir`; closed (and stopped) on exit.

    Raises: LocalStoreError, StoreUnavailable, EmbeddedRedisError.
    """
    local = LocalStore(redis_url, data_dir)
    try:
        await local.open()
        yield local
    finally:
        await local.close()
