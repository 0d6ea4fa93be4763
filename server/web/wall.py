"""The websocket route `/wall/ws`: the wall feed (protocol.md), from the node's wall to one socket.

The socket gets the `wall` frame (the first page), then each `wall_changes` frame the wall sends it,
through an outbox like a game's followers (a reader too slow to keep up is closed with 1013 and starts again
from a new `wall`). The feed takes one frame, `wall_more` (another page, answered by `wall_page`), at the
rate a game's socket takes commands; anything else, or more, closes the socket with 1008.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

import msgspec
from starlette.websockets import WebSocket, WebSocketDisconnect

from server.compat.uvicorn import shared_closer, shared_writer
from server.engine.outbox import Outbox
from server.protocol.codes import TOO_SLOW
from server.protocol.limits import TokenBucket
from server.protocol.session import close_reason
from server.protocol.wall import WallMore
from server.store import StoreError
from server.web.context import Context

log = logging.getLogger(__name__)

REFUSED = 1008

_decode_more = msgspec.json.Decoder(WallMore).decode


async def wall_socket(websocket: WebSocket) -> None:
    """Serve one subscriber of the wall feed until it goes."""
    ctx: Context = websocket.app.state.ctx
    await websocket.accept()
    outbox = Outbox(
        lambda data: websocket.send_text(data.decode()),
        lambda code, reason: _close(websocket, code, reason),
        ctx.settings.queue_limit,
        ctx.metrics.drops.inc,
        write=shared_writer(websocket.scope),
        close_now=shared_closer(websocket.scope, ctx.settings.slow_close_grace),
    )
    try:
        first = await ctx.wall.join(outbox)
    except StoreError:
        await _close(websocket, TOO_SLOW, "the event store cannot be reached; retry")
        return
    ctx.metrics.connections.labels("wall").inc()
    try:
        await websocket.send_text(first.decode())
        outbox.start()
        rate = TokenBucket(ctx.settings.rate_per_second, ctx.settings.rate_burst)
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            refused = _refusal(message, ctx.settings.max_frame_bytes, rate)
            if refused is not None:
                await _close(websocket, REFUSED, refused)
                break
            ctx.wall.more(outbox)
    except WebSocketDisconnect:
        pass
    except RuntimeError as exc:  # starlette refuses a send once the peer has gone
        log.debug("wall session ended: %s", exc)
    finally:
        ctx.metrics.connections.labels("wall").dec()
        ctx.wall.leave(outbox)
        await outbox.stop()


def _refusal(message: Mapping[str, Any], max_bytes: int, rate: TokenBucket) -> str | None:
    """Why a frame sent to the feed is refused (it closes the socket), or None for a `wall_more` in time."""
    data = message.get("text")
    if data is None:
        data = message.get("bytes")
    if not isinstance(data, str | bytes) or len(data) > max_bytes:
        return f"the wall feed takes only wall_more frames (JSON text, at most {max_bytes} bytes)"
    try:
        _decode_more(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return f'the wall feed takes only {{"type": "wall_more"}}: {exc}'
    if not rate.take():
        return f"wall_more at most {rate.rate:g} a second"
    return None


async def _close(websocket: WebSocket, code: int, reason: str) -> None:
    with contextlib.suppress(Exception):
        await websocket.close(code, close_reason(reason))
