"""The websocket route `/games/{game_id}/ws`: moves bytes between a socket, its session and its game.

What to answer, when, and in what order is `server.protocol.session`'s; what a command does is its
game's (`server.engine.owner`). This module only reads messages, carries out the session's actions, and
counts and logs what happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from starlette.websockets import WebSocket, WebSocketDisconnect

from domain import PlayAgain, Rejected
from server.compat.uvicorn import shared_closer, shared_writer
from server.engine import tables
from server.engine.outbox import Outbox
from server.engine.owner import Command, Follower, LiveGame, Outcome
from server.protocol.codes import DAMAGED, TOO_SLOW
from server.protocol.session import (
    Action,
    CloseConnection,
    Join,
    Limits,
    ReadHistory,
    SendFrame,
    Session,
    State,
    Submit,
    close_reason,
)
from server.store import GameFenced, StoreError, StoreFull, UnreadableGame
from server.web.context import Context
from server.web.refusals import rejection

log = logging.getLogger(__name__)

# Versions of history read from the store at a time for a client resuming with `since`.
HISTORY_WINDOW = 1000


async def game_socket(websocket: WebSocket) -> None:
    """Serve one client of one game from hello to disconnect."""
    ctx: Context = websocket.app.state.ctx
    settings = ctx.settings
    session = Session(Limits(settings.max_frame_bytes, settings.rate_per_second, settings.rate_burst))
    await websocket.accept()
    try:
        message = await asyncio.wait_for(websocket.receive(), settings.hello_timeout)
    except TimeoutError:
        await _carry_out(websocket, ctx, session, session.hello_timed_out())
        return
    if message["type"] == "websocket.disconnect":
        return
    actions = session.receive(message.get("text"))
    if not actions or not isinstance(actions[0], Join):
        await _carry_out(websocket, ctx, session, actions)
        return
    game_id: str = websocket.path_params["game_id"]
    token = actions[0].hello.token
    try:
        game = await ctx.games.get(game_id, refresh=True)
        public = game is not None and game.spectators == "public"
        credentials = await game.credentials() if game is not None and token else {}
    except UnreadableGame as exc:
        await _carry_out(websocket, ctx, session, session.refuse("damaged_game", str(exc), DAMAGED))
        return
    except StoreError:
        await _carry_out(
            websocket,
            ctx,
            session,
            session.refuse("unavailable", "the event store cannot be reached; retry", TOO_SLOW),
        )
        return
    if game is None:
        await _carry_out(websocket, ctx, session, session.admit(found=False))
        return
    full = len(game.followers) >= settings.max_connections_per_game
    # Admitting (the welcome's version and view) and following happen in one step of the loop, so every
    # live frame queued from here on is past the welcome's version: no gap, no duplicate.
    actions = session.admit(
        found=True,
        public=public,
        credentials=credentials,
        full=full,
        version=game.version,
        view=lambda: game.view_json,
    )
    if session.state is not State.OPEN:
        await _carry_out(websocket, ctx, session, actions)
        return
    outbox = Outbox(
        lambda data: websocket.send_text(data.decode()),
        lambda code, reason: _close(websocket, code, reason),
        settings.queue_limit,
        ctx.metrics.drops.inc,
        write=shared_writer(websocket.scope),
        close_now=shared_closer(websocket.scope, settings.slow_close_grace),
    )
    # Its seat and token: a reissue closes the seat's connections that came with another token, and a
    # next game hands each connection its token there.
    follower = Follower(outbox, session.view, session.seat, token)
    game.follow(follower)
    # Its presence frame waits in the outbox behind the welcome and any history.
    seats = len(game.players)
    attendee = ctx.presence.join(game_id, seats, session.seat, outbox)
    ctx.metrics.connections.labels(session.role).inc()
    try:
        await _carry_out(websocket, ctx, session, actions, game_id)
        outbox.start()
        await _serve(websocket, ctx, session, game, outbox)
    except (WebSocketDisconnect, StoreError):
        pass
    except RuntimeError as exc:  # starlette refuses a send once the peer has gone: the session is over
        log.debug("session ended: %s", exc, extra={"game_id": game_id})
    finally:
        ctx.metrics.connections.labels(session.role).dec()
        ctx.presence.leave(attendee)
        game.unfollow(follower)
        await outbox.stop()


async def _carry_out(
    websocket: WebSocket, ctx: Context, session: Session, actions: list[Action], game_id: str = ""
) -> None:
    """Do what the session asked, before live traffic starts: welcome, history, refusals, closes."""
    for action in actions:
        if isinstance(action, SendFrame):
            if action.code is not None:
                ctx.metrics.rejected(action.code)
            await websocket.send_text(action.data.decode())
        elif isinstance(action, CloseConnection):
            await _close(websocket, action.code, action.reason)
        elif isinstance(action, ReadHistory):
            # A window at a time, yielding between frames: a long history is read and sent in slices
            # that other games' commands run between, never in one block.
            after = action.after
            while after < action.until:
                until = min(after + HISTORY_WINDOW, action.until)
                records = await ctx.games.history(game_id, after, until)
                for frame in session.history([r.data for r in records]):
                    await websocket.send_text(frame.data.decode())
                    await asyncio.sleep(0)
                if not records:
                    break
                after = records[-1].version


async def _serve(
    websocket: WebSocket, ctx: Context, session: Session, game: LiveGame, outbox: Outbox
) -> None:
    """Read frames until the client goes; each becomes a command for the game or a rejection."""
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        for action in session.receive(message.get("text"), game.version):
            if isinstance(action, Submit) and isinstance(action.command, PlayAgain):
                await _play_again(ctx, session, game, outbox, action.command)
            elif isinstance(action, Submit):
                # A connection's frames are answered in the order they came: the next is read once this
                # command has its answer.
                await _submit(ctx, session, game, outbox, action.command)
            elif isinstance(action, SendFrame):
                if action.code is not None:
                    ctx.metrics.rejected(action.code)
                outbox.put(action.data)


def _submit(
    ctx: Context, session: Session, game: LiveGame, outbox: Outbox, command: Command
) -> asyncio.Future[None]:
    """Hand a command to its game; its answer goes to the outbox as soon as the game has it (in the
    game's turn of the loop, before the game's frame for it). The future is done once answered."""
    extra = {"game_id": game.game_id, "seat": command.seat, "command_id": command.id}
    # perf_counter, not the loop's clock: uvloop's is cached per turn of the loop, in milliseconds.
    started = time.perf_counter()
    answered = asyncio.get_running_loop().create_future()

    def reply(result: Outcome | Exception) -> None:
        # The connection's task may have been cancelled while it waited (its future cancelled with it).
        if not answered.done():
            answered.set_result(None)
        if isinstance(result, Outcome):
            outbox.put(session.accepted(command.id, result.version, result.envelopes).data)
            elapsed = time.perf_counter() - started
            ctx.metrics.accepted(elapsed)
            # Debug, not info: the game's stream records every accepted command, and the metrics count and
            # time them; a line each would be most of the log (and a tenth of a command's CPU).
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "command accepted",
                    extra={**extra, "version": result.version, "duration_ms": round(elapsed * 1e3, 3)},
                )
            return
        answer = session.refused(command.id, rejection(result), game.version)
        outbox.put(answer.data)
        code = answer.code or "unavailable"
        ctx.metrics.rejected(code)
        if isinstance(result, Rejected):
            log.info("command rejected", extra={**extra, "code": code, "version": game.version})
        elif isinstance(result, StoreFull):  # the store answered: not an outage, but an operator must act
            log.warning("command refused: the store is full", extra={**extra, "version": game.version})
        elif isinstance(result, GameFenced):
            log.info("command refused: the game is being archived", extra={**extra, "version": game.version})
        elif isinstance(result, UnreadableGame):  # logged once per game and version by the node
            log.info("command refused: damaged game", extra={**extra, "version": game.version})
        else:
            ctx.metrics.redis_errors.inc()
            log.warning(
                "command unavailable",
                extra={**extra, "code": code, "version": game.version, "error": str(result) or "timeout"},
            )

    game.submit(command, reply)
    return answered


async def _play_again(
    ctx: Context, session: Session, game: LiveGame, outbox: Outbox, command: PlayAgain
) -> None:
    """Start the ended game's next game, or get the one started already: answered `accepted` with the
    NextGame envelope (the `next_game` frame follows, as to every connection of the game)."""
    try:
        _, outcome, _ = await tables.play_again(ctx.games, game.game_id, command.seat, command.id)
    except (Rejected, StoreError) as exc:
        answer = session.refused(command.id, rejection(exc), game.version)
        ctx.metrics.rejected(answer.code or "unavailable")
        outbox.put(answer.data)
        return
    outbox.put(session.accepted(command.id, outcome.version, outcome.envelopes).data)


async def _close(websocket: WebSocket, code: int, reason: str) -> None:
    with contextlib.suppress(Exception):
        await websocket.close(code, close_reason(reason))
