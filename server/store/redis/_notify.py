"""Append notifications on standalone Redis: one subscriber connection per store, one watch per tail.

Every append script publishes the game's new version on the game's channel. A node's tails wait for
these instead of each holding a blocked XREAD, which every append, the node's own included, would wake
for a round trip: a notice of a version the node already holds now costs a parsed message and nothing
more. The stream stays the only truth: a notice only says "read the stream past this version".

Nothing is ever silently missed. A tail subscribes (and waits for Redis to confirm it) before it reads
the stream, so an append is either in that read or notified after it. A subscriber connection that
fails or stops answering its heartbeat fails every watch on it: their tails raise StoreUnavailable and
are started again, reading the stream from where they were.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Any

from redis.asyncio import Redis

from server.store import StoreUnavailable


class Watch:
    """The notices of one game's channel for one tail: the highest version notified, and a wake-up."""

    __slots__ = ("channel", "latest", "error", "_changed", "_session")

    def __init__(self, channel: bytes, session: _Session) -> None:
        self.channel = channel
        self.latest = 0
        self.error: StoreUnavailable | None = None
        self._changed = asyncio.Event()
        self._session = session

    async def wait(self) -> int:
        """The highest version notified, once a notice arrived since the last call.

        Raises: StoreUnavailable when the subscriber connection failed.
        """
        await self._changed.wait()
        self._changed.clear()
        if self.error is not None:
            raise self.error
        return self.latest

    def notify(self, version: int) -> None:
        if version > self.latest:
            self.latest = version
        self._changed.set()

    def fail(self, error: StoreUnavailable) -> None:
        self.error = error
        self._changed.set()

    def close(self) -> None:
        """Stop watching (the channel is unsubscribed when its last watch closes)."""
        self._session.leave(self)


class _Session:
    """One subscriber connection, its reader and heartbeat, and its channels; failed as a whole."""

    def __init__(self, client: Redis, timeout: float, heartbeat: float) -> None:
        self._client, self._timeout, self._heartbeat = client, timeout, heartbeat
        self._connection: Any = None
        self.watches: dict[bytes, set[Watch]] = {}
        # Per channel, the SUBSCRIBEs sent and not yet confirmed, oldest first (replies come in order).
        self._confirming: dict[bytes, deque[asyncio.Future[None]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_seen = 0.0
        self.failed: StoreUnavailable | None = None

    async def start(self) -> None:
        # A connection of its own, outside the pool's accounting: it lives as long as this session. RESP2,
        # whatever the client speaks: its messages are the replies that `read_response` returns, where on
        # RESP3 they are pushes, read only through a parser's private hook. Not redis-py's PubSub: it
        # connects again and subscribes again by itself after a failure, and a notice sent in between
        # would be lost without any watch failing.
        pool = self._client.connection_pool
        connection: Any = pool.connection_class(**{**pool.connection_kwargs, "protocol": 2})
        self._connection = connection
        async with asyncio.timeout(self._timeout):
            await connection.connect()
        self._last_seen = asyncio.get_running_loop().time()
        self._spawn(self._read())
        self._spawn(self._beat())

    async def join(self, channel: bytes) -> Watch:
        """A watch on `channel`, subscribed and confirmed by Redis."""
        watch = Watch(channel, self)
        watches = self.watches.get(channel)
        if watches is None:
            watches = self.watches[channel] = set()
            confirmed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._confirming.setdefault(channel, deque()).append(confirmed)
            watches.add(watch)
            await self._send("SUBSCRIBE", channel)
        else:
            watches.add(watch)
            # An earlier watch's SUBSCRIBE may still be unconfirmed: wait for it too.
            pending = self._confirming.get(channel)
            confirmed = pending[-1] if pending else _done()
        try:
            async with asyncio.timeout(self._timeout):
                await asyncio.shield(confirmed)
        except TimeoutError:
            self.fail(StoreUnavailable(f"redis: no subscription within {self._timeout} s"))
        except StoreUnavailable:
            pass
        if self.failed is not None:
            self.leave(watch)
            raise self.failed
        return watch

    def leave(self, watch: Watch) -> None:
        watches = self.watches.get(watch.channel)
        if watches is None or watch not in watches:
            return
        watches.discard(watch)
        if not watches and self.failed is None:
            del self.watches[watch.channel]
            self._spawn(self._send_quietly("UNSUBSCRIBE", watch.channel))

    def fail(self, error: StoreUnavailable) -> None:
        if self.failed is not None:
            return
        self.failed = error
        for watches in self.watches.values():
            for watch in watches:
                watch.fail(error)
        for pending in self._confirming.values():
            for confirmed in pending:
                if not confirmed.done():
                    confirmed.set_exception(error)
                    confirmed.exception()  # retrieved: a failed subscription nobody awaits is no error
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        if self._connection is not None:
            self._spawn(self._disconnect())

    async def close(self) -> None:
        self.fail(StoreUnavailable("redis: the store is closed"))
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._connection is not None:
            await self._connection.disconnect()

    async def _send(self, *args: Any) -> None:
        if self.failed is not None:
            raise self.failed
        try:
            async with asyncio.timeout(self._timeout):
                await self._connection.send_command(*args, check_health=False)
        except Exception as exc:  # OSError, TimeoutError, or redis-py's connection errors
            error = StoreUnavailable(f"redis: subscriber connection: {exc!r}")
            self.fail(error)
            raise error from exc

    async def _send_quietly(self, *args: Any) -> None:
        with contextlib.suppress(StoreUnavailable):
            await self._send(*args)

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                reply = await self._connection.read_response()
                self._last_seen = loop.time()
                if not isinstance(reply, list) or not reply:
                    continue  # PONG
                kind = reply[0]
                if kind == b"message":
                    for watch in self.watches.get(reply[1], ()):
                        watch.notify(int(reply[2]))
                elif kind == b"subscribe":
                    pending = self._confirming.get(reply[1])
                    if pending:
                        confirmed = pending.popleft()
                        if not pending:
                            del self._confirming[reply[1]]
                        if not confirmed.done():
                            confirmed.set_result(None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.fail(StoreUnavailable(f"redis: subscriber connection lost: {exc!r}"))

    async def _beat(self) -> None:
        # A frozen Redis keeps the socket open and says nothing: a PING unanswered in time fails the
        # session, as a blocked read's deadline would.
        loop = asyncio.get_running_loop()
        with contextlib.suppress(StoreUnavailable):
            while True:
                await asyncio.sleep(self._heartbeat)
                sent = loop.time()
                await self._send("PING")
                await asyncio.sleep(self._timeout)
                if self._last_seen < sent:
                    self.fail(StoreUnavailable(f"redis: no answer within {self._timeout} s"))
                    return

    async def _disconnect(self) -> None:
        with contextlib.suppress(Exception):
            await self._connection.disconnect()

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _done() -> asyncio.Future[None]:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.set_result(None)
    return future


class Notifier:
    """Watches on game channels over one subscriber connection, replaced after a failure."""

    def __init__(self, client: Redis, *, timeout: float, heartbeat: float) -> None:
        self._client, self._timeout, self._heartbeat = client, timeout, heartbeat
        self._session: _Session | None = None
        self._starting: asyncio.Lock | None = None

    async def watch(self, channel: bytes) -> Watch:
        """Subscribe to `channel`; the watch is live once this returns. Raises: StoreUnavailable."""
        session = await self._current()
        return await session.join(channel)

    def subscribed(self) -> dict[bytes, int]:
        """Watches per subscribed channel (for tests and diagnostics)."""
        session = self._session
        if session is None or session.failed is not None:
            return {}
        return {channel: len(watches) for channel, watches in session.watches.items()}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _current(self) -> _Session:
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            session = self._session
            if session is None or session.failed is not None:
                session = _Session(self._client, self._timeout, self._heartbeat)
                try:
                    await session.start()
                except Exception as exc:  # OSError, TimeoutError, or redis-py's connection errors
                    await session.close()
                    raise StoreUnavailable(f"redis: subscriber connection: {exc!r}") from exc
                self._session = session
            return session
