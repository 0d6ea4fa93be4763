"""The projector: follows every game's stream (and the archived games' files) into the records database.

There is no global order to follow (a Redis Cluster has none): the projector keeps a position per game,
reads each game's envelopes after it, and saves the fold with the new position in one transaction. An
ended game is never read again. Archived games are read from their NDJSON files, so a game archived (and
deleted from Redis) before the projector saw its end still gets its row.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Protocol

import msgspec

from projections.records import Progress, step
from server.protocol.envelope import decode
from server.records.database import Position, RecordsDatabase
from server.store import Record, UnreadableGame


class Streams(Protocol):
    """What the projector reads of the store."""

    async def games(self) -> list[str]:
        """Ids of every game created."""

    async def read(self, game_id: str, after: int = 0, until: int | None = None) -> list[Record]:
        """A game's envelopes after version `after`."""


class Lag(msgspec.Struct):
    """How far behind the projector was at its last pass: games with envelopes not yet folded, and the
    age of the oldest such envelope it then folded (seconds)."""

    games_behind: int = 0
    seconds: float = 0.0
    caught_up: bool = False
    passes: int = 0
    # Games whose stream could not be read (damaged), left out of the records until they can be.
    damaged: tuple[str, ...] = ()


class Projector:
    """Folds games into a records database, a game at a time."""

    def __init__(self, database: RecordsDatabase, archives: Path | None = None) -> None:
        """Fold into `database` the games of the streams each pass is given and of `archives`' files."""
        self._db = database
        self._archives = archives
        self._positions: dict[str, Position] = database.positions()
        self.lag = Lag()

    async def catch_up(self, streams: Streams) -> int:
        """One pass over `streams`' games and the archives; how many games' positions moved."""
        if self._db.follow():  # a rebuild switched reads to its tables: go on from their positions
            self._positions = self._db.positions()
        moved = 0
        behind = 0
        damaged: list[str] = []
        oldest = 0.0
        for game_id in await streams.games():
            held = self._positions.get(game_id)
            if held is not None and held.ended:
                continue
            try:
                records = await streams.read(game_id, after=held.version if held is not None else 0)
            except (
                UnreadableGame
            ) as exc:  # a damaged stream: the other games go on (orchestra verify says more)
                damaged.append(f"{game_id} at version {exc.version}")
                continue
            if not records:
                continue
            behind += 1
            at = self._fold(held, (record.data for record in records))
            if at is not None:
                moved += 1
                oldest = max(oldest, _age(at))
            await asyncio.sleep(0)  # a long pass still lets the process answer its routes
        moved += self._archived()
        self.lag = Lag(
            games_behind=behind,
            seconds=oldest,
            caught_up=behind == 0,
            passes=self.lag.passes + 1,
            damaged=tuple(damaged),
        )
        return moved

    def _fold(self, held: Position | None, lines: Iterable[bytes]) -> str | None:
        """Fold envelopes after `held` and save; the date of the first envelope folded (None: none)."""
        progress: Progress | None = held.progress if held is not None else None
        after = held.version if held is not None else 0
        first: str | None = None
        for data in lines:
            envelope = decode(data)
            if envelope.version <= after:
                continue
            first = envelope.at if first is None else first
            progress = step(progress, envelope.version, envelope.at, envelope.event)
            after = envelope.version
        if progress is None or first is None:
            return None
        self._db.save(progress)
        self._positions[progress.game_id] = Position(
            version=progress.version, ended=progress.result is not None, progress=progress
        )
        return first

    def _archived(self) -> int:
        if self._archives is None or not self._archives.is_dir():
            return 0
        moved = 0
        for path in sorted(self._archives.glob("*.ndjson")):
            held = self._positions.get(path.stem)
            if held is not None and held.ended:
                continue
            lines = [line for line in path.read_bytes().splitlines() if _is_envelope(line)]
            if self._fold(held, lines) is not None:
                moved += 1
        return moved


def _age(at: str) -> float:
    """Seconds since an envelope's date (2026-01-31T12:00:00.000Z)."""
    return max(0.0, time.time() - datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp())


def _is_envelope(line: bytes) -> bool:
    """An archive's lines are its envelopes, then maybe its trailer, which is no envelope."""
    try:
        decode(line)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return False
    return True
