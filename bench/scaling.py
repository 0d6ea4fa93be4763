"""Scaling: throughput and server memory at 1, 10, 100 and 1,000 concurrent games (closed loop, ours and
minimal), and the per-command cost in a game of 10,000 events vs a new one.

The per-command cost is measured in-process: `domain.decide` alone, and the whole command path of the
service (`Games.handle` on the in-memory store: decide, envelope, hash, fold), with the live
frame's whole view or its view delta, each as the median over a few hundred commands on a long game
against the same on a fresh game.

`--view` sets what ours' clients ask for in live frames (`delta`, the default hello's; `whole` writes
`scaling_whole.json`): in a closed loop a single game grows by thousands of events in seconds, and its
whole view with it, so at 1 game `whole` measures mostly the view's bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import msgspec

from bench.common import RedisServer, raise_nofile, ratio, say, write_result
from bench.games import build_game, legal_placements, place
from bench.generator import VIEWS, LoadConfig, brief, run_against
from domain import decide


def command_cost(events: int, commands: int) -> dict[str, Any]:
    """Median microseconds per command (decide alone; whole service path) at `events` events."""
    service, game_id, records = build_game(events)
    pairs = legal_placements()
    live = asyncio.run(service.get(game_id))
    assert live is not None
    state = live.state
    decide_times: list[float] = []
    for index in range(commands):
        command = place(index % 3, events + index, pairs)
        started = time.perf_counter()
        decide(state, command)
        decide_times.append(time.perf_counter() - started)

    async def handle_all(offset: int, frame: str) -> list[float]:
        times: list[float] = []
        for index in range(commands):
            command = place(index % 3, offset + index, pairs)
            started = time.perf_counter()
            await service.handle(game_id, command)
            # What the server encodes once per version for its frames: the whole view, or the delta.
            _ = msgspec.json.encode(live.folded.encoded_view() if frame == "whole" else live.folded.delta())
            times.append(time.perf_counter() - started)
        return times

    handle_times = asyncio.run(handle_all(10 * events, "whole"))
    delta_times = asyncio.run(handle_all(20 * events + 10 * commands, "delta"))
    return {
        "events": len(records),
        "decide_us_median": statistics.median(decide_times) * 1e6,
        "command_path_us_median": statistics.median(handle_times) * 1e6,
        "command_path_delta_us_median": statistics.median(delta_times) * 1e6,
        "view_json_bytes": len(live.view_json),
        "state_json_bytes": len(msgspec.json.encode(live.state)),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="CI size: 1 and 10 games, 1 s each")
    parser.add_argument("--games", default="1,10,100,1000", help="comma-separated game counts")
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--long-game", type=int, default=10_000, help="events of the long game")
    parser.add_argument(
        "--view", choices=list(VIEWS), default="delta", help="what ours' clients ask for in live frames"
    )


def main(args: argparse.Namespace, argv: list[str]) -> int:
    raise_nofile(20_000)
    counts = [1, 10] if args.quick else [int(n) for n in args.games.split(",")]
    duration = 1.0 if args.quick else args.duration
    long_events = 1_000 if args.quick else args.long_game
    rows: list[dict[str, Any]] = []
    with RedisServer() as redis:
        for games in counts:
            config = LoadConfig(games=games, players=3, spectators=1, mode="closed", duration=duration)
            # The minimal pipeline's frames carry no view whatever its clients ask.
            ours = LoadConfig(**{**config.__dict__, "view": VIEWS[args.view]})
            row: dict[str, Any] = {"games": games}
            for kind in ("minimal", "ours"):
                result = run_against(kind, redis, config if kind == "minimal" else ours)
                say(f"{games} games " + brief(result))
                row[kind] = {
                    "commands_per_s": result["commands_per_s"],
                    "server_rss_mib_end": result["server"].get("rss_mib_end"),
                    "server_core_share": result["server"].get("core_share"),
                    "ack_p99_ms": result["ack_ms"]["p99"],
                    "errors": result["errors"],
                    "rejected": result["rejected"],
                    "generator_core_share": result["generator"]["core_share"],
                }
            row["ratio_commands_per_s"] = ratio(
                row["ours"]["commands_per_s"], row["minimal"]["commands_per_s"]
            )
            rows.append(row)
    fresh = command_cost(1, 300)
    long = command_cost(long_events, 300)
    decide_ratio = ratio(long["decide_us_median"], fresh["decide_us_median"])
    path_ratio = ratio(long["command_path_us_median"], fresh["command_path_us_median"])
    delta_path_ratio = ratio(long["command_path_delta_us_median"], fresh["command_path_delta_us_median"])
    say(
        f"decide: new {fresh['decide_us_median']:.1f} us, "
        f"{long_events} events {long['decide_us_median']:.1f} us; "
        f"command path {fresh['command_path_us_median']:.1f} vs {long['command_path_us_median']:.1f} us, "
        f"with a delta {fresh['command_path_delta_us_median']:.1f} vs "
        f"{long['command_path_delta_us_median']:.1f} us"
    )
    summary = {
        "commands_per_s_by_games": {str(r["games"]): r["ours"]["commands_per_s"] for r in rows},
        "ratio_to_minimal_by_games": {str(r["games"]): r["ratio_commands_per_s"] for r in rows},
        "server_rss_mib_by_games": {str(r["games"]): r["ours"]["server_rss_mib_end"] for r in rows},
        "decide_ratio_long_to_new": decide_ratio,
        "command_path_ratio_long_to_new": path_ratio,
        "command_path_delta_ratio_long_to_new": delta_path_ratio,
        "ours_view": args.view,
    }
    path = write_result(
        "scaling" if args.view == "delta" else f"scaling_{args.view}",
        {
            "quick": args.quick,
            "summary": summary,
            "games": rows,
            "command_cost": {"new": fresh, "long": long},
        },
        argv,
    )
    print(
        f"scaling: {summary['commands_per_s_by_games']} cmd/s; long/new decide {decide_ratio:.1f}x, "
        f"command path {path_ratio:.1f}x, with a delta {delta_path_ratio:.1f}x; wrote {path}"
    )
    return 0
