"""The wall feed costs what changes: its bytes per change whatever the games it shows, and a node's CPU per
command the same before anyone watches the wall and after its last subscriber left.

One server on its own Redis; `--busy` games of three players get placements at `--rate` a second in all
(random legal ones, each game's players in turn), in four phases of `--seconds` each:

1. nobody watches the wall;
2. one subscriber watches it (the busy games alone on it);
3. the same, with `--idle` more public games on the wall that nobody plays;
4. nobody watches it again (the wall has stopped: its linger is waited out first).

Reported per phase: the placements accepted, the server's CPU per placement, and for 2 and 3 the wall's
frames and bytes (as encoded) per placement, with the first frame's size. The ratios that say it: bytes per
change with and without the idle games (about 1: a change costs the same however many games are shown),
and CPU per placement after and before the wall ran (about 1: nothing is left on the command path).

    python -m bench wall [--quick] [--busy 10] [--idle 190] [--rate 200] [--seconds 8]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from typing import Any

import httpx
import msgspec

from bench.common import CpuMeter, RedisServer, ServerProcess, ratio, say, write_result
from orchestra_client import GameClient, WallClient, create_game
from orchestra_client.bots import random_placement
from server.engine.wall import LINGER_SECONDS

PLAYERS = ["Ada", "Ben", "Cy"]


class Table:
    """A busy game: its players' connections, its layout, and the placements it had accepted."""

    def __init__(self, game_id: str, players: list[GameClient], layout: Any, seed: int) -> None:
        self.game_id, self.players, self.layout = game_id, players, layout
        self.rng = random.Random(seed)
        self.accepted = 0

    async def play(self, interval: float, until: float) -> None:
        loop = asyncio.get_running_loop()
        turn = 0
        while loop.time() < until:
            started = loop.time()
            frame = random_placement(self.layout, self.rng)
            player = self.players[turn % len(self.players)]
            answer = await player.place(frame.pop("token"), frame.pop("space"), **frame)
            if answer["type"] == "accepted":
                self.accepted += 1
            turn += 1
            await asyncio.sleep(max(0.0, interval - (loop.time() - started)))


async def _tables(url: str, count: int) -> list[Table]:
    from orchestra_client.bots import read_layout

    tables = []
    for n in range(count):
        created = await create_game(url, PLAYERS)
        game_id = created["game_id"]
        players = [
            await GameClient.connect(url, game_id, seat["token"], view=False) for seat in created["seats"]
        ]
        tables.append(Table(game_id, players, await read_layout(url, game_id), seed=n))
    return tables


async def _phase(
    name: str, tables: list[Table], meter: CpuMeter, rate: float, seconds: float, wall: WallClient | None
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    before = [table.accepted for table in tables]
    seen = len(wall.received) if wall is not None else 0
    interval = len(tables) / rate
    meter.start()
    until = loop.time() + seconds
    await asyncio.gather(*(table.play(interval, until) for table in tables))
    if wall is not None:
        await asyncio.sleep(0.5)  # the last changes' frame
    cpu = meter.stop()
    placed = sum(table.accepted for table in tables) - sum(before)
    result: dict[str, Any] = {
        "placements": placed,
        "cpu_seconds": cpu["cpu_seconds"],
        "cpu_ms_per_placement": 1e3 * cpu["cpu_seconds"] / placed if placed else 0.0,
    }
    if wall is not None:
        frames = wall.received[seen:]
        sizes = [len(msgspec.json.encode(frame)) for frame in frames]
        changes = sum(len(frame.get("changed", ())) for frame in frames)
        result.update(
            frames=len(frames),
            frames_per_second=len(frames) / seconds,
            game_changes=changes,
            bytes=sum(sizes),
            bytes_per_placement=sum(sizes) / placed if placed else 0.0,
            largest_frame_bytes=max(sizes, default=0),
        )
    say(f"{name}: {placed} placements, {result['cpu_ms_per_placement']:.3f} ms CPU each")
    return result


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    # Every game comes from this one address and the idle ones get no placement: the wall must show them
    # all, whole in its first frame, for its cost per change to be measured with them.
    room = args.busy + args.idle + 10
    env = {
        "ORCHESTRA_WALL_LIVE_GAMES": str(room),
        "ORCHESTRA_WALL_CREATOR_SHARE": "1",
        "ORCHESTRA_WALL_PAGE_GAMES": str(room),
    }
    with RedisServer() as redis_server, ServerProcess("ours", redis_server.url, env=env) as server:
        meter = CpuMeter(server.pid)
        tables = await _tables(server.url, args.busy)
        phases: dict[str, Any] = {}
        try:
            phases["nobody_watches"] = await _phase(
                "nobody watches", tables, meter, args.rate, args.seconds, None
            )
            wall = await WallClient.connect(server.url)
            first_busy = len(msgspec.json.encode(wall.received[0]))
            phases["watched"] = await _phase("watched", tables, meter, args.rate, args.seconds, wall)
            await wall.close()
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
                for n in range(args.idle):
                    (await http.post("/games", json={"players": [f"Idle{n}", "Other"]})).raise_for_status()
            await asyncio.sleep(LINGER_SECONDS + 1)  # the wall stops; it starts again with the idle games
            wall = await WallClient.connect(server.url)
            first_all = len(msgspec.json.encode(wall.received[0]))
            shown = len(wall.games)
            phases["watched_with_idle"] = await _phase(
                "watched, with idle games", tables, meter, args.rate, args.seconds, wall
            )
            await wall.close()
            await asyncio.sleep(LINGER_SECONDS + 1)
            phases["nobody_watches_again"] = await _phase(
                "nobody watches again", tables, meter, args.rate, args.seconds, None
            )
        finally:
            for table in tables:
                for player in table.players:
                    await player.close()
    watched, crowded = phases["watched"], phases["watched_with_idle"]
    summary = {
        "games_shown": {"watched": args.busy, "watched_with_idle": shown},
        "first_frame_bytes": {"watched": first_busy, "watched_with_idle": first_all},
        "bytes_per_placement": {
            "watched": watched["bytes_per_placement"],
            "watched_with_idle": crowded["bytes_per_placement"],
        },
        "ratio_bytes_per_placement_idle_to_busy_only": ratio(
            crowded["bytes_per_placement"], watched["bytes_per_placement"]
        ),
        "cpu_ms_per_placement": {name: phase["cpu_ms_per_placement"] for name, phase in phases.items()},
        "ratio_cpu_after_to_before_the_wall": ratio(
            phases["nobody_watches_again"]["cpu_ms_per_placement"],
            phases["nobody_watches"]["cpu_ms_per_placement"],
        ),
        "ratio_cpu_watched_to_not": ratio(
            watched["cpu_ms_per_placement"], phases["nobody_watches"]["cpu_ms_per_placement"]
        ),
        "wall_frames_per_second": max(watched["frames_per_second"], crowded["frames_per_second"]),
    }
    return {"config": vars(args) | {"seconds_per_phase": args.seconds}, "summary": summary, "phases": phases}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="a small run for CI")
    parser.add_argument("--busy", type=int, default=None, help="games played (default 10)")
    parser.add_argument("--idle", type=int, default=None, help="public games nobody plays (default 190)")
    parser.add_argument("--rate", type=float, default=None, help="placements a second in all (default 200)")
    parser.add_argument("--seconds", type=float, default=None, help="length of each phase (default 8)")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    args.busy = args.busy or (3 if args.quick else 10)
    args.idle = args.idle if args.idle is not None else (20 if args.quick else 190)
    args.rate = args.rate or (30.0 if args.quick else 200.0)
    args.seconds = args.seconds or (2.0 if args.quick else 8.0)
    started = time.perf_counter()
    result = asyncio.run(_main(args))
    summary = result["summary"]
    write_result("wall", {"quick": args.quick, **result, "seconds": time.perf_counter() - started}, argv)
    per = summary["bytes_per_placement"]
    print(
        f"wall: {per['watched']:.0f} bytes a placement with {args.busy} games shown, "
        f"{per['watched_with_idle']:.0f} with {summary['games_shown']['watched_with_idle']} "
        f"(ratio {summary['ratio_bytes_per_placement_idle_to_busy_only']:.2f}); server CPU a placement "
        f"{summary['cpu_ms_per_placement']['nobody_watches']:.3f} ms before the wall, "
        f"{summary['cpu_ms_per_placement']['watched']:.3f} ms watched, "
        f"{summary['cpu_ms_per_placement']['nobody_watches_again']:.3f} ms after "
        f"(ratio {summary['ratio_cpu_after_to_before_the_wall']:.2f})"
    )
    phases = result["phases"]
    ok = all(phase["placements"] > 0 for phase in phases.values()) and phases["watched"]["frames"] > 0
    return 0 if ok else 1
