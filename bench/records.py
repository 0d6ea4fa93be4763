"""The club records' projector: games projected per second from a cold start, and its lag behind tables.

On a redis-server of its own, `--games` finished games are played through the engine (four players, up
to `--placements` placements decided by the real rules, each envelope signed, then the end). Then:

- cold start: a projector with an empty records database folds every game (`--runs` times, a fresh
  database each): games per second, on SQLite and, with `--records-url postgresql://...` (an empty
  database), on PostgreSQL too;
- lag: `--tables` tables play at once at a human-ish pace (a placement every `--pace` seconds each) while
  a projector follows them with `--interval` between passes: the lag its passes report (seconds behind
  the oldest envelope not yet folded), median and worst, and how long after the last end it has caught up.

    python -m bench records [--quick] [--games 10000] [--placements 30] [--runs 1] [--tables 12]
                            [--records-url postgresql://...]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from itertools import cycle
from pathlib import Path
from typing import Any

from bench.common import RedisServer, say, write_result
from domain import STANDARD, EndGame, PerformanceToken, Place, Rejected, RepairToken, legal_spaces
from domain.messages import Token
from server.engine.games import Games
from server.engine.signing import Signer
from server.records.database import SqlRecords, open_records
from server.records.projector import Projector
from server.store.redis import RedisEventStore

PLAY_AT_ONCE = 50
_TOKENS: list[Token] = [
    *(PerformanceToken(era=era) for era in ("baroque", "classical", "romantic")),
    *(RepairToken(family=family) for family in ("strings", "winds", "percussion_keyboards")),
]


async def _game(service: Games, n: int, placements: int, pace: float = 0.0) -> str:
    moves = cycle((token, pick) for token in _TOKENS for pick in range(8))
    game_id = (await service.create([f"P{n}a", f"P{n}b", f"P{n}c", f"P{n}d"])).game_id
    for i in range(placements):
        token, pick = next(moves)
        spaces = legal_spaces(STANDARD, token)
        try:
            await service.handle(
                game_id, Place(seat=i % 4, id=f"c{i}", token=token, space=spaces[(pick + n) % len(spaces)])
            )
        except Rejected:
            continue  # a space full for this token: the game goes on with the next one
        if pace:
            await asyncio.sleep(pace)
    await service.handle(game_id, EndGame(seat=0, id="end"))
    return game_id


async def _cold(url: str, database: SqlRecords) -> float:
    store = await RedisEventStore.from_url(url)
    try:
        started = time.perf_counter()
        await Projector(database).catch_up(store)
        return time.perf_counter() - started
    finally:
        await store.close()


async def _lag(url: str, signer: Signer, database: SqlRecords, args: argparse.Namespace) -> dict[str, float]:
    store = await RedisEventStore.from_url(url)
    service = Games(store, signer=signer, max_placements=args.placements + 10)
    projector = Projector(database)
    await projector.catch_up(store)  # the cold games first: the lag measured is the tables'
    samples: list[float] = []
    try:
        tables = asyncio.gather(
            *(_game(service, 1_000_000 + n, args.placements, args.pace) for n in range(args.tables))
        )
        while not tables.done():
            await projector.catch_up(store)
            samples.append(projector.lag.seconds)
            await asyncio.sleep(args.interval)
        await tables
        ended = time.perf_counter()
        while True:
            await projector.catch_up(store)
            if projector.lag.caught_up:
                break
        caught_up = time.perf_counter() - ended
    finally:
        await store.close()
    return {
        "lag_median_s": statistics.median(samples) if samples else 0.0,
        "lag_max_s": max(samples, default=0.0),
        "caught_up_after_last_end_s": caught_up,
        "passes": float(len(samples)),
    }


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-records-"))
    signer = Signer.generate()
    databases = {"sqlite": None, **({"postgresql": args.records_url} if args.records_url else {})}
    result: dict[str, Any] = {}
    try:
        with RedisServer() as server:
            store = await RedisEventStore.from_url(server.url)
            service = Games(store, signer=signer, max_placements=args.placements + 10)
            started = time.perf_counter()
            for first in range(0, args.games, PLAY_AT_ONCE):
                last = min(args.games, first + PLAY_AT_ONCE)
                await asyncio.gather(*(_game(service, n, args.placements) for n in range(first, last)))
            await store.close()
            say(f"{args.games} games played in {time.perf_counter() - started:.1f} s")
            for name, url in databases.items():
                runs = []
                for run in range(args.runs):
                    database = open_records(url or f"sqlite:///{work / f'cold-{run}.sqlite3'}", work)
                    database.drop()
                    database = open_records(url or f"sqlite:///{work / f'cold-{run}.sqlite3'}", work)
                    try:
                        seconds = await _cold(server.url, database)
                        # Every game stored: those played above, and the tables of a lag run before.
                        games = len(database.positions())
                        assert games >= args.games
                    finally:
                        database.close()
                    runs.append(games / seconds)
                    say(f"{name}: cold start, {games / seconds:.0f} games/s")
                result[name] = {"cold_games_per_s": statistics.median(runs), "runs": runs}
                database = open_records(url or f"sqlite:///{work / 'lag.sqlite3'}", work)
                try:
                    result[name].update(await _lag(server.url, signer, database, args))
                finally:
                    database.drop()
                    database.close()
                say(f"{name}: lag behind {args.tables} tables: {result[name]}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="a small run for CI")
    parser.add_argument("--games", type=int, default=None, help="finished games stored (default 10000)")
    parser.add_argument("--placements", type=int, default=None, help="placements tried a game (default 30)")
    parser.add_argument("--runs", type=int, default=1, help="cold starts on each database (default 1)")
    parser.add_argument("--tables", type=int, default=12, help="tables playing for the lag (default 12)")
    parser.add_argument("--pace", type=float, default=None, help="seconds between a table's placements")
    parser.add_argument(
        "--interval", type=float, default=None, help="seconds between the projector's passes (default 0.5)"
    )
    parser.add_argument("--records-url", help="an empty PostgreSQL database to measure too")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    args.games = args.games or (200 if args.quick else 10_000)
    args.placements = args.placements if args.placements is not None else (8 if args.quick else 30)
    args.pace = args.pace if args.pace is not None else (0.02 if args.quick else 0.5)
    args.interval = args.interval if args.interval is not None else (0.02 if args.quick else 0.5)
    result = asyncio.run(_main(args))
    write_result("records", {"quick": args.quick, "games": args.games, **result}, argv)
    for name, figures in result.items():
        print(
            f"{name}: {figures['cold_games_per_s']:.0f} games/s from a cold start over {args.games} games; "
            f"lag behind {args.tables} tables: median {figures['lag_median_s']:.2f} s, "
            f"worst {figures['lag_max_s']:.2f} s, caught up {figures['caught_up_after_last_end_s']:.2f} s "
            "after the last end"
        )
    return 0
