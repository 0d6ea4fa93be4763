"""Replay: folding a stored game vs decoding its envelopes alone; rebuilding stored games from Redis.

Fold: `server.engine.envelope.decode` + `projections.project` over a game's stored envelopes (and the server's
own path, `FoldedGame.fold`, which adds the chain hash), in events per second, against
`server.engine.envelope.decode` (msgspec's typed decode) of the same bytes alone. Rebuild: 10,000 games stored
in a fresh redis-server, each read back with `RedisEventStore.read` and folded into a `FoldedGame`; the
time is split between the Redis reads and the Python folding.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from bench.common import RedisServer, ratio, say, write_result
from bench.games import build_game
from projections import project
from server.engine.folded import FoldedGame
from server.protocol import envelope
from server.store.redis import RedisEventStore
from server.store.redis.keys import events_key

GOAL = 0.5


def _best_rates(runs: dict[str, Any], events: int, repeat: int) -> dict[str, float]:
    """Events per second of the fastest of `repeat` runs of each, the least disturbed by the noisy machine.

    The runs alternate (one of each per round), so that a slow spell of the shared machine falls on all of
    them rather than on whichever ran during it.
    """
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - started)
    return {name: events / seconds for name, seconds in best.items()}


def fold_rates(datas: list[bytes], game_id: str, repeat: int) -> dict[str, float]:
    from server.store import Record

    records = [Record(i + 1, d) for i, d in enumerate(datas)]

    def decode_only() -> None:
        for data in datas:
            envelope.decode(data)

    def fold() -> None:
        project([envelope.decode(data).event for data in datas])

    def ingest() -> None:
        FoldedGame(game_id).fold(records)

    n = len(datas)
    rates = _best_rates({"decode": decode_only, "fold": fold, "ingest": ingest}, n, repeat)
    decode_rate, fold_rate, ingest_rate = rates["decode"], rates["fold"], rates["ingest"]
    return {
        "events": n,
        "decode_per_s": decode_rate,
        "fold_per_s": fold_rate,
        "live_ingest_per_s": ingest_rate,
        "ratio_fold_to_decode": ratio(fold_rate, decode_rate),
        "ratio_ingest_to_decode": ratio(ingest_rate, decode_rate),
    }


async def rebuild(url: str, datas: list[bytes], games: int) -> dict[str, Any]:
    store = await RedisEventStore.from_url(url, cluster=False)
    client = store.client
    try:
        ids = [f"rb-{i}" for i in range(games)]
        started = time.perf_counter()
        for start in range(0, games, 200):
            pipe = client.pipeline(transaction=False)
            for game_id in ids[start : start + 200]:
                for version, data in enumerate(datas, start=1):
                    pipe.xadd(events_key(game_id), {"e": data}, id=f"0-{version}")
            await pipe.execute()
        written = time.perf_counter() - started
        cpu0, started = time.process_time(), time.perf_counter()
        loaded = [await store.read(game_id) for game_id in ids]
        read_seconds, read_cpu = time.perf_counter() - started, time.process_time() - cpu0
        started = time.perf_counter()
        for game_id, records in zip(ids, loaded, strict=True):
            FoldedGame(game_id).fold(records)
        fold_seconds = time.perf_counter() - started
        # Reads with 50 in flight (one connection each), as a node warming its cache concurrently would.
        gate = asyncio.Semaphore(50)

        async def read(game_id: str) -> None:
            async with gate:
                await store.read(game_id)

        started = time.perf_counter()
        await asyncio.gather(*(read(game_id) for game_id in ids))
        concurrent_seconds = time.perf_counter() - started
        total = read_seconds + fold_seconds
        return {
            "games": games,
            "events_per_game": len(datas),
            "write_seconds": written,
            "read_seconds": read_seconds,
            "read_client_cpu_seconds": read_cpu,
            "fold_seconds": fold_seconds,
            "total_seconds": total,
            "read_share": ratio(read_seconds, total),
            "fold_share": ratio(fold_seconds, total),
            "games_per_s": ratio(games, total),
            "read_seconds_50_in_flight": concurrent_seconds,
        }
    finally:
        await store.close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="CI size")
    parser.add_argument("--events", type=int, default=1000, help="events of the folded game")
    parser.add_argument("--games", type=int, default=10_000, help="stored games to rebuild")
    parser.add_argument("--game-events", type=int, default=20, help="events per rebuilt game")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    events, games, repeat = (200, 200, 3) if args.quick else (args.events, args.games, 7)
    _, game_id, records = build_game(events)
    datas = [r.data for r in records]
    folds = fold_rates(datas, game_id, repeat)
    say(
        f"fold {folds['fold_per_s']:.0f} ev/s, decode {folds['decode_per_s']:.0f} ev/s, "
        f"ratio {folds['ratio_fold_to_decode']:.2f}; live ingest {folds['live_ingest_per_s']:.0f} ev/s"
    )
    with RedisServer() as redis:
        rebuilt = asyncio.run(rebuild(redis.url, datas[: args.game_events], games))
    say(
        f"rebuild {games} games: reads {rebuilt['read_seconds']:.2f} s, folds {rebuilt['fold_seconds']:.2f} s"
    )
    figure = folds["ratio_fold_to_decode"]
    summary = {
        "ratio_fold_to_decode": figure,
        "goal": f"replay fold >= {GOAL:.0%} of the pure decode rate",
        "goal_met": figure >= GOAL,
        "rebuild_read_share": rebuilt["read_share"],
        "rebuild_fold_share": rebuilt["fold_share"],
    }
    path = write_result(
        "replay", {"quick": args.quick, "summary": summary, "fold": folds, "rebuild": rebuilt}, argv
    )
    print(
        f"replay: fold/decode {figure:.2f} (goal >= {GOAL}); rebuild {games} games in "
        f"{rebuilt['total_seconds']:.2f} s ({rebuilt['read_share']:.0%} Redis reads); wrote {path}"
    )
    return 0
