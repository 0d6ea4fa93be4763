"""The websocket route `/wall/ws`: the wall feed (protocol.md), from the node's wall to one socket.

The socket gets the `wall` frame, then each `wall_changes` frame the wall sends, through an outbox like a
game's followers (a reader too slow to keep up is closed with 1013 and starts again from a new `wall`). The
feed takes no frames: anything a client sends closes the socket with 1008.
"""

from __future__ import annotations

import contextlib
import logging

from starlette.websockets import WebSocket, WebSocketDisconnect

from server.compat.uvicorn import shared_closer, shared_writer
from server.engine.outbox import Outbox
from server.protocol.session import TOO_SLOW, close_reason
from server.store import StoreError
from server.web.context import Context

log = logging.getLogger(__name__)

REFUSED = 1008


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
        message = await websocket.receive()
        if message["type"] != "websocket.disconnect":
            await _close(websocket, REFUSED, "the wall feed takes no frames")
    except WebSocketDisconnect:
        pass
    except RuntimeError as exc:  # starlette refuses a send once the peer has gone
        log.debug("wall session ended: %s", exc)
    finally:
        ctx.metrics.connections.labels("wall").dec()
        ctx.wall.leave(outbox)
        await outbox.stop()


async def _close(websocket: WebSocket, code: int, reason: str) -> None:
    with contextlib.suppress(Exception):
        await websocket.close(code, close_reason(reason))
