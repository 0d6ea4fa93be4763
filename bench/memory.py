"""Memory: server RSS per idle spectator connection, an active game's cached state, and a steady-load run.

- Idle spectators: the server process's RSS before and after 1,000 spectators said hello to one game
  (ours and the minimal server, each with and without permessage-deflate offered), per connection.
- Active game: tracemalloc around folding 1,000-event games into `FoldedGame` objects (state, view and
  encoded view), per game; and the same games' RSS growth in this process.
- Steady load: games come and go (create, 3 players place K tokens each turn, 2 spectators watch, the
  game ends, everyone leaves) for --minutes, with the cache of folded games capped
  (ORCHESTRA_MAX_LIVE_GAMES=50) so the working set is bounded by design; server RSS is sampled throughout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import time
import tracemalloc
from typing import Any

import httpx
import psutil
from websockets.asyncio.client import ClientConnection

from bench.common import CpuMeter, RedisServer, ServerProcess, open_client, raise_nofile, say, write_result
from bench.games import build_game
from bench.generator import placements
from server.engine.folded import FoldedGame

IDLE_GOAL_KIB = 40
GAME_GOAL_KIB = 64


async def _connect(url: str, hello: dict[str, Any], compression: bool) -> ClientConnection:
    return await open_client(url, json.dumps(hello), compression)


async def idle_spectators(kind: str, url: str, pid: int, count: int, compression: bool) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        game_id = (await http.post("/games", json={"players": ["Ada", "Ben"]})).json()["game_id"]
    ws_url = url.replace("http://", "ws://") + f"/games/{game_id}/ws"
    meter = CpuMeter(pid)
    # One connection first, so lazily created per-game and per-process structures are not counted.
    first = await _connect(ws_url, {"type": "hello", "token": None, "since": None}, compression)
    await asyncio.sleep(1.0)
    before = meter.rss()
    sockets: list[ClientConnection] = [first]
    gate = asyncio.Semaphore(100)

    async def one() -> None:
        async with gate:
            sockets.append(
                await _connect(ws_url, {"type": "hello", "token": None, "since": None}, compression)
            )

    try:
        await asyncio.gather(*(one() for _ in range(count)))
        await asyncio.sleep(2.0)
        after = meter.rss()
    finally:
        await asyncio.gather(*(_quiet_close(ws) for ws in sockets))
    per = (after - before) / count
    return {
        "server": kind,
        "compression": compression,
        "connections": count,
        "rss_mib_before": before / 2**20,
        "rss_mib_after": after / 2**20,
        "kib_per_connection": per / 1024,
    }


async def _quiet_close(ws: ClientConnection) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(ws.close(), 3)


def game_state(events: int, copies: int) -> dict[str, Any]:
    """Per game: tracemalloc'd bytes and RSS growth of `copies` FoldedGames folded from `events` events."""
    _, game_id, records = build_game(events)
    gc.collect()
    process = psutil.Process()
    rss0 = process.memory_info().rss
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    games = []
    for index in range(copies):
        game = FoldedGame(f"{game_id}-{index}")
        game.fold(records)
        _ = game.view_json  # the encoded view the server keeps for welcomes and frames
        games.append(game)
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    rss = process.memory_info().rss - rss0
    view_bytes = len(games[0].view_json)
    return {
        "events_per_game": events,
        "games": copies,
        "tracemalloc_kib_per_game": traced / copies / 1024,
        "rss_kib_per_game": rss / copies / 1024,
        "view_json_bytes": view_bytes,
    }


async def _session(url: str, placements_each: int, stop_at: float, totals: dict[str, int]) -> None:
    bodies = placements()
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        while time.monotonic() < stop_at:
            created = (await http.post("/games", json={"players": ["A", "B", "C"]})).json()
            ws_url = url.replace("http://", "ws://") + f"/games/{created['game_id']}/ws"
            players = [
                await _connect(ws_url, {"type": "hello", "token": s["token"], "since": None}, False)
                for s in created["seats"]
            ]
            watchers = [
                await _connect(ws_url, {"type": "hello", "token": None, "since": None}, False)
                for _ in range(2)
            ]
            drains = [asyncio.create_task(_drain(ws)) for ws in watchers]
            try:
                for n in range(placements_each * len(players)):
                    ws = players[n % len(players)]
                    frame = f'{{"type":"place","id":"c{n}",{bodies[n % len(bodies)]}}}'
                    await ws.send(frame)
                    while True:
                        answer = json.loads(await asyncio.wait_for(ws.recv(), 10))
                        if answer["type"] in ("accepted", "rejected"):
                            totals[answer["type"]] = totals.get(answer["type"], 0) + 1
                            break
                    if time.monotonic() >= stop_at:
                        break
                await players[0].send('{"type":"end_game","id":"end"}')
            finally:
                for task in drains:
                    task.cancel()
                await asyncio.gather(*(_quiet_close(ws) for ws in players + watchers))
            totals["games"] = totals.get("games", 0) + 1


async def _drain(ws: ClientConnection) -> None:
    with contextlib.suppress(Exception):
        async for _ in ws:
            pass


async def steady(url: str, pid: int, minutes: float, sessions: int, placements_each: int) -> dict[str, Any]:
    meter = CpuMeter(pid)
    seconds = minutes * 60
    interval = max(0.5, seconds / 60)
    stop_at = time.monotonic() + seconds
    totals: dict[str, int] = {}
    samples: list[tuple[float, float]] = []
    started = time.monotonic()
    runners = [asyncio.create_task(_session(url, placements_each, stop_at, totals)) for _ in range(sessions)]
    while time.monotonic() < stop_at:
        samples.append((time.monotonic() - started, meter.rss() / 2**20))
        await asyncio.sleep(interval)
    await asyncio.gather(*runners, return_exceptions=True)
    samples.append((time.monotonic() - started, meter.rss() / 2**20))
    quarter = max(1, len(samples) // 4)
    early = sum(r for _, r in samples[quarter : 2 * quarter]) / len(samples[quarter : 2 * quarter])
    late = sum(r for _, r in samples[-quarter:]) / quarter
    return {
        "minutes": minutes,
        "concurrent_games": sessions,
        "placements_per_player": placements_each,
        "totals": totals,
        "rss_mib_samples": samples,
        "rss_mib_second_quarter_mean": early,
        "rss_mib_last_quarter_mean": late,
        "growth_mib_second_to_last_quarter": late - early,
        "growth_percent": (late - early) / early * 100 if early else 0.0,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="CI size (and --minutes 0.2)")
    parser.add_argument("--spectators", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=10.0, help="the steady-load run")
    parser.add_argument("--events", type=int, default=1000, help="events per active game measured")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    import uvloop

    raise_nofile(20_000)
    count = 100 if args.quick else args.spectators
    minutes = 0.2 if args.quick else args.minutes
    events, copies = (200, 5) if args.quick else (args.events, 20)
    idle: list[dict[str, Any]] = []
    with RedisServer() as redis:
        for compression in [False] if args.quick else [False, True]:
            for kind in ("minimal", "ours"):
                with ServerProcess(kind, redis.url) as server:
                    row = uvloop.run(idle_spectators(kind, server.url, server.pid, count, compression))
                idle.append(row)
                say(f"idle {kind} deflate={compression}: {row['kib_per_connection']:.1f} KiB per connection")
        with ServerProcess("ours", redis.url, {"ORCHESTRA_MAX_LIVE_GAMES": "50"}) as server:
            steady_run = uvloop.run(steady(server.url, server.pid, minutes, 10, 50))
        say(
            f"steady {minutes} min: RSS {steady_run['rss_mib_second_quarter_mean']:.1f} -> "
            f"{steady_run['rss_mib_last_quarter_mean']:.1f} MiB, {steady_run['totals']}"
        )
    state = game_state(events, copies)
    say(
        f"active game of {events} events: {state['tracemalloc_kib_per_game']:.1f} KiB traced, "
        f"view {state['view_json_bytes']} B"
    )
    ours_idle = next(r for r in idle if r["server"] == "ours" and not r["compression"])
    summary = {
        "idle_kib_per_spectator": ours_idle["kib_per_connection"],
        "idle_kib_per_spectator_deflate": next(
            (r["kib_per_connection"] for r in idle if r["server"] == "ours" and r["compression"]), None
        ),
        "minimal_idle_kib_per_connection": next(
            r["kib_per_connection"] for r in idle if r["server"] == "minimal"
        ),
        "active_game_kib": state["tracemalloc_kib_per_game"],
        "steady_growth_percent": steady_run["growth_percent"],
        "goals": {
            "idle_spectator": f"<= {IDLE_GOAL_KIB} KiB",
            "active_game": f"<= {GAME_GOAL_KIB} KiB ({events} events)",
            "steady": "no growth",
        },
        "idle_goal_met": ours_idle["kib_per_connection"] <= IDLE_GOAL_KIB,
        "active_game_goal_met": state["tracemalloc_kib_per_game"] <= GAME_GOAL_KIB,
    }
    path = write_result(
        "memory",
        {"quick": args.quick, "summary": summary, "idle": idle, "active_game": state, "steady": steady_run},
        argv,
    )
    print(
        f"memory: idle spectator {ours_idle['kib_per_connection']:.1f} KiB, active game "
        f"{state['tracemalloc_kib_per_game']:.1f} KiB, "
        f"steady growth {steady_run['growth_percent']:.1f}%; wrote {path}"
    )
    return 0
