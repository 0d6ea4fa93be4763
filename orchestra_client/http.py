"""HTTP calls of protocol v1: create a game, read a view or the events."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec


def _headers(token: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"} if token else {}


async def create_game(
    base_url: str,
    players: list[str],
    *,
    layout: str | None = None,
    spectators: str | None = None,
    api_key: str | None = None,
) -> dict[str, Any]:
    """POST /games; returns the answer (game_id, version, seats with tokens, watch_token).

    Raises: httpx.HTTPStatusError when the server refuses.
    """
    body: dict[str, Any] = {"players": players}
    if layout is not None:
        body["layout"] = layout
    if spectators is not None:
        body["spectators"] = spectators
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
