"""Ours with a setting on and off, on the table workload (`bench load`), in alternating pairs of runs.

What a mechanism buys is measured here, not assumed: each pair runs ours once per mode on one Redis, one
after the other, the order swapped from one pair to the next (these machines drift: whichever ran second
would otherwise be favoured), and the medians of the pairs' own ratios (on/off) are reported: throughput,
server CPU per command, and p99 send -> every client of the table. A mechanism stays while it buys more
than 10%.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from bench.common import RedisServer, raise_nofile, ratio, say, write_result
from bench.load import TableConfig, brief, one_run

GOAL = 0.10  # what a mechanism must buy to stay


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="CI size: 1 pair of 2 s runs, 4 tables")
    parser.add_argument("--pairs", type=int, default=6, help="pairs of runs (on and off, in turn first)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of each run")
    parser.add_argument("--tables", type=int, default=12)


def run_pairs(
    name: str, modes: dict[str, dict[str, str]], args: argparse.Namespace, argv: Sequence[str]
) -> dict[str, Any]:
    """Run the two `modes` (on, then off: the environment of each) in pairs; write and return the
    summary."""
    raise_nofile()
    if args.quick:
        args.pairs, args.duration, args.tables = 1, 2.0, 4
    on, off = modes
    config = TableConfig(tables=args.tables, duration=args.duration)
    pairs: list[dict[str, Any]] = []
    with RedisServer() as redis:
        for index in range(args.pairs):
            pair: dict[str, Any] = {}
            for mode in (on, off) if index % 2 == 0 else (off, on):
                config.tag = f"{name[0]}{index}{mode[0]}"
                pair[mode] = one_run("ours", redis, config, env=modes[mode])
                say(f"pair {index + 1} " + brief(mode, pair[mode]))
            pairs.append(pair)

    def median_ratio(pick: Callable[[dict[str, Any]], float]) -> float:
        return statistics.median(ratio(pick(p[on]), pick(p[off])) for p in pairs)

    summary = {
        "throughput": median_ratio(lambda r: r["commands_per_s"]),
        "cpu_per_command": median_ratio(lambda r: r["cpu_us_per_command"]),
        "p99": median_ratio(lambda r: r["all_clients_ms"]["p99"]),
    }
    summary["buys_more_than_10_percent"] = (
        summary["throughput"] >= 1 + GOAL or summary["cpu_per_command"] <= 1 - GOAL
    )
    path = write_result(name, {"quick": args.quick, "summary": summary, "pairs": pairs}, argv)
    print(
        f"{name}: {on}/{off} throughput {summary['throughput']:.2f}x, CPU per command "
        f"{summary['cpu_per_command']:.2f}x, p99 {summary['p99']:.2f}x (medians of {len(pairs)} pairs); "
        f"wrote {path}"
    )
    return summary
