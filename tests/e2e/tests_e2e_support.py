"""Small helpers shared by the end-to-end tests."""

from __future__ import annotations

from client import create_game


async def new_game(url: str, players: list[str], **options: str) -> tuple[str, list[str]]:
    """Create a game; its id and the seat tokens in seat order."""
    created = await create_game(url, players, **options)
    return created["game_id"], [seat["token"] for seat in created["seats"]]
