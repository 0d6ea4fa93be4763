"""The HTTP routes of a table (protocol.md): open tables, joining one, and the host's routes.

    GET  /games/open                     the open tables with a seat left, newest first
    POST /games/{id}/join                {"name"} -> 201 {"seat", "token"}: the lowest open seat
    POST /games/{id}/seats/{seat}/token  host -> 200 {"token"}: the seat's new token
    POST /games/{id}/seats/{seat}/close  host -> 200 {"seat", "version"}: an open seat closed
    POST /games/{id}/next                host -> 201 (started here) or 200 {"game_id"}: play again

The host sends `Authorization: Bearer <host token>` (the API key, when set, is for POST /games alone).
"""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from domain import Rejected
from domain.messages import Name
from server.engine import tables
from server.engine.listing import listed_open, summary_of
from server.store import StoreError, TooManyGames
from server.web.context import Context
from server.web.http import bearer, creation_rate, error, json, read_body, store_error

# Listed games read to find the open tables among them (the newest: an open table fills or is left).
OPEN_SCAN = 200
# What each refusal code answers over HTTP.
STATUS = {
    "bad_request": 400,
    "forbidden": 403,
    "unknown_game": 404,
    "game_over": 409,
    "seat_taken": 409,
    "seat_closed": 409,
    "game_started": 409,
    "game_not_over": 409,
}


class JoinBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The body of POST /games/{id}/join."""

    name: Name


class OpenTable(msgspec.Struct, frozen=True):
    """An open table in GET /games/open: its players (null: open), its open seats, its version."""

    game_id: str
    players: list[str | None]
    open_seats: list[int]
    version: int


_decode_join = msgspec.json.Decoder(JoinBody).decode


def _refused(exc: Rejected) -> Response:
    return error(STATUS.get(exc.code, 409), exc.code, exc.message)


async def open_tables(request: Request) -> Response:
    """GET /games/open: the live open tables that have a seat left, newest first (among the newest
    OPEN_SCAN public games)."""
    ctx: Context = request.app.state.ctx
    found: list[OpenTable] = []
    try:
        for listed in await ctx.games.store.listed(OPEN_SCAN):
            summary = summary_of(listed)
            if summary is None or summary.ended or not listed_open(listed):
                continue
            game = await ctx.games.get(listed.game_id, refresh=True)
            if game is None:
                continue
            state = game.state
            seats = state.open_seats()
            if seats and not state.ended:
                found.append(OpenTable(listed.game_id, list(state.players), list(seats), state.version))
    except StoreError as exc:
        return store_error(exc)
    return json(found)


async def join(request: Request) -> Response:
    """POST /games/{id}/join: take the lowest open seat of an open table; the seat and its token (shown
    once). Spends one of the address's creations, as POST /games does."""
    ctx: Context = request.app.state.ctx
    game_id = request.path_params["game_id"]
    body = await read_body(request, ctx.settings.max_body_bytes)
    if body is None:
        return error(413, "too_large", f"a request body may hold {ctx.settings.max_body_bytes} bytes")
    try:
        name = _decode_join(body).name
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return error(400, "bad_request", str(exc))
    refused = await creation_rate(request, ctx)
    if refused is not None:
        return refused
    try:
        seat, token = await tables.join(ctx.games, game_id, name)
    except tables.NoOpenSeat as exc:
        return error(409, "no_open_seat", str(exc))
    except Rejected as exc:
        return _refused(exc)
    except StoreError as exc:
        return store_error(exc)
    return json({"seat": seat, "token": token}, 201)


async def reissue(request: Request) -> Response:
    """POST /games/{id}/seats/{seat}/token (host): the seat's new token; the old one plays no more."""
    ctx: Context = request.app.state.ctx
    found = await _hosted(request, ctx)
    if isinstance(found, Response):
        return found
    game_id, seat = found
    try:
        token = await tables.reissue(ctx.games, game_id, seat)
    except Rejected as exc:
        return _refused(exc)
    except StoreError as exc:
        return store_error(exc)
    return json({"token": token})


async def close_seat(request: Request) -> Response:
    """POST /games/{id}/seats/{seat}/close (host): close an open seat before the first placement."""
    ctx: Context = request.app.state.ctx
    found = await _hosted(request, ctx)
    if isinstance(found, Response):
        return found
    game_id, seat = found
    try:
        version = await tables.close_seat(ctx.games, game_id, seat)
    except Rejected as exc:
        return _refused(exc)
    except StoreError as exc:
        return store_error(exc)
    return json({"seat": seat, "version": version})


async def next_game(request: Request) -> Response:
    """POST /games/{id}/next (host): the ended game's next game; 201 when this request started it."""
    ctx: Context = request.app.state.ctx
    found = await _hosted(request, ctx, seat=False)
    if isinstance(found, Response):
        return found
    game_id, _ = found
    try:
        next_id, _, started = await tables.play_again(ctx.games, game_id, None)
    except Rejected as exc:
        return _refused(exc)
    except StoreError as exc:
        if isinstance(exc, TooManyGames):
            ctx.metrics.creations_refused.labels("too_many_games").inc()
        return store_error(exc)
    return json({"game_id": next_id}, 201 if started else 200)


async def _hosted(request: Request, ctx: Context, *, seat: bool = True) -> tuple[str, int] | Response:
    """The game and seat of a host's request whose Bearer token is the game's host token; else the
    refusal (a missing or wrong token is 403 and changes nothing)."""
    game_id = request.path_params["game_id"]
    number = -1
    if seat:
        raw = request.path_params["seat"]
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 2):
            return error(400, "bad_request", "seat must be a seat number from 0 to 3")
        number = int(raw)
    try:
        game = await ctx.games.get(game_id, refresh=True)
        if game is None:
            return error(404, "unknown_game", f"no game {game_id!r}")
        if not await tables.is_host(game, bearer(request)):
            return error(403, "forbidden", "this needs the game's host token as a Bearer token")
    except StoreError as exc:
        return store_error(exc)
    return game_id, number


routes = [
    Route("/games/open", open_tables, methods=["GET"]),
    Route("/games/{game_id}/join", join, methods=["POST"]),
    Route("/games/{game_id}/seats/{seat}/token", reissue, methods=["POST"]),
    Route("/games/{game_id}/seats/{seat}/close", close_seat, methods=["POST"]),
    Route("/games/{game_id}/next", next_game, methods=["POST"]),
]
