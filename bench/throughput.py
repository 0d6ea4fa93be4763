"""Throughput: closed loop, 20 games x 3 players x 5 spectators, ours vs the minimal pipeline (and raw Redis).

Both servers run on the same fresh redis-server (appendonly no, so the disk is out of the picture), one
after the other, driven by the same load generator; the figure is the ratio of their commands/s. The raw
Redis baseline is the append script's own rate (server.store.redis.APPEND_SCRIPT, one append a call) from
one redis-py connection, sequentially and pipelined.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from typing import Any

import msgspec
from redis.asyncio import Redis

from bench.common import RedisServer, raise_nofile, ratio, say, write_result
from bench.generator import LoadConfig, brief, run_against
from server.store.redis import APPEND_SCRIPT
from server.store.redis.keys import commands_key, events_key

GOAL = 0.70


async def redis_append_rate(url: str, count: int, pipeline: int = 1) -> dict[str, float]:
    """Lua appends per second from one connection: one at a time, or `pipeline` per round trip."""
    client = Redis.from_url(url)
    script = client.register_script(APPEND_SCRIPT)
    game = f"raw-{uuid.uuid4().hex[:10]}"
    envelope = msgspec.json.encode({"game_id": game, "version": 1, "event": {"type": "ChairClaimed"}})
    try:
        await client.xadd(events_key(game), {"e": envelope}, id="0-1")
        keys = [events_key(game), commands_key(game)]
        version = 1
        started = time.perf_counter()
        cpu0 = time.process_time()
        if pipeline <= 1:
            for _ in range(count):
                await script(keys=keys, args=[2, version, f"0:c{version}", "", 1, envelope])
                version += 1
        else:
            for _ in range(count // pipeline):
                pipe = client.pipeline(transaction=False)
                for _ in range(pipeline):
                    await script(keys=keys, args=[2, version, f"0:c{version}", "", 1, envelope], client=pipe)
                    version += 1
                await pipe.execute()
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu0
        done = version - 1
        return {
            "appends": done,
            "seconds": elapsed,
            "appends_per_s": done / elapsed,
            "client_cpu_us_per_append": cpu / done * 1e6,
        }
    finally:
        await client.aclose()


def raw_redis(url: str, quick: bool) -> dict[str, Any]:
    count = 2_000 if quick else 20_000
    return {
        "sequential": asyncio.run(redis_append_rate(url, count)),
        "pipelined_50": asyncio.run(redis_append_rate(url, count, pipeline=50)),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="CI size: a few games for a second each")
    parser.add_argument("--games", type=int, default=20)
    parser.add_argument("--players", type=int, default=3)
    parser.add_argument("--spectators", type=int, default=5)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--procs", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2, help="alternate ours/minimal this many times")
    parser.add_argument(
        "--no-compression",
        action="store_true",
        help="clients do not offer permessage-deflate (writes throughput_no_compression.json)",
    )


def main(args: argparse.Namespace, argv: list[str]) -> int:
    raise_nofile()
    config = LoadConfig(
        games=args.games,
        players=args.players,
        spectators=args.spectators,
        mode="closed",
        duration=args.duration,
        procs=args.procs,
        compression=not args.no_compression,
    )
    rounds = args.rounds
    if args.quick:
        config.games, config.spectators, config.duration, rounds = 4, 2, 1.0, 1
    runs: dict[str, list[dict[str, Any]]] = {
        "ours": [],
        "minimal": [],
        "ours_no_view": [],
        "minimal_asyncio": [],
    }
    with RedisServer() as redis:
        baseline = raw_redis(redis.url, args.quick)
        say(
            f"raw redis: {baseline['sequential']['appends_per_s']:.0f}/s sequential, "
            f"{baseline['pipelined_50']['appends_per_s']:.0f}/s pipelined x50"
        )
        # Alternate the two servers so drift in the machine's load hits both alike.
        for _ in range(rounds):
            for kind in ("minimal", "ours"):
                result = run_against(kind, redis, config)
                say(brief(result))
                runs[kind].append(result)
        if not args.quick:
            no_view = LoadConfig(**{**config.__dict__, "view": False})
            result = run_against("ours", redis, no_view)
            say("view: false " + brief(result))
            runs["ours_no_view"].append(result)
            # The minimal server on asyncio's own loop: what uvloop (which both servers run on) is worth.
            result = run_against("minimal", redis, config, args=("--loop", "asyncio"))
            say("asyncio loop " + brief(result))
            runs["minimal_asyncio"].append(result)
        durability = redis.durability

    def best(kind: str) -> float:
        return max((r["commands_per_s"] for r in runs[kind]), default=0.0)

    def median(kind: str) -> float:
        rates = sorted(r["commands_per_s"] for r in runs[kind])
        return rates[len(rates) // 2] if rates else 0.0

    def cpu_per_command(kind: str) -> float:
        costs = sorted(r["server"]["cpu_us_per_command"] for r in runs[kind])
        return costs[len(costs) // 2] if costs else 0.0

    ours, minimal = median("ours"), median("minimal")
    figure = ratio(ours, minimal)
    summary = {
        "ours_commands_per_s": ours,
        "minimal_commands_per_s": minimal,
        "ours_no_view_commands_per_s": median("ours_no_view"),
        "ratio_ours_to_minimal": figure,
        "ratio_no_view_to_minimal": ratio(median("ours_no_view"), minimal),
        "ratio_minimal_to_raw_redis_sequential": ratio(minimal, baseline["sequential"]["appends_per_s"]),
        "server_cpu_us_per_command": {kind: cpu_per_command(kind) for kind in runs if runs[kind]},
        # Server CPU per command is steadier than commands/s on a shared machine: minimal's over ours.
        "ratio_cpu_per_command_minimal_to_ours": ratio(cpu_per_command("minimal"), cpu_per_command("ours")),
        "goal": f"ours >= {GOAL:.0%} of the minimal pipeline's commands/s",
        "goal_met": figure >= GOAL,
        "best_of_rounds": {"ours": best("ours"), "minimal": best("minimal")},
    }
    path = write_result(
        "throughput_no_compression" if args.no_compression else "throughput",
        {
            "quick": args.quick,
            "compression": config.compression,
            "redis_durability": durability,
            "summary": summary,
            "raw_redis": baseline,
            "runs": runs,
        },
        argv,
    )
    print(
        f"throughput: ours {ours:.0f}/s, minimal {minimal:.0f}/s, ratio {figure:.2f} "
        f"(goal >= {GOAL}: {'met' if figure >= GOAL else 'not met'}); wrote {path}"
    )
    return 0
