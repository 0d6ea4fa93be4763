"""GET /games with many private games: as fast as with none (the list reads the index of public games only).

Two servers, each on its own Redis, hold `--public` public games; the second also holds `--private`
private games. GET /games (the default limit) is then timed `--requests` times on each, alternately, so
that the machine's noise falls on both alike. Reported: the median and p90 of each, their ratio, the
streams a GET /games read per call on each (from Redis's command statistics: one newest-entry read per
listed game, whatever the private games), and the games each server held in memory after listing (none:
listing loads no game).

    python -m bench gamelist [--quick] [--private 5000] [--public 20] [--requests 200]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import httpx
import redis

from bench.common import RedisServer, ServerProcess, percentiles, ratio, say, write_result

# Stream reads a GET /games may make: the newest entry of each listed game, and nothing else.
STREAM_READS = ("xrevrange", "xrange", "xread")


def _stream_reads(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in STREAM_READS)


async def _create(http: httpx.AsyncClient, count: int, spectators: str, at_once: int = 32) -> None:
    async def one(n: int) -> None:
        answer = await http.post("/games", json={"players": [f"P{n}"], "spectators": spectators})
        answer.raise_for_status()

    for start in range(0, count, at_once):
        await asyncio.gather(*(one(n) for n in range(start, min(count, start + at_once))))


class Node:
    """A server on its own Redis, and a client of each."""

    def __init__(self, redis_server: RedisServer) -> None:
        self.redis = redis_server
        self.server = ServerProcess("ours", redis_server.url)
        self.client = redis.Redis.from_url(redis_server.url)
        self.http = httpx.AsyncClient(base_url=self.server.url, timeout=60)
        self.samples: list[float] = []
        self.listed = 0

    async def time_list(self) -> None:
        started = time.perf_counter()
        answer = await self.http.get("/games")
        self.samples.append(time.perf_counter() - started)
        answer.raise_for_status()
        self.listed = len(answer.json())

    async def held(self) -> float | None:
        """The games the server holds in memory (its orchestra_live_games gauge)."""
        metrics = (await self.http.get("/metrics")).text
        for line in metrics.splitlines():
            if line.startswith("orchestra_live_games "):
                return float(line.split()[1])
        return None

    async def close(self) -> None:
        await self.http.aclose()
        self.client.close()
        self.server.stop()


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    with RedisServer() as empty_redis, RedisServer() as full_redis:
        empty, full = Node(empty_redis), Node(full_redis)
        try:
            for node in (empty, full):
                await _create(node.http, args.public, "public")
            started = time.perf_counter()
            await _create(full.http, args.private, "token")
            made_seconds = time.perf_counter() - started
            say(f"{args.private} private games created in {made_seconds:.1f} s")
            for node in (empty, full):
                await node.http.get("/games")  # warm: connection, code paths
            reads_before = [_stream_reads(node.client) for node in (empty, full)]
            for _ in range(args.requests):
                await empty.time_list()
                await full.time_list()
            reads = [
                (_stream_reads(node.client) - before) / args.requests
                for node, before in zip((empty, full), reads_before, strict=True)
            ]
            runs = {
                name: {
                    "latency_ms": percentiles(node.samples),
                    "listed": node.listed,
                    "stream_reads_per_call": per_call,
                    "games_held_after_listing": await node.held(),
                }
                for name, node, per_call in (
                    ("without_private", empty, reads[0]),
                    ("with_private", full, reads[1]),
                )
            }
        finally:
            await empty.close()
            await full.close()
    say(
        f"median {runs['without_private']['latency_ms']['p50']:.2f} ms without private games, "
        f"{runs['with_private']['latency_ms']['p50']:.2f} ms with {args.private}"
    )
    return {
        "config": {"public": args.public, "private": args.private, "requests": args.requests},
        **runs,
        "private_create_seconds": made_seconds,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="a small run for CI")
    parser.add_argument("--private", type=int, default=None, help="private games created (default 5000)")
    parser.add_argument("--public", type=int, default=20, help="public games listed (default 20)")
    parser.add_argument("--requests", type=int, default=None, help="GET /games timed each time (default 200)")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    args.private = args.private if args.private is not None else (300 if args.quick else 5_000)
    args.requests = args.requests or (30 if args.quick else 200)
    result = asyncio.run(_main(args))
    without, with_private = result["without_private"], result["with_private"]
    median_ratio = ratio(with_private["latency_ms"]["p50"], without["latency_ms"]["p50"])
    summary = {
        "private_games": args.private,
        "median_ms_without_private": without["latency_ms"]["p50"],
        "median_ms_with_private": with_private["latency_ms"]["p50"],
        "ratio_median_with_to_without": median_ratio,
        # What makes the ratio hold whatever the machine: the same reads, and no game loaded.
        "same_stream_reads": without["stream_reads_per_call"] == with_private["stream_reads_per_call"],
        "stream_reads_per_call": with_private["stream_reads_per_call"],
        "listed": with_private["listed"],
        "games_held_after_listing": max(
            without["games_held_after_listing"] or 0, with_private["games_held_after_listing"] or 0
        ),
    }
    write_result("gamelist", {"quick": args.quick, "summary": summary, **result}, argv)
    print(
        f"GET /games: {summary['median_ms_without_private']:.2f} ms median with no private game, "
        f"{summary['median_ms_with_private']:.2f} ms with {args.private} (ratio {median_ratio:.2f}); "
        f"{summary['stream_reads_per_call']:.0f} stream reads a call both times"
    )
    ok = summary["same_stream_reads"] and summary["listed"] == args.public
    return 0 if ok and summary["games_held_after_listing"] == 0 else 1
