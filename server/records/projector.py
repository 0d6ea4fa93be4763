"""The projector: follows every game's stream (and the archived games' files) into the records database.

There is no global order to follow (a Redis Cluster has none): the projector keeps a position per game,
reads each game's envelopes after it, and saves the fold with the new position in one transaction. An
ended game is never read again. Archived games are read from their NDJSON files, so a game archived (and
deleted from Redis) before the projector saw its end still gets its row.

Each envelope is checked before it is folded: it decodes, belongs to the game, has the next version and
links to the one before it (its `prev` is that envelope's chain hash). A game whose stream fails a check,
or whose events the fold cannot take, is damaged: what came before the bad envelope is saved, the game is
left out of the records until an operator restores it, and the other games go on. Signatures are not
checked here (the projector holds no keys): `orchestra verify` checks them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Protocol

import msgspec

from domain import GameCreated
from projections.records import Progress, step
from server.engine.trailer import TRAILER_START
from server.protocol.envelope import GENESIS, Envelope, chain_hash, decode
from server.records.database import Position, RecordsDatabase
from server.store import Record, UnreadableGame

_Bad = (msgspec.DecodeError, msgspec.ValidationError)


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
    # Games whose stream could not be read or folded at this pass (damaged), each "<id> at version <n>",
    # left out of the records until they can be.
    damaged: tuple[str, ...] = ()


class Damage(msgspec.Struct, frozen=True):
    """Why a game's stream cannot be folded: the first version that fails, and what is wrong with it."""

    game_id: str
    version: int
    why: str

    def __str__(self) -> str:
        return f"{self.game_id} at version {self.version}: {self.why}"


class Projector:
    """Folds games into a records database, a game at a time."""

    def __init__(self, database: RecordsDatabase, archives: Path | None = None) -> None:
        """Fold into `database` the games of the streams each pass is given and of `archives`' files."""
        self._db = database
        self._archives = archives
        self._positions: dict[str, Position] = database.positions()
        self.lag = Lag()
        # Every game found damaged since this projector started, in the order found, each once (a game
        # restored since stays: it was damaged once).
        self.damaged: dict[str, Damage] = {}

    async def catch_up(self, streams: Streams) -> int:
        """One pass over `streams`' games and the archives; how many games' positions moved."""
        if self._db.follow():  # a rebuild switched reads to its tables: go on from their positions
            self._positions = self._db.positions()
        moved = 0
        behind = 0
        damaged: list[Damage] = []
        oldest = 0.0
        for game_id in await streams.games():
            held = self._positions.get(game_id)
            if held is not None and held.ended:
                continue
            try:
                records = await streams.read(game_id, after=held.version if held is not None else 0)
            except UnreadableGame as exc:
                damaged.append(Damage(game_id, exc.version, exc.detail))
                continue
            if not records:
                continue
            at, damage = self._fold(game_id, held, (record.data for record in records))
            if at is not None:
                moved += 1
                oldest = max(oldest, _age(at))
            if damage is not None:
                damaged.append(damage)
            if at is not None or damage is None:  # a damaged game with nothing to fold is not behind
                behind += 1
            await asyncio.sleep(0)  # a long pass still lets the process answer its routes
        archived, damaged_archives = self._archived()
        moved += archived
        for damage in (*damaged, *damaged_archives):
            self.damaged.setdefault(damage.game_id, damage)
        self.lag = Lag(
            games_behind=behind,
            seconds=oldest,
            caught_up=behind == 0,
            passes=self.lag.passes + 1,
            damaged=tuple(f"{d.game_id} at version {d.version}" for d in (*damaged, *damaged_archives)),
        )
        return moved

    def _fold(
        self, game_id: str, held: Position | None, lines: Iterable[bytes]
    ) -> tuple[str | None, Damage | None]:
        """Fold envelopes after `held` and save: the date of the first envelope folded (None: none), and
        the damage that stopped the fold (None: none), what came before it saved."""
        progress: Progress | None = held.progress if held is not None else None
        after = held.version if held is not None else 0
        head = progress.head if progress is not None else GENESIS
        first: str | None = None
        damage: Damage | None = None
        for data in lines:
            try:
                envelope = decode(data)
            except _Bad as exc:
                damage = Damage(game_id, after + 1, f"the envelope does not decode: {exc}")
                break
            if envelope.version <= after:
                continue
            why = _link_problem(game_id, envelope, after, head)
            folded: Progress | None = None
            if why is None:
                try:
                    folded = step(progress, envelope.version, envelope.at, envelope.event)
                except Exception as exc:  # the fold is pure: only its input can make it fail
                    why = f"its {type(envelope.event).__name__} cannot be folded: {exc!r}"
                else:
                    if folded is None:
                        why = "the game does not begin with GameCreated"
            if why is not None or folded is None:
                damage = Damage(game_id, after + 1, why or "cannot be folded")
                break
            head = chain_hash(data)
            progress = folded
            first = envelope.at if first is None else first
            after = envelope.version
        if progress is None or first is None:
            return None, damage
        progress = msgspec.structs.replace(progress, head=head)  # once: a game's fold is its hot loop
        self._db.save(progress)
        self._positions[progress.game_id] = Position(
            version=progress.version, ended=progress.result is not None, progress=progress
        )
        return first, damage

    def _archived(self) -> tuple[int, list[Damage]]:
        if self._archives is None or not self._archives.is_dir():
            return 0, []
        moved = 0
        damaged: list[Damage] = []
        for path in sorted(self._archives.glob("*.ndjson")):
            held = self._positions.get(path.stem)
            if held is not None and held.ended:
                continue
            lines = path.read_bytes().splitlines()
            if lines and lines[-1].startswith(TRAILER_START):
                lines.pop()  # the export's trailer: no envelope
            at, damage = self._fold(path.stem, held, lines)
            moved += at is not None
            if damage is not None:
                damaged.append(damage)
        return moved, damaged


def _link_problem(game_id: str, envelope: Envelope, after: int, head: str | None) -> str | None:
    """What keeps `envelope` from following version `after` (whose chain hash is `head`, None: not
    known) in `game_id`'s stream; None when it follows."""
    if envelope.game_id != game_id:
        return f"the envelope belongs to game {envelope.game_id!r}"
    if envelope.version != after + 1:
        return f"version {after + 1} is missing: version {envelope.version} follows version {after}"
    if head is not None and envelope.prev != head:
        return "the envelope does not link to the one before it (its prev is not that one's hash)"
    if isinstance(envelope.event, GameCreated):
        if after > 0:
            return "a second GameCreated"
        if envelope.event.game_id != game_id:
            return f"its GameCreated creates game {envelope.event.game_id!r}"
    return None


def _age(at: str) -> float:
    """Seconds since an envelope's date (2026-01-31T12:00:00.000Z)."""
    return max(0.0, time.time() - datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp())
