"""The store's own connections on a standalone Redis: pipelined, replies in order.

redis-py's asyncio client spends more Python on a call than the rest of the round trip costs: a pool
checkout and release, a retry wrapper, a health check, a stream reader and its waiter, response
callbacks. The store's frequent calls (every command's append, and the scripts, small reads and lookups
of creating a game and of every hello) go over a line instead: one connection with a protocol of its
own. A call writes its command (packed by hiredis) and waits on a future; replies, parsed by hiredis as
they arrive, resolve the waiting futures in the order the calls were written, so concurrent callers
pipeline on the one connection and a reply can never reach the wrong caller. What may be long or
blocking (long reads, tails, subscriptions) stays on redis-py's pooled connections, and TLS
(`rediss://`) is left to redis-py entirely.

Failures are redis-py's exceptions (server.store.redis translates them into the port's): a lost connection
fails every call waiting on it with ConnectionError, and the next call connects again. A call that
outlives its timeout closes the connection, so a Redis that stopped answering is connected to afresh
rather than waited on for ever. A caller cancelled meanwhile leaves the connection as it is: its reply is
taken off the line when it comes, and the calls of other games behind it are not failed for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import deque
from collections.abc import Sequence
from typing import Any

import hiredis
from redis import exceptions as rx
from redis.asyncio import ConnectionPool
from redis.asyncio.connection import SSLConnection

Arg = str | bytes | int
# The pause before a call is sent again on a new connection: the first of the store's redis-py retries'
# backoff (server.store.redis._adapter).
RETRY_PAUSE = 0.02


class LineProtocol(asyncio.Protocol):
    """Writes commands, and hands each parsed reply to the oldest waiting call."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiting: deque[asyncio.Future[Any]] = deque()
        self.lost = False
        self._reader = hiredis.Reader()
        # Commands of one turn of the loop, written together when it ends: the appends of games whose
        # commands arrived together reach Redis in one system call, and are read by it in one.
        self._unsent: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        reader, waiting = self._reader, self.waiting
        try:
            reader.feed(data)
            while (reply := reader.gets()) is not False:
                if not waiting:
                    raise hiredis.ProtocolError("a reply nobody asked for")
                future = waiting.popleft()
                if not future.done():  # a caller that gave up still takes its reply off the line
                    future.set_result(reply)
        except hiredis.ProtocolError:
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        waiting, self.waiting = self.waiting, deque()
        for future in waiting:
            if not future.done():
                future.set_exception(rx.ConnectionError(f"redis: connection lost ({exc or 'closed'})"))

    def call(self, packed: bytes) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.lost or self.transport is None or self.transport.is_closing():
            future.set_exception(rx.ConnectionError("redis: connection lost"))
            return future
        self.waiting.append(future)
        if not self._unsent:
            asyncio.get_running_loop().call_soon(self._send)
        self._unsent.append(packed)
        return future

    def _send(self) -> None:
        unsent, self._unsent = self._unsent, []
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(unsent[0] if len(unsent) == 1 else b"".join(unsent))

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class ScriptLine:
    """Runs Lua scripts by hash (loading a script the server lacks) and single commands on one pipelined
    connection."""

    def __init__(self, options: dict[str, Any], connect_timeout: float) -> None:
        self._options, self._connect_timeout = options, connect_timeout
        self._protocol: LineProtocol | None = None
        self._connecting: asyncio.Task[LineProtocol] | None = None

    @classmethod
    def for_url(cls, url: str, connect_timeout: float) -> ScriptLine | None:
        """A line to the Redis at redis:// or unix:// `url`; None for rediss:// (left to redis-py)."""
        # The pool parses the URL as redis-py's clients do (it connects nothing until asked).
        pool = ConnectionPool.from_url(url)
        if issubclass(pool.connection_class, SSLConnection):
            return None
        return cls(dict(pool.connection_kwargs), connect_timeout)

    async def script(
        self, sha: str, source: str, keys: Sequence[Arg], args: Sequence[Arg], timeout: float
    ) -> Any:
        """EVALSHA `sha` (EVAL `source` when Redis has not cached it), and its reply, within `timeout` s.

        A connection found lost is made again and the call sent once more, as redis-py's single retry
        does: the store's scripts are idempotent per command key, so a repeat returns the first outcome.
        The bound is a timer on the call's future, not `asyncio.timeout` (a context manager and a task
        lookup per call): on expiry the call fails and the connection is dropped.
        Raises: redis-py's exceptions (ResponseError and its kinds for error replies, ConnectionError,
        TimeoutError).
        """
        bound = _Bound(asyncio.get_running_loop(), timeout)
        reply = await self._once_more(("EVALSHA", sha, len(keys), *keys, *args), bound)
        if isinstance(reply, hiredis.ReplyError) and str(reply).startswith("NOSCRIPT"):
            reply = await self._call(("EVAL", source, len(keys), *keys, *args), bound)
        return _checked(reply)

    async def script_then(
        self,
        sha: str,
        source: str,
        keys: Sequence[Arg],
        args: Sequence[Arg],
        then: Sequence[Sequence[Arg]],
        timeout: float,
    ) -> tuple[Any, list[Any]]:
        """As `script`, with the commands `then` written right behind it on the same connection: the
        script's reply and theirs (error replies as exceptions, not raised).

        Same connection is the point: WAIT and WAITAOF wait for the writes of the connection they run on.
        A connection lost is made again and the whole sent once more (the script answers a repeat with
        its first outcome).
        """
        bound = _Bound(asyncio.get_running_loop(), timeout)
        evalsha: tuple[Arg, ...] = ("EVALSHA", sha, len(keys), *keys, *args)
        try:
            replies = await self._calls((evalsha, *then), bound)
        except rx.ConnectionError:
            await asyncio.sleep(RETRY_PAUSE)
            replies = await self._calls((evalsha, *then), bound)
        if isinstance(replies[0], hiredis.ReplyError) and str(replies[0]).startswith("NOSCRIPT"):
            replies = await self._calls((("EVAL", source, len(keys), *keys, *args), *then), bound)
        rest = [error_of(str(r)) if isinstance(r, hiredis.ReplyError) else r for r in replies[1:]]
        return _checked(replies[0]), rest

    async def _calls(self, commands: Sequence[Sequence[Arg]], bound: _Bound) -> list[Any]:
        # Written in one turn of the loop on one protocol: the same connection, in this order.
        protocol = self._protocol
        if protocol is None or protocol.lost:
            protocol = await self._connected(bound)
        futures = [protocol.call(_pack(command)) for command in commands]
        timer = bound.loop.call_at(bound.deadline, _expire, futures[-1], protocol, bound.timeout)
        try:
            return [await future for future in futures]
        finally:
            timer.cancel()

    async def command(self, command: Sequence[Arg], timeout: float) -> Any:
        """The reply of one Redis command, within `timeout` s, as Redis sent it (hiredis's types: a hash
        is a flat list of fields and values, a stream entry a list of its id and fields).

        Only for a command that may run twice (a read, or a write whose repeat changes nothing): a
        connection found lost is made again and the command sent once more.
        Raises: as `script`.
        """
        bound = _Bound(asyncio.get_running_loop(), timeout)
        return _checked(await self._once_more(command, bound))

    async def close(self) -> None:
        """Close the connection (calls waiting on it fail)."""
        if self._connecting is not None:
            self._connecting.cancel()
        protocol, self._protocol = self._protocol, None
        if protocol is not None and protocol.transport is not None:
            protocol.transport.close()

    async def _once_more(self, command: Sequence[Arg], bound: _Bound) -> Any:
        # As the store's redis-py clients retry: a connection lost is made again, after a short pause (a
        # Redis that dropped it may be restarting), and the call sent once more.
        try:
            return await self._call(command, bound)
        except rx.ConnectionError:
            await asyncio.sleep(RETRY_PAUSE)
            return await self._call(command, bound)

    async def _call(self, command: Sequence[Arg], bound: _Bound) -> Any:
        protocol = self._protocol
        if protocol is None or protocol.lost:
            protocol = await self._connected(bound)
        future = protocol.call(_pack(command))
        timer = bound.loop.call_at(bound.deadline, _expire, future, protocol, bound.timeout)
        try:
            # A cancelled caller's future is cancelled with it; its reply is skipped when it comes.
            return await future
        finally:
            timer.cancel()

    async def _connected(self, bound: _Bound) -> LineProtocol:
        # Concurrent first calls share one connection attempt.
        if self._connecting is None or self._connecting.done():
            self._connecting = bound.loop.create_task(self._connect())
            # Its failure is every waiting caller's; a caller that gave up must not leave it unretrieved.
            self._connecting.add_done_callback(retrieved)
        try:
            protocol = await asyncio.wait_for(
                asyncio.shield(self._connecting), max(0.0, bound.deadline - bound.loop.time())
            )
        except TimeoutError:
            raise rx.TimeoutError(f"no answer within {bound.timeout} s") from None
        self._protocol = protocol
        return protocol

    async def _connect(self) -> LineProtocol:
        loop, options = asyncio.get_running_loop(), self._options
        protocol = LineProtocol()
        try:
            async with asyncio.timeout(self._connect_timeout):
                if "path" in options:
                    await loop.create_unix_connection(lambda: protocol, options["path"])
                else:
                    host, port = options.get("host", "localhost"), options.get("port", 6379)
                    transport, _ = await loop.create_connection(lambda: protocol, host, port)
                    sock = transport.get_extra_info("socket")
                    if sock is not None:  # small writes go out at once, as redis-py's do
                        with contextlib.suppress(OSError):
                            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                password, username = options.get("password"), options.get("username")
                if password is not None:
                    auth = ("AUTH", username, password) if username else ("AUTH", password)
                    _checked(await protocol.call(_pack(auth)))
                if options.get("db"):
                    _checked(await protocol.call(_pack(("SELECT", int(options["db"])))))
        except (OSError, TimeoutError) as exc:
            protocol.abort()
            raise rx.ConnectionError(f"redis: cannot connect ({exc or 'timed out'})") from exc
        except BaseException:
            protocol.abort()
            raise
        # Installed here, not by the callers: made after every caller gave up (their deadline came first),
        # it is still the line's connection, for the next call to use (and `close` to close).
        self._protocol = protocol
        return protocol


class _Bound:
    """One call's deadline on the loop's clock."""

    __slots__ = ("loop", "timeout", "deadline")

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float) -> None:
        self.loop, self.timeout, self.deadline = loop, timeout, loop.time() + timeout


def _expire(future: asyncio.Future[Any], protocol: LineProtocol, timeout: float) -> None:
    if not future.done():
        future.set_exception(rx.TimeoutError(f"no answer within {timeout} s"))
        # Redis stopped answering: the calls behind this one would wait on it too; start afresh.
        protocol.abort()


def _pack(command: Sequence[Arg | None]) -> bytes:
    packed: bytes = hiredis.pack_command(tuple(command))  # type: ignore[arg-type]
    return packed


def retrieved(task: asyncio.Future[Any]) -> None:
    """A done callback: the task's error (if any) is retrieved, so that one nobody awaits any more (its
    callers gave up or were cancelled) is no "exception never retrieved"."""
    if not task.cancelled():
        task.exception()


# An error reply's first word, for the replies that mean something other than "this command was wrong":
# the class redis-py raises for it (the store's error translation tells "not now" from "wrong" by these),
# with the word left out of the message, as redis-py does (and ERR's too). Any other reply is a
# ResponseError carrying the whole text (the scripts' CONFLICT, NOGAME and EXISTS among them).
_ERROR_CLASSES: dict[str, type[rx.RedisError]] = {
    "LOADING": rx.BusyLoadingError,
    "READONLY": rx.ReadOnlyError,
    "OOM": rx.OutOfMemoryError,
    "NOSCRIPT": rx.NoScriptError,
    "NOAUTH": rx.AuthenticationError,
    "WRONGPASS": rx.AuthenticationError,
    "NOPERM": rx.NoPermissionError,
    "EXECABORT": rx.ExecAbortError,
    "TRYAGAIN": rx.TryAgainError,
    "MASTERDOWN": rx.MasterDownError,
    "CLUSTERDOWN": rx.ClusterDownError,
}
# The ERR replies that mean the connection is refused rather than the command wrong.
_ERR_CLASSES: dict[str, type[rx.RedisError]] = {
    "max number of clients reached": rx.ConnectionError,
    "invalid password": rx.AuthenticationError,
}


def error_of(text: str) -> rx.RedisError:
    """The redis-py exception for the error reply `text` (what redis-py's own client raises for it)."""
    code, _, rest = text.partition(" ")
    if code == "ERR":
        return _ERR_CLASSES.get(rest, rx.ResponseError)(rest)
    kind = _ERROR_CLASSES.get(code)
    if kind is not None:
        return kind(rest)
    return rx.ResponseError(text)


def _checked(reply: Any) -> Any:
    """The reply, or the exception redis-py raises for it when it is an error reply."""
    if isinstance(reply, hiredis.ReplyError):
        raise error_of(str(reply))
    return reply
