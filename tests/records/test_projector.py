"""The records projector against a real server's Redis and a real SQLite file: its rows equal what each
game's GET /games/{id} says, it resumes from its positions, and it reads archived games' files."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from pathlib import Path

import msgspec
import pytest

from domain import SeatTaken
from projections.records import PlayerRecord, players
from server.protocol.envelope import Envelope, chain_hash, encode
from server.records.database import GameQuery, SqlRecords, sqlite_records
from server.records.projector import Projector
from server.store import Record, UnreadableGame
from server.store.redis import RedisEventStore
from tests.records.games import events, expected_seats, play, stored
from tests.records.play import Played, expected_row, play_game
from tests.support.redis import RedisProcess
from tests.support.servers import ServerProcess

pytestmark = pytest.mark.integration


def rows_of(open_db: Callable[[], SqlRecords], played: list[Played]) -> list[dict[str, object]]:
    """Every ended game the records hold (private ones too), by id."""
    database = open_db()
    try:
        shown = tuple(p.game_id for p in played)
        found = database.games(GameQuery(limit=200, shown=shown))
    finally:
        database.close()
    return sorted((msgspec.json.decode(msgspec.json.encode(r)) for r in found), key=lambda r: r["game_id"])


async def expected(url: str, played: list[Played]) -> list[dict[str, object]]:
    rows = [await expected_row(url, p) for p in played if p.ended]
    return sorted(rows, key=lambda r: str(r["game_id"]))


async def project(
    redis_url: str, open_db: Callable[[], SqlRecords], archives: Path | None = None
) -> Projector:
    store = await RedisEventStore.from_url(redis_url)
    database = open_db()
    try:
        projector = Projector(database, archives)
        await projector.catch_up(store)
        return projector
    finally:
        database.close()
        await store.close()


async def test_the_rows_equal_each_games_final_view_and_unended_games_have_none(
    own_redis: RedisProcess, start_server: Callable[..., ServerProcess], open_db: Callable[[], SqlRecords]
) -> None:
    server = start_server(redis_url=own_redis.url)
    rng = random.Random(43)
    played = [await play_game(server.url, rng, end=n % 4 != 3) for n in range(12)]
    projector = await project(own_redis.url, open_db)
    assert projector.lag.games_behind == 12
    assert rows_of(open_db, played) == await expected(server.url, played)
    assert len(rows_of(open_db, played)) == 9


async def test_a_restarted_projector_folds_only_what_came_after_its_positions(
    own_redis: RedisProcess, start_server: Callable[..., ServerProcess], open_db: Callable[[], SqlRecords]
) -> None:
    server = start_server(redis_url=own_redis.url)
    rng = random.Random(7)
    first = [await play_game(server.url, rng) for _ in range(3)]
    await project(own_redis.url, open_db)
    again = await project(own_redis.url, open_db)
    assert again.lag.games_behind == 0 and again.lag.caught_up
    later = [await play_game(server.url, rng) for _ in range(2)]
    resumed = await project(own_redis.url, open_db)
    assert resumed.lag.games_behind == 2
    assert rows_of(open_db, first + later) == await expected(server.url, first + later)


async def test_players_and_standings_in_the_database_equal_the_pure_fold(
    own_redis: RedisProcess, start_server: Callable[..., ServerProcess], open_db: Callable[[], SqlRecords]
) -> None:
    server = start_server(redis_url=own_redis.url)
    rng = random.Random(11)
    played = [await play_game(server.url, rng) for _ in range(8)]
    await project(own_redis.url, open_db)
    every = tuple(p.game_id for p in played)

    def by_name(records: Iterable[PlayerRecord]) -> list[PlayerRecord]:
        return sorted(records, key=lambda r: r.name.casefold())

    database = open_db()
    try:
        # Over the public games, and over every game once the private ones are shown.
        public = players(database.games(GameQuery(limit=200)))
        assert by_name(database.players(None, None)) == by_name(public.values())
        assert database.player("ADA") == public.get("ada")
        folded = players(database.games(GameQuery(limit=200, shown=every)))
        assert folded != public, "a private game among them"
        assert by_name(database.players(None, None, every)) == by_name(folded.values())
        assert database.player("ADA", every) == folded.get("ada")
        assert database.player("nobody") is None
    finally:
        database.close()


async def test_private_games_are_left_out_unless_shown(
    own_redis: RedisProcess, start_server: Callable[..., ServerProcess], open_db: Callable[[], SqlRecords]
) -> None:
    server = start_server(redis_url=own_redis.url)
    rng = random.Random(5)
    played = [await play_game(server.url, rng) for _ in range(10)]
    await project(own_redis.url, open_db)
    database = open_db()
    try:
        public = {r.game_id for r in database.games(GameQuery(limit=200))}
    finally:
        database.close()
    assert public == {p.game_id for p in played if p.token is None}
    assert any(p.token is not None for p in played)


async def test_an_archived_game_is_read_from_its_file(tmp_path: Path) -> None:
    # A game's envelopes as an archive holds them, then its trailer, which is no envelope.
    log, _ = events(play(random.Random(9), "arch1"))
    lines = stored("arch1", log)
    archives = tmp_path / "archives"
    archives.mkdir()
    (archives / "arch1.ndjson").write_bytes(
        b"\n".join([*lines, b'{"type":"trailer","game_id":"arch1"}']) + b"\n"
    )

    class NoGames:
        async def games(self) -> list[str]:
            return []

        async def read(self, game_id: str, after: int = 0, until: int | None = None) -> list[object]:
            raise AssertionError("an archived game is not read from the store")

    database = sqlite_records(tmp_path / "r.sqlite3")
    try:
        projector = Projector(database, archives)
        assert await projector.catch_up(NoGames()) == 1  # type: ignore[arg-type]
        assert await projector.catch_up(NoGames()) == 0  # type: ignore[arg-type]
        [game] = database.games(GameQuery(shown=("arch1",)))
        assert [(s.seat, s.name, s.prestige, s.rank) for s in game.seats] == expected_seats(log)
    finally:
        database.close()


def test_a_failed_save_leaves_neither_rows_nor_position(open_db: Callable[[], SqlRecords]) -> None:
    from domain import STANDARD, GameCreated, GameEnded, Rank, Score
    from projections.records import step

    progress = step(None, 1, "2026-01-01T00:00:00.000Z", GameCreated("g", ("Ada",), STANDARD))
    progress = step(
        progress, 2, "2026-01-01T00:01:00.000Z", GameEnded(0, (Score(0, (), 0, {}),), (Rank(0, 1, 0),))
    )
    assert progress is not None and progress.result is not None
    broken = msgspec.structs.replace(
        progress, result=msgspec.structs.replace(progress.result, seats=(*progress.result.seats,) * 2)
    )
    database = open_db()
    try:
        with pytest.raises(Exception, match="(?i)unique|duplicate"):
            database.save(broken)  # the second seat row breaks the key: the whole save rolls back
        assert database.positions() == {} and database.games(GameQuery()) == []
        database.save(progress)
        assert list(database.positions()) == ["g"] and len(database.games(GameQuery())) == 1
    finally:
        database.close()


class Streams:
    """Games' stored lines, read as the store reads them (after a version); `unreadable` games raise as a
    store that cannot read them would."""

    def __init__(self, games: dict[str, list[bytes]], unreadable: tuple[str, ...] = ()) -> None:
        self.lines, self.unreadable = games, unreadable

    async def games(self) -> list[str]:
        return sorted(self.lines)

    async def read(self, game_id: str, after: int = 0, until: int | None = None) -> list[Record]:
        if game_id in self.unreadable:
            raise UnreadableGame(game_id, 1, "not an envelope")
        return [Record(n, data) for n, data in enumerate(self.lines[game_id], 1) if n > after]


def _damaged_games() -> tuple[dict[str, list[bytes]], dict[str, tuple[int, str]]]:
    """Games whose streams go wrong in each way a projector meets, each at version 3, and one sound game;
    with what the projector is to say of each."""
    names = ("good", "garbled", "gap", "unlinked", "foreign", "unfoldable")
    games = {name: stored(name, events(play(random.Random(12), name))[0]) for name in names}
    assert min(len(lines) for lines in games.values()) > 4
    games["garbled"][2] = b'{"not": "an envelope"}'
    del games["gap"][2]
    relinked = msgspec.json.decode(games["unlinked"][2])
    relinked["prev"] = "f" * 64
    games["unlinked"][2] = msgspec.json.encode(relinked)
    games["foreign"][2] = games["good"][2]
    seat_nine = Envelope(
        "unfoldable", 3, "2026-01-01T00:00:03.000Z", None, None, SeatTaken(seat=9, name="Zed")
    )
    games["unfoldable"][2] = encode(
        msgspec.structs.replace(seat_nine, prev=chain_hash(games["unfoldable"][1]))
    )
    return games, {
        "garbled": (3, "does not decode"),
        "gap": (3, "version 3 is missing"),
        "unlinked": (3, "does not link"),
        "foreign": (3, "belongs to game 'good'"),
        "unfoldable": (3, "SeatTaken cannot be folded"),
        "gone": (1, "not an envelope"),
    }


async def test_a_damaged_stream_is_left_out_what_came_before_kept_and_the_other_games_go_on(
    tmp_path: Path,
) -> None:
    games, said = _damaged_games()
    database = sqlite_records(tmp_path / "r.sqlite3")
    try:
        projector = Projector(database)
        streams = Streams({**games, "gone": []}, unreadable=("gone",))
        await projector.catch_up(streams)
        assert sorted(projector.damaged) == sorted(said)
        for game_id, (version, why) in said.items():
            damage = projector.damaged[game_id]
            assert (damage.version, why in damage.why) == (version, True), damage
        assert sorted(projector.lag.damaged) == sorted(f"{g} at version {v}" for g, (v, _) in said.items())
        assert [g.game_id for g in database.games(GameQuery(shown=tuple(games)))] == ["good"]
        # What came before the bad envelope is folded and kept: the next pass starts at it.
        positions = database.positions()
        assert {g: positions[g].version for g in said if g in positions} == {
            g: 2 for g in said if g != "gone"
        }
        # A damaged game with nothing else to fold is not behind: the projector is caught up.
        await projector.catch_up(streams)
        assert projector.lag.caught_up and len(projector.damaged) == len(said)

        # Restored (the operator put the right envelopes back), it is folded from where it stopped.
        streams.lines["garbled"] = stored("garbled", events(play(random.Random(12), "garbled"))[0])
        await projector.catch_up(streams)
        assert {g.game_id for g in database.games(GameQuery(shown=tuple(games)))} == {"good", "garbled"}
    finally:
        database.close()


async def test_a_projector_resumed_from_a_position_without_its_chain_hash_checks_from_the_next(
    tmp_path: Path,
) -> None:
    # Positions saved before the chain hash was kept: the first envelope after one is taken as it is.
    log, _ = events(play(random.Random(12), "old"))
    lines = stored("old", log)
    database = sqlite_records(tmp_path / "r.sqlite3")
    try:
        projector = Projector(database)
        await projector.catch_up(Streams({"old": lines[:2]}))
        held = database.positions()["old"].progress
        assert held.head == chain_hash(lines[1])
        database.save(msgspec.structs.replace(held, head=None))
        resumed = Projector(database)
        await resumed.catch_up(Streams({"old": lines}))
        assert resumed.damaged == {} and [g.game_id for g in database.games(GameQuery(shown=("old",)))] == [
            "old"
        ]
    finally:
        database.close()
