"""The HTTP routes of protocol.md: create a game, read its view and events, health, readiness, schema."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from typing import Annotated, Literal

import msgspec
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from domain import Game, Rejected, decide
from domain.messages import CreateGame, Name
from server import auth
from server.clock import utc_now
from server.engine import listing
from server.engine.owner import LiveGame
from server.engine.trailer import trailer_line
from server.protocol import schema
from server.store import StoreError, StoreFull, TooManyGames, UnreadableGame
from server.web.context import Context
from server.web.throttle import client_key

_encode = msgspec.json.Encoder().encode


class NewGame(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The body of POST /games: a seat's name, or null for an open seat; `open` lists an open table."""

    players: Annotated[list[Name | None], msgspec.Meta(min_length=1, max_length=4)]
    layout: str = "standard"
    spectators: Literal["public", "token"] = "public"
    open: bool = False


_decode_new_game = msgspec.json.Decoder(NewGame).decode


def json(body: object, status: int = 200) -> Response:
    """A JSON response encoded by msgspec."""
    return Response(_encode(body), status_code=status, media_type="application/json")


def error(status: int, code: str, message: str) -> Response:
    """An HTTP error in protocol.md's shape."""
    return json({"code": code, "message": message}, status)


def unavailable() -> Response:
    """The answer when the event store cannot be reached."""
    return error(503, "unavailable", "the event store cannot be reached; retry")


def store_error(exc: StoreError) -> Response:
    """The answer to a store error: `damaged_game` (500, naming the game and the version that cannot be
    read; retrying cannot help), `store_full` (507: nothing can be written until room is made),
    `too_many_games` (503: the store holds its maximum of live games) or `unavailable` (503, retry)."""
    if isinstance(exc, UnreadableGame):
        body = {"code": "damaged_game", "message": str(exc), "game_id": exc.game_id, "version": exc.version}
        return json(body, 500)
    if isinstance(exc, StoreFull):
        return error(507, "store_full", "the event store is full: nothing can be written until room is made")
    if isinstance(exc, TooManyGames):
        return error(
            503, "too_many_games", "the server holds its maximum of live games: retry once games have ended"
        )
    return unavailable()


def bearer(request: Request) -> str | None:
    """The token of an `Authorization: Bearer` header, or None."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


async def create_game(request: Request) -> Response:
    """POST /games: create a game; the seat tokens are shown here once and never again.

    The body is read and checked before the address's rate is spent: only a request that would create a
    game counts against it, so a client's mistakes (400, 413) never hold back its next valid creation.
    """
    ctx: Context = request.app.state.ctx
    if ctx.settings.api_key is not None:
        presented = bearer(request) or ""
        if not auth.identify(presented, {"key": auth.digest(ctx.settings.api_key)}):
            return error(401, "forbidden", "creating games needs the server's API key as a Bearer token")
    body = await read_body(request, ctx.settings.max_body_bytes)
    if body is None:
        return error(413, "too_large", f"a request body may hold {ctx.settings.max_body_bytes} bytes")
    try:
        new = _decode_new_game(body)
        _check(new)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return error(400, "bad_request", str(exc))
    except Rejected as exc:
        return error(400, exc.code, exc.message)
    refused = await creation_rate(request, ctx)
    if refused is not None:
        return refused
    try:
        host = request.client.host if request.client else None
        created = await ctx.games.create(
            new.players,
            new.layout,
            new.spectators,
            creator=client_key(host or "unknown"),
            open_table=new.open,
        )
    except Rejected as exc:
        return error(400, exc.code, exc.message)
    except StoreError as exc:
        if isinstance(exc, TooManyGames):
            ctx.metrics.creations_refused.labels("too_many_games").inc()
        return store_error(exc)
    return json(created, 201)


def _check(new: NewGame) -> None:
    """Decide the creation on an empty game, as the game's creation will (pure, no store call): raises
    Rejected for players or a layout the rules refuse."""
    command = CreateGame(
        game_id="check",
        players=tuple(new.players),
        layout=new.layout,
        spectators=new.spectators,
        open=new.open,
    )
    decide(Game(), command)


async def creation_rate(request: Request, ctx: Context) -> Response | None:
    """Spend one of the client address's creations (a join spends one too): None, or the 429 (or 503
    without the store) to answer."""
    host = request.client.host if request.client else None
    # This node's bucket first: a flood from one address is refused without a store call. Then the
    # bucket every node shares, so that a client reaching several nodes still gets the one rate.
    wait = ctx.creations.take(host)
    if not wait and ctx.creations.rate > 0:
        try:
            shared = await ctx.games.store.take_token(
                f"create:{client_key(host or 'unknown')}", ctx.creations.rate, ctx.creations.burst
            )
        except StoreError:
            return unavailable()
        wait = math.ceil(shared) if shared > 0 else 0
    if not wait:
        return None
    ctx.metrics.creations_refused.labels("rate_limited").inc()
    refused = error(429, "rate_limited", f"too many games created from this address; retry in {wait} s")
    refused.headers["retry-after"] = str(wait)
    return refused


async def list_games(request: Request) -> Response:
    """GET /games: the public games, newest first (at most `limit`, default 100), from the store's index:
    no private game is read, however many there are (server.engine.listing)."""
    ctx: Context = request.app.state.ctx
    limit = _int(request.query_params.get("limit"), default=100, low=1, high=1000)
    if limit is None:
        return error(400, "bad_request", "limit must be an integer from 1 to 1000")
    try:
        found = await listing.summaries(ctx.games.store, limit, ctx.presence)
    except StoreError:
        return unavailable()
    return json(found)


async def get_game(request: Request) -> Response:
    """GET /games/{id}: the view now with, beside its fields, `presence` (who is at the table now: no
    part of the view, which is the events' alone); or `?at=N`, the view as it was after event N."""
    ctx: Context = request.app.state.ctx
    game_id = request.path_params["game_id"]
    try:
        game = await ctx.games.get(game_id, refresh=True)
        refusal = await may_read(request, ctx, game_id, game)
        if refusal is not None:
            return refusal
        assert game is not None
        at = request.query_params.get("at")
        if at is None:
            view = game.view_json
            state = game.state
            [presence] = await ctx.presence.of([(game_id, len(state.players))])
            document = _beside(view, b"presence", _encode(presence))
            if state.next_game is not None:  # the ended game's next game (issue 40: play again)
                document = _beside(document, b"next_game", _encode(state.next_game))
            return Response(document, media_type="application/json")
        version = _int(at, default=None, low=1, high=game.version)
        if version is None:
            return error(400, "bad_request", f"at must be an integer from 1 to {game.version}")
        return json(await ctx.games.view_at(game_id, version))
    except StoreError as exc:
        return store_error(exc)


async def get_events(request: Request) -> Response:
    """GET /games/{id}/events: every envelope after `?after=N`, one JSON object per line; with
    `?trailer=true`, then a signed trailer stating the last version sent and its hash."""
    ctx: Context = request.app.state.ctx
    game_id = request.path_params["game_id"]
    trailer = _flag(request.query_params.get("trailer"))
    if trailer is None:
        return error(400, "bad_request", "trailer must be true or false")
    try:
        game = await ctx.games.get(game_id, refresh=True)
        refusal = await may_read(request, ctx, game_id, game)
        if refusal is not None:
            return refusal
        after = _int(request.query_params.get("after"), default=0, low=0, high=None)
        if after is None:
            return error(400, "bad_request", "after must be an integer >= 0")
        records = await ctx.games.history(game_id, after)
        end = b""
        if trailer and records:
            end = trailer_line(game_id, records, utc_now(), ctx.games.node.signer) + b"\n"
    except StoreError as exc:
        return store_error(exc)

    async def lines() -> AsyncIterator[bytes]:
        for start in range(0, len(records), 500):
            yield b"".join(r.data + b"\n" for r in records[start : start + 500])
            await asyncio.sleep(0)  # a long history goes out in slices that other games' work runs between
        if end:
            yield end

    return StreamingResponse(lines(), media_type="application/x-ndjson")


async def signing_keys(request: Request) -> Response:
    """GET /signing-keys: the public keys that verify this server's envelopes, the current one first."""
    ctx: Context = request.app.state.ctx
    return json({"current": ctx.keys.current, "keys": ctx.keys.listing()})


async def healthz(request: Request) -> Response:
    """GET /healthz: the process serves."""
    return json({"status": "ok"})


async def readyz(request: Request) -> Response:
    """GET /readyz: the event store answers and the live tails run."""
    ctx: Context = request.app.state.ctx
    store_ok = await ctx.games.store.ping()
    tails_ok = ctx.games.running
    body = {"status": "ok" if store_ok and tails_ok else "unavailable", "store": store_ok, "tailer": tails_ok}
    return json(body, 200 if store_ok and tails_ok else 503)


async def schema_json(request: Request) -> Response:
    """GET /schema.json: JSON Schema of every frame, envelope, event and view, from the msgspec types."""
    return Response(schema.document(), media_type="application/schema+json")


async def metrics(request: Request) -> Response:
    """GET /metrics: Prometheus text format."""
    ctx: Context = request.app.state.ctx
    ctx.metrics.games.set(len(ctx.games))
    return Response(ctx.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


async def may_read(request: Request, ctx: Context, game_id: str, game: LiveGame | None) -> Response | None:
    """None when the request may read the game; else the error to answer."""
    if game is None:
        return error(404, "unknown_game", f"no game {game_id!r}")
    state = game.state
    if state.spectators == "public":
        return None
    token = bearer(request)
    if token is not None and auth.identify(token, await game.credentials()):
        return None
    return error(
        403, "forbidden", "this game is private: send its watch token or a seat token as a Bearer token"
    )


def _beside(document: bytes, name: bytes, value: bytes) -> bytes:
    """A JSON object's encoding with one more field, last (the object is not decoded again)."""
    assert document.endswith(b"}") and document != b"{}"
    return b'%s,"%s":%s}' % (document[:-1], name, value)


async def read_body(request: Request, limit: int) -> bytes | None:
    """The request's body, or None past `limit` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and _digits(declared) and int(declared) > limit:
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


def _flag(value: str | None) -> bool | None:
    """A boolean query parameter: `true` or `false` (protocol.md), absent is false; None if anything else."""
    if value is None or value == "false":
        return False
    return True if value == "true" else None


def _digits(value: str) -> bool:
    """Whether `value` is ASCII digits only: int() would also take " 12 ", "1_000" and "١٢"."""
    return value.isascii() and value.isdigit()


def _int(value: str | None, *, default: int | None, low: int, high: int | None) -> int | None:
    """A numeric query parameter: ASCII digits only (at most 12), within low..high; None if not."""
    if value is None:
        return default
    if not _digits(value) or len(value) > 12:
        return None
    number = int(value)
    if number < low or (high is not None and number > high):
        return None
    return number
