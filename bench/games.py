"""Stored games for the in-process benchmarks, made by the real command service on the in-memory store."""

from __future__ import annotations

import asyncio
import itertools

from domain import STANDARD, PerformanceToken, Place, RepairToken, legal_spaces
from domain.messages import Token
from server.engine.games import Games
from server.store import Record
from server.store.memory import MemoryEventStore


def legal_placements() -> list[tuple[Token, str]]:
    """Every legal (performance or repair token, space) pair of the standard layout."""
    pairs: list[tuple[Token, str]] = []
    for era in ("baroque", "classical", "romantic"):
        token: Token = PerformanceToken(era=era)
        pairs += [(token, space) for space in legal_spaces(STANDARD, token)]
    for family in ("strings", "winds", "percussion_keyboards"):
        token = RepairToken(family=family)
        pairs += [(token, space) for space in legal_spaces(STANDARD, token)]
    return pairs


def place(seat: int, index: int, pairs: list[tuple[Token, str]]) -> Place:
    """The index-th placement of a seat, cycling through `pairs`."""
    token, space = pairs[(index * 7 + seat) % len(pairs)]
    return Place(seat=seat, id=f"s{seat}n{index}", token=token, space=space)


async def _build(events: int, players: int) -> tuple[Games, str, list[Record]]:
    store = MemoryEventStore()
    service = Games(store, max_placements=10_000_000, max_live_games=1_000_000)
    created = await service.create([f"P{i}" for i in range(players)])
    pairs = legal_placements()
    seats = itertools.cycle(range(players))
    for index in range(events - 1):
        await service.handle(created.game_id, place(next(seats), index, pairs))
    return service, created.game_id, await store.read(created.game_id)


def build_game(events: int, players: int = 3) -> tuple[Games, str, list[Record]]:
    """A game of `events` events (its creation and placements by every seat in turn), as stored."""
    return asyncio.run(_build(events, players))
