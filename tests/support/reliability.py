"""Helpers shared by the reliability tests: games, placements, answers checked against the stream."""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import Any

import httpx

from domain import STANDARD, Layout
from orchestra_client import GameClient, create_game, get_events
from orchestra_client.bots import random_placement
from tests.support.waiting import until

LAYOUT: Layout = STANDARD


async def new_game(url: str, players: list[str], **options: Any) -> tuple[str, list[str]]:
    """Create a game; its id and the seat tokens in seat order."""
    created = await create_game(url, players, **options)
    return created["game_id"], [seat["token"] for seat in created["seats"]]


def placement(rng: random.Random, command_id: str) -> dict[str, Any]:
    """A legal `place` frame with the given id."""
    return {"type": "place", "id": command_id, **random_placement(LAYOUT, rng)}


async def timed_send(client: GameClient, frame: dict[str, Any], timeout: float = 15.0) -> tuple[Any, float]:
    """Send a frame; its answer and the seconds it took."""
    began = time.monotonic()
    answer = await client.send(frame, timeout=timeout)
    return answer, time.monotonic() - began


async def wait_ready(url: str, timeout: float = 20.0) -> None:
    """Poll GET /readyz until 200 (the store answers and the tails run). Raises: AssertionError."""
    async with httpx.AsyncClient(base_url=url, timeout=2) as http:

        async def ready() -> bool:
            try:
                return (await http.get("/readyz")).status_code == 200
            except httpx.HTTPError:
                return False

        await until(ready, timeout, f"{url}/readyz answering 200")


def assert_each_applied_once(stream: list[dict[str, Any]], accepted: dict[tuple[int, str], int]) -> None:
    """Every accepted (seat, id) is in the stream exactly once, at the version its answer named, and the
    stream holds nothing else but GameCreated."""
    keys = Counter((e["seat"], e["command_id"]) for e in stream[1:])
    assert [k for k, n in keys.items() if n > 1] == []
    assert set(keys) == set(accepted)
    for envelope in stream[1:]:
        assert accepted[(envelope["seat"], envelope["command_id"])] == envelope["version"]
    assert [e["version"] for e in stream] == list(range(1, len(stream) + 1))


async def stream_of(url: str, game_id: str, token: str | None = None) -> list[dict[str, Any]]:
    """GET /games/{id}/events."""
    return await get_events(url, game_id, token=token)
