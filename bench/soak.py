"""Soak: bots in many games with spectators and reconnect storms, for minutes; memory must level off.

    python -m bench.soak                      # 10 minutes, own redis-server and server on free ports
    python -m bench.soak --minutes 2 --games 8 --out soak.json
    python -m bench.soak --seconds 15 --interval 5      # the CI size

Each game slot plays games back to back: a game of `--players` bots (random legal placements over the
real protocol, `--pace` seconds apart, taking no view) and `--spectators` spectators who follow it from
version 0 (with the hello's default, view deltas asked for by name, and whole views, in turn); seat 0
ends the game after its quota. When a game
ends, every client's history must equal GET /games/{id}/events, and every spectator's view GET
/games/{id}/view (a mismatch is an error). Every `--storm-every` seconds a storm drops `--storm-share`
of all open connections at once (as a network would); the clients resume by themselves with `since`.

Reported per interval (a minute by default): commands answered, latency percentiles of command round
trips, errors by kind (rejection codes other than the expected game_over, timeouts, refused sessions,
history mismatches), and the server's RSS; then the RSS slope over the second half of the run (MiB per
minute) and whether the server's log holds an error or a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from bench.common import RedisServer, ServerProcess, percentiles, raise_nofile
from domain import Layout
from orchestra_client import ConnectionRefused, GameClient, create_game, get_events, get_view
from orchestra_client.bots import random_placement, read_layout

# The server as the soak drives it: the protocol's default limits, except a smaller cache of games
# held in memory, so the run reaches the cache's bound (and memory its plateau) within minutes.
SOAK_ENV = {
    "ORCHESTRA_RATE_PER_SECOND": "50",
    "ORCHESTRA_RATE_BURST": "100",
    "ORCHESTRA_QUEUE_LIMIT": "1000",
    "ORCHESTRA_MAX_PLACEMENTS": "1000",
}
EXPECTED = {"game_over"}  # a bot still placing when seat 0 ended the game


@dataclass
class Interval:
    """What happened in one reporting interval."""

    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    accepted: int = 0
    rejected: int = 0


@dataclass
class Soak:
    """The run's shared state: clients open now, figures per interval, memory samples."""

    url: str
    layout: Layout
    started: float
    interval: float
    pace: tuple[float, float]
    placements: int
    intervals: dict[int, Interval] = field(default_factory=dict)
    open_clients: set[GameClient] = field(default_factory=set)
    games_finished: int = 0
    storms: int = 0
    dropped: int = 0
    reconnects: int = 0

    def now(self) -> Interval:
        index = int((time.monotonic() - self.started) // self.interval)
        return self.intervals.setdefault(index, Interval())

    def error(self, kind: str) -> None:
        self.now().errors[kind] += 1


async def _player(soak: Soak, client: GameClient, rng: random.Random, deadline: float) -> None:
    placed = 0
    while placed < soak.placements and time.monotonic() < deadline and not _ended(client):
        await asyncio.sleep(rng.uniform(*soak.pace))
        frame = random_placement(soak.layout, rng)
        began = time.monotonic()
        try:
            answer = await client.place(frame.pop("token"), frame.pop("space"), **frame)
        except TimeoutError:
            soak.error("timeout")
            continue
        except ConnectionRefused:
            soak.error("session_refused")
            return
        bucket = soak.now()
        bucket.latencies.append(time.monotonic() - began)
        if answer["type"] == "accepted":
            bucket.accepted += 1
            placed += 1
            continue
        bucket.rejected += 1
        if answer["code"] in EXPECTED:
            return
        soak.error(f"rejected:{answer['code']}")
    if client.seat == 0 and not _ended(client):
        began = time.monotonic()
        try:
            answer = await client.end_game()
        except (TimeoutError, ConnectionRefused):
            soak.error("end_game_failed")
            return
        bucket = soak.now()
        bucket.latencies.append(time.monotonic() - began)
        if answer["type"] == "accepted":
            bucket.accepted += 1
        else:
            bucket.rejected += 1
            if answer["code"] not in EXPECTED:
                soak.error(f"rejected:{answer['code']}")


# What the spectators' hellos ask for, in turn (None: no `view`, the default): each way of keeping a
# view must end at the stored one.
VIEWS: tuple[str | None, ...] = (None, "delta", "full")


def _ended(client: GameClient) -> bool:
    return bool(client.envelopes) and client.envelopes[-1]["event"]["type"] == "GameEnded"


async def _game(soak: Soak, rng: random.Random, players: int, spectators: int, deadline: float) -> None:
    created = await create_game(soak.url, [f"P{seat}" for seat in range(players)])
    game_id = created["game_id"]
    clients: list[GameClient] = []
    try:
        watchers = [
            await GameClient.connect(soak.url, game_id, None, since=0, view=VIEWS[number % len(VIEWS)])
            for number in range(spectators)
        ]
        seats = [
            await GameClient.connect(soak.url, game_id, seat["token"], since=0, view=False)
            for seat in created["seats"]
        ]
        clients = watchers + seats
        soak.open_clients.update(clients)
        seeds = [rng.randrange(2**32) for _ in seats]
        await asyncio.gather(
            *(_player(soak, c, random.Random(s), deadline) for c, s in zip(seats, seeds, strict=True))
        )
        stored = await get_events(soak.url, game_id)
        final = await get_view(soak.url, game_id)
        for client in clients:
            try:
                await client.wait_for_version(stored[-1]["version"], timeout=10)
            except (TimeoutError, ConnectionRefused):
                soak.error("history_incomplete")
                continue
            if client.envelopes != stored:
                soak.error("history_mismatch")
            if client in watchers and client.view != final:
                soak.error("view_mismatch")
        soak.games_finished += 1
    finally:
        for client in clients:
            soak.open_clients.discard(client)
            soak.reconnects += client.reconnects
            await client.close()


async def _slot(soak: Soak, seed: int, players: int, spectators: int, deadline: float) -> None:
    rng = random.Random(seed)
    while time.monotonic() < deadline:
        try:
            await _game(soak, rng, players, spectators, deadline)
        except (OSError, TimeoutError, ConnectionRefused) as exc:
            soak.error(f"game_failed:{type(exc).__name__}")
            await asyncio.sleep(0.5)


async def _storms(soak: Soak, every: float, share: float, deadline: float, rng: random.Random) -> None:
    while time.monotonic() + every < deadline:
        await asyncio.sleep(every)
        victims = [c for c in soak.open_clients if rng.random() < share]
        for client in victims:
            await client.drop()
        soak.storms += 1
        soak.dropped += len(victims)


async def _memory(pid: int, started: float, every: float, samples: list[tuple[float, int]]) -> None:
    process = psutil.Process(pid)
    while True:
        samples.append((time.monotonic() - started, process.memory_info().rss))
        await asyncio.sleep(every)


def slope_mib_per_minute(samples: list[tuple[float, int]]) -> float:
    """Least-squares slope of RSS over time, in MiB per minute (0 with fewer than two samples)."""
    if len(samples) < 2:
        return 0.0
    n = len(samples)
    mean_t = sum(t for t, _ in samples) / n
    mean_m = sum(m for _, m in samples) / n
    var = sum((t - mean_t) ** 2 for t, _ in samples)
    if var == 0:
        return 0.0
    cov = sum((t - mean_t) * (m - mean_m) for t, m in samples)
    return cov / var * 60 / 2**20


def log_problems(text: str) -> list[str]:
    """Error or critical lines, and tracebacks, in a server's JSON log."""
    problems: list[str] = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            if line.strip():
                problems.append(line[:300])
            continue
        if record.get("level") in ("error", "critical") or "exc" in record or "Traceback" in line:
            problems.append(line[:300])
    return problems


async def run(args: argparse.Namespace, url: str, pid: int) -> dict[str, Any]:
    """Drive the soak against the server at `url` (process `pid`); the figures."""
    seconds = args.seconds if args.seconds is not None else args.minutes * 60
    bootstrap = await create_game(url, ["Layout"])
    layout = await read_layout(url, bootstrap["game_id"])
    started = time.monotonic()
    deadline = started + seconds
    soak = Soak(url, layout, started, args.interval, tuple(args.pace), args.placements)
    samples: list[tuple[float, int]] = []
    memory = asyncio.get_running_loop().create_task(_memory(pid, started, args.sample_every, samples))
    rng = random.Random(args.seed)
    tasks = [
        _slot(soak, rng.randrange(2**32), args.players, args.spectators, deadline) for _ in range(args.games)
    ]
    storms = _storms(soak, args.storm_every, args.storm_share, deadline, random.Random(args.seed + 1))
    await asyncio.gather(storms, *tasks)
    memory.cancel()
    samples.append((time.monotonic() - started, psutil.Process(pid).memory_info().rss))
    return _report(soak, samples, seconds)


def _report(soak: Soak, samples: list[tuple[float, int]], seconds: float) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    errors: Counter[str] = Counter()
    every: list[float] = []
    for index in sorted(soak.intervals):
        item = soak.intervals[index]
        start, end = index * soak.interval, (index + 1) * soak.interval
        rss = [m for t, m in samples if start <= t < end]
        rows.append(
            {
                "from_s": start,
                "answered": item.accepted + item.rejected,
                "accepted": item.accepted,
                "rejected": item.rejected,
                "latency_ms": {k: round(v, 2) for k, v in percentiles(item.latencies).items()},
                "errors": dict(item.errors),
                "server_rss_mib": round(max(rss) / 2**20, 1) if rss else None,
            }
        )
        errors.update(item.errors)
        every += item.latencies
    half = [(t, m) for t, m in samples if t >= seconds / 2]
    return {
        "seconds": seconds,
        "commands_answered": sum(r["answered"] for r in rows),
        "commands_accepted": sum(r["accepted"] for r in rows),
        "games_finished": soak.games_finished,
        "storms": soak.storms,
        "connections_dropped": soak.dropped,
        "reconnects": soak.reconnects,
        "errors": dict(errors),
        "latency_ms": {k: round(v, 2) for k, v in percentiles(every).items()},
        "intervals": rows,
        "rss_mib": {
            "first": round(samples[0][1] / 2**20, 1),
            "peak": round(max(m for _, m in samples) / 2**20, 1),
            "last": round(samples[-1][1] / 2**20, 1),
            "slope_second_half_mib_per_min": round(slope_mib_per_minute(half), 3),
            "slope_whole_run_mib_per_min": round(slope_mib_per_minute(samples), 3),
        },
    }


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    cli.add_argument("--minutes", type=float, default=10.0, help="length of the run (default 10)")
    cli.add_argument("--seconds", type=float, help="length of the run in seconds (overrides --minutes)")
    cli.add_argument("--interval", type=float, default=60.0, help="reporting interval in seconds")
    cli.add_argument("--games", type=int, default=12, help="games played at once (default 12)")
    cli.add_argument("--players", type=int, default=3)
    cli.add_argument("--spectators", type=int, default=3, help="spectators per game (default 3)")
    cli.add_argument("--placements", type=int, default=25, help="placements per bot and game")
    cli.add_argument("--pace", type=float, nargs=2, default=(0.02, 0.2), metavar=("MIN", "MAX"))
    cli.add_argument("--storm-every", type=float, default=20.0, help="seconds between reconnect storms")
    cli.add_argument("--storm-share", type=float, default=0.3, help="share of connections each storm drops")
    cli.add_argument(
        "--max-live-games", type=int, default=200, help="the server's cache of folded games (its setting)"
    )
    cli.add_argument("--sample-every", type=float, default=2.0, help="seconds between RSS samples")
    cli.add_argument("--seed", type=int, default=7)
    cli.add_argument("--out", type=Path, help="also write the figures to this JSON file")
    return cli


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    raise_nofile()
    env = {**SOAK_ENV, "ORCHESTRA_MAX_LIVE_GAMES": str(args.max_live_games)}
    with RedisServer() as redis_server, ServerProcess("ours", redis_server.url, env) as server:
        report = asyncio.run(run(args, server.url, server.pid))
        report["server_alive"] = server.process.poll() is None
        server.stop()
        report["log_problems"] = log_problems(server.log_path.read_text(errors="replace"))[:20]
    report["command"] = "python -m bench.soak " + " ".join(argv if argv is not None else sys.argv[1:])
    text = json.dumps(report, indent=2)
    if args.out is not None:
        args.out.write_text(text + "\n")
    print(text)
    failed = report["errors"] or report["log_problems"] or not report["server_alive"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
