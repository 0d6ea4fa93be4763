"""The club records' routes (protocol.md section 13), read from the records database `orchestra records`
writes (server.records):

    GET /records/games?player=&since=&until=&layout=&limit=&after=&game=   ended games, newest first
    GET /records/players/{name}                                            a player's record
    GET /records/standings?since=&until=                                   players by wins, then average

Private games are left out of every answer (games, players' records, standings), except those whose
tokens the request carries: in the `Orchestra-Watch-Tokens` header (`<game_id>=<token>`, comma-separated,
several at once), or the one `game=` names with its token as a Bearer token. A token is a game's watch
token, or a seat's; tokens never go in the query string (URLs end up in logs).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import msgspec
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from domain.errors import BadName
from domain.names import player_names
from projections.records import GameResult, standings
from server import auth
from server.records.database import MAX_PAGE, GameQuery, SqlRecords, open_records
from server.store import StoreError
from server.web.context import Context
from server.web.http import error, json, may_read, store_error
from server.web.pages import HEADERS, STATIC

DEFAULT_PAGE = 50
# The header of private games' tokens, and how many games one request may name there (each is a read of
# the game's credentials).
WATCH_HEADER = "Orchestra-Watch-Tokens"
MAX_WATCH_TOKENS = 50
T = TypeVar("T")
_GAMES_PARAMS = frozenset({"player", "since", "until", "layout", "limit", "after", "game"})
_STANDINGS_PARAMS = frozenset({"since", "until"})


class _Bad(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class _Unavailable(Exception):
    """The records database cannot be reached."""


class _Refused(Exception):
    """A refusal already put as the answer to send (a token that opens nothing, a store error)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def _answering(route: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """The route, with every refusal its steps raise answered: bad input 400, the records database out
    of reach 503, a token or the store's refusal as it was put."""

    @functools.wraps(route)
    async def answered(request: Request) -> Response:
        try:
            return await route(request)
        except _Bad as exc:
            return error(400, exc.code, str(exc))
        except _Unavailable as exc:
            return error(503, "unavailable", f"the records database cannot be reached; retry ({exc})")
        except _Refused as exc:
            return exc.response

    return answered


async def _read(request: Request, query: Callable[[SqlRecords], T]) -> T:
    """Run `query` on the records database in a worker thread, one at a time (one connection), so that a
    slow database never holds up the games this process serves.

    Raises: _Unavailable when the database cannot be opened or answer (it is dropped, to be opened again).
    """
    state = request.app.state
    if getattr(state, "records_lock", None) is None:
        state.records_lock = asyncio.Lock()
    async with state.records_lock:
        return await asyncio.to_thread(_query, request, query)


def _query(request: Request, query: Callable[[SqlRecords], T]) -> T:
    state = request.app.state
    try:
        if getattr(state, "records", None) is None:
            settings = state.ctx.settings
            state.records = open_records(settings.records_url, Path(settings.data_dir))
        database: SqlRecords = state.records
        database.follow()  # a rebuild may have switched reads to its tables
        return query(database)
    except Exception as exc:  # the driver's errors: sqlite3's, psycopg's (not installed: RuntimeError)
        records = getattr(state, "records", None)
        state.records = None
        if records is not None:
            with contextlib.suppress(Exception):
                records.close()
        raise _Unavailable(str(exc)) from exc


def _known(request: Request, allowed: frozenset[str]) -> None:
    unknown = sorted(set(request.query_params) - allowed)
    if unknown:
        raise _Bad(
            "unknown_parameter", f"unknown parameter {unknown[0]!r}: one of {', '.join(sorted(allowed))}"
        )
    for name in request.query_params:
        if len(request.query_params.getlist(name)) > 1:
            raise _Bad("bad_request", f"{name} given more than once")


def _date(name: str, value: str | None) -> str | None:
    """A date (2026-01-31) or ISO 8601 time (UTC unless said) in the envelopes' form, for comparison."""
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise _Bad("bad_date", f"{name} must be a date (2026-01-31) or an ISO 8601 time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _name(value: str) -> str:
    try:
        [name] = player_names([value])
    except BadName as exc:
        raise _Bad("bad_name", str(exc).removeprefix("seat 0: ")) from None
    assert name is not None
    return name


def _watch_pairs(request: Request) -> list[tuple[str, str]]:
    """The (game id, token) pairs of the request's Orchestra-Watch-Tokens headers, each game once."""
    pairs: dict[str, str] = {}
    for value in request.headers.getlist(WATCH_HEADER):
        if not value.strip():
            continue
        for item in value.split(","):
            game_id, equals, token = item.strip().partition("=")
            if not equals or not game_id or not token or " " in game_id or " " in token:
                raise _Bad("bad_request", f"{WATCH_HEADER} holds <game_id>=<token>, comma-separated")
            if pairs.setdefault(game_id, token) != token:
                raise _Bad("bad_request", f"{WATCH_HEADER} names game {game_id!r} twice")
    if len(pairs) > MAX_WATCH_TOKENS:
        raise _Bad("bad_request", f"{WATCH_HEADER} names at most {MAX_WATCH_TOKENS} games")
    return list(pairs.items())


async def _shown(request: Request, pairs: list[tuple[str, str]]) -> tuple[str, ...]:
    """The games of `pairs` once every token opens its game. Raises: _Refused, the same whether the game
    does not exist or the token is not one of its own (nothing is shown then)."""
    ctx: Context = request.app.state.ctx

    async def opens(game_id: str, token: str) -> bool:
        game = await ctx.games.get(game_id)
        return game is not None and auth.identify(token, await game.credentials()) is not None

    try:
        opened = await asyncio.gather(*(opens(game_id, token) for game_id, token in pairs))
    except StoreError as exc:
        raise _Refused(store_error(exc)) from exc
    for (game_id, _), ok in zip(pairs, opened, strict=True):
        if not ok:
            raise _Refused(
                error(
                    403,
                    "forbidden",
                    f"the token {WATCH_HEADER} gives for game {game_id!r} does not open it: no game of that "
                    "id holds that token; nothing is shown",
                )
            )
    return tuple(game_id for game_id, _ in pairs)


def _game(result: GameResult) -> dict[str, object]:
    return {
        "game_id": result.game_id,
        "layout": result.layout,
        "created_at": result.created_at,
        "ended_at": result.ended_at,
        "placements": result.placements,
        "version": result.version,
        "players": msgspec.to_builtins(result.seats),
        "replay": f"/games/{result.game_id}/replay",
    }


@_answering
async def records_games(request: Request) -> Response:
    """GET /records/games: ended games, newest first, paged by `after` (the `next` of the page before)."""
    query = request.query_params
    _known(request, _GAMES_PARAMS)
    limit_text = query.get("limit", str(DEFAULT_PAGE))
    if not (limit_text.isascii() and limit_text.isdigit() and 1 <= int(limit_text) <= MAX_PAGE):
        raise _Bad("bad_limit", f"limit must be an integer from 1 to {MAX_PAGE}")
    after = None
    if "after" in query:
        at, _, game_id = query["after"].partition("_")
        if not game_id or _date("after", at) != at:
            raise _Bad("bad_cursor", "after must be the `next` of a page before")
        after = (at, game_id)
    layout = query.get("layout")
    if layout is not None and not 1 <= len(layout) <= 64:
        raise _Bad("bad_request", "layout must be 1 to 64 characters")
    player = _name(query["player"]) if "player" in query else None
    since, until = _date("since", query.get("since")), _date("until", query.get("until"))
    shown = await _shown(request, _watch_pairs(request))
    if "game" in query and query["game"] not in shown:
        ctx: Context = request.app.state.ctx
        try:
            game = await ctx.games.get(query["game"])
            refusal = await may_read(request, ctx, query["game"], game)
        except StoreError as exc:
            return store_error(exc)
        if refusal is not None:
            return refusal
        shown = (*shown, query["game"])
    wanted = GameQuery(
        player=player,
        since=since,
        until=until,
        layout=layout,
        limit=int(limit_text),
        after=after,
        shown=shown,
    )
    page = await _read(request, lambda database: database.games(wanted))
    last = page[-1] if len(page) == int(limit_text) else None
    return json(
        {
            "games": [_game(result) for result in page],
            "next": f"{last.ended_at}_{last.game_id}" if last is not None else None,
        }
    )


@_answering
async def records_player(request: Request) -> Response:
    """GET /records/players/{name}: games played, wins, average and best prestige, last played; the
    player's page to a browser (a request that accepts HTML)."""
    if "text/html" in request.headers.get("accept", ""):
        page = STATIC / "player.html"
        return FileResponse(page, media_type="text/html; charset=utf-8", headers=HEADERS)
    _known(request, frozenset())
    name = _name(request.path_params["name"])
    shown = await _shown(request, _watch_pairs(request))
    record = await _read(request, lambda database: database.player(name, shown))
    if record is None:
        return error(404, "unknown_player", f"no ended game has a player named {name!r}")
    return json(record)


@_answering
async def records_standings(request: Request) -> Response:
    """GET /records/standings: players by wins, then average prestige; equal both share a place."""
    _known(request, _STANDINGS_PARAMS)
    since = _date("since", request.query_params.get("since"))
    until = _date("until", request.query_params.get("until"))
    shown = await _shown(request, _watch_pairs(request))
    table = standings(await _read(request, lambda database: database.players(since, until, shown)))
    return json({"standings": [{"place": place, **msgspec.to_builtins(row)} for place, row in table]})


routes = [
    Route("/records/games", records_games, methods=["GET"]),
    Route("/records/players/{name}", records_player, methods=["GET"]),
    Route("/records/standings", records_standings, methods=["GET"]),
]
