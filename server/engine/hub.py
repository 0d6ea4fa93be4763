"""Live fan-out: one tail per active game on this node, one bounded outbox per connection.

Each batch of new envelopes is encoded once into a frame shared by every recipient. A connection's outbox
has one writer task; while the client keeps up the outbox stays empty, and a client that falls behind by
more than the queue limit is closed (1013) instead of holding anyone else up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any

import msgspec

from server.engine.envelope import Record
from server.engine.live import GapError, LiveGame
from server.engine.service import GameService
from server.metrics import Metrics
from server.protocol.frames import DeltaFrame, EventsFrame, HistoryFrame, ViewMode, encode
from server.store import StoreError

log = logging.getLogger(__name__)

# Frames travel encoded (UTF-8 JSON text): a shared frame is never decoded, only written.
Send = Callable[[bytes], Coroutine[Any, Any, None]]
Close = Callable[[int, str], Awaitable[None]]
# Writes a frame at once, bypassing ASGI, when the connection allows it; False when it does not.
Write = Callable[[bytes], bool]

TOO_SLOW = 1013


class Outbox:
    """What waits to be written to one connection, bounded: written at once while the client keeps up.

    A frame for a connection with nothing waiting is written immediately, in the caller's turn of the
    loop: uvicorn's send completes without suspending while the socket takes data, so `put` drives it
    by hand and no task is involved. Only when the socket's buffer is full (a slow reader) does the send
    suspend; a task then finishes it and drains what queues up behind it, and a client that falls
    `limit` frames behind is closed (1013) instead of holding anyone else up. Nothing is written before
    `start` (the welcome and any history go out first, directly). With `write` (the server's shared-frame
    writer, `server.compat.uvicorn`), a frame goes without ASGI whenever the connection is plainly open
    (written when the loop's turn ends, with the connection's other frames of the turn), and through
    `send` otherwise.
    """

    def __init__(
        self,
        send: Send,
        close: Close,
        limit: int,
        on_drop: Callable[[], None] | None = None,
        write: Write | None = None,
    ) -> None:
        self._send, self._close, self.limit = send, close, limit
        self._on_drop = on_drop
        self._write = write
        self._queue: deque[bytes] = deque()
        self._task: asyncio.Task[None] | None = None
        self.started = False
        self.closed = False
        self.dropped = False

    def put(self, data: bytes) -> None:
        """Write a frame (encoded text) now if nothing waits before it, else queue it (bounded)."""
        if self.closed:
            return
        if self.started and self._task is None and not self._queue:
            if self._write is None or not self._write(data):
                self._write_now(data)
            return
        if len(self._queue) >= self.limit:
            self.dropped = True
            if self._on_drop is not None:
                self._on_drop()
            self.shut(TOO_SLOW, "too slow to read")
            return
        self._queue.append(data)
        if self.started and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._drain())

    def start(self) -> None:
        """Begin writing (after the welcome and any history were sent directly)."""
        self.started = True
        if self._queue and self._task is None and not self.closed:
            self._task = asyncio.get_running_loop().create_task(self._drain())

    def shut(self, code: int, reason: str) -> None:
        """Stop writing and close the connection with `code`."""
        if self.closed:
            return
        self.closed = True
        self._queue.clear()
        if self._task is not None:
            self._task.cancel()
        asyncio.get_running_loop().create_task(self._close_quietly(code, reason))

    async def stop(self) -> None:
        """Stop the writer (the connection is going away)."""
        self.closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _write_now(self, data: bytes) -> None:
        sending = self._send(data)
        try:
            waiting_on = sending.send(None)
        except StopIteration:
            return  # written: the common case
        except Exception:  # the peer went away; the receive loop sees the disconnect
            self.closed = True
            return
        # The socket is full: finish this send, and whatever queues behind it, in a task.
        self._task = asyncio.get_running_loop().create_task(self._finish(sending, waiting_on))

    async def _finish(self, sending: Coroutine[Any, Any, None], waiting_on: Any) -> None:
        try:
            while True:
                if waiting_on is None:
                    await asyncio.sleep(0)
                else:
                    # What asyncio's Task does with a future a coroutine yields: clear its "blocking" mark
                    # (it was yielded, not yet awaited by anyone), wait for it, then resume the coroutine.
                    waiting_on._asyncio_future_blocking = False
                    await waiting_on
                try:
                    waiting_on = sending.send(None)
                except StopIteration:
                    break
        except asyncio.CancelledError:
            sending.close()
            raise
        except Exception:
            sending.close()
            self.closed = True
            return
        await self._drain()

    async def _drain(self) -> None:
        queue = self._queue
        try:
            while queue:
                await self._send(queue.popleft())
        except asyncio.CancelledError:
            raise
        except Exception:  # the peer went away mid-write; the receive loop sees the disconnect
            self.closed = True
        finally:
            if self._task is asyncio.current_task():
                self._task = None

    async def _close_quietly(self, code: int, reason: str) -> None:
        with contextlib.suppress(Exception):
            await self._close(code, reason)


class Subscriber(msgspec.Struct):
    """A connection following a game."""

    outbox: Outbox
    view: ViewMode = "delta"
    role: str = "spectator"


class Hub:
    """Tails each game that has local subscribers and fans its new envelopes out to them."""

    def __init__(
        self, service: GameService, metrics: Metrics | None = None, retry_delay: float = 0.5
    ) -> None:
        self.service = service
        self.metrics = metrics or Metrics()
        self.retry_delay = retry_delay
        self.subscribers: dict[str, list[Subscriber]] = {}
        self.tails: dict[str, asyncio.Task[None]] = {}
        service.listeners.append(self.publish)
        service.pinned = self.subscribers.__contains__

    def count(self, game_id: str) -> int:
        """Connections following a game on this node."""
        return len(self.subscribers.get(game_id, ()))

    def subscribe(self, game: LiveGame, subscriber: Subscriber) -> None:
        """Follow `game` from its current version on; starts its tail if none runs."""
        self.subscribers.setdefault(game.game_id, []).append(subscriber)
        if game.game_id not in self.tails:
            task = asyncio.get_running_loop().create_task(self._tail(game))
            self.tails[game.game_id] = task

    def unsubscribe(self, game_id: str, subscriber: Subscriber) -> None:
        """Stop following; the game's tail stops with its last subscriber."""
        followers = self.subscribers.get(game_id)
        if followers is None or subscriber not in followers:
            return
        followers.remove(subscriber)
        if not followers:
            del self.subscribers[game_id]
            task = self.tails.pop(game_id, None)
            if task is not None:
                task.cancel()

    def publish(self, game: LiveGame, records: Sequence[Record]) -> None:
        """Send one batch of new envelopes to every local follower, encoded once for all.

        The frames are encoded now (the view is the one after this batch) and handed to the outboxes at
        once. A round answers its commands before it folds them in (`Committer.submit`'s `answer`), so a
        sender's `accepted` is in its outbox before its game's frame, and both leave in this turn's
        writes (`server.compat.uvicorn`).
        """
        followers = self.subscribers.get(game.game_id)
        if not followers:
            return
        envelopes = [msgspec.Raw(r.data) for r in records]
        frames: dict[ViewMode, bytes] = {}
        for mode in {f.view for f in followers}:
            if mode == "delta":
                frames[mode] = encode(DeltaFrame(envelopes, game.encoded_delta()))
            elif mode:  # "full" (a hello's `true` reads as "full")
                frames[mode] = encode(EventsFrame(envelopes, game.encoded_view()))
            else:
                frames[mode] = encode(HistoryFrame(envelopes))
        for follower in followers:
            follower.outbox.put(frames[follower.view])

    async def close(self) -> None:
        """Stop every tail."""
        tails = list(self.tails.values())
        self.tails.clear()
        for task in tails:
            task.cancel()
        for task in tails:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    @property
    def running(self) -> bool:
        """Whether every tail is alive (for readiness)."""
        return all(not task.done() for task in self.tails.values())

    def _observe_lag(self, at: str) -> None:
        with contextlib.suppress(ValueError):
            written = datetime.fromisoformat(at.replace("Z", "+00:00"))
            self.metrics.tail_lag.set(max(0.0, (datetime.now(UTC) - written).total_seconds()))

    async def _known(self, game: LiveGame) -> int:
        # This node's own appends reach the game without the tail: once they have landed, a notice of
        # them needs no read.
        await self.service.committer.settled(game.game_id)
        return game.version

    async def _tail(self, game: LiveGame) -> None:
        store = self.service.store
        while True:
            stream = store.tail(
                game.game_id, game.version, known=partial(self._known, game), held=lambda: game.version
            )
            try:
                async for records in stream:
                    try:
                        if game.ingest(records):
                            self._observe_lag(game.last_at)
                    except GapError:
                        await self.service.live(game.game_id, refresh=True)
                        break
            except asyncio.CancelledError:
                raise
            except StoreError as exc:
                self.metrics.redis_errors.inc()
                log.warning("tail interrupted, retrying", extra={"game_id": game.game_id, "error": str(exc)})
                await asyncio.sleep(self.retry_delay)
            except Exception:
                log.exception("tail failed, retrying", extra={"game_id": game.game_id})
                await asyncio.sleep(self.retry_delay)
            finally:
                closing = getattr(stream, "aclose", None)
                if closing is not None:
                    with contextlib.suppress(Exception):
                        await closing()
