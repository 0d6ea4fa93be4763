"""What waits to be written to one connection: a bounded queue and the one task that writes it.

Frames come encoded (UTF-8 JSON text), shared by every recipient. Whoever puts a frame never waits: the
connection's writer task, asleep while the queue is empty, wakes and sends everything queued, in order.
While the writer sleeps, a frame goes straight to the socket instead when the server offers a direct
write (`server.compat.uvicorn`) and the connection takes it. A client that falls `limit` frames behind is
closed (1013) instead of holding anyone else up: directly when the server offers a close that does not
wait for the client to read (`server.compat.uvicorn`), else through ASGI.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable

from server.protocol.codes import TOO_SLOW

# Sends one frame through ASGI.
Send = Callable[[bytes], Awaitable[None]]
# Closes the connection with a code and reason.
Close = Callable[[int, str], Awaitable[None]]
# Writes a frame at once, bypassing ASGI, when the connection allows it; False when it does not.
Write = Callable[[bytes], bool]
# Closes the connection at once with a code and reason (at most 123 UTF-8 bytes, as `shut` gives),
# without waiting for the peer to read; False when it cannot.
CloseNow = Callable[[int, str], bool]


class Outbox:
    """One connection's bounded queue of frames and its writer."""

    __slots__ = (
        "_send",
        "_close",
        "limit",
        "_on_drop",
        "_write",
        "_close_now",
        "_queue",
        "_task",
        "_wake",
        "closed",
    )

    def __init__(
        self,
        send: Send,
        close: Close,
        limit: int,
        on_drop: Callable[[], None] | None = None,
        write: Write | None = None,
        close_now: CloseNow | None = None,
    ) -> None:
        self._send, self._close, self.limit = send, close, limit
        self._on_drop = on_drop
        self._write = write
        self._close_now = close_now
        self._queue: deque[bytes] = deque()
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Future[None] | None = None  # set while the writer sleeps on an empty queue
        self.closed = False

    def put(self, data: bytes) -> None:
        """Write a frame now if nothing waits before it and the connection takes it, else queue it; past
        the limit, close the connection instead."""
        if self.closed:
            return
        if self._wake is not None and self._write is not None and self._write(data):
            return  # the writer sleeps on an empty queue: nothing goes before this frame
        if len(self._queue) >= self.limit:
            if self._on_drop is not None:
                self._on_drop()
            self.shut(TOO_SLOW, "too slow to read")
            return
        self._queue.append(data)
        wake = self._wake
        if wake is not None:
            self._wake = None
            wake.set_result(None)

    def start(self) -> None:
        """Begin writing (the welcome and any history were sent before, directly)."""
        if self._task is None and not self.closed:
            self._task = asyncio.get_running_loop().create_task(self._drain())

    def shut(self, code: int, reason: str) -> None:
        """Stop writing and close the connection with `code`."""
        if self.closed:
            return
        self.closed = True
        self._queue.clear()
        if self._task is not None:
            self._task.cancel()
        if self._close_now is not None and self._close_now(code, reason):
            return
        asyncio.get_running_loop().create_task(self._close_quietly(code, reason))

    async def stop(self) -> None:
        """Stop the writer (the connection is going away)."""
        self.closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _drain(self) -> None:
        queue, loop = self._queue, asyncio.get_running_loop()
        try:
            while not self.closed:
                while queue:
                    await self._send(queue.popleft())
                self._wake = loop.create_future()
                await self._wake
        except asyncio.CancelledError:
            raise
        except Exception:  # the peer went away mid-write; the receive loop sees the disconnect
            self.closed = True

    async def _close_quietly(self, code: int, reason: str) -> None:
        with contextlib.suppress(Exception):
            await self._close(code, reason)
