"""HTTP calls of protocol v1: create a game, read a view or the events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import msgspec


def _headers(token: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"} if token else {}


async def create_game(
    base_url: str,
    players: Sequence[str | None],
    *,
    layout: str | None = None,
    spectators: str | None = None,
    api_key: str | None = None,
    open: bool | None = None,
) -> dict[str, Any]:
    """POST /games (None in `players`: an open seat; `open`: an open table); returns the answer
    (game_id, version, seats with tokens, host_token, watch_token).

    Raises: httpx.HTTPStatusError when the server refuses.
    """
    body: dict[str, Any] = {"players": list(players)}
    if layout is not None:
        body["layout"] = layout
    if spectators is not None:
        body["spectators"] = spectators
    if open is not None:
        body["open"] = open
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        response = await http.post("/games", json=body, headers=_headers(api_key))
        response.raise_for_status()
        created: dict[str, Any] = response.json()
        return created


async def get_view(
    base_url: str, game_id: str, at: int | None = None, token: str | None = None
) -> dict[str, Any]:
    """The view: GET /games/{id} (`?at=N`), without the `presence` the view now comes with (see
    `get_presence`). Raises: httpx.HTTPStatusError."""
    view = await _get_game(base_url, game_id, at, token)
    view.pop("presence", None)
    return view


async def get_presence(base_url: str, game_id: str, token: str | None = None) -> dict[str, Any]:
    """Who is at the table now (`seats`, each with `online`; `spectators`): GET /games/{id}'s `presence`.

    Raises: httpx.HTTPStatusError.
    """
    presence: dict[str, Any] = (await _get_game(base_url, game_id, None, token))["presence"]
    return presence


async def _get_game(base_url: str, game_id: str, at: int | None, token: str | None) -> dict[str, Any]:
    params = {"at": str(at)} if at is not None else None
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        response = await http.get(f"/games/{game_id}", params=params, headers=_headers(token))
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body


async def get_events(
    base_url: str, game_id: str, after: int = 0, token: str | None = None
) -> list[dict[str, Any]]:
    """GET /games/{id}/events as a list of envelopes. Raises: httpx.HTTPStatusError."""
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        response = await http.get(
            f"/games/{game_id}/events", params={"after": str(after)}, headers=_headers(token)
        )
        response.raise_for_status()
        return [msgspec.json.decode(line) for line in response.content.splitlines() if line]


async def _post(base_url: str, path: str, body: Any = None, token: str | None = None) -> Any:
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        response = await http.post(path, json=body, headers=_headers(token))
        response.raise_for_status()
        return response.json()


async def join_game(base_url: str, game_id: str, name: str) -> dict[str, Any]:
    """POST /games/{id}/join: the lowest open seat of an open table for `name`; {"seat", "token"}.

    Raises: httpx.HTTPStatusError (409 no_open_seat, 403 not an open table, 429...)."""
    joined: dict[str, Any] = await _post(base_url, f"/games/{game_id}/join", {"name": name})
    return joined


async def open_tables(base_url: str) -> list[dict[str, Any]]:
    """GET /games/open: the open tables with a seat left (game_id, players, open_seats, version)."""
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        response = await http.get("/games/open")
        response.raise_for_status()
        found: list[dict[str, Any]] = response.json()
        return found


async def reissue_token(base_url: str, game_id: str, seat: int, host_token: str) -> str:
    """The host gives `seat` a new token (the old one plays no more); the new token."""
    answer = await _post(base_url, f"/games/{game_id}/seats/{seat}/token", token=host_token)
    token: str = answer["token"]
    return token


async def close_seat(base_url: str, game_id: str, seat: int, host_token: str) -> dict[str, Any]:
    """The host closes an open seat before the first placement; {"seat", "version"}."""
    closed: dict[str, Any] = await _post(base_url, f"/games/{game_id}/seats/{seat}/close", token=host_token)
    return closed


async def next_game(base_url: str, game_id: str, host_token: str) -> str:
    """The host starts the ended game's next game (or gets the one started already); its id. Every token
    of the ended game, the host's too, plays the same part there."""
    answer = await _post(base_url, f"/games/{game_id}/next", token=host_token)
    game: str = answer["game_id"]
    return game
