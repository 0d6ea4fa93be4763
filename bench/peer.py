"""Store: our RedisEventStore vs the `eventsourcing` library's recorders (POPO in memory, SQLite).

The same event sequences (the stored envelopes of real games, made by our command service) are appended
one event per call, as a server appends one command at a time, then every game is loaded back whole.
Durability, side by side:

- ours on Redis, appendonly no: acknowledged writes live in Redis's memory only;
- ours on Redis, appendonly yes + appendfsync always (what deploy/ and the embedded Redis use): every
  write is fsynced before Redis answers;
- eventsourcing POPO: a Python dict in this process, nothing durable;
- eventsourcing SQLite (WAL mode, as the library sets it) with synchronous=FULL (every commit fsyncs the
  WAL) and synchronous=NORMAL (the WAL is fsynced only at checkpoints; a power loss may lose the last
  commits, a process crash does not). The library has no option for this pragma: its connection pool is
  subclassed to set it on every connection.

Our store talks to Redis over loopback TCP (a round trip per append); the recorders run in-process.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.popo import POPOApplicationRecorder
from eventsourcing.sqlite import (
    SQLiteApplicationRecorder,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteDatastore,
)

from bench.common import RedisServer, ratio, say, write_result
from bench.games import build_game
from server.redis_store import RedisEventStore


async def ours(url: str, games: list[list[bytes]], grouped: bool = False) -> dict[str, Any]:
    """Append every game's commands to our store, then load every game back.

    One append per call, game after game; or `grouped`: one writer per game, all at once, each round
    appending every game's next command in one call (`append_many`), as the server's group commit does
    when the games each have a command waiting.
    """
    store = await RedisEventStore.from_url(url, cluster=False)
    try:
        ids = [f"peer-{uuid.uuid4().hex[:12]}" for _ in games]
        for game_id, datas in zip(ids, games, strict=True):
            await store.create(game_id, datas[0], {})
        appends = 0
        started = time.perf_counter()
        if grouped:
            for version in range(1, max(len(d) for d in games)):
                batch = [
                    (game_id, version, [datas[version]], f"0:c{version}")
                    for game_id, datas in zip(ids, games, strict=True)
                    if version < len(datas)
                ]
                results = await store.append_many(batch)
                assert all(not isinstance(r, Exception) for r in results), results
                appends += len(batch)
        else:
            for game_id, datas in zip(ids, games, strict=True):
                for version, data in enumerate(datas[1:], start=1):
                    await store.append(game_id, version, [data], f"0:c{version}")
                    appends += 1
        append_seconds = time.perf_counter() - started
        started = time.perf_counter()
        loaded = 0
        for game_id in ids:
            loaded += len(await store.read(game_id))
        load_seconds = time.perf_counter() - started
    finally:
        await store.close()
    return _rates(appends, append_seconds, loaded, load_seconds)


def recorder_grouped(recorder: Any, games: list[list[bytes]]) -> dict[str, Any]:
    """The same rounds for a recorder: each round's events (one per game) in one `insert_events` call,
    that is one transaction, one commit."""
    ids = [uuid.uuid4() for _ in games]
    appends = 0
    started = time.perf_counter()
    for version in range(1, max(len(d) for d in games) + 1):
        batch = [
            StoredEvent(originator, version, "orchestra:Envelope", datas[version - 1])
            for originator, datas in zip(ids, games, strict=True)
            if version <= len(datas)
        ]
        recorder.insert_events(batch)
        appends += len(batch)
    append_seconds = time.perf_counter() - started
    started = time.perf_counter()
    loaded = 0
    for originator in ids:
        loaded += len(recorder.select_events(originator))
    load_seconds = time.perf_counter() - started
    return _rates(appends, append_seconds, loaded, load_seconds)


def _rates(appends: int, append_seconds: float, loaded: int, load_seconds: float) -> dict[str, Any]:
    return {
        "appends": appends,
        "append_seconds": append_seconds,
        "appends_per_s": appends / append_seconds,
        "events_loaded": loaded,
        "load_seconds": load_seconds,
        "loaded_events_per_s": loaded / load_seconds,
    }


def recorder_run(recorder: Any, games: list[list[bytes]]) -> dict[str, Any]:
    ids = [uuid.uuid4() for _ in games]
    appends = 0
    started = time.perf_counter()
    for originator, datas in zip(ids, games, strict=True):
        for version, data in enumerate(datas, start=1):
            recorder.insert_events([StoredEvent(originator, version, "orchestra:Envelope", data)])
            appends += 1
    append_seconds = time.perf_counter() - started
    started = time.perf_counter()
    loaded = 0
    for originator in ids:
        loaded += len(recorder.select_events(originator))
    load_seconds = time.perf_counter() - started
    return _rates(appends, append_seconds, loaded, load_seconds)


def _pool_class(synchronous: str) -> type[SQLiteConnectionPool]:
    class Pool(SQLiteConnectionPool):
        def _create_connection(self) -> SQLiteConnection:
            connection = super()._create_connection()
            connection._sqlite_conn.execute(f"PRAGMA synchronous={synchronous}")
            return connection

    return Pool


def sqlite_recorder(directory: Path, synchronous: str) -> tuple[SQLiteApplicationRecorder, SQLiteDatastore]:
    path = str(directory / f"events-{synchronous.lower()}.sqlite")
    datastore = SQLiteDatastore(path)
    datastore.pool.close()
    datastore.pool = _pool_class(synchronous)(db_name=path)
    recorder = SQLiteApplicationRecorder(datastore)
    recorder.create_table()
    return recorder, datastore


def _check_synchronous(datastore: SQLiteDatastore) -> int:
    with datastore.get_connection(commit=False) as connection:
        raw: sqlite3.Connection = connection._sqlite_conn
        value = raw.execute("PRAGMA synchronous").fetchone()[0]
        return int(value)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="CI size")
    parser.add_argument("--games", type=int, default=20)
    parser.add_argument("--events", type=int, default=500, help="events per game")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    game_count, events = (3, 100) if args.quick else (args.games, args.events)
    _, _, records = build_game(events)
    datas = [r.data for r in records]
    games = [datas for _ in range(game_count)]
    results: dict[str, Any] = {}
    for fsync in (False, True):
        with RedisServer(fsync_always=fsync) as redis:
            label = "ours_redis_fsync_always" if fsync else "ours_redis_no_aof"
            results[label] = {"durability": redis.durability, **asyncio.run(ours(redis.url, games))}
            results[label + "_grouped"] = {
                "durability": redis.durability,
                **asyncio.run(ours(redis.url, games, grouped=True)),
            }
    results["eventsourcing_popo"] = {
        "durability": "none (process memory)",
        **recorder_run(POPOApplicationRecorder(), games),
    }
    with tempfile.TemporaryDirectory(prefix="bench-sqlite-") as directory:
        for synchronous in ("FULL", "NORMAL"):
            recorder, datastore = sqlite_recorder(Path(directory), synchronous)
            level = _check_synchronous(datastore)
            results[f"eventsourcing_sqlite_{synchronous.lower()}"] = {
                "durability": f"SQLite file, WAL, synchronous={synchronous} (pragma reads {level})",
                **recorder_run(recorder, games),
            }
            datastore.close()
            (Path(directory) / "grouped").mkdir(exist_ok=True)
            recorder, datastore = sqlite_recorder(Path(directory) / "grouped", synchronous)
            results[f"eventsourcing_sqlite_{synchronous.lower()}_grouped"] = {
                "durability": f"SQLite file, WAL, synchronous={synchronous}",
                **recorder_grouped(recorder, games),
            }
            datastore.close()
    for name, row in results.items():
        say(f"{name}: {row['appends_per_s']:.0f} appends/s, {row['loaded_events_per_s']:.0f} events loaded/s")
    appends = {name: row["appends_per_s"] for name, row in results.items()}
    summary = {
        "appends_per_s": appends,
        "loaded_events_per_s": {name: row["loaded_events_per_s"] for name, row in results.items()},
        "ratio_ours_fsync_always_to_sqlite_full": ratio(
            appends["ours_redis_fsync_always"], appends["eventsourcing_sqlite_full"]
        ),
        "ratio_ours_no_aof_to_sqlite_normal": ratio(
            appends["ours_redis_no_aof"], appends["eventsourcing_sqlite_normal"]
        ),
        "ratio_ours_no_aof_to_popo": ratio(appends["ours_redis_no_aof"], appends["eventsourcing_popo"]),
        "ratio_grouped_ours_fsync_always_to_sqlite_full": ratio(
            appends["ours_redis_fsync_always_grouped"], appends["eventsourcing_sqlite_full_grouped"]
        ),
        "goal": "our store appends faster than eventsourcing's SQLite recorder (at equal durability)",
        "goal_met": appends["ours_redis_fsync_always"] > appends["eventsourcing_sqlite_full"],
        "goal_met_grouped": appends["ours_redis_fsync_always_grouped"]
        > appends["eventsourcing_sqlite_full_grouped"],
        "goal_met_at_lower_durability": appends["ours_redis_no_aof"] > appends["eventsourcing_sqlite_normal"],
    }
    path = write_result(
        "store",
        {
            "quick": args.quick,
            "games": game_count,
            "events_per_game": events,
            "summary": summary,
            "results": results,
        },
        argv,
    )
    print(
        "store: ours (fsync always) / SQLite FULL = "
        f"{summary['ratio_ours_fsync_always_to_sqlite_full']:.2f}, "
        f"ours (no AOF) / SQLite NORMAL = {summary['ratio_ours_no_aof_to_sqlite_normal']:.2f}; "
        "grouped, fsync always / SQLite FULL = "
        f"{summary['ratio_grouped_ours_fsync_always_to_sqlite_full']:.2f}; "
        f"wrote {path}"
    )
    return 0
