"""Games played on a real server for the records' tests, and their expected rows read back over HTTP.

The expected rows come from each game's GET /games/{id} (the final view: names, closed seats, scores) and
its GET /games/{id}/events (the dates), never from the records' fold.
"""

from __future__ import annotations

import random
from typing import Any

import msgspec

from domain import STANDARD, legal_spaces
from orchestra_client import GameClient, create_game
from orchestra_client.http import get_events, get_view
from tests.records.games import NAMES, TOKENS


class Played(msgspec.Struct):
    """A game played: its id, the token that reads it (a private game's watch token), whether it ended,
    and how many placements were accepted."""

    game_id: str
    token: str | None
    ended: bool
    placements: int


async def play_game(url: str, rng: random.Random, *, end: bool = True) -> Played:
    """Create and play one random game on the server at `url` (1 to 4 seats, some private)."""
    names = rng.sample(NAMES, rng.randint(1, 4))
    private = rng.random() < 0.25
    created = await create_game(url, names, spectators="token" if private else "public")
    game_id = created["game_id"]
    seats = [
        await GameClient.connect(url, game_id, seat["token"], reconnect=False) for seat in created["seats"]
    ]
    placements = 0
    try:
        for n in range(rng.randint(1, 12)):
            token = rng.choice(TOKENS)
            space = rng.choice(legal_spaces(STANDARD, token))
            answer = await rng.choice(seats).place(msgspec.to_builtins(token), space, id=f"p{n}")
            placements += answer["type"] == "accepted"
        if end:
            assert (await seats[0].end_game(id="end"))["type"] == "accepted"
    finally:
        for seat in seats:
            await seat.close()
    return Played(game_id, created.get("watch_token"), end, placements)


async def expected_row(url: str, played: Played) -> dict[str, Any]:
    """The row the records should hold for an ended game, from its view and its envelopes."""
    view = await get_view(url, played.game_id, token=played.token)
    envelopes = await get_events(url, played.game_id, token=played.token)
    taking_part = [p["seat"] for p in view["players"] if not p.get("closed")]
    prestige = {score["seat"]: score["prestige"] for score in view["scores"]}
    seats = []
    for player in view["players"]:
        seat = player["seat"]
        rank = None
        if not player.get("closed"):
            rank = 1 + sum(1 for other in taking_part if prestige[other] > prestige[seat])
        seats.append({"seat": seat, "name": player["name"], "prestige": prestige[seat], "rank": rank})
    return {
        "game_id": played.game_id,
        "layout": "standard",
        "private": played.token is not None,
        "created_at": envelopes[0]["at"],
        "ended_at": envelopes[-1]["at"],
        "placements": played.placements,
        "version": view["version"],
        "seats": seats,
    }
