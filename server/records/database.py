"""The records database: games, seats and the projector's position per game, in SQLite or PostgreSQL.

Each game's row, seats and position (with the fold's `Progress` at that position) are written in one
transaction, so a projector killed at any point resumes exactly where its last commit left it: nothing is
counted twice (rows are keyed by game and seat) and nothing is missed (the position never runs ahead of the
rows). The SQL is the common subset of both databases; only the placeholder differs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import msgspec

from projections.records import GameResult, PlayerRecord, Progress, SeatResult, name_key

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS records_games (game_id TEXT PRIMARY KEY, layout TEXT NOT NULL, "
    "private INTEGER NOT NULL, created_at TEXT NOT NULL, ended_at TEXT NOT NULL, "
    "placements INTEGER NOT NULL, version INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS records_games_ended ON records_games (ended_at, game_id)",
    "CREATE TABLE IF NOT EXISTS records_seats (game_id TEXT NOT NULL, seat INTEGER NOT NULL, name TEXT, "
    "name_key TEXT, prestige INTEGER NOT NULL, rank INTEGER, PRIMARY KEY (game_id, seat))",
    "CREATE INDEX IF NOT EXISTS records_seats_player ON records_seats (name_key)",
    "CREATE TABLE IF NOT EXISTS records_positions (game_id TEXT PRIMARY KEY, version INTEGER NOT NULL, "
    "ended INTEGER NOT NULL, progress TEXT NOT NULL)",
)
META = "CREATE TABLE IF NOT EXISTS records_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)"
TABLES = ("records_games", "records_seats", "records_positions")
# The most games one page of GET /records/games holds.
MAX_PAGE = 200

_encode = msgspec.json.encode
_decode_progress = msgspec.json.Decoder(Progress).decode


class Position(msgspec.Struct, frozen=True):
    """Where the projector is in a game: its version, whether it has ended, and the fold there."""

    version: int
    ended: bool
    progress: Progress


class GameQuery(msgspec.Struct, frozen=True):
    """A page of ended games: filters, the page size, and the (ended_at, game_id) cursor to go on after."""

    player: str | None = None
    since: str | None = None
    until: str | None = None
    layout: str | None = None
    limit: int = 50
    after: tuple[str, str] | None = None
    shown: tuple[str, ...] = ()  # private games asked for with their watch token


class RecordsDatabase(Protocol):
    """What the projector writes and the routes read."""

    def positions(self) -> dict[str, Position]:
        """The projector's position in every game it has read."""

    def follow(self) -> bool:
        """Move to the version reads are switched to; whether it moved."""

    def save(self, progress: Progress) -> None:
        """The game's position and, once it has ended, its rows: in one transaction."""

    def games(self, query: GameQuery) -> list[GameResult]:
        """Ended games, newest first, as `query` asks."""

    def player(self, name: str, shown: Sequence[str] = ()) -> PlayerRecord | None:
        """A player's record by name (compared as the name rules compare names), None when unknown; over
        the public games and the private ones `shown` names."""

    def players(self, since: str | None, until: str | None, shown: Sequence[str] = ()) -> list[PlayerRecord]:
        """Every player's record over the games ended in [since, until): public, and private `shown`."""

    def close(self) -> None:
        """Close the connection."""


class SqlRecords:
    """The records in a DB-API connection whose placeholder is `mark` ("?" for SQLite, "%s" for psycopg)."""

    def __init__(self, connection: Any, mark: str, version: int | None = None) -> None:
        """Use `connection` (the tables created if missing): the version reads are switched to, followed
        by `follow`, or the given `version` (a rebuild's, until it `switch`es reads to it)."""
        self._db = connection
        self._mark = mark
        with self._transaction() as cursor:
            cursor.execute(META)
        self._pinned = version is not None
        self.version = 1  # records_meta's own name is the same in every version
        self.version = version if version is not None else self.current()
        self._create()

    def _create(self) -> None:
        with self._transaction() as cursor:
            for statement in SCHEMA:
                cursor.execute(self._sql(statement))

    def current(self) -> int:
        """The version of the tables reads are switched to (1 until a rebuild switches)."""
        rows = self._rows("SELECT value FROM records_meta WHERE name = 'version'")
        return int(rows[0][0]) if rows else 1

    def follow(self) -> bool:
        """Move to the version reads are switched to, if a rebuild switched them; whether it moved."""
        if self._pinned:
            return False
        now = self.current()
        if now == self.version:
            return False
        self.version = now
        return True

    def switch(self) -> None:
        """Switch reads (every follower's next `follow`) to this version."""
        with self._transaction() as cursor:
            cursor.execute("DELETE FROM records_meta WHERE name = 'version'")
            cursor.execute(self._sql("INSERT INTO records_meta VALUES ('version', ?)"), (str(self.version),))

    def _sql(self, text: str) -> str:
        if self.version != 1:
            for table in TABLES:
                text = text.replace(table, table.replace("records_", f"records_v{self.version}_"))
        return text.replace("?", self._mark)

    def _transaction(self) -> Any:
        return _Transaction(self._db)

    def _rows(self, text: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._transaction() as cursor:
            cursor.execute(self._sql(text), tuple(params))
            return list(cursor.fetchall())

    def positions(self) -> dict[str, Position]:
        """The projector's position in every game it has read."""
        rows = self._rows("SELECT game_id, version, ended, progress FROM records_positions")
        return {
            game_id: Position(version=version, ended=bool(ended), progress=_decode_progress(progress))
            for game_id, version, ended, progress in rows
        }

    def save(self, progress: Progress) -> None:
        """The game's position and, once it has ended, its rows: in one transaction."""
        result = progress.result
        with self._transaction() as cursor:
            cursor.execute(self._sql("DELETE FROM records_positions WHERE game_id = ?"), (progress.game_id,))
            cursor.execute(
                self._sql("INSERT INTO records_positions VALUES (?, ?, ?, ?)"),
                (progress.game_id, progress.version, int(result is not None), _encode(progress).decode()),
            )
            if result is None:
                return
            cursor.execute(self._sql("DELETE FROM records_seats WHERE game_id = ?"), (result.game_id,))
            cursor.execute(self._sql("DELETE FROM records_games WHERE game_id = ?"), (result.game_id,))
            cursor.execute(
                self._sql("INSERT INTO records_games VALUES (?, ?, ?, ?, ?, ?, ?)"),
                (
                    result.game_id,
                    result.layout,
                    int(result.private),
                    result.created_at,
                    result.ended_at,
                    result.placements,
                    result.version,
                ),
            )
            for seat in result.seats:
                cursor.execute(
                    self._sql("INSERT INTO records_seats VALUES (?, ?, ?, ?, ?, ?)"),
                    (
                        result.game_id,
                        seat.seat,
                        seat.name,
                        name_key(seat.name) if seat.name is not None else None,
                        seat.prestige,
                        seat.rank,
                    ),
                )

    def games(self, query: GameQuery) -> list[GameResult]:
        """Ended games, newest first (by end, then id), as `query` asks."""
        visible, params = _visible(query.shown)
        where = ["1 = 1", visible]
        if query.player is not None:
            where.append("g.game_id IN (SELECT game_id FROM records_seats WHERE name_key = ?)")
            params.append(name_key(query.player))
        if query.since is not None:
            where.append("g.ended_at >= ?")
            params.append(query.since)
        if query.until is not None:
            where.append("g.ended_at < ?")
            params.append(query.until)
        if query.layout is not None:
            where.append("g.layout = ?")
            params.append(query.layout)
        if query.after is not None:
            where.append("(g.ended_at < ? OR (g.ended_at = ? AND g.game_id < ?))")
            params += [query.after[0], query.after[0], query.after[1]]
        games = self._rows(
            "SELECT g.game_id, g.layout, g.private, g.created_at, g.ended_at, g.placements, g.version "
            f"FROM records_games g WHERE {' AND '.join(where)} "
            "ORDER BY g.ended_at DESC, g.game_id DESC LIMIT ?",
            [*params, min(query.limit, MAX_PAGE)],
        )
        if not games:
            return []
        ids = [row[0] for row in games]
        seats: dict[str, list[SeatResult]] = {}
        for game_id, seat, name, prestige, rank in self._rows(
            "SELECT game_id, seat, name, prestige, rank FROM records_seats "
            f"WHERE game_id IN ({', '.join('?' for _ in ids)}) ORDER BY game_id, seat",
            ids,
        ):
            seats.setdefault(game_id, []).append(
                SeatResult(seat=seat, name=name, prestige=prestige, rank=rank)
            )
        return [
            GameResult(
                game_id=row[0],
                layout=row[1],
                private=bool(row[2]),
                created_at=row[3],
                ended_at=row[4],
                placements=row[5],
                version=row[6],
                seats=tuple(seats.get(row[0], ())),
            )
            for row in games
        ]

    def player(self, name: str, shown: Sequence[str] = ()) -> PlayerRecord | None:
        """A player's record by name (compared as the name rules compare names), None when unknown; over
        the public games and the private ones `shown` names."""
        visible, params = _visible(shown)
        found = self._players(f" AND {visible} AND s.name_key = ?", [*params, name_key(name)])
        return found[0] if found else None

    def players(self, since: str | None, until: str | None, shown: Sequence[str] = ()) -> list[PlayerRecord]:
        """Every player's record over the games ended in [since, until): the public games and the private
        ones `shown` names."""
        visible, params = _visible(shown)
        where = f" AND {visible}"
        if since is not None:
            where += " AND g.ended_at >= ?"
            params.append(since)
        if until is not None:
            where += " AND g.ended_at < ?"
            params.append(until)
        return self._players(where, params)

    def _players(self, where: str, params: list[Any]) -> list[PlayerRecord]:
        # A private game counts only where its token was given: a record or standings over a narrow span
        # of dates would otherwise tell who played it and who won.
        rows = self._rows(
            "SELECT s.name_key, COUNT(*), SUM(CASE WHEN s.rank = 1 THEN 1 ELSE 0 END), "
            "SUM(s.prestige), MAX(s.prestige), MAX(g.ended_at) "
            "FROM records_seats s JOIN records_games g ON g.game_id = s.game_id "
            f"WHERE s.name_key IS NOT NULL AND s.rank IS NOT NULL{where} GROUP BY s.name_key",
            params,
        )
        names = dict(
            self._rows(
                "SELECT s.name_key, s.name FROM records_seats s "
                "JOIN records_games g ON g.game_id = s.game_id "
                f"WHERE s.name_key IS NOT NULL AND s.rank IS NOT NULL{where} ORDER BY g.ended_at, g.game_id",
                params,
            )
        )
        return [
            PlayerRecord(
                name=names[key],
                games=int(games),
                wins=int(wins),
                average_prestige=round(int(total) / int(games), 2),
                best_prestige=int(best),
                last_played=last,
            )
            for key, games, wins, total, best, last in rows
        ]

    def drop(self) -> None:
        """Drop the records' tables (a rebuild's or a test's)."""
        with self._transaction() as cursor:
            for table in TABLES:
                cursor.execute(self._sql(f"DROP TABLE IF EXISTS {table}"))

    def close(self) -> None:
        """Close the connection."""
        self._db.close()


def _visible(shown: Sequence[str]) -> tuple[str, list[Any]]:
    """The condition on `g` (records_games) of the games a reader sees: public, or private and `shown`."""
    if not shown:
        return "g.private = 0", []
    return f"(g.private = 0 OR g.game_id IN ({', '.join('?' for _ in shown)}))", list(shown)


class _Transaction:
    """A cursor whose work commits on a clean exit and rolls back on an exception."""

    def __init__(self, connection: Any) -> None:
        self._db = connection
        self._cursor: Any = None

    def __enter__(self) -> Any:
        self._cursor = self._db.cursor()
        return self._cursor

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        try:
            if kind is None:
                self._db.commit()
            else:
                self._db.rollback()
        finally:
            self._cursor.close()


def sqlite_records(path: Path, version: int | None = None) -> SqlRecords:
    """The records in the SQLite file at `path` (created if missing; WAL, so reads go on during writes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    return SqlRecords(connection, "?", version)


def open_records(url: str | None, data_dir: Path, version: int | None = None) -> SqlRecords:
    """The records database of `url` (postgresql://..., or sqlite:///path), else SQLite in the data dir.

    Raises: ValueError for a URL of another kind; RuntimeError when PostgreSQL's driver is missing.
    """
    if url is None:
        return sqlite_records(data_dir / "records.sqlite3", version)
    if url.startswith("sqlite:///"):
        return sqlite_records(Path(url.removeprefix("sqlite:///")), version)
    if url.startswith(("postgresql://", "postgres://")):
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - the extra not installed
            raise RuntimeError(
                "PostgreSQL records need psycopg: pip install 'orchestra-server[records-pg]'"
            ) from exc
        return SqlRecords(psycopg.connect(url), "%s", version)
    raise ValueError(f"the records URL must be postgresql://... or sqlite:///path, not {url!r}")
