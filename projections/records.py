"""Club records: folds of a game's events into its result row, and of results into players and standings.

A game's `Progress` is the fold's whole state at a version, small enough to be stored beside the
projector's position, so a projector resumes a game mid-stream without reading it again. Names are
compared as domain.names compares them (NFKC casefold); wins count rank 1, so a tie for first is a win
for each seat sharing it (rules.md section 7).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

import msgspec

from domain import (
    ChairClaimed,
    ChairStolen,
    Event,
    GameCreated,
    GameEnded,
    PlacedBelowLine,
    PlacementTakenBack,
    SeatClosed,
    SeatTaken,
)


class SeatResult(msgspec.Struct, frozen=True, gc=False):
    """One seat of an ended game: its player (None: never named), prestige and rank (None: closed)."""

    seat: int
    name: str | None
    prestige: int
    rank: int | None


class GameResult(msgspec.Struct, frozen=True, gc=False):
    """An ended game as the records keep it."""

    game_id: str
    layout: str
    private: bool
    created_at: str
    ended_at: str
    placements: int
    version: int
    seats: tuple[SeatResult, ...]


class Progress(msgspec.Struct, frozen=True, gc=False):
    """A game's fold at `version`: what its result needs, and the result once it has ended."""

    game_id: str
    layout: str
    private: bool
    created_at: str
    names: tuple[str | None, ...]
    closed: tuple[int, ...]
    placements: int
    version: int
    result: GameResult | None = None
    # The chain hash of the stored envelope at `version`, which the next one's `prev` must name: set by
    # whoever folds stored bytes (the fold sees events only); None when not known.
    head: str | None = None


class PlayerRecord(msgspec.Struct, frozen=True, gc=False):
    """A player across games: games played, wins, average and best prestige, the last game's end."""

    name: str
    games: int
    wins: int
    average_prestige: float
    best_prestige: int
    last_played: str


_PLACEMENTS = (ChairClaimed, ChairStolen, PlacedBelowLine)


def step(progress: Progress | None, version: int, at: str, event: Event) -> Progress | None:
    """The fold after `event` (the game's envelope `version`, dated `at`); None before GameCreated."""
    if isinstance(event, GameCreated):
        return Progress(
            game_id=event.game_id,
            layout=event.layout.name,
            private=event.spectators != "public",
            created_at=at,
            names=event.players,
            closed=event.closed,
            placements=0,
            version=version,
        )
    if progress is None:
        return None
    if isinstance(event, _PLACEMENTS):
        return msgspec.structs.replace(progress, placements=progress.placements + 1, version=version)
    if isinstance(event, PlacementTakenBack):
        return msgspec.structs.replace(progress, placements=progress.placements - 1, version=version)
    if isinstance(event, SeatTaken):
        names = list(progress.names)
        names[event.seat] = event.name
        return msgspec.structs.replace(progress, names=tuple(names), version=version)
    if isinstance(event, SeatClosed):
        return msgspec.structs.replace(progress, closed=(*progress.closed, event.seat), version=version)
    if isinstance(event, GameEnded):
        ranks = {rank.seat: rank.rank for rank in event.ranking}
        seats = tuple(
            SeatResult(
                seat=score.seat,
                name=progress.names[score.seat],
                prestige=score.prestige,
                rank=ranks.get(score.seat),
            )
            for score in event.scores
        )
        result = GameResult(
            game_id=progress.game_id,
            layout=progress.layout,
            private=progress.private,
            created_at=progress.created_at,
            ended_at=at,
            placements=progress.placements,
            version=version,
            seats=seats,
        )
        return msgspec.structs.replace(progress, version=version, result=result)
    return msgspec.structs.replace(progress, version=version)


def game_result(envelopes: Iterable[tuple[int, str, Event]]) -> GameResult | None:
    """The result of a game from its (version, at, event) envelopes; None while it has not ended."""
    progress: Progress | None = None
    for version, at, event in envelopes:
        progress = step(progress, version, at, event)
    return progress.result if progress is not None else None


def name_key(name: str) -> str:
    """The form two names are compared in (case and width ignored, as domain.names compares them)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFC", name).strip().casefold())


def players(results: Iterable[GameResult]) -> dict[str, PlayerRecord]:
    """Every named player of ranked seats, by `name_key`; the name shown is the newest game's."""
    rows: dict[str, list[tuple[str, str, int, int]]] = {}
    for result in results:
        for seat in result.seats:
            if seat.name is None or seat.rank is None:
                continue
            rows.setdefault(name_key(seat.name), []).append(
                (result.ended_at, seat.name, seat.prestige, seat.rank)
            )
    records: dict[str, PlayerRecord] = {}
    for key, played in rows.items():
        played.sort()
        records[key] = PlayerRecord(
            name=played[-1][1],
            games=len(played),
            wins=sum(1 for row in played if row[3] == 1),
            average_prestige=round(sum(row[2] for row in played) / len(played), 2),
            best_prestige=max(row[2] for row in played),
            last_played=played[-1][0],
        )
    return records


def standings(records: Iterable[PlayerRecord]) -> list[tuple[int, PlayerRecord]]:
    """Players by wins, then average prestige, highest first, each with its place: equal wins and equal
    average share a place and the next place skips (as ranks do); within a place, by name."""
    ordered = sorted(records, key=lambda r: (-r.wins, -r.average_prestige, name_key(r.name)))
    table: list[tuple[int, PlayerRecord]] = []
    for index, record in enumerate(ordered):
        before = table[-1] if table else None
        same = before is not None and (before[1].wins, before[1].average_prestige) == (
            record.wins,
            record.average_prestige,
        )
        table.append((before[0] if same and before is not None else index + 1, record))
    return table
