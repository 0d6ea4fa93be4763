"""The websocket endpoint `/games/{game_id}/ws`: hello, welcome, resume, commands and their answers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import msgspec
from starlette.types import Receive, Scope
from starlette.types import Send as AsgiSend
from starlette.websockets import WebSocket, WebSocketDisconnect

from domain import Rejected
from server import auth
from server.compat.uvicorn import SHARED_TEXT
from server.engine.committer import Outcome
from server.engine.hub import TOO_SLOW, Outbox, Subscriber
from server.engine.live import LiveGame
from server.protocol.frames import (
    Accepted,
    CommandFrame,
    Hello,
    HistoryFrame,
    Welcome,
    decode_frame,
    encode,
    readable_id,
    rejected,
)
from server.protocol.limits import TokenBucket
from server.store import StoreError
from server.web.context import Context

log = logging.getLogger(__name__)

POLICY = 1008
HISTORY_CHUNK = 200


class GameSocket:
    """The endpoint as a plain ASGI app, so that live frames can skip Starlette's WebSocket.

    Starlette's WebSocket checks its state machine on every message it sends; a game's every frame goes
    to each of its clients, so the outbox writes frames with the server's shared-frame writer when it
    offers one (`server.compat.uvicorn`), else hands them to the `send` the app is called with (the ASGI
    server's, behind Starlette's exception wrapper), which refuses them itself once the connection is
    gone. Everything else (hello, welcome, history, answers to refused connections, close) goes through
    the WebSocket.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: AsgiSend) -> None:
        await game_socket(WebSocket(scope, receive=receive, send=send), send)


def _text_sender(send: AsgiSend) -> Callable[[bytes], Coroutine[Any, Any, None]]:
    """The outbox drives the send by hand, so it needs a coroutine, which ASGI servers' sends are.

    Frames come encoded (UTF-8 JSON); ASGI takes text as `str`, so this path decodes them.
    """

    def send_text(data: bytes) -> Coroutine[Any, Any, None]:
        sending = send({"type": "websocket.send", "text": data.decode()})
        return sending if isinstance(sending, Coroutine) else _awaited(sending)

    return send_text


async def _awaited(awaitable: Awaitable[None]) -> None:
    await awaitable


def shared_writer(scope: Scope) -> Callable[[bytes], bool] | None:
    """The server's direct writer of shared text frames, when it offers one (server.compat.uvicorn)."""
    offered = scope.get("extensions", {}).get(SHARED_TEXT)
    write = offered.get("write") if isinstance(offered, dict) else None
    return write if callable(write) else None


async def game_socket(websocket: WebSocket, send: AsgiSend) -> None:
    """Serve one client of one game from hello to disconnect."""
    ctx: Context = websocket.app.state.ctx
    game_id: str = websocket.path_params["game_id"]
    await websocket.accept()
    hello = await _hello(websocket, ctx.settings.hello_timeout, ctx.settings.max_frame_bytes)
    if hello is None:
        return
    try:
        game = await ctx.service.live(game_id, refresh=True)
        credentials = await ctx.service.store.credentials(game_id) if game is not None else {}
    except StoreError:
        await _refuse(websocket, "unavailable", "the event store cannot be reached; retry", TOO_SLOW)
        return
    if game is None:
        await _refuse(websocket, "unknown_game", f"no game {game_id!r}", POLICY)
        return
    seat = _seat_of(hello, game, credentials)
    if seat is None:
        await _refuse(websocket, "forbidden", "that token is not a seat or watch token of this game", POLICY)
        return
    if ctx.hub.count(game_id) >= ctx.settings.max_connections_per_game:
        await _refuse(websocket, "unavailable", "this game has its maximum of connections", TOO_SLOW)
        return
    role = "player" if seat >= 0 else "spectator"
    outbox = Outbox(
        _text_sender(send),
        _closer(websocket),
        ctx.settings.queue_limit,
        ctx.metrics.drops.inc,
        write=shared_writer(websocket.scope),
    )
    follower = Subscriber(outbox=outbox, view=hello.view, role=role)
    # Subscribing and reading the version happen in one step of the loop, so every live frame queued
    # from here on is past the welcome's version: no gap, no duplicate.
    ctx.hub.subscribe(game, follower)
    ctx.metrics.connections.labels(role).inc()
    try:
        await _welcome(websocket, ctx, game, hello, role, seat)
        outbox.start()
        await _serve(websocket, ctx, game, outbox, seat)
    except (WebSocketDisconnect, StoreError):
        pass
    except RuntimeError as exc:  # starlette refuses a send once the peer has gone: the session is over
        log.debug("session ended: %s", exc, extra={"game_id": game_id})
    finally:
        ctx.metrics.connections.labels(role).dec()
        ctx.hub.unsubscribe(game_id, follower)
        await outbox.stop()


async def _hello(websocket: WebSocket, timeout: float, max_bytes: int) -> Hello | None:
    try:
        message = await asyncio.wait_for(websocket.receive(), timeout)
    except TimeoutError:
        await _close(websocket, POLICY, "no hello in time")
        return None
    if message["type"] == "websocket.disconnect":
        return None
    text = message.get("text")
    frame: object = None
    if text is not None and _size(text) <= max_bytes:
        # RecursionError: a frame nested deeper than the decoder reads (a RuntimeError, not a DecodeError).
        with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            frame = decode_frame(text)
    if not isinstance(frame, Hello):
        await _close(websocket, POLICY, "the first frame must be hello")
        return None
    return frame


def _seat_of(hello: Hello, game: LiveGame, credentials: dict[str, str]) -> int | None:
    """The seat of the hello's token (>= 0), -1 for a spectator, None when refused."""
    if hello.token is None:
        return -1 if game.board.game.spectators == "public" else None
    field = auth.identify(hello.token, credentials)
    if field is None:
        return None
    if field == auth.WATCH:
        return -1
    return int(field.split(":", 1)[1])


async def _welcome(
    websocket: WebSocket, ctx: Context, game: LiveGame, hello: Hello, role: str, seat: int
) -> None:
    version = game.version
    welcome = Welcome(
        role="player" if role == "player" else "spectator",
        seat=seat if seat >= 0 else None,
        version=version,
        view=msgspec.Raw(game.view_json),
    )
    await websocket.send_text(encode(welcome).decode())
    if hello.since is None:
        return
    since = hello.since
    if since > version:
        message = f"since {since} is past the game's version {version}; resuming from {version}"
        await websocket.send_text(rejected(None, "bad_request", message, version).decode())
        return
    records = await ctx.service.history(game.game_id, since, version)
    for start in range(0, len(records), HISTORY_CHUNK):
        chunk = [msgspec.Raw(r.data) for r in records[start : start + HISTORY_CHUNK]]
        await websocket.send_text(encode(HistoryFrame(chunk)).decode())


async def _serve(websocket: WebSocket, ctx: Context, game: LiveGame, outbox: Outbox, seat: int) -> None:
    settings = ctx.settings
    bucket = TokenBucket(settings.rate_per_second, settings.rate_burst)
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        text = message.get("text")
        if text is None:
            ctx.metrics.rejected("bad_request")
            outbox.put(rejected(None, "bad_request", "frames are JSON text, not binary", game.version))
            continue
        if _size(text) > settings.max_frame_bytes:
            limit = settings.max_frame_bytes
            ctx.metrics.rejected("too_large")
            outbox.put(rejected(None, "too_large", f"a frame may hold {limit} bytes", game.version))
            continue
        if not bucket.take():
            ctx.metrics.rejected("rate_limited")
            outbox.put(
                rejected(readable_id(text), "rate_limited", "too many commands; slow down", game.version)
            )
            continue
        try:
            frame = decode_frame(text)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
            # A RecursionError (a RuntimeError) would otherwise end the session silently, without a close.
            ctx.metrics.rejected("bad_request")
            outbox.put(rejected(readable_id(text), "bad_request", str(exc), game.version))
            continue
        if isinstance(frame, Hello):
            ctx.metrics.rejected("bad_request")
            outbox.put(rejected(None, "bad_request", "hello was already said", game.version))
            continue
        if seat < 0:
            ctx.metrics.rejected("forbidden")
            outbox.put(rejected(frame.id, "forbidden", "spectators cannot send commands", game.version))
            continue
        await _command(ctx, game, frame, seat, outbox)


class _Accepting:
    """Puts a command's `accepted` answer in its sender's outbox as soon as the round has the outcome:
    in the round's turn of the loop, before the round's fan-out, not once this connection's task wakes."""

    __slots__ = ("outbox", "id", "at")

    def __init__(self, outbox: Outbox, id: str) -> None:
        self.outbox, self.id = outbox, id
        self.at = 0.0

    def __call__(self, outcome: Outcome) -> None:
        self.at = time.perf_counter()
        events = [msgspec.Raw(d) for d in outcome.envelopes]
        self.outbox.put(encode(Accepted(id=self.id, version=outcome.version, events=events)))


async def _command(ctx: Context, game: LiveGame, frame: CommandFrame, seat: int, outbox: Outbox) -> None:
    """Run a command; its answer goes in the outbox, then come the log line and metrics."""
    command = frame.command(seat)
    extra = {"game_id": game.game_id, "seat": seat, "command_id": frame.id}
    # perf_counter, not the loop's clock: uvloop's is cached per turn of the loop, in milliseconds.
    started = time.perf_counter()
    accepting = _Accepting(outbox, frame.id)
    pending = ctx.service.handle(game.game_id, command, accepting)
    # A timer on the future, not asyncio.timeout or wait_for: no task, context manager or task lookup
    # per command.
    timer = asyncio.get_running_loop().call_later(ctx.settings.command_timeout, _expire, pending)
    try:
        outcome = await pending
    except Rejected as exc:
        outbox.put(rejected(frame.id, exc.code, exc.message, game.version))
        ctx.metrics.rejected(exc.code)
        log.info("command rejected", extra={**extra, "code": exc.code, "version": game.version})
        return
    except (StoreError, TimeoutError) as exc:
        message = "the event store did not answer; retry with the same id"
        outbox.put(rejected(frame.id, "unavailable", message, game.version))
        ctx.metrics.rejected("unavailable")
        ctx.metrics.redis_errors.inc()
        log.warning(
            "command unavailable",
            extra={**extra, "code": "unavailable", "version": game.version, "error": str(exc) or "timeout"},
        )
        return
    finally:
        timer.cancel()
    elapsed = accepting.at - started  # to the answer (already in the outbox), not to this task's waking
    ctx.metrics.accepted(elapsed)
    log.info(
        "command accepted",
        extra={**extra, "version": outcome.version, "duration_ms": round(elapsed * 1e3, 3)},
    )


def _expire(pending: asyncio.Future[Outcome]) -> None:
    if not pending.done():
        pending.set_exception(TimeoutError())


def _size(text: str) -> int:
    """The frame's size in bytes as it came off the wire (after any decompression)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "replace"))


async def _refuse(websocket: WebSocket, code: str, message: str, close_code: int) -> None:
    with contextlib.suppress(Exception):
        await websocket.send_text(rejected(None, code, message, 0).decode())
    await _close(websocket, close_code, message)


async def _close(websocket: WebSocket, code: int, reason: str) -> None:
    with contextlib.suppress(Exception):
        await websocket.close(code, reason[:120])


def _closer(websocket: WebSocket):  # type: ignore[no-untyped-def]
    async def close(code: int, reason: str) -> None:
        await _close(websocket, code, reason)

    return close
