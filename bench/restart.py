"""Hello storms and restarts: every client welcomed, and every client back after a SIGTERM restart.

1. Storm: `--storm` spectators of one game say hello at the same moment; every one must be welcomed
   (the Redis pool waits for a free connection instead of refusing past its size).
2. Restart: `--clients` clients of the Python client (two players and the rest spectators, over
   `--games` games) follow their games; the server gets SIGTERM (it closes every connection with 1012)
   and a new one starts on the same port and Redis. Measured: the time from the SIGTERM to the last
   client's welcome on the new server (the goal: every client back within 30 s). Then every game plays
   on, and every client must hold exactly the game's envelopes 1..N, none missed and none twice.

    python -m bench restart [--quick] [--storm 2000] [--clients 2000] [--games 20]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import msgspec

from bench.common import RedisServer, ServerProcess, free_port, raise_nofile, say, write_result
from bench.games import legal_placements
from orchestra_client import GameClient, create_game, get_events

GOAL_SECONDS = 30.0


async def _storm(url: str, count: int) -> dict[str, Any]:
    """`count` spectators of one new game say hello at once; how many were welcomed, and how fast."""
    game = await create_game(url, ["Ada", "Ben"])
    started = time.perf_counter()
    results = await asyncio.gather(
        *(GameClient.connect(url, game["game_id"], reconnect=False, timeout=60) for _ in range(count)),
        return_exceptions=True,
    )
    elapsed = time.perf_counter() - started
    clients = [r for r in results if isinstance(r, GameClient)]
    refused = [r for r in results if not isinstance(r, GameClient)]
    await asyncio.gather(*(c.close() for c in clients))
    return {
        "spectators": count,
        "welcomed": len(clients),
        "refused": len(refused),
        "first_refusal": repr(refused[0]) if refused else None,
        "seconds": elapsed,
    }


class Table:
    """One game: its two players' clients and its spectators'."""

    def __init__(self, game_id: str, players: list[GameClient], spectators: list[GameClient]) -> None:
        self.game_id, self.players, self.spectators = game_id, players, spectators
        self.placed = 0

    @property
    def clients(self) -> list[GameClient]:
        return [*self.players, *self.spectators]

    async def play(self, moves: int) -> None:
        """`moves` placements, the players in turn, each awaited."""
        pairs = [(msgspec.to_builtins(token), space) for token, space in legal_placements()]
        for _ in range(moves):
            player = self.players[self.placed % len(self.players)]
            token, space = pairs[(self.placed * 7 + self.placed % 2) % len(pairs)]
            answer = await player.place(token, space, id=f"m{self.placed}")
            if answer["type"] != "accepted":
                raise RuntimeError(f"{self.game_id}: placement {self.placed} refused: {answer}")
            self.placed += 1


async def _open_tables(url: str, clients: int, games: int) -> list[Table]:
    tables: list[Table] = []
    per_game = max(3, clients // games)
    for _ in range(games):
        game = await create_game(url, ["Ada", "Ben"])
        game_id = game["game_id"]
        players = [await GameClient.connect(url, game_id, seat["token"]) for seat in game["seats"]]
        spectators = await asyncio.gather(
            *(GameClient.connect(url, game_id, timeout=60) for _ in range(per_game - len(players)))
        )
        tables.append(Table(game_id, players, list(spectators)))
    return tables


async def _back(clients: list[GameClient], deadline: float) -> float | None:
    """Wait until every client has resumed once; the time it took, None past `deadline`."""
    started = time.monotonic()
    while time.monotonic() < started + deadline:
        if all(c.reconnects >= 1 for c in clients):
            return time.monotonic() - started
        if any(c.closed_with is not None and c.closed_with[0] == 1008 for c in clients):
            return None
        await asyncio.sleep(0.05)
    return None


def _check_complete(table: Table, stored: list[dict[str, Any]]) -> list[str]:
    """What each client of `table` missed or got twice, against the stream."""
    expected = [e["version"] for e in stored]
    problems = []
    for index, client in enumerate(table.clients):
        got = [e["version"] for e in client.envelopes]
        who = f"{table.game_id} client {index}"
        if not got or got != expected[len(expected) - len(got) :]:
            problems.append(f"{who}: versions {got[:3]}..{got[-3:]} of {len(expected)}")
        elif client.version != expected[-1]:
            problems.append(f"{who}: at version {client.version}, not {expected[-1]}")
    return problems


async def _restart(redis_url: str, clients: int, games: int) -> dict[str, Any]:
    port = free_port()
    first = ServerProcess("ours", redis_url, args=["--port", str(port)])
    url = first.url
    tables = await _open_tables(url, clients, games)
    everyone = [c for t in tables for c in t.clients]
    second: ServerProcess | None = None
    try:
        await asyncio.gather(*(t.play(3) for t in tables))
        await asyncio.sleep(0.5)  # every live frame delivered
        stopped = time.monotonic()
        await asyncio.to_thread(first.terminate)
        stop_seconds = time.monotonic() - stopped
        second = await asyncio.to_thread(ServerProcess, "ours", redis_url, None, ["--port", str(port)])
        up_seconds = time.monotonic() - stopped
        waited = await _back(everyone, GOAL_SECONDS * 2)
        back_seconds = None if waited is None else up_seconds + waited
        await asyncio.gather(*(t.play(3) for t in tables))
        await asyncio.sleep(1.0)
        problems: list[str] = []
        for table in tables:
            problems += _check_complete(table, await get_events(url, table.game_id))
        return {
            "clients": len(everyone),
            "games": len(tables),
            "stop_seconds": stop_seconds,
            "new_server_up_seconds": up_seconds,
            "all_back_seconds": back_seconds,
            "not_back": sum(1 for c in everyone if c.reconnects < 1),
            "incomplete": len(problems),
            "first_problems": problems[:5],
            "goal_seconds": GOAL_SECONDS,
        }
    finally:
        await asyncio.gather(*(c.close() for c in everyone), return_exceptions=True)
        if second is not None:
            second.stop()
        first.stop()


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    raise_nofile(4 * max(args.storm, args.clients) + 1_000)
    with RedisServer() as redis:
        server = ServerProcess("ours", redis.url)
        try:
            storm = await _storm(server.url, args.storm)
        finally:
            server.stop()
        say(f"storm: {storm['welcomed']} of {storm['spectators']} welcomed in {storm['seconds']:.1f} s")
        restart = await _restart(redis.url, args.clients, args.games)
        say(
            f"restart: {restart['clients'] - restart['not_back']} of {restart['clients']} clients back in "
            f"{restart['all_back_seconds']} s; {restart['incomplete']} incomplete"
        )
    return {"storm": storm, "restart": restart}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="a small run for CI")
    parser.add_argument("--storm", type=int, default=None, help="spectators saying hello at once")
    parser.add_argument("--clients", type=int, default=None, help="clients across the restart")
    parser.add_argument("--games", type=int, default=None, help="games they follow")


def main(args: argparse.Namespace, argv: list[str]) -> int:
    args.storm = args.storm or (300 if args.quick else 2_000)
    args.clients = args.clients or (200 if args.quick else 2_000)
    args.games = args.games or (5 if args.quick else 20)
    result = asyncio.run(_main(args))
    storm, restart = result["storm"], result["restart"]
    back = restart["all_back_seconds"]
    summary = {
        "all_welcomed": storm["refused"] == 0,
        "all_back": restart["not_back"] == 0,
        "nothing_missed": restart["incomplete"] == 0,
        "all_back_seconds": back,
        "goal_met": back is not None and back <= GOAL_SECONDS,
    }
    write_result("restart", {"quick": args.quick, "summary": summary, **result}, argv)
    return 0 if all(summary[k] for k in ("all_welcomed", "all_back", "nothing_missed", "goal_met")) else 1
