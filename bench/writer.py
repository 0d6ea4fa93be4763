"""Writer: what the direct write of shared frames buys ours on the table workload (`bench load`).

The direct write (`server/compat/uvicorn.py`) is the server's one use of a dependency's private parts,
kept only while it buys more than 10%. This runs ours on the table workload with it
(`ORCHESTRA_WS_SHARED_FRAMES=true`, the default) and without it (every frame through ASGI), in pairs of
runs on one Redis, the order swapped from one pair to the next (these machines drift: whichever runs
second would otherwise be favoured), and reports the medians of the pairs' own ratios: throughput, server
CPU per command and p99 send -> every client of the table.

    python -m bench writer [--pairs 6] [--duration 10] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from bench.common import RedisServer, raise_nofile, ratio, say, write_result
from bench.load import TableConfig, brief, one_run

MODES = {"direct": {"ORCHESTRA_WS_SHARED_FRAMES": "true"}, "asgi": {"ORCHESTRA_WS_SHARED_FRAMES": "false"}}
GOAL = 0.10  # what the private path must buy to stay


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="CI size: 1 pair of 2 s runs, 4 tables")
    parser.add_argument("--pairs", type=int, default=6, help="pairs of runs (direct and ASGI, in turn first)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of each run")
    parser.add_argument("--tables", type=int, default=12)


def main(args: argparse.Namespace, argv: list[str]) -> int:
    raise_nofile()
    if args.quick:
        args.pairs, args.duration, args.tables = 1, 2.0, 4
    config = TableConfig(tables=args.tables, duration=args.duration)
    pairs: list[dict[str, Any]] = []
    with RedisServer() as redis:
        for index in range(args.pairs):
            pair: dict[str, Any] = {}
            for mode in MODES if index % 2 == 0 else reversed(MODES):
                config.tag = f"w{index}{mode[0]}"
                pair[mode] = one_run("ours", redis, config, env=MODES[mode])
                say(f"pair {index + 1} " + brief(mode, pair[mode]))
            pairs.append(pair)

    def median_ratio(pick: Any) -> float:
        return statistics.median(ratio(pick(p["direct"]), pick(p["asgi"])) for p in pairs)

    summary = {
        "throughput": median_ratio(lambda r: r["commands_per_s"]),
        "cpu_per_command": median_ratio(lambda r: r["cpu_us_per_command"]),
        "p99": median_ratio(lambda r: r["all_clients_ms"]["p99"]),
    }
    summary["buys_more_than_10_percent"] = (
        summary["throughput"] >= 1 + GOAL or summary["cpu_per_command"] <= 1 - GOAL
    )
    path = write_result("writer", {"quick": args.quick, "summary": summary, "pairs": pairs}, argv)
    print(
        f"writer: direct/ASGI throughput {summary['throughput']:.2f}x, CPU per command "
        f"{summary['cpu_per_command']:.2f}x, p99 {summary['p99']:.2f}x (medians of {len(pairs)} pairs); "
        f"wrote {path}"
    )
    return 0
