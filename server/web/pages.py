"""The pages a browser opens: the list of games (with the New game form and the open tables), the wall
of live games, the live board (embeddable with `?embed=1`), the replay viewer, the play page, the host
page; and the JavaScript client library they are built on.

Plain HTML, vanilla JS modules (one per page, and their shared rendering) and one stylesheet from
`static/`, no build step. The pages speak to the server through the library, `GET /client/orchestra.js`
(`client/` holds links to `clients/js/`, where it is kept, so the wheel ships it). The pages only draw what
the server says: views come from `GET /games/{id}` and the websocket, and where a token may go comes from
`GET /games/{id}/legal`, which answers from the domain's own rules, so no rule lives in JS.

`GET /` writes into the page what its New game form needs of the server: the layouts a game may use, and
whether creating one needs the server's API key (never the key).

`GET /games/{id}/legal?token=<JSON token>[&skill=N]` answers
`{"spaces": [space ids, in layout order], "materials": {space id: materials to name}}`; `materials` lists
only the spaces whose placement must name materials (Rare Strings), as many as that skill needs.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

import msgspec
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from domain import BUILTIN_LAYOUTS, Token, legal_spaces
from domain.rules import materials_needed
from server.store import StoreError
from server.web.context import Context
from server.web.http import error, json, may_read, store_error

STATIC = Path(__file__).resolve().parent / "static"
CLIENT = Path(__file__).resolve().parent / "client"

# The pages load only their own script and stylesheet, and talk only to this server: even a name that
# slipped into the page as markup could not run a script.
HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}
# The embeddable board (`/games/{id}/watch?embed=1`, for stream overlays) may be framed by any page: it
# only shows what any spectator sees, and has nothing to click that acts.
EMBED_HEADERS = {
    **HEADERS,
    "content-security-policy": HEADERS["content-security-policy"].replace(
        "frame-ancestors 'none'", "frame-ancestors *"
    ),
}


# The library is a public file: any origin may load it (a module script is fetched with CORS), and Deno
# finds its types from the header.
CLIENT_FILES = {
    "orchestra.js": (
        "text/javascript; charset=utf-8",
        {"x-typescript-types": "/client/orchestra.d.ts"},
    ),
    "orchestra.d.ts": ("application/typescript; charset=utf-8", {}),
}
CLIENT_HEADERS = {
    "access-control-allow-origin": "*",
    "x-content-type-options": "nosniff",
    "cache-control": "no-cache",
}


class Legal(msgspec.Struct, frozen=True):
    """The answer of `/legal`."""

    spaces: list[str]
    materials: dict[str, int]


_decode_token = msgspec.json.Decoder(Token).decode


def _page(name: str):  # type: ignore[no-untyped-def]
    async def page(request: Request) -> Response:
        return FileResponse(STATIC / name, media_type="text/html; charset=utf-8", headers=HEADERS)

    page.__name__ = f"page_{name.removesuffix('.html')}"
    return page


async def watch_page(request: Request) -> Response:
    """The watch page; with `?embed=1` the same page, which then shows the board alone and may be framed."""
    headers = EMBED_HEADERS if request.query_params.get("embed") == "1" else HEADERS
    return FileResponse(STATIC / "watch.html", media_type="text/html; charset=utf-8", headers=headers)


def _client(name: str):  # type: ignore[no-untyped-def]
    media_type, extra = CLIENT_FILES[name]

    async def client_file(request: Request) -> Response:
        return FileResponse(CLIENT / name, media_type=media_type, headers={**CLIENT_HEADERS, **extra})

    client_file.__name__ = f"client_{name.replace('.', '_')}"
    return client_file


async def index_page(request: Request) -> Response:
    """The list of games, with what its New game form needs: the layouts, and whether an API key is needed."""
    ctx: Context = request.app.state.ctx
    layouts = " ".join(sorted(BUILTIN_LAYOUTS))
    needs_key = "true" if ctx.settings.api_key is not None else "false"
    html = (STATIC / "index.html").read_text(encoding="utf-8")
    html = html.replace(
        '<body data-page="index">',
        f'<body data-page="index" data-layouts="{escape(layouts)}" data-api-key="{needs_key}">',
        1,
    )
    return Response(html, media_type="text/html; charset=utf-8", headers=HEADERS)


async def legal(request: Request) -> Response:
    """GET /games/{id}/legal?token=...&skill=N: where that token may go on this game's layout."""
    ctx: Context = request.app.state.ctx
    game_id = request.path_params["game_id"]
    raw_token = request.query_params.get("token")
    if raw_token is None:
        return error(400, "bad_request", 'token is required: a JSON token such as {"kind": "repair", ...}')
    raw_skill = request.query_params.get("skill", "1")
    if not (
        raw_skill.isascii() and raw_skill.isdigit() and len(raw_skill) <= 2 and 1 <= int(raw_skill) <= 10
    ):
        return error(400, "bad_request", "skill must be an integer from 1 to 10")
    skill = int(raw_skill)
    try:
        token = _decode_token(raw_token)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return error(400, "bad_request", f"bad token: {exc}")
    try:
        game = await ctx.games.get(game_id)
        refusal = await may_read(request, ctx, game_id, game)
    except StoreError as exc:
        return store_error(exc)
    if refusal is not None:
        return refusal
    assert game is not None and game.state.layout is not None
    layout = game.state.layout
    spaces = list(legal_spaces(layout, token))
    materials: dict[str, int] = {}
    for space_id in spaces:
        space = layout.space(space_id)
        needed = materials_needed(space, token, skill) if space is not None else 0
        if needed:
            materials[space_id] = needed
    return json(Legal(spaces=spaces, materials=materials))


routes: list[BaseRoute] = [
    Route("/", index_page, methods=["GET"]),
    Route("/wall", _page("wall.html"), methods=["GET"]),
    Route("/records", _page("records.html"), methods=["GET"]),
    Route("/games/{game_id}/watch", watch_page, methods=["GET"]),
    Route("/games/{game_id}/replay", _page("replay.html"), methods=["GET"]),
    Route("/games/{game_id}/play", _page("play.html"), methods=["GET"]),
    Route("/games/{game_id}/host", _page("host.html"), methods=["GET"]),
    Route("/games/{game_id}/legal", legal, methods=["GET"]),
    *(Route(f"/client/{name}", _client(name), methods=["GET"]) for name in CLIENT_FILES),
    Mount("/static", StaticFiles(directory=STATIC), name="static"),
]
